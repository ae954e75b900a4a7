"""The suite's own settings, and the book build that two test files share."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

collect_ignore = ["toylab"]  # the toy lab's graders run inside the grading engine, not as tests of the suite

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
