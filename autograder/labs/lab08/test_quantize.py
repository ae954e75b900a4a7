# IPT-CANARY lab08 test_quantize.py: hidden grading text, never shown to learners
"""Part `quantize`: quantize and dequantize, bit-exact against torchao's quantize_affine /
dequantize_affine.

Trust: values only. Every test mixes in block grids (groups, 3-d blocks) and ranges (int4, int16)
that torch.quantize_per_tensor / per_channel and the fake-quant kernels cannot express.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import cases, oracle


def describe(s):
    x = np.asarray(s["x"] if "x" in s else s["q"])
    return (f"a {'bfloat16' if s.get('bf16') else str(x.dtype)} tensor {list(x.shape)} with block_size "
            f"{tuple(s['block_size'])}")


def run_quantize(student, specs, show=False, what_extra=""):
    got = replies.list_of(student.run("lab08.scenarios:quantize", specs), "quantize's results", len(specs))
    for s, reply in zip(specs, got, strict=True):
        what = f"quantize of {describe(s)} to {s['dtype']} in [{s['qmin']}, {s['qmax']}]{what_extra}"
        want = oracle.quantize(**s)
        reply = oracle.case_reply(reply, {"q"}, what)
        oracle.exact(reply["q"], want, what, dtype=s["dtype"], show=show)


def run_dequantize(student, specs, show=False):
    got = replies.list_of(student.run("lab08.scenarios:dequantize", specs), "dequantize's results", len(specs))
    for s, reply in zip(specs, got, strict=True):
        what = f"dequantize of {describe(s)}" + (" with a bfloat16 scale (the result is float32)" if s.get("bf16") else "")
        reply = oracle.case_reply(reply, {"x"}, what)
        oracle.exact(reply["x"], oracle.dequantize(**s), what, dtype="float32", show=show)


def extremes(rng):
    """Two grouped cases the lab's spec and torch's quantization kernels answer differently: one holding
    +inf, -inf and huge finite values (they saturate to qmax / qmin; torch's per-channel kernels send them
    to the wrong end), one in bfloat16 (computed in bfloat16; torch's kernels compute in float32)."""
    shape = cases.shape_2d(rng)
    bf16_shape = (8, 64)  # large enough that bfloat16 and float32 arithmetic round some elements apart
    return [qspec(rng, shape, cases.grouped_block(rng, shape), extreme=True),
            qspec(rng, bf16_shape, cases.grouped_block(rng, bf16_shape), qrange=(-128, 127), kind="wide", bf16=True)]


def qspec(rng, shape, block, qrange=None, kind=None, bf16=False, special=False, extreme=False):
    qmin, qmax = qrange or cases.RANGES[int(rng.integers(len(cases.RANGES)))]
    x = cases.values(rng, shape, kind)
    if special:
        x = cases.with_special_blocks(rng, x, block)
    scale, _, zp = oracle.choose(x, block, qmin, qmax, bool(rng.integers(2)), bf16=bf16)
    if extreme:
        flat = x.reshape(-1)
        where = rng.choice(flat.size, size=min(4, flat.size), replace=False)
        flat[where] = np.array([np.inf, -np.inf, 3e30, -7e29], np.float32)[:len(where)]
    if rng.integers(3) == 0:  # qparams from a narrower calibration: some values saturate
        scale = (scale * np.float32(rng.uniform(0.3, 0.9))).astype(np.float32)
    return dict(x=x, block_size=list(block), scale=scale, zero_point=zp, qmin=qmin, qmax=qmax,
                dtype=cases.RANGE_DTYPE[(qmin, qmax)], bf16=bf16)


def test_small_per_channel(student, grading_seed):
    run_quantize(student, extremes(np.random.default_rng((grading_seed, 1))))
    x = np.array([[0.25, 0.75, 1.25, -0.25], [3.0, -3.0, 0.1, 100.0]], np.float32)
    s = np.array([[0.5], [0.05]], np.float32)
    z = np.array([[0], [3]], np.int32)
    run_quantize(student, [dict(x=x, block_size=[1, 4], scale=s, zero_point=z, qmin=-128, qmax=127, dtype="int8"),
                           dict(x=x, block_size=[1, 2], scale=np.repeat(s, 2, 1), zero_point=np.repeat(z, 2, 1),
                                qmin=-8, qmax=7, dtype="int8")], show=True)


@pytest.mark.weight(4)
@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated(student, seed):
    rng = np.random.default_rng(seed)
    specs = []
    for _ in range(5):
        shape = cases.shape_2d(rng) if rng.integers(2) else cases.shape_3d(rng)
        specs.append(qspec(rng, shape, cases.grouped_block(rng, shape), special=bool(rng.integers(2))))
    shape = cases.shape_2d(rng)
    specs.append(qspec(rng, shape, (1, shape[1])))
    run_quantize(student, specs + extremes(rng))


@pytest.mark.weight(3)
@settings(max_examples=5)
@given(seed=st.integers(0, 2**32 - 1))
def test_ties_round_half_to_even(student, seed):
    rng = np.random.default_rng(seed)
    specs = []
    for qmin, qmax in [(-128, 127), (0, 255), (-8, 7)]:
        shape = cases.shape_2d(rng)
        block = cases.grouped_block(rng, shape)
        x, scale, zp = cases.tie_case(rng, shape, block, qmin, qmax)
        specs.append(dict(x=x, block_size=list(block), scale=scale, zero_point=zp, qmin=qmin, qmax=qmax,
                          dtype=cases.RANGE_DTYPE[(qmin, qmax)]))
    run_quantize(student, specs, what_extra=", every value exactly half-way between two steps (round half to even)")
    run_quantize(student, extremes(rng))


@pytest.mark.weight(2)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**32 - 1))
def test_multiplies_by_the_reciprocal(student, seed):
    rng = np.random.default_rng(seed)
    xs, ss = cases.reciprocal_case(rng, 16)
    x = xs.reshape(4, 4)
    scale = ss.reshape(4, 4)  # every element its own block
    zp = np.zeros((4, 4), np.int32)
    x3 = np.repeat(xs.reshape(4, 1, 4), 2, axis=1)
    specs = [dict(x=x, block_size=[1, 1], scale=scale, zero_point=zp, qmin=-128, qmax=127, dtype="int8"),
             dict(x=x3, block_size=[1, 2, 1], scale=scale, zero_point=zp, qmin=-128, qmax=127, dtype="int8")]
    run_quantize(student, specs, what_extra=(", on values where x * (1.0 / scale) and x / scale round apart "
                                             "(compute 1.0 / scale, then multiply)"))
    run_quantize(student, extremes(rng))


@pytest.mark.weight(2)
def test_saturation_and_infinities(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 3))
    x = cases.values(rng, (4, 8)) * 100
    x[0, :3] = [np.inf, -np.inf, 1e30]
    scale = np.full((4, 2), 0.01, np.float32)
    zp = np.array([[0, 5], [-3, 0], [0, 0], [7, -8]], np.int32)
    specs = [dict(x=x, block_size=[1, 4], scale=scale, zero_point=zp, qmin=-128, qmax=127, dtype="int8"),
             dict(x=x, block_size=[1, 4], scale=scale, zero_point=zp, qmin=-8, qmax=7, dtype="int8"),
             dict(x=x, block_size=[1, 4], scale=scale, zero_point=zp + 8, qmin=0, qmax=15, dtype="uint8")]
    run_quantize(student, specs + extremes(rng), what_extra=" (with +inf, -inf and values far outside the range)")
    nan = x.copy()
    nan[2, 5] = np.nan
    got = student.run("lab08.scenarios:quantize", [dict(specs[0], x=nan)])
    oracle.expect_error(replies.list_of(got, "quantize's results", 1)[0], "ValueError", "quantize of a tensor holding a NaN")


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_dequantize(student, seed):
    rng = np.random.default_rng(seed)
    specs = []
    for _ in range(5):
        shape = cases.shape_2d(rng) if rng.integers(2) else cases.shape_3d(rng)
        block = cases.grouped_block(rng, shape)
        qmin, qmax = cases.RANGES[int(rng.integers(len(cases.RANGES)))]
        grid = oracle.grid(shape, block)
        q = rng.integers(qmin, qmax + 1, size=shape).astype(cases.RANGE_DTYPE[(qmin, qmax)])
        scale = (np.abs(rng.standard_normal(grid)) * 10.0 ** rng.integers(-4, 2, size=grid) + 1e-7).astype(np.float32)
        zp = rng.integers(qmin, qmax + 1, size=grid).astype(np.int32)
        specs.append(dict(q=q, block_size=list(block), scale=scale, zero_point=zp))
    run_dequantize(student, specs)
    run_quantize(student, extremes(rng))


@pytest.mark.weight(2)
def test_bfloat16_input(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 17))
    specs = [qspec(rng, shape, block, qrange=r, bf16=True)
             for shape, block in [((4, 32), (1, 8)), ((2, 4, 8), (2, 2, 4))] for r in [(-128, 127), (0, 255), (-8, 7)]]
    run_quantize(student, specs, what_extra=" (scale in bfloat16 too: compute in the input's dtype)")
    back = [dict(q=oracle.quantize(**s), block_size=s["block_size"], scale=s["scale"], zero_point=s["zero_point"], bf16=True)
            for s in specs]
    run_dequantize(student, back)


def test_roundtrip_and_errors(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 19))
    good = qspec(rng, (4, 8), (2, 4), qrange=(-128, 127))
    run_quantize(student, [good] + extremes(rng))
    bad = [dict(good, block_size=[4]), dict(good, block_size=[1, 3])]
    got = replies.list_of(student.run("lab08.scenarios:quantize", bad), "quantize's results", 2)
    oracle.expect_error(got[0], "ValueError", "quantize with a block_size with too few entries")
    oracle.expect_error(got[1], "ValueError", "quantize with a block size that does not divide")
    q = oracle.quantize(**good)
    dspec = dict(q=q, block_size=[2, 4], scale=good["scale"], zero_point=good["zero_point"])
    run_dequantize(student, [dspec])
    got = replies.list_of(student.run("lab08.scenarios:dequantize", [dict(dspec, block_size=[1, 3])]), "dequantize's results", 1)
    oracle.expect_error(got[0], "ValueError", "dequantize with a block size that does not divide")
