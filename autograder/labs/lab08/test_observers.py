# IPT-CANARY lab08 test_observers.py: hidden grading text, never shown to learners
"""Part `observers`: MinMaxObserver per tensor and per channel, with and without a moving average.

Trust: values only: the range after each batch P0 chose, and the qparams, against P0's spec oracle
(the running range) and torchao (the qparams).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import cases, oracle


def run(student, config, batches, what, qparams_before=False, show=False):
    got = student.run("lab08.scenarios:observe", config, batches, qparams_before=qparams_before)
    got = replies.dict_of(got, {"steps", "qparams"} | ({"before"} if qparams_before else set()), what)
    steps = replies.list_of(got["steps"], f"{what}: the steps", len(batches))
    want_steps, want_q = oracle.observe(config, batches)
    for i, (reply, want) in enumerate(zip(steps, want_steps, strict=True)):
        step = f"{what}, after batch {i + 1} of {len(batches)} (shape {list(np.shape(batches[i]))})"
        reply = oracle.case_reply(reply, {"same", "min_val", "max_val"}, step)
        assert replies.boolean(reply["same"], f"{step}: forward's result"), \
            f"{step}: forward(x) should return x itself, unchanged"
        if want is None:
            for key in ("min_val", "max_val"):
                value = reply[key].get("value", reply[key]) if isinstance(reply[key], dict) else reply[key]
                assert value is None, f"{step}: {key} should still be None (no data seen yet)"
            continue
        oracle.exact(reply["min_val"], want[0], f"{step}: min_val", dtype="float32", show=show)
        oracle.exact(reply["max_val"], want[1], f"{step}: max_val", dtype="float32", show=show)
    q = oracle.case_reply(got["qparams"], {"scale", "zero_point"}, f"{what}: calculate_qparams()")
    oracle.exact(q["scale"], want_q[0], f"{what}: calculate_qparams()'s scale", dtype="float32", show=show)
    oracle.exact(q["zero_point"], want_q[1], f"{what}: calculate_qparams()'s zero point", dtype="int32", show=show)
    return got


def config(rng, axis=None, c=None):
    qmin, qmax = cases.RANGES[int(rng.integers(len(cases.RANGES)))]
    return dict(qmin=qmin, qmax=qmax, symmetric=bool(rng.integers(2)), axis=axis, averaging_constant=c)


def describe(cfg):
    gran = "per tensor" if cfg["axis"] is None else f"per channel (axis={cfg['axis']})"
    avg = "min-max" if cfg["averaging_constant"] is None else f"moving average (c={cfg['averaging_constant']})"
    return f"a {avg} observer {gran}, [{cfg['qmin']}, {cfg['qmax']}], {'symmetric' if cfg['symmetric'] else 'asymmetric'}"


def batches(rng, n, shape):
    return [cases.values(rng, shape) for _ in range(n)]


def unsigned_symmetric(student, rng, axis=None, c=None):
    """An unsigned range mapped symmetrically (zero point 128 for uint8, 8 for uint4; torch.ao's
    observers give (qmin + qmax) // 2) on a few batches."""
    qmin, qmax = [(0, 255), (0, 15)][int(rng.integers(2))]
    cfg = dict(qmin=qmin, qmax=qmax, symmetric=True, axis=axis, averaging_constant=c)
    run(student, cfg, batches(rng, int(rng.integers(2, 4)), cases.shape_2d(rng)), describe(cfg))


def test_small_per_tensor(student, grading_seed):
    unsigned_symmetric(student, np.random.default_rng((grading_seed, 1)))
    cfg = dict(qmin=0, qmax=255, symmetric=False, axis=None, averaging_constant=None)
    bs = [np.array([[-1.0, 2.0], [0.5, 0.25]], np.float32), np.array([[3.0, -0.5]], np.float32),
          np.array([[-4.0]], np.float32)]
    run(student, cfg, bs, describe(cfg), show=True)


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_min_max(student, seed):
    rng = np.random.default_rng(seed)
    shape = cases.shape_3d(rng)
    axis = [None, 0, 1, -1, -3][int(rng.integers(5))]
    cfg = config(rng, axis=axis)
    n = int(rng.integers(2, 6))
    bs = [cases.values(rng, (int(rng.integers(1, 4)),) + shape[1:]) if axis not in (0, -3) else cases.values(rng, shape)
          for _ in range(n)]
    run(student, cfg, bs, describe(cfg))
    unsigned_symmetric(student, rng, axis=-1)


@pytest.mark.weight(4)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_moving_average(student, seed):
    rng = np.random.default_rng(seed)
    shape = cases.shape_2d(rng)
    axis = [None, 0, 1, -1][int(rng.integers(4))]
    cfg = config(rng, axis=axis, c=float(rng.choice([0.01, 0.1, 0.5, 1.0, 0.3])))
    run(student, cfg, batches(rng, int(rng.integers(3, 7)), shape), describe(cfg))
    unsigned_symmetric(student, rng, axis=[None, 1][int(rng.integers(2))], c=0.25)


@pytest.mark.weight(2)
def test_empty_batches_change_nothing(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 23))
    for axis, c in [(None, None), (1, 0.25)]:
        cfg = dict(qmin=-128, qmax=127, symmetric=True, axis=axis, averaging_constant=c)
        bs = [np.zeros((0, 4), np.float32), cases.values(rng, (3, 4)), np.zeros((0, 4), np.float32),
              cases.values(rng, (2, 4))]
        run(student, cfg, bs, describe(cfg) + " with empty batches among the data")
    unsigned_symmetric(student, rng)


def test_errors(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 29))
    cfg = dict(qmin=0, qmax=255, symmetric=False, axis=None, averaging_constant=None)
    got = student.run("lab08.scenarios:observe", cfg, [], qparams_before=True)
    got = replies.dict_of(got, {"before", "qparams", "steps"}, "an observer that has seen nothing")
    oracle.expect_error(got["before"], "RuntimeError", "calculate_qparams() before any data")
    cfg = dict(qmin=-128, qmax=127, symmetric=True, axis=1, averaging_constant=None)
    bs = [cases.values(rng, (2, 4)), cases.values(rng, (2, 5))]
    got = replies.dict_of(student.run("lab08.scenarios:observe", cfg, bs), {"steps", "qparams"}, "a per-channel observer")
    steps = replies.list_of(got["steps"], "the steps", 2)
    oracle.case_reply(steps[0], {"same", "min_val", "max_val"}, "a per-channel observer's first batch of 4 channels")
    oracle.expect_error(steps[1], "ValueError", "a per-channel observer (axis=1) that saw 4 channels, then a batch of 5")
    run(student, cfg, bs[:1], describe(cfg))
    unsigned_symmetric(student, rng, axis=0)
