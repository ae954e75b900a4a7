"""What the command line does: grade submissions, run self-tests."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autograder.authoring.generate import render, solution_notebook
from autograder.engine import selftest as selftest_mod
from autograder.engine.pipeline import GradeResult, Options, grade as grade_one
from autograder.paths import REPO, all_labs, build_dir, lab_paths

console = Console(highlight=False)


def example_submissions(lab: str) -> list[Path]:
    """The reference, the blank release and the bundled partial attempts of a lab."""
    paths = lab_paths(lab)
    folder = build_dir("examples", paths.lab)
    reference = folder / "reference.ipynb"
    reference.write_text(render(solution_notebook(paths.solution.read_text())))
    blank = folder / "blank.ipynb"
    blank.write_bytes(paths.release_notebook.read_bytes())
    return [reference, blank, *sorted(paths.examples.glob("*.ipynb"))]


def expand(items: list[Path]) -> list[Path]:
    found = []
    for item in items:
        if item.is_dir():
            found += sorted(p for p in item.iterdir() if p.suffix in (".ipynb", ".zip"))
        else:
            found.append(item)
    return found


def _folder_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", path.stem) or "submission"


def score_table(lab: str, graded: list[tuple[Path, GradeResult]]) -> Table:
    table = Table(title=f"{lab}: {len(graded)} submission(s)")
    table.add_column("submission")
    parts = graded[0][1].parts if graded else []
    for p in parts:
        table.add_column(f"{p.id}\n/{p.points:g}", justify="right")
    table.add_column("total", justify="right")
    for path, result in graded:
        cells = [f"{p.score:g}" for p in result.parts]
        total = f"{result.score:g}/{result.max_score:g}" + (" [red](error)[/]" if result.error else "")
        table.add_row(path.name, *cells, total)
    return table


def grade(lab: str, submissions: list[Path], out: Path | None, jobs: int, sandbox: str) -> int:
    paths = lab_paths(lab)
    items = expand(submissions) if submissions else example_submissions(paths.lab)
    missing = [p for p in items if not p.exists()]
    if missing:
        console.print(f"[red]no such submission:[/] {', '.join(map(str, missing))}")
        return 2
    out = out or (REPO / "grading" / paths.lab)
    single = len(submissions) == 1 and submissions[0].is_file()
    targets = [out if single else out / _folder_name(p) for p in items]
    options = Options(sandbox)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda pt: grade_one(paths, pt[0], pt[1], options), zip(items, targets)))
    console.print(score_table(paths.lab, list(zip(items, results))))
    console.print(f"results in {out}" + ("" if single else "/<submission>/") + " (results.json, feedback.md)")
    return 0


def selftest(labs: list[str], jobs: int, sandbox: str) -> int:
    chosen = [lab_paths(lab).lab for lab in labs] or [p.lab for p in all_labs()]
    return max((selftest_mod.run(lab, jobs, sandbox) for lab in chosen), default=0)
