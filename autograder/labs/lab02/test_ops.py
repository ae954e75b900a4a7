"""Part `ops`: sum_to_size and the elementwise backward formulas, with broadcasting."""
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import ELEMENTWISE, programs

SUM_TO_SIZE = [((2, 3), (2, 3)), ((4, 3), (3,)), ((4, 3), (1, 3)), ((4, 3), (4, 1)), ((2, 4, 3), (4, 1)),
               ((2, 4, 3), (1, 1)), ((2, 4, 3), ()), ((3, 1, 5), (1, 5)), ((2, 3), (1, 1))]


@pytest.mark.weight(2)
@pytest.mark.parametrize("shapes", SUM_TO_SIZE, ids=str)
def test_sum_to_size(student, shapes):
    shape_in, shape_out = shapes
    context = f"sum_to_size(grad of shape {shape_in}, {shape_out})"
    got = oracle.call(student, context, "lab02.scenarios:sum_to_size", list(shape_in), list(shape_out), 7)
    grad = np.random.default_rng(7).normal(size=shape_in)
    want = torch.from_numpy(grad).sum_to_size(shape_out).numpy()
    msg = oracle.compare_array(got, want, context)
    assert msg is None, msg


X = np.array([[0.5, -1.5, 0.25], [2.0, 0.75, -0.5]])
P = np.array([[1.5, 0.5, 2.0], [0.75, 1.25, 3.0]])
ROW = np.array([1.5, -0.5, 2.0])
PROW = np.array([0.5, 1.5, 2.5])
COL = np.array([[0.5], [-2.0]])


def prog(ops, inputs):
    ops = ops + [["let", "loss", "sum", ops[-1][1], None, False], ["backward", "loss", None, False]]
    return {"inputs": [[n, v, True] for n, v in inputs], "given": False, "ops": ops}


FIXED = {
    "add-row": prog([["let", "v", "add", "x", "r"]], [("x", X), ("r", ROW)]),
    "add-column": prog([["let", "v", "add", "c", "x"]], [("x", X), ("c", COL)]),
    "sub": prog([["let", "v", "sub", "x", "r"]], [("x", X), ("r", ROW)]),
    "sub-outer": prog([["let", "v", "sub", "c", "r"]], [("c", COL), ("r", ROW)]),
    "mul": prog([["let", "v", "mul", "x", "p"]], [("x", X), ("p", P)]),
    "mul-broadcast": prog([["let", "v", "mul", "c", "x"]], [("x", X), ("c", COL)]),
    "div": prog([["let", "v", "div", "x", "p"]], [("x", X), ("p", P)]),
    "div-broadcast": prog([["let", "v", "div", "x", "q"]], [("x", X), ("q", PROW)]),
    "number-over-tensor": prog([["let", "v", "div", 2.0, "p"]], [("p", P)]),
    "number-minus-tensor": prog([["let", "v", "sub", 1.0, "x"]], [("x", X)]),
    "neg": prog([["let", "v", "neg", "x"]], [("x", X)]),
    "pow-2": prog([["let", "v", "pow", "x", 2.0]], [("x", X)]),
    "pow-3": prog([["let", "v", "pow", "x", 3.0]], [("x", X)]),
    "pow-half": prog([["let", "v", "pow", "p", 0.5]], [("p", P)]),
    "pow-minus-one": prog([["let", "v", "pow", "p", -1.0]], [("p", P)]),
    "pow-zero": prog([["let", "v", "pow", "x", 0.0]], [("x", X)]),
    "exp": prog([["let", "v", "exp", "x"]], [("x", X)]),
    "log": prog([["let", "v", "log", "p"]], [("p", P)]),
    "tanh": prog([["let", "v", "tanh", "x"]], [("x", X)]),
    "sigmoid": prog([["let", "v", "sigmoid", "x"]], [("x", X)]),
    "relu": prog([["let", "v", "relu", "x"]], [("x", X)]),
    "relu-at-zero": prog([["let", "z", "sub", "x", "x"], ["let", "v", "relu", "z"]], [("x", X)]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_ops(student, name):
    oracle.check_program(student, FIXED[name])


@pytest.mark.weight(10)
@oracle.examples(40)
@given(p=programs(ops=tuple(ELEMENTWISE)))
def test_generated_programs(student, p):
    oracle.check_generated(student, p)


@pytest.mark.weight(3)
@oracle.examples(8)
@given(p=programs(ops=tuple(ELEMENTWISE), max_steps=5, max_inputs=2), data=st.data())
def test_finite_differences(student, p, data):
    """Your backward agrees with central differences of your own forward."""
    want = oracle.torch_program(p)
    assume(oracle.usable(p, want))
    root = p["ops"][-1][1]
    gradient = p["ops"][-1][2]
    root_shape = np.shape(want["values"][root])
    weight = np.ones(root_shape) if gradient is None else np.asarray(gradient)
    torch_grads = [e for e in want["log"] if e[0] == "backward"][-1][2]["grads"]
    candidates = [n for n, _, rg in p["inputs"] if rg and torch_grads[n] is not None]
    assume(candidates)
    name = data.draw(st.sampled_from(candidates))
    fd_prog = dict(p, fd_weight=weight)
    got_fd = oracle.call(student, f"For `{oracle.describe(p)}` (finite differences)",
                         "lab02.scenarios:perturbed_outputs", fd_prog, name, 1e-6)
    got = oracle.call(student, f"For `{oracle.describe(p)}`", "lab02.scenarios:program", p)
    backward = [e for e in got["log"] if e[0] == "backward"]
    assert backward, f"For `{oracle.describe(p)}`: backward did not complete"
    mine = backward[-1][2]["grads"][name]
    msg = oracle.compare_array(mine, np.asarray(got_fd), f"d({root})/d{name} (your backward vs finite differences of your forward)",
                               rtol=1e-4, atol=1e-5)
    assert msg is None, f"For `{oracle.describe(p)}`: {msg}"

# IPT-CANARY lab02 test_ops.py: hidden grading text, never shown to learners
