"""Part `custom_function`: LinearTanh, a fused linear + tanh with a hand-written backward.

Trust: values only. "Hand-written" is graded by behaviour: autograd hands the backward a y that
differs from tanh(x W^T + b) where the Function saved its output; the spec's formulas use the saved
y, while a backward that runs autograd on a recomputed forward (or torch's own linear + tanh) cannot.
"""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.engine.plugin import case_seed
from autograder.labs.lab03 import oracle

NAMES = ("x", "weight", "bias")


def case(seed, batch, n_in, n_out, bias=True, dtype=np.float64):
    x, w, b, g = oracle.arrays(seed, (batch, n_in), (n_out, n_in), (n_out,), (batch, n_out), dtype=dtype)
    return x, w, (b if bias else None), g


def swapped_y(seed, batch, n_out, dtype=np.float64):
    return (np.random.default_rng(seed + 101).uniform(-0.95, 0.95, (batch, n_out))).astype(dtype)


def check_against_torch(student, x, w, b, g, requires=(True, True, True), rtol=1e-7, atol=1e-9, swap_y=None,
                        twice=False):
    if swap_y is None:
        oracle.gate(student, "custom_function", lambda: check_against_torch(
            student, *case(21, 3, 3, 2), swap_y=swapped_y(21, 3, 2)), "LinearTanh's backward")
    got = student.run("lab03.scenarios:linear_tanh", x, w, b, g, requires=list(requires), swap_y=swap_y, twice=twice)
    got = oracle.reply(got, {"out", "grads", "grad_fn"}, "linear_tanh's results")
    want_out, want_grads = oracle.linear_tanh(x, w, b, g, requires, swap_y=swap_y, twice=twice)
    what = (f"linear_tanh with x {list(x.shape)}, weight {list(w.shape)}, bias {'None' if b is None else list(b.shape)}"
            f" ({x.dtype}, requires_grad {tuple(requires[:2 if b is None else 3])})")
    if twice:
        what += ", backward called twice (retain_graph=True): gradients accumulate"
    if swap_y is not None:
        what += ", when autograd hands backward a saved y different from tanh(x W^T + b)"
    oracle.close(got["out"], want_out, f"{what}: the output", rtol, atol)
    for i, (mine, want) in enumerate(replies.pairs(got["grads"], want_grads, f"{what}: the gradients")):
        if want is not None:
            extra = (" (backward must compute from ctx.saved_tensors: g = grad_out * (1 - y*y) with the saved y)"
                     if swap_y is not None else "")
            oracle.close(mine, want, f"{what}: the gradient of {NAMES[i]}{extra}", rtol, atol)
        elif i < 2 and not list(requires)[i]:
            assert mine is None, f"{what}: {NAMES[i]} does not require grad, so it should get no .grad"
    return got


def test_small(student):
    check_against_torch(student, *case(0, 4, 3, 5))


@pytest.mark.weight(4)
@settings(max_examples=15)
@given(seed=st.integers(0, 2**16), batch=st.sampled_from((0, 1, 1, 2, 3, 5)), n_in=st.integers(1, 5),
       n_out=st.integers(1, 5), bias=st.booleans(), dtype=st.sampled_from((np.float64, np.float64, np.float32)),
       requires=st.sampled_from(((True, True, True), (True, False, True), (False, True, False), (False, False, True),
                                 (True, True, False))))
def test_generated(student, seed, batch, n_in, n_out, bias, dtype, requires):
    assume(any(requires[:3 if bias else 2]))  # nothing requires grad: backward has no graph to run
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else {}
    check_against_torch(student, *case(seed, batch, n_in, n_out, bias, dtype), requires=requires, **tol)


@pytest.mark.parametrize("requires", [(False, True, False), (False, True, True), (True, False, False), (False, False, True)])
def test_only_some_inputs_require_grad(student, requires):
    """Each gradient is computed when its own input needs it (ctx.needs_input_grad[i]), and only then."""
    check_against_torch(student, *case(case_seed(14) % 2**16, 3, 4, 2), requires=requires)


def test_bias_none(student):
    check_against_torch(student, *case(3, 5, 4, 2, bias=False))


def test_float32(student):
    check_against_torch(student, *case(4, 6, 5, 3, dtype=np.float32), rtol=1e-5, atol=1e-6)


def test_batch_of_one_and_empty_batch(student):
    check_against_torch(student, *case(8, 1, 3, 1))
    check_against_torch(student, *case(9, 0, 3, 2))


def test_backward_twice(student):
    check_against_torch(student, *case(10, 3, 2, 4), twice=True)


def test_is_a_function_node(student):
    got = check_against_torch(student, *case(5, 2, 3, 2))
    assert got["grad_fn"] == "LinearTanhBackward", (
        f"linear_tanh(...).grad_fn should be LinearTanhBackward (the node of your Function), got {got['grad_fn']}")


@pytest.mark.weight(3)
@settings(max_examples=4)
@given(seed=st.integers(0, 2**16), batch=st.integers(1, 4), n_in=st.integers(1, 4), n_out=st.integers(1, 4),
       bias=st.booleans())
def test_backward_uses_the_saved_output(student, seed, batch, n_in, n_out, bias):
    x, w, b, g = case(seed, batch, n_in, n_out, bias)
    check_against_torch(student, x, w, b, g, swap_y=swapped_y(seed, batch, n_out))


def test_backward_uses_the_saved_output_float32(student):
    x, w, b, g = case(12, 3, 4, 2, dtype=np.float32)
    check_against_torch(student, x, w, b, g, swap_y=swapped_y(12, 3, 2, np.float32), rtol=1e-5, atol=1e-6)

# IPT-CANARY lab03 test_custom_function.py: hidden grading text, never shown to learners
