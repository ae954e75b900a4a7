"""Part `reductions_broadcast`: sum/mean over dims (keepdim), reshape, transpose, matmul, sum_to_size."""
import numpy as np
import pytest
from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import REDUCTIONS, programs

rng = np.random.default_rng(2)
X = np.round(rng.normal(size=(2, 3, 4)), 3)
A = np.round(rng.normal(size=(3, 4)), 3)
B = np.round(rng.normal(size=(4, 2)), 3)
BB = np.round(rng.normal(size=(2, 4, 2)), 3)


def prog(ops, inputs, gradient=False):
    last = ops[-1][1]
    if gradient:
        shape = oracle.torch_program({"inputs": [[n, v, False] for n, v in inputs], "ops": ops})["values"][last].shape
        ops = ops + [["backward", last, np.round(np.random.default_rng(5).normal(size=shape), 3), False]]
    else:
        ops = ops + [["let", "loss", "sum", last, None, False], ["backward", "loss", None, False]]
    return {"inputs": [[n, v, True] for n, v in inputs], "given": False, "ops": ops}


FIXED = {
    "sum-all": prog([["let", "v", "sum", "x", None, False]], [("x", X)]),
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
    "linear-layer": prog([["let", "t", "transpose", "b", 0, 1], ["let", "h", "matmul", "a", "b"], ["let", "o", "add", "h", "r"],
                          ["let", "v", "mean", "o", 0, False]], [("a", A), ("b", B), ("r", np.array([0.5, -1.0]))],
                         gradient=True),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_ops(student, name):
    oracle.check_program(student, FIXED[name])


@pytest.mark.weight(12)
@oracle.examples(30)
@given(p=programs(ops=("add", "mul", "sub", "tanh", "exp") + tuple(REDUCTIONS) * 2, max_steps=6))
def test_generated_programs(student, p):
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_reductions_broadcast.py: hidden grading text, never shown to learners
