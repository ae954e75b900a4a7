"""Machine-made mutants: cosmic-ray's mutation operators applied to a lab's solution regions.

`python -m autograder mutation labNN --list` lists them; `--run` grades each through the real grader
(stopping at the first lost point) and reports which survive. A survivor is triaged by a test that kills
it, or by an entry in the lab's `equivalents.toml` (`[[equivalent]] id = ... reason = ...`).

A mutant's id is a hash of the operator and of the line before and after the change (plus an index
among identical lines), so it survives edits elsewhere in the solution.
"""
from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder.paths import LabPaths, build_dir

# A classic, compact operator set (the full cosmic-ray catalogue replaces every binary operator by
# every other one: thousands of mostly redundant mutants per lab).
OPERATORS = [
    *(f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in [
        ("Add", "Sub"), ("Sub", "Add"), ("Mul", "Div"), ("Div", "Mul"), ("Mul", "Add"), ("Add", "Mul"),
        ("FloorDiv", "Div"), ("Div", "FloorDiv"), ("Mod", "FloorDiv"), ("Pow", "Mul"), ("FloorDiv", "Mul")]),
    *(f"core/ReplaceComparisonOperator_{a}_{b}" for a, b in [
        ("Lt", "LtE"), ("LtE", "Lt"), ("Gt", "GtE"), ("GtE", "Gt"), ("Eq", "NotEq"), ("NotEq", "Eq"),
        ("Is", "IsNot"), ("IsNot", "Is"), ("Lt", "Gt"), ("Gt", "Lt")]),
    "core/AddNot", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue", "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd", "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak",
    "core/NumberReplacer", "core/ZeroIterationForLoop", "core/ReplaceUnaryOperator_USub_UAdd",
    "core/ExceptionReplacer",
]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass
class MachineMutant:
    id: str
    operator: str
    line: int          # 1-based line in the solution source
    before: str
    after: str
    source: str        # the whole mutated solution source

    def describe(self) -> str:
        return f"{self.id} L{self.line} {self.operator.removeprefix('core/')}: {self.before.strip()} -> {self.after.strip()}"


def solution_lines(text: str) -> set[int]:
    """1-based numbers of the lines inside solution regions."""
    inside, lines = False, set()
    for number, line in enumerate(text.splitlines(), 1):
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        elif inside and line.strip() and not line.lstrip().startswith("#"):
            lines.add(number)
    return lines


def _subtree_state(node) -> list:
    """What an operator may change in place below `node`: every leaf's text and every node's child list."""
    state, stack = [], [node]
    while stack:
        item = stack.pop()
        if hasattr(item, "children"):
            state.append((item, "children", list(item.children)))
            stack.extend(item.children)
        else:
            state.append((item, "value", item.value))
            state.append((item, "prefix", item.prefix))
    return state


def _mutate_in_place(tree, node, operator, index) -> str | None:
    """The code of `tree` with `operator`'s `index`-th change at `node` (cosmic-ray's `mutate_code` for that
    occurrence, without parsing the code again); the tree is put back as it was before returning."""
    parent = node.parent
    slot = parent.children.index(node) if parent is not None else None
    saved = _subtree_state(node)
    try:
        new = operator.mutate(node, index)
        if new is not node and parent is not None:
            parent.children[slot] = new
        return tree.get_code()
    finally:
        if parent is not None:
            parent.children[slot] = node
        for item, attribute, value in saved:
            setattr(item, attribute, value)


@functools.lru_cache(maxsize=8)  # the selftest asks twice
def generate(text: str, exact: bool = False) -> list[MachineMutant]:
    """Every mutant of the curated operators whose change lies inside a solution region. Each chunk is
    parsed once and mutated in place (then restored); `exact=True` uses cosmic-ray's `mutate_code` (a fresh
    parse per mutant, as cosmic-ray itself does; several times slower) and must give the same list."""
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    from autograder.authoring.generate import split_cells

    allowed = solution_lines(text)
    original = text.splitlines()
    operators = [(name, get_operator(name)()) for name in OPERATORS]
    mutants, seen = [], {}
    for offset, chunk in split_cells(text):
        count = chunk.count("\n") + 1
        if not any(offset + i in allowed for i in range(1, count + 1)):
            continue
        tree = get_ast(chunk)
        nodes = list(ast_nodes(tree))
        for name, operator in operators:
            occurrence = 0
            for node in nodes:
                for at, (start, _end) in enumerate(operator.mutation_positions(node)):
                    index, occurrence = occurrence, occurrence + 1
                    if offset + start[0] not in allowed:
                        continue
                    if exact:
                        mutated_chunk = mutate_code(chunk, operator, index)
                    else:
                        mutated_chunk = _mutate_in_place(tree, node, operator, at)
                        if tree.get_code() != chunk:  # an operator changed something outside `node`
                            raise RuntimeError(f"mutation: {name} did not restore the tree at line {offset + start[0]}")
                    if mutated_chunk is None or mutated_chunk == chunk:
                        continue
                    old, new = chunk.splitlines(), mutated_chunk.splitlines()
                    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
                    if len(new) != len(old) or not changed or any(offset + i + 1 not in allowed for i in changed):
                        continue
                    lines = list(original)
                    for i in changed:
                        lines[offset + i] = new[i]
                    before = "\n".join(old[i] for i in changed)
                    after = "\n".join(new[i] for i in changed)
                    key = f"{name}|{before.strip()}|{after.strip()}"
                    seen[key] = seen.get(key, 0) + 1
                    digest = hashlib.sha1(f"{key}|{seen[key]}".encode()).hexdigest()[:10]
                    source = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
                    mutants.append(MachineMutant(digest, name, offset + changed[0] + 1, before, after, source))
    return mutants


def _save(cache_file: Path, cache: dict) -> None:
    temporary = cache_file.with_suffix(".tmp")
    temporary.write_text(json.dumps(cache, indent=0))
    temporary.replace(cache_file)


def sample(mutants: list[MachineMutant], count: int, skip: set[str] = frozenset()) -> list[MachineMutant]:
    """A fixed, spread-out sample (the same on every machine and run)."""
    pool = sorted((m for m in mutants if m.id not in skip), key=lambda m: m.id)
    return random.Random(20261123).sample(pool, min(count, len(pool)))


def notebook(paths: LabPaths, mutant: MachineMutant):
    from autograder.authoring.generate import solution_notebook
    return solution_notebook(mutant.source)


def run(paths: LabPaths, mutants: list[MachineMutant], jobs: int = 2, sandbox: str = "auto",
        progress=None) -> list[dict]:
    """Grade each mutant (stop at the first lost point); returns one record per mutant."""
    import nbformat

    from autograder.engine import variants
    from autograder.engine.pipeline import Options, fingerprint, grade
    folder = build_dir("mutation", paths.lab)
    cache_file = folder / "cache.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    stamp = fingerprint(paths)
    lock = threading.Lock()

    def one(mutant: MachineMutant) -> dict:
        key = f"{mutant.id}:{stamp}"
        if key in cache:
            record = cache[key]
        else:
            path = folder / f"machine-{mutant.id}.ipynb"
            nb = notebook(paths, mutant)
            path.write_text(nbformat.writes(nb))
            result = grade(paths, path, folder / "results" / mutant.id, Options(sandbox, True, variants.home_first(paths, nb)))
            record = {"killed": result.score < result.max_score, "score": result.score, "error": result.error,
                      "seconds": result.seconds,
                      "failures": [f for p in result.parts for f in p.failures][:2]}
            with lock:  # saved as we go: an interrupted exhaustive run keeps what it graded
                cache[key] = record
                _save(cache_file, cache)
        record = {**record, **{k: v for k, v in asdict(mutant).items() if k != "source"}}
        if progress:
            progress(record)
        return record

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        records = list(pool.map(one, mutants))
    # the report holds the latest verdict of every mutant graded so far: a run of a few ids (a triage
    # check) updates those and keeps the rest, so `--survivors` still finds the whole run's survivors
    report = folder / "report.json"
    kept = json.loads(report.read_text()) if report.exists() else []
    graded = {r["id"] for r in records}
    report.write_text(json.dumps([r for r in kept if r["id"] not in graded] + records, indent=1))
    return records


def peer_verdict(paths: LabPaths, mutant: MachineMutant) -> str:
    """Run the lab's peer suite (cases modelled on public suites) on a mutant, in a P0 subprocess. A
    survivor of the graders that the peer suite kills shows a hole in the graders, found by cases we did
    not write for them."""
    import os
    import subprocess
    import sys

    from autograder.paths import REPO, project_env
    source = build_dir("mutation", paths.lab) / f"machine-{mutant.id}.py"
    source.write_text(mutant.source)
    env = {**os.environ, **project_env(), "IPT_REFERENCE_SOLUTION": str(source),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "labs")])}
    code = f"from autograder.labs.{paths.lab} import peers; print('PEER-CASES', peers.run())"
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "did not finish in 600 s"
    if proc.returncode == 0 and "PEER-CASES" in proc.stdout:
        return "agrees (survives the peer cases too)"
    last = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()][-3:]
    return "KILLS it (a hole in the graders): " + " | ".join(last)[:400]


def main(lab: str, list_only: bool, limit: int | None, ids: list[str], jobs: int, survivors_only: bool,
         peers: bool = False) -> int:
    from rich.console import Console

    from autograder.engine.variants import equivalents
    from autograder.paths import lab_paths
    console = Console(highlight=False)
    paths = lab_paths(lab)
    mutants = generate(paths.solution.read_text())
    equivalent = equivalents(paths)
    unknown = sorted(set(equivalent) - {m.id for m in mutants})
    if list_only:
        for m in mutants:
            console.print(("[dim]equivalent[/] " if m.id in equivalent else "") + m.describe(), markup=False)
        console.print(f"{len(mutants)} machine mutants ({len(equivalent)} listed as equivalent)")
        return 0
    chosen = [m for m in mutants if m.id not in equivalent]
    if ids:
        chosen = [m for m in mutants if m.id in ids]
    elif survivors_only:
        report = build_dir("mutation", paths.lab) / "report.json"
        alive = {r["id"] for r in json.loads(report.read_text()) if not r["killed"]} if report.exists() else set()
        chosen = [m for m in chosen if m.id in alive]
    if limit:
        chosen = sample(chosen, limit)
    done = [0]

    def progress(record):
        done[0] += 1
        mark = "killed " if record["killed"] else "[red]SURVIVED[/]"
        console.print(f"[{done[0]}/{len(chosen)}] {mark} {record['id']} L{record['line']} "
                      f"{record['operator'].removeprefix('core/')}: {record['before'].strip()[:70]} -> {record['after'].strip()[:70]}"
                      .replace("[", "\\[").replace("\\[red]", "[red]").replace("\\[/]", "[/]"))

    records = run(paths, chosen, jobs, progress=progress)
    alive = [r for r in records if not r["killed"]]
    errors = [r for r in records if r["error"]]
    rate = 100 * (len(records) - len(alive)) / len(records) if records else 100.0
    console.print(f"machine mutants: {len(mutants)} generated, {len(equivalent)} equivalent, "
                  f"{len(records)} graded, {len(records) - len(alive)} killed, {len(alive)} surviving "
                  f"(kill rate {rate:.1f}%)")
    by_id = {m.id: m for m in mutants}
    for r in alive:
        console.print(f"  survivor {r['id']} L{r['line']}: {r['before'].strip()} -> {r['after'].strip()}", markup=False)
        if peers and (paths.hidden / "peers.py").exists():
            verdict = peer_verdict(paths, by_id[r["id"]])
            console.print(f"    peer suite: {verdict}", markup=False)
    for r in errors:
        console.print(f"  grading error on {r['id']}: {str(r['error'])[:200]}", markup=False)
    if unknown:
        console.print(f"equivalents.toml lists ids that no longer exist: {', '.join(unknown)}")
    return 0
