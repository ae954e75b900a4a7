"""Part `double_backward`: ScaledSwish, a Function whose backward is differentiable."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle


def case(seed, shape):
    x, g, vx = oracle.arrays(seed, shape, shape, shape)
    beta, vb = oracle.arrays(seed + 1, (), ())
    return x * 2, float(beta) + 1.0, g, vx, float(vb)


def check_against_torch(student, x, beta, g, vx, vb, **kw):
    got = student.run("scaled_swish", x, beta, g, vx, vb, **kw)
    want = oracle.scaled_swish(x, beta, g, vx, vb)
    what = f"scaled_swish with x of shape {list(x.shape)}"
    oracle.close(got["out"], want["out"], f"{what}: the output")
    oracle.close(got["gx"], want["gx"], f"{what}: the gradient of x")
    oracle.close(got["gb"], want["gb"], f"{what}: the gradient of beta (a 0-d tensor: the sum over the broadcast)")
    assert got["gb_shape"] == [], f"{what}: the gradient of beta should have beta's shape () (a sum), got {got['gb_shape']}"
    assert got["second_order_graph"], (
        f"{what}: the gradients computed with create_graph=True have no history, so they cannot be "
        "differentiated again: write backward with differentiable torch ops on the saved inputs")
    oracle.close(got["hx"], want["hx"], f"{what}: the second derivative (gradient of grad·v) for x")
    oracle.close(got["hb"], want["hb"], f"{what}: the second derivative (gradient of grad·v) for beta")
    return got


def test_small(student):
    check_against_torch(student, *case(0, (5,)))


@pytest.mark.weight(4)
@settings(max_examples=12)
@given(seed=st.integers(0, 2**16), shape=st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_generated(student, seed, shape):
    check_against_torch(student, *case(seed, tuple(shape)))


def test_is_a_function_node(student):
    got = student.run("scaled_swish", *case(2, (3,)))
    assert got["grad_fn"] == "ScaledSwishBackward", (
        f"scaled_swish(...).grad_fn should be ScaledSwishBackward (the node of your Function), got {got['grad_fn']}")


def test_backward_is_hand_written(student):
    got = student.run("scaled_swish", *case(3, (4,)))
    assert got["engine_calls"] == 1, (
        "ScaledSwish.backward ran autograd again (torch.autograd.grad or .backward() inside backward): "
        "write the gradient formulas by hand")


@pytest.mark.weight(2)
def test_gradgradcheck_passes(student):
    got = check_against_torch(student, *case(4, (2, 3)), run_gradgradcheck=True)
    assert got["gradgradcheck"] is True, (
        "torch.autograd.gradgradcheck(scaled_swish, (x, beta)) fails for your Function"
        + (f": {got['gradgradcheck_error']['message'][:200]}" if "gradgradcheck_error" in got else ""))

# IPT-CANARY lab03 test_double_backward.py: hidden grading text, never shown to learners
