"""The learner's module as the graders build it: exported cells in notebook order, in a fresh module,
with the lab's denied modules out of reach.

In a Jupyter kernel, labkit remembers the source of every cell as it runs (IPython's `pre_run_cell`
event carries the cell's id, and lab notebooks have stable cell ids), so check() sees the code you ran
even before you save. A cell not run since the kernel started is taken from the saved notebook.
"""
from __future__ import annotations

import builtins
import os
import tomllib
import types
from pathlib import Path

import labkit

from labkit.labs import LabDir
from labkit.notebook import NotebookError, assemble, load_module, read_notebook

RULES = Path(__file__).resolve().parent / "rules.toml"


class DeniedModule(ModuleNotFoundError):
    """Lab code imported a module the lab does not allow (the graders run without it)."""


def denied_modules(lab_id: str) -> tuple[str, ...]:
    try:
        rules = tomllib.loads(RULES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(rules.get(lab_id, {}).get("deny_modules", ()))


def track_cells() -> None:
    labkit._track_cells()


def ran_sources() -> dict[str, str]:
    return dict(labkit._ran)


def guarded_builtins(lab_id: str, denied: tuple[str, ...]) -> dict:
    """builtins whose __import__ refuses the denied modules (what lab code sees, like in grading)."""
    real_import = builtins.__import__

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.split(".")[0] in denied:
            raise DeniedModule(f"{lab_id} is built from scratch: your lab code cannot import {name.split('.')[0]} "
                               "(the graders run it without that module)", name=name.split(".")[0])
        return real_import(name, globals, locals, fromlist, level)

    table = dict(builtins.__dict__)
    table["__import__"] = guarded_import
    return table


def learner_module(labdir: LabDir, ran: dict[str, str] | None = None) -> tuple[types.ModuleType, list[str]]:
    """(module, problems): the saved notebook's exported cells, each replaced by the source last run in
    this kernel when there is one, executed in a fresh module with the lab's deny list."""
    nb = read_notebook(labdir.notebook)   # NotebookError goes to the caller
    ran = labkit._ran if ran is None else ran
    for cell in nb.cells:
        cid = cell.get("id")
        if cid in ran and cell.get("cell_type") == "code":
            cell["source"] = ran[cid]
    assembly = assemble(nb, nb)
    denied = denied_modules(labdir.id)
    cwd = os.getcwd()
    os.chdir(labdir.path)   # lab code may open files beside its notebook
    try:
        module, errors = load_module(assembly.cells, name=labdir.slug,
                                     builtins_table=guarded_builtins(labdir.id, denied) if denied else None)
    finally:
        os.chdir(cwd)
    errors = [e.replace("raised DeniedModule: ", "stopped: ") for e in errors]
    return module, assembly.problems + errors


__all__ = ["DeniedModule", "NotebookError", "denied_modules", "learner_module", "track_cells", "ran_sources"]
