"""Part `ops`: sum_to_size and the elementwise backward formulas, with broadcasting."""
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import EDGE_BINARY, EDGE_UNARY, ELEMENTWISE, edge_programs, programs

# each group pairs a case that a shortcut could pass (identity, zeros, the first element) with one it cannot
SUM_TO_SIZE = [[((2, 3), (2, 3)), ((4, 3), (3,))], [((4, 3), (1, 3)), ((0, 3), (3,))], [((4, 3), (4, 1)), ((2, 0), (1, 0))],
               [((2, 4, 3), (4, 1)), ((2, 0), (2, 0))], [((2, 4, 3), (1, 1)), ((), ())], [((2, 4, 3), ()), ((1, 1), (1,))],
               [((3, 1, 5), (1, 5)), ((0, 3), (1, 3))], [((2, 3), (1, 1)), ((3,), (1,))], [((4,), ()), ((2, 1, 3), (1, 1, 3))],
               [((1, 4), (1, 1))]]


@pytest.mark.weight(2)
@pytest.mark.parametrize("group", SUM_TO_SIZE, ids=str)
def test_sum_to_size(student, group):
    for shape_in, shape_out in group:
        _check_sum_to_size(student, shape_in, shape_out)


@pytest.mark.weight(2)
def test_sum_to_size_generated(student):
    """Shapes drawn from this submission's seed: leading dims (size 1 too) over a target whose size-1 dims
    were broadcast to 0, 1, 2 or 3."""
    rng = case_rng(41)
    for _ in range(16):
        shape_out = [int(n) for n in rng.choice([0, 1, 1, 2, 3], size=int(rng.integers(0, 4)))]
        lead = [int(n) for n in rng.choice([1, 2, 3], size=int(rng.integers(0, 3)))]
        shape_in = lead + [int(rng.choice([0, 1, 2, 3])) if n == 1 else n for n in shape_out]
        _check_sum_to_size(student, tuple(shape_in), tuple(shape_out))


def _check_sum_to_size(student, shape_in, shape_out):
    context = f"sum_to_size(grad of shape {shape_in}, {shape_out})"
    seed = 7 + len(shape_in) + sum(shape_in)
    got = oracle.call(student, context, "lab02.scenarios:sum_to_size", list(shape_in), list(shape_out), seed)
    grad = np.random.default_rng(seed).normal(size=shape_in)
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
    "pow-one": prog([["let", "v", "pow", "x", 1.0], ["let", "w", "mul", "v", "x"]], [("x", X)]),
    "pow-zero": prog([["let", "v", "pow", "x", 0.0], ["let", "u", "mul", "v", "x"], ["let", "w", "mul", "u", 2.5]], [("x", np.array([0.5, 0.0, -2.0]))]),
    "exp": prog([["let", "v", "exp", "x"]], [("x", X)]),
    "log": prog([["let", "v", "log", "p"]], [("p", P)]),
    "tanh": prog([["let", "v", "tanh", "x"]], [("x", X)]),
    "sigmoid": prog([["let", "v", "sigmoid", "x"]], [("x", X)]),
    "relu": prog([["let", "v", "relu", "x"]], [("x", X)]),
    "relu-then-sqrt": prog([["let", "r", "relu", "x"], ["let", "v", "pow", "r", 0.5]], [("x", np.array([-1.0, 0.0, 2.25, 0.0]))]),
    "pow-negative-base": prog([["let", "v", "pow", "x", 3.0], ["let", "w", "pow", "x", -1.0], ["let", "u", "add", "v", "w"]],
                              [("x", X)]),
    "reflected-div-broadcast": prog([["let", "v", "div", 2.0, "q"], ["let", "w", "mul", "v", "x"]], [("x", X), ("q", PROW)]),
    "reflected-sub-zero-d": prog([["let", "v", "sub", 3.0, "s"], ["let", "w", "mul", "v", "x"]], [("x", X), ("s", np.array(0.5))]),
    "size-1-both-sides": prog([["let", "v", "mul", "c", "r"], ["let", "w", "sub", "v", "c"]], [("c", np.array([[0.5], [-2.0], [1.0]])),
                                                                                             ("r", np.array([[1.5, -0.5]]))]),
    "size-0-broadcast": {"inputs": [["e", np.zeros((0, 3)), True], ["r", ROW, True], ["o", np.array([[2.0, 1.0, 0.5]]), True]],
                         "given": False,
                         "ops": [["let", "v", "add", "e", "r"], ["let", "w", "mul", "v", "o"], ["backward", "w", np.zeros((0, 3)), False],
                                 ["let", "u", "div", "r", "o"], ["backward", "u", np.array([[1.0, -2.0, 0.5]]), False]]},
    "zero-d-times-tensor": prog([["let", "v", "mul", "s", "x"], ["let", "w", "div", "v", "s"], ["let", "u", "tanh", "w"]],
                                [("x", X), ("s", np.array(1.5))]),
    "relu-at-zero": prog([["let", "z", "sub", "x", "x"], ["let", "r", "relu", "z"], ["let", "t", "mul", "x", 3.0], ["let", "v", "add", "r", "t"]], [("x", X)]),
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
    finished = [e for e in want["log"] if e[0] == "backward"]
    assume(finished)  # torch refused this backward (e.g. a root that needs no grad): not a fair FD case
    torch_grads = finished[-1][2]["grads"]
    candidates = [n for n, _, rg in p["inputs"] if rg and torch_grads[n] is not None]
    assume(candidates)
    name = data.draw(st.sampled_from(candidates))
    fd_prog = dict(p, fd_weight=weight)
    got_fd = oracle.call(student, f"For `{oracle.describe(p)}` (finite differences)",
                         "lab02.scenarios:perturbed_outputs", fd_prog, name, 1e-6)
    context = f"For `{oracle.describe(p)}`"
    shape = np.shape([v for n, v, _ in p["inputs"] if n == name][0])
    got_fd = np.asarray(replies.number(got_fd, f"{context}: finite differences of your forward", finite=False)) if shape == () \
        else replies.array(got_fd, f"{context}: finite differences of your forward", shape=shape, kind="f")
    got = replies.dict_of(oracle.call(student, context, "lab02.scenarios:program", p), ("values", "flags", "log"), context)
    events, _ = oracle._split_log(got["log"], context)
    backward = [e for e in events if e[0] == "backward" and len(e) == 3 and isinstance(e[2], dict)
                and isinstance(e[2].get("grads"), dict)]
    assert backward, f"{context}: backward did not complete"
    mine = backward[-1][2]["grads"].get(name)
    msg = oracle.compare_array(mine, got_fd, f"d({root})/d{name} (your backward vs finite differences of your forward)",
                               rtol=1e-4, atol=1e-5)
    assert msg is None, f"For `{oracle.describe(p)}`: {msg}"

@pytest.mark.weight(5)
@oracle.examples(25)
@given(p=edge_programs(ops=tuple(EDGE_UNARY + EDGE_BINARY), hooks=False, second=False))
def test_edge_programs(student, p):
    """0-d, size-0 and size-1 broadcasting (also against 0), numbers on either side, negative bases, relu at 0."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_ops.py: hidden grading text, never shown to learners
