# IPT-CANARY lab08 test_fake_quant.py: hidden grading text, never shown to learners
"""Part `fake_quant`: FakeQuantize's forward and straight-through gradient.

Trust: values only. Per tensor and per channel the oracle is torch's own fake_quantize_per_channel_affine
(forward and backward); every test also has group or 3-d blocks, which torch's kernel cannot express,
checked against torchao's quantize/dequantize and the spec's mask computed here.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab08 import cases, oracle


def run(student, specs, show=False, extra=""):
    got = replies.list_of(student.run("lab08.scenarios:fake_quant", specs), "fake_quantize's results", len(specs))
    for s, reply in zip(specs, got, strict=True):
        x = np.asarray(s["x"])
        what = (f"fake_quantize of a {list(x.shape)} tensor with block_size {tuple(s['block_size'])} in "
                f"[{s['qmin']}, {s['qmax']}]{extra}")
        want_out, want_grad = oracle.fake_quant(**s)
        reply = oracle.case_reply(reply, {"out", "grad"}, what)
        oracle.exact(reply["out"], want_out, f"{what}: the output", dtype="float32", show=show)
        grad, _ = oracle.tensor(reply["grad"], f"{what}: the gradient of x", want_grad.shape, "float32")
        if not np.array_equal(grad, want_grad):
            blocked = int(((want_grad == 0) & (grad != 0)).sum())
            passed = int(((want_grad != 0) & (grad == 0)).sum())
            raise AssertionError(f"{what}: the gradient of x differs from the straight-through estimator's "
                                 f"({blocked} clamped values got a gradient, {passed} in-range values got none, "
                                 f"{int((grad != want_grad).sum())} differ in all)")


def spec(rng, shape, block, saturate=True, extreme=True):
    """With `extreme`, x also holds +inf, -inf and huge finite values (they saturate, with no gradient;
    torch's per-channel kernel sends them to the wrong end of the range)."""
    qmin, qmax = cases.RANGES[int(rng.integers(len(cases.RANGES) - 2))]
    x = cases.values(rng, shape)
    scale, _, zp = oracle.choose(x, block, qmin, qmax, bool(rng.integers(2)))
    if extreme:
        flat = x.reshape(-1)
        where = rng.choice(flat.size, size=min(3, flat.size), replace=False)
        flat[where] = np.array([np.inf, -3e30, 2e29], np.float32)[:len(where)]
    if saturate:
        scale = (scale * np.float32(rng.uniform(0.4, 0.9))).astype(np.float32)
    return dict(x=x, block_size=list(block), scale=scale, zero_point=zp, qmin=qmin, qmax=qmax,
                gout=cases.values(rng, shape, "normal"))


def grouped(rng):
    shape = cases.shape_2d(rng)
    return spec(rng, shape, cases.grouped_block(rng, shape))


def test_small_int4(student, grading_seed):
    run(student, [grouped(np.random.default_rng((grading_seed, 1)))])
    x = np.array([[-9.0, -8.4, -8.6, 0.3, 6.9, 7.4, 7.6, 7.5]], np.float32)
    s = dict(x=x, block_size=[1, 8], scale=np.ones((1, 1), np.float32), zero_point=np.zeros((1, 1), np.int32),
             qmin=-8, qmax=7, gout=np.arange(1, 9, dtype=np.float32).reshape(1, 8))
    run(student, [s, dict(s, block_size=[1, 4], scale=np.ones((1, 2), np.float32), zero_point=np.array([[0, -1]], np.int32))],
        show=True)


@pytest.mark.weight(4)
@settings(max_examples=6)
@given(seed=st.integers(0, 2**32 - 1))
def test_per_channel_and_groups(student, seed):
    rng = np.random.default_rng(seed)
    shape = cases.shape_2d(rng)
    specs = [spec(rng, shape, (1, shape[1])), spec(rng, shape, shape), spec(rng, shape, (shape[0], 1))]
    for _ in range(3):
        shape = cases.shape_2d(rng) if rng.integers(2) else cases.shape_3d(rng)
        specs.append(spec(rng, shape, cases.grouped_block(rng, shape)))
    run(student, specs)


@pytest.mark.weight(3)
@settings(max_examples=4)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_mask_at_the_range_ends(student, seed):
    """Values whose rounded step lands exactly on qmin / qmax keep their gradient; one step out loses it."""
    rng = np.random.default_rng(seed)
    specs = []
    for qmin, qmax in [(-128, 127), (0, 255), (-8, 7)]:
        shape = (4, 8)
        block = (1, 4)
        scale = (2.0 ** rng.integers(-4, 2, size=(4, 2))).astype(np.float32)
        zp = rng.integers(qmin, qmax + 1, size=(4, 2)).astype(np.int32)
        steps = rng.choice([qmin - 1, qmin, qmax, qmax + 1, qmin - 0.5, qmax + 0.5, qmax + 0.49, qmin - 0.51], size=shape)
        full_s, full_z = np.repeat(scale, 4, 1), np.repeat(zp, 4, 1)
        x = ((steps - full_z) * full_s).astype(np.float32)
        specs.append(dict(x=x, block_size=list(block), scale=scale, zero_point=zp, qmin=qmin, qmax=qmax,
                          gout=cases.values(rng, shape, "normal")))
    run(student, specs, extra=", values at and just beyond the ends of the range")
    run(student, [grouped(rng)])


@pytest.mark.weight(2)
def test_qat_steps(student, grading_seed):
    """A few SGD steps through fake_quantize: the STE gradient is what moves the weights."""
    rng = np.random.default_rng((grading_seed, 31))
    x, w = cases.values(rng, (16, 8), "normal"), cases.values(rng, (4, 8), "normal")
    target = cases.values(rng, (16, 4), "normal")
    scale, _, zp = oracle.choose(w, (1, 8), -8, 7, True)
    scale = (scale * np.float32(0.6)).astype(np.float32)  # some weights saturate: they must not move
    got = student.run("lab08.scenarios:fake_quant_step", x, w, scale, zp, -8, 7, target, 0.05, 5)
    want = _qat_reference(x, w, scale, zp, target, 0.05, 5)
    what = "five SGD steps on an int4 per-channel fake-quantized weight"
    values, _ = oracle.tensor(got, f"{what}: the weights after", want.shape, "float32")
    assert np.allclose(values, want, rtol=1e-5, atol=1e-6), \
        f"{what}: the weights after differ from the straight-through estimator's training by up to {np.abs(values - want).max():.3g}"
    run(student, [spec(rng, (4, 8), (2, 4))])


def _qat_reference(x, w, scale, zp, target, lr, steps):
    import torch
    wt = torch.from_numpy(w.copy()).requires_grad_(True)
    xt, tt = torch.from_numpy(x), torch.from_numpy(target)
    s, z = torch.from_numpy(scale.reshape(-1).copy()), torch.from_numpy(zp.reshape(-1).copy())
    for _ in range(steps):
        y = xt @ torch.fake_quantize_per_channel_affine(wt, s, z, 0, -8, 7).T
        loss = ((y - tt) ** 2).mean()
        grad, = torch.autograd.grad(loss, wt)
        with torch.no_grad():
            wt -= lr * grad
    return wt.detach().numpy()
