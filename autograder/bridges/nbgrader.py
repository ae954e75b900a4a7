"""nbgrader: a course directory built from solutions/, and hidden-grader scores written into its gradebook.

`make nbgrader` writes build/nbgrader/ (nbgrader_config.py, source/labNN/ with the solution notebook
and the public tests). The usual cycle then works: `nbgrader generate_assignment labNN`,
`release_assignment`, students `fetch_assignment`/`submit`, `collect`. Instead of `nbgrader autograde`
(which would run only the public checks), `python -m autograder nbgrader-grade labNN` grades every
collected notebook with the hidden graders, writes each part's score into the gradebook (the part
cell's grade_id is the part id; its points are the graders' points) and writes autograded notebooks
whose part cells show the part's feedback, so `nbgrader generate_feedback` and `nbgrader export` work.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from autograder.authoring.generate import render, solution_notebook
from autograder.engine.pipeline import grade
from autograder.engine.results import _clean, part_output
from autograder.paths import REPO, LabPaths, all_labs, lab_paths

COURSE_ID = "inside-pytorch"
CONFIG = """c = get_config()  # noqa: F821 - provided by nbgrader
c.CourseDirectory.course_id = "{course_id}"
c.CourseDirectory.root = r"{root}"
c.Exchange.root = r"{root}/exchange"
"""


def build(root: Path, labs: list[LabPaths]) -> Path:
    """Write the nbgrader course directory: config, and one source assignment per lab."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "exchange").mkdir(exist_ok=True)
    (root / "exchange").chmod(0o777)
    (root / "nbgrader_config.py").write_text(CONFIG.format(course_id=COURSE_ID, root=root.resolve()))
    for paths in labs:
        folder = root / "source" / paths.lab
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / f"{paths.slug}.ipynb").write_text(render(solution_notebook(paths.solution.read_text())))
        if paths.public_tests.exists():
            shutil.copytree(paths.public_tests, folder / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _timestamp(folder: Path) -> datetime | None:
    try:
        text = (folder / "timestamp.txt").read_text().strip()
        stamp = datetime.fromisoformat(text.replace(" ", "T"))
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    except (OSError, ValueError):
        return None


def _annotated(notebook_path: Path, result) -> str:
    """The submitted notebook with every part cell's output replaced by that part's feedback."""
    nb = nbformat.read(notebook_path, as_version=4)
    by_part = {p.id: p for p in result.parts}
    for cell in nb.cells:
        part = by_part.get(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"))
        if part and cell.cell_type == "code":
            text = f"Hidden graders: {part.score:g} / {part.points:g}\n{part_output(part)}\n"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=_clean(text))]
    return nbformat.writes(nb)


def grade_course(lab: "str | LabPaths", course: Path) -> list[tuple[str, float]]:
    """Grade every collected submission of `lab` and record the scores in the gradebook."""
    from nbgrader.api import Gradebook

    paths = lab_paths(lab)
    graded = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for folder in sorted((course / "submitted").glob(f"*/{paths.lab}")):
            student = folder.parent.name
            notebook = folder / f"{paths.slug}.ipynb"
            result = grade(paths, notebook if notebook.exists() else None, course / "ipt-results" / student / paths.lab)
            gb.update_or_create_student(student)
            gb.update_or_create_submission(paths.lab, student, timestamp=_timestamp(folder))
            for part in result.parts:
                row = gb.find_grade(part.id, paths.slug, paths.lab, student)
                row.auto_score = part.score
                row.needs_manual_grade = False
            gb.db.commit()
            out = course / "autograded" / student / paths.lab
            out.mkdir(parents=True, exist_ok=True)
            if notebook.exists():
                (out / notebook.name).write_text(_annotated(notebook, result))
            if (folder / "timestamp.txt").exists():
                shutil.copy(folder / "timestamp.txt", out / "timestamp.txt")
            graded.append((student, result.score))
    return graded


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.bridges.nbgrader")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--course", type=Path, default=REPO / "build" / "nbgrader")
    args = parser.parse_args(argv)
    build(args.course, all_labs())
    print(f"nbgrader course directory: {args.course}\n"
          f"next: cd {args.course} && nbgrader generate_assignment labNN && nbgrader release_assignment labNN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
