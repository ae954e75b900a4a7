"""Part `decompose`: make_fx to Core ATen, the op histogram (vs make_fx run here), and the learner's graph runner."""
import pytest

from autograder.labs.lab06 import oracle

FUNCS = {"mlp": "linear + gelu + layer_norm + softmax", "conv": "conv2d + silu + avg_pool2d + log_softmax",
         "attention": "q @ k^T / sqrt(d), softmax, @ v, mean", "misc": "hardswish, where, clamp, var(correction=0), leaky_relu, addcmul"}


@pytest.mark.parametrize("name", list(FUNCS))
def test_core_aten(student, name):
    got = student.run("decompose", name)
    not_core = sorted({t for t, core in got["targets"] if not core})
    assert got["targets"] and not not_core, (
        f"to_core_aten of a function doing {FUNCS[name]}: every call_function should be a Core ATen op (torch.Tag.core), "
        f"not {not_core or 'nothing (the graph has no call_function)'}")


@pytest.mark.parametrize("name", list(FUNCS))
def test_histogram(student, name):
    got, want = student.run("decompose", name), oracle.decompose_expect(name)
    assert got["histogram"] == want["histogram"], (
        f"op_histogram of the Core ATen graph of {FUNCS[name]} should be {want['histogram']}, got {got['histogram']}")


@pytest.mark.parametrize("name", list(FUNCS))
def test_run_graph(student, name):
    got, want = student.run("decompose", name), oracle.decompose_expect(name)
    oracle.close(got["outs"], want["outs"], f"run_graph on the Core ATen graph of {FUNCS[name]}")

# IPT-CANARY lab06 test_decompose.py: hidden grading text, never shown to learners
