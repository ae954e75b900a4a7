"""`check("part")`: run a part's public tests against the learner's lab code, assembled as the graders do."""
from __future__ import annotations

import os
import sys

from labkit.labs import find_lab
from labkit.runner import PartResult, run_part

MAX_SHOWN = 8


class UnknownPart(ValueError):
    """check() was given a part the lab does not have."""


class PartNotPassing(AssertionError):
    """Raised only under nbgrader (Validate, autograde): a part whose public tests do not all pass."""

    def _render_traceback_(self):  # IPython shows this one line instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def format_report(result: PartResult) -> str:
    """'views: 5/6 public tests pass' and one line per failing test."""
    if result.error:
        return f"{result.part}: {result.error}"
    head = f"{result.part}: {result.passed}/{result.total} public tests pass"
    failures = result.failures
    if not failures:
        return head + (" ✓  (the graders test more than these)" if result.total else "")
    if not result.passed and all(f.kind == "not_implemented" for f in failures) and not result.notes:
        head += " (not implemented yet: replace `raise NotImplementedError()` with your code)"
        return head
    lines = [head] + [f"  ! {note}" for note in result.notes]
    denied = [f for f in failures if f.kind == "denied"]
    if denied:   # one explanation, then the tests it sank
        lines.append(f"  ! {denied[0].message}")
        lines.append(f"  ✗ {', '.join(f.test for f in denied[:MAX_SHOWN])}" + (" ..." if len(denied) > MAX_SHOWN else ""))
    missing = [f for f in failures if f.kind == "missing"]
    if missing and result.notes:   # names a failed cell would have defined: the note above says why
        lines.append(f"  ✗ {', '.join(f.test for f in missing[:MAX_SHOWN])}: a name they need was not defined "
                     "(see the cell error above)")
    rest = [f for f in failures if f not in denied and not (result.notes and f in missing)]
    for failure in rest[:MAX_SHOWN]:
        message = failure.message.replace("\n", "\n      ")
        lines.append(f"  ✗ {failure.test}: {message}")
    if len(rest) > MAX_SHOWN:
        lines.append(f"  ... and {len(rest) - MAX_SHOWN} more")
    return "\n".join(lines)


def check(part: str, lab=None, namespace: dict | None = None) -> None:
    """Run the public tests of `part` and print a short report; test failures never raise (except under
    nbgrader, where a part that does not pass fails its cell, so that Validate tells the truth)."""
    from labkit.learner import denied_modules, learner_module
    from labkit.notebook import NotebookError

    labdir = find_lab(lab)
    parts = [p.id for p in labdir.parts()]
    if part not in parts:
        raise UnknownPart(f"{labdir.id} has no part {part!r}; its parts are: {', '.join(parts) or 'none'}")
    denied = denied_modules(labdir.id)
    if namespace is not None:
        result = run_part(labdir, part, namespace, denied=denied)
    else:
        try:
            module, problems = learner_module(labdir)
        except NotebookError as exc:
            result = PartResult(part, error=f"cannot read {labdir.notebook.name}: {exc}")
        else:
            result = run_part(labdir, part, module.__dict__, denied=denied)
            result.notes = [p for p in problems if "not attempted" not in p]
    print(format_report(result))
    if os.environ.get("NBGRADER_EXECUTION") and result.status != "passing":
        print(f"(nbgrader: part {part!r} does not pass its public tests yet)", file=sys.stdout)
        raise PartNotPassing(f"{part}: {result.passed}/{result.total} public tests pass")
