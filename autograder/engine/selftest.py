"""`python -m autograder selftest labNN`: proof that a lab's graders grade.

reference = full marks (twice, identical outcomes), released stub = zero on every part, every
seeded mutant loses points. Prints a table and the kill rate; returns non-zero on any failure.
"""
from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
from labkit.notebook import assemble, read_notebook
from rich.console import Console
from rich.table import Table

from autograder.authoring.generate import render, solution_notebook, student_notebook
from autograder.engine.pipeline import GradeResult, Options, grade
from autograder.paths import LabPaths, build_dir, lab_paths


@dataclass
class Case:
    name: str
    notebook: Path
    expect: str  # "full", "zero", "loses"
    description: str = ""
    options: Options = Options()


def load_mutants(paths: LabPaths) -> list[dict]:
    if not paths.mutants.exists():
        return []
    return tomllib.loads(paths.mutants.read_text()).get("mutant", [])


def prepare(paths: LabPaths, sandbox: str) -> tuple[list[Case], list[str]]:
    """Write the reference, stub and mutant notebooks; return the cases and any setup problems."""
    text = paths.solution.read_text()
    folder = build_dir("selftest", paths.lab)
    problems = []
    reference = folder / "reference.ipynb"
    reference.write_text(render(solution_notebook(text)))
    if not paths.release_notebook.exists() or paths.release_notebook.read_text() != render(student_notebook(text)):
        problems.append(f"{paths.release_notebook.name} is stale or missing: run `make labs`")
    cases = [Case("reference", reference, "full", options=Options(sandbox)),
             Case("reference (again)", reference, "full", options=Options(sandbox)),
             Case("released stub", paths.release_notebook, "zero", options=Options(sandbox))]
    release_nb = read_notebook(paths.release_notebook) if paths.release_notebook.exists() else None
    ref_cells = assemble(release_nb, read_notebook(reference)).cells if release_nb else None
    names = set()
    for mutant in load_mutants(paths):
        name = mutant.get("name", "?")
        if name in names:
            problems.append(f"mutant {name!r} is listed twice")
        names.add(name)
        count = text.count(mutant.get("find", "\0"))
        if count != 1:
            problems.append(f"mutant {name!r}: its `find` text occurs {count} times in {paths.solution.name} (must be once)")
            continue
        nb = solution_notebook(text.replace(mutant["find"], mutant["replace"]))
        if release_nb and assemble(release_nb, nb).cells == ref_cells:
            problems.append(f"mutant {name!r} changes no graded (exported solution) code")
            continue
        path = folder / f"mutant-{name}.ipynb"
        path.write_text(nbformat.writes(nb))
        cases.append(Case(f"mutant {name}", path, "loses", mutant.get("description", ""), Options(sandbox, True)))
    return cases, problems


def verdict(case: Case, result: GradeResult) -> str | None:
    """None when the case behaved as required, else what went wrong."""
    if result.error:
        return f"grading error: {result.error.splitlines()[0]}"
    if case.expect == "full" and result.score != result.max_score:
        lost = [f"{p.id} ({p.score:g}/{p.points:g}: {p.failures[:1]})" for p in result.parts if p.score < p.points]
        return "reference lost points in " + "; ".join(lost)
    if case.expect == "zero" and result.score != 0:
        return "stub earned points in " + ", ".join(p.id for p in result.parts if p.score)
    if case.expect == "loses" and result.score >= result.max_score:
        return "mutant survived (full marks)"
    return None


def feedback_leaks(paths: LabPaths, out: Path) -> list[str]:
    """What learners see (feedback.md, results.json) must hold no canary and no hidden grader text.
    Solution lines are not checked here: a mutant's feedback quotes its own (solution-like) code."""
    from autograder.authoring.leakscan import Patterns, scan
    files = sorted(out.rglob("feedback.md")) + sorted(out.rglob("results.json"))
    leaks = [leak for leak in scan(files, Patterns.from_repo(paths.root), paths.root)
             if leak.kind != "solution" and "mutants.toml" not in leak.origin]  # a mutant quoting itself
    return [f"feedback leaks hidden text: {leak}" for leak in leaks[:10]]


def run(lab: "str | LabPaths", jobs: int = 2, sandbox: str = "auto") -> int:
    paths = lab_paths(lab)
    console = Console(highlight=False)
    cases, problems = prepare(paths, sandbox)
    out = build_dir("selftest", paths.lab, "results")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        graded = list(pool.map(lambda c: grade(paths, c.notebook, out / c.notebook.stem / c.name.replace(" ", "_"), c.options), cases))

    table = Table(title=f"selftest {paths.lab}")
    for column in ("submission", "score", "expected", "verdict", "seconds"):
        table.add_column(column)
    failures = list(problems)
    for case, result in zip(cases, graded):
        bad = verdict(case, result)
        if bad:
            failures.append(f"{case.name}: {bad}")
        table.add_row(case.name, f"{result.score:g}/{result.max_score:g}", case.expect,
                      "[green]ok[/]" if not bad else f"[red]{bad}[/]", f"{result.seconds:.1f}")
    console.print(table)

    first, second = graded[0], graded[1]
    if [(p.id, p.score, p.failures) for p in first.parts] != [(p.id, p.score, p.failures) for p in second.parts]:
        failures.append("two gradings of the reference differ: grading is not deterministic")
    failures += feedback_leaks(paths, out)
    mutants = [(c, r) for c, r in zip(cases, graded) if c.expect == "loses"]
    caught = sum(1 for c, r in mutants if verdict(c, r) is None)
    if len(load_mutants(paths)) < 10:
        failures.append(f"only {len(load_mutants(paths))} mutants; every lab needs at least ten")
    rate = 100 * caught / len(mutants) if mutants else 0
    console.print(f"mutants caught: {caught}/{len(mutants)} (kill rate {rate:.0f}%)")
    console.print(f"sandbox level: {first.level}")
    for m in first.measurements:
        console.print(f"measured on the reference: {m['name']}: {m['value']:.3g}{m['unit']}")
    for failure in failures:
        console.print(f"[red]FAIL[/] {failure}")
    console.print("[green]selftest passed[/]" if not failures else f"[red]selftest failed ({len(failures)} problems)[/]")
    return 1 if failures else 0
