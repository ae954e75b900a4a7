"""nbgrader: a course directory built from solutions/, graded by nbgrader's own `autograde` with the hidden graders.

`make nbgrader` writes build/nbgrader/ (nbgrader_config.py, source/labNN/ with the solution notebook,
the public tests and labkit, so that a student who fetches the assignment can run `check()`).
nbgrader's cycle then works with its own commands and its formgrader:

    generate_assignment -> release_assignment -> (students) fetch_assignment, submit -> collect
    -> autograde -> generate_feedback -> export

The course's nbgrader_config.py replaces autograde's "execute the notebook" step by `HiddenGraders`:
the submitted notebook (after nbgrader's own sanitizing, which restores locked cells) is graded by the
project's confined grader, and each part cell receives the part's feedback and its score as a number,
which nbgrader's SaveAutoGrades turns into the part's auto score. Timestamps, late penalties
(`AssignLatePenalties`), the gradebook, feedback and export stay nbgrader's, so the formgrader's
Autograde button gives the same scores as the command line. No learner code runs in nbgrader's process
or in a Jupyter kernel.

`python -m autograder nbgrader-grade labNN` runs `nbgrader autograde labNN` in the course directory with
the virtual environment on PATH (nbgrader calls `alembic`), then prints the scores.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from autograder.authoring.generate import render, solution_notebook
from autograder.paths import REPO, LabPaths, all_labs, lab_paths

COURSE_ID = "inside-pytorch"
LABKIT = REPO / "labs" / "labkit"
CONFIG = '''c = get_config()  # noqa: F821 - provided by nbgrader
import sys
sys.path[:0] = [p for p in (r"{repo}", r"{repo}/labs") if p not in sys.path]

c.CourseDirectory.course_id = "{course_id}"
c.CourseDirectory.root = r"{root}"
c.Exchange.root = r"{root}/exchange"

# autograde: the hidden graders instead of executing the notebook (see autograder/bridges/nbgrader.py)
from nbgrader.preprocessors import AssignLatePenalties, CheckCellMetadata, LimitOutput, SaveAutoGrades
from autograder.bridges.nbgrader import HiddenGraders
c.Autograde.autograde_preprocessors = [HiddenGraders, LimitOutput, SaveAutoGrades, AssignLatePenalties,
                                       CheckCellMetadata]
c.HiddenGraders.course_repo = r"{lab_root}"

# Late submissions: nbgrader reads each submission's timestamp.txt. Set a due date with
#   nbgrader db assignment add lab01 --duedate="2026-12-01 23:59:00 UTC"
# and choose what lateness costs: "none" (only reported) or "zero" (the whole notebook scores 0).
c.LateSubmissionPlugin.penalty_method = "{late_penalty}"
'''


class HiddenGraders(NbGraderPreprocessor):
    """nbgrader autograde step: grade the notebook with the lab's hidden graders and put each part's
    feedback and score into its part cell (SaveAutoGrades reads the score as partial credit)."""

    course_repo = Unicode("", help="course tree holding solutions/, labs/ and autograder/labs/ (default: this repository)").tag(config=True)
    sandbox = Unicode("auto", help="sandbox level for the learner's code: auto, namespaces, uid or rlimits").tag(config=True)

    def preprocess(self, nb, resources):
        from autograder.engine.pipeline import Options, grade

        info = resources.get("nbgrader", {})
        paths = lab_paths(info["assignment"], Path(self.course_repo) if self.course_repo else REPO)
        self.log.info("Grading %s of %s with the hidden graders of %s", info.get("notebook"), info.get("student"), paths.lab)
        with tempfile.TemporaryDirectory(prefix="ipt-nbgrader-") as tmp:
            submission = Path(tmp) / f"{paths.slug}.ipynb"
            submission.write_text(nbformat.writes(nb))
            result = grade(paths, submission, Path(tmp) / "results", Options(self.sandbox))
        annotate(nb, result)
        return nb, resources


def annotate(nb, result) -> None:
    """Every graded code cell gets the part's feedback (stdout) and its score (the cell's value)."""
    from autograder.engine.results import _clean, part_output

    by_part = {p.id: p for p in result.parts}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade"):
            continue
        part = by_part.get(meta.get("grade_id"))
        points = float(meta.get("points", 0))
        if part is None:
            text, score = "This cell is not a part the hidden graders know: no points.\n", 0.0
        else:
            text = f"Hidden graders: {part.score:g} / {part.points:g}\n{part_output(part)}\n"
            score = part.score
        if result.error:
            text += "\nThe submission could not be graded; ask your instructor.\n"
        score = round(max(0.0, min(points, float(score))), 4)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_clean(text)),
                        nbformat.v4.new_output("execute_result", data={"text/plain": repr(score)}, execution_count=1)]
        cell.execution_count = 1


def build(root: Path, labs: list[LabPaths], late_penalty: str = "none") -> Path:
    """Write the nbgrader course directory: config, and one source assignment per lab."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "exchange").mkdir(exist_ok=True)
    (root / "exchange").chmod(0o777)
    lab_root = labs[0].root if labs else REPO
    (root / "nbgrader_config.py").write_text(CONFIG.format(
        course_id=COURSE_ID, root=root.resolve(), repo=REPO, lab_root=Path(lab_root).resolve(), late_penalty=late_penalty))
    for paths in labs:
        folder = root / "source" / paths.lab
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / f"{paths.slug}.ipynb").write_text(render(solution_notebook(paths.solution.read_text())))
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "jupyter_config")
        if paths.public_tests.exists():
            shutil.copytree(paths.public_tests, folder / "tests", ignore=ignore)
        shutil.copytree(LABKIT, folder / "labkit", ignore=ignore)   # check() works in the fetched folder
    return root


def environment() -> dict[str, str]:
    """nbgrader's environment: the virtual environment's bin first on PATH (nbgrader runs `alembic`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course directory (the way an instructor types it, with PATH set)."""
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=environment(),
                          capture_output=True, text=True)
    if check and proc.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def scores(lab: str, course: Path) -> list[tuple[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}", COURSE_ID) as gb:
        return sorted((s.student.id, s.score) for s in gb.assignment_submissions(lab))


def grade_course(lab: "str | LabPaths", course: Path) -> list[tuple[str, float]]:
    """`nbgrader autograde LAB` (every collected submission, hidden graders), then the gradebook's scores."""
    paths = lab_paths(lab) if not isinstance(lab, LabPaths) else lab
    run(Path(course), "autograde", paths.lab)
    return scores(paths.lab, Path(course))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.bridges.nbgrader")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--course", type=Path, default=REPO / "build" / "nbgrader")
    parser.add_argument("--late-penalty", choices=["none", "zero"], default="none",
                        help="what a submission after the due date costs (nbgrader's LateSubmissionPlugin)")
    args = parser.parse_args(argv)
    build(args.course, [p for p in all_labs() if p.solution.exists()], args.late_penalty)
    print(f"nbgrader course directory: {args.course}\n"
          "next: make nbgrader-release LAB=lab01   (nbgrader generate_assignment + release_assignment)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
