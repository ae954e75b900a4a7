"""The nbgrader cycle with simulated students: generate, release, fetch, submit, collect,
hidden-grader scores into the gradebook, feedback without hidden test text, CSV export."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.generate import solution_notebook
from autograder.bridges import nbgrader as bridge
from autograder.tests.test_engine import toy  # noqa: F401 - the toy-lab fixture


def nbgrader(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # nbgrader runs the `alembic` command: the venv's bin must be on PATH
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(cwd / ".jupyter"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def cycle(toy, tmp_path_factory):  # noqa: F811
    course = bridge.build(tmp_path_factory.mktemp("nbgrader") / "course", [toy])
    nbgrader(course, "generate_assignment", "lab00")
    released = (course / "release" / "lab00" / "lab00_toy.ipynb").read_text()
    assert "IPT-CANARY" not in released and "raise NotImplementedError" in released
    nbgrader(course, "release_assignment", "lab00")
    answers = {"alice": {}, "bob": {"scale_impl": "def scale(a, k):\n    return a"}}
    for student, changes in answers.items():
        home = tmp_path_factory.mktemp(student)
        nbgrader(home, "fetch_assignment", "lab00", "--course", bridge.COURSE_ID, f"--Exchange.root={course / 'exchange'}")
        work = home / "lab00" / "lab00_toy.ipynb"
        filled = solution_notebook(toy.solution.read_text())
        for cell in filled.cells:
            gid = cell.metadata["nbgrader"]["grade_id"]
            # a learner types the solution: the canary of the reference text is not in it
            cell.source = changes.get(gid, "\n".join(l for l in cell.source.splitlines() if "IPT-CANARY" not in l))
        work.write_text(nbformat.writes(filled))
        nbgrader(home, "submit", "lab00", "--course", bridge.COURSE_ID, f"--student={student}",
                 f"--Exchange.root={course / 'exchange'}")
    nbgrader(course, "collect", "lab00")
    return course


def test_hidden_scores_reach_the_gradebook_feedback_and_export(toy, cycle):  # noqa: F811
    graded = dict(bridge.grade_course(toy, cycle))
    assert graded == {"alice": 15, "bob": 10}
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{cycle / 'gradebook.db'}") as gb:
        assert gb.find_submission("lab00", "bob").score == 10
        assert gb.find_grade("scale", "lab00_toy", "lab00", "bob").score == 0
        assert gb.find_grade("add", "lab00_toy", "lab00", "bob").max_score == 10

    nbgrader(cycle, "generate_feedback", "lab00")
    html = (cycle / "feedback" / "bob" / "lab00" / "lab00_toy.html").read_text()
    assert "Hidden graders: 0 / 5" in html and "scale([1, 2], 0) should be" in html
    for secret in ("IPT-CANARY", "test_scale", "student.run", "assert np.array_equal"):
        assert secret not in html, f"feedback shows hidden text: {secret}"

    nbgrader(cycle, "export", "--to", str(cycle / "grades.csv"))
    rows = {r["student_id"]: r for r in csv.DictReader((cycle / "grades.csv").open())}
    assert float(rows["alice"]["raw_score"]) == 15 and float(rows["bob"]["raw_score"]) == 10
