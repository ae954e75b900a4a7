"""Part `logging_mode`: a TorchDispatchMode that logs ATen ops, compared with one P0 runs on the same computation.

The op list is the value the learner's mode computed for a computation P0 chose; P0 runs its own
TorchDispatchMode over the same computation and compares lists, and the results computed under the mode
(values and dtypes) are compared with P0's own.
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab04 import oracle


def op_list(got, what):
    return [replies.string(o, f"{what}[{i}]") for i, o in enumerate(replies.list_of(got, what))]


@pytest.mark.weight(2)
@pytest.mark.parametrize("name,seed", [("mlp", 0), ("conv", 1), ("norm", 2), ("tanh_inplace", 3),
                                                ("frozen_nested", 4)])
def test_training_step_ops(student, name, seed):
    seed = case_seed(seed)      # the model's weights and data: this submission's own
    got, want = student.run("log_step", name, seed), oracle.log_step(name, seed)
    got = replies.dict_of(got, {"ops", "grads"}, f"log_training_step on the '{name}' model")
    ops = op_list(got["ops"], f"log_training_step on the '{name}' model")
    if ops != want["ops"]:
        first = next((i for i in range(min(len(ops), len(want["ops"]))) if ops[i] != want["ops"][i]), min(len(ops), len(want["ops"])))
        raise AssertionError(f"log_training_step on the '{name}' model: expected {len(want['ops'])} ops, got {len(ops)}; "
                             f"they differ first at position {first}: got {ops[first:first + 3]}")
    grads = replies.dict_of(got["grads"], want["grads"].keys(), f"the '{name}' model's gradients")
    for param, grad in want["grads"].items():
        if grad is None:
            assert grads[param] is None, f"'{name}' model: the frozen parameter {param} should get no gradient"
            continue
        oracle.close(grads[param], grad, f"'{name}' model: the gradient of {param} after your logged backward", 1e-5, 1e-6)


DTYPES = {"c": np.float64, "d": np.float64, "e": np.float64, "z": np.float64, "v": np.float64, "i": np.int32,
          "k": np.float64, "s": np.float64, "empty": np.float64}


@pytest.mark.weight(3)
@pytest.mark.parametrize("seed", [9, 10])
def test_mode_returns_real_results(student, seed):
    rng = case_rng(seed)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    got, want = student.run("mode_direct", a, b), oracle.mode_direct(a, b)
    got = replies.dict_of(got, set(want), "the LoggingMode scenario")
    what = ("inside `with LoggingMode()`: mm, sum(dim=1, keepdim=True), softmax, zeros(dtype=float64), t().add_(1.0, alpha=2.0), "
            "arange(dtype=int32) // 2, cat, sum(), ones(0, 3).sum(0)")
    ops = op_list(got["ops"], "LoggingMode.ops")
    assert ops == want["ops"], f"{what} should log {want['ops']}, got {ops}"
    second = op_list(got["second_ops"], "a second LoggingMode's ops")
    assert second == want["second_ops"], f"a second `with LoggingMode()` around torch.ones(2).neg() should log {want['second_ops']}, got {second}"
    for key, dtype in DTYPES.items():
        oracle.close(got[key], want[key], f"the result of an op run under LoggingMode ({key})", dtype=dtype)


@pytest.mark.weight(2)
def test_nested_modes_both_see_each_op(student):
    rng = case_rng(11)
    a, b = rng.standard_normal((3, int(rng.integers(1, 5)))), rng.standard_normal(int(rng.integers(0, 4)))
    got, want = student.run("mode_nested", a, b), oracle.mode_nested(a, b)
    got = replies.dict_of(got, set(want), "the nested LoggingMode scenario")
    what = "with LoggingMode() as outer: (with LoggingMode() as inner: (a * 2).sum(0)); then b.exp()"
    for key in ("inner", "outer"):
        ops = op_list(got[key], f"{key}.ops")
        assert ops == want[key], (f"{what}: {key}.ops should be {want[key]} (an op the inner mode runs still reaches "
                                  f"the outer one), got {ops}")
    oracle.close(got["out"], want["out"], f"{what}: (a * 2).sum(0)", dtype=np.float64)
    oracle.close(got["after"], want["after"], f"{what}: b.exp()", dtype=np.float64)

# IPT-CANARY lab04 test_logging_mode.py: hidden grading text, never shown to learners
