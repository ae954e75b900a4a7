"""Part `reductions_broadcast`: sum/mean over dims (keepdim), reshape, transpose, matmul, sum_to_size."""
import numpy as np
import pytest
from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import REDUCTIONS, edge_programs, programs

rng = np.random.default_rng(2)
X = np.round(rng.normal(size=(2, 3, 4)), 3)
A = np.round(rng.normal(size=(3, 4)), 3)
B = np.round(rng.normal(size=(4, 2)), 3)
BB = np.round(rng.normal(size=(2, 4, 2)), 3)


def prog(ops, inputs, gradient=False):
    last = ops[-1][1]
    if gradient:
        shape = np.shape(oracle.torch_program({"inputs": [[n, v, False] for n, v in inputs], "ops": ops})["values"][last])
        ops = ops + [["backward", last, np.round(np.random.default_rng(5).normal(size=shape), 3), False]]
    else:
        ops = ops + [["let", "loss", "sum", last, None, False], ["backward", "loss", None, False]]
    return {"inputs": [[n, v, True] for n, v in inputs], "given": False, "ops": ops}


FIXED = {
    "sum-all": prog([["let", "v", "sum", "x", None, False], ["let", "w", "mul", "v", "v"]], [("x", X)]),
    "sum-dim": prog([["let", "v", "sum", "x", 1, False]], [("x", X)], gradient=True),
    "sum-dim-keepdim": prog([["let", "v", "sum", "x", -1, True]], [("x", X)], gradient=True),
    "sum-dims": prog([["let", "v", "sum", "x", [0, 2], False]], [("x", X)], gradient=True),
    "sum-dims-keepdim": prog([["let", "v", "sum", "x", [0, 2], True]], [("x", X)], gradient=True),
    "mean-all": prog([["let", "v", "mean", "x", None, False]], [("x", X)]),
    "mean-dim": prog([["let", "v", "mean", "x", 0, False]], [("x", X)], gradient=True),
    "mean-dims-keepdim": prog([["let", "v", "mean", "x", [1, 2], True]], [("x", X)], gradient=True),
    "reshape": prog([["let", "v", "reshape", "x", [4, 6]]], [("x", X)], gradient=True),
    "reshape-flat": prog([["let", "v", "reshape", "x", [24]]], [("x", X)], gradient=True),
    "transpose": prog([["let", "v", "transpose", "x", 0, 2]], [("x", X)], gradient=True),
    "transpose-negative": prog([["let", "v", "transpose", "a", -1, -2]], [("a", A)], gradient=True),
    "matmul": prog([["let", "v", "matmul", "a", "b"]], [("a", A), ("b", B)], gradient=True),
    "matmul-batched-left": prog([["let", "v", "matmul", "x", "b"]], [("x", X), ("b", B)], gradient=True),
    "matmul-batched-broadcast": prog([["let", "v", "matmul", "a", "bb"]], [("a", A), ("bb", BB)], gradient=True),
    "matmul-self-transpose": prog([["let", "t", "transpose", "a", 0, 1], ["let", "v", "matmul", "a", "t"]], [("a", A)],
                                  gradient=True),
    "sum-to-size": prog([["let", "v", "sum_to_size", "x", [3, 1]]], [("x", X)], gradient=True),
    "sum-to-size-same": prog([["let", "v", "sum_to_size", "a", [3, 4]], ["let", "w", "mul", "v", 2.0]], [("a", A)]),
    "sum-zero-d-dim": prog([["let", "v", "sum", "s", 0, False], ["let", "w", "mul", "v", "s"]], [("s", np.array(1.5))]),
    "mean-zero-d-keepdim": prog([["let", "v", "mean", "s", -1, True], ["let", "w", "mul", "v", 3.0]], [("s", np.array(-2.0))]),
    "sum-empty-tuple-all-dims": prog([["let", "v", "sum", "x", [], False]], [("x", X)], gradient=True),
    "mean-mixed-spelling": prog([["let", "v", "mean", "x", [-1, 0], True]], [("x", X)], gradient=True),
    "sum-size-0": prog([["let", "v", "sum", "e", 0, False], ["let", "w", "mul", "v", "r"], ["let", "u", "add", "w", "x"],
                        ["let", "t", "mean", "u", [0, 1], True]],
                       [("e", np.zeros((0, 4))), ("r", np.arange(4.0)), ("x", X)], gradient=True),
    "sum-size-0-keepdim": prog([["let", "v", "sum", "e", 1, True], ["let", "w", "add", "v", "a"], ["let", "t", "sum", "w", -1, False]],
                               [("e", np.zeros((3, 0))), ("a", A)], gradient=True),
    "mean-size-0-output": prog([["let", "v", "mean", "e", 1, False], ["let", "u", "sum", "v", None, False],
                                ["let", "w", "mul", "u", "x"]], [("e", np.zeros((0, 3))), ("x", X)], gradient=True),
    "reshape-minus-one": prog([["let", "v", "reshape", "x", [-1, 4]], ["let", "w", "mul", "v", "v"]], [("x", X)], gradient=True),
    "reshape-zero-d": prog([["let", "v", "reshape", "o", []], ["let", "w", "mul", "v", "x"]],
                           [("o", np.array([[2.0]])), ("x", A)], gradient=True),
    "transpose-zero-d": prog([["let", "v", "transpose", "s", 0, -1], ["let", "w", "mul", "v", "a"]],
                             [("s", np.array(1.5)), ("a", A)], gradient=True),
    "transpose-same-dim": prog([["let", "v", "transpose", "x", 1, -2], ["let", "w", "mul", "v", 2.0]], [("x", X)], gradient=True),
    "sum-to-size-size-1": prog([["let", "v", "sum_to_size", "x", [1, 3, 1]]], [("x", X)], gradient=True),
    # size-1 batch dims broadcast against larger ones: grad_a/grad_b must sum them back to 1, not only
    # drop the extra leading dims (a learner who sums only leading dims returns the broadcast shape)
    "matmul-batch-size-1-left": prog([["let", "v", "matmul", "a1", "bb"]], [("a1", A.reshape(1, 3, 4)), ("bb", BB)],
                                     gradient=True),
    "matmul-batch-size-1-right": prog([["let", "v", "matmul", "x", "b1"]], [("x", X), ("b1", B.reshape(1, 4, 2))],
                                      gradient=True),
    "matmul-batch-size-1-both": prog([["let", "v", "matmul", "x4", "b4"]],
                                     [("x4", X.reshape(2, 1, 3, 4)), ("b4", np.stack([B, -B, 2 * B]).reshape(1, 3, 4, 2))],
                                     gradient=True),
    "matmul-size-1": prog([["let", "v", "matmul", "c", "r"]], [("c", np.array([[0.5], [-2.0]])), ("r", np.array([[1.5, -0.5, 2.0]]))],
                          gradient=True),
    "linear-layer": prog([["let", "t", "transpose", "b", 0, 1], ["let", "h", "matmul", "a", "b"], ["let", "o", "add", "h", "r"],
                          ["let", "v", "mean", "o", 0, False]], [("a", A), ("b", B), ("r", np.array([0.5, -1.0]))],
                         gradient=True),
}


ERRORS = {
    # each error is followed by the same op spelled correctly (a stub that always raises gets nothing)
    "duplicate-dims": prog([["attempt", "e", "sum", "x", [0, -3], False], ["let", "v", "sum", "x", [0, -1], False]],
                           [("x", X)], gradient=True),
    "dim-out-of-range": prog([["attempt", "e", "mean", "x", 3, True], ["let", "v", "mean", "x", -3, True]],
                             [("x", X)], gradient=True),
    "zero-d-dim-out-of-range": prog([["attempt", "e", "sum", "s", 1, False], ["let", "v", "sum", "s", -1, False],
                                     ["let", "w", "mul", "v", "v"]], [("s", np.array(2.0))]),
    "reshape-wrong-size": prog([["attempt", "e", "reshape", "x", [5, 5]], ["let", "v", "reshape", "x", [6, -1]]],
                               [("x", X)], gradient=True),
    "sum-to-size-not-expandable": prog([["attempt", "e", "sum_to_size", "x", [3, 3]], ["let", "v", "sum_to_size", "x", [3, 1]]],
                                       [("x", X)], gradient=True),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(student, name):
    oracle.check_program(student, ERRORS[name])


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_ops(student, name):
    oracle.check_program(student, FIXED[name])


@pytest.mark.weight(12)
@oracle.examples(30)
@given(p=programs(ops=("add", "mul", "sub", "tanh", "exp") + tuple(REDUCTIONS) * 2, max_steps=6))
def test_generated_programs(student, p):
    oracle.check_generated(student, p)

@pytest.mark.weight(6)
@oracle.examples(25)
@given(p=edge_programs(ops=("add", "mul", "sum", "mean", "reshape", "transpose", "sum_to_size"), hooks=False, second=False))
def test_edge_programs(student, p):
    """0-d and size-0 tensors, dims in every spelling (negative, tuple, (), keepdim), reshape with -1."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_reductions_broadcast.py: hidden grading text, never shown to learners
