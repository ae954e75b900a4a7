"""Part `double_backward`: ScaledSwish, a Function whose backward is differentiable.

Trust: values only (first and second derivatives against torch on the formula). The old
"engine ran once" count reported by P1 is gone: a backward must compute from ctx.saved_tensors, and
one case hands it a saved x (without history) different from the input, which the spec's formulas
use and an autograd call inside backward on the saved leaves cannot.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab03 import oracle


def case(seed, shape):
    x, g, vx = oracle.arrays(seed, shape, shape, shape)
    beta, vb = oracle.arrays(seed + 1, (), ())
    return x * 2, float(beta) + 1.0, g, vx, float(vb)


def check_against_torch(student, x, beta, g, vx, vb):
    oracle.gate(student, "double_backward", lambda: check_saved_inputs(student, 31, (3,)), "ScaledSwish's backward")
    got = student.run("scaled_swish", x, beta, g, vx, vb)
    got = oracle.reply(got, {"out", "gx", "gb", "gb_shape", "second_order_graph", "grad_fn"}, "scaled_swish's results")
    want = oracle.scaled_swish(x, beta, g, vx, vb)
    what = f"scaled_swish with x of shape {list(x.shape)} and beta={beta:.3g}"
    oracle.close(got["out"], want["out"], f"{what}: the output")
    oracle.close(got["gx"], want["gx"], f"{what}: the gradient of x")
    assert got["gb_shape"] == [], f"{what}: the gradient of beta should have beta's shape () (a sum), got {got['gb_shape']}"
    oracle.close(got["gb"], want["gb"], f"{what}: the gradient of beta (a 0-d tensor: the sum over the broadcast)")
    assert got["second_order_graph"] is True, (
        f"{what}: the gradients computed with create_graph=True have no history, so they cannot be "
        "differentiated again: write backward with differentiable torch ops on the saved inputs")
    oracle.close(got.get("hx"), want["hx"], f"{what}: the second derivative (gradient of grad·v) for x")
    oracle.close(got.get("hb"), want["hb"], f"{what}: the second derivative (gradient of grad·v) for beta")
    return got


def test_small(student):
    check_against_torch(student, *case(0, (5,)))


@pytest.mark.weight(4)
@settings(max_examples=12)
@given(seed=st.integers(0, 2**16), shape=st.lists(st.sampled_from((0, 1, 1, 2, 3, 4)), min_size=0, max_size=3))
def test_generated(student, seed, shape):
    check_against_torch(student, *case(seed, tuple(shape)))


def test_zero_dim_and_empty(student):
    check_against_torch(student, *case(5, ()))
    check_against_torch(student, *case(6, (0, 3)))


def test_saturated_inputs(student):
    """Far from 0 sigmoid saturates: the derivatives there are 0 or finite, never NaN (an exp(-z) in
    the formula overflows)."""
    rng = case_rng(12)
    x = np.array([-1000.0, -750.0, -40.0, 0.5, 40.0, 750.0, 1000.0]) * rng.uniform(0.9, 1.1, 7)
    g, vx = oracle.arrays(case_seed(12), (7,), (7,))
    check_against_torch(student, x, 1.0 + float(rng.uniform(0, 0.5)), g, vx, float(rng.uniform(-1, 1)))


def test_is_a_function_node(student):
    got = check_against_torch(student, *case(2, (3,)))
    assert got["grad_fn"] == "ScaledSwishBackward", (
        f"scaled_swish(...).grad_fn should be ScaledSwishBackward (the node of your Function), got {got['grad_fn']}")


@pytest.mark.weight(2)
@pytest.mark.parametrize("seed, shape", [(3, (4,)), (7, (2, 3))])
def test_backward_uses_the_saved_inputs(student, seed, shape):
    check_saved_inputs(student, seed, shape)


def check_saved_inputs(student, seed, shape):
    x, beta, g, _, _ = case(seed, shape)
    swap = oracle.arrays(seed + 50, shape)[0]
    got = student.run("scaled_swish", x, beta, g, g, 0.0, swap_x=swap)
    got = oracle.reply(got, {"out", "gx", "gb"}, "scaled_swish's results")
    want_gx, want_gb = oracle.swish_grads(swap, beta, g)
    what = (f"scaled_swish with x of shape {list(shape)}, when autograd hands backward a saved x different from the "
            "input (backward must compute from ctx.saved_tensors with the formulas, not run autograd again)")
    oracle.close(got["out"], oracle.scaled_swish(x, beta, g, g, 0.0)["out"], f"{what}: the output")
    oracle.close(got["gx"], want_gx, f"{what}: the gradient of x")
    oracle.close(got["gb"], want_gb, f"{what}: the gradient of beta")

# IPT-CANARY lab03 test_double_backward.py: hidden grading text, never shown to learners
