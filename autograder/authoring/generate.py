"""`make labs`: solutions/labNN_slug.py (jupytext percent) -> labs/labNN_slug/labNN_slug.ipynb.

The student notebook is the solution notebook with every solution region replaced by a stub
(nbgrader's ClearSolutions), outputs cleared and cell ids made stable. `--check` exits 1 when a
committed notebook differs from what the sources generate.
"""
from __future__ import annotations

import argparse
import re
import sys

import jupytext
import nbformat
from nbgrader.preprocessors import ClearSolutions

from autograder.paths import LabPaths, all_labs, lab_paths

CANARY = "IPT-CANARY"
KEEP_NOTEBOOK_META = ("kernelspec", "language_info", "inside_pytorch")


def solution_notebook(text: str) -> nbformat.NotebookNode:
    """The full reference notebook from jupytext text, normalised (stable ids, no jupytext header)."""
    nb = jupytext.reads(text, fmt="py:percent")
    nb.metadata = nbformat.NotebookNode({k: v for k, v in nb.metadata.items() if k in KEEP_NOTEBOOK_META})
    seen = set()
    for index, cell in enumerate(nb.cells):
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not gid:
            raise ValueError(f"cell {index} has no nbgrader grade_id:\n{cell.source[:200]}")
        if gid in seen:
            raise ValueError(f"duplicate grade_id {gid!r}")
        seen.add(gid)
        cell.id = re.sub(r"[^A-Za-z0-9_-]", "-", gid)[:64]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def student_notebook(text: str) -> nbformat.NotebookNode:
    """The release notebook: solution regions replaced by `raise NotImplementedError()`."""
    nb = solution_notebook(text)
    nb, _ = ClearSolutions().preprocess(nb, {})
    for cell in nb.cells:
        if CANARY in cell.source:
            raise ValueError(f"canary outside a solution region in cell {cell.metadata['nbgrader']['grade_id']!r}")
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def generate(paths: LabPaths, check: bool) -> bool:
    """Write (or with check=True, compare) one lab's notebook; True when it is up to date."""
    text = render(student_notebook(paths.solution.read_text()))
    target = paths.release_notebook
    current = target.read_text() if target.exists() else None
    if current == text:
        return True
    if not check:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target.relative_to(target.parents[2])}")
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.generate", description=__doc__)
    parser.add_argument("labs", nargs="*", help="lab ids (default: all)")
    parser.add_argument("--check", action="store_true", help="fail if a committed notebook is stale")
    args = parser.parse_args(argv)
    labs = [lab_paths(lab) for lab in args.labs] or [p for p in all_labs() if p.solution.exists()]
    stale = [p.slug for p in labs if not generate(p, args.check)]
    if args.check and stale:
        print(f"stale generated notebooks: {', '.join(stale)}; run `make labs` and commit", file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(labs)} lab notebook(s) up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
