# IPT-CANARY lab08 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab08's reference solution against torchao and PyTorch 2.13 (P0).

Each example draws one function and one input class of catalogue.toml (0-d to 3-d tensors, every
granularity, int8/uint8/int4/int16/odd ranges, bfloat16, constant and all-zero blocks, ties,
saturation, long integer rows, empty tensors) and compares the reference with: torchao's
choose_qparams_affine / quantize_affine / dequantize_affine; torch.fake_quantize_per_channel_affine
(forward and backward); torch._int_mm; the deprecated torch.ao.quantization observers (min-max,
moving average, per channel); float F.linear (the int8 layer within an output step once clamped,
the int4 layer within float rounding); and torchao's PT2E flow with min-max observers (the PTQ pass).

    run(60)    # CI: a few seconds          run(3000)   # make fuzz
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from autograder.labs.lab08 import cases, oracle


@functools.lru_cache(maxsize=1)
def reference():
    from autograder.engine.variants import reference_module
    return reference_module("lab08")


def _shape_and_block(rng):
    ndim = int(rng.integers(0, 4))
    shape = tuple(int(rng.choice([1, 2, 3, 4, 6, 8, 16])) for _ in range(ndim))
    block = tuple(int(rng.choice(cases.divisors(n))) for n in shape)
    if block and all(b == 1 for b in block):
        block = shape  # torchao reduces over everything when no dimension is blocked (its quirk, not ours)
    return shape, block


def _qparams(ref, rng):
    shape, block = _shape_and_block(rng)
    qmin, qmax = cases.RANGES[int(rng.integers(len(cases.RANGES)))]
    x = cases.values(rng, shape) if shape else np.asarray(rng.standard_normal(), np.float32)
    if shape and rng.random() < 0.3:
        x = cases.with_special_blocks(rng, x, block)
    sym, bf16 = bool(rng.integers(2)), bool(rng.random() < 0.25)
    eps = None if rng.random() < 0.7 else float(rng.choice([1e-5, 0.01]))
    t = torch.from_numpy(np.array(x, copy=True))
    t = t.to(torch.bfloat16) if bf16 else t
    scale, zp = ref.choose_qparams(t, block, qmin, qmax, sym, **({} if eps is None else {"eps": eps}))
    want_s, dtype, want_z = oracle.choose(x, block, qmin, qmax, sym, eps=eps, bf16=bf16)
    what = f"choose_qparams {shape} block {block} [{qmin}, {qmax}] sym={sym} bf16={bf16}"
    assert str(scale.dtype) == f"torch.{dtype}", what
    assert np.array_equal(scale.to(torch.float32).numpy(), want_s) and np.array_equal(zp.numpy(), want_z), what
    q = ref.quantize(t, block, scale, zp, qmin, qmax, torch.int32)
    assert np.array_equal(q.numpy(), oracle.quantize(x, block, scale.to(torch.float32).numpy(), zp.numpy(), qmin, qmax,
                                                     "int32", bf16=bf16)), f"quantize after {what}"
    d = ref.dequantize(q, block, scale, zp)
    want_d = oracle.dequantize(q.numpy(), block, scale.to(torch.float32).numpy(), zp.numpy(), bf16=bf16)
    assert d.dtype == torch.float32 and np.array_equal(d.numpy(), want_d), f"dequantize after {what}"


def _fake_quant(ref, rng):
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 9)))
    axis = int(rng.integers(2))
    qmin, qmax = cases.RANGES[int(rng.integers(5))]
    x = cases.values(rng, shape)
    block = (1, shape[1]) if axis == 0 else (shape[0], 1)
    scale, _, zp = oracle.choose(x, block, qmin, qmax, bool(rng.integers(2)))
    scale = (scale * np.float32(rng.uniform(0.3, 1.0))).astype(np.float32)
    g = cases.values(rng, shape, "normal")
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y = ref.fake_quantize(xt, block, torch.from_numpy(scale), torch.from_numpy(zp), qmin, qmax)
    y.backward(torch.from_numpy(g))
    x2 = torch.from_numpy(x.copy()).requires_grad_(True)
    want = torch.fake_quantize_per_channel_affine(x2, torch.from_numpy(scale.reshape(-1).copy()),
                                                  torch.from_numpy(zp.reshape(-1).copy()), axis, qmin, qmax)
    want.backward(torch.from_numpy(g))
    what = f"fake_quantize {shape} axis {axis} [{qmin}, {qmax}]"
    assert torch.equal(y.detach(), want.detach()), f"{what}: forward"
    assert torch.equal(xt.grad, x2.grad), f"{what}: gradient"


def _int_matmul(ref, rng):
    m, k, n = int(rng.choice([17, 24, 32])), int(rng.choice([8, 16, 64, 512])), int(rng.choice([8, 16]))
    a = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
    b = rng.integers(-128, 128, size=(k, n)).astype(np.int8)
    got = ref.int_matmul(torch.from_numpy(a), torch.from_numpy(b))
    want = torch._int_mm(torch.from_numpy(a), torch.from_numpy(b))
    assert got.dtype == torch.int32 and torch.equal(got, want), f"int_matmul {a.shape} {b.shape} vs torch._int_mm"


def _int8_linear(ref, rng):
    m, k, n = int(rng.integers(1, 6)), int(rng.integers(1, 64)), int(rng.integers(1, 9))
    x = np.abs(rng.standard_normal((m, k))).astype(np.float32)  # an all-zero x has scale eps: its bias overflows int32
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if rng.integers(2) else None
    t = torch.from_numpy
    xs, xz = ref.choose_qparams(t(x), (m, k), 0, 255, False)
    ws, wz = ref.choose_qparams(t(w), (1, k), -128, 127, True)
    f = F.linear(t(x), t(w), None if b is None else t(b))
    os_, oz = ref.choose_qparams(f, tuple(f.shape), -128, 127, False)
    xq, wq = ref.quantize(t(x), (m, k), xs, xz, 0, 255, torch.uint8), ref.quantize(t(w), (1, k), ws, wz, -128, 127)
    out = ref.int8_linear(xq, xs.reshape(()), int(xz), wq, ws.reshape(-1), None if b is None else t(b), os_.reshape(()),
                          int(oz))
    # the float layer on the dequantized operands, clamped to the output range, within one output step
    fq = F.linear(ref.dequantize(xq, (m, k), xs, xz), ref.dequantize(wq, (1, k), ws, wz), None if b is None else t(b))
    fq = torch.clamp(fq, (-128 - oz) * os_, (127 - oz) * os_)
    steps = ((ref.dequantize(out, tuple(f.shape), os_, oz) - fq).abs() / os_).max().item()
    assert steps <= 1.01, f"int8_linear {m}x{k}x{n}: {steps:.2f} output steps from the float layer"
    exact = oracle.int8_linear(xq.numpy(), xs.reshape(()).numpy(), int(xz), wq.numpy(), ws.reshape(-1).numpy(), b,
                               os_.reshape(()).numpy(), int(oz))
    assert np.array_equal(out.numpy(), exact), "int8_linear vs the spec oracle"


def _int4(ref, rng):
    n, groups, g = int(rng.integers(1, 9)), int(rng.integers(1, 4)), int(rng.choice([32, 64, 128]))
    k = groups * g
    w = rng.standard_normal((n, k)).astype(np.float32)
    scale, _, zp = oracle.choose(w, (1, g), -8, 7, bool(rng.integers(2)))
    q = oracle.quantize(w, (1, g), scale, zp, -8, 7, "int8")
    packed = ref.pack_int4(torch.from_numpy(q))
    assert np.array_equal(packed.numpy(), oracle.pack_int4(q)), "pack_int4 vs numpy"
    assert np.array_equal(ref.unpack_int4(packed).numpy(), q), "unpack_int4(pack_int4(q)) != q"
    x = rng.standard_normal((3, k)).astype(np.float32)
    got = ref.int4_linear(torch.from_numpy(x), packed, torch.from_numpy(scale), torch.from_numpy(zp), g).numpy()
    want = oracle.int4_linear(x, oracle.pack_int4(q), scale, zp, g)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4), "int4_linear vs torchao's dequantized weight"


def _observers(ref, rng):
    from torch.ao.quantization import observer as ao_obs
    shape = (int(rng.integers(1, 4)), int(rng.integers(2, 6)))
    avg = None if rng.integers(2) else float(rng.choice([0.01, 0.1, 0.5]))
    per_channel = bool(rng.integers(2))
    if per_channel:
        cls = ao_obs.PerChannelMinMaxObserver if avg is None else ao_obs.MovingAveragePerChannelMinMaxObserver
        kw = dict(ch_axis=1)
    else:
        cls = ao_obs.MinMaxObserver if avg is None else ao_obs.MovingAverageMinMaxObserver
        kw = {}
    if avg is not None:
        kw["averaging_constant"] = avg
    theirs = cls(dtype=torch.quint8, qscheme=torch.per_channel_affine if per_channel else torch.per_tensor_affine, **kw)
    mine = ref.MinMaxObserver(0, 255, False, axis=1 if per_channel else None, averaging_constant=avg)
    for _ in range(int(rng.integers(1, 5))):
        x = torch.from_numpy(cases.values(rng, (int(rng.integers(1, 4)), shape[1])))
        theirs(x)
        mine(x)
    what = f"MinMaxObserver per_channel={per_channel} avg={avg} vs torch.ao"
    assert torch.equal(mine.min_val.reshape(-1), theirs.min_val.reshape(-1)), f"{what}: min_val"
    assert torch.equal(mine.max_val.reshape(-1), theirs.max_val.reshape(-1)), f"{what}: max_val"
    s, z = mine.calculate_qparams()
    ts, tz = theirs.calculate_qparams()
    assert torch.equal(s.reshape(-1), ts.reshape(-1).to(torch.float32)), f"{what}: scale"
    assert torch.equal(z.reshape(-1).to(torch.int64), tz.reshape(-1).to(torch.int64)), f"{what}: zero point"


def _ptq(ref, rng):
    """The reference's passes against the spec oracle and torchao's PT2E (which agree on Linear-only graphs: the
    graders compare a learner with the spec, and with PT2E itself only on the digits MLP; test_ptq.py)."""
    from autograder.labs.lab08 import scenarios
    kind = ["chain", "residual", "shared"][int(rng.integers(3))]
    dims = {"chain": [int(rng.integers(2, 17)) for _ in range(int(rng.integers(2, 6)))],
            "residual": [int(rng.integers(2, 10)), int(rng.integers(2, 10)), int(rng.integers(1, 5))],
            "shared": [int(rng.integers(2, 8)), int(rng.integers(1, 5))]}[kind]
    arch = dict(kind=kind, dims=dims)
    torch.manual_seed(int(rng.integers(2**31)))
    scale = np.float32(rng.uniform(0.5, 2.0))   # as the graders' random_state
    state = {k: (v.detach().numpy() * scale).astype(np.float32) for k, v in scenarios.build_model(arch).state_dict().items()}
    lead = (int(rng.integers(1, 4)),) if kind == "chain" and rng.integers(3) == 0 else ()   # 3-d inputs too
    kind = ["normal", "positive", "shifted"][int(rng.integers(3))]   # the graders' batches: scaled, some all positive
    calib = [cases.values(rng, lead + (int(rng.integers(1, 6)), dims[0]), kind) for _ in range(int(rng.integers(1, 4)))]
    test = cases.values(rng, lead + (int(rng.integers(1, 6)), dims[0]), kind)
    got = scenarios.ptq(ref, arch, state, calib, test)["converted"]["values"]
    spec, _, _ = oracle.ptq_expected(arch, state, calib, test)
    theirs = oracle.ptq_pt2e(arch, state, calib, test)
    assert np.array_equal(got, spec), f"ptq {arch}: reference vs spec"
    assert np.allclose(spec, theirs, rtol=1e-5, atol=1e-5), f"ptq {arch}: spec vs torchao PT2E, {np.abs(spec - theirs).max()}"


CHECKS = [_qparams, _qparams, _fake_quant, _int_matmul, _int8_linear, _int4, _observers, _ptq]


def run(examples: int) -> int:
    ref = reference()
    rng = np.random.default_rng(2026)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(examples):
            CHECKS[i % len(CHECKS)](ref, rng)
    return examples


if __name__ == "__main__":
    import sys

    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 60), "cases agree")
