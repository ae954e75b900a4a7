"""The Gradescope bundle, run in a simulated /autograder layout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

from autograder.bridges import gradescope
from autograder.tests.test_engine import submission, toy  # noqa: F401 - the toy-lab fixture


def unpack(toy, tmp_path):  # noqa: F811
    bundle = gradescope.build(toy, tmp_path / "lab00.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        zf.extractall(root / "source")
    for name in ("run_autograder", "setup.sh"):
        (root / "source" / name).chmod(0o755)
    return root, names


def run_autograder(root):
    env = {**os.environ, "IPT_GRADESCOPE_ROOT": str(root), "IPT_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_bundle_holds_the_engine_and_this_labs_graders_but_no_solutions(toy, tmp_path):  # noqa: F811
    _, names = unpack(toy, tmp_path)
    assert {"setup.sh", "run_autograder", "requirements-grader.txt"} <= set(names)
    assert "autograder/labs/lab00/test_add.py" in names and "autograder/labs/lab00/scenarios.py" in names
    assert "labs/lab00_toy/lab00_toy.ipynb" in names and "labs/labkit/notebook.py" in names
    assert not [n for n in names if n.startswith(("solutions/", "autograder/tests")) or n.endswith("mutants.toml")]
    assert "torch==2.13.0" in zipfile.ZipFile(tmp_path / "lab00.zip").read("setup.sh").decode()


def test_run_autograder_grades_the_uploaded_notebook(toy, tmp_path):  # noqa: F811
    root, _ = unpack(toy, tmp_path)
    (root / "submission").mkdir()
    submission(toy, root / "submission", "lab00_mine", cells={"scale_impl": "def scale(a, k):\n    return a"})
    results = run_autograder(root)
    assert results["score"] == 10 and [t["score"] for t in results["tests"]] == [10, 0]
    assert results["extra_data"]["sandbox"] in ("namespaces", "uid")  # the learner's code runs as another user


def test_run_autograder_with_no_notebook_still_writes_results(toy, tmp_path):  # noqa: F811
    root, _ = unpack(toy, tmp_path)
    (root / "submission").mkdir()
    (root / "submission" / "notes.txt").write_text("oops")
    results = run_autograder(root)
    assert results["score"] == 0 and "no notebook was found" in results["output"]


def test_every_submission_without_a_notebook_gets_the_same_message(toy, tmp_path):  # noqa: F811
    """Empty upload, other files only, or a zip that is not from `make submit`: one message, score 0."""
    messages = set()
    for case, files in {"empty": {}, "text": {"notes.txt": b"oops"},
                        "zip": {"lab00_toy.zip": "zip"}, "checkpoint": {".ipynb_checkpoints/x-checkpoint.ipynb": b"{}"}}.items():
        root, _ = unpack(toy, tmp_path / case)
        (root / "submission").mkdir()
        for name, data in files.items():
            target = root / "submission" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if data == "zip":
                with zipfile.ZipFile(target, "w") as zf:
                    zf.writestr("readme.txt", "my work is elsewhere")
            else:
                target.write_bytes(data)
        results = run_autograder(root)
        assert results["score"] == 0, case
        messages.add(results["output"].strip())
    assert len(messages) == 1 and "no notebook was found" in messages.pop()


def test_setup_installs_python_311_and_the_cpu_torch_build(toy, tmp_path):  # noqa: F811
    setup = gradescope.SETUP_SH
    assert "python3.11 -m venv /autograder/venv" in setup
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in setup
    proc = subprocess.run(["bash", "-n", "-c", setup], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
