"""Every lab: the committed student notebook is fresh, and its graders pass their self-test."""
from __future__ import annotations

import pytest

from autograder.authoring.generate import render, student_notebook
from autograder.engine import selftest
from autograder.engine.pipeline import warm_source
from autograder.paths import all_labs

LABS = all_labs()


def test_there_is_at_least_one_lab():
    assert LABS, "no lab found under solutions/"


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_student_notebook_is_generated_from_the_solution(paths):
    fresh = render(student_notebook(paths.solution.read_text()))
    assert paths.release_notebook.exists(), f"{paths.release_notebook} is missing: run `make labs`"
    assert paths.release_notebook.read_text() == fresh, f"{paths.release_notebook.name} is stale: run `make labs` and commit"


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_reading_one_cell_at_a_time_is_reading_the_whole_text(paths):
    """generate.read_percent (which the selftest reads every mutant through) gives what jupytext gives for the
    whole text: the solution and three of its hand-written mutants, cells and metadata (cell ids aside)."""
    import json

    import jupytext

    from autograder.authoring.generate import read_percent
    from autograder.engine.variants import hand_mutants

    def plain(nb):
        return json.dumps([[{k: v for k, v in c.items() if k != "id"} for c in nb.cells], nb.metadata], sort_keys=True)

    text = paths.solution.read_text()
    texts = [text] + [text.replace(m["find"], m["replace"]) for m in hand_mutants(paths)[:3] if text.count(m["find"]) == 1]
    for k, variant in enumerate(texts):
        assert plain(read_percent(variant)) == plain(jupytext.reads(variant, fmt="py:percent")), (
            f"{paths.solution.name}{' mutant %d' % k if k else ''}: read_percent differs from jupytext.reads")


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_every_part_has_public_and_hidden_tests(paths):
    from labkit.notebook import lab_info, read_notebook
    info = lab_info(read_notebook(paths.release_notebook))
    assert info.parts, f"{paths.lab} has no graded part"
    for part in info.parts:
        assert (paths.public_tests / f"test_{part.id}.py").exists(), f"{paths.lab}: part {part.id} has no public tests"
        assert (paths.graders / f"test_{part.id}.py").exists(), f"{paths.lab}: part {part.id} has no hidden graders"


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_selftest(paths, capsys, record_property):
    """CI's proof of each lab (quick: a fixed sample of hand-written and machine mutants, one adversarial
    attempt against its twin, a small fuzz budget); `make selftest` and `make mutation` run everything."""
    code = selftest.run(paths, jobs=2, quick=True)
    out = capsys.readouterr().out
    # each lab's figures in CI's log: conftest prints them in the terminal summary
    for line in out.splitlines():
        if line.startswith(("mutants caught", "adversarial", "FAIL", "selftest")):
            record_property("selftest summary", f"[{paths.lab}] {line}")
    assert code == 0, f"selftest {paths.lab} failed:\n{out}"


def _public_tests(paths, notebook) -> tuple[int, str]:
    import os
    import subprocess
    import sys
    env = {**os.environ, "LABKIT_NOTEBOOK": str(notebook)}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(paths.public_tests), "-q", "-p", "no:cacheprovider",
                           "--no-header", "-rN", "--tb=native"], cwd=paths.release_dir, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_public_tests_pass_on_the_reference_and_fail_on_the_stub(paths):
    code, out = _public_tests(paths, paths.solution)
    assert code == 0, f"public tests of {paths.lab} fail on the reference:\n{out}"
    code, out = _public_tests(paths, paths.release_notebook)
    assert code == 1 and " passed" not in out.splitlines()[-1], f"public tests of {paths.lab} pass on the stub:\n{out}"


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_every_hidden_file_carries_a_canary(paths):
    hidden = [*paths.hidden.glob("*.py"), *paths.hidden.glob("*.toml")]
    missing = [str(f.relative_to(paths.root)) for f in hidden if f.exists() and "IPT-CANARY" not in f.read_text()]
    assert not missing, f"hidden files without a canary line (the leak scan looks for it): {missing}"


def test_graders_never_zip_learner_data_without_a_length_check():
    """A bare zip() stops at the shorter list: a reply with too few items would pass unchecked. P0's files
    use replies.pairs (learner data) or zip(..., strict=True) (P0's own data)."""
    import ast
    from autograder.paths import AUTOGRADER
    found = []
    for file in sorted((AUTOGRADER / "labs").glob("lab*/*.py")):
        if file.name == "scenarios.py":  # runs in P1: its zips decide nothing
            continue
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip":
                strict = any(k.arg == "strict" and isinstance(k.value, ast.Constant) and k.value.value is True
                             for k in node.keywords)
                if not strict:
                    found.append(f"{file.relative_to(AUTOGRADER)}:{node.lineno}")
    assert not found, "zip() without strict=True (use replies.pairs for learner data): " + ", ".join(found)


def test_graders_draw_their_cases_from_the_grading_seed():
    """A grader that pins derandomize=True meets the same generated cases in every submission, so answers
    harvested from earlier feedback would carry over. Only the fuzzers (which prove the reference) pin it."""
    from autograder.paths import AUTOGRADER
    pinned = [str(f.relative_to(AUTOGRADER)) for f in sorted((AUTOGRADER / "labs").glob("lab*/*.py"))
              if f.name != "fuzz.py" and "derandomize=True" in f.read_text()]
    assert not pinned, f"graders that pin derandomize=True: {pinned}"


def test_every_part_meets_cases_drawn_from_the_grading_seed():
    """A part graded only on fixed hidden inputs can be passed from a table of answers harvested over earlier
    submissions. Every test module (= part) must draw some of its cases from the grading seed: hypothesis's
    @given, the `grading_seed` fixture, or `case_rng` / `case_seed` from autograder.engine.plugin."""
    import ast

    from autograder.paths import AUTOGRADER
    fixed = []
    for file in sorted((AUTOGRADER / "labs").glob("lab*/test_*.py")):
        tree = ast.parse(file.read_text())
        tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
        seeded = any(any("given" in ast.unparse(d) for d in t.decorator_list) or "grading_seed" in [a.arg for a in t.args.args]
                     for t in tests)
        seeded = seeded or any(isinstance(n, ast.Name) and n.id in ("case_rng", "case_seed") for n in ast.walk(tree))
        if tests and not seeded:
            fixed.append(str(file.relative_to(AUTOGRADER)))
    assert not fixed, f"parts graded only on fixed inputs: {fixed}"


def test_the_grading_seed_follows_the_submission():
    from autograder.engine.pipeline import grading_seed
    one, other = [("a-solution", "x = 1")], [("a-solution", "x = 2")]
    assert grading_seed(one) == grading_seed([tuple(c) for c in one]) == grading_seed(list(one))
    assert grading_seed(one) != grading_seed(other)


@pytest.mark.parametrize("paths", LABS, ids=[p.lab for p in LABS])
def test_examples_follow_their_recipes(paths):
    """An example built by a recipe (examples/recipes.toml) must match it, so the examples and their score
    table follow the reference as it changes (`python -m autograder examples LAB --write` rebuilds them)."""
    from autograder.commands import stale_examples
    stale = stale_examples(paths)
    assert not stale, "; ".join(stale)


def test_every_public_assert_says_what_went_wrong():
    """A learner reads the public tests' messages in check(): a bare assert tells them nothing."""
    import ast
    from autograder.paths import REPO
    bare = [f"{f.relative_to(REPO)}:{node.lineno}" for f in sorted((REPO / "labs").glob("lab*/tests/*.py"))
            for node in ast.walk(ast.parse(f.read_text())) if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"public-test asserts without a message: {bare}"


WARM_CHECK = '''
import importlib, sys, tomllib, types
lab, path = sys.argv[1], sys.argv[2]
for name in ["numpy", "torch", *tomllib.load(open(path + "/lab.toml", "rb")).get("preload", [])]:
    importlib.import_module(name)
module = types.ModuleType("warm")
exec(compile(open(path + "/scenarios.py").read(), "scenarios.py", "exec"), module.__dict__)
module.warm_p1()
print("warmed")
'''


@pytest.mark.parametrize("paths", [p for p in LABS if warm_source(p)], ids=lambda p: p.lab)
def test_the_warm_up_of_the_template_runs(paths):
    """worker._warm keeps a failing warm-up quiet (it is only an optimisation), so this is where one that broke shows:
    warm_p1 after the lab's preloads, as the template runs it."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", WARM_CHECK, paths.lab, str(paths.hidden)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("warmed"), done.stderr[-3000:]
