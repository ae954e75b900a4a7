"""Part `softmax_max`: stable softmax/log_softmax forward and backward, max over a dim."""
import numpy as np
import pytest
import torch
from hypothesis import given

from autograder.engine import replies
from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import SOFTMAX, edge_programs, programs

rng = np.random.default_rng(3)
X = np.round(rng.normal(size=(2, 3, 4)) * 2, 3)
EXTREME = np.array([[1000.0, 0.0, -1000.0], [-800.0, -801.0, -802.0], [1.0, 2.0, 3.0]])


@pytest.mark.weight(2)
@pytest.mark.parametrize("dim", [1, 0])
def test_stable_forward(student, dim):
    context = f"softmax_forward / log_softmax_forward of {EXTREME.tolist()} along dim {dim}"
    got = replies.dict_of(oracle.call(student, context, "lab02.scenarios:unstable_softmax", EXTREME, dim),
                          ("softmax", "log_softmax"), context)
    t = torch.from_numpy(EXTREME)
    for key, want in (("softmax", t.softmax(dim)), ("log_softmax", t.log_softmax(dim))):
        msg = oracle.compare_array(got[key], want.numpy(), f"{key} along dim {dim} (subtract the max first)")
        assert msg is None, f"For logits {EXTREME.tolist()}: {msg}"


def prog(ops, x=X, gradient=True):
    last = [op for op in ops if op[0] == "let"][-1][1]
    shape = np.shape(oracle.torch_program({"inputs": [["x", x, False]], "ops": ops})["values"][last])
    g = np.round(np.random.default_rng(9).normal(size=shape), 3)
    return {"inputs": [["x", x, True]], "given": False, "ops": ops + [["backward", last, g, False]], "ties": True}


def with_full(ops, x, more):
    """A size-0 case (its gradients are empty: zeros would pass) followed by the same op on X (as z)."""
    p = prog(ops, x=x)
    q = prog([["x" if a == "z" else a for a in op] for op in more], x=X)
    backward_z = [["backward", "u", q["ops"][-1][2], False]]
    return {"inputs": p["inputs"] + [["z", X, True]], "given": False, "ops": p["ops"] + more + backward_z, "ties": True}


TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.0, 2.0], [0.0, -1.0, -1.0, 0.0]])


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
    "max-ties-first-index": prog([["let", "v", "max", "x", 1, False]], x=TIES),
    "max-ties-dim0-keepdim": prog([["let", "v", "max", "x", 0, True]], x=TIES),
    "max-zero-d": prog([["let", "v", "max", "x", 0, False], ["let", "w", "mul", "v", "v"]], x=np.array(1.5)),
    "max-zero-d-keepdim": prog([["let", "v", "max", "x", -1, True], ["let", "w", "mul", "v", 3.0]], x=np.array(-0.5)),
    "softmax-zero-d": prog([["let", "v", "softmax", "x", 0], ["let", "w", "mul", "v", "x"]], x=np.array(0.75)),
    "log-softmax-zero-d": prog([["let", "v", "log_softmax", "x", -1], ["let", "w", "add", "v", "x"]], x=np.array(0.75)),
    "softmax-size-1-dim": prog([["let", "v", "softmax", "x", 1], ["let", "w", "mul", "v", "x"]], x=np.array([[1.0], [2.0]])),
    "max-size-0-other-dim": with_full([["let", "v", "max", "x", 1, False]], np.zeros((0, 3)), [["let", "u", "max", "z", 1, False]]),
    "log-softmax-size-0": with_full([["let", "v", "log_softmax", "x", 0]], np.zeros((0, 3)), [["let", "u", "log_softmax", "z", 0]]),
    "max-error-then-max": with_full([["attempt", "e", "max", "x", 0, False], ["let", "v", "max", "x", 1, True]], np.zeros((0, 3)),
                                    [["let", "u", "max", "z", 0, True]]),
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

@pytest.mark.weight(4)
@oracle.examples(25)
@given(p=edge_programs(ops=("add", "mul", "exp", "softmax", "log_softmax", "max"), hooks=False, second=False))
def test_edge_programs(student, p):
    """0-d and size-0 tensors, ties under max (torch takes the first maximum), negative dims, keepdim."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_softmax_max.py: hidden grading text, never shown to learners
