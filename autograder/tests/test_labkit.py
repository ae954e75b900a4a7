"""labkit, the learner's side: check(), status, submit and the safe reading of submissions.

Built on a toy lab (lab98, autograder/tests/lab98_toy.py) so that none of it waits on a real lab;
the real lab01 is exercised too when its files exist.
"""
from __future__ import annotations

import hashlib
import shutil
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
import labkit
from labkit import check
from labkit.checker import PartNotPassing, UnknownPart
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


def ran_solution_cells(changes: dict[str, str] | None = None) -> dict[str, str]:
    """What labkit remembers after a kernel ran every cell of the reference (cell id -> source)."""
    from autograder.authoring.generate import solution_notebook

    nb = solution_notebook(toy.SOLUTION)
    return {c.id: (changes or {}).get(c.metadata["nbgrader"]["grade_id"], c.source) for c in nb.cells}


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
    monkeypatch.setattr(labkit, "_ran", ran_solution_cells())   # the kernel ran the solution cells
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


def run_like_jupyterlab(nb, cwd: Path, env: dict) -> dict[str, str]:
    """Run every code cell in a real kernel the way JupyterLab does: an execute_request whose metadata
    carries the cell's id (`cellId`). Returns grade_id -> the cell's stdout and errors."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env)
    outputs = {}
    try:
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            content = {"code": cell.source, "silent": False, "store_history": True, "user_expressions": {},
                       "allow_stdin": False, "stop_on_error": True}
            msg = kc.session.msg("execute_request", content, metadata={"cellId": cell.id})
            kc.shell_channel.send(msg)
            text = []
            while True:
                reply = kc.get_iopub_msg(timeout=120)
                if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                    continue
                kind, data = reply["msg_type"], reply["content"]
                if kind == "stream":
                    text.append(data["text"])
                elif kind == "error":
                    text.append(f"{data['ename']}: {data['evalue']}")
                elif kind == "status" and data["execution_state"] == "idle":
                    break
            outputs[cell.metadata["nbgrader"]["grade_id"]] = "".join(text)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return outputs


def test_check_inside_a_jupyter_kernel(toy_lab, tmp_path):
    """The real thing: a kernel whose cwd is the lab folder runs the cells the learner typed (the saved
    notebook is still the stub) and check() sees the code as last run in each cell."""
    from autograder.authoring.generate import solution_notebook

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(LABS), str(REPO), os.environ.get("PYTHONPATH", "")]),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), IPYTHONDIR=str(tmp_path / "ipython"), OMP_NUM_THREADS="1")
    nb = solution_notebook(toy.SOLUTION)
    outputs = run_like_jupyterlab(nb, toy_lab, env)
    assert outputs["add"].startswith("add: 3/3 public tests pass"), outputs
    assert outputs["scale"].startswith("scale: 2/2 public tests pass"), outputs
    for cell in nb.cells:   # the learner breaks scale() and runs its cell again, unsaved
        if cell.metadata["nbgrader"]["grade_id"] == "scale_impl":
            cell.source = "def scale(values, factor):\n    return values\n"
    outputs = run_like_jupyterlab(nb, toy_lab, env)
    assert outputs["scale"].startswith("scale: 1/2 public tests pass"), outputs


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
    assert any("lab98" in r and '"add"' in r and "Adding numbers" in r and "not started" in r for r in rows), table
    assert "Traceback" not in done.stdout + done.stderr
    assert any("lab97" in r and "Adding numbers" in r and " 2 " in r and "3/3" in r and "passing" in r for r in rows), table
    assert any("Scaling lists" in r and "0/2" in r and "not started" in r for r in rows), table
    assert any("lab96" in r and "error" in r for r in rows), table
    assert "lab96: the file is not a Jupyter notebook (not valid JSON" in done.stdout
    assert "Parts passing their public tests: 2 of 10 points" in done.stdout


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


# ---- check() as the graders assemble the module ----------------------------------------------------

def test_check_uses_the_code_last_run_in_each_cell_not_the_kernels_globals(toy_lab, monkeypatch, capsys):
    main = types.ModuleType("__main__")
    main.__dict__.update(toy.solution_namespace())   # a correct add() lingers in the kernel's globals ...
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(labkit, "_ran", ran_solution_cells({"add_impl": "def add(a, b):\n    return a - b\n"}))
    monkeypatch.chdir(toy_lab)
    check("add")                                       # ... but the cell as last run is what counts
    out = capsys.readouterr().out
    assert out.startswith("add: 0/3 public tests pass"), out


def test_check_with_nothing_run_reads_the_saved_notebook(toy_lab, monkeypatch, capsys):
    monkeypatch.setattr(labkit, "_ran", {})
    edit_cell(toy_lab / "lab98_toy.ipynb", "add_impl", "def add(a, b):\n    return a + b\n")
    monkeypatch.chdir(toy_lab)
    check("add")
    check("scale")
    out = capsys.readouterr().out
    assert "add: 3/3 public tests pass" in out and "scale: 0/2 public tests pass (not implemented yet" in out


@pytest.mark.parametrize("code, how", [
    ("import torch\n\ndef add(a, b):\n    return a + b\n", "import"),
    ("def add(a, b):\n    import torch\n    return a + b\n", "import inside the function"),
    ("def add(a, b):\n    return torch.add(a, b)\n", "torch from an exploration cell"),
])
def test_check_says_plainly_when_code_uses_a_denied_module(toy_lab, monkeypatch, capsys, code, how):
    from labkit import learner

    monkeypatch.setattr(learner, "denied_modules", lambda lab: ("torch",) if lab == "lab98" else ())
    import labkit.checker as checker_module
    monkeypatch.setattr(labkit, "_ran", ran_solution_cells({"add_impl": code}))
    monkeypatch.chdir(toy_lab)
    import torch  # noqa: F401 - as if an exploration cell had imported it into the kernel
    checker_module.check("add")
    out = capsys.readouterr().out
    assert out.startswith("add: 0/3 public tests pass"), (how, out)
    assert "torch" in out and "does not allow" in out or "cannot import torch" in out, (how, out)


def test_denied_modules_match_the_graders_lab_toml():
    import tomllib

    from labkit.learner import denied_modules
    for toml in sorted((REPO / "autograder" / "labs").glob("lab*/lab.toml")):
        lab = toml.parent.name
        graders = tuple(tomllib.loads(toml.read_text()).get("deny_modules", []))
        assert denied_modules(lab) == graders, f"labs/labkit/rules.toml disagrees with {toml.relative_to(REPO)}"


def test_check_fails_the_cell_only_under_nbgrader(toy_lab, monkeypatch, capsys):
    monkeypatch.setattr(labkit, "_ran", {})
    monkeypatch.chdir(toy_lab)
    check("add")                                     # a learner's run: a report, never an exception
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with pytest.raises(PartNotPassing, match="add: 0/3"):
        check("add")                                 # nbgrader Validate: the unsolved part fails its cell
    edit_cell(toy_lab / "lab98_toy.ipynb", "add_impl", "def add(a, b):\n    return a + b\n")
    check("add")                                     # solved: the cell passes


def test_find_lab_in_nbgrader_layout(toy_lab, tmp_path):
    """nbgrader's release/fetch/submit folder is named after the assignment: lab98/lab98_toy.ipynb."""
    fetched = tmp_path / "home" / "lab98"
    shutil.copytree(toy_lab, fetched)
    found = find_lab(cwd=fetched / "tests")
    assert (found.id, found.slug, found.notebook) == ("lab98", "lab98_toy", fetched / "lab98_toy.ipynb")


def test_status_of_an_untouched_lab_runs_nothing(toy_lab, monkeypatch):
    from labkit import status

    monkeypatch.setattr(status.subprocess, "Popen", None)   # any worker process would fail this test
    report = collect(LabDir(toy_lab), quick=True)
    assert {p: r.status for p, r in report.results.items()} == {"add": "not started", "scale": "not started"}
    edit_cell(toy_lab / "lab98_toy.ipynb", "add_impl", "def add(a, b):\n    return a + b\n")
    with pytest.raises(TypeError):
        collect(LabDir(toy_lab), quick=True)                 # started: its tests run (in a worker)


def test_status_shows_an_unchanged_lab_again_without_running_it(toy_lab, monkeypatch):
    """A finished lab whose code, public tests and tools did not change since its last status run is shown
    from that run (that keeps `make status` at a second for a learner with every lab done). Outputs and
    metadata are not code; a changed cell, or a run that timed out, runs again."""
    from labkit import status

    notebook = toy_lab / "lab98_toy.ipynb"
    edit_cell(notebook, "add_impl", "def add(a, b):\n    return a + b\n")
    first = collect(LabDir(toy_lab), timeout=120, quick=True, reuse=True)
    assert not first.reused and first.results["add"].status == "passing"
    nb = nbformat.read(notebook, as_version=4)
    nb.metadata["saved_by"] = "jupyterlab"
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, notebook)
    real_popen = status.subprocess.Popen
    monkeypatch.setattr(status.subprocess, "Popen", None)   # any worker process would fail here
    again = collect(LabDir(toy_lab), timeout=120, quick=True, reuse=True)
    assert again.reused
    assert {p: r.status for p, r in again.results.items()} == {p: r.status for p, r in first.results.items()}
    edit_cell(notebook, "add_impl", "def add(a, b):\n    return a - b\n")
    with pytest.raises(TypeError):
        collect(LabDir(toy_lab), timeout=120, quick=True, reuse=True)
    monkeypatch.setattr(status.subprocess, "Popen", real_popen)
    changed = collect(LabDir(toy_lab), timeout=120, quick=True, reuse=True)
    assert not changed.reused and changed.results["add"].status == "failing"
    assert collect(LabDir(toy_lab), timeout=120, quick=True, reuse=False).reused is False


def test_status_fresh_keeps_its_results_for_the_next_status(toy_lab, monkeypatch):
    """`status --fresh` runs every lab again and keeps what it ran: the plain `status` after it shows those
    results without running anything (it used to run every lab a second time)."""
    from labkit import status

    edit_cell(toy_lab / "lab98_toy.ipynb", "add_impl", "def add(a, b):\n    return a + b\n")
    fresh = collect(LabDir(toy_lab), timeout=120, quick=True, reuse=False, remember=True)
    assert not fresh.reused and fresh.results["add"].status == "passing"
    monkeypatch.setattr(status.subprocess, "Popen", None)   # any worker process would fail here
    again = collect(LabDir(toy_lab), timeout=120, quick=True, reuse=True)
    assert again.reused and again.results["add"].status == "passing"
