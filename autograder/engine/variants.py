"""The notebooks a lab's graders are proven with, built from its single source.

- `reference`: the solution notebook; `stub`: the released notebook;
- hand-written mutants (`mutants.toml`: find/replace in the solution source);
- machine mutants (`autograder.engine.mutation`: cosmic-ray operators over the solution regions);
- adversarial attempts (`adversarial.toml`): a base notebook (reference or stub) whose listed solution
  cells hold a cheat, and each attempt's *honest twin*: the same base with those cells put back to the
  released stub. An attempt may never score more than its twin, part by part.
"""
from __future__ import annotations

import copy
import re
import functools
import tomllib
from dataclasses import dataclass, field

import nbformat

from autograder.authoring.generate import solution_notebook, student_notebook
from autograder.paths import LabPaths

ATTEMPT_KINDS = ("hidden-material", "delegation", "monkeypatch", "process", "degenerate", "hard-coded", "timing")


@dataclass
class Attempt:
    name: str
    kind: str
    description: str
    base: str  # "reference" | "stub"
    cells: dict[str, str] = field(default_factory=dict)


def _toml(path) -> dict:
    return tomllib.loads(path.read_text()) if path.exists() else {}


def hand_mutants(paths: LabPaths) -> list[dict]:
    return _toml(paths.mutants).get("mutant", [])


def attempts(paths: LabPaths) -> list[Attempt]:
    data = _toml(paths.hidden / "adversarial.toml").get("attempt", [])
    return [Attempt(a.get("name", "?"), a.get("kind", "?"), a.get("description", ""), a.get("base", "reference"),
                    dict(a.get("cells", {}))) for a in data]


def equivalents(paths: LabPaths) -> dict[str, str]:
    """Machine mutants triaged as equivalent: id -> reason."""
    return {e["id"]: e.get("reason", "") for e in _toml(paths.hidden / "equivalents.toml").get("equivalent", [])}


@functools.lru_cache(maxsize=16)
def _notebooks(text: str) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    return solution_notebook(text), student_notebook(text)


def reference(paths: LabPaths) -> nbformat.NotebookNode:
    """The solution notebook (a fresh copy: callers may change it)."""
    return copy.deepcopy(_notebooks(paths.solution.read_text())[0])


def stub(paths: LabPaths) -> nbformat.NotebookNode:
    """The released notebook (a fresh copy: callers may change it)."""
    return copy.deepcopy(_notebooks(paths.solution.read_text())[1])


def _solution_cells(nb) -> dict[str, object]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def attempt_problems(paths: LabPaths, attempt: Attempt) -> list[str]:
    known = _solution_cells(stub(paths))
    problems = [f"attempt {attempt.name!r}: {gid!r} is not a solution cell" for gid in attempt.cells if gid not in known]
    if attempt.base not in ("reference", "stub"):
        problems.append(f"attempt {attempt.name!r}: base must be 'reference' or 'stub', not {attempt.base!r}")
    if attempt.kind not in ATTEMPT_KINDS:
        problems.append(f"attempt {attempt.name!r}: kind {attempt.kind!r} is not one of {', '.join(ATTEMPT_KINDS)}")
    if not attempt.cells:
        problems.append(f"attempt {attempt.name!r} changes no cell")
    return problems


def _with_cells(nb, cells: dict[str, str]) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in cells:
            cell.source = cells[gid]
    return nb


def attempt_notebook(paths: LabPaths, attempt: Attempt) -> nbformat.NotebookNode:
    base = reference(paths) if attempt.base == "reference" else stub(paths)
    return _with_cells(base, attempt.cells)


def twin_notebook(paths: LabPaths, attempt: Attempt) -> nbformat.NotebookNode:
    """The honest twin: the attempt's base with the cheating cells put back to the released stub."""
    released = _solution_cells(stub(paths))
    base = reference(paths) if attempt.base == "reference" else stub(paths)
    return _with_cells(base, {gid: released[gid].source for gid in attempt.cells if gid in released})


def home_first(paths: LabPaths, nb) -> tuple[str, ...]:
    """Every part of the lab, those that follow a solution cell where `nb` differs from the reference
    first. A mutant graded with pytest's -x in this order is usually caught by its first part, so the
    rest is not run; the verdict is the same as in notebook order."""
    release, solved = stub(paths), _solution_cells(reference(paths))
    changed = {gid for gid, cell in _solution_cells(nb).items() if cell.source != solved.get(gid, cell).source}
    order, home, pending = [], [], False
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in changed:
            pending = True
        if meta.get("grade") and cell.cell_type == "code" and "points" in meta:
            (home if pending else order).append(meta["grade_id"])
            pending = False
    return tuple(home + order)


@dataclass
class Recipe:
    """How an example submission is built (examples/recipes.toml), so it follows the reference as the
    reference changes: the reference, with hand-written mutants applied and some parts left as stubs."""
    notebook: str
    description: str
    mutants: list[str] = field(default_factory=list)
    stub: list[str] = field(default_factory=list)  # solution cells (grade ids) put back to the released stub
    cells: dict[str, str] = field(default_factory=dict)  # grade id -> a file in examples/ with learner-written code


_AUTHORING_LINE = re.compile(r"^\s*(### (BEGIN|END) SOLUTION|#.*IPT-CANARY)")


def recipes(paths: LabPaths) -> list[Recipe]:
    data = _toml(paths.examples / "recipes.toml").get("example", [])
    return [Recipe(e["notebook"], e.get("description", ""), list(e.get("mutants", [])), list(e.get("stub", [])),
                   dict(e.get("cells", {}))) for e in data]


def example_notebook(paths: LabPaths, recipe: Recipe) -> nbformat.NotebookNode:
    """The reference with the recipe's mutants applied (each must match once), its stub cells put back and
    its own cells (learner-written code kept in files beside the recipe) put in."""
    text = paths.solution.read_text()
    hand = {m["name"]: m for m in hand_mutants(paths)}
    for name in recipe.mutants:
        if name not in hand or text.count(hand[name]["find"]) != 1:
            raise ValueError(f"example {recipe.notebook}: mutant {name!r} is unknown or no longer applies")
        text = text.replace(hand[name]["find"], hand[name]["replace"])
    released = _solution_cells(stub(paths))
    unknown = [gid for gid in recipe.stub if gid not in released]
    if unknown:
        raise ValueError(f"example {recipe.notebook}: {unknown} are not solution cells")
    unknown = [gid for gid in recipe.cells if gid not in released]
    if unknown:
        raise ValueError(f"example {recipe.notebook}: {unknown} are not solution cells")
    own = {gid: (paths.examples / file).read_text() for gid, file in recipe.cells.items()}
    nb = _with_cells(solution_notebook(text), {**{gid: released[gid].source for gid in recipe.stub}, **own})
    for cell in _solution_cells(nb).values():  # a learner's upload has no solution markers or canary lines
        cell.source = "\n".join(line for line in cell.source.splitlines()
                                if not _AUTHORING_LINE.match(line))
    return nb


@functools.lru_cache(maxsize=None)
def reference_module(lab: str):
    """The reference solution's exported cells executed as a module, in P0 (fuzzers, peer suites and
    benchmarks). With IPT_REFERENCE_SOLUTION=<file> the solution source is read from that file instead:
    `mutation --peers` runs a lab's peer suite on a machine mutant that way (our own code, never a learner's)."""
    import os
    from pathlib import Path

    from labkit.notebook import assemble, load_module

    from autograder.paths import lab_paths
    other = os.environ.get("IPT_REFERENCE_SOLUTION")
    nb = solution_notebook(Path(other).read_text()) if other else reference(lab_paths(lab))
    module, errors = load_module(assemble(nb, nb).cells, f"{lab}_reference")
    if errors:
        raise RuntimeError(f"the {lab} reference does not load: " + "; ".join(errors))
    return module
