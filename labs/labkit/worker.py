"""`python -m labkit.worker LABDIR OUT.jsonl [PART...]`: one lab's public tests in a throwaway process.

Assembles the exported cells of the lab's working notebook, runs them, then runs each part's public
tests against them, appending one JSON line per step to OUT so that a crash or timeout loses little.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from labkit.labs import LabDir
from labkit.notebook import NotebookError, assemble, lab_info, load_module, read_notebook
from labkit.runner import run_part


def main(argv: list[str]) -> int:
    labdir, out, parts = LabDir(Path(argv[0]).resolve()), Path(argv[1]), argv[2:]

    def emit(record: dict) -> None:
        with out.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")

    os.chdir(labdir.path)
    try:
        nb = read_notebook(labdir.notebook)
    except NotebookError as exc:
        emit({"error": str(exc)})
        return 0
    assembly = assemble(nb, nb)
    module, errors = load_module(assembly.cells, name=labdir.slug)
    emit({"problems": assembly.problems + errors})
    origin = f"your notebook ({labdir.notebook.name})"
    for part in parts or [p.id for p in lab_info(nb).parts]:
        emit(run_part(labdir, part, module.__dict__, origin).to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
