"""Part `graph`: leaves and non-leaves, gradient edges, recording a node (given ops only)."""
import numpy as np
import pytest
from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import programs

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
C = np.array([[2.0, 1.0, -1.0], [0.5, 4.0, 1.5]])


def prog(ops, inputs=(("x", X, True), ("c", C, False))):
    return {"inputs": [list(i) for i in inputs], "given": True, "ops": ops}


FIXED = {
    "leaf-and-constant": prog([["let", "v", "mul", "x", "c"], ["graph", "v"]]),
    "constant-only": prog([["let", "v", "mul", "c", "c"], ["let", "w", "add", "v", 1.0], ["graph", "w"]]),
    "number-operand": prog([["let", "v", "mul", "x", 2.0], ["let", "w", "add", 3.0, "v"], ["graph", "w"]]),
    "same-leaf-twice": prog([["let", "v", "mul", "x", "x"], ["graph", "v"]]),
    "diamond": prog([["let", "a", "mul", "x", 2.0], ["let", "b", "mul", "x", "c"],
                     ["let", "y", "mul", "a", "b"], ["graph", "y"]]),
    "two-leaves": prog([["let", "a", "mul", "x", "w"], ["let", "b", "add", "a", "w"], ["let", "s", "sum", "b", None, False],
                        ["graph", "s"]], (("x", X, True), ("w", C, True))),
    "chain": prog([["let", "a", "add", "x", 1.0], ["let", "b", "mul", "a", "a"], ["let", "d", "add", "b", "a"],
                   ["graph", "d"]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_graph(student, name):
    oracle.check_program(student, FIXED[name])


def test_requires_grad_flags(student):
    p = prog([["let", "v", "mul", "c", 2.0], ["let", "w", "add", "v", "x"], ["let", "u", "mul", "c", "v"]])
    oracle.check_program(student, p)


@pytest.mark.weight(3)
@oracle.examples(25)
@given(p=programs(ops=("add", "mul"), given=True, broadcast=False, backward=False, max_steps=6))
def test_generated_graphs(student, p):
    oracle.check_program(student, p)

# IPT-CANARY lab02 test_graph.py: hidden grading text, never shown to learners
