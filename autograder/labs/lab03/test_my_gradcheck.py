"""Part `my_gradcheck`: the learner's numerical/analytical Jacobians and gradcheck verdicts.

Trust: values only. The verdict on every Function of a battery (correct ones, deliberately wrong
ones, and ones on which torch.autograd.gradcheck and the lab's spec disagree) must equal the spec's
verdict, computed here in P0 by the oracle. The spec checks only the Jacobians (torch's gradcheck
also rejects a backward not exactly linear in grad_output and a non-reentrant one) and perturbs
copies (torch perturbs the caller's tensors in place, so a function that reads a captured input is
judged differently). Delegating to torch.autograd.gradcheck, get_numerical_jacobian or
torch.autograd.functional.jacobian therefore gives wrong answers on named cases; no P1-side
profiling or call counting is believed.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab03 import oracle, scenarios
from autograder.labs.lab03.scenarios import BATTERY

# spec and torch disagree on these: a delegating my_gradcheck fails them
DIFFERS_FROM_TORCH = ["square_offset_within_atol", "square_noisy_within_atol", "mul_second_captured",
                      "add_bias_captured", "sum_squares_empty", "mul_same_tensor_twice"]


def describe(name):
    return name.replace("_", " ")


def check_untouched(got, name, seed, n, what):
    inputs = scenarios.battery_inputs(name, seed, n)
    for i, (after, before) in enumerate(replies.pairs(got["inputs_after"], list(inputs), f"{what}: the inputs")):
        if isinstance(before, float):
            continue
        assert isinstance(after, np.ndarray) and after.shape == tuple(before.shape) and np.array_equal(
            after, before.detach().numpy()), f"{what}: my_gradcheck changed the caller's input tensor {i}"


def check_verdict(student, name, seed, n, tolerances=None, gated=True):
    if gated:
        oracle.gate(student, "my_gradcheck", lambda: [check_verdict(student, k, 41, 2, gated=False)
                                                      for k in ("mul_second_captured", "square_offset_within_atol")],
                    "my_gradcheck (where its rules and torch.autograd.gradcheck's differ)")
    got = student.run("gradcheck_verdict", name, seed, n, tolerances)
    got = oracle.reply(got, {"verdict", "is_bool", "type", "inputs_after", "grads_after"}, "my_gradcheck's result")
    what = f"my_gradcheck on a Function ({describe(name)}, n={n}{', ' + str(tolerances) if tolerances else ''})"
    assert got["is_bool"] is True and isinstance(got["verdict"], bool), (
        f"{what}: my_gradcheck should return True or False, got a {got['type']}")
    check_untouched(got, name, seed, n, what)
    for i, g in enumerate(replies.list_of(got["grads_after"], f"{what}: the inputs' .grad")):
        assert g is None, f"{what}: my_gradcheck left a .grad on the caller's input {i} (use torch.autograd.grad)"
    want = oracle.spec_verdict(name, seed, n, tolerances)
    assert got["verdict"] == want, f"{what}: the Jacobians {'agree' if want else 'disagree'}, so the verdict should be {want}, yours is {got['verdict']}"


@pytest.mark.parametrize("name", [k for k in BATTERY if k not in DIFFERS_FROM_TORCH])
def test_battery(student, name):
    check_verdict(student, name, 11, 3)


@pytest.mark.weight(3)
@pytest.mark.parametrize("name", DIFFERS_FROM_TORCH)
def test_spec_not_torch(student, name):
    check_verdict(student, name, 13, 3)
    check_verdict(student, name, 14, 2)


@pytest.mark.weight(6)
@settings(max_examples=30)
@given(name=st.sampled_from(sorted(BATTERY)), seed=st.integers(0, 2**16), n=st.integers(1, 4),
       tolerances=st.sampled_from((None, None, None, {"rtol": 1e-2}, {"atol": 1e-3, "rtol": 0.0}, {"eps": 1e-4})))
def test_generated_battery(student, name, seed, n, tolerances):
    check_verdict(student, name, seed, n, tolerances)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name, tolerances", [
    ("square_off_beyond_rtol", {"rtol": 1e-2}),
    ("square_slightly_off_within_rtol", {"rtol": 1e-4}),
    ("linear_tanh_missing_chain", {"atol": 10.0}),
    ("xsin_ok", {"eps": 1e-3, "atol": 1e-7, "rtol": 1e-7}),
    ("square_error_grows", {"atol": 1e-2}),
    ("square_offset_within_atol", {"atol": 1e-9, "rtol": 0.0}),
    ("square_at_rtol_edge", {"atol": 0.0}),  # rtol scales |numerical|, not |analytical|
])
def test_tolerances(student, name, tolerances):
    check_verdict(student, name, 5, 3, tolerances)


@pytest.mark.weight(2)
def test_fn_returning_a_view_of_its_input(student):
    # fn(x) = x[0] aliases the perturbed copy: f(x + eps e_j) must be kept as a copy before x moves again
    check_verdict(student, "first_row_view", 6, 3)
    check_jacobians(student, "first_row_view", 7, 3, "numerical")


def check_jacobians(student, name, seed, n, which, eps=1e-6, gated=True):
    if gated:
        oracle.gate(student, f"{which}_jacobian", lambda: check_jacobians(
            student, "mul_second_captured" if which == "numerical" else "add_bias_captured", 42, 2, which, gated=False),
            f"{which}_jacobian (on a function that reads a captured input)")
    got = student.run("gradcheck_jacobians", name, seed, n, which, eps)
    got = oracle.reply(got, {"jacobians", "inputs_after"}, f"{which}_jacobian's result")
    fn = f"{which}_jacobian"
    what = f"{fn} on a Function ({describe(name)}, n={n})"
    want = oracle.spec_numerical(name, seed, n, eps) if which == "numerical" else oracle.spec_analytical(name, seed, n)
    pairs = replies.pairs(got["jacobians"], want, f"{what}: one Jacobian per input that requires grad")
    for i, (mine, ref) in enumerate(pairs):
        if which == "numerical":
            oracle.close(mine, ref, f"{what}, input {i} (central differences on a copy of the input)", rtol=1e-6, atol=1e-7)
        else:
            oracle.close(mine, ref, f"{what}, input {i} (the Jacobian its backward implies)")
    check_untouched(got, name, seed, n, what)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["linear_tanh_ok", "matmul_transposed", "mul_garbage_for_input_without_grad",
                                  "sum_squares_ok", "mul_second_captured", "matmul_noncontiguous_input",
                                  "scale_with_float_arg", "square_scalar", "sum_squares_empty", "constant_output"])
def test_numerical_jacobian(student, name):
    check_jacobians(student, name, 3, 3, "numerical")


def test_numerical_jacobian_eps(student):
    check_jacobians(student, "xsin_ok", 4, 3, "numerical", eps=1e-2)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["linear_tanh_ok", "matmul_transposed", "xsin_missing_term", "add_broadcast_mean",
                                  "add_bias_captured", "matmul_wrong_noncontiguous", "scale_float_arg_nograd",
                                  "square_scalar", "sum_squares_empty", "constant_output",
                                  "square_ignores_second_input", "mul_empty"])
def test_analytical_jacobian(student, name):
    check_jacobians(student, name, 4, 3, "analytical")


@pytest.mark.weight(2)
@settings(max_examples=8)
@given(name=st.sampled_from(sorted(BATTERY)), seed=st.integers(0, 2**16), n=st.integers(1, 3),
       which=st.sampled_from(("numerical", "analytical")))
def test_generated_jacobians(student, name, seed, n, which):
    if name == "square_noisy_within_atol" and which == "analytical":
        name = "square_ok"  # its backward's noise differs between processes
    check_jacobians(student, name, seed, n, which)

# IPT-CANARY lab03 test_my_gradcheck.py: hidden grading text, never shown to learners
