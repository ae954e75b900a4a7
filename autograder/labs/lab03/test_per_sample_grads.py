"""Part `per_sample_grads`: vmap(grad(...)) against a loop computed here, in P0.

The speed ratio against a reference loop is measured here around two student calls (the same
model and batch, min of several runs) and recorded for the instructor; it is not graded.
"""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle


def case(seed, batch, d, h, c):
    params = oracle.mlp_params(seed, d, h, c)
    (x,) = oracle.arrays(seed + 1, (batch, d), dtype=np.float32)
    y = np.random.default_rng(seed + 2).integers(0, c, batch)
    return params, x, y


def check(student, params, x, y, impl="vmap"):
    got = student.run("per_sample", params, x, y, impl=impl)
    want = oracle.per_sample_grads(params, x, y)
    fn = "per_sample_grads" if impl == "vmap" else "per_sample_grads_loop"
    what = f"{fn} for a batch of {len(x)}"
    assert sorted(got["grads"]) == sorted(want), f"{what}: expected gradients for {sorted(want)}, got {sorted(got['grads'])}"
    for name in want:
        oracle.close(got["grads"][name], want[name], f"{what}: the per-sample gradients of {name}", rtol=1e-4, atol=1e-6)
    assert not got["grad_set"], f"{what}: the model's parameters got a .grad; leave the model untouched"
    assert got["model_unchanged"], f"{what}: the model's parameters changed"
    return got


def test_small(student):
    check(student, *case(0, 4, 3, 5, 2))


@pytest.mark.weight(4)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**16), batch=st.integers(2, 8), d=st.integers(1, 6), h=st.integers(1, 8), c=st.integers(2, 4))
def test_generated(student, seed, batch, d, h, c):
    check(student, *case(seed, batch, d, h, c))


@pytest.mark.weight(2)
def test_vectorized_not_a_loop(student):
    got = check(student, *case(1, 6, 4, 8, 3))
    assert got["forward_calls"] < 6, (
        f"per_sample_grads ran the model {got['forward_calls']} times for 6 samples: "
        "use vmap(grad(...)), which runs it once on the whole batch")


def test_loop_version(student):
    check(student, *case(2, 5, 3, 4, 3), impl="loop")


def test_speed_ratio_is_recorded(student, measurement):
    """Informational: P0 times the learner's vmap version against a reference loop (min of 3 calls each)."""
    params, x, y = case(3, 64, 20, 64, 5)
    student.run("per_sample_timed", params, x, y, "student", repeat=1)  # warm-up (vmap's first-call set-up)
    times = {"student": [], "loop": []}
    for _ in range(3):
        for impl in times:
            start = time.perf_counter()
            student.run("per_sample_timed", params, x, y, impl, repeat=3)
            times[impl].append(time.perf_counter() - start)
    ratio = min(times["loop"]) / max(min(times["student"]), 1e-9)
    print(f"per-sample gradients, batch 64: vmap {min(times['student']) * 1e3 / 3:.1f} ms, "
          f"loop {min(times['loop']) * 1e3 / 3:.1f} ms, speed ratio {ratio:.1f}x")
    measurement("per-sample gradients, vmap speed-up vs a loop (batch 64)", ratio, "x")

# IPT-CANARY lab03 test_per_sample_grads.py: hidden grading text, never shown to learners
