"""Part `softmax_max`: stable softmax/log_softmax forward and backward, max over a dim."""
import numpy as np
import pytest
import torch
from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import SOFTMAX, programs

rng = np.random.default_rng(3)
X = np.round(rng.normal(size=(2, 3, 4)) * 2, 3)
EXTREME = np.array([[1000.0, 0.0, -1000.0], [-800.0, -801.0, -802.0], [1.0, 2.0, 3.0]])


@pytest.mark.weight(2)
@pytest.mark.parametrize("dim", [1, 0])
def test_stable_forward(student, dim):
    context = f"softmax_forward / log_softmax_forward of {EXTREME.tolist()} along dim {dim}"
    got = oracle.call(student, context, "lab02.scenarios:unstable_softmax", EXTREME, dim)
    t = torch.from_numpy(EXTREME)
    for key, want in (("softmax", t.softmax(dim)), ("log_softmax", t.log_softmax(dim))):
        msg = oracle.compare_array(got[key], want.numpy(), f"{key} along dim {dim} (subtract the max first)")
        assert msg is None, f"For logits {EXTREME.tolist()}: {msg}"


def prog(ops, x=X, gradient=True):
    last = ops[-1][1]
    shape = oracle.torch_program({"inputs": [["x", x, False]], "ops": ops})["values"][last].shape
    g = np.round(np.random.default_rng(9).normal(size=shape), 3)
    return {"inputs": [["x", x, True]], "given": False, "ops": ops + [["backward", last, g, False]]}


FIXED = {
    "softmax-last": prog([["let", "v", "softmax", "x", -1]]),
    "softmax-dim0": prog([["let", "v", "softmax", "x", 0]]),
    "log-softmax-last": prog([["let", "v", "log_softmax", "x", 2]]),
    "log-softmax-middle": prog([["let", "v", "log_softmax", "x", 1]]),
    "softmax-extreme": prog([["let", "v", "softmax", "x", 1]], x=EXTREME),
    "log-softmax-extreme": prog([["let", "v", "log_softmax", "x", 1]], x=EXTREME),
    "max-dim": prog([["let", "v", "max", "x", 1, False]]),
    "max-keepdim": prog([["let", "v", "max", "x", -1, True]]),
    "max-dim0": prog([["let", "v", "max", "x", 0, False]]),
    "softmax-then-max": prog([["let", "s", "softmax", "x", 2], ["let", "v", "max", "s", 1, True]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    oracle.check_program(student, FIXED[name])


@pytest.mark.weight(6)
@oracle.examples(25)
@given(p=programs(ops=("add", "mul", "exp", "sum", "transpose") + tuple(SOFTMAX) * 3, max_steps=5))
def test_generated_programs(student, p):
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_softmax_max.py: hidden grading text, never shown to learners
