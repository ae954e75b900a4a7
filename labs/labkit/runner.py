"""Running one part's public tests in this process and turning failures into one friendly line each."""
from __future__ import annotations

import contextlib
import io
import linecache
import os
import re
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit.labs import LabDir

HERE = Path(__file__).resolve().parent
INI = HERE / "pytest-check.ini"
MAX_LINES, MAX_CHARS = 6, 300
_LIBRARY_DIRS = tuple({os.path.join(str(path), "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, HERE)
                       for path in (Path(p), Path(p).resolve())})


@dataclass
class Outcome:
    test: str
    ok: bool
    kind: str = "pass"   # pass | fail | not_implemented | missing | error | skipped
    message: str = ""


@dataclass
class PartResult:
    part: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None   # the tests could not run at all (missing file, import error, ...)
    notes: list[str] = field(default_factory=list)   # cells of the learner's module that failed to load
    static: bool = False   # "not started" read from the notebook (every stub still there), no test was run

    @property
    def passed(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def total(self) -> int:
        return sum(o.kind != "skipped" for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok and o.kind != "skipped"]

    @property
    def status(self) -> str:
        """One word for tables: passing, not started, partial, failing, error, no tests."""
        if self.error:
            return "no tests" if self.error.startswith("no public tests") else "error"
        if not self.total:
            return "no tests"
        if self.passed == self.total:
            return "passing"
        if not self.passed and all(o.kind == "not_implemented" for o in self.failures):
            return "not started"
        return "partial" if self.passed else "failing"

    def to_dict(self) -> dict:
        return {"part": self.part, "error": self.error, "outcomes": [asdict(o) for o in self.outcomes]}

    @classmethod
    def from_dict(cls, data: dict) -> "PartResult":
        return cls(data["part"], [Outcome(**o) for o in data.get("outcomes", [])], data.get("error"))


def _trim(text: str) -> str:
    lines = [line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 3] + "..." for line in text.strip().splitlines()]
    return "\n".join(lines[:MAX_LINES] + (["..."] if len(lines) > MAX_LINES else []))


def _is_library(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen importlib...> is Python's; <cell ...>, <ipython-input-...> are the learner's
        return filename.startswith("<frozen")
    return os.path.abspath(filename).startswith(_LIBRARY_DIRS)


def _under(filename: str, folder: Path) -> bool:
    if not filename or filename.startswith("<"):
        return False
    try:
        return Path(filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _function_name(frame) -> str:
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return re.sub(r"(\.<locals>)?\.<(listcomp|genexpr|dictcomp|setcomp)>$", "", name).replace(".<locals>", "")


def _assert_message(text: str) -> str:
    """The test author's message without pytest's 'assert ... where ...' explanation, when there is one."""
    lines = text.strip().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("assert "):
            return "\n".join(lines[:index]) if index else line
    return text


def _example_note(exc: BaseException) -> str:
    """hypothesis' failing example on one line: '\nfailing example: a=0, b=1'."""
    for note in getattr(exc, "__notes__", []):
        if isinstance(note, str) and note.startswith(("Falsifying example", "Failing test case")):
            args = re.sub(r"\s*#[^\n]*", "", note.partition("(")[2].rpartition(")")[0])
            args = [a.strip() for a in args.replace("\n", " ").split(",") if a.strip() and not a.strip().startswith("lab=")]
            return "\nfailing example: " + ", ".join(args)
    return ""


def _denied_use(exc: BaseException, denied: tuple[str, ...]) -> str | None:
    """The denied module the learner's code tried to use, if that is why it failed."""
    from labkit.learner import DeniedModule

    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, DeniedModule):
            return exc.name
        if isinstance(exc, NameError) and getattr(exc, "name", None) in denied:
            return exc.name
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def describe(exc: BaseException, tests_dir: Path, denied: tuple[str, ...] = ()) -> tuple[str, str]:
    """(kind, learner-readable message) for an exception raised while running a public test."""
    import pytest

    from labkit.pytest_plugin import MissingName

    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__) if not _is_library(f.f_code.co_filename)]
    mine = [f for f in frames if not _under(f.f_code.co_filename, tests_dir)]
    test_frames = [f for f in frames if _under(f.f_code.co_filename, tests_dir)]
    raised_in_test = bool(frames) and frames[-1] in test_frames
    where = f" in `{_function_name(mine[-1])}`" if mine else ""
    text = str(exc)
    suffix = _example_note(exc)

    module = _denied_use(exc, denied) if denied else None
    if module:
        return "denied", (f"your code uses {module}{where}, which this lab does not allow: the graders run your "
                          f"cells without {module} (exploration cells may use it; exported cells may not)")
    if isinstance(exc, NotImplementedError):
        return "not_implemented", f"not implemented yet (NotImplementedError{where})"
    if isinstance(exc, MissingName):
        return "missing", text
    if raised_in_test and isinstance(exc, (AssertionError, pytest.fail.Exception)):
        if not text.strip() and test_frames:  # a bare assert: show the line that failed
            frame = test_frames[-1]
            text = "assertion failed: " + linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        return "fail", _trim(_assert_message(text) + suffix)
    if raised_in_test:
        return "error", _trim(f"the test hit {type(exc).__name__}: {text} (check what your code returns)" + suffix)
    return "error", _trim(f"your code raised {type(exc).__name__}{where}: {text}" + suffix)


class _Collector:
    """pytest hooks that keep one Outcome per test, with the exception itself at hand."""

    def __init__(self, tests_dir: Path, denied: tuple[str, ...] = ()):
        self.tests_dir = tests_dir
        self.denied = denied
        self.outcomes: dict[str, Outcome] = {}
        self.errors: list[str] = []

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(_trim(str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "collection failed"))

    def pytest_runtest_makereport(self, item, call):
        name = item.name
        if call.excinfo is None:
            if call.when == "call" and name not in self.outcomes:
                self.outcomes[name] = Outcome(name, True)
            return
        if name in self.outcomes and not self.outcomes[name].ok:
            return  # the first problem of a test is the one to report
        import pytest

        exc = call.excinfo.value
        if isinstance(exc, pytest.skip.Exception):
            self.outcomes[name] = Outcome(name, False, "skipped", str(exc))
            return
        kind, message = describe(exc, self.tests_dir, self.denied)
        self.outcomes[name] = Outcome(name, False, kind, message)


def run_part(labdir: LabDir, part: str, names: dict, origin: str = "your notebook",
             denied: tuple[str, ...] = ()) -> PartResult:
    """Run `tests/test_<part>.py` of the lab with the `lab` fixture bound to `names`."""
    import pytest

    from labkit.pytest_plugin import use_namespace

    test_file = labdir.test_file(part)
    if not test_file.is_file():
        return PartResult(part, error=f"no public tests for part {part!r} ({test_file.name} is missing)")
    tests_dir = labdir.tests.resolve()
    collector = _Collector(tests_dir, tuple(denied))
    args = [str(test_file), "-q", "-c", str(INI), f"--rootdir={tests_dir}", f"--confcutdir={tests_dir}",
            "--import-mode=importlib", "-p", "no:cacheprovider", "-p", "labkit.pytest_plugin",
            "--disable-plugin-autoload", "-p", "no:faulthandler", "--capture=sys", "-o", "console_output_style=classic"]
    before = set(sys.modules)
    output = io.StringIO()
    try:
        with use_namespace(names, origin), contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = pytest.main(args, plugins=[collector])
    finally:
        for name in set(sys.modules) - before:  # re-import the tests next time (they may have changed)
            if _under(getattr(sys.modules[name], "__file__", None) or "", labdir.path.resolve()):
                del sys.modules[name]
    result = PartResult(part, list(collector.outcomes.values()))
    if collector.errors:
        result.error = "the public tests could not be loaded: " + collector.errors[0]
    elif int(code) == 2:
        result.error = "interrupted"
    elif int(code) not in (0, 1, 5):
        result.error = "pytest could not run the tests:\n" + _trim(output.getvalue()[-2000:])
    return result
