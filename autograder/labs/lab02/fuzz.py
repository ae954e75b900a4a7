# IPT-CANARY lab02 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab02's reference solution against torch.autograd (P0, with torch).

The reference module is assembled from solutions/lab02_autograd.py exactly as grading assembles a
submission (exported cells, in order) and run through the same program interpreter the graders use
(scenarios.interpret), once on the reference and once on torch; every value, flag, hook call,
error type and gradient must agree (oracle.compare_runs).

    run(examples) -> number of cases checked; raises AssertionError on the first disagreement.

Small in CI (examples=50, a few seconds), large in `make fuzz LAB=lab02`.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import hypothesis
from hypothesis import given
from hypothesis import strategies as st

from autograder.labs.lab02 import oracle, scenarios
from autograder.labs.lab02.strategies import ELEMENTWISE, REDUCTIONS, SOFTMAX, edge_programs, programs


@functools.lru_cache(maxsize=1)
def reference():
    """The reference solution as a module (its exported cells, as grading runs them)."""
    from autograder.engine.variants import reference_module
    return reference_module("lab02")


def compare(prog) -> bool:
    """Run prog on the reference and on torch; False when torch's run is not a fair case."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = oracle.torch_program(prog)
        if not oracle.usable(prog, want, allow_nonfinite=True):
            return False
        got = scenarios.interpret(scenarios.LearnerAPI(reference(), prog.get("given", False)), prog)
    msg = oracle.compare_runs(got, want, prog)
    assert msg is None, f"reference disagrees with torch: {msg}"
    return True


FIXED = [
    # relu selects: inf * 0 must not turn into nan ("ties": the exact 0 is the point, so usable() keeps it)
    {"ties": True, "inputs": [["x", np.array([-1.0, 0.0, 2.0]), True]],
     "ops": [["let", "r", "relu", "x"], ["let", "p", "pow", "r", 0.5], ["let", "s", "sum", "p", None, False],
             ["backward", "s", None, False]]},
    # 0-d reductions over dim 0 / -1, and max of a 0-d tensor
    *[{"inputs": [["x", np.array(2.0), True]],
       "ops": [["let", "v", op, "x", d, k], ["let", "w", "mul", "v", 3.0], ["backward", "w", None, False]]}
      for op in ("sum", "mean", "max") for d in (0, -1) for k in (False, True)],
    # retain_grad twice
    {"inputs": [["x", np.array([1.0, 2.0]), True]],
     "ops": [["let", "a", "mul", "x", 3.0], ["retain_grad", "a"], ["retain_grad", "a"], ["let", "b", "mul", "a", "a"],
             ["let", "s", "sum", "b", None, False], ["backward", "s", None, False]]},
]


def run(examples: int = 50) -> int:
    """Check the fixed cases and `examples` generated programs per strategy; the number of cases checked."""
    count = 0
    for prog in FIXED:
        count += compare(prog)
    edge, plain = builtins_max(1, examples), builtins_max(1, examples // 4)
    strategies = [  # the edge domain gets the budget; the graders' own strategies a quarter each
        (edge, edge_programs()),
        (edge // 2 + 1, edge_programs(ops=("add", "mul", "sum"), given=True)),
        (edge // 4 + 1, edge_programs(ops=("add", "mul", "sum"), given=True, end="graph")),
        (plain, programs(ops=tuple(ELEMENTWISE))),
        (plain, programs(ops=("add", "mul", "sub", "tanh", "exp") + tuple(REDUCTIONS) * 2, max_steps=6)),
        (plain, programs(ops=("add", "mul", "exp", "sum", "transpose") + tuple(SOFTMAX) * 3, max_steps=5)),
        (plain, programs(ops=("add", "mul"), given=True, broadcast=False, max_steps=8)),
    ]
    for n, strategy in strategies:
        seen = []

        @hypothesis.settings(oracle.examples(n), derandomize=True)  # the same cases on every run
        @given(p=strategy)
        def check(p):
            seen.append(compare(p))

        check()
        count += builtins_sum(seen)
    return count


builtins_max, builtins_sum = max, sum

if __name__ == "__main__":
    import sys
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 50), "cases agree with torch")
