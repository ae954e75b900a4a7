# IPT-CANARY lab08 test_int4.py: hidden grading text, never shown to learners
"""Part `int4`: the packed layout (low nibble first, two's complement) and the group-wise int4
weight-only linear.

Trust: values only, against P0's own packing (arithmetic on int64, independent of the reference)
and torchao's dequantize_affine.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import cases, oracle


def nibbles(rng, shape):
    return rng.integers(-8, 8, size=shape).astype(np.int8)


LAYOUT = {"pack": ("pack_int4", "q", "an int8", oracle.pack_int4, "uint8"),
          "unpack": ("unpack_int4", "p", "a uint8", oracle.unpack_int4, "int8")}


def run_layout(student, which, arrays, show=False):
    name, arg, kind, want, dtype = LAYOUT[which]
    got = replies.list_of(student.run(f"lab08.scenarios:{which}", [{arg: a} for a in arrays]), f"{name}'s results",
                          len(arrays))
    for a, reply in zip(arrays, got, strict=True):
        what = f"{name} of {kind} {list(a.shape)} tensor"
        reply = oracle.case_reply(reply, {"out"}, what)
        oracle.exact(reply["out"], want(a), what, dtype=dtype, show=show)


def run_pack(student, qs, show=False):
    run_layout(student, "pack", qs, show)


def run_unpack(student, ps, show=False):
    run_layout(student, "unpack", ps, show)


def test_small(student, grading_seed):
    run_pack(student, [np.array([-1, 2, 7, -8, 0, 1], np.int8)], show=True)
    run_unpack(student, [np.array([0x2F, 0x87, 0x10], np.uint8)], show=True)
    rng = np.random.default_rng((grading_seed, 1))
    run_pack(student, [nibbles(rng, (3, 10))])
    run_unpack(student, [rng.integers(0, 256, size=(2, 7)).astype(np.uint8)])


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_pack_generated(student, seed):
    rng = np.random.default_rng(seed)
    run_pack(student, [nibbles(rng, (int(rng.integers(1, 5)), 2 * int(rng.integers(1, 9)))),
                       nibbles(rng, (2, 3, 2 * int(rng.integers(1, 5)))), nibbles(rng, (0, 4)), nibbles(rng, (16,))])


@pytest.mark.weight(3)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_unpack_generated(student, seed):
    rng = np.random.default_rng(seed)
    run_unpack(student, [rng.integers(0, 256, size=s).astype(np.uint8)
                         for s in [(int(rng.integers(1, 5)), int(rng.integers(1, 9))), (2, 2, 3), (0, 2), (7,)]])


def test_pack_errors(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 47))
    bad = [np.array([1, 2, 3], np.int8), np.array([[8, 0]], np.int8), np.array([[0, -9]], np.int8)]
    got = replies.list_of(student.run("lab08.scenarios:pack", [dict(q=q) for q in bad]), "pack_int4's results", 3)
    for q, reply, why in zip(bad, got, ["an odd last dimension", "a value of 8", "a value of -9"], strict=True):
        oracle.expect_error(reply, "ValueError", f"pack_int4 of a tensor with {why}")
    run_pack(student, [nibbles(rng, (3, 4))])


def linear_case(rng, m, n, k, group, bias=False, symmetric=False):
    w = cases.values(rng, (n, k), "normal")
    scale, _, zp = oracle.choose(w, (1, group), -8, 7, symmetric)
    q = oracle.quantize(w, (1, group), scale, zp, -8, 7, "int8")
    return dict(x=cases.values(rng, (m, k), "normal"), packed=oracle.pack_int4(q), scale=scale, zero_point=zp,
                group_size=group, bias=cases.values(rng, (n,), "normal") if bias else None)


@pytest.mark.weight(4)
@settings(max_examples=5)
@given(seed=st.integers(0, 2**32 - 1))
def test_int4_linear(student, seed):
    rng = np.random.default_rng(seed)
    specs = [linear_case(rng, int(rng.integers(1, 5)), int(rng.integers(1, 9)), k, g, bias=bool(rng.integers(2)),
                         symmetric=bool(rng.integers(2)))
             for k, g in [(64, 32), (128, 64), (256, 128), (96, 32)]]
    specs.append(linear_case(rng, 2, 64, 64, 32))  # as many rows as a multiple of the group: groups run along K
    got = replies.list_of(student.run("lab08.scenarios:int4_linear", specs), "int4_linear's results", len(specs))
    for s, reply in zip(specs, got, strict=True):
        want = oracle.int4_linear(**s)
        what = (f"int4_linear with x {list(s['x'].shape)}, an int4 weight {[s['packed'].shape[0], 2 * s['packed'].shape[1]]} "
                f"in groups of {s['group_size']}, bias {'None' if s['bias'] is None else 'given'}")
        reply = oracle.case_reply(reply, {"out"}, what)
        values, _ = oracle.tensor(reply["out"], what, want.shape, "float32")
        err = np.abs(values.astype(np.float64) - want)
        assert np.all(err <= 1e-4 * (1 + np.abs(want))), f"{what}: differs from the expected result by up to {err.max():.3g}"
