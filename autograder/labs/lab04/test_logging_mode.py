"""Part `logging_mode`: a TorchDispatchMode that logs ATen ops, compared with one P0 runs on the same module."""
import numpy as np
import pytest

from autograder.labs.lab04 import oracle


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,seed", [("mlp", 0), ("conv", 1), ("norm", 2), ("tanh_inplace", 3)])
def test_training_step_ops(student, name, seed):
    got, want = student.run("log_step", name, seed), oracle.log_step(name, seed)
    assert got["ops"] == want["ops"], (
        f"log_training_step on the '{name}' model: expected {len(want['ops'])} ops {want['ops'][:12]}..., "
        f"got {len(got['ops'])}: {got['ops'][:12]}...")
    for param, grad in want["grads"].items():
        oracle.close(got["grads"][param], grad, f"'{name}' model: the gradient of {param} after your logged backward", 1e-5, 1e-6)


@pytest.mark.weight(2)
def test_mode_returns_real_results(student):
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    got, want = student.run("mode_direct", a, b), oracle.mode_direct(a, b)
    assert got["ops"] == want["ops"], f"inside `with LoggingMode()`, mm/sum/softmax/zeros should log {want['ops']}, got {got['ops']}"
    for key in ("c", "d", "e", "z"):
        oracle.close(got[key], want[key], f"the result of an op run under LoggingMode ({key})")

# IPT-CANARY lab04 test_logging_mode.py: hidden grading text, never shown to learners
