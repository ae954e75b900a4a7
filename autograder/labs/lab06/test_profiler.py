"""Part `profiler`: a profiling Interpreter checked structurally; a 100x heavier node must dominate."""
import time

import pytest

from autograder.labs.lab06 import oracle


def run_profile(student, name, runs, top=5):
    start = time.perf_counter()
    got = student.run("profile", name, 0, runs, top)
    return got, time.perf_counter() - start


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,runs", [("resnet", 3), ("heavy", 4)])
def test_structure(student, name, runs):
    got, elapsed = run_profile(student, name, runs)
    what = f"profile_graph(runs={runs}) on the '{name}' model"
    assert got["is_interpreter"], f"{what}: ProfilingInterpreter should subclass torch.fx.Interpreter"
    missing = sorted(set(got["graph_nodes"]) - set(got["nodes"]))
    extra = sorted(set(got["nodes"]) - set(got["graph_nodes"]))
    assert not missing and not extra, f"{what}: 'nodes' should have one entry per graph node (placeholders and output too); missing {missing[:5]}, unknown {extra[:5]}"
    wrong_calls = {k: v["calls"] for k, v in got["nodes"].items() if v["calls"] != runs}
    assert not wrong_calls, f"{what}: every node runs once per run, so calls should be {runs}; got {wrong_calls}"
    assert all(v["seconds"] > 0 for v in got["nodes"].values()), f"{what}: every node's seconds should be positive"
    assert got["runs"] == runs, f"{what}: report['runs'] should be {runs}, got {got['runs']}"
    total, summed = got["total"], sum(v["seconds"] for v in got["nodes"].values())
    assert 0 < total <= elapsed, f"{what}: 'total' ({total:.4f} s) should be the measured time of the runs (the whole call took {elapsed:.4f} s)"
    assert 0.4 * total <= summed <= 1.02 * total, (
        f"{what}: the node times should add up to most of the total (sum {summed:.4f} s, total {total:.4f} s): "
        "time each node around super().run_node, and the runs around interp.run")
    oracle.close(got["outs"], got["eager"], f"{what}: report['result']")
    want, _ = oracle.eager(name)
    oracle.close(got["outs"], want, f"{what}: report['result']")


@pytest.mark.weight(2)
def test_heavy_node_dominates(student):
    got, _ = run_profile(student, "heavy", 5)
    nodes = got["nodes"]
    assert "matmul" in nodes, "profile_graph on a model with one 512x512 matmul: its node 'matmul' is missing from the report"
    heaviest = max(nodes, key=lambda k: nodes[k]["seconds"])
    share = nodes["matmul"]["seconds"] / sum(v["seconds"] for v in nodes.values())
    assert heaviest == "matmul" and share >= 0.3, (  # ~95% on a quiet machine; margin for a loaded one
        f"a 512x512 matmul is about 100x heavier than the model's other nodes: it should take most of the time, "
        f"but the heaviest node is {heaviest!r} and the matmul's share is {share:.0%}")


@pytest.mark.parametrize("top", [3, 6])
def test_summary(student, top):
    got, _ = run_profile(student, "resnet", 2, top)
    lines = [line for line in got["summary"].splitlines() if line.strip()]
    ranked = sorted(got["nodes"], key=lambda k: got["nodes"][k]["seconds"], reverse=True)[:top]
    names = [line.split()[0] for line in lines[1:]]
    assert names == ranked, (
        f"profile_summary(report, top={top}): after the header, the lines should start with the {top} slowest nodes, "
        f"slowest first: {ranked}; got {names}")

# IPT-CANARY lab06 test_profiler.py: hidden grading text, never shown to learners
