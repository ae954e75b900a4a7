"""A tiny lab (lab98_toy) for tests of the learner tooling and the release; needs nothing of lab01."""
from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SOLUTION = '''# ---
# jupyter:
#   inside_pytorch:
#     lab: lab98
#     title: Toy lab
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Toy lab
# Write `add` and `scale`.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false} tags=["export"]
from labkit import check

# %% nbgrader={"grade": false, "grade_id": "add_impl", "locked": false, "schema_version": 3, "solution": true} tags=["export"]
def add(a, b):
    """a + b"""
    ### BEGIN SOLUTION
    # IPT-CANARY lab98 add_impl
    total_of_both_numbers = a + b
    return total_of_both_numbers
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "add", "locked": true, "points": 2, "schema_version": 3, "solution": false} part_title="Adding numbers"
check("add")

# %% nbgrader={"grade": false, "grade_id": "scale_impl", "locked": false, "schema_version": 3, "solution": true} tags=["export"]
def scale(values, factor):
    """every value times factor"""
    ### BEGIN SOLUTION
    # IPT-CANARY lab98 scale_impl
    return [value_in_list * factor for value_in_list in values]
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "scale", "locked": true, "points": 3, "schema_version": 3, "solution": false} part_title="Scaling lists"
check("scale")

# %% nbgrader={"grade": false, "grade_id": "explore", "locked": false, "schema_version": 3, "solution": false}
print(add(1, 2))
'''

PUBLIC_TESTS = {
    "add": '''import pytest


def test_add_ints(lab):
    assert lab.add(2, 3) == 5, f"add(2, 3) should be 5, got {lab.add(2, 3)!r}"


def test_add_floats(lab):
    assert lab.add(0.5, 0.25) == 0.75, "add(0.5, 0.25) should be 0.75"


def test_add_strings(lab):
    assert lab.add("a", "b") == "ab", "add('a', 'b') should be 'ab'"
''',
    "scale": '''def test_scale(lab):
    assert lab.scale([1, 2], 3) == [3, 6], f"scale([1, 2], 3) should be [3, 6], got {lab.scale([1, 2], 3)!r}"


def test_scale_empty(lab):
    assert lab.scale([], 3) == [], "scale([], 3) should be []"
''',
}

HIDDEN_GRADER = '''import pytest


def test_add_large_hidden_values(student):
    got = student.run("lab98.scenarios:add", 123456789, 987654321)
    assert got == 1111111110, f"add(123456789, 987654321) should be 1111111110, got {got!r}"
'''


def student_notebook_text() -> str:
    from autograder.authoring.generate import render, student_notebook

    return render(student_notebook(SOLUTION))


def write_lab(labs_root: Path) -> Path:
    """labs_root/lab98_toy/ with the generated notebook and the public tests; returns the lab folder."""
    lab = labs_root / "lab98_toy"
    (lab / "tests").mkdir(parents=True, exist_ok=True)
    (lab / "lab98_toy.ipynb").write_text(student_notebook_text())
    for part, text in PUBLIC_TESTS.items():
        (lab / "tests" / f"test_{part}.py").write_text(text)
    return lab


def solution_namespace() -> dict:
    """The reference solution's exported cells, executed: what a finished notebook defines."""
    from autograder.authoring.generate import solution_notebook
    from labkit.notebook import assemble, load_module

    nb = solution_notebook(SOLUTION)
    module, errors = load_module(assemble(nb, nb).cells)
    assert not errors, errors
    return module.__dict__


def write_repo(root: Path) -> Path:
    """A minimal course repository around the toy lab: solutions, hidden graders, course, book, labkit."""
    (root / "solutions").mkdir(parents=True)
    (root / "solutions" / "lab98_toy.py").write_text(SOLUTION)
    write_lab(root / "labs")
    shutil.copytree(REPO / "labs" / "labkit", root / "labs" / "labkit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("conftest.py", "pytest.ini"):
        if (REPO / "labs" / name).exists():
            shutil.copy2(REPO / "labs" / name, root / "labs" / name)
    graders = root / "autograder" / "labs" / "lab98"
    graders.mkdir(parents=True)
    (graders / "test_add.py").write_text(HIDDEN_GRADER)
    (graders / "lab.toml").write_text("# IPT-CANARY lab98 graders\ndeny_modules = []\n")
    (graders / "scenarios.py").write_text(
        "def add(sub, first_number, second_number):\n    return sub.add(first_number, second_number)\n")
    (root / "course" / "01_toy").mkdir(parents=True)
    (root / "course" / "01_toy" / "notes.md").write_text("# Adding\n\nNumbers add up: `add(2, 3) == 5`.\n")
    (root / "book").mkdir()
    (root / "book" / "_config.yml").write_text("title: Toy course\n")
    (root / "book" / "intro.md").write_text("# Toy course\n")
    (root / "requirements.txt").write_text("numpy\n")
    (root / "environment.yml").write_text("name: toy\ndependencies:\n  - python=3.11\n")
    return root
