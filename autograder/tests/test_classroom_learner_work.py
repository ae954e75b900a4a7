"""Instructor commands never destroy a learner's work: `make labs` keeps an edited notebook (and writes the
fresh one aside), replaces one that holds no learner work, and `--force` overrides. The book reads committed
sources only (git), not the working copy."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import generate
from autograder.paths import LabPaths

TOYLAB = Path(__file__).parent / "toylab"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def lab(tmp_path, monkeypatch) -> LabPaths:
    root = tmp_path / "course"
    shutil.copytree(TOYLAB, root)
    paths = LabPaths("lab00", "lab00_toy", root)
    monkeypatch.setattr(generate, "LEDGER", tmp_path / "ledger.json")
    monkeypatch.setattr(generate, "BUILD", tmp_path / "build")
    assert generate.generate(paths, check=False) is False and paths.release_notebook.is_file()
    return paths


def author_changes_the_lab(paths: LabPaths) -> None:
    paths.solution.write_text(paths.solution.read_text().replace("# # A toy lab", "# # A toy lab, revised"))


def learner_types(paths: LabPaths, gid: str, code: str) -> None:
    nb = nbformat.read(paths.release_notebook, as_version=4)
    for cell in nb.cells:
        if cell.metadata["nbgrader"]["grade_id"] == gid:
            cell.source = code
    nbformat.write(nb, paths.release_notebook)


def test_make_labs_keeps_a_notebook_with_learner_edits(lab, capsys):
    learner_types(lab, "add_impl", "def add(a, b):\n    return a + b  # mine")
    mine = lab.release_notebook.read_text()
    author_changes_the_lab(lab)
    assert generate.generate(lab, check=False) is False
    assert lab.release_notebook.read_text() == mine, "the learner's notebook was overwritten"
    err = capsys.readouterr().err
    assert "kept labs/lab00_toy/lab00_toy.ipynb" in err and "your code in cell add_impl" in err
    aside = generate.BUILD / "labs" / "lab00_toy.ipynb"
    assert "A toy lab, revised" in aside.read_text()
    assert generate.generate(lab, check=False, force=True) is False
    assert "A toy lab, revised" in lab.release_notebook.read_text()


def test_make_labs_keeps_a_notebook_that_was_run(lab):
    nb = nbformat.read(lab.release_notebook, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="3\n")]
    code.execution_count = 1
    nbformat.write(nb, lab.release_notebook)
    before = lab.release_notebook.read_text()
    author_changes_the_lab(lab)
    generate.generate(lab, check=False)
    assert lab.release_notebook.read_text() == before


def test_make_labs_replaces_what_it_wrote_itself(lab):
    author_changes_the_lab(lab)
    generate.generate(lab, check=False)
    assert "A toy lab, revised" in lab.release_notebook.read_text()


def test_make_labs_replaces_an_untouched_notebook_it_has_no_record_of(lab):
    generate.LEDGER.unlink()
    author_changes_the_lab(lab)
    generate.generate(lab, check=False)
    assert "A toy lab, revised" in lab.release_notebook.read_text()


def test_book_reads_committed_sources_only(tmp_path):
    """book/build.py's committed_sources(): a file edited but not committed appears as committed."""
    repo = tmp_path / "repo"
    for name in ("book", "labs", "course"):
        (repo / name).mkdir(parents=True)
    (repo / "book" / "intro.md").write_text("# committed\n")
    (repo / "labs" / "note.md").write_text("stub\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (repo / "labs" / "note.md").write_text("my pasted solution\n")
    (repo / "labs" / "untracked.md").write_text("draft\n")
    sys.path.insert(0, str(REPO / "book"))
    try:
        import build as book_build
    finally:
        sys.path.pop(0)
    out = book_build.committed_sources(repo, tmp_path / "committed")
    assert (out / "labs" / "note.md").read_text() == "stub\n"
    assert not (out / "labs" / "untracked.md").exists()
    assert book_build.committed_sources(tmp_path / "committed", tmp_path / "again") is None  # not a checkout
