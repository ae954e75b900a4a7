"""Part `my_gradcheck`: the learner's numerical/analytical Jacobians and gradcheck verdicts.

The verdict on every Function of a battery (correct ones and deliberately wrong ones: by a factor,
a transposed gradient, a missing term, a wrong second input, ...) must equal torch.autograd.gradcheck's.
The scenario watches the learner's code: calling torch.autograd.gradcheck / torch.autograd.functional
is reported, and so is a numerical Jacobian that evaluates fn fewer than twice per input element.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle
from autograder.labs.lab03.scenarios import BATTERY


def assert_own_work(got, what):
    assert not got["forbidden"], (
        f"{what}: your code called {got['forbidden'][0].split(':')[-1]} from torch's own gradcheck or "
        "torch.autograd.functional; build the Jacobians yourself")


def check_verdict(student, name, seed, n, tolerances=None):
    got = student.run("gradcheck_verdict", name, seed, n, tolerances)
    what = f"my_gradcheck on {name} (n={n}{', ' + str(tolerances) if tolerances else ''})"
    assert_own_work(got, what)
    assert got["is_bool"], f"{what}: my_gradcheck should return True or False, got {got['verdict']}"
    assert got["inputs_untouched"], f"{what}: my_gradcheck changed the caller's input tensors"
    assert got["fn_calls"] >= 2 * got["diff_numel"], (
        f"{what}: fn was evaluated {got['fn_calls']} times for {got['diff_numel']} input elements; "
        "central differences need two evaluations per element")
    want = oracle.torch_verdict(name, seed, n, tolerances)
    assert got["truthy"] == want, f"{what}: torch.autograd.gradcheck says {want}, yours says {got['truthy']}"


@pytest.mark.parametrize("name", list(BATTERY))
def test_battery(student, name):
    check_verdict(student, name, 11, 3)


@pytest.mark.weight(6)
@settings(max_examples=30)
@given(name=st.sampled_from(sorted(BATTERY)), seed=st.integers(0, 2**16), n=st.integers(1, 4))
def test_generated_battery(student, name, seed, n):
    check_verdict(student, name, seed, n)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name, tolerances", [
    ("square_off_beyond_rtol", {"rtol": 1e-2}),
    ("square_slightly_off_within_rtol", {"rtol": 1e-4}),
    ("linear_tanh_missing_chain", {"atol": 10.0}),
    ("xsin_ok", {"eps": 1e-3, "atol": 1e-7, "rtol": 1e-7}),
])
def test_tolerances(student, name, tolerances):
    check_verdict(student, name, 5, 3, tolerances)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["linear_tanh_ok", "matmul_transposed", "mul_garbage_for_input_without_grad", "sum_squares_ok"])
def test_numerical_jacobian(student, name):
    got = student.run("gradcheck_jacobians", name, 3, 3, "numerical")
    assert_own_work(got, f"numerical_jacobian on {name}")
    want = oracle.true_jacobians(name, 3, 3)
    assert len(got["jacobians"]) == len(want), (
        f"numerical_jacobian on {name}: expected one Jacobian per input that requires grad ({len(want)}), got {len(got['jacobians'])}")
    for i, (mine, ref) in enumerate(zip(got["jacobians"], want)):
        oracle.close(mine, ref, f"numerical_jacobian on {name}, input {i}", rtol=1e-5, atol=1e-6)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["linear_tanh_ok", "matmul_transposed", "xsin_missing_term", "add_broadcast_mean"])
def test_analytical_jacobian(student, name):
    got = student.run("gradcheck_jacobians", name, 4, 3, "analytical")
    assert_own_work(got, f"analytical_jacobian on {name}")
    want = oracle.backward_jacobians(name, 4, 3)
    assert len(got["jacobians"]) == len(want), (
        f"analytical_jacobian on {name}: expected one Jacobian per input that requires grad ({len(want)}), got {len(got['jacobians'])}")
    for i, (mine, ref) in enumerate(zip(got["jacobians"], want)):
        oracle.close(mine, ref, f"analytical_jacobian on {name}, input {i} (the Jacobian its backward implies)")

# IPT-CANARY lab03 test_my_gradcheck.py: hidden grading text, never shown to learners
