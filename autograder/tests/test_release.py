"""The student release and the leak scan: what goes out, what never does, and proof the scan can fail."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from autograder.authoring import leakscan, release
from autograder.tests import lab98_toy as toy

REPO = toy.REPO
SOLUTION_LINE = "    total_of_both_numbers = a + b"
HIDDEN_LINE = '    got = student.run("lab98.scenarios:add", 123456789, 987654321)'


@pytest.fixture(scope="module")
def toy_release(tmp_path_factory):
    """A toy course repository and its release, built once for the module."""
    root = toy.write_repo(tmp_path_factory.mktemp("repo") / "course-repo")
    dist = root / "dist"
    log: list[str] = []
    assert release.build(root, dist, log=log.append) == 0, "\n".join(log)
    return root, dist, log


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_release_holds_the_student_side(toy_release):
    root, dist, _ = toy_release
    out = dist / "student"
    for name in ("README.md", "Makefile", "requirements.txt", "environment.yml", "labs/conftest.py",
                 "labs/labkit/__init__.py", "labs/labkit/jupyter_config/jupyter_server_config.json",
                 "labs/lab98_toy/lab98_toy.ipynb", "labs/lab98_toy/tests/test_add.py",
                 "labs/lab98_toy/tests/test_scale.py", "course/01_toy/notes.md", "book/_config.yml"):
        assert (out / name).is_file(), f"{name} is missing from the release"
    makefile = (out / "Makefile").read_text()
    for target in ("setup:", "lab:", "status:", "submit:", "book:", "test-public:"):
        assert f"\n{target}" in makefile, f"the student Makefile lacks {target}"
    notebook = (out / "labs/lab98_toy/lab98_toy.ipynb").read_text()
    assert "raise NotImplementedError()" in notebook and "total_of_both_numbers" not in notebook


def test_release_holds_nothing_private(toy_release):
    root, dist, _ = toy_release
    released = files_of(dist / "student")
    assert not [name for name in released if name.split("/")[0] in ("solutions", "autograder")]
    private = {hashlib.sha256(p.read_bytes()).hexdigest(): p for folder in ("solutions", "autograder")
               for p in (root / folder).rglob("*") if p.is_file()}
    copies = [name for name, data in released.items() if hashlib.sha256(data).hexdigest() in private]
    assert not copies, f"released files identical to private ones: {copies}"
    assert not any(leakscan.CANARY.encode() in data for data in released.values())
    with tarfile.open(dist / "student.tar.gz") as tar:
        names = tar.getnames()
    assert not [n for n in names if "/solutions" in n or "/autograder" in n or "mutants" in n]


def test_archive_is_deterministic(toy_release, tmp_path):
    root, dist, _ = toy_release
    first = (dist / "student.tar.gz").read_bytes()
    assert release.build(root, tmp_path / "again", log=lambda _: None) == 0
    assert (tmp_path / "again" / "student.tar.gz").read_bytes() == first, "two builds gave different archives"
    with tarfile.open(dist / "student.tar.gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names[0] == release.ARCHIVE_ROOT and "inside-pytorch/labs/lab98_toy/lab98_toy.ipynb" in names
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", release.ARCHIVE_MTIME))
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", mtime)}
    released = files_of(dist / "student")
    with tarfile.open(dist / "student.tar.gz") as tar:
        for member in members:
            if member.isfile():
                assert tar.extractfile(member).read() == released[member.name.split("/", 1)[1]]


def test_leak_scan_is_clean_on_the_toy_release(toy_release):
    root, dist, _ = toy_release
    patterns = leakscan.Patterns.from_repo(root)
    assert len(patterns.solution) >= 3 and len(patterns.hidden) >= 2
    assert leakscan.scan([dist / "student"], patterns) == []


def test_leak_scan_catches_canary_solution_and_hidden_text(toy_release, tmp_path):
    """Plant each kind of leak into a copy of the release: the scanner must find every one, with its line."""
    root, dist, _ = toy_release
    copy = tmp_path / "student"
    shutil.copytree(dist / "student", copy)
    notes = copy / "course/01_toy/notes.md"
    notes.write_text(notes.read_text() + "\nSee IPT-CANARY for details.\n")
    notebook = json.loads((copy / "labs/lab98_toy/lab98_toy.ipynb").read_text())
    notebook["cells"].append({"cell_type": "code", "execution_count": None, "id": "planted", "metadata": {},
                              "outputs": [], "source": ["def add(a, b):\n", SOLUTION_LINE + "\n", "    return 1\n"]})
    (copy / "labs/lab98_toy/lab98_toy.ipynb").write_text(json.dumps(notebook, indent=1))
    (copy / "book/intro.md").write_text("# Toy course\n\n```python\n" + HIDDEN_LINE.strip() + "  # sneaky\n```\n")
    (copy / "book/page.html").write_text(
        '<pre><span class="n">total_of_both_numbers</span> <span class="o">=</span> '
        '<span class="n">a</span> <span class="o">+</span> <span class="n">b</span></pre>\n')
    (copy / "course/01_toy/figure.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0IPT-CANARY\0\xff")

    leaks = leakscan.scan([copy], leakscan.Patterns.from_repo(root))
    found = {(Path(l.path).relative_to(copy).as_posix(), l.kind) for l in leaks}
    assert ("course/01_toy/notes.md", "canary") in found
    assert ("labs/lab98_toy/lab98_toy.ipynb", "solution") in found
    assert ("book/intro.md", "hidden") in found
    assert ("book/page.html", "solution") in found
    assert ("course/01_toy/figure.png", "canary") in found
    by_file = {Path(l.path).relative_to(copy).as_posix(): l for l in leaks}
    assert by_file["course/01_toy/notes.md"].line == len(notes.read_text().splitlines())
    assert by_file["book/intro.md"].line == 4 and "autograder/labs/lab98/test_add.py:5" in by_file["book/intro.md"].origin
    assert "solutions/lab98_toy.py" in by_file["book/page.html"].origin
    assert len(found) == 5, leaks


def test_leakscan_command_fails_on_a_leak(toy_release, tmp_path):
    root, dist, _ = toy_release
    clean = subprocess.run([sys.executable, "-m", "autograder.authoring.leakscan", "--repo", str(root), str(dist / "student")],
                           capture_output=True, text=True, cwd=REPO)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (tmp_path / "leak.py").write_text("x = 1\n" + SOLUTION_LINE + "\n")
    leaky = subprocess.run([sys.executable, "-m", "autograder.authoring.leakscan", "--repo", str(root), str(tmp_path)],
                           capture_output=True, text=True, cwd=REPO)
    assert leaky.returncode == 1 and f"{tmp_path / 'leak.py'}:2: solution: solution line solutions/lab98_toy.py" in leaky.stdout


def test_release_fails_and_writes_no_archive_when_a_source_leaks(tmp_path):
    root = toy.write_repo(tmp_path / "repo")
    (root / "book/cheat.md").write_text("```python\n" + SOLUTION_LINE.strip() + "\n```\n")
    log: list[str] = []
    assert release.build(root, root / "dist", log=log.append) == 1
    assert not (root / "dist/student.tar.gz").exists()
    assert any("book/cheat.md:2: solution" in line for line in log), log


def test_distinctive_lines_rule():
    generic = ["import numpy as np", "from typing import Any, Optional, Sequence", "raise NotImplementedError()",
               "return None", "x = 1", "if __name__ == '__main__':", "for i in range(len(a)):", "    ### BEGIN SOLUTION",
               "return self", "    # YOUR CODE HERE", "assert isinstance(result, list)"]
    distinctive = ["total_of_both_numbers = a + b", "strides[i] = strides[i + 1] * shape[i + 1]",
                   "from autograder.labs.lab01.oracle import torch_view_chain"]
    assert not [line for line in generic if leakscan.is_distinctive(line)]
    assert all(leakscan.is_distinctive(line) for line in distinctive)


def test_the_real_release_is_clean(tmp_path):
    """`make release` on this repository: builds, holds every lab with public tests, and leaks nothing."""
    log: list[str] = []
    code = release.build(REPO, tmp_path / "dist", log=log.append)
    assert code == 0, "\n".join(log)
    out = tmp_path / "dist" / "student"
    for solution in sorted((REPO / "solutions").glob("lab[0-9][0-9]_*.py")):
        if (REPO / "labs" / solution.stem / "tests").is_dir():
            assert (out / "labs" / solution.stem / f"{solution.stem}.ipynb").is_file()
    assert not (out / "solutions").exists() and not (out / "autograder").exists()


def test_release_is_the_learners_entry_point(toy_release):
    """The release's `make lab` is learner-only (labkit's config turns the instructor tools off and the release
    has no autograder/ to turn them back on); the READMEs send learners to the release and say the repo is private."""
    from labkit import jupyter

    root, dist, _ = toy_release
    out = dist / "student"
    config = json.loads((out / "labs/labkit/jupyter_config/jupyter_server_config.json").read_text())
    assert config["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] is False
    page = json.loads((out / "labs/labkit/jupyter_config/labconfig/page_config.json").read_text())
    assert page["disabledExtensions"]["@jupyter/nbgrader:create-assignment"] is True
    assert jupyter.config_dirs(out) == [jupyter.CONFIG_DIR]             # no instructor config in a release
    assert jupyter.config_dirs(REPO)[0] == REPO / "autograder/bridges/jupyter_instructor"
    readme = (REPO / "README.md").read_text()
    assert "keep it private" in readme
    learners = readme[readme.index("## For learners"):readme.index("## For instructors")]
    assert "student release" in learners and "make release" in learners
    assert "lab:" in (out / "Makefile").read_text() and "make lab" in (out / "README.md").read_text()
