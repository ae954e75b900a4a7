"""Untouched stubs: which of the learner's entry points still raise the release's bare NotImplementedError().

A lab whose tests start expensive work around each call of the learner's code (lab09's and lab10's worlds: W
processes, a gloo rendezvous, a referee rank) asks once per test module, through a scenario that calls every
entry point outside that work (in a forked child, so nothing of it stays in the worker), and skips the work whose
verdict such a stub settles. P0 believes the answer only to the learner's loss: a P1 that claims a stub loses the
points of that work, exactly as a stub does. Only a message-less NotImplementedError counts, the release's own;
a learner's `NotImplementedError("needs a process group")` may hold outside the work only, so its work is done.
"""
from __future__ import annotations

import weakref

_answers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # student -> {scenario: its answer}


def stub_error(student, scenario: str, name: str) -> dict | None:
    """The bare NotImplementedError() that entry point `name` raised in `scenario`'s answer ({name: error dict
    or None}, asked once per student), or None."""
    asked = _answers.setdefault(student, {})
    if scenario not in asked:
        try:
            answer = student.run(scenario)
        except Exception:  # noqa: BLE001 - a probe that failed proves nothing: the work is done
            answer = {}
        asked[scenario] = answer if isinstance(answer, dict) else {}
    err = asked[scenario].get(name)
    return err if isinstance(err, dict) and err.get("error") == "NotImplementedError" and not err.get("message") else None
