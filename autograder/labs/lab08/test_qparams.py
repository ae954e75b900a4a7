# IPT-CANARY lab08 test_qparams.py: hidden grading text, never shown to learners
"""Part `qparams`: qrange, qparams_from_minmax and choose_qparams, bit-exact against torchao.

Trust: values only. Every test that reaches choose_qparams mixes in block grids that torch's own
per-tensor / per-channel helpers (torch.ao observers, torch._choose_qparams_per_tensor) cannot
express, so delegating to them earns nothing; torchao itself is absent from the student process.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import cases, oracle


def run_choose(student, specs, show=False):
    """specs: dicts of x, block_size, qmin, qmax, symmetric[, eps, bf16]; compares each reply."""
    got = replies.list_of(student.run("lab08.scenarios:choose", specs), "choose_qparams's results", len(specs))
    for spec, reply in zip(specs, got, strict=True):
        x = np.asarray(spec["x"])
        what = (f"choose_qparams of a {'bfloat16' if spec.get('bf16') else 'float32'} tensor {list(x.shape)} with block_size "
                f"{tuple(spec['block_size'])}, range [{spec['qmin']}, {spec['qmax']}], "
                f"{'symmetric' if spec['symmetric'] else 'asymmetric'}" + (f", eps={spec['eps']}" if spec.get("eps") else ""))
        scale, dtype, zp = oracle.choose(**spec)
        reply = oracle.case_reply(reply, {"scale", "zero_point"}, what)
        oracle.exact(reply["scale"], scale, f"{what}: the scale", dtype=dtype, show=show)
        oracle.exact(reply["zero_point"], zp, f"{what}: the zero point", dtype="int32", show=show)


def spec(rng, shape, block, symmetric=None, qrange=None, kind=None, special=False, **extra):
    qmin, qmax = qrange or cases.RANGES[int(rng.integers(len(cases.RANGES)))]
    x = cases.values(rng, shape, kind)
    if special:
        x = cases.with_special_blocks(rng, x, block)
    sym = bool(rng.integers(2)) if symmetric is None else symmetric
    return dict(x=x, block_size=list(block), qmin=qmin, qmax=qmax, symmetric=sym, **extra)


def unsigned_symmetric(rng):
    """Grouped blocks with unsigned ranges mapped symmetrically: the zero point is (qmin + qmax + 1) / 2
    truncated (128 for uint8, 8 for uint4), where torch.ao's observers give (qmin + qmax) // 2."""
    specs = []
    for qrange in [(0, 255), (0, 15)]:
        shape = cases.shape_2d(rng)
        specs.append(spec(rng, shape, cases.grouped_block(rng, shape), symmetric=True, qrange=qrange))
    return specs


def test_small_weight_per_channel(student, grading_seed):
    run_choose(student, unsigned_symmetric(np.random.default_rng((grading_seed, 1))))
    w = np.array([[-1.0, 0.5, 3.0, 0.25], [0.1, 0.2, 0.3, 0.4], [-2.0, -1.0, -0.5, -0.25]], np.float32)
    run_choose(student, [dict(x=w, block_size=[1, 4], qmin=-128, qmax=127, symmetric=s) for s in (True, False)]
               + [dict(x=w, block_size=[1, 2], qmin=0, qmax=255, symmetric=False)], show=True)


def test_qrange(student, grading_seed):
    run_choose(student, unsigned_symmetric(np.random.default_rng((grading_seed, 2))))
    specs = [dict(bits=b, signed=s) for b in (1, 2, 4, 7, 8, 12, 16) for s in (True, False)]
    bad = [dict(bits=0, signed=True), dict(bits=17, signed=False)]
    got = replies.list_of(student.run("lab08.scenarios:qrange", specs + bad), "qrange's results", len(specs) + len(bad))
    for s, reply in zip(specs, got[:len(specs)], strict=True):
        b = s["bits"]
        want = [-(2 ** (b - 1)), 2 ** (b - 1) - 1] if s["signed"] else [0, 2 ** b - 1]
        what = f"qrange({b}, signed={s['signed']})"
        reply = oracle.case_reply(reply, {"value"}, what)
        assert reply["value"] == want, f"{what} should be {tuple(want)}, got {reply['value']}"
    for s, reply in zip(bad, got[len(specs):], strict=True):
        oracle.expect_error(reply, "ValueError", f"qrange({s['bits']}, signed={s['signed']})")


@pytest.mark.weight(2)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_from_minmax(student, seed):
    rng = np.random.default_rng(seed)
    specs, wants = [], []
    for qmin, qmax in cases.RANGES:
        for symmetric in (True, False):
            n = 12
            lo = cases.values(rng, (n,))
            hi = lo + np.abs(cases.values(rng, (n,)))
            lo[:4] = [0.0, 0.5, -2.0, 1.5]
            hi[:4] = [0.0, 0.5, -0.25, 3.0]  # all zero, constant positive, all negative, all positive
            eps = float(rng.choice([oracle.EPS, 1e-3, 0.05]))
            specs.append(dict(min_val=lo.astype(np.float32), max_val=hi.astype(np.float32), qmin=qmin, qmax=qmax,
                              symmetric=symmetric, eps=eps))
            wants.append(oracle.qparams_from_minmax(lo, hi, qmin, qmax, symmetric, eps))
    got = replies.list_of(student.run("lab08.scenarios:from_minmax", specs), "qparams_from_minmax's results", len(specs))
    for s, (scale, zp), reply in zip(specs, wants, got, strict=True):
        what = (f"qparams_from_minmax on 12 ranges (among them an all-zero, a constant positive, an all-negative one), "
                f"[{s['qmin']}, {s['qmax']}], {'symmetric' if s['symmetric'] else 'asymmetric'}, eps={s['eps']:.3g}")
        reply = oracle.case_reply(reply, {"scale", "zero_point"}, what)
        oracle.exact(reply["scale"], scale, f"{what}: the scale", dtype="float32")
        oracle.exact(reply["zero_point"], zp, f"{what}: the zero point", dtype="int32")


@pytest.mark.weight(4)
@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_2d(student, seed):
    rng = np.random.default_rng(seed)
    specs = unsigned_symmetric(rng)
    for _ in range(6):
        shape = cases.shape_2d(rng)
        block = cases.grouped_block(rng, shape)
        specs.append(spec(rng, shape, block, special=bool(rng.integers(2))))
    shape = cases.shape_2d(rng)
    specs.append(spec(rng, shape, (1, shape[1])))       # per channel
    specs.append(spec(rng, shape, shape))               # per tensor
    run_choose(student, specs)


@pytest.mark.weight(3)
@settings(max_examples=5)
@given(seed=st.integers(0, 2**32 - 1))
def test_3d_blocks(student, seed):
    rng = np.random.default_rng(seed)
    specs = unsigned_symmetric(rng)
    for _ in range(5):
        shape = cases.shape_3d(rng)
        specs.append(spec(rng, shape, cases.grouped_block(rng, shape), special=True))
    specs.append(spec(rng, (4,), (1,)))  # every element its own block
    specs.append(spec(rng, (2, 3, 4), (1, 1, 1)))
    run_choose(student, specs)


@pytest.mark.weight(2)
def test_constant_zero_and_one_sided_blocks(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 5))
    x = np.zeros((4, 16), np.float32)
    x[1] = 1.25                       # constant positive row
    x[2] = -np.abs(cases.values(rng, (16,)))  # all negative
    x[3] = np.abs(cases.values(rng, (16,)))   # all positive
    specs = [dict(x=x, block_size=[1, 16], qmin=q[0], qmax=q[1], symmetric=s)
             for q in [(-128, 127), (0, 255), (-8, 7)] for s in (True, False)]
    specs.append(dict(x=x, block_size=[2, 4], qmin=0, qmax=15, symmetric=False))
    run_choose(student, specs + unsigned_symmetric(rng))


@pytest.mark.weight(2)
def test_bfloat16_keeps_its_dtype(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 7))
    specs = []
    for shape, block in [((4, 32), (1, 32)), ((4, 32), (1, 8)), ((2, 4, 8), (1, 2, 4))]:
        x = cases.values(rng, shape)
        x = x.astype(np.float32)  # the scenario turns it into bfloat16 in the student process
        for s in (True, False):
            specs.append(dict(x=x, block_size=list(block), qmin=-128, qmax=127, symmetric=s, bf16=True))
    run_choose(student, specs + unsigned_symmetric(rng))


def test_eps_floors_the_scale(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 11))
    x = cases.values(rng, (3, 16), "tiny")
    x[0] = 0.0
    run_choose(student, [dict(x=x, block_size=[1, 16], qmin=-128, qmax=127, symmetric=s, eps=e)
                         for s in (True, False) for e in (1e-4, 0.5)]
               + [dict(x=x, block_size=[1, 8], qmin=0, qmax=255, symmetric=False)] + unsigned_symmetric(rng))


def test_errors(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 13))
    x = cases.values(rng, (4, 8))
    nan, inf = x.copy(), x.copy()
    nan[1, 2], inf[3, 0] = np.nan, -np.inf
    bad = [("a block_size with too few entries", dict(x=x, block_size=[8])),
           ("a block size that does not divide", dict(x=x, block_size=[1, 3])),
           ("a block size of 0", dict(x=x, block_size=[0, 8])),
           ("an empty tensor", dict(x=np.zeros((0, 8), np.float32), block_size=[1, 8])),
           ("a NaN", dict(x=nan, block_size=[1, 8])),
           ("an infinity", dict(x=inf, block_size=[1, 8]))]
    specs = [dict(s, qmin=-128, qmax=127, symmetric=False) for _, s in bad]
    good = [dict(x=x, block_size=[2, 4], qmin=-128, qmax=127, symmetric=False)]
    got = replies.list_of(student.run("lab08.scenarios:choose", specs), "choose_qparams's results", len(specs))
    for (what, _), reply in zip(bad, got, strict=True):
        oracle.expect_error(reply, "ValueError", f"choose_qparams with {what}")
    run_choose(student, good + unsigned_symmetric(rng))
