"""Part `decompose`: make_fx to Core ATen (the graph vs make_fx run here), the op histogram of the
learner's own graph, and the learner's graph runner on the graph as traced, on the graph edited without
recompiling (gm's code is stale), and on a call_method node it must refuse."""
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_seed
from autograder.labs.lab06 import oracle

FUNCS = {"mlp": "linear + gelu + layer_norm + softmax", "conv": "conv2d + silu + avg_pool2d + log_softmax",
         "attention": "q @ k^T / sqrt(d), softmax, @ v, mean", "misc": "hardswish, where, clamp, var(correction=0), leaky_relu, addcmul"}
_cache = {}


def run(student, name):
    if name not in _cache:
        got = replies.dict_of(student.run("decompose", name, case_seed(67)), {"graph", "histogram", "outs", "edited", "method"}, "the decompose scenario")
        graph = replies.list_of(got["graph"], "the graph's nodes")
        for i, d in enumerate(graph):
            d = replies.dict_of(d, {"op", "target", "args", "kwargs"}, f"node {i}")
            replies.string(d["op"], f"node {i} opcode")
            replies.string(d["target"], f"node {i} target")
        _cache[name] = got
    return _cache[name]


@pytest.mark.parametrize("name", list(FUNCS))
def test_core_aten(student, name):
    got, want = run(student, name), oracle.decompose_expect(name, case_seed(67))
    calls = [d["target"] for d in got["graph"] if d["op"] == "call_function"]
    not_core = sorted({t for t in calls if t != "operator.getitem"
                       and not ((op := oracle.resolve_aten(t)) is not None and torch.Tag.core in op.tags)})
    assert calls and not not_core, (
        f"to_core_aten of a function doing {FUNCS[name]}: every call_function should be a Core ATen op (torch.Tag.core), "
        f"not {not_core or 'nothing (the graph has no call_function)'}")
    oracle.compare_graphs(got["graph"], want["graph"], f"to_core_aten of a function doing {FUNCS[name]} (vs make_fx with core_aten_decompositions())")


@pytest.mark.parametrize("name", list(FUNCS))
def test_histogram(student, name):
    got = run(student, name)
    want = oracle.histogram_of(got["graph"])
    hist = replies.dict_of(got["histogram"], set(), "op_histogram(gm)")
    assert hist == want, f"op_histogram of your Core ATen graph of {FUNCS[name]} should be {want}, got {hist}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FUNCS))
def test_run_graph(student, name):
    got, want = run(student, name), oracle.decompose_expect(name, case_seed(67))      # inputs of this submission's own
    oracle.close(got["outs"], want["outs"], f"run_graph on the Core ATen graph of {FUNCS[name]}")
    oracle.close(got["edited"], want["edited"], f"run_graph on the Core ATen graph of {FUNCS[name]} after its first output was "
                                                "multiplied by 3 in the graph (not recompiled: walk gm.graph, do not call gm)")
    err = replies.dict_of(got["method"], {"error"}, "run_graph on a graph with a call_method node")
    assert err["error"] == "RuntimeError", (
        f"run_graph on a graph holding a call_method node should raise RuntimeError (only placeholder, get_attr, "
        f"call_function and output are allowed), got {err['error']}")


@pytest.mark.parametrize("seed", [0, 1])
def test_run_graph_dotted_get_attr(student, seed):
    seed = case_seed(680 + seed)
    got = replies.list_of(student.run("run_graph_dotted", seed), "run_graph's result on a graph with dotted get_attr targets")
    oracle.close(got, oracle.dotted_expect(seed), "run_graph on a graph whose get_attr targets are qualified names of nested "
                                                  "submodules ('blocks.0.scale', 'blocks.1.shift': read them one attribute at a time), "
                                                  "its last node edited in the graph without a recompile")

# IPT-CANARY lab06 test_decompose.py: hidden grading text, never shown to learners
