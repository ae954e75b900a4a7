"""`make labs`: solutions/labNN_slug.py (jupytext percent) -> labs/labNN_slug/labNN_slug.ipynb.

The student notebook is the solution notebook with every solution region replaced by a stub
(nbgrader's ClearSolutions), outputs cleared and cell ids made stable. `--check` exits 1 when a
committed notebook differs from what the sources generate.

`make labs` never overwrites a notebook that holds a learner's work: a notebook is replaced only when it is
the committed one (git), or exactly what `make labs` last wrote there (build/labs/generated.json), or
holds no learner work (every solution cell still its stub, nothing run, no cells added). Otherwise the
fresh notebook goes to build/labs/<slug>.ipynb and the command says so; `--force` overwrites anyway.
"""
from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

from autograder.paths import BUILD, LabPaths, all_labs, lab_paths

LEDGER = BUILD / "labs" / "generated.json"   # sha256 of what `make labs` last wrote, per notebook

CANARY = "IPT-CANARY"
KEEP_NOTEBOOK_META = ("kernelspec", "language_info", "inside_pytorch")


@functools.lru_cache(maxsize=4096)
def _read_chunk(header: str, chunk: str) -> nbformat.NotebookNode:
    """jupytext's reading of the header and one cell's text (kept: callers copy what they change)."""
    return jupytext.reads(header + chunk, fmt="py:percent")


def split_cells(text: str) -> list[tuple[int, str]]:
    """jupytext py:percent text cut before each `# %%` marker: (index of the piece's first line, its text).
    The first piece is what precedes the first marker (the header), unless the text starts with one."""
    lines = text.splitlines(keepends=True)
    starts = [0, *(i for i, line in enumerate(lines) if i and line.startswith("# %%"))]
    return [(a, "".join(lines[a:b])) for a, b in zip(starts, [*starts[1:], len(lines)])]


def read_percent(text: str) -> nbformat.NotebookNode:
    """`jupytext.reads(text, fmt="py:percent")`, one cell at a time: the text is cut at its `# %%` markers and
    each cell is read from its own text, once per distinct text. A lab's selftest reads hundreds of texts that
    differ from the solution in one cell (mutants, attempts); each then costs about one cell's reading.
    jupytext records a cell's spacing (`lines_to_next_cell`) against the next line of code after it, so a
    cell is read together with the cells up to that line. A piece that does not read as the cells it holds
    falls back to reading the whole text."""
    pieces = [piece for _, piece in split_cells(text)]
    header = "" if pieces[0].startswith("# %%") else pieces.pop(0)
    chunks = pieces
    if not chunks:
        return jupytext.reads(text, fmt="py:percent")
    has_code = [any(line.strip() and not line.lstrip().startswith("#") for line in chunk.splitlines())
                for chunk in chunks]
    nb = copy.deepcopy(_read_chunk(header, ""))
    for k, chunk in enumerate(chunks):
        end = k + 1
        while end < len(chunks) and not has_code[end]:
            end += 1
        follow = chunks[k + 1:end + 1]
        piece = _read_chunk(header, chunk + "".join(follow))
        if len(piece.cells) != 1 + len(follow):
            return jupytext.reads(text, fmt="py:percent")
        nb.cells.append(copy.deepcopy(piece.cells[0]))
    return nb


def solution_notebook(text: str) -> nbformat.NotebookNode:
    """The full reference notebook from jupytext text, normalised (stable ids, no jupytext header)."""
    nb = read_percent(text)
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
    from nbgrader.preprocessors import ClearSolutions  # here, not at the top: importing nbgrader takes seconds

    nb = solution_notebook(text)
    nb, _ = ClearSolutions().preprocess(nb, {})
    for cell in nb.cells:
        if CANARY in cell.source:
            raise ValueError(f"canary outside a solution region in cell {cell.metadata['nbgrader']['grade_id']!r}")
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ledger() -> dict:
    try:
        return json.loads(LEDGER.read_text())
    except (OSError, ValueError):
        return {}


def _committed(path: Path) -> str | None:
    """The notebook as committed in git (None outside a git checkout or when not committed)."""
    try:
        rel = path.resolve().relative_to(path.resolve().parents[2])
        proc = subprocess.run(["git", "show", f"HEAD:{rel.as_posix()}"], cwd=path.resolve().parents[2],
                              capture_output=True, text=True, timeout=30)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def learner_work(current: str, fresh: str) -> list[str]:
    """What in `current` looks like a learner's work compared with the freshly generated notebook."""
    try:
        mine, new = nbformat.reads(current, as_version=4), nbformat.reads(fresh, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook is not ours to overwrite
        return ["the notebook cannot be read as a notebook"]
    fresh_cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in new.cells}
    found = []
    for cell in mine.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid not in fresh_cells and cell.source.strip():
            found.append(f"a cell you added ({cell.source.strip().splitlines()[0][:60]!r})")
        elif cell.get("cell_type") == "code" and (cell.get("outputs") or cell.get("execution_count")):
            found.append(f"outputs of cell {gid or '?'} (it was run)")
        elif gid in fresh_cells and not cell.metadata.get("nbgrader", {}).get("locked") \
                and cell.source != fresh_cells[gid].source and "raise NotImplementedError()" not in cell.source:
            found.append(f"your code in cell {gid}")
    return found


def generate(paths: LabPaths, check: bool, force: bool = False) -> bool:
    """Write (or with check=True, compare) one lab's notebook; True when it is up to date."""
    text = render(student_notebook(paths.solution.read_text()))
    target = paths.release_notebook
    current = target.read_text() if target.exists() else None
    if current == text:
        return True
    if check:
        return False
    ledger = _ledger()
    key = str(target.relative_to(paths.root)) if target.is_relative_to(paths.root) else str(target)
    work = [] if current is None or force or ledger.get(key) == _sha(current) or _committed(target) == current \
        else learner_work(current, text)
    if work:
        aside = BUILD / "labs" / target.name
        aside.parent.mkdir(parents=True, exist_ok=True)
        aside.write_text(text)
        print(f"kept {key}: it holds work that `make labs` did not write ({'; '.join(work[:3])}).\n"
              f"  The regenerated notebook is in {aside}. To replace yours anyway, save a copy of it first, "
              "then run `make labs FORCE=1`.", file=sys.stderr)
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    ledger[key] = _sha(text)
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    LEDGER.write_text(json.dumps(ledger, indent=1, sort_keys=True))
    print(f"wrote {target.relative_to(target.parents[2])}")
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.generate", description=__doc__)
    parser.add_argument("labs", nargs="*", help="lab ids (default: all)")
    parser.add_argument("--check", action="store_true", help="fail if a committed notebook is stale")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks even when they hold learner work")
    args = parser.parse_args(argv)
    labs = [lab_paths(lab) for lab in args.labs] or [p for p in all_labs() if p.solution.exists()]
    stale = [p.slug for p in labs if not generate(p, args.check, args.force)]
    if args.check and stale:
        print(f"stale generated notebooks: {', '.join(stale)}; run `make labs` and commit", file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(labs)} lab notebook(s) up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
