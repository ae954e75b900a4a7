"""Part `custom_function`: LinearTanh, a fused linear + tanh with a hand-written backward."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle


def case(seed, batch, n_in, n_out, bias=True, dtype=np.float64):
    x, w, b, g = oracle.arrays(seed, (batch, n_in), (n_out, n_in), (n_out,), (batch, n_out), dtype=dtype)
    return x, w, (b if bias else None), g


def check_against_torch(student, x, w, b, g, requires=(True, True, True), rtol=1e-7, atol=1e-9, **kw):
    got = student.run("linear_tanh", x, w, b, g, requires=list(requires), **kw)
    want_out, want_grads = oracle.linear_tanh(x, w, b, g, requires)
    what = f"linear_tanh with x {list(x.shape)}, weight {list(w.shape)}, bias {'None' if b is None else list(b.shape)}"
    oracle.close(got["out"], want_out, f"{what}: the output", rtol, atol)
    for name, mine, want in zip(("x", "weight", "bias"), got["grads"], want_grads):
        if want is not None:
            oracle.close(mine, want, f"{what}: the gradient of {name}", rtol, atol)
    return got


def test_small(student):
    check_against_torch(student, *case(0, 4, 3, 5))


@pytest.mark.weight(4)
@settings(max_examples=15)
@given(seed=st.integers(0, 2**16), batch=st.integers(1, 6), n_in=st.integers(1, 5), n_out=st.integers(1, 5),
       bias=st.booleans(), requires=st.sampled_from([(True, True, True), (True, False, True), (False, True, False)]))
def test_generated(student, seed, batch, n_in, n_out, bias, requires):
    check_against_torch(student, *case(seed, batch, n_in, n_out, bias), requires=requires)


def test_bias_none(student):
    check_against_torch(student, *case(3, 5, 4, 2, bias=False))


def test_float32(student):
    check_against_torch(student, *case(4, 6, 5, 3, dtype=np.float32), rtol=1e-5, atol=1e-6)


def test_is_a_function_node(student):
    got = student.run("linear_tanh", *case(5, 2, 3, 2))
    assert got["grad_fn"] == "LinearTanhBackward", (
        f"linear_tanh(...).grad_fn should be LinearTanhBackward (the node of your Function), got {got['grad_fn']}")


@pytest.mark.weight(2)
def test_backward_is_hand_written(student):
    got = student.run("linear_tanh", *case(6, 3, 4, 2))
    assert got["engine_calls"] == 1, (
        "LinearTanh.backward ran autograd again (torch.autograd.grad or .backward() inside backward): "
        "write the gradient formulas by hand")


@pytest.mark.weight(2)
def test_gradcheck_passes(student):
    got = check_against_torch(student, *case(7, 3, 4, 3), run_gradcheck=True)
    assert got["gradcheck"] is True, (
        f"torch.autograd.gradcheck(linear_tanh, (x, weight, bias)) fails for your Function"
        + (f": {got['gradcheck_error']['message'][:200]}" if "gradcheck_error" in got else ""))

# IPT-CANARY lab03 test_custom_function.py: hidden grading text, never shown to learners
