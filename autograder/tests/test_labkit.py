"""labkit, the learner's side: check(), status, submit and the safe reading of submissions.

Built on a toy lab (lab98, autograder/tests/lab98_toy.py) so that none of it waits on a real lab;
the real lab01 is exercised too when its files exist.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.tests import lab98_toy as toy
from labkit import check
from labkit.checker import UnknownPart
from labkit.labs import LabDir, LabNotFound, find_lab
from labkit.notebook import assemble, load_module, read_notebook
from labkit.status import collect
from labkit.submission import MANIFEST, SubmissionError, make_submission, read_submission

REPO = toy.REPO
LABS = REPO / "labs"


def run_labkit(*args, cwd=REPO, timeout=120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(LABS), str(REPO)]), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "labkit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def toy_lab(tmp_path) -> Path:
    return toy.write_lab(tmp_path / "labs")


def stub_namespace(notebook: Path) -> dict:
    nb = read_notebook(notebook)
    module, errors = load_module(assemble(nb, nb).cells)
    assert not errors, errors
    return module.__dict__


def edit_cell(notebook: Path, grade_id: str, source: str) -> None:
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            cell.source = source
    nbformat.write(nb, notebook)


def test_cells_load_without_labkits_own_future_imports():
    """A learner's @dataclass (and eager annotations) work when cells are loaded outside sys.modules."""
    cell = "from dataclasses import dataclass\n\n@dataclass\nclass Point:\n    x: int\n    y: int = 0\n"
    module, errors = load_module([("cell", cell)], name="not_in_sys_modules")
    assert not errors, errors
    assert module.Point(1).y == 0 and module.Point.__annotations__["x"] is int


# ---- check() -------------------------------------------------------------------------------------

def test_check_passes_on_the_reference_solution(toy_lab, capsys):
    assert check("add", lab=toy_lab, namespace=toy.solution_namespace()) is None
    out = capsys.readouterr().out
    assert out.startswith("add: 3/3 public tests pass"), out
    assert "✗" not in out


def test_check_on_the_stub_says_not_implemented_without_a_traceback(toy_lab, capsys):
    check("scale", lab=toy_lab, namespace=stub_namespace(toy_lab / "lab98_toy.ipynb"))
    out = capsys.readouterr().out
    assert out.startswith("scale: 0/2 public tests pass"), out
    assert "not implemented yet" in out
    assert "Traceback" not in out and "NotImplementedError()" in out and len(out.splitlines()) <= 2


def test_check_reports_each_failure_with_its_message(toy_lab, capsys):
    names = toy.solution_namespace()
    names["add"] = lambda a, b: a - b
    del names["scale"]
    check("add", lab=toy_lab, namespace=names)
    check("scale", lab=toy_lab, namespace=names)
    out = capsys.readouterr().out
    assert "add: 0/3 public tests pass" in out
    assert "✗ test_add_ints: add(2, 3) should be 5, got -1" in out
    assert "✗ test_add_strings: your code raised TypeError in `" in out and "<lambda>`: unsupported operand" in out
    assert "scale: 0/2 public tests pass" in out
    assert "does not define `scale` yet" in out
    assert "Traceback" not in out and "where" not in out  # the author's message, not pytest's explanation


def test_check_mixed_progress_lists_what_is_left(toy_lab, capsys):
    names = stub_namespace(toy_lab / "lab98_toy.ipynb")
    exec("def scale(values, factor):\n    if not values:\n        return []\n    raise NotImplementedError()\n", names)
    check("scale", lab=toy_lab, namespace=names)
    out = capsys.readouterr().out
    assert out.startswith("scale: 1/2 public tests pass"), out
    assert "✗ test_scale: not implemented yet (NotImplementedError in `scale`)" in out


def test_check_unknown_part_lists_the_parts(toy_lab):
    with pytest.raises(UnknownPart, match=r"lab98 has no part 'views'; its parts are: add, scale"):
        check("views", lab=toy_lab, namespace={})


def test_check_finds_the_lab_from_the_working_directory(toy_lab, tmp_path, monkeypatch, capsys):
    main = types.ModuleType("__main__")
    main.__dict__.update(toy.solution_namespace())
    monkeypatch.setitem(sys.modules, "__main__", main)  # a kernel's globals are __main__'s
    monkeypatch.chdir(toy_lab)
    check("add")
    assert capsys.readouterr().out.startswith("add: 3/3 public tests pass")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LabNotFound, match="not inside a lab folder"):
        check("add")


def test_check_reimports_edited_tests(toy_lab, capsys):
    names = toy.solution_namespace()
    check("scale", lab=toy_lab, namespace=names)
    (toy_lab / "tests" / "test_scale.py").write_text(
        toy.PUBLIC_TESTS["scale"] + "\n\ndef test_scale_negative(lab):\n    assert lab.scale([1], -1) == [-2], 'wrong on purpose'\n")
    check("scale", lab=toy_lab, namespace=names)
    first, second = capsys.readouterr().out.split("scale: ")[1:]
    assert first.startswith("2/2") and second.startswith("2/3") and "wrong on purpose" in second


def test_check_inside_a_jupyter_kernel(toy_lab, tmp_path, monkeypatch):
    """The real thing: a kernel whose cwd is the lab folder runs the notebook and its check() cells."""
    from nbclient import NotebookClient

    from autograder.authoring.generate import solution_notebook

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(LABS), str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = solution_notebook(toy.SOLUTION)
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(toy_lab)}}).execute()
    outputs = {c.metadata["nbgrader"]["grade_id"]: "".join(o.get("text", "") for o in c.outputs) for c in nb.cells
               if c.cell_type == "code"}
    assert outputs["add"].startswith("add: 3/3 public tests pass"), outputs
    assert outputs["scale"].startswith("scale: 2/2 public tests pass"), outputs


def test_plain_pytest_uses_the_notebook_or_LABKIT_NOTEBOOK(toy_lab, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(LABS), str(REPO)]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "labkit.pytest_plugin", str(toy_lab / "tests")]
    stub = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert stub.returncode == 1 and "5 failed" in stub.stdout, stub.stdout[-2000:]
    (tmp_path / "solution.py").write_text(toy.SOLUTION)
    env["LABKIT_NOTEBOOK"] = str(tmp_path / "solution.py")
    solved = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert solved.returncode == 0 and "5 passed" in solved.stdout, solved.stdout[-2000:]


# ---- status --------------------------------------------------------------------------------------

@pytest.fixture
def labs_copy(tmp_path) -> Path:
    """A labs folder with a fresh stub, a half-done copy, a notebook that is not JSON, and one that hangs."""
    root = tmp_path / "labs"
    fresh = toy.write_lab(root)
    for slug in ("lab97_half", "lab95_hang"):
        (root / slug / "tests").mkdir(parents=True)
        for test in (fresh / "tests").iterdir():
            (root / slug / "tests" / test.name).write_text(test.read_text())
        (root / slug / f"{slug}.ipynb").write_text((fresh / "lab98_toy.ipynb").read_text())
    for slug in ("lab97_half", "lab95_hang"):
        edit_cell(root / slug / f"{slug}.ipynb", "add_impl", "def add(a, b):\n    return a + b\n")
    edit_cell(root / "lab95_hang" / "lab95_hang.ipynb", "scale_impl",
              "import time\n\ndef scale(values, factor):\n    while True:\n        time.sleep(0.05)\n")
    (root / "lab96_broken").mkdir()
    (root / "lab96_broken" / "lab96_broken.ipynb").write_text('{"cells": [')
    return root


def test_status_table(labs_copy):
    done = run_labkit("--labs", str(labs_copy), "status", "lab98", "lab97", "lab96")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if "│" in line]
    table = "\n".join(rows)
    assert any("lab98" in r and "Adding numbers" in r and "0/3" in r and "not started" in r for r in rows), table
    assert any("lab97" in r and "Adding numbers" in r and " 2 " in r and "3/3" in r and "passing" in r for r in rows), table
    assert any("Scaling lists" in r and "0/2" in r for r in rows), table
    assert any("lab96" in r and "error" in r for r in rows), table
    assert "lab96: the file is not a Jupyter notebook (not valid JSON" in done.stdout


def test_status_contains_a_hanging_notebook(labs_copy):
    report = collect(LabDir(labs_copy / "lab95_hang"), timeout=5)
    assert report.results["add"].passed == 3 and report.results["add"].status == "passing"
    assert report.results["scale"].error == "timed out"
    assert any("stopped after 5 s" in note for note in report.notes)


def test_status_reports_cells_that_fail_to_run(labs_copy):
    edit_cell(labs_copy / "lab98_toy" / "lab98_toy.ipynb", "add_impl", "def add(a, b):\n    return a + b\n\nundefined_name\n")
    report = collect(LabDir(labs_copy / "lab98_toy"), timeout=60)
    assert any("add_impl" in note and "NameError" in note for note in report.notes), report.notes
    assert report.results["add"].passed == 3  # the function was defined before the error


# ---- submit --------------------------------------------------------------------------------------

def test_submit_then_read_submission_round_trip(toy_lab, tmp_path):
    path = make_submission(LabDir(toy_lab), user="ada lovelace", out_dir=tmp_path / "subs")
    assert path == tmp_path / "subs" / "lab98-ada_lovelace.zip"
    notebook, manifest = read_submission(path)
    data = (toy_lab / "lab98_toy.ipynb").read_bytes()
    assert notebook == data
    assert manifest["lab"] == "lab98" and manifest["notebook"] == "lab98_toy.ipynb"
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["submitted_at"].endswith("Z") and manifest["labkit_version"]


def test_submit_command_prints_path_and_public_summary(toy_lab, tmp_path):
    done = run_labkit("--labs", str(toy_lab.parent), "submit", "lab98", "--user", "ada", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'lab98-ada.zip'}" in done.stdout
    assert "Adding numbers" in done.stdout and "0/3" in done.stdout
    broken = run_labkit("--labs", str(toy_lab.parent), "submit", "lab42", "--user", "ada", "--out", str(tmp_path))
    assert broken.returncode == 1 and "no lab 'lab42'" in broken.stderr


def test_submit_refuses_a_notebook_that_does_not_parse(toy_lab, tmp_path):
    (toy_lab / "lab98_toy.ipynb").write_text("{oops")
    with pytest.raises(Exception, match="not a Jupyter notebook"):
        make_submission(LabDir(toy_lab), user="ada", out_dir=tmp_path)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _manifest(notebook: bytes, name="lab98_toy.ipynb", **extra) -> bytes:
    return json.dumps({"lab": "lab98", "notebook": name, "sha256": hashlib.sha256(notebook).hexdigest(), **extra}).encode()


@pytest.mark.parametrize("case, message", [
    ("tampered", "sha256 of lab98_toy.ipynb does not match the manifest"),
    ("bomb", "unpacks to more than 21 MiB"),
    ("many", "holds 40 files"),
    ("no_manifest", "has no manifest.json"),
    ("bad_json", "manifest.json in bad.zip is not valid JSON"),
    ("not_object", "is not a JSON object"),
    ("missing_notebook", "does not hold the notebook"),
    ("path_name", "not a notebook file name"),
    ("not_zip", "is not a readable zip file"),
])
def test_read_submission_rejects_bad_zips(tmp_path, case, message):
    nb = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    target = tmp_path / "bad.zip"
    if case == "tampered":
        _zip(target, {MANIFEST: _manifest(nb), "lab98_toy.ipynb": nb.replace(b"[]", b'[{"x": 1}]')})
    elif case == "bomb":  # 64 MiB of zeros, about 64 KiB compressed
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(MANIFEST, _manifest(nb))
            with zf.open("lab98_toy.ipynb", "w", force_zip64=True) as stream:
                for _ in range(64):
                    stream.write(bytes(1 << 20))
    elif case == "many":
        _zip(target, {MANIFEST: _manifest(nb), **{f"f{i}.txt": b"x" for i in range(39)}})
    elif case == "no_manifest":
        _zip(target, {"lab98_toy.ipynb": nb})
    elif case == "bad_json":
        _zip(target, {MANIFEST: b"{lab: 1", "lab98_toy.ipynb": nb})
    elif case == "not_object":
        _zip(target, {MANIFEST: b"[1, 2]", "lab98_toy.ipynb": nb})
    elif case == "missing_notebook":
        _zip(target, {MANIFEST: _manifest(nb, name="other.ipynb"), "lab98_toy.ipynb": nb})
    elif case == "path_name":
        _zip(target, {MANIFEST: _manifest(nb, name="../../etc/x.ipynb"), "../../etc/x.ipynb": nb})
    elif case == "not_zip":
        target.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(SubmissionError, match=message.replace("(", r"\(")):
        read_submission(target)
    assert target.exists() and not (tmp_path / "lab98_toy.ipynb").exists()  # nothing was extracted


def test_read_submission_rejects_a_member_that_lies_about_its_size(tmp_path):
    """Sizes patched small in both headers: reading stops at the declared size and the CRC fails."""
    import struct

    nb = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}' + b" " * 5000
    data = bytearray(_zip(tmp_path / "liar.zip", {MANIFEST: _manifest(nb), "lab98_toy.ipynb": nb}).read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            if struct.unpack_from("<I", data, start + offset)[0] == len(nb):
                struct.pack_into("<I", data, start + offset, 100)
            start += 4
    (tmp_path / "liar.zip").write_bytes(bytes(data))
    with pytest.raises(SubmissionError, match="is not a readable zip file"):
        read_submission(tmp_path / "liar.zip")


# ---- the real lab01, once it exists -------------------------------------------------------------

LAB01 = LABS / "lab01_strided"
needs_lab01 = pytest.mark.skipif(not (LAB01 / "tests").is_dir() or not (REPO / "solutions" / "lab01_strided.py").is_file(),
                                 reason="lab01 is not written yet")


@needs_lab01
def test_lab01_reference_passes_and_stub_fails_every_public_test(capsys):
    from autograder.authoring.generate import solution_notebook, student_notebook

    lab = find_lab("lab01")
    text = (REPO / "solutions" / "lab01_strided.py").read_text()
    solved = solution_notebook(text)
    solved_names = load_module(assemble(solved, solved).cells)[0].__dict__
    stub = student_notebook(text)
    stub_names = load_module(assemble(stub, stub).cells)[0].__dict__
    parts = [p.id for p in lab.parts()]
    assert parts
    for part in parts:
        check(part, lab="lab01", namespace=solved_names)
        good = capsys.readouterr().out
        assert "✗" not in good and " public tests pass" in good, good
        passed, total = good.split(": ", 1)[1].split(" ", 1)[0].split("/")
        assert passed == total != "0", good
        check(part, lab="lab01", namespace=stub_names)
        bad = capsys.readouterr().out
        assert bad.startswith(f"{part}: 0/"), bad


@needs_lab01
def test_lab01_status_and_submit_on_the_committed_stub(tmp_path):
    lab = find_lab("lab01")
    report = collect(lab, timeout=240)
    assert report.error is None and report.parts, report.notes
    assert not report.notes, report.notes  # the stub's exported cells all run
    for part in report.parts:
        result = report.results[part.id]
        assert result.total > 0 and result.status == "not started", (part.id, result)
    notebook, manifest = read_submission(make_submission(lab, user="tester", out_dir=tmp_path))
    assert notebook == lab.notebook.read_bytes() and manifest["lab"] == "lab01"
