"""The course notebooks (course/**/*.ipynb) are committed clean and execute without error.

Each notebook runs top to bottom in a fresh kernel (nbclient), from its own folder so that it
imports its helper modules, with a per-cell timeout (execution time is reported, not asserted). A failure
names the notebook and the failing cell.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
CELL_TIMEOUT_S = 120

NOTEBOOKS = sorted(p for p in COURSE.glob("**/*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.fixture
def kernel_env(monkeypatch):
    """What the book build gives the kernel: one thread, temp files under build/tmp."""
    tmp = ROOT / "build" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # let the kernel use the inline backend


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
def test_notebook_executes(path, kernel_env):
    nb = nbformat.read(path, as_version=4)
    current = {"index": None}

    def on_cell_start(cell, cell_index, **_):
        current["index"] = cell_index

    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}}, on_cell_start=on_cell_start)
    start = time.monotonic()
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as err:
        index = current["index"]
        source = nb.cells[index].source if index is not None else "?"
        kind = "timed out" if isinstance(err, CellTimeoutError) else "failed"
        pytest.fail(f"{_rel(path)}: cell {index} {kind}\n--- cell source ---\n{source}\n"
                    f"--- error ---\n{err}", pytrace=False)
    elapsed = time.monotonic() - start  # reported, not asserted: wall time on a shared 2-core machine is noise
    images = sum("image/png" in out.get("data", {}) for cell in nb.cells
                 if cell.cell_type == "code" for out in cell.outputs)
    print(f"{_rel(path)}: executed in {elapsed:.1f} s, {images} figure(s)")


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
