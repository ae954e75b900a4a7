"""nbgrader's own cycle, end to end, with two simulated students (one late):

generate_assignment -> release_assignment -> fetch_assignment (labkit and the public tests come along, so
check() works in the fetched folder) -> validate (fails unsolved, passes solved) -> submit -> collect ->
autograde (nbgrader's command, hidden graders inside) -> the formgrader's Autograde buttons, clicked in
Chromium -> generate_feedback -> export.
Every step is the real `nbgrader` command line, run the way an instructor or student types it, or the real
formgrader page in a real browser.
"""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.generate import render, solution_notebook, student_notebook
from autograder.bridges import nbgrader as bridge
from autograder.paths import REPO, LabPaths, lab_paths
from autograder.tests.browser import browser, free_port

TOYLAB = Path(__file__).parent / "toylab"
LATE = "2026-11-23 18:58:32.110655 UTC"     # the format `nbgrader submit` writes
ON_TIME = "2026-11-23 09:15:00.000001 UTC"
DUE = "2026-11-23 12:00:00 UTC"
SETUP_CELL = '''# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "solution": false, "schema_version": 3}
from labkit import check

'''
PUBLIC = {
    "add": "def test_add(lab):\n    assert list(lab.add([1, 2], [3, 4])) == [4, 6], 'add([1, 2], [3, 4]) should be [4, 6]'\n",
    "scale": "def test_scale(lab):\n    assert list(lab.scale([1, 2], 3)) == [3, 6], 'scale([1, 2], 3) should be [3, 6]'\n",
}


def nbgrader(cwd: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**bridge.environment(), "JUPYTER_CONFIG_DIR": str(cwd / ".jupyter"), "JUPYTER_DATA_DIR": str(cwd / ".jupyter-data")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    if ok:
        assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> LabPaths:
    """lab00 with a `from labkit import check` cell (as the real labs have) and public tests."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(TOYLAB, root, dirs_exist_ok=True)
    paths = LabPaths("lab00", "lab00_toy", root)
    text = paths.solution.read_text()
    marker = "# %% [markdown]"
    first = text.index(marker, text.index("# ---", 4))
    intro_end = text.index("# %%", first + len(marker))
    paths.solution.write_text(text[:intro_end] + SETUP_CELL + text[intro_end:])
    paths.public_tests.mkdir(parents=True)
    for part, source in PUBLIC.items():
        (paths.public_tests / f"test_{part}.py").write_text(source)
    paths.release_notebook.write_text(render(student_notebook(paths.solution.read_text())))
    return paths


def answer(paths: LabPaths, changes: dict[str, str]) -> str:
    """The reference notebook as a learner would type it (no canaries), with some cells changed."""
    filled = solution_notebook(paths.solution.read_text())
    for cell in filled.cells:
        gid = cell.metadata["nbgrader"]["grade_id"]
        cell.source = changes.get(gid, "\n".join(l for l in cell.source.splitlines() if "IPT-CANARY" not in l))
    return nbformat.writes(filled)


@pytest.fixture(scope="module")
def cycle(toy, tmp_path_factory):
    course = bridge.build(tmp_path_factory.mktemp("nbgrader") / "course", [toy], late_penalty="zero")
    nbgrader(course, "generate_assignment", "lab00")
    release = course / "release" / "lab00"
    assert "IPT-CANARY" not in (release / "lab00_toy.ipynb").read_text()
    assert (release / "labkit" / "__init__.py").is_file() and (release / "tests" / "test_add.py").is_file()
    nbgrader(course, "db", "assignment", "add", "lab00", f"--duedate={DUE}")
    nbgrader(course, "release_assignment", "lab00")
    homes = {}
    exchange = f"--Exchange.root={course / 'exchange'}"
    for student in ("alice", "bob"):
        home = homes[student] = tmp_path_factory.mktemp(student)
        nbgrader(home, "fetch_assignment", "lab00", "--course", bridge.COURSE_ID, exchange)
    return {"course": course, "homes": homes, "exchange": exchange}


def run_check(folder: Path, part: str) -> str:
    """check(part) as a fetched notebook's cell runs it: in the assignment folder, with its labkit."""
    code = f"import labkit; print(labkit.__file__); from labkit import check; check({part!r})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_fetched_assignment_brings_labkit_and_check_works(cycle):
    folder = cycle["homes"]["alice"] / "lab00"
    assert (folder / "lab00_toy.ipynb").is_file()
    out = run_check(folder, "add")
    assert str(folder / "labkit") in out.splitlines()[0], "the fetched folder's labkit should be the one imported"
    assert "add: 0/1 public tests pass (not implemented yet" in out, out


def test_validate_fails_unsolved_and_passes_solved(cycle, toy):
    folder = cycle["homes"]["bob"] / "lab00"
    unsolved = nbgrader(folder, "validate", "lab00_toy.ipynb")
    assert "VALIDATION FAILED" in unsolved.stdout + unsolved.stderr, unsolved.stdout[-2000:]
    solved = cycle["homes"]["alice"] / "lab00"
    (solved / "lab00_toy.ipynb").write_text(answer(toy, {}))
    passed = nbgrader(solved, "validate", "lab00_toy.ipynb")
    assert "Success! Your notebook passes all the tests." in passed.stdout + passed.stderr, passed.stdout[-2000:]


@pytest.fixture(scope="module")
def graded(cycle, toy):
    course, exchange = cycle["course"], cycle["exchange"]
    work = {"alice": {}, "bob": {"scale_impl": "def scale(a, k):\n    return a"}}
    for student, changes in work.items():
        home = cycle["homes"][student]
        (home / "lab00" / "lab00_toy.ipynb").write_text(answer(toy, changes))
        nbgrader(home, "submit", "lab00", "--course", bridge.COURSE_ID, f"--student={student}", exchange)
    nbgrader(course, "collect", "lab00")
    # the simulated clock: alice before the due date, bob after it, in nbgrader's own timestamp format
    (course / "submitted" / "alice" / "lab00" / "timestamp.txt").write_text(ON_TIME)
    (course / "submitted" / "bob" / "lab00" / "timestamp.txt").write_text(LATE)
    nbgrader(course, "autograde", "lab00")
    return course


def gradebook(course):
    from nbgrader.api import Gradebook
    return Gradebook(f"sqlite:///{course / 'gradebook.db'}", bridge.COURSE_ID)


def test_nbgrader_autograde_scores_with_the_hidden_graders_and_late_penalty(graded):
    with gradebook(graded) as gb:
        alice, bob = gb.find_submission("lab00", "alice"), gb.find_submission("lab00", "bob")
        assert (alice.score, alice.max_score, alice.late_submission_penalty) == (15, 15, 0)
        assert gb.find_grade("scale", "lab00_toy", "lab00", "bob").score == 0
        assert gb.find_grade("add", "lab00_toy", "lab00", "bob").score == 10
        assert bob.timestamp == datetime(2026, 11, 23, 18, 58, 32, 110655), bob.timestamp
        assert bob.total_seconds_late > 6 * 3600 and alice.total_seconds_late == 0
        assert bob.late_submission_penalty == 10 and bob.score - bob.late_submission_penalty == 0
        assert not gb.find_submission_notebook("lab00_toy", "lab00", "alice").needs_manual_grade


def test_autograde_again_as_the_formgrader_button_does_never_zeroes(graded, toy):
    nbgrader(graded, "autograde", "lab00", "--force")
    assert dict(bridge.grade_course(toy, graded)) == {"alice": 15, "bob": 10}
    with gradebook(graded) as gb:
        assert gb.find_submission("lab00", "alice").score == 15


@pytest.fixture(scope="module")
def formgrader(graded):
    """A Jupyter server in the course directory with nbgrader's formgrader, as an instructor starts one; its URL
    and token."""
    port, token = free_port(), "ipt-" + os.urandom(8).hex()
    env = {**bridge.environment(), "JUPYTER_CONFIG_DIR": str(graded / ".jupyter"),
           "JUPYTER_DATA_DIR": str(graded / ".jupyter-data"), "JUPYTER_RUNTIME_DIR": str(graded / ".jupyter-runtime")}
    log = (graded / "server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
                               "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
                               "--ServerApp.jpserver_extensions={'nbgrader.server_extensions.formgrader': True}"],
                              cwd=graded, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > end:
                    pytest.fail(f"the Jupyter server did not start:\n{(graded / 'server.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield url, token
    finally:
        server.terminate()
        server.wait(30)
        log.close()


ROWS = """(() => {
    const rows = [...document.querySelectorAll('#main-table tr')]
        .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()));
    return rows.length === 2 && rows.every(r => r.length >= 5 && r[4] && r[1] !== 'Please wait...') ? rows : null;
})()"""


def test_formgrader_autograde_buttons_in_a_browser_keep_the_grades(formgrader, graded, chromium, tmp_path):
    """The instructor's page, as Chromium renders it: both submissions graded with their scores; clicking
    each student's Autograde button (the lightning icon) regrades through the hidden graders and leaves the
    same scores, the late penalty included."""
    url, token = formgrader
    with browser(chromium, tmp_path / "profile") as page:
        page.goto(f"{url}/tree?token={token}")        # logs in, as the link `jupyter server` prints does
        page.goto(f"{url}/formgrader/manage_submissions/lab00")
        before = {row[1]: row for row in page.wait_for(ROWS, what="the submissions table")}
        assert {s: (r[3], r[4]) for s, r in before.items()} == {"alice": ("graded", "15 / 15"), "bob": ("graded", "10 / 15")}, before
        assert before["bob"][2] == "2026-11-23 18:58:32 UTC", before["bob"]
        for student in ("alice", "bob"):
            page.js(f"""[...document.querySelectorAll('#main-table tr')]
                .find(tr => tr.querySelector('.student-id').innerText.trim() === '{student}')
                .querySelector('.autograde a').click()""")
            modal = page.wait_for(f"[...document.querySelectorAll('.modal')].map(m => m.innerText).find(t => t.includes(\"student '{student}'\"))",
                                  timeout=300, what=f"the autograde of {student} to finish")
            assert f"Successfully autograded 'lab00' for student '{student}'" in modal, modal[-3000:]
            page.js("$('.modal, .modal-backdrop').remove()")
        after = {row[1]: row for row in page.wait_for(ROWS, what="the submissions table after autograding")}
        assert {s: (r[3], r[4]) for s, r in after.items()} == {"alice": ("graded", "15 / 15"), "bob": ("graded", "10 / 15")}, after
        assert not page.errors, page.errors
    with gradebook(graded) as gb:
        alice, bob = gb.find_submission("lab00", "alice"), gb.find_submission("lab00", "bob")
        assert (alice.score, alice.late_submission_penalty) == (15, 0)
        assert (bob.score, bob.late_submission_penalty) == (10, 10)


def test_feedback_and_export(graded):
    nbgrader(graded, "generate_feedback", "lab00")
    html = (graded / "feedback" / "bob" / "lab00" / "lab00_toy.html").read_text()
    assert "Hidden graders: 0 / 5" in html and "scale([1, 2], 0) should be" in html
    for secret in ("IPT-CANARY", "test_scale", "student.run", "assert np.array_equal"):
        assert secret not in html, f"feedback shows hidden text: {secret}"
    nbgrader(graded, "export", "--to", str(graded / "grades.csv"))
    rows = {r["student_id"]: r for r in csv.DictReader((graded / "grades.csv").open())}
    assert float(rows["alice"]["raw_score"]) == 15 and float(rows["alice"]["score"]) == 15
    assert float(rows["bob"]["raw_score"]) == 10 and float(rows["bob"]["late_submission_penalty"]) == 10
    assert float(rows["bob"]["score"]) == 0 and rows["bob"]["timestamp"].startswith("2026-11-23 18:58:32")


def test_readme_make_targets_run_the_cycle_on_a_real_lab(tmp_path):
    """README's instructor commands, typed as written in a fresh shell (no venv on PATH), on lab01: make nbgrader,
    nbgrader-release, (a student fetches and submits the reference answers), nbgrader-collect, nbgrader-grade,
    nbgrader-feedback."""
    course, home = tmp_path / "course", tmp_path / "student"
    home.mkdir()
    shell = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
             "TMPDIR": os.environ.get("TMPDIR", "/tmp")}

    def make(*args):
        proc = subprocess.run(["make", "-s", *args, f"NBGRADER_COURSE={course}"], cwd=REPO,
                              env=shell, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"make {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout

    make("nbgrader")
    make("nbgrader-release", "LAB=lab01")
    lab01 = lab_paths("lab01")
    exchange = f"--Exchange.root={course / 'exchange'}"
    nbgrader(home, "fetch_assignment", "lab01", "--course", bridge.COURSE_ID, exchange)
    fetched = home / "lab01" / f"{lab01.slug}.ipynb"
    assert fetched.is_file() and "IPT-CANARY" not in fetched.read_text()
    fetched.write_text(answer(lab01, {}))
    nbgrader(home, "submit", "lab01", "--course", bridge.COURSE_ID, "--student=carol", exchange)
    make("nbgrader-collect", "LAB=lab01")
    graded = make("nbgrader-grade", "LAB=lab01")
    assert "carol: 100" in graded, graded
    make("nbgrader-feedback", "LAB=lab01")
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert float(rows["carol"]["score"]) == 100, rows
    assert (course / "feedback" / "carol" / "lab01" / f"{lab01.slug}.html").is_file()
