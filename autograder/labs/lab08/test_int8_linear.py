# IPT-CANARY lab08 test_int8_linear.py: hidden grading text, never shown to learners
"""Part `int8_linear`: an exact int32 matmul of 8-bit integers, and the int8 layer's spec.

Trust: values only. int_matmul is compared with torch._int_mm where its shape rules allow and with
an int64 product elsewhere; cases include rows long enough that float32 accumulation is inexact and
extremes that wrap int8 / int16 arithmetic. The layer is compared with the spec computed in P0.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import oracle


def run_matmul(student, pairs, show=False, extra=""):
    specs = [dict(a=a, b=b) for a, b in pairs]
    got = replies.list_of(student.run("lab08.scenarios:int_matmul", specs), "int_matmul's results", len(specs))
    for (a, b), reply in zip(pairs, got, strict=True):
        what = f"int_matmul of {a.dtype} {list(a.shape)} by {b.dtype} {list(b.shape)}{extra}"
        reply = oracle.case_reply(reply, {"out"}, what)
        oracle.exact(reply["out"], oracle.int_matmul(a, b), what, dtype="int32", show=show)


def ints(rng, shape, dtype, extreme=False):
    lo, hi = (-128, 127) if dtype == np.int8 else (0, 255)
    if extreme:
        return rng.choice([lo, hi, hi - 1, lo + 1], size=shape).astype(dtype)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def test_small(student, grading_seed):
    a = np.array([[1, -2, 3], [127, -128, 0]], np.int8)
    b = np.array([[2, 0], [1, -1], [-128, 127]], np.int8)
    run_matmul(student, [(a, b)], show=True)
    rng = np.random.default_rng((grading_seed, 1))
    run_matmul(student, [(ints(rng, (3, 7), np.uint8), ints(rng, (7, 4), np.int8))])


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated(student, seed):
    rng = np.random.default_rng(seed)
    pairs = []
    for m, k, n in [(int(rng.integers(1, 6)), int(rng.integers(1, 20)), int(rng.integers(1, 6))), (24, 32, 16), (17, 64, 8)]:
        da, db = (np.int8 if rng.integers(2) else np.uint8), np.int8
        pairs.append((ints(rng, (m, k), da), ints(rng, (k, n), db)))
    pairs.append((ints(rng, (32, 16), np.int8), ints(rng, (16, 8), np.int8)))  # torch._int_mm's own shapes
    run_matmul(student, pairs)


@pytest.mark.weight(3)
def test_long_rows_of_extremes(student, grading_seed):
    """Sums past 2**24 (float32 is no longer exact), products that wrap int8 and int16."""
    rng = np.random.default_rng((grading_seed, 37))
    pairs = [(np.full((2, 2048), 127, np.int8), np.full((2048, 3), 127, np.int8)),
             (np.full((1, 1500), -128, np.int8), np.full((1500, 2), -128, np.int8)),
             (ints(rng, (3, 4096), np.int8, extreme=True), ints(rng, (4096, 2), np.int8, extreme=True)),
             (ints(rng, (2, 3000), np.uint8, extreme=True), ints(rng, (3000, 2), np.int8, extreme=True)),
             (ints(rng, (24, 1024), np.int8, extreme=True), ints(rng, (1024, 16), np.int8, extreme=True))]
    run_matmul(student, pairs, extra=" (long rows of extreme values: accumulate exactly in int32)")


def test_empty_and_mismatched(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 41))
    run_matmul(student, [(np.zeros((3, 0), np.int8), np.zeros((0, 2), np.int8)), (ints(rng, (2, 5), np.int8), ints(rng, (5, 1), np.int8))])
    bad = [("(2, 3) by (4, 2)", ints(rng, (2, 3), np.int8), ints(rng, (4, 2), np.int8)),
           ("a 1-d (3,) by (3, 2)", ints(rng, (3,), np.int8), ints(rng, (3, 2), np.int8)),
           ("(2, 3) by a 1-d (3,)", ints(rng, (2, 3), np.int8), ints(rng, (3,), np.int8))]
    got = replies.list_of(student.run("lab08.scenarios:int_matmul", [dict(a=a, b=b) for _, a, b in bad]),
                          "int_matmul's results", len(bad))
    for (what, _, _), reply in zip(bad, got, strict=True):
        oracle.expect_error(reply, "ValueError", f"int_matmul of {what}")


def layer_case(rng, m, k, n, bias=True, narrow_out=False):
    x = np.maximum(rng.standard_normal((m, k)), 0).astype(np.float32) * np.float32(rng.uniform(0.5, 4))
    w = rng.standard_normal((n, k)).astype(np.float32) * np.float32(rng.uniform(0.05, 1))
    b = (rng.standard_normal(n) * 0.5).astype(np.float32) if bias else None
    xs, _, xz = oracle.choose(x, (m, k), 0, 255, False)
    ws, _, wz = oracle.choose(w, (1, k), -128, 127, True)
    xq = oracle.quantize(x, (m, k), xs, xz, 0, 255, "uint8")
    wq = oracle.quantize(w, (1, k), ws, wz, -128, 127, "int8")
    ref = x @ w.T + (0 if b is None else b)
    os_, _, oz = oracle.choose(ref.astype(np.float32), ref.shape, -128, 127, False)
    if narrow_out:
        os_ = (os_ * np.float32(0.3)).astype(np.float32)  # the output saturates
    return dict(xq=xq, x_scale=xs.reshape(()), x_zp=int(xz.reshape(())), wq=wq, w_scale=ws.reshape(-1), bias=b,
                out_scale=os_.reshape(()), out_zp=int(oz.reshape(())))


def run_layer(student, specs, extra=""):
    got = replies.list_of(student.run("lab08.scenarios:int8_linear", specs), "int8_linear's results", len(specs))
    for s, reply in zip(specs, got, strict=True):
        what = (f"int8_linear with x {list(s['xq'].shape)} (zero point {s['x_zp']}), weight {list(s['wq'].shape)}, "
                f"bias {'None' if s['bias'] is None else 'given'}{extra}")
        reply = oracle.case_reply(reply, {"out"}, what)
        oracle.exact(reply["out"], oracle.int8_linear(**s), what, dtype="int8")


@pytest.mark.weight(4)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_layer_generated(student, seed):
    rng = np.random.default_rng(seed)
    specs = [layer_case(rng, int(rng.integers(1, 6)), int(rng.integers(1, 40)), int(rng.integers(1, 9)),
                        bias=bool(rng.integers(2))) for _ in range(3)]
    specs.append(layer_case(rng, 20, 64, 16, narrow_out=True))
    run_layer(student, specs)


@pytest.mark.weight(2)
def test_layer_without_bias_and_saturating(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 43))
    run_layer(student, [layer_case(rng, 4, 16, 8, bias=False), layer_case(rng, 3, 32, 5, narrow_out=True),
                        layer_case(rng, 2, 700, 3)], extra=" (saturating output, long rows)")


def order_sensitive_case(rng):
    """A 1 x 1 layer whose accumulator sits where (x_scale * w_scale) / out_scale and another order of
    the same float32 product round to different integers."""
    import torch
    acc = (np.arange(-255, 256)[:, None] * np.arange(-128, 128)[None, :]).astype(np.float32)
    for _ in range(5000):
        xs, ws, os_ = (torch.tensor(float(v), dtype=torch.float32) for v in
                       (rng.uniform(0.005, 0.05), rng.uniform(0.001, 0.02), rng.uniform(0.01, 0.2)))
        m = ((xs * ws) / os_).numpy()
        want = np.round(acc * m)
        hit = np.zeros(acc.shape, dtype=bool)
        for other in (xs * (ws / os_), (xs / os_) * ws):
            hit |= np.round(acc * other.numpy()) != want
        hit &= np.abs(want) <= 100
        if hit.any():
            i, j = np.argwhere(hit)[int(rng.integers(hit.sum()))]
            d, w = int(i) - 255, int(j) - 128
            x_zp = max(0, -d)
            return dict(xq=np.array([[d + x_zp]], np.uint8), x_scale=xs.numpy(), x_zp=x_zp,
                        wq=np.array([[w]], np.int8), w_scale=ws.numpy().reshape(1), bias=None,
                        out_scale=os_.numpy(), out_zp=0)
    raise AssertionError("oracle: no order-sensitive case found")


@pytest.mark.weight(2)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**32 - 1))
def test_requantization_multiplier_as_written(student, seed):
    rng = np.random.default_rng(seed)
    run_layer(student, [order_sensitive_case(rng), order_sensitive_case(rng), layer_case(rng, 3, 8, 4)],
              extra=(" (on accumulators where the order of the float32 multiplier matters: "
                     "compute (x_scale * w_scale) / out_scale)"))
