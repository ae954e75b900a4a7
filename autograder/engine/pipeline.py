"""Grading one submission: parse -> extract -> run -> score -> report.

Each step is a small function; `grade()` chains them and never raises: whatever happens, the
output folder gets a valid results.json and a feedback.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from labkit.notebook import Assembly, LabInfo, NotebookError, assemble, lab_info, read_notebook

from autograder.engine import p0fork, results, sandbox
from autograder.paths import AUTOGRADER, REPO, LabPaths, build_dir, lab_paths, project_env

GRADER_INI = AUTOGRADER / "engine" / "grader.ini"


@dataclass(frozen=True)
class Options:
    sandbox: str = "auto"
    stop_at_first_failure: bool = False  # mutant runs: any lost point is enough
    parts: tuple[str, ...] = ()  # only these parts' graders (authoring runs); empty = every part
    seed: int | None = None  # the grading seed; None = drawn from the submission (authoring: another draw)


@dataclass
class Submission:
    path: Path
    sha256: str = ""
    notebook: object = None
    manifest: dict = field(default_factory=dict)
    problem: str | None = None  # why it could not be read, in the learner's words


@dataclass
class PartResult:
    id: str
    title: str
    points: float
    score: float
    passed: int
    total: int
    failures: list[str]
    internal: list[str]


@dataclass
class GradeResult:
    lab: str
    submission: Submission
    parts: list[PartResult]
    notes: list[str]       # about the notebook as a whole (missing cells, cells that raised)
    level: str | None
    seconds: float
    error: str | None = None  # grading-side failure, for the instructor
    tests: list[dict] = field(default_factory=list)  # every hidden test's record (instructors only)
    measurements: list[dict] = field(default_factory=list)  # informational figures measured by graders
    fingerprint: str = ""

    @property
    def score(self) -> float:
        return round(sum(p.score for p in self.parts), 2)

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts)


# -- parse ---------------------------------------------------------------------------------------
def parse(path: Path | None) -> Submission:
    sub = Submission(Path(path) if path else Path("-"))
    if path is None:
        sub.problem = "no notebook was found in the submission: upload your lab's .ipynb file"
        return sub
    try:
        if sub.path.suffix == ".zip":
            from labkit.submission import read_submission
            data, sub.manifest = read_submission(sub.path)
        else:
            data = sub.path.read_bytes()
        sub.sha256 = hashlib.sha256(data).hexdigest()
        sub.notebook = read_notebook(data)
    except NotebookError as exc:
        sub.problem = str(exc)
    except (OSError, ValueError) as exc:
        sub.problem = f"the submission could not be read: {exc}"
    return sub


# -- extract -------------------------------------------------------------------------------------
def extract(sub: Submission, release_nb) -> Assembly:
    if sub.notebook is None:
        return assemble(release_nb, {"cells": []})
    return assemble(release_nb, sub.notebook)


# -- run -----------------------------------------------------------------------------------------
def lab_settings(paths: LabPaths) -> dict:
    file = paths.graders / "lab.toml"
    return tomllib.loads(file.read_text()) if file.exists() else {}


def grading_seed(cells) -> int:
    """The seed of the graders' generated (hypothesis) cases: drawn from the learner's code, so the same
    submission always meets the same cases (a regrade gives the same score) while another submission
    meets others, and a table of answers harvested from earlier feedback does not carry over.
    (Authoring: `python -m autograder try labNN --seed N` grades on another draw.)"""
    return int(hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()[:12], 16)


def warm_source(paths: LabPaths) -> str:
    """The scenarios' source where they define warm_p1() (worker._warm runs it in the template), else ""."""
    source = paths.scenarios.read_text() if paths.scenarios.exists() else ""
    return source if re.search(r"^def warm_p1\(", source, re.MULTILINE) else ""


def run_graders(paths: LabPaths, assembly: Assembly, options: Options, workdir: Path) -> tuple[list[dict], dict, str | None]:
    """Run the hidden graders in a trusted pytest process; returns (test records, session record, error).
    The session record carries the graders' measurements."""
    settings = lab_settings(paths)
    outcomes = workdir / "outcomes.jsonl"
    job = {
        "lab": paths.lab, "scenarios": {paths.lab: paths.scenarios.read_text()}, "cells": assembly.cells, "outcomes": str(outcomes), "sandbox": options.sandbox,
        "deny_modules": settings.get("deny_modules", []), "preload": settings.get("preload", []),
        "loopback": bool(settings.get("loopback", False)), "shm": bool(settings.get("shm", False)),
        "warm": warm_source(paths), "call_timeout": settings.get("call_timeout", 10),
        "module_budget": settings.get("module_budget", 120), "load_timeout": settings.get("load_timeout", 30),
        "limits": {k: settings[k] for k in ("memory_mb", "cpu_seconds", "processes", "file_mb", "open_files", "tmp_mb") if k in settings},
    }
    job["seed"] = grading_seed(assembly.cells) if options.seed is None else options.seed
    (workdir / "job.json").write_text(json.dumps(job))
    targets = [str(paths.graders / f"test_{part}.py") for part in options.parts] or [str(paths.graders)]
    cmd = [sys.executable, "-m", "pytest", *targets, "-p", "autograder.engine.plugin",
           f"--ipt-job={workdir / 'job.json'}", "-c", str(GRADER_INI), "--rootdir", str(paths.graders),
           "-q", "--no-header", "--assert=plain", "-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore",
           "-p", "no:logging",  # log capture around every test phase: 0.4 s of a lab02 grading, and no grader reads it
           # Python's own traceback for a failed test's report: pytest's default style parses the source of
           # every frame, 0.14 s per failure here, and learners never see it (their message is the exception's)
           "--tb=native"]
    cmd.append(f"--hypothesis-seed={job['seed']}")
    if options.stop_at_first_failure:
        cmd.append("-x")
    modules = len(options.parts) or len(list(paths.graders.glob("test_*.py")))
    limit = modules * (job["module_budget"] + 30) + 120
    env = {**os.environ, **project_env(), "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "labs")]),
           "PYTHONHASHSEED": "0"}
    error = None
    server = p0fork.server_for(env)
    if server is not None:  # the same pytest run, forked from a process that has imported torch & co. already
        log = workdir / "pytest.log"
        try:
            preload = (*job["preload"], *settings.get("grader_preload", []))
            template = {k: job[k] for k in sandbox.SPEC_FIELDS} if options.sandbox in ("auto", "namespaces") and os.environ.get("IPT_TEMPLATE", "1") != "0" else None
            referee = settings.get("referee_roles") if template else None
            code = server.run(cmd[3:], str(workdir), str(log), limit, env, preload, template, referee)
        except OSError:
            server = None
        else:
            if code is None:
                error = f"the graders did not finish within {limit} s"
            elif code not in (0, 1):
                output = log.read_text(errors="replace") if log.exists() else ""
                error = f"pytest exited with status {code}:\n{output[-4000:]}"
    if server is None:
        try:
            proc = subprocess.run(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=limit)
            if proc.returncode not in (0, 1):
                error = f"pytest exited with status {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}"
        except subprocess.TimeoutExpired:
            error = f"the graders did not finish within {limit} s"
    records = [json.loads(line) for line in outcomes.read_text().splitlines()] if outcomes.exists() else []
    tests = [r for r in records if r.get("kind") == "test"]
    session = next((r for r in records if r.get("kind") == "session"), {})
    session["measurements"] = [r for r in records if r.get("kind") == "measurement"]
    return tests, session, error


def load_note(error: dict) -> str:
    """A note about a cell that failed while the notebook was loaded."""
    if error["type"] in ("Timeout", "Crash"):
        return f"cell {error['cell']!r}: {error['message']}"
    text = f"cell {error['cell']!r} raised {error['type']}: {error['message']}"
    return text + (f"\n{error['traceback']}" if error.get("traceback") else "")


# -- score ---------------------------------------------------------------------------------------
def score(info: LabInfo, tests: list[dict]) -> list[PartResult]:
    parts = []
    for part in info.parts:
        mine = [t for t in tests if t["part"] == part.id]
        total = sum(t["weight"] for t in mine)
        passed = sum(t["weight"] for t in mine if t["outcome"] == "passed")
        points = round(part.points * passed / total, 2) if total else 0.0
        failures = list(dict.fromkeys(t["message"] for t in mine if t["outcome"] != "passed"))
        internal = [f"{t['id']}: {t.get('detail') or t['message']}" for t in mine if t.get("internal")]
        if not mine:
            internal.append(f"no hidden test ran for part {part.id!r}")
        parts.append(PartResult(part.id, part.title, part.points, points,
                                sum(1 for t in mine if t["outcome"] == "passed"), len(mine), failures, internal))
    return parts


def fingerprint(paths: LabPaths) -> str:
    """Changes whenever anything that decides a score changes: graders, scenarios, release, engine."""
    digest = hashlib.sha256(results.ENGINE_VERSION.encode())
    # The proof's own lists (mutants, equivalents, catalogue, attempts) decide no score: triaging a survivor
    # must not discard a long mutation run's cache.
    proof = {"mutants.toml", "equivalents.toml", "catalogue.toml", "adversarial.toml"}
    tomls = [f for f in sorted(paths.graders.glob("*.toml")) if f.name not in proof]
    files = sorted(paths.graders.rglob("*.py")) + tomls + [paths.scenarios, paths.release_notebook]
    for file in files:
        if file.exists():
            digest.update(file.name.encode() + file.read_bytes())
    return digest.hexdigest()


# -- the whole pipeline --------------------------------------------------------------------------
def grade(lab: str | LabPaths, path: Path | None, out_dir: Path, options: Options | None = None) -> GradeResult:
    options = options or Options()
    started = time.monotonic()
    paths = lab_paths(lab)
    release_nb = read_notebook(paths.release_notebook)
    info = lab_info(release_nb)
    sub = parse(path)
    notes, level, error, parts, tests, measurements = [], None, None, [], [], []
    try:
        if sub.problem:
            notes.append(sub.problem)
            parts = score(info, [])
            for p in parts:
                p.internal.clear()
        else:
            if options.sandbox != "auto":  # a level this host cannot run is a setup fault, said once
                sandbox.resolve_level(options.sandbox)
            assembly = extract(sub, release_nb)
            notes += assembly.problems
            with tempfile.TemporaryDirectory(dir=build_dir("grading")) as tmp:
                tests, session, error = run_graders(paths, assembly, options, Path(tmp))
            level, measurements = session.get("level"), session["measurements"]
            notes += [load_note(e) for e in session.get("load_errors", [])]
            parts = score(info, tests)
    except Exception as exc:  # noqa: BLE001 - an internal fault still yields a valid results.json
        error = f"{type(exc).__name__}: {exc}"
        parts = parts or score(info, [])
    result = GradeResult(paths.lab, sub, parts, notes, level, round(time.monotonic() - started, 2), error,
                         tests, measurements, fingerprint(paths))
    results.write(result, info, Path(out_dir))
    return result
