"""Part `modes_hooks`: no_grad (nested, exceptions, decorator), tensor hooks, retain_grad."""
import numpy as np
import pytest

from autograder.labs.lab02 import oracle

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
W = np.array([[2.0, 1.0, -1.0], [0.5, 4.0, 1.5]])
G = np.array([[1.0, 2.0, -1.0], [0.5, -3.0, 2.0]])


def prog(ops, inputs=(("x", X, True), ("w", W, True))):
    return {"inputs": [list(i) for i in inputs], "given": True, "ops": ops}


NO_GRAD = {
    "inside": prog([["no_grad_begin"], ["grad_enabled"], ["let", "a", "mul", "x", "w"], ["no_grad_end"],
                    ["grad_enabled"], ["let", "b", "mul", "x", "w"]]),
    "nested": prog([["no_grad_begin"], ["no_grad_begin"], ["let", "a", "mul", "x", 2.0], ["no_grad_end"],
                    ["grad_enabled"], ["let", "b", "mul", "x", "w"], ["no_grad_end"], ["grad_enabled"],
                    ["let", "c", "add", "x", "b"]]),
    "exception": prog([["no_grad_raises"], ["let", "a", "mul", "x", "w"]]),
    "decorator": prog([["decorated", "a", "x", 3.0], ["let", "b", "mul", "x", "w"]]),
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
    "hook-needs-grad": prog([["let", "k", "mul", "c", 2.0], ["hook", "k", 1, None], ["hook", "c", 2, None]],
                            (("x", X, True), ("c", W, False))),
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
    "retain-on-leaf-and-constant": prog([["retain_grad", "x"], ["let", "k", "mul", "c", 2.0], ["retain_grad", "k"],
                                         ["let", "a", "mul", "x", "c"], ["let", "s", "sum", "a", None, False],
                                         ["backward", "s", None, False]], (("x", X, True), ("c", W, False))),
}


@pytest.mark.parametrize("name", list(RETAIN))
def test_retain_grad(student, name):
    oracle.check_program(student, RETAIN[name])

# IPT-CANARY lab02 test_modes_hooks.py: hidden grading text, never shown to learners
