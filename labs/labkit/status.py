"""`python -m labkit status`: every lab's public tests against its working notebook, as one table."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from labkit.labs import LABS_ROOT, LabDir, all_labs
from concurrent.futures import ThreadPoolExecutor

from labkit.notebook import NotebookError, Part, is_exported, is_solution, read_notebook
from labkit.runner import Outcome, PartResult

# what `make labs` leaves in a solution region: a lab whose every solution cell still holds it is not started
STUB = re.compile(r"^[ \t]*# YOUR CODE HERE[ \t]*\n[ \t]*raise NotImplementedError\(\)[ \t]*$", re.M)

DEFAULT_TIMEOUT = 300.0
CACHE = ".labkit-cache/status.json"   # inside each lab folder: the last status run and what it ran on
STYLES = {"passing": "green", "partial": "yellow", "not started": "dim", "failing": "red",
          "error": "red", "timed out": "red", "crashed": "red", "no tests": "dim"}


@dataclass
class LabReport:
    labdir: LabDir
    title: str = ""
    parts: list[Part] = field(default_factory=list)
    results: dict[str, PartResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None   # the notebook could not be read: nothing ran
    reused: bool = False       # nothing changed since the last run: its results are shown again

    def status_of(self, part: str) -> str:
        return self.results[part].status if part in self.results else "not run"


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL) if hasattr(os, "killpg") else proc.kill()
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def untouched(labdir: LabDir) -> bool:
    """True when every exported solution cell of the saved notebook still holds its stub
    (`# YOUR CODE HERE` then `raise NotImplementedError()`), as `make labs` wrote it."""
    cells = [c for c in read_notebook(labdir.notebook).cells if is_exported(c) and is_solution(c)]
    return bool(cells) and all(STUB.search(c.source if isinstance(c.source, str) else "".join(c.source))
                               for c in cells)


def _inputs_key(labdir: LabDir, parts: list[str]) -> str:
    """What a lab's public-test run depends on: the notebook's code (not its outputs or metadata), the
    public tests, labkit itself, Python and torch. Equal keys give equal results."""
    from importlib import metadata

    digest = hashlib.sha256(f"{sys.version}|{','.join(parts)}".encode())
    for name in ("torch", "numpy"):
        try:
            digest.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            pass
    for cell in read_notebook(labdir.notebook).cells:
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        digest.update(f"{cell.cell_type}:{len(source)}:".encode() + source.encode())
    files = [f for f in sorted(labdir.tests.rglob("*")) if f.is_file() and "__pycache__" not in f.parts]
    for file in [*files, *sorted(Path(__file__).parent.glob("*.py"))]:
        digest.update(f"{file.name}:{file.stat().st_size}:".encode() + file.read_bytes())
    return digest.hexdigest()


def _reuse(labdir: LabDir, key: str, report: LabReport) -> bool:
    try:
        saved = json.loads((labdir.path / CACHE).read_text(encoding="utf-8"))
        if saved.get("key") != key:
            return False
        results = {r["part"]: PartResult.from_dict(r) for r in saved["results"]}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if set(results) != {p.id for p in report.parts}:
        return False
    report.results, report.notes, report.reused = results, list(saved.get("notes", [])), True
    return True


def _remember(labdir: LabDir, key: str, report: LabReport) -> None:
    """Keep a finished run (not one that timed out or crashed: those may pass on a quieter machine)."""
    if report.error or any(r.error in ("timed out", "crashed") for r in report.results.values()):
        return
    try:
        cache = labdir.path / CACHE
        cache.parent.mkdir(exist_ok=True)
        cache.write_text(json.dumps({"key": key, "notes": report.notes,
                                     "results": [r.to_dict() for r in report.results.values()]}), encoding="utf-8")
    except OSError:
        pass   # a read-only lab folder: the next status simply runs again


def collect(labdir: LabDir, timeout: float = DEFAULT_TIMEOUT, parts: list[str] | None = None,
            quick: bool = False, reuse: bool = False, remember: bool | None = None) -> LabReport:
    """Run one lab's public tests in a subprocess; a hang, crash or broken notebook stays contained.
    With `quick`, a lab whose solution cells all still hold their stubs is reported "not started"
    without running anything (that is what takes a lab's status from seconds to milliseconds).
    With `reuse`, a lab whose code, public tests and tools are unchanged since its last finished run
    shows that run's results (`status --fresh` runs every lab again). A finished run is kept for the next
    `reuse` when `remember` is true (default: when `reuse` is)."""
    remember = reuse if remember is None else remember
    report = LabReport(labdir)
    try:
        info = labdir.info()
    except NotebookError as exc:
        report.error = str(exc)
        return report
    report.title = info.title
    report.parts = [p for p in info.parts if parts is None or p.id in parts]
    if quick and untouched(labdir):
        for part in report.parts:
            report.results[part.id] = PartResult(part.id, [Outcome("stub", False, "not_implemented")], static=True)
        return report
    key = _inputs_key(labdir, [p.id for p in report.parts]) if reuse or remember else ""
    if reuse and _reuse(labdir, key, report):
        return report
    with tempfile.TemporaryDirectory(prefix="labkit-") as tmp:
        out, log = Path(tmp) / "results.jsonl", Path(tmp) / "output.txt"
        out.touch()
        with log.open("wb") as log_stream:
            proc = subprocess.Popen([sys.executable, "-m", "labkit.worker", str(labdir.path), str(out),
                                     *[p.id for p in report.parts]], cwd=labdir.path, env=_worker_env(),
                                    stdin=subprocess.DEVNULL, stdout=log_stream, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
                ended = "crashed" if code else None
            except subprocess.TimeoutExpired:
                _kill(proc)
                ended = "timed out"
        for line in out.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if "error" in record and "part" not in record:
                report.error = record["error"]
            elif "problems" in record:
                report.notes += record["problems"]
            elif "part" in record:
                report.results[record["part"]] = PartResult.from_dict(record)
        if ended:
            tail = log.read_bytes()[-600:].decode("utf-8", "replace").strip().splitlines()[-3:]
            what = f"stopped after {timeout:g} s" if ended == "timed out" else f"the test process crashed (exit {code})"
            report.notes.append(f"{what}" + (": " + " | ".join(tail) if tail and ended == "crashed" else ""))
            for part in report.parts:
                report.results.setdefault(part.id, PartResult(part.id, error=ended))
    if remember:
        _remember(labdir, key, report)
    return report


def _status_word(result: PartResult | None) -> str:
    if result is None:
        return "not run"
    return result.error if result.error in ("timed out", "crashed") else result.status


def render(reports: list[LabReport], console=None, verbose: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(width=max(100, shutil.get_terminal_size((100, 24)).columns))
    table = Table(title="Your labs: public tests of each part (check(\"part\") runs one in the notebook)",
                  title_justify="left")
    for name, justify in (("Lab", "left"), ("check(...)", "left"), ("Part", "left"), ("Points", "right"),
                          ("Public tests", "right"), ("Status", "left")):
        table.add_column(name, justify=justify, no_wrap=name != "Part")
    total_points = passing_points = 0.0
    for report in reports:
        if report.error:
            table.add_row(report.labdir.id, "", "[red]notebook cannot be read[/red]", "", "", "[red]error[/red]")
            continue
        for index, part in enumerate(report.parts):
            result = report.results.get(part.id)
            word = _status_word(result)
            tests = f"{result.passed}/{result.total}" if result and not result.error and not result.static else "-"
            total_points += part.points
            passing_points += part.points if word == "passing" else 0
            table.add_row(report.labdir.id if index == 0 else "", f'"{part.id}"', Text(part.title),
                          f"{part.points:g}", tests, Text(word, style=STYLES.get(word, "")))
        table.add_section()
    console.print(table)
    console.print(f"Parts passing their public tests: {passing_points:g} of {total_points:g} points "
                  "(the hidden graders test more cases).", highlight=False)
    for report in reports:
        lines = ([report.error] if report.error else []) + report.notes
        if verbose:
            for result in report.results.values():
                lines += [f"{result.part}: {result.error}"] if result.error and result.error not in ("timed out", "crashed") else []
                lines += [f"{result.part} / {f.test}: {f.message}" for f in result.failures if f.kind != "not_implemented"]
        for line in lines:
            console.print(Text.assemble((report.labdir.id, "bold"), ": ", line), highlight=False, soft_wrap=True)
    if not verbose and any(_status_word(r) in ("failing", "partial", "error") for rep in reports
                           for r in rep.results.values()):
        console.print("Run check(\"part\") in a notebook, or `python -m labkit status -v`, to see what fails.", style="dim")


def main(root: Path = LABS_ROOT, timeout: float = DEFAULT_TIMEOUT, verbose: bool = False,
         only: list[str] | None = None, jobs: int = 2, fresh: bool = False) -> int:
    labs = [lab for lab in all_labs(root) if not only or lab.id in only or lab.slug in only]
    if not labs:
        print(f"no labs found under {root}")
        return 1
    with ThreadPoolExecutor(max(1, jobs)) as pool:   # each started lab runs in its own process
        reports = list(pool.map(lambda lab: collect(lab, timeout, quick=True, reuse=not fresh, remember=True), labs))
    render(reports, verbose=verbose)
    reused = [r.labdir.id for r in reports if r.reused]
    if reused:
        print(f"Unchanged since their last run, shown again: {', '.join(reused)} (`status --fresh` runs them again).")
    return 0
