"""Part `modes_hooks`: no_grad (nested, exceptions, decorator), tensor hooks, retain_grad."""
import numpy as np
import pytest

from hypothesis import given

from autograder.labs.lab02 import oracle
from autograder.labs.lab02.strategies import edge_programs

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
W = np.array([[2.0, 1.0, -1.0], [0.5, 4.0, 1.5]])
G = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 2.0]])


def prog(ops, inputs=(("x", X, True), ("w", W, True))):
    return {"inputs": [list(i) for i in inputs], "given": True, "ops": ops}


# every program ends in a look at the graph: the gradients found by walking it show what no_grad changed
NO_GRAD = {
    "inside": prog([["no_grad_begin"], ["grad_enabled"], ["let", "a", "mul", "x", "w"], ["no_grad_end"],
                    ["grad_enabled"], ["let", "b", "mul", "x", "w"], ["let", "c", "mul", "a", "b"], ["graph", "c"]]),
    "nested": prog([["no_grad_begin"], ["no_grad_begin"], ["let", "a", "mul", "x", 2.0], ["no_grad_end"],
                    ["grad_enabled"], ["let", "b", "mul", "x", "w"], ["no_grad_end"], ["grad_enabled"],
                    ["let", "c", "add", "x", "b"], ["let", "d", "mul", "c", "a"], ["graph", "d"]]),
    "exception": prog([["no_grad_raises"], ["let", "a", "mul", "x", "w"], ["let", "b", "mul", "a", "x"], ["graph", "b"]]),
    "exception-nested": prog([["no_grad_begin"], ["no_grad_raises"], ["grad_enabled"], ["let", "a", "mul", "x", "w"],
                              ["no_grad_end"], ["grad_enabled"], ["no_grad_raises"], ["let", "b", "mul", "x", "w"],
                              ["let", "c", "mul", "a", "b"], ["graph", "c"]]),
    "decorator": prog([["decorated", "a", "x", 3.0], ["let", "b", "mul", "x", "w"], ["let", "c", "mul", "a", "b"],
                       ["graph", "c"]]),
    "mixed-graph": prog([["let", "a", "mul", "x", "w"], ["no_grad_begin"], ["let", "b", "mul", "a", 2.0],
                         ["no_grad_end"], ["let", "c", "mul", "a", "b"], ["let", "s", "sum", "c", None, False],
                         ["backward", "s", None, False]]),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(NO_GRAD))
def test_no_grad(student, name):
    oracle.check_program(student, NO_GRAD[name])


LOSS = [["let", "a", "mul", "x", "w"], ["let", "b", "mul", "a", "a"], ["let", "c", "add", "b", "a"],
        ["let", "s", "sum", "c", None, False]]

HOOKS = {
    "leaf-hook-scales": prog([["hook", "x", 1, 10.0]] + LOSS + [["backward", "s", None, False]]),
    "leaf-hook-records": prog([["hook", "w", 1, None]] + LOSS + [["backward", "s", None, False]]),
    "nonleaf-hook-once-with-total": prog(LOSS[:1] + [["hook", "a", 1, None]] + LOSS[1:] + [["backward", "s", None, False]]),
    "nonleaf-hook-changes-upstream": prog(LOSS[:1] + [["hook", "a", 1, -2.0]] + LOSS[1:] + [["backward", "s", None, False]]),
    "hooks-chain-in-order": prog(LOSS[:1] + [["hook", "a", 1, 2.0], ["hook", "a", 2, None], ["hook", "a", 3, 3.0]]
                                 + LOSS[1:] + [["backward", "s", None, False]]),
    "remove": prog(LOSS[:1] + [["hook", "a", 1, 5.0], ["hook", "x", 2, None]] + LOSS[1:]
                   + [["backward", "s", None, True], ["remove_hook", 1], ["remove_hook", 2], ["backward", "s", None, False]]),
    "hook-on-root": prog(LOSS + [["hook", "s", 1, 4.0], ["backward", "s", None, False]]),
    "hook-needs-grad": prog([["let", "k", "mul", "c", 2.0], ["hook", "k", 1, None], ["hook", "c", 2, None],
                             ["let", "a", "mul", "x", "c"], ["hook", "a", 3, 2.0], ["let", "s", "sum", "a", None, False],
                             ["backward", "s", None, False]], (("x", X, True), ("c", W, False))),
    # a hook returning grad + 1 tells one call with the total from one call per path, by the values alone
    "shift-hook-once": prog(LOSS[:1] + [["hook", "a", 1, "shift"]] + LOSS[1:] + [["backward", "s", None, False]]),
    "shift-leaf-hook": prog([["hook", "x", 1, "shift"]] + LOSS + [["backward", "s", None, False]]),
    "hooks-after-retain-graph": prog(LOSS[:1] + [["hook", "a", 1, 3.0], ["hook", "x", 2, "shift"]] + LOSS[1:]
                                     + [["backward", "s", None, True], ["backward", "s", None, True],
                                        ["backward", "s", None, False]]),
    "hook-on-leaf-root": prog([["hook", "x", 1, 2.0], ["backward", "x", G, False], ["backward", "x", G, False]]),
    "hook-on-zero-d": prog([["let", "a", "mul", "x", "s"], ["hook", "s", 1, "shift"], ["let", "t", "sum", "a", None, False],
                            ["backward", "t", None, False]], (("x", X, True), ("s", np.array(0.5), True))),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(HOOKS))
def test_hooks(student, name):
    oracle.check_program(student, HOOKS[name])


RETAIN = {
    "retain-grad": prog(LOSS[:1] + [["retain_grad", "a"]] + LOSS[1:] + [["retain_grad", "c"], ["backward", "s", None, False]]),
    "retain-after-hooks": prog(LOSS[:1] + [["retain_grad", "a"], ["hook", "a", 1, 3.0]] + LOSS[1:]
                               + [["backward", "s", None, False]]),
    "retain-accumulates": prog(LOSS[:1] + [["retain_grad", "a"]] + LOSS[1:]
                               + [["backward", "s", None, True], ["backward", "s", None, False]]),
    "retain-twice": prog(LOSS[:1] + [["retain_grad", "a"], ["retain_grad", "a"]] + LOSS[1:]
                         + [["retain_grad", "s"], ["retain_grad", "s"], ["backward", "s", None, False]]),
    "retain-twice-retain-graph": prog(LOSS[:1] + [["retain_grad", "a"]] + LOSS[1:] + [["backward", "s", None, True],
                                      ["retain_grad", "a"], ["backward", "s", None, False]]),
    "retain-with-shift-hook": prog(LOSS[:1] + [["hook", "a", 1, "shift"], ["retain_grad", "a"]] + LOSS[1:]
                                   + [["backward", "s", None, False]]),
    "retain-on-leaf-and-constant": prog([["retain_grad", "x"], ["let", "k", "mul", "c", 2.0], ["retain_grad", "k"],
                                         ["let", "a", "mul", "x", "c"], ["let", "s", "sum", "a", None, False],
                                         ["backward", "s", None, False]], (("x", X, True), ("c", W, False))),
}


@pytest.mark.parametrize("name", list(RETAIN))
def test_retain_grad(student, name):
    oracle.check_program(student, RETAIN[name])

@pytest.mark.weight(4)
@oracle.examples(20)
@given(p=edge_programs(ops=("add", "mul", "sum"), given=True, errors=False))
def test_edge_hooks(student, p):
    """Hooks (recording, scaling, shifting) and retain_grad (twice) on 0-d, size-0 and larger tensors,
    around repeated backwards."""
    oracle.check_generated(student, p)

# IPT-CANARY lab02 test_modes_hooks.py: hidden grading text, never shown to learners
