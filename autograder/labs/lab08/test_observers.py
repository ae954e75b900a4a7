# IPT-CANARY lab08 test_observers.py: hidden grading text, never shown to learners
"""Part `observers`: MinMaxObserver per tensor and per channel, with and without a moving average;
HistogramObserver's bins, range and qparams.

Trust: values only: the range (or the bins) after each batch P0 chose, and the qparams, against P0's
spec oracles (the running range; the bins counted with numpy and the range found by sorting every value)
and torchao (the qparams).
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


# -- the histogram observer ---------------------------------------------------------------------
def describe_hist(cfg):
    return (f"a histogram observer (bin_width={cfg['bin_width']!r}, tail={cfg.get('tail', 0.0)!r}), "
            f"[{cfg['qmin']}, {cfg['qmax']}], {'symmetric' if cfg['symmetric'] else 'asymmetric'}")


def run_hist(student, cfg, batches, what, show=False):
    got = student.run("lab08.scenarios:observe_histogram", cfg, batches)
    got = replies.dict_of(got, {"init", "steps", "range", "qparams"}, what)
    oracle.case_reply(got["init"], {"value"}, f"{what}: the constructor")
    steps = replies.list_of(got["steps"], f"{what}: the steps", len(batches))
    want_steps, want_range, want_q = oracle.histogram(cfg, batches)
    for i, (reply, want) in enumerate(zip(steps, want_steps, strict=True)):
        step = f"{what}, after batch {i + 1} of {len(batches)} (shape {list(np.shape(batches[i]))})"
        if want == "ValueError":
            oracle.expect_error(reply, "ValueError", f"{step}, which holds a NaN or an infinity")
            continue
        reply = oracle.case_reply(reply, {"same", "bins"}, step)
        assert replies.boolean(reply["same"], f"{step}: forward's result"), \
            f"{step}: forward(x) should return x itself, unchanged"
        pairs = replies.list_of(reply["bins"], f"{step}: bins")
        got_bins = {}
        for pair in pairs:
            k, n = replies.int_list(pair, f"{step}: a (bin, count) pair", 2)
            assert k not in got_bins, f"{step}: bin {k} appears twice"
            got_bins[k] = n
        if got_bins != want:
            missing = sorted(set(want) - set(got_bins))
            extra = sorted(set(got_bins) - set(want))
            wrong = sorted(k for k in set(want) & set(got_bins) if want[k] != got_bins[k])
            detail = (f"bins {missing[:5]} missing" if missing else f"bins {extra[:5]} not expected" if extra
                      else f"bin {wrong[0]} should count {want[wrong[0]]}, got {got_bins[wrong[0]]}")
            if show:
                detail += f"; expected {dict(sorted(want.items()))}, got {dict(sorted(got_bins.items()))}"
            raise AssertionError(f"{step}: self.bins is wrong: {detail}")
    if want_range is None:
        oracle.expect_error(got["range"], "RuntimeError", f"{what}: range() with no data seen")
        oracle.expect_error(got["qparams"], "RuntimeError", f"{what}: calculate_qparams() with no data seen")
        return
    r = oracle.case_reply(got["range"], {"min_val", "max_val"}, f"{what}: range()")
    oracle.exact(r["min_val"], np.asarray(want_range[0]), f"{what}: range()'s min_val", dtype="float32", show=show)
    oracle.exact(r["max_val"], np.asarray(want_range[1]), f"{what}: range()'s max_val", dtype="float32", show=show)
    q = oracle.case_reply(got["qparams"], {"scale", "zero_point"}, f"{what}: calculate_qparams()")
    oracle.exact(q["scale"], want_q[0], f"{what}: calculate_qparams()'s scale", dtype="float32", show=show)
    oracle.exact(q["zero_point"], want_q[1], f"{what}: calculate_qparams()'s zero point", dtype="int32", show=show)


def hist_config(rng, tail=None):
    qmin, qmax = cases.RANGES[int(rng.integers(len(cases.RANGES)))]
    return dict(qmin=qmin, qmax=qmax, symmetric=bool(rng.integers(2)), bin_width=float(2.0 ** int(rng.integers(-7, 3))),
                tail=float(rng.choice([0.0, 0.001, 0.01, 0.05, 0.1, 0.25, 0.4999])) if tail is None else tail)


def hist_batch(rng, width):
    """Values of any kind; some batches hold exact bin edges (negative ones included), 0-d and empty ones."""
    kind = int(rng.integers(7))
    if kind == 0:
        return np.zeros((0,) + ((int(rng.integers(1, 4)),) if rng.integers(2) else ()), np.float32)
    if kind == 1:
        return np.float32(rng.integers(-40, 40) * width) * np.ones((), np.float32)
    if kind == 2:
        edges = rng.integers(-50, 50, size=int(rng.integers(1, 30))) * width
        return np.concatenate([edges, -np.abs(rng.standard_normal(3)) * 1e-3]).astype(np.float32)
    if kind == 4:       # one value per bin, so that every value dropped or kept moves the range
        n = int(rng.integers(5, 40))
        return ((rng.permutation(n) - n // 3 + rng.uniform(0, 1, size=n)) * width).astype(np.float32)
    if kind == 3:       # a bulk and a few outliers, as real activations have
        bulk = rng.standard_normal(int(rng.integers(20, 200))) * rng.uniform(0.1, 2)
        out = rng.choice([-1, 1], size=int(rng.integers(1, 4))) * rng.uniform(5, 60, size=1)
        return np.concatenate([bulk, out]).astype(np.float32)
    return cases.values(rng, cases.shape_2d(rng))


def test_histogram_small(student, grading_seed):
    cfg = dict(qmin=0, qmax=255, symmetric=False, bin_width=1.0, tail=0.0)
    bs = [np.array([[-1.5, 0.0, 0.99], [2.0, -0.1, 3.5]], np.float32), np.zeros((0, 3), np.float32),
          np.array([7.0, 2.5], np.float32)]
    run_hist(student, cfg, bs, describe_hist(cfg), show=True)
    cfg = dict(cfg, tail=0.25, bin_width=0.5)
    run_hist(student, cfg, bs, describe_hist(cfg), show=True)
    # ten values in ten bins, tail 0.15: floor(1.5) = 1 value dropped at each end
    cfg = dict(cfg, tail=0.15, bin_width=1.0, qmin=-128, qmax=127, symmetric=True)
    run_hist(student, cfg, [np.arange(-3, 7, dtype=np.float32) + np.float32(0.5)], describe_hist(cfg), show=True)
    rng = np.random.default_rng((grading_seed, 41))
    cfg = hist_config(rng)
    run_hist(student, cfg, [hist_batch(rng, cfg["bin_width"]) for _ in range(3)], describe_hist(cfg))
    cfg = hist_config(rng, tail=float(rng.choice([0.05, 0.15, 0.25, 0.35])))
    run_hist(student, cfg, [np.float32(cfg["bin_width"]) * (rng.permutation(21) - 7 + np.float32(0.25)).astype(np.float32)],
             describe_hist(cfg))


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_histogram(student, seed):
    rng = np.random.default_rng(seed)
    cfg = hist_config(rng)
    bs = [hist_batch(rng, cfg["bin_width"]) for _ in range(int(rng.integers(1, 6)))]
    if not any(np.size(b) for b in bs):
        bs.append(cases.values(rng, (2, 3)))
    run_hist(student, cfg, bs, describe_hist(cfg))


def test_histogram_errors(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 43))
    good = hist_config(rng)
    for bad in [dict(bin_width=0.3), dict(bin_width=3.0), dict(bin_width=0.0), dict(bin_width=-0.5),
                dict(tail=0.5), dict(tail=-0.01)]:
        got = student.run("lab08.scenarios:observe_histogram", dict(good, **bad), [])
        got = replies.dict_of(got, {"init"}, "a histogram observer with a bad argument")
        oracle.expect_error(got["init"], "ValueError", f"HistogramObserver(..., {', '.join(f'{k}={v!r}' for k, v in bad.items())})")
    # the same observer with good arguments works, and refuses non-finite batches without counting them
    bs = [hist_batch(rng, good["bin_width"]).reshape(-1)[:0], cases.values(rng, (3, 4))]
    bad_batch = cases.values(rng, (2, 3))
    bad_batch[int(rng.integers(2)), int(rng.integers(3))] = [np.nan, np.inf, -np.inf][int(rng.integers(3))]
    run_hist(student, good, bs + [bad_batch, cases.values(rng, (2, 2))], describe_hist(good) + " fed a non-finite batch")
    got = student.run("lab08.scenarios:observe_histogram", good, [], before=True)
    got = replies.dict_of(got, {"init", "range_before", "calculate_qparams_before"}, "a histogram observer with no data")
    oracle.expect_error(got["range_before"], "RuntimeError", "range() before any data")
    oracle.expect_error(got["calculate_qparams_before"], "RuntimeError", "calculate_qparams() before any data")
