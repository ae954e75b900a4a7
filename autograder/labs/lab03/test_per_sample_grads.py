"""Part `per_sample_grads`: vmap(grad(...)) against a loop computed here, in P0.

Trust: values only (the old P1-side count of model forward calls is gone; whether the vmap version
is vectorized is not graded, its speed is recorded for the instructor only). Models include frozen
parameters (left out of the dict) and nested modules with parameters of their own; each
implementation is called twice on the same model.
"""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.engine.plugin import case_seed
from autograder.labs.lab03 import oracle


def case(seed, batch, d, h, c, kind="mlp"):
    params = oracle.model_params(seed, d, h, c, kind)
    (x,) = oracle.arrays(seed + 1, (batch, d), dtype=np.float32)
    y = np.random.default_rng(seed + 2).integers(0, c, batch)
    return params, x, y


def check(student, params, x, y, impl="vmap", kind="mlp", frozen=(), twice=False, loss="cross_entropy"):
    got = student.run("per_sample", params, x, y, impl=impl, kind=kind, frozen=list(frozen), twice=twice, loss=loss)
    got = oracle.reply(got, {"grads", "grad_set", "model_unchanged"}, "the per-sample gradients")
    want = oracle.per_sample_grads(params, x, y, kind, frozen, loss)
    fn = "per_sample_grads" if impl == "vmap" else "per_sample_grads_loop"
    what = f"{fn} for a batch of {len(x)}" + (f" ({kind} model)" if kind != "mlp" else "")
    if loss == "mse":
        what += f" with F.mse_loss and targets of shape {tuple(np.shape(y))} (one row per sample)"
    if frozen:
        what += f" with frozen parameters {sorted(frozen)}"
    for key, label in (("grads", ""), ("grads2", ", called a second time")) if twice else (("grads", ""),):
        grads = got.get(key)
        assert isinstance(grads, dict), f"{what}{label}: expected a dict of per-sample gradients, got {replies.describe(grads)}"
        assert sorted(grads) == sorted(want), (
            f"{what}{label}: expected gradients for exactly the parameters that require grad {sorted(want)}, "
            f"got {sorted(grads)}")
        for name in sorted(want):
            oracle.close(grads[name], want[name], f"{what}{label}: the per-sample gradients of {name}", rtol=1e-4, atol=1e-6)
    assert got["grad_set"] is False, f"{what}: the model's parameters got a .grad; leave the model untouched"
    assert got["model_unchanged"] is True, f"{what}: the model's parameters changed"
    return got


def test_small(student):
    check(student, *case(0, 4, 3, 5, 2))


@pytest.mark.weight(4)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**16), batch=st.integers(1, 6), d=st.integers(1, 5), h=st.integers(1, 6),
       c=st.integers(2, 4), kind=st.sampled_from(("mlp", "mlp", "nested", "flatten")), impl=st.sampled_from(("vmap", "vmap", "loop")))
def test_generated(student, seed, batch, d, h, c, kind, impl):
    check(student, *case(seed, batch, d, h, c, kind), impl=impl, kind=kind)


@pytest.mark.weight(2)
@pytest.mark.parametrize("impl", ["vmap", "loop"])
def test_frozen_parameters(student, impl):
    check(student, *case(4, 5, 3, 4, 3), impl=impl, frozen=("0.weight", "2.bias"))
    check(student, *case(5, 3, 2, 3, 2, "nested"), impl=impl, kind="nested", frozen=("2.scale",))


@pytest.mark.weight(2)
@pytest.mark.parametrize("impl", ["vmap", "loop"])
def test_nested_module_with_own_parameters(student, impl):
    check(student, *case(6, 4, 3, 5, 3, "nested"), impl=impl, kind="nested", twice=True)


@pytest.mark.parametrize("impl", ["vmap", "loop"])
def test_model_that_needs_the_batch_dim(student, impl):
    """The model ends in nn.Flatten(), which refuses a sample without its batch dim: inside grad, each
    sample goes through the model as a batch of one (unsqueeze(0)), as the notebook says."""
    check(student, *case(case_seed(13) % 2**16, 3, 4, 3, 3, "flatten"), impl=impl, kind="flatten")


@pytest.mark.parametrize("impl", ["vmap", "loop"])
def test_targets_with_their_own_dims(student, impl):
    """A regression loss whose targets have a dim per sample: y[b:b+1] is (1, c), so inside grad the
    target gets its batch dim back in front, as the sample does (unsqueeze(0)), not at the end."""
    params, x, _ = case(case_seed(17) % 2**16, 4, 3, 4, 3)
    y = np.random.default_rng(case_seed(18)).standard_normal((4, 3)).astype(np.float32)
    check(student, params, x, y, impl=impl, loss="mse")


def test_batch_of_one(student):
    check(student, *case(7, 1, 4, 3, 2), twice=True)


def test_loop_version(student):
    check(student, *case(2, 5, 3, 4, 3), impl="loop", twice=True)


def test_speed_ratio_is_recorded(student, measurement):
    """Informational: P0 times the learner's vmap version against a reference loop (min of 3 calls each)."""
    params, x, y = case(3, 64, 20, 64, 5)
    check(student, params, x[:4], y[:4])  # a value check, so that a stub scores nothing here
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
