"""`python -m labkit.worker LABDIR OUT.jsonl [PART...]`: one lab's public tests in a throwaway process.

Assembles the exported cells of the lab's saved notebook as the graders do (fresh module, deny list), then runs each part's public
tests against them, appending one JSON line per step to OUT so that a crash or timeout loses little.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from labkit.labs import lab_dir
from labkit.learner import denied_modules, learner_module
from labkit.notebook import NotebookError, lab_info, read_notebook
from labkit.quickexit import at_exit_skip_final_gc
from labkit.runner import run_part


def main(argv: list[str]) -> int:
    at_exit_skip_final_gc()
    labdir, out, parts = lab_dir(Path(argv[0])), Path(argv[1]), argv[2:]

    def emit(record: dict) -> None:
        with out.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(record) + "\n")

    os.chdir(labdir.path)
    try:
        nb = read_notebook(labdir.notebook)
    except NotebookError as exc:
        emit({"error": str(exc)})
        return 0
    module, problems = learner_module(labdir, ran={})   # as the graders assemble it, with the deny list
    emit({"problems": [p for p in problems if "not attempted" not in p]})
    origin = f"your notebook ({labdir.notebook.name})"
    denied = denied_modules(labdir.id)
    for part in parts or [p.id for p in lab_info(nb).parts]:
        emit(run_part(labdir, part, module.__dict__, origin, denied).to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
