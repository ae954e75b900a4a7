"""`check("part")`: run a part's public tests against the notebook's current definitions, in this kernel."""
from __future__ import annotations

import sys

from labkit.labs import find_lab
from labkit.runner import PartResult, run_part

MAX_SHOWN = 8


class UnknownPart(ValueError):
    """check() was given a part the lab does not have."""


def format_report(result: PartResult) -> str:
    """'views: 5/6 public tests pass' and one line per failing test."""
    if result.error:
        return f"{result.part}: {result.error}"
    head = f"{result.part}: {result.passed}/{result.total} public tests pass"
    failures = result.failures
    if not failures:
        return head + (" ✓  (the graders test more than these)" if result.total else "")
    if not result.passed and all(f.kind == "not_implemented" for f in failures):
        head += " (not implemented yet: replace `raise NotImplementedError()` with your code)"
        return head
    lines = [head]
    for failure in failures[:MAX_SHOWN]:
        message = failure.message.replace("\n", "\n      ")
        lines.append(f"  ✗ {failure.test}: {message}")
    if len(failures) > MAX_SHOWN:
        lines.append(f"  ... and {len(failures) - MAX_SHOWN} more")
    return "\n".join(lines)


def check(part: str, lab=None, namespace: dict | None = None) -> None:
    """Run the public tests of `part` and print a short report; test failures never raise."""
    labdir = find_lab(lab)
    parts = [p.id for p in labdir.parts()]
    if part not in parts:
        raise UnknownPart(f"{labdir.id} has no part {part!r}; its parts are: {', '.join(parts) or 'none'}")
    if namespace is None:
        namespace = sys.modules["__main__"].__dict__  # the notebook's globals in a Jupyter kernel
    print(format_report(run_part(labdir, part, namespace)))
