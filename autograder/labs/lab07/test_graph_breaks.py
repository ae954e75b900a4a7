"""Part `graph_breaks`: a recording backend, a graph-break report checked against torch._dynamo.explain, and
three rewrites that compile with fullgraph=True."""
import contextlib
import io

import numpy as np
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab07 import oracle


def x_for(seed, shape=(12,), shift=0.0):
    """An input drawn from this submission's grading seed and the case number `seed` (a branch on its data
    may go either way)."""
    return (case_rng(seed).standard_normal(shape) + shift).astype(np.float32)


def eager(fn, x):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(torch.from_numpy(x.copy())).numpy()


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,seed", [("gb_clean", 10), ("gb_print_middle", 11), ("gb_branch", 13), ("gb_helper", 17)])
def test_recording_backend(student, name, seed):
    x = x_for(seed)
    got, want = student.run("recording", name, x), oracle.explain(name, x)
    got = replies.dict_of(got, {"graphs", "ops", "types", "out"}, f"compiling {name} with your RecordingBackend")
    assert got["graphs"] == want["graphs"], (
        f"compiling {name} with a fresh RecordingBackend: Dynamo hands it {want['graphs']} graph(s), your backend recorded {got['graphs']}")
    assert got["ops"] == want["ops"], f"{name}: the recorded graphs should have {want['ops']} call_function nodes, got {got['ops']}"
    assert all(t == "GraphModule" or t.endswith("GraphModule") for t in got["types"]), f"{name}: record the fx.GraphModule itself, got {got['types']}"
    oracle.close(got["out"], eager(oracle.shared.BREAK_FUNCTIONS[name], x), f"{name} compiled with your RecordingBackend")


def test_classify_real_reasons(student):
    reasons = []
    for seed, name in enumerate(oracle.shared.BREAK_FUNCTIONS, start=10):
        reasons += oracle.explain(name, x_for(seed))["reasons"]
    reasons += ["Dynamo does not know how to trace builtin operator `len`", "generic_jump TensorVariable()",
                "Unsupported Tensor.item() call with capture_scalar_outputs=False", "Call to `torch._dynamo.graph_break()`",
                "Attempted to call function marked as skipped", "data-dependent branching"]
    want = [oracle.classify(r) for r in reasons]
    got = [replies.string(g, "classify_break's result") for g, _ in replies.pairs(student.run("classify", reasons), want, "classify_break")]
    wrong = [(r.splitlines()[0][:70], g, w) for r, (g, w) in zip(reasons, zip(got, want, strict=True), strict=True) if g != w]
    assert not wrong, f"classify_break: {len(wrong)} of {len(reasons)} reasons misclassified, e.g. {wrong[0][0]!r} gave {wrong[0][1]!r}, expected {wrong[0][2]!r}"


@pytest.mark.weight(3)
@pytest.mark.parametrize("name,seed", [("gb_clean", 10), ("gb_print_middle", 11), ("gb_two_prints", 12), ("gb_branch", 13),
                                       ("gb_item", 14), ("gb_explicit", 15), ("gb_print_first", 16), ("gb_helper", 17)])
def test_analyze_graph_breaks(student, name, seed):
    x = x_for(seed)
    got, want = student.run("analyze", name, x), oracle.explain(name, x)
    got = replies.dict_of(got, {"graphs", "ops", "breaks", "reasons"}, f"analyze_graph_breaks({name})")
    for key in ("graphs", "ops", "breaks"):
        assert got[key] == want[key], f"analyze_graph_breaks({name}): {key} should be {want[key]}, got {got[key]}"
    assert got["reasons"] == want["categories"], f"analyze_graph_breaks({name}): reasons should be {want['categories']}, got {got['reasons']}"


@pytest.mark.weight(6)
def test_rewrites_compile_as_one_graph(student):
    """The three rewrites together (one check: a graph for the trivial one alone proves little)."""
    for name in ["branchy_fixed", "scaled_fixed", "logged_fixed"]:
        check_rewrite(student, name)


def check_rewrite(student, name):
    original = getattr(oracle, name.replace("_fixed", ""))
    probes = [x_for(seed, (3, 7), shift) for seed, shift in [(20, 1.0), (21, -1.0), (22, 0.0)]]
    probes.append(np.zeros_like(probes[0]))  # a branch's condition right at its edge (a sum of exactly 0)
    for value in (0.5, -0.5):                # just either side of it: one entry, a sum (and sum of sines) within 1 of 0
        near = np.zeros_like(probes[0])
        near[0, 0] = value
        probes.append(near)
    for seed, shift in [(20, 1.0), (21, -1.0), (22, 0.0)]:
        x = x_for(seed, (3, 7), shift)
        got = replies.dict_of(student.run("fixed", name, x), set(), f"torch.compile({name}, fullgraph=True)")
        assert "error" not in got, f"torch.compile({name}, fullgraph=True) failed: {got.get('error')}: {got.get('message')}"
        got = replies.dict_of(got, {"out", "graphs", "graph"}, f"torch.compile({name}, fullgraph=True)")
        assert got["graphs"] == 1 and got["graph"] is not None, f"{name} should compile to one graph, got {got['graphs']}"
        want = eager(original, x)
        oracle.close(got["out"], want, f"{name} on an input with mean {shift:+.0f}: it should return what {name[:-6]} returns")
        # the graph Dynamo captured, rebuilt and run here: one graph of tensor operations must compute the function
        # and on the other inputs too: one graph must hold every branch, not the one this input took
        for probe in probes:
            ran = oracle.run_graph_data(got["graph"], torch.from_numpy(probe.copy()), f"the graph Dynamo captured for {name}")
            oracle.close(ran.detach().numpy(), eager(original, probe), f"{name}: the one graph Dynamo captured (on an input with"
                         f" mean {shift:+.0f}), run on its own on an input with mean {float(probe.mean()):+.1f}")

# IPT-CANARY lab07 test_graph_breaks.py: hidden grading text, never shown to learners
