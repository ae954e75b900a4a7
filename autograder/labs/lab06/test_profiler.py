"""Part `profiler`: a profiling Interpreter checked on values only. No verdict rests on timings (they
depend on the machine's load): P0 checks which nodes ran and how often, the result of interpreting the
graph (edited without recompiling, so calling the GraphModule gives another answer), a run with a value
given in initial_env (that node must not run), totals that contain the node times, and a summary that
agrees with the report it was given. The matmul's share on the heavy model is recorded, informational."""
import math
import time

import numpy as np

import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab06 import oracle

KEYS = {"nodes", "total", "runs", "outs", "summary", "is_interpreter", "graph_nodes"}


def run_profile(student, name, runs, top=5, edit=True, inject=4, program=None):
    """Every call also runs ProfilingInterpreter once with node `inject` given in initial_env, and checks it:
    the node counts must come from the learner's run_node, whichever way the report was made."""
    started = time.perf_counter()   # P0's own clock around the whole call: no honest 'total' exceeds it
    got = replies.dict_of(student.run("profile", name, 0, runs, top, edit, inject, program), KEYS, "the profile scenario")
    got["elapsed_in_p0"] = time.perf_counter() - started
    check_injected(got, name, inject, edit, program)
    model = f"the '{name}' model" if program is None else f"the generated program {oracle.program_text(program)}"
    what = f"profile_graph(gm, ..., runs={runs}) on {model}"
    nodes = replies.dict_of(got["nodes"], set(), f"{what}: report['nodes']")
    for k, v in nodes.items():
        entry = replies.dict_of(v, {"seconds", "calls"}, f"{what}: report['nodes'][{k!r}]")
        replies.number(entry["seconds"], f"{what}: seconds of {k!r}")
        replies.integer(entry["calls"], f"{what}: calls of {k!r}")
    replies.number(got["total"], f"{what}: report['total']")
    return got, what


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,runs", [("resnet", 3), ("heavy", 4), ("tied", 2)])
def test_structure(student, name, runs):
    check_structure(student, name, runs)


@pytest.mark.weight(3)
def test_generated_program(student):
    """A program drawn from this submission's grading seed, a node given in initial_env chosen the same way."""
    rng = case_rng(65)
    program = oracle.generated_program(rng, int(rng.integers(4, 10)))
    nodes = oracle.float_nodes("program", 0, program)
    check_structure(student, "program", int(rng.integers(2, 5)), program, int(nodes[int(rng.integers(len(nodes)))]))


def check_structure(student, name, runs, program=None, inject=4):
    got, what = run_profile(student, name, runs, program=program, inject=inject)
    want = oracle.interpret(name, edit=True, program=program)
    assert replies.boolean(got["is_interpreter"], "is_interpreter"), f"{what}: ProfilingInterpreter should subclass torch.fx.Interpreter"
    oracle.close(got["outs"], want["outs"], f"{what}: report['result'] (interpret the graph, which the check edited "
                                            "without recompiling: calling gm itself runs stale code)")
    nodes = got["nodes"]
    missing, extra = sorted(set(want["names"]) - set(nodes)), sorted(set(nodes) - set(want["names"]))
    assert not missing and not extra, (
        f"{what}: 'nodes' should have one entry per graph node (placeholders and output too); missing {missing[:5]}, unknown {extra[:5]}")
    wrong_calls = {k: v["calls"] for k, v in nodes.items() if v["calls"] != runs}
    assert not wrong_calls, f"{what}: every node runs once per run, so calls should be {runs}; got {wrong_calls}"
    assert all(v["seconds"] > 0 for v in nodes.values()), f"{what}: every node's seconds should be positive"
    assert replies.integer(got["runs"], "report['runs']") == runs, f"{what}: report['runs'] should be {runs}, got {got['runs']}"
    total, summed = got["total"], math.fsum(v["seconds"] for v in nodes.values())
    assert total > 0 and summed <= total * (1 + 1e-9) + 1e-9, (
        f"{what}: the node times are measured inside the runs, so their sum ({summed:.6f} s) cannot exceed 'total' "
        f"({total:.6f} s), the time measured around the runs")
    assert total <= got["elapsed_in_p0"], (
        f"{what}: 'total' ({total:.6f} s) is longer than the whole call took ({got['elapsed_in_p0']:.6f} s, timed by the "
        "grader): measure it as perf_counter() after the runs minus perf_counter() before them")


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,inject", [("resnet", 5), ("branchy", 3)])
def test_initial_env_node_does_not_run(student, name, inject):
    run_profile(student, name, 2, edit=False, inject=inject)


def check_injected(got, name, inject, edit, program=None):
    want = oracle.interpret(name, edit=edit, inject=inject, program=program)
    inj = replies.dict_of(got.get("injected"), {"outs", "nodes"}, "ProfilingInterpreter(gm).run(..., initial_env=...)")
    model = f"the '{name}' model" if program is None else f"the generated program {oracle.program_text(program)}"
    what = f"ProfilingInterpreter(gm).run(x, initial_env={{{want['injected']}: ones}}) on {model}"
    oracle.close(inj["outs"], want["outs"], f"{what}: the result (the given value replaces the node's)")
    calls = replies.dict_of(inj["nodes"], set(), f"{what}: stats")
    ran = {k for k, v in calls.items() if v}
    assert ran == set(want["ran"]), (
        f"{what}: stats should count exactly the nodes that ran once each; {want['injected']!r} was given and does not run "
        f"(missing {sorted(set(want['ran']) - ran)[:4]}, unexpected {sorted(ran - set(want['ran']))[:4]})")
    assert all(v == 1 for k, v in calls.items() if k in ran), f"{what}: each node ran once, got calls {calls}"


@pytest.mark.weight(2)
def test_node_times_add_up_over_runs(student):
    """A node that sleeps a known time per call (time.sleep waits at least that long, on a busy machine
    too): after `runs` runs its seconds are at least runs x the pause. A lower bound only: no verdict
    rests on how long anything else took."""
    rng = case_rng(67)
    runs, pause = int(rng.integers(3, 7)), 0.004
    nodes = replies.dict_of(student.run("profile_pause", runs, pause), set(), "profile_graph's report['nodes']")
    what = f"profile_graph(gm, x, runs={runs}) on x -> pause_node(x) -> add, where pause_node sleeps {1e3 * pause:g} ms per call"
    entry = replies.dict_of(nodes.get("pause_node"), {"seconds", "calls"}, f"{what}: report['nodes']['pause_node']")
    calls, seconds = replies.integer(entry["calls"], f"{what}: calls"), replies.number(entry["seconds"], f"{what}: seconds")
    assert calls == runs, f"{what}: pause_node ran {runs} times, calls should be {runs}, got {calls}"
    assert seconds >= runs * pause * (1 - 1e-6), (
        f"{what}: its seconds should add up over the {runs} runs, at least {1e3 * runs * pause:g} ms; got {1e3 * seconds:.2f} ms")


@pytest.mark.parametrize("top", [3, 6])
def test_summary(student, top, measurement):
    got, what = run_profile(student, "heavy", 2, top)
    nodes, total = got["nodes"], got["total"]
    rows = oracle.summary_rows(got["summary"], f"profile_summary(report, top={top})")
    ranked = sorted(nodes, key=lambda k: nodes[k]["seconds"], reverse=True)[:top]
    names = [r[0] for r in rows]
    assert len(rows) == min(top, len(nodes)) and set(names) <= set(nodes), (
        f"profile_summary(report, top={top}): after the header, {min(top, len(nodes))} lines should follow, one per node "
        f"of the report; got {len(rows)} starting with {names[:top]}")
    secs = [nodes[n]["seconds"] for n in names]
    assert secs == sorted(secs, reverse=True) and secs[-1] >= nodes[ranked[-1]]["seconds"], (
        f"profile_summary(report, top={top}): the lines should be the {top} slowest nodes of the report, slowest first "
        f"({ranked}); got {names}")
    for name, ms, calls, share in rows:
        s = nodes[name]["seconds"]
        assert math.isclose(ms, 1e3 * s, rel_tol=0.02, abs_tol=2e-3), (
            f"profile_summary: the line of {name!r} should show {1e3 * s:.3f} ms (its report seconds x 1000), got {ms}")
        assert calls == nodes[name]["calls"], f"profile_summary: the line of {name!r} should show {nodes[name]['calls']} calls, got {calls:g}"
        assert math.isclose(share, 100 * s / total, rel_tol=0.02, abs_tol=0.15), (
            f"profile_summary: the line of {name!r} should show a share of {100 * s / total:.1f}% (seconds / total), got {share}")
    if "matmul" in nodes and top == 3:
        measurement("heavy matmul share of node time", nodes["matmul"]["seconds"] / max(1e-12, sum(v["seconds"] for v in nodes.values())), "ratio")


@pytest.mark.parametrize("case", [0, 1])
def test_summary_share_of_report_total(student, case):
    """A report made up here: 'total' is well above the sum of the node times, so a share computed
    against that sum (instead of report['total']) is off by the ratio. The times are drawn from this
    submission's grading seed (distinct, so the ranking is unambiguous)."""
    names = [["conv", "relu", "add", "x", "output"], ["matmul", "softmax", "getattr_1", "y"]][case]
    rng = case_rng(66 + case)
    seconds = sorted(rng.choice(np.arange(1, 5000), size=len(names), replace=False) * 1e-5, reverse=True)
    nodes = {n: (float(s), int(rng.integers(1, 4))) for n, s in zip(rng.permutation(names).tolist(), seconds, strict=True)}
    total = float(sum(seconds) * rng.uniform(1.3, 2.5))
    summary = student.run("summary_of", {k: list(v) for k, v in nodes.items()}, total, 3, 3)
    what = "profile_summary on a report whose 'total' exceeds the sum of its node times (interpreter overhead)"
    rows = oracle.summary_rows(summary, what)
    assert len(rows) == 3, f"{what}, top=3: after the header, 3 lines should follow, got {len(rows)}"
    for name, _ms, _calls, share in rows:
        assert name in nodes, f"{what}: unknown node {name!r} in the summary"
        want = 100 * nodes[name][0] / total
        assert math.isclose(share, want, rel_tol=0.02, abs_tol=0.15), (
            f"{what}: the line of {name!r} should show a share of {want:.1f}% (its seconds / report['total']), got {share}")

# IPT-CANARY lab06 test_profiler.py: hidden grading text, never shown to learners
