"""`python -m autograder selftest labNN`: proof that a lab's graders grade.

- the reference scores full marks (the full run grades it twice and requires identical outcomes, and
  again on three other grading seeds, i.e. other draws of the generated cases); the released stub scores
  zero;
- every hand-written mutant loses points (quick mode: a fixed sample);
- a fixed sample of machine-made mutants (cosmic-ray operators over the solution regions) loses points,
  unless listed as equivalent (the exhaustive run is `python -m autograder mutation labNN --run`);
- every adversarial attempt scores at most its honest twin, part by part (quick mode: one attempt, the same on
  every run; CI's time budget allows no more, and `make selftest` grades them all);
- the edge-domain catalogue names only hidden tests that exist; the differential fuzzer of the
  reference against PyTorch agrees (a small budget; `make fuzz` runs a large one), and so do the cases of
  the lab's peer suites (`peers.py`: case lists modelled on public test suites, run through an adapter;
  quick mode: every sixth case of a suite built on `engine.peer_suite`);
- nothing a learner sees (feedback.md, results.json) leaks hidden text;
- (full run) each example built by a recipe scores what its README table says.
Prints a table and one summary line per lab; returns non-zero on any failure.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat
from labkit.notebook import assemble, read_notebook
from rich.console import Console
from rich.table import Table

from autograder.authoring.generate import render, solution_notebook, student_notebook
from autograder.engine import mutation, variants
from autograder.engine.pipeline import GradeResult, Options, grade
from autograder.paths import REPO, LabPaths, build_dir, lab_paths, project_env

QUICK_HAND, QUICK_MACHINE, FULL_MACHINE, QUICK_ATTEMPTS = 2, 1, 24, 1  # quick: CI's 20-minute budget
QUICK_FUZZ, FULL_FUZZ = 20, 400
EXTRA_SEEDS = (1, 2, 3)  # the full run also grades the reference on these draws of the generated cases


@dataclass
class Case:
    name: str
    notebook: Path
    expect: str  # "full", "zero", "loses", "attempt", "twin", "example"
    description: str = ""
    options: Options = Options()
    twin: str = ""  # for an attempt: the name of its twin case


def load_mutants(paths: LabPaths) -> list[dict]:
    return variants.hand_mutants(paths)


def _write(folder: Path, name: str, nb) -> Path:
    path = folder / f"{name}.ipynb"
    text = nbformat.writes(nb)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _sample_names(names: list[str], count: int) -> set[str]:
    """A fixed spread of hand-written mutants: the same on every run and machine."""
    ranked = sorted(names, key=lambda n: hashlib.sha1(n.encode()).hexdigest())
    return set(ranked[:count])


def prepare(paths: LabPaths, sandbox: str, quick: bool = False) -> tuple[list[Case], list[str]]:
    """Write the reference, stub, mutant and attempt notebooks; return the cases and any setup problems."""
    text = paths.solution.read_text()
    folder = build_dir("selftest", paths.lab)
    problems = []
    reference = _write(folder, "reference", solution_notebook(text))
    if not paths.release_notebook.exists() or paths.release_notebook.read_text() != render(student_notebook(text)):
        problems.append(f"{paths.release_notebook.name} is stale or missing: run `make labs`")
    cases = [Case("reference", reference, "full", options=Options(sandbox))]
    if not quick:  # the determinism check: a second real grading of the reference
        cases.append(Case("reference (again)", reference, "full", options=Options(sandbox)))
        # the graders themselves on other draws: a reference that loses points on some seed is a grader bug
        cases += [Case(f"reference (seed {seed})", reference, "full", options=Options(sandbox, seed=seed))
                  for seed in EXTRA_SEEDS]
    cases.append(Case("released stub", paths.release_notebook, "zero", options=Options(sandbox)))
    release_nb = read_notebook(paths.release_notebook) if paths.release_notebook.exists() else None
    ref_cells = assemble(release_nb, read_notebook(reference)).cells if release_nb else None

    mutants = load_mutants(paths)
    names = [m.get("name", "?") for m in mutants]
    chosen = _sample_names(names, QUICK_HAND) if quick else set(names)
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"mutant {name!r} is listed twice")
    for mutant in mutants:
        name = mutant.get("name", "?")
        count = text.count(mutant.get("find", "\0"))
        if count != 1:
            problems.append(f"mutant {name!r}: its `find` text occurs {count} times in {paths.solution.name} (must be once)")
            continue
        nb = solution_notebook(text.replace(mutant["find"], mutant["replace"]))
        if release_nb and assemble(release_nb, nb).cells == ref_cells:
            problems.append(f"mutant {name!r} changes no graded (exported solution) code")
            continue
        if name in chosen:
            cases.append(Case(f"mutant {name}", _write(folder, f"mutant-{name}", nb), "loses",
                              mutant.get("description", ""), Options(sandbox, True, variants.home_first(paths, nb))))

    machine = mutation.generate(text)
    equivalent = variants.equivalents(paths)
    for m in mutation.sample(machine, QUICK_MACHINE if quick else FULL_MACHINE, skip=set(equivalent)):
        nb = mutation.notebook(paths, m)
        cases.append(Case(f"machine {m.id}", _write(folder, f"machine-{m.id}", nb), "loses",
                          m.describe(), Options(sandbox, True, variants.home_first(paths, nb))))

    if not quick:  # the examples' README table must give the scores the graders give today
        for recipe in variants.recipes(paths):
            cases.append(Case(f"example {recipe.notebook}", paths.examples / recipe.notebook, "example",
                              options=Options(sandbox)))

    every_attempt = variants.attempts(paths)
    graded_attempts = _sample_names([a.name for a in every_attempt], QUICK_ATTEMPTS) if quick else {a.name for a in every_attempt}
    for attempt in every_attempt:
        trouble = variants.attempt_problems(paths, attempt)
        if trouble:
            problems += trouble
            continue
        if attempt.name not in graded_attempts:
            continue
        twin = f"twin of {attempt.name}"
        cases.append(Case(f"attempt {attempt.name}", _write(folder, f"attempt-{attempt.name}", variants.attempt_notebook(paths, attempt)),
                          "attempt", f"{attempt.kind}: {attempt.description}", Options(sandbox), twin))
        cases.append(Case(twin, _write(folder, f"twin-{attempt.name}", variants.twin_notebook(paths, attempt)), "twin",
                          options=Options(sandbox)))
    return cases, problems


def verdict(case: Case, result: GradeResult, twin: GradeResult | None = None) -> str | None:
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
    if case.expect == "example":
        listed = example_scores(case.notebook.parent).get(case.notebook.name)
        if listed is None or abs(listed - result.score) > 1e-6:
            return (f"scores {result.score:g}, examples/README.md says {listed}: "
                    f"`python -m autograder examples {result.lab} --write`")
    if case.expect == "attempt" and twin is not None:
        if twin.error:
            return f"its twin could not be graded: {twin.error.splitlines()[0]}"
        above = [f"{p.id} {p.score:g} > {t.score:g}" for p, t in zip(result.parts, twin.parts, strict=True)
                 if p.score > t.score + 1e-9]
        if above:
            return "scored above its honest twin in " + ", ".join(above)
    return None


def example_scores(folder: Path) -> dict[str, float]:
    """notebook name -> total score, from the table `python -m autograder examples --write` writes."""
    readme = folder / "README.md"
    rows = re.findall(r"^\| `([^`]+\.ipynb)` \|.*\| ([0-9.]+) / [0-9.]+", readme.read_text(), re.M) if readme.exists() else []
    return {name: float(score) for name, score in rows}


def feedback_leaks(paths: LabPaths, out: Path) -> list[str]:
    """What learners see (feedback.md, results.json) must hold no canary and no hidden grader text.
    Solution lines are not checked here: a mutant's feedback quotes its own (solution-like) code, an
    adversarial attempt's feedback quotes its own cheat, and learner code may match a line of an example
    submission (examples are learner code too)."""
    from autograder.authoring.leakscan import Patterns, scan
    files = sorted(out.rglob("feedback.md")) + sorted(out.rglob("results.json"))
    allowed = ("mutants.toml", "adversarial.toml", "/examples/")  # learner-like code quoting learner-like code
    leaks = [leak for leak in scan(files, Patterns.from_repo(paths.root), paths.root)
             if leak.kind != "solution" and not any(a in leak.origin for a in allowed)]
    return [f"feedback leaks hidden text: {leak}" for leak in leaks[:10]]


def catalogue_problems(paths: LabPaths) -> tuple[int, list[str]]:
    """Every class in catalogue.toml names hidden tests that exist. Returns (classes, problems)."""
    if not paths.catalogue.exists():
        return 0, []
    classes = tomllib.loads(paths.catalogue.read_text()).get("case_class", [])
    problems = []
    for entry in classes:
        tests = entry.get("tests", [])
        if not tests:
            problems.append(f"catalogue class {entry.get('name')!r} names no test")
        for test in tests:
            file, _, func = test.partition("::")
            source = paths.hidden / file
            if not source.exists() or not re.search(rf"^\s*(async\s+)?def {re.escape(func.split('[')[0])}\(",
                                                    source.read_text(), re.M):
                problems.append(f"catalogue class {entry.get('name')!r} names a missing test {test}")
    return len(classes), problems


def start_probe(paths: LabPaths, module: str, call: str, env: dict | None = None) -> subprocess.Popen | None:
    """One of the lab's P0 checks of its reference (`fuzz.run(n)`: differential fuzzing against PyTorch;
    `peers.run()`: case lists modelled on public test suites) in a subprocess started now, so that it runs
    beside the gradings; `probe_result` collects it. The call prints `PROBE-CASES <n>`."""
    if not (paths.hidden / f"{module}.py").exists():
        return None
    code = (f"from labkit.quickexit import at_exit_skip_final_gc; at_exit_skip_final_gc(); "
            f"from autograder.labs.{paths.lab} import {module}; print('PROBE-CASES', {module}.{call})")
    env = {**os.environ, **project_env(), **(env or {}), "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "labs")])}
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def start_fuzz(paths: LabPaths, examples: int) -> subprocess.Popen | None:
    return start_probe(paths, "fuzz", f"run({examples})")


QUICK_PEER_SAMPLE = 6     # a quick selftest runs every sixth case of a peer suite built on engine.peer_suite


def start_peers(paths: LabPaths, quick: bool = False) -> subprocess.Popen | None:
    return start_probe(paths, "peers", "run()", {"IPT_PEER_SAMPLE": str(QUICK_PEER_SAMPLE if quick else 1)})


def probe_result(proc: subprocess.Popen | None, what: str = "the fuzzer") -> tuple[int, str | None]:
    """(cases run, failure) of a check started by `start_probe`."""
    if proc is None:
        return 0, None
    try:
        output, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return 0, f"{what} did not finish in 600 s"
    found = re.search(r"PROBE-CASES (\d+)", output)
    if proc.returncode != 0 or not found:
        return 0, f"{what} found a disagreement or failed:\n{output[-3000:]}"
    return int(found.group(1)), None


def run_fuzz(paths: LabPaths, examples: int) -> tuple[int, str | None]:
    """The lab's differential fuzzer, run to the end: (cases run, failure)."""
    return probe_result(start_fuzz(paths, examples), "the fuzzer")


NOT_NEEDED = "not graded: its attempt scored nothing, so it cannot be above its twin"


def _dedupe_grade(paths: LabPaths, cases: list[Case], out: Path, jobs: int) -> list[GradeResult]:
    """Grade every case; cases that assemble to the same graded code with the same options are graded once,
    and an attempt's twin only on the parts where the attempt scored."""
    release_nb = read_notebook(paths.release_notebook) if paths.release_notebook.exists() else None

    def graded_code(path: Path) -> str:
        text = path.read_text()
        if release_nb is not None:
            try:
                text = repr(assemble(release_nb, read_notebook(path)).cells)
            except Exception:  # noqa: BLE001 - an unreadable notebook is keyed by its text
                pass
        return hashlib.sha256(text.encode()).hexdigest()

    def run_one(case: Case) -> GradeResult:
        return grade(paths, case.notebook, out / case.notebook.stem / case.name.replace(" ", "_"), case.options)

    firsts = [c for c in cases if c.expect != "twin"]
    keys = {c.name: (graded_code(c.notebook), c.options) for c in firsts}
    unique: dict = {}
    for case in sorted(firsts, key=lambda c: c.expect != "attempt"):  # attempts first: their twins wait on them
        unique.setdefault(keys[case.name], case)
    attempt_of = {c.twin: c for c in firsts if c.expect == "attempt"}
    twins = [c for c in cases if c.expect == "twin"]

    def grade_twin(twin: Case, attempt_result: GradeResult) -> GradeResult:
        """A twin is graded only on the parts where its attempt scored: elsewhere the attempt cannot be above
        it. An attempt that scored nothing needs no twin grading at all."""
        scored = tuple(p.id for p in attempt_result.parts if p.score > 0)
        if scored:
            return run_one(dataclasses.replace(twin, options=dataclasses.replace(twin.options, parts=scored)))
        return dataclasses.replace(attempt_result, seconds=0.0, error=None, notes=[NOT_NEEDED],
                                   parts=[dataclasses.replace(p, score=0.0, failures=[], internal=[])
                                          for p in attempt_result.parts])

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = {key: pool.submit(run_one, case) for key, case in unique.items()}
        waiting: dict = {}  # an attempt's future -> the twins that wait on it
        for twin in twins:
            waiting.setdefault(futures[keys[attempt_of[twin.name].name]], []).append(twin)
        twin_futures = {}
        for done in as_completed(waiting):  # each twin is queued as soon as its attempt is graded
            for twin in waiting[done]:
                twin_futures[twin.name] = pool.submit(grade_twin, twin, done.result())
        by_key = {key: future.result() for key, future in futures.items()}
        twin_results = {name: future.result() for name, future in twin_futures.items()}
    results = [by_key[keys[c.name]] if c.expect != "twin" else twin_results[c.name] for c in cases]
    # the determinism check needs two real gradings of the reference
    if cases[1].name == "reference (again)":
        results[1] = grade(paths, cases[1].notebook, out / "reference" / "again", cases[1].options)
    return results


class CpuHog:
    """A busy machine: one spinning process per core while the block runs (`selftest --under-load`)."""

    def __enter__(self):
        code = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


def run(lab: "str | LabPaths", jobs: int = 2, sandbox: str = "auto", quick: bool | None = None,
        under_load: bool = False) -> int:
    paths = lab_paths(lab)
    if quick is None:
        quick = os.environ.get("IPT_SELFTEST", "").lower() == "quick"
    console = Console(highlight=False, width=160)
    fuzzer, peer_suite = start_fuzz(paths, QUICK_FUZZ if quick else FULL_FUZZ), start_peers(paths, quick)
    cases, problems = prepare(paths, sandbox, quick)
    out = build_dir("selftest", paths.lab, "results")
    if under_load:
        console.print(f"grading under load: {os.cpu_count()} spinning processes and {jobs} gradings at a time")
        with CpuHog():
            graded = _dedupe_grade(paths, cases, out, jobs)
    else:
        graded = _dedupe_grade(paths, cases, out, jobs)
    by_name = {c.name: r for c, r in zip(cases, graded, strict=True)}

    table = Table(title=f"selftest {paths.lab}" + (" (quick)" if quick else "") + (" under load" if under_load else ""))
    for column in ("submission", "score", "expected", "verdict", "seconds"):
        table.add_column(column)
    failures = list(problems)
    verdicts = {}
    for case, result in zip(cases, graded, strict=True):
        bad = verdict(case, result, by_name.get(case.twin))
        verdicts[case.name] = bad
        if bad:
            failures.append(f"{case.name}: {bad}")
        expected = {"attempt": "<= twin", "twin": "(honest)"}.get(case.expect, case.expect)
        if case.expect == "twin" and result.notes == [NOT_NEEDED]:
            table.add_row(case.name, "-", expected, "[green]not needed[/] (its attempt scored 0)", "0")
            continue
        if case.expect == "twin" and any(p.total == 0 for p in result.parts):
            expected += " graded on " + ", ".join(p.id for p in result.parts if p.total)
        table.add_row(case.name, f"{result.score:g}/{result.max_score:g}", expected,
                      "[green]ok[/]" if not bad else f"[red]{bad}[/]", f"{result.seconds:.1f}")
    console.print(table)

    first, second = graded[0], graded[1]
    if cases[1].name == "reference (again)" and \
            [(p.id, p.score, p.failures) for p in first.parts] != [(p.id, p.score, p.failures) for p in second.parts]:
        failures.append("two gradings of the reference differ: grading is not deterministic")
    failures += feedback_leaks(paths, out)
    hand_total = len(load_mutants(paths))
    if hand_total < 10:
        failures.append(f"only {hand_total} mutants; every lab needs at least ten")
    hand = [c for c in cases if c.name.startswith("mutant ")]
    machine = [c for c in cases if c.name.startswith("machine ")]
    attempts = [c for c in cases if c.expect == "attempt"]
    classes, trouble = catalogue_problems(paths)
    failures += trouble
    fuzz_cases, fuzz_failure = probe_result(fuzzer, "the fuzzer")
    peer_cases, peer_failure = probe_result(peer_suite, "the peer-suite cases")
    failures += [f for f in (fuzz_failure, peer_failure) if f]
    generated = len(mutation.generate(paths.solution.read_text()))

    def caught(group):
        return sum(1 for c in group if verdicts[c.name] is None)

    console.print(f"mutants caught: {caught(hand)}/{len(hand)} hand-written"
                  + (f" (sample of {hand_total})" if len(hand) < hand_total else "")
                  + f"; machine: {generated} generated, {len(variants.equivalents(paths))} equivalent, "
                  f"{caught(machine)}/{len(machine)} of a fixed sample killed")
    console.print(f"adversarial attempts held: {caught(attempts)}/{len(attempts)}"
                  + (f" (sample of {len(variants.attempts(paths))})" if quick else "") + f"; catalogue classes: {classes}; "
                  f"fuzz cases vs PyTorch: {fuzz_cases}; peer-suite cases: {peer_cases}")
    console.print(f"sandbox level: {first.level}")
    for m in {m["name"]: m for m in first.measurements}.values():  # a figure measured twice: the last
        console.print(f"measured on the reference: {m['name']}: {m['value']:.3g}{m['unit']}")
    for failure in failures:
        console.print(f"[red]FAIL[/] {failure}")
    console.print("[green]selftest passed[/]" if not failures else f"[red]selftest failed ({len(failures)} problems)[/]")
    return 1 if failures else 0
