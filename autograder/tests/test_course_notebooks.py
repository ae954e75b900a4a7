"""The course notebooks (course/**/*.ipynb) are committed clean and execute without error.

The book build (conftest's `book_build`, once per session) runs each notebook top to bottom in a fresh
kernel from its own folder, with a per-cell timeout; these tests read its executed copies, and a failure
names the notebook and the failing cell. The build reads committed sources: commit a notebook before
testing a change to it (CI tests a clean clone).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"

NOTEBOOKS = sorted(p for p in COURSE.glob("**/*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_stage_one_has_course_notebooks():
    assert any(p.parent.name == "01_tensors" for p in NOTEBOOKS), \
        "course/01_tensors/ has no course notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_rel)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, f"{_rel(path)}: cells {dirty} carry outputs; commit notebooks cleared"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_rel)
def test_notebook_executes(path, book_build):
    """Every cell ran without error. The book build executes each course notebook top to bottom in a fresh
    kernel from its own folder (one thread, a per-cell timeout, any error fails the build); this reads its
    executed copy rather than running the notebook a second time."""
    executed = book_build.executed / path.relative_to(ROOT)
    if not executed.is_file():
        mentions = [line for line in book_build.output.splitlines() if path.name in line or "Error" in line]
        pytest.fail(f"{_rel(path)} was not executed by the book build ({'it failed' if not book_build.ok else 'not in the book'}):\n"
                    + "\n".join(mentions[-40:] or [book_build.output[-4000:]]), pytrace=False)
    nb = nbformat.read(executed, as_version=4)
    code = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.source.strip()]
    not_run = [i for i, cell in code if cell.get("execution_count") is None]
    errors = [(i, out) for i, cell in code for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, (f"{_rel(path)}: cell {errors[0][0]} raised {errors[0][1].get('ename')}: "
                        f"{errors[0][1].get('evalue')}\n--- cell source ---\n{nb.cells[errors[0][0]].source}")
    assert not not_run, f"{_rel(path)}: cells {not_run} were not executed by the book build"
    assert book_build.ok, f"the book build failed:\n{book_build.output[-4000:]}"
    images = sum("image/png" in out.get("data", {}) for _, cell in code for out in cell.outputs)
    print(f"{_rel(path)}: executed by the book build, {len(code)} cells, {images} figure(s)")


def test_stride_plots_index_map_matches_torch():
    """The helper the stride diagrams rest on computes exactly torch's element addresses."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(COURSE / "01_tensors"))
    try:
        import stride_plots
    finally:
        sys.path.pop(0)
    base = torch.arange(60.0).reshape(3, 4, 5)
    views = [base, base.transpose(0, 2), base[1:, ::2, 3], base.select(1, 2),
             torch.arange(5.0).expand(4, 5), base[:, 1:3].permute(2, 0, 1),
             torch.arange(10.0).as_strided((8, 3), (1, 1), 0), base[2, 3, 1:2]]
    for view in views:
        flat = stride_plots.torch_flat_storage(view)
        index = torch.from_numpy(stride_plots.storage_index_map(view))
        assert torch.equal(flat[index], view), (view.shape, view.stride())
