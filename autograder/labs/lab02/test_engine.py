"""Part `engine`: AccumulateGrad, dependency counting, the ready queue, retain_graph, errors."""
import numpy as np
import pytest
from hypothesis import given

from autograder.engine.referee import busy_timeout
from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import edge_programs, programs

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
W = np.array([[2.0, 1.0, -1.0], [0.5, 4.0, 1.5]])
G = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 2.0]])


def prog(ops, inputs=(("x", X, True), ("w", W, True))):
    return {"inputs": [list(i) for i in inputs], "given": True, "ops": ops}


LOSS = [["let", "a", "mul", "x", "w"], ["let", "s", "sum", "a", None, False]]

FIXED = {
    "scalar-root": prog(LOSS + [["backward", "s", None, False]]),
    "diamond": prog([["let", "a", "mul", "x", 2.0], ["let", "b", "mul", "x", "w"], ["let", "y", "mul", "a", "b"],
                     ["backward", "y", G, False]]),
    "same-leaf-twice": prog([["let", "v", "mul", "x", "x"], ["let", "s", "sum", "v", None, False],
                             ["backward", "s", None, False]]),
    "vector-jacobian": prog([["let", "a", "mul", "x", "w"], ["let", "b", "add", "a", "x"], ["backward", "b", G, False]]),
    "shared-subexpression": prog([["let", "a", "mul", "x", "w"], ["let", "b", "mul", "a", "a"], ["let", "c", "add", "b", "a"],
                                  ["let", "d", "mul", "c", "a"], ["backward", "d", G, False]]),
    "unreached-and-constant-inputs": prog([["let", "a", "mul", "x", "c"], ["let", "s", "sum", "a", None, False],
                                           ["backward", "s", None, False]],
                                          (("x", X, True), ("w", W, True), ("c", G, False))),
    "leaf-root": prog([["backward", "x", G, False]]),
    "accumulates-across-backwards": prog(LOSS + [["backward", "s", None, False], ["let", "b", "mul", "x", 3.0],
                                                 ["let", "t", "sum", "b", None, False], ["backward", "t", None, False]]),
    "leaf-root-twice": prog([["backward", "x", G, False], ["backward", "x", G, False]]),
    "zero-d-leaf-and-root": prog([["let", "a", "mul", "s", "x"], ["let", "b", "add", "a", "s"], ["let", "t", "sum", "b", None, False],
                                  ["backward", "t", None, False]], (("x", X, True), ("s", np.array(-1.5), True))),
    "size-0-leaf": prog([["let", "a", "mul", "e", "e"], ["let", "t", "sum", "a", None, False], ["let", "q", "mul", "s", "s"],
                         ["let", "u", "add", "t", "q"], ["backward", "u", None, False]], (("e", np.zeros((0, 3)), True), ("s", np.array(2.0), True))),
    "one-element-root-without-gradient": prog([["let", "a", "mul", "o", "o"], ["backward", "a", None, False]],
                                              (("o", np.array([[3.0]]), True),)),
    "zero-grad-then-backward": prog(LOSS + [["backward", "s", None, False], ["zero_grad", "x"],
                                            ["let", "b", "mul", "x", "x"], ["backward", "b", G, False]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_backward(student, name):
    oracle.check_program(student, FIXED[name])


ERRORS = {
    "second-backward": prog(LOSS + [["backward", "s", None, False], ["backward", "s", None, False]]),
    # every error is followed by a backward of the same kind that works (an engine that always raises gets nothing)
    "nonscalar-without-gradient": prog([["let", "a", "mul", "x", "w"], ["backward", "a", None, False],
                                        ["backward", "a", G, False]]),
    "gradient-shape-mismatch": prog([["let", "a", "mul", "x", "w"], ["backward", "a", np.ones(3), False],
                                     ["backward", "a", G, False]]),
    "zero-d-root-gradient-shape": prog([["let", "a", "mul", "x", "w"], ["let", "s", "sum", "a", None, False],
                                        ["backward", "s", np.ones(1), True], ["backward", "s", np.array(2.5), False]]),
    "root-without-grad": prog([["let", "a", "mul", "c", 2.0], ["let", "s", "sum", "a", None, False],
                               ["backward", "s", None, False], ["let", "b", "mul", "c", "x"],
                               ["let", "t", "sum", "b", None, False], ["backward", "t", None, False]],
                              (("x", X, True), ("c", W, False))),
    # not a scalar and no grad: the requires-grad check comes first, as the notebook orders them
    "nonscalar-root-without-grad": prog([["let", "a", "mul", "c", 2.0], ["backward", "a", None, False],
                                         ["let", "b", "mul", "c", "x"], ["backward", "b", G, False]],
                                        (("x", X, True), ("c", W, False))),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(ERRORS))
def test_errors(student, name):
    oracle.check_program(student, ERRORS[name])


RETAIN = {
    "retain-then-free": prog(LOSS + [["backward", "s", None, True], ["backward", "s", None, False],
                                     ["backward", "s", None, False]]),
    "retain-twice": prog(LOSS + [["backward", "s", None, True], ["backward", "s", None, True], ["backward", "s", None, True]]),
    "no-saved-values-can-rerun": prog([["let", "a", "add", "x", "w"], ["let", "s", "sum", "a", None, False],
                                       ["backward", "s", None, False], ["backward", "s", None, False]]),
    "retain-zero-grad-again": prog(LOSS + [["backward", "s", None, True], ["zero_grad", "x"], ["backward", "s", None, False]]),
    "freed-midway-graph": prog([["let", "a", "add", "x", "w"], ["let", "b", "mul", "a", 2.0],
                                ["let", "s", "sum", "b", None, False], ["backward", "s", None, False],
                                ["let", "t", "sum", "a", None, False], ["backward", "t", None, False],
                                ["backward", "s", None, False]]),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(RETAIN))
def test_retain_graph(student, name):
    oracle.check_program(student, RETAIN[name])


@pytest.mark.weight(3)
def test_deep_chain(student):
    got = oracle.call(student, "A chain of 10,000 multiplications by 1.0001, then backward",
                      "lab02.scenarios:deep_chain", 10_000, True)
    want = np.full(2, 1.0001 ** 10_000)
    msg = oracle.compare_array(got, want, "x.grad after a chain of 10,000 ops", rtol=1e-8)
    assert msg is None, msg + " (the engine must not recurse: Python's limit is 1,000 frames)"


@pytest.mark.weight(3)
def test_ladder_of_diamonds(student):
    got = oracle.call(student, "40 diamonds in a row (y = y * 0.5 + y * 0.75, 2**40 paths), then backward; "
                      "each node must run once, after all its gradient has arrived",
                      "lab02.scenarios:ladder", 40, True,
                      within=busy_timeout(2.0))  # an honest engine: ~160 nodes, milliseconds; an exponential one never ends
    msg = oracle.compare_array(got, np.full(3, 1.25 ** 40), "x.grad after 40 diamonds")
    assert msg is None, msg


@pytest.mark.weight(4)
@oracle.examples(25)
@given(p=programs(ops=("add", "mul"), given=True, broadcast=False, max_steps=8))
def test_generated_programs(student, p):
    oracle.check_generated(student, p)

@pytest.mark.weight(4)
@oracle.examples(20)
@given(p=edge_programs(ops=("add", "mul", "sum"), given=True, hooks=False))
def test_edge_programs(student, p):
    """0-d and size-0 inputs, 0-d against larger ones, backward twice (retain_graph, zero_grad, freed values)."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_engine.py: hidden grading text, never shown to learners
