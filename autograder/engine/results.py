"""The report step: Gradescope-format results.json and a feedback.md the learner can act on.

Feedback holds part verdicts, the graders' failure messages and notes about the notebook: never
hidden test source, tracebacks of grader code, or paths of the grading machine.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from autograder.paths import REPO

MAX_FAILURES_SHOWN = 6
MAX_MESSAGE = 1200
ENGINE_VERSION = "2"


def _clean(text: str) -> str:
    """Trim a message and hide the grading machine's paths."""
    text = text.replace(str(REPO), "<course>")
    text = re.sub(r"/(?:tmp|work|root|home|ipt)/[^\s'\"]*", "<path>", text)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + " ..."


def part_output(part) -> str:
    if part.total == 0:
        return "This part could not be checked (a grading problem, not yours; your instructor can see it)."
    lines = [f"{part.passed} of {part.total} checks pass."]
    for message in part.failures[:MAX_FAILURES_SHOWN]:
        lines.append("- " + _clean(message).replace("\n", "\n  "))
    if len(part.failures) > MAX_FAILURES_SHOWN:
        lines.append(f"- ... and {len(part.failures) - MAX_FAILURES_SHOWN} more kinds of failure")
    return "\n".join(lines)


def notes_output(result) -> str:
    lines = []
    if result.error:
        lines.append("Grading ran into an internal problem; your instructor can see the details. "
                     "Parts that could not be checked score zero for now.")
    lines += ["- " + _clean(n).replace("\n", "\n  ") for n in result.notes]
    return "\n".join(lines)


def to_gradescope(result, info) -> dict:
    tests = [{"name": f"Part {i} · {p.title}", "number": str(i), "score": p.score, "max_score": p.points,
              "status": "passed" if p.score >= p.points else "failed", "output": part_output(p),
              "output_format": "md", "visibility": "visible"} for i, p in enumerate(result.parts, 1)]
    return {
        "score": result.score,
        "max_score": result.max_score,
        "execution_time": result.seconds,
        "output": notes_output(result) or "Graded.",
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "lab": result.lab,
            "sandbox": result.level,
            "submission_sha256": result.submission.sha256,
            "graders_sha256": result.fingerprint,
            "engine_version": ENGINE_VERSION,
            "parts": {p.id: {"score": p.score, "max_score": p.points, "passed": p.passed, "total": p.total} for p in result.parts},
            "measurements": {m["name"]: [m["value"], m["unit"]] for m in result.measurements},
            # which checks hit a grading-side problem, by test id only: the details (grader tracebacks,
            # hidden text) go to internal.json, which only instructors see
            "internal_errors": (["grading error (see internal.json)"] if result.error else [])
                               + [e.split(": ", 1)[0] for p in result.parts for e in p.internal],
        },
    }


def to_markdown(result, info) -> str:
    out = [f"# {info.lab} · {info.title}: {result.score:g} / {result.max_score:g}", ""]
    notes = notes_output(result)
    if notes:
        out += ["## About your notebook", "", notes, ""]
    for i, p in enumerate(result.parts, 1):
        mark = "✓" if p.score >= p.points else ("◐" if p.score > 0 else "✗")
        out += [f"## {mark} Part {i} · {p.title}: {p.score:g} / {p.points:g}", "", part_output(p), ""]
    return "\n".join(out)


def write(result, info, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(to_gradescope(result, info), indent=2) + "\n")
    (out_dir / "feedback.md").write_text(to_markdown(result, info))
    # for instructors only (class reports): which hidden test passed, by name, and grading-side problems
    (out_dir / "outcomes.json").write_text(json.dumps(result.tests, indent=1) + "\n")
    internal = ([result.error] if result.error else []) + [e for p in result.parts for e in p.internal]
    (out_dir / "internal.json").write_text(json.dumps(internal, indent=1) + "\n")
