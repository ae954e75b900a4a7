"""Reading lab notebooks and assembling the learner's module from their exported cells.

Both sides use this: the learner's `check()`/`status` and the grader. The release notebook is the
trusted layout: locked exported cells come from it, solution cells from the submission (by grade_id).
"""
from __future__ import annotations

import json
import logging
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024
EXPORT_TAG = "export"


class NotebookError(Exception):
    """A notebook that cannot be read as a lab notebook; the message is meant for the learner."""


@dataclass(frozen=True)
class Part:
    id: str
    title: str
    points: float


@dataclass(frozen=True)
class LabInfo:
    lab: str
    title: str
    parts: list[Part]

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts)

    def part(self, part_id: str) -> Part:
        for p in self.parts:
            if p.id == part_id:
                return p
        raise KeyError(f"{self.lab} has no part {part_id!r}; parts: {', '.join(p.id for p in self.parts)}")


@dataclass
class Assembly:
    """The learner's module as (grade_id, source) code cells, with what went wrong on the way."""

    cells: list[tuple[str, str]]
    problems: list[str] = field(default_factory=list)

    def source(self) -> str:
        return "\n\n".join(f"# --- cell {gid} ---\n{src}" for gid, src in self.cells) + "\n"


def read_notebook(source: str | Path | bytes) -> nbformat.NotebookNode:
    """Parse a notebook from a path or bytes; raise NotebookError with a clear message."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                raise NotebookError(f"{path.name} is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs and submit again")
            data = path.read_bytes()
        except OSError as exc:
            raise NotebookError(f"cannot read {path.name}: {exc.strerror}") from None
    else:
        data = source
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"the notebook is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB; clear its outputs and submit again")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise NotebookError(f"the file is not a Jupyter notebook (not valid JSON: {str(exc)[:200]})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise NotebookError("the file is JSON but not a Jupyter notebook (no list of cells)")
    if raw.get("nbformat") != 4:
        raise NotebookError(f"expected a notebook in format 4, got format {raw.get('nbformat')!r}")
    logging.getLogger("traitlets").setLevel(logging.CRITICAL)
    try:
        return nbformat.from_dict(raw)
    except Exception as exc:  # nbformat raises a variety of errors on odd structures
        raise NotebookError(f"the notebook's structure is damaged: {exc}") from None


def _meta(cell) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def _source(cell) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _tags(cell) -> list:
    meta = cell.get("metadata")
    tags = meta.get("tags") if isinstance(meta, dict) else None
    return tags if isinstance(tags, list) else []


def grade_id(cell) -> str | None:
    gid = _meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_exported(cell) -> bool:
    return cell.get("cell_type") == "code" and EXPORT_TAG in _tags(cell)


def is_solution(cell) -> bool:
    return bool(_meta(cell).get("solution"))


def lab_info(nb) -> LabInfo:
    """Lab id, title and graded parts (from the part cells: nbgrader grade=true with points)."""
    meta = nb.get("metadata", {}).get("inside_pytorch", {})
    parts = []
    for cell in nb.cells:
        nbg = _meta(cell)
        if nbg.get("grade") and cell.get("cell_type") == "code" and "points" in nbg:
            title = cell.get("metadata", {}).get("part_title", nbg["grade_id"])
            parts.append(Part(nbg["grade_id"], title, float(nbg["points"])))
    return LabInfo(meta.get("lab", "?"), meta.get("title", ""), parts)


_MAGIC = re.compile(r"^(\s*)([%!].*)$")


def strip_magics(source: str) -> str:
    """Replace IPython magics and shell escapes, which plain Python cannot run, by `pass`."""
    return "\n".join(_MAGIC.sub(r"\1pass  # notebook magic skipped: \2", line) for line in source.splitlines())


def assemble(release_nb, submission_nb) -> Assembly:
    """The learner's module: the release's exported cells in order, solution cells from the submission."""
    submitted: dict[str, object] = {}
    problems: list[str] = []
    for cell in submission_nb.get("cells", []):
        gid = grade_id(cell) if isinstance(cell, dict) else None
        if gid is None:
            continue
        if gid in submitted:
            problems.append(f"cell {gid!r} appears more than once; the first copy was graded")
            continue
        submitted[gid] = cell

    cells = []
    for cell in release_nb.cells:
        if not is_exported(cell):
            continue
        gid = grade_id(cell)
        if not is_solution(cell):
            cells.append((gid, _source(cell)))  # locked: always the release's own text
            continue
        mine = submitted.get(gid)
        if mine is None:
            problems.append(f"cell {gid!r} is missing from the notebook; it was graded as not attempted")
            cells.append((gid, _source(cell)))
        elif mine.get("cell_type") != "code":
            problems.append(f"cell {gid!r} is no longer a code cell; it was graded as not attempted")
            cells.append((gid, _source(cell)))
        else:
            cells.append((gid, strip_magics(_source(mine))))
    return Assembly(cells, problems)


def load_module(cells: list[tuple[str, str]], name: str = "submission",
                builtins_table: dict | None = None) -> tuple[types.ModuleType, list[str]]:
    """Execute cells one by one into a fresh module; a failing cell is reported, the rest still run.
    `builtins_table` replaces the module's builtins (labkit's deny list guards `__import__` there)."""
    module = types.ModuleType(name)
    if builtins_table is not None:
        module.__dict__["__builtins__"] = builtins_table
    module.__dict__["check"] = lambda *args, **kwargs: None  # check() is a notebook tool, not lab code
    errors = []
    for gid, src in cells:
        try:
            exec(compile(src, f"<cell {gid}>", "exec", dont_inherit=True), module.__dict__)  # not our __future__ flags
        except BaseException as exc:  # noqa: BLE001 - one bad cell must not stop the others
            if isinstance(exc, KeyboardInterrupt):
                raise
            errors.append(f"cell {gid!r} raised {type(exc).__name__}: {exc}")
    return module, errors
