"""Part `graph`: leaves and non-leaves, gradient edges, recording a node (given ops only)."""
import numpy as np
import pytest
from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import edge_programs, programs

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
C = np.array([[2.0, 1.0, -1.0], [0.5, 4.0, 1.5]])


def prog(ops, inputs=(("x", X, True), ("c", C, False))):
    return {"inputs": [list(i) for i in inputs], "given": True, "ops": ops}


FIXED = {
    "leaf-and-constant": prog([["let", "v", "mul", "x", "c"], ["graph", "v"]]),
    "constant-only": prog([["let", "v", "mul", "c", "c"], ["let", "w", "add", "v", 1.0], ["graph", "w"],
                           ["let", "u", "mul", "w", "x"], ["graph", "u"]]),
    "number-operand": prog([["let", "v", "mul", "x", 2.0], ["let", "w", "add", 3.0, "v"], ["graph", "w"]]),
    "same-leaf-twice": prog([["let", "v", "mul", "x", "x"], ["graph", "v"]]),
    "diamond": prog([["let", "a", "mul", "x", 2.0], ["let", "b", "mul", "x", "c"],
                     ["let", "y", "mul", "a", "b"], ["graph", "y"]]),
    "two-leaves": prog([["let", "a", "mul", "x", "w"], ["let", "b", "add", "a", "w"], ["let", "s", "sum", "b", None, False],
                        ["graph", "s"]], (("x", X, True), ("w", C, True))),
    "zero-d-leaf-and-number": prog([["let", "v", "mul", "s", "x"], ["let", "w", "add", 2.0, "v"], ["graph", "w"]],
                                   (("x", X, True), ("s", np.array(1.5), True))),
    "zero-d-constant": prog([["let", "v", "mul", "x", "k"], ["let", "w", "mul", "k", "k"], ["graph", "v"], ["graph", "w"]],
                            (("x", np.array(-2.0), True), ("k", np.array(3.0), False))),
    "size-0": prog([["let", "v", "mul", "x", "x"], ["let", "s", "sum", "v", None, False], ["graph", "s"]],
                   (("x", np.zeros((0, 3)), True),)),
    "chain": prog([["let", "a", "add", "x", 1.0], ["let", "b", "mul", "a", "a"], ["let", "d", "add", "b", "a"],
                   ["graph", "d"]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_graph(student, name):
    oracle.check_program(student, FIXED[name])


def test_requires_grad_flags(student):
    p = prog([["let", "v", "mul", "c", 2.0], ["let", "w", "add", "v", "x"], ["let", "u", "mul", "c", "v"],
              ["let", "t", "mul", "w", "u"], ["graph", "t"], ["graph", "u"]])
    oracle.check_program(student, p)


@pytest.mark.weight(3)
@oracle.examples(25)
@given(p=programs(ops=("add", "mul"), given=True, broadcast=False, backward=False, max_steps=6))
def test_generated_graphs(student, p):
    oracle.check_program(student, p)

@pytest.mark.weight(2)
@oracle.examples(15)
@given(p=edge_programs(ops=("add", "mul", "sum"), given=True, end="graph", errors=False))
def test_edge_graphs(student, p):
    """0-d, size-0 and 0-d-against-larger inputs, numbers on either side, leaves used twice."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_graph.py: hidden grading text, never shown to learners
