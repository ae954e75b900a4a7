"""pytest plugin for P0: the `student` fixture, deterministic hypothesis, and outcome records.

Loaded by the pipeline as `pytest -p autograder.engine.plugin --ipt-job JOB.json`. Each finished
test appends one JSON line to the job's outcomes file, so a run cut short still leaves a record.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from autograder.engine import sandbox
from autograder.engine.student import GraderError, Student, StudentError

_job: dict = {}
_SETUP = pytest.StashKey[float]()
_session = {"level": None, "load_errors": None, "output": [], "skipped": {}, "zygote": None}


def _zygote(spec: sandbox.SandboxSpec):
    """One zygote per grading run where the sandbox is namespaces (forks are cheap, imports are not)."""
    if _session["zygote"] is None and _job.get("zygote", True) and sandbox.resolve_level(spec.level) == "namespaces":
        try:
            _session["zygote"] = sandbox.Zygote(dataclasses.replace(spec, level="namespaces"))
        except OSError:
            _session["zygote"] = False
    return _session["zygote"] or None


def pytest_addoption(parser):
    parser.addoption("--ipt-job", help="grading job description (JSON file)")


def pytest_configure(config):
    config.addinivalue_line("markers", "weight(w): weight of this test within its part (default 1)")
    path = config.getoption("--ipt-job")
    if path:
        _job.update(json.loads(Path(path).read_text()))
        sandbox.become_subreaper()
    try:
        from hypothesis import HealthCheck, Phase, settings
    except ImportError:
        return
    # seeded per submission by the pipeline (--hypothesis-seed), and no shrinking: a failing submission
    # costs no more time than a passing one
    settings.register_profile("ipt-grading", derandomize=False, database=None, deadline=None, print_blob=False,
                              report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
                              phases=[Phase.explicit, Phase.generate])
    settings.load_profile("ipt-grading")
    fix_hypothesis_constants()


def fix_hypothesis_constants() -> bool:
    """Make a seed draw the same cases in every process. hypothesis takes about 1 value in 20 from a pool of
    constants it reads from the source of every local module in sys.modules, so the cases of one seed would
    depend on what else the process had imported: another lab's graders in a batch, the modules of other parts,
    whether the graders run from a checkout (local) or an installed package (not local). Graders draw from
    hypothesis's own constants only (0, ±1, the float edges, ...), the same everywhere. False where this
    hypothesis has no such pool (then nothing needs fixing, or the pinned version moved: a unit test says)."""
    try:
        from hypothesis.internal.conjecture import providers
        empty = type(providers._local_constants)()
    except (ImportError, AttributeError, TypeError):
        return False
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    return True


def part_of(item) -> str:
    return item.module.__name__.rpartition(".")[2].removeprefix("test_")


@pytest.fixture(scope="module")
def student():
    """A fresh student process for this test module (= one part)."""
    spec = sandbox.spec_of(_job)
    handle = Student(spec, [tuple(c) for c in _job["cells"]], scenarios=_job["scenarios"], call_timeout=_job.get("call_timeout", 10),
                     module_budget=_job.get("module_budget", 120), load_timeout=_job.get("load_timeout", 30),
                     skipped=_session["skipped"],  # a cell that broke loading once is skipped in later parts
                     zygote=_zygote(spec))
    try:
        yield handle
    finally:
        handle.close()
        _session["level"] = handle.level
        if _session["load_errors"] is None and handle.spent:
            _session["load_errors"] = handle.load_errors
        if handle.output:
            _session["output"].append(handle.output)


@pytest.fixture(scope="module")
def clean_room():
    """A confined process like `student`, but with none of the learner's cells loaded: P0's own sandbox
    for running an artifact the learner produced (generated C or Python source) on inputs P0 chooses,
    where nothing of the learner's Python has run first. `clean_room.run("labNN.scenarios:fn", ...)`
    calls `fn(empty_module, ...)`."""
    spec = sandbox.spec_of(_job)
    handle = Student(spec, [], scenarios=_job["scenarios"], call_timeout=_job.get("call_timeout", 10),
                     module_budget=_job.get("module_budget", 120), load_timeout=_job.get("load_timeout", 30),
                     skipped={}, zygote=_zygote(spec))
    try:
        yield handle
    finally:
        handle.close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    handle = getattr(item, "funcargs", {}).get("student")
    if isinstance(handle, Student):
        handle.begin_test(item.nodeid)


@pytest.fixture(scope="session")
def grading_seed() -> int:
    """This submission's seed (the same one hypothesis draws from): seed P0's own input generators with
    it (`random.Random(grading_seed)`, `torch.Generator().manual_seed(grading_seed)`) so that inputs are
    fresh for each submission and the same on a regrade."""
    return int(_job.get("seed", 0))


def case_seed(case: int) -> int:
    """An integer seed for hidden case number `case`, mixed from this submission's grading seed: pass it
    where a scenario or an oracle takes a seed (`torch.manual_seed`, a model builder). A table of answers
    harvested from earlier feedback meets other numbers in the next submission; a regrade meets the same."""
    import numpy as np
    return int(np.random.SeedSequence((int(_job.get("seed", 0)), case)).generate_state(1)[0])


def case_rng(case: int):
    """`numpy.random.default_rng` for hidden case number `case`, seeded like `case_seed`."""
    import numpy as np
    return np.random.default_rng(case_seed(case))


@pytest.fixture
def measurement(request):
    """`measurement("vmap speed-up vs loop", 7.9, "x")`: an informational figure measured in P0. It is
    recorded in results.json's extra_data and printed by the selftest; it never changes a score."""
    def record(name: str, value: float, unit: str = "") -> None:
        _record({"kind": "measurement", "test": request.node.nodeid, "name": name, "value": float(value), "unit": unit})
    return record


def _message(excinfo) -> tuple[str, bool]:
    """What the learner reads for a failed test, and whether the fault is on the grading side."""
    exc = excinfo.value
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, StudentError):
        return str(exc), False
    if isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return (str(exc) or "a check failed"), False
    if isinstance(exc, GraderError):
        return "the grader could not run this check (an internal error; your instructor can see it)", True
    if isinstance(exc, pytest.skip.Exception):
        return "not run", True
    return f"your results could not be checked: {type(exc).__name__}: {str(exc)[:300]}", True


def _record(entry: dict) -> None:
    if "outcomes" in _job:
        with open(_job["outcomes"], "a") as f:
            f.write(json.dumps(entry) + "\n")


def pytest_collection_modifyitems(items):
    for item in items:
        item.repr_failure = _short_repr_failure(item.repr_failure)


def _short_repr_failure(full):
    """A learner-facing failure's report is its message. pytest's traceback of it (2-3 ms per failure: Python
    parses the source of every frame for its carets) is read by nobody; internal errors keep it as `detail`."""
    def repr_failure(excinfo, *args, **kwargs):
        message, internal = _message(excinfo)
        return full(excinfo, *args, **kwargs) if internal else message
    return repr_failure


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "setup":
        item.stash[_SETUP] = report.duration
    final = report.when == "call" or (report.when == "setup" and not report.passed)
    if final:
        marker = item.get_closest_marker("weight")
        entry = {"kind": "test", "id": item.nodeid, "name": item.name, "part": part_of(item),
                 "weight": float(marker.args[0]) if marker else 1.0,
                 "outcome": "passed" if report.passed else "failed", "message": "", "internal": False,
                 # P0's own clock, setup (a part's first test loads the learner's cells) plus call
                 "seconds": round(item.stash.get(_SETUP, 0.0) + (report.duration if report.when == "call" else 0.0), 3)}
        if report.skipped:
            entry.update(message="not run (skipped)", internal=True)
        elif call.excinfo is not None and not report.passed:
            entry["message"], entry["internal"] = _message(call.excinfo)
            if entry["internal"]:
                entry["detail"] = str(report.longrepr)[-4000:]
        _record(entry)
    return report


def pytest_sessionfinish(session, exitstatus):
    if _session["zygote"]:
        _session["zygote"].close()
    _record({"kind": "session", "level": _session["level"], "load_errors": _session["load_errors"] or [],
             "output": "\n".join(_session["output"])[-16000:], "exitstatus": int(exitstatus)})
