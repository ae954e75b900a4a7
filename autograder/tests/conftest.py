"""The suite's own settings, the book build that two test files share, and how `make test` splits the
suite over its workers (pytest-xdist, with a scheduler of its own below)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

collect_ignore = ["toylab"]  # the toy lab's graders run inside the grading engine, not as tests of the suite

# Work units for `pytest -n 3` (pytest-xdist): a test file runs whole on one worker (its module fixtures are
# built once), except test_labs, whose tests go by lab; the two files that read the book build share a unit,
# so the book is built once. The longest units start first, so no long one is left for the end.
BOOK_FILES = {"test_book.py", "test_course_notebooks.py"}
LONG_FIRST = ["book", "labs-lab07"]  # then every other lab, then the remaining files


def _unit(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    if file in BOOK_FILES:
        return "book"
    lab = re.search(r"\[(lab\d+)\]$", name)
    if file == "test_labs.py" and lab:
        return f"labs-{lab.group(1)}"
    return path


def _start_order(unit: str) -> tuple[int, str]:
    if unit in LONG_FIRST:
        return LONG_FIRST.index(unit), unit
    return (len(LONG_FIRST), unit) if unit.startswith("labs-") else (len(LONG_FIRST) + 1, unit)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: _start_order(_unit(item.nodeid)))  # stable: file order holds within a unit


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with our units as scopes: a worker takes a whole unit, the next free worker
    the next unit in collection order. (xdist reorders scopes by their number of tests unless told not to:
    the book and lab07, the longest units, then started in the middle of the run.)"""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return UnitScheduling(config, log)


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser the book and formgrader checks drive. Without one they skip, except under CI (the CI
    variable set), where they fail."""
    import shutil

    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    reason = "chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must install it", pytrace=False)
    pytest.skip(reason)


_lab_summaries: list[str] = []
_unit_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Collect each lab's selftest summary (sent as a user property, so it crosses from the workers) and the
    seconds each work unit took (setup, call and teardown of its tests)."""
    _lab_summaries.extend(value for key, value in report.user_properties if key == "selftest summary")
    unit = _unit(report.nodeid)
    _unit_seconds[unit] = _unit_seconds.get(unit, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if _lab_summaries:
        terminalreporter.section("lab selftests (quick)")
        for line in sorted(set(_lab_summaries)):
            terminalreporter.write_line(line)
    if _unit_seconds:
        # CI's time budget, unit by unit: what a worker spent on each (the workers run side by side)
        total = sum(_unit_seconds.values())
        terminalreporter.section(f"seconds per work unit ({total:.0f} s in all)")
        for unit, seconds in sorted(_unit_seconds.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:5.1f} %  {unit}")

ROOT = Path(__file__).resolve().parents[2]
BOOK_BUILD_TIMEOUT_S = 900


@dataclass
class BookBuild:
    ok: bool
    seconds: float
    output: str
    html: Path
    executed: Path  # the executed copies of the course notebooks (book/_build/jupyter_execute)


@pytest.fixture(scope="session")
def book_build() -> BookBuild:
    """`book/build.py`, run once per session. It executes every course notebook from the committed
    sources (a failing cell fails it), so test_course_notebooks reads those executed copies instead of
    running each notebook a second time."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(ROOT / "build" / "tmp"))
    (ROOT / "build" / "tmp").mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "book" / "build.py")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=BOOK_BUILD_TIMEOUT_S)
        ok, output = proc.returncode == 0, f"exit status {proc.returncode}\n" + proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        ok, output = False, f"did not finish in {BOOK_BUILD_TIMEOUT_S} s\n{exc.stdout or ''}"
    return BookBuild(ok, time.monotonic() - start, output, ROOT / "book" / "_build" / "html",
                     ROOT / "book" / "_build" / "jupyter_execute")
