# IPT-CANARY lab08 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab08 (quantization), run against the reference solution in P0.

The cases are our own, written as data and small functions. They are *modelled on* public test
suites written by others, and the oracle of each case is the real library (no code or prose of those
suites is copied; each group names the tests that gave the idea):

* torchao `test/quantization/test_quant_primitives.py` (`test_choose_qparams_tensor_asym/_sym`,
  `test_choose_qparams_token_asym`, `test_choose_qparams_group_sym`, `test_get_group_qparams_symmetric`,
  `test_get_groupwise_affine_qparams`, `test_quantize_dequantize_group_sym`, `..._channel_asym`,
  `..._tensor_asym`, `..._channel_asym_4d`, `..._4d_multi_dim_reduction`,
  `test_choose_qparams_tensor_asym_eps`, `test_quantize_activation_per_token_abs_max`, `test_raises`,
  `test_fake_quantize_affine`, `test_fake_quantize_affine_cachemask`): `choose_qparams`, `quantize`,
  `dequantize` and the fake-quant forward against `torchao.quantization.quant_primitives` and the PT2E
  `quantized_decomposed` ops, bit for bit;
* PyTorch `test/quantization/core/test_workflow_ops.py` (`test_forward_per_tensor`,
  `test_backward_per_tensor`, `_test_forward_per_tensor_cachemask_impl`, `test_forward_per_channel`,
  `test_backward_per_channel`, ...): `fake_quantize` forward and straight-through gradient against
  `torch.fake_quantize_per_tensor_affine` / `torch.fake_quantize_per_channel_affine`, at the clamping
  boundaries;
* PyTorch `test/quantization/core/test_workflow_module.py` (`test_per_tensor_observers`,
  `test_per_channel_observers`, `test_zero_numel`, `test_fq_module_per_channel`,
  `test_fq_serializable_per_channel`): `MinMaxObserver` against `torch.ao.quantization.observer`'s
  MinMax / MovingAverage / PerChannel / MovingAveragePerChannel observers (deprecated, still present)
  and torchao's `AffineQuantizedMinMaxObserver`s;
* PyTorch's quantized linear tests (`test/quantization/core/test_quantized_op.py`, `test_qlinear`) and
  `torch._int_mm`'s tests (`test/test_linalg.py`, `test__int_mm`): `int_matmul` against `torch._int_mm`,
  `int8_linear` against fbgemm's `quantized::linear`;
* torchao's int4 packing tests (`test/prototype/mx_formats/test_kernels.py::test_fp4_pack_unpack`,
  `test/dtypes/test_bitpacking.py`, the int4 weight-only tensor tests): `pack_int4` / `unpack_int4`
  against torchao's `pack_uint4` / `unpack_uint4`, `int4_linear` against `F.linear` on torchao's
  `dequantize_affine` and against ATen's `_weight_int4pack_mm_for_cpu`.

Where the lab's spec deliberately differs from a library, the case says so in a comment, compares
where they agree, and asserts the library's own different behaviour as a fact of torch 2.13 /
torchao 0.18 (so that a library change shows up here, not as a silent pass).

    run()   # -> number of cases; raises AssertionError listing every disagreement
"""
from __future__ import annotations

import functools
import warnings

import torch
import torch.nn.functional as F

from autograder.engine.peer_suite import Suite

SUITE = Suite("lab08")
CASES, case, reference = SUITE.cases, SUITE.case, SUITE.reference  # check(ref) raises on a disagreement
F32_EPS = torch.finfo(torch.float32).eps  # the lab's eps=None (torchao's own default is smallest_normal)
INT8, UINT8, INT4, UINT4, INT16 = (-128, 127), (0, 255), (-8, 7), (0, 15), (-32768, 32767)


@functools.lru_cache(maxsize=1)
def _ao():
    """torchao's primitives (imported lazily: the import prints warnings about CUDA extensions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization import quant_primitives as qp
    return qp


@functools.lru_cache(maxsize=1)
def _decomposed():
    """The PT2E `quantized_decomposed` ops (registered on import)."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401
    return torch.ops.quantized_decomposed


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(seed, *shape, scale=1.0, dtype=torch.float32):
    return (torch.randn(tuple(shape), generator=_gen(seed)) * scale).to(dtype)


def _data(kind, shape, seed, dtype=torch.float32):
    """Float test data of a few kinds (randn, ReLU-like, all negative, wide, with a zero row)."""
    x = _randn(seed, *shape)
    if kind == "relu":
        x = x.abs()
    elif kind == "neg":
        x = -x.abs() - 0.25
    elif kind == "wide":
        x = x * 1e3
    elif kind == "huge":
        x = x * 1e30
    elif kind == "tiny":
        x = x * 1e-30
    elif kind == "zero_row":
        x[1] = 0.0
    elif kind == "zeros":
        x = torch.zeros(shape)
    return x.to(dtype)


def _target(qmin, qmax):
    """The narrowest integer dtype whose torchao bounds hold [qmin, qmax] (torchao checks them)."""
    for dt in (torch.int8, torch.uint8, torch.int16, torch.int32):
        lo, hi = _ao()._DTYPE_TO_QVALUE_BOUNDS[dt]
        if lo <= qmin and qmax <= hi:
            return dt
    raise ValueError((qmin, qmax))


def _mapping(symmetric):
    qp = _ao()
    return qp.MappingType.SYMMETRIC if symmetric else qp.MappingType.ASYMMETRIC


def _ao_qparams(x, block, qrange, symmetric, eps=F32_EPS):
    """torchao's choose_qparams_affine with the lab's conventions: grid-shaped (keepdim=True), int32 zero
    points, and the eps passed explicitly (the lab's default is float32's eps, torchao's smallest_normal)."""
    return _ao().choose_qparams_affine(x, _mapping(symmetric), tuple(block), _target(*qrange), qrange[0], qrange[1],
                                       eps=eps, zero_point_dtype=torch.int32, keepdim=True)


def _exact(got, want, what):
    """Same shape, same dtype, same bits."""
    assert torch.is_tensor(got), f"{what}: got a {type(got).__name__}, not a tensor"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} vs library {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs library {want.dtype}"
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[:3].tolist()
        raise AssertionError(f"{what}: not bit-identical to the library, e.g. at {bad}: "
                             f"{[got[tuple(i)].item() for i in bad]} vs {[want[tuple(i)].item() for i in bad]}")


def _values(got, want, what, dtype=None):
    """Same number of elements and the same values (the library's shape or integer dtype differs from the lab's)."""
    got, want = got.reshape(-1), want.reshape(-1)
    if dtype is not None:
        got, want = got.to(dtype), want.to(dtype)
    assert got.numel() == want.numel(), f"{what}: {got.numel()} values vs library {want.numel()}"
    assert torch.equal(got, want), f"{what}: {got[:6].tolist()} vs library {want[:6].tolist()}"


def _close(got, want, what, rtol=1e-5, atol=1e-5):
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} vs library {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs library {want.dtype}"
    assert torch.allclose(got, want, rtol=rtol, atol=atol), f"{what}: differs by {(got - want).abs().max():.3g}"


def _raises(fn, exc, what):
    try:
        fn()
    except exc:
        return
    except Exception as e:  # noqa: BLE001 - the wrong error type is the disagreement
        raise AssertionError(f"{what}: raised {type(e).__name__} ({e}), expected {exc.__name__}") from None
    raise AssertionError(f"{what}: returned, expected {exc.__name__}")


def _library_rejects(fn):
    """True when the library call raises anything (used to state the library's side of a spec difference)."""
    try:
        fn()
    except Exception:  # noqa: BLE001
        return True
    return False


# =================================================================================================
# Part qparams: qrange, qparams_from_minmax, choose_qparams.
# Modelled on torchao test_quant_primitives.py: test_choose_qparams_tensor_asym / _tensor_sym (per
# tensor, also against quantized_decomposed.choose_qparams[_symmetric]), test_choose_qparams_token_asym
# (per token), test_choose_qparams_group_sym (groups of 2), test_get_group_qparams_symmetric (int4 per
# channel, checked there against PerChannelMinMaxObserver), test_get_groupwise_affine_qparams (uint4
# groups of 128), the 4-d channel / multi-dim-reduction tests, test_choose_qparams_tensor_asym_eps (an
# all-zero input floors the scale at eps), test_quantize_activation_per_token_abs_max (eps 1e-5 and
# the range -127..127) and test_raises; the bounds table torchao keeps per dtype for qrange.
# =================================================================================================
for _bits in (1, 2, 3, 4, 5, 6, 7, 8, 16):
    @case("qparams", f"qrange({_bits}, signed / unsigned) vs torchao's bounds of torch.int{_bits} / torch.uint{_bits}")
    def _check(ref, bits=_bits):
        bounds = _ao()._DTYPE_TO_QVALUE_BOUNDS
        signed = bounds[getattr(torch, f"int{bits}")]
        unsigned = bounds[getattr(torch, f"uint{bits}")] if bits != 16 else (0, torch.iinfo(torch.uint16).max)
        got_s, got_u = ref.qrange(bits, True), ref.qrange(bits, False)
        assert tuple(got_s) == tuple(signed), f"qrange({bits}, True) = {got_s}, torchao says {signed}"
        assert tuple(got_u) == tuple(unsigned), f"qrange({bits}, False) = {got_u}, torchao says {unsigned}"


@case("qparams", "qrange outside 1..16 raises ValueError (no library dtype has 0 or 17 bits); 9..15 bits follow the pattern")
def _check(ref):
    for bits in (0, 17, -1, 32):
        _raises(lambda b=bits: ref.qrange(b, True), ValueError, f"qrange({bits}, True)")
    for bits in range(9, 16):  # between int8 and int16 there is no torch dtype: the two's-complement pattern
        assert tuple(ref.qrange(bits, True)) == (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1), f"qrange({bits}, True)"
        assert tuple(ref.qrange(bits, False)) == (0, 2 ** bits - 1), f"qrange({bits}, False)"


# (name, shape, block, range, symmetric, dtype, data kind, eps) -- the torchao tests' granularities
QP_GRID = [
    ("per tensor asym int8 (test_choose_qparams_tensor_asym)", (10, 10), (10, 10), INT8, False, torch.float32, "randn", None),
    ("per tensor sym int8 (test_choose_qparams_tensor_sym)", (10, 10), (10, 10), INT8, True, torch.float32, "randn", None),
    ("per token asym int8 (test_choose_qparams_token_asym)", (10, 10), (1, 10), INT8, False, torch.float32, "randn", None),
    ("per channel along dim 1 asym (test_quantize_dequantize_channel_asym)", (10, 10), (10, 1), INT8, False, torch.float32, "randn", None),
    ("groups of 2 sym int8 (test_choose_qparams_group_sym)", (10, 10), (1, 2), INT8, True, torch.float32, "randn", None),
    ("groups of 2 asym uint8", (10, 10), (1, 2), UINT8, False, torch.float32, "randn", None),
    ("4-d per channel asym (test_quantize_dequantize_channel_asym_4d)", (3, 3, 10, 10), (3, 3, 1, 10), INT8, False, torch.float32, "randn", None),
    ("4-d multi-dim reduction asym (..._4d_multi_dim_reduction)", (3, 3, 10, 10), (3, 3, 2, 2), INT8, False, torch.float32, "randn", None),
    ("4-d multi-dim reduction sym int4", (3, 3, 10, 10), (3, 3, 2, 2), INT4, True, torch.float32, "randn", None),
    ("uint4 groups of 128 asym (test_get_groupwise_affine_qparams)", (10, 256), (1, 128), UINT4, False, torch.float32, "randn", 1e-6),
    ("int4 per channel sym, bf16 (test_get_group_qparams_symmetric)", (100, 256), (1, 256), INT4, True, torch.bfloat16, "randn", None),
    ("bf16 groups of 32 asym int8", (8, 64), (1, 32), INT8, False, torch.bfloat16, "randn", None),
    ("bf16 per tensor sym int8", (4, 6), (4, 6), INT8, True, torch.bfloat16, "randn", None),
    ("3-d blocks (1, 2, 3) asym int8", (2, 4, 6), (1, 2, 3), INT8, False, torch.float32, "randn", None),
    ("3-d blocks (2, 1, 6) sym uint8 (zero point 128)", (2, 4, 6), (2, 1, 6), UINT8, True, torch.float32, "randn", None),
    ("int16 per channel sym", (6, 20), (1, 20), INT16, True, torch.float32, "wide", None),
    ("ReLU-like data per tensor asym uint8 (zero point qmin)", (5, 8), (5, 8), UINT8, False, torch.float32, "relu", None),
    ("all-negative data per channel asym int8 (zero point qmax)", (5, 8), (1, 8), INT8, False, torch.float32, "neg", None),
    ("a zero row: per channel asym floors that row's scale at eps", (4, 8), (1, 8), INT8, False, torch.float32, "zero_row", None),
    ("a zero row: per channel sym", (4, 8), (1, 8), INT8, True, torch.float32, "zero_row", None),
    ("huge values (1e30) per tensor asym", (4, 8), (4, 8), INT8, False, torch.float32, "huge", None),
    ("tiny values (1e-30) per channel sym: scale floored at eps", (4, 8), (1, 8), INT8, True, torch.float32, "tiny", None),
    ("int2 range asym (-2..1)", (4, 8), (1, 4), (-2, 1), False, torch.float32, "randn", None),
    ("per token abs-max, range -127..127, eps 1e-5 (test_quantize_activation_per_token_abs_max)", (10, 10), (1, 10), (-127, 127), True, torch.float32, "randn", 1e-5),
    ("a (4, 1) column per tensor (block dims equal to 1 and to the size)", (4, 1), (4, 1), INT8, False, torch.float32, "randn", None),
]

for _i, (_name, _shape, _block, _range, _sym, _dt, _kind, _eps) in enumerate(QP_GRID):
    @case("qparams", f"choose_qparams vs torchao choose_qparams_affine: {_name}")
    def _check(ref, shape=_shape, block=_block, qrange=_range, sym=_sym, dt=_dt, kind=_kind, eps=_eps, seed=_i):
        x = _data(kind, shape, seed, dt)
        before = x.clone()
        got = ref.choose_qparams(x, block, qrange[0], qrange[1], sym, **({} if eps is None else {"eps": eps}))
        want = _ao_qparams(x, block, qrange, sym, eps=F32_EPS if eps is None else eps)
        assert isinstance(got, tuple) and len(got) == 2, "choose_qparams must return (scale, zero_point)"
        _exact(got[0], want[0], "scale")
        _exact(got[1], want[1], "zero_point")
        assert torch.equal(x, before), "choose_qparams changed its input"


@case("qparams", "eps=None is float32's eps (torchao's default differs: smallest_normal, test_choose_qparams_tensor_asym_eps)")
def _check(ref):
    x = torch.zeros(10, 10)
    got = ref.choose_qparams(x, (10, 10), -128, 127, False)
    _exact(got[0], _ao_qparams(x, (10, 10), INT8, False, eps=F32_EPS)[0], "scale of an all-zero tensor")
    ao_default = _ao().choose_qparams_affine(x, _mapping(False), (10, 10), torch.int8)[0]
    assert ao_default.item() == torch.finfo(torch.float32).smallest_normal, "torchao's default eps changed"
    assert got[0].item() != ao_default.item(), "the lab's default eps should differ from torchao's"


@case("qparams", "blocks of all 1s: one qparam per element (torchao's choose_qparams_affine mishandles this; "
                 "choose_qparams_affine_with_min_max(x, x) is the oracle)")
def _check(ref):
    qp = _ao()
    x = _data("randn", (3, 4), 7)
    for sym, qrange in ((True, INT8), (False, INT8), (False, UINT4)):
        got = ref.choose_qparams(x, (1, 1), qrange[0], qrange[1], sym)
        scale, zp = qp.choose_qparams_affine_with_min_max(x, x, _mapping(sym), (1, 1), _target(*qrange), qrange[0],
                                                          qrange[1], eps=F32_EPS, zero_point_dtype=torch.int32)
        _exact(got[0], scale, f"scale (symmetric={sym}, range {qrange})")
        _exact(got[1], zp.to(torch.int32), f"zero_point (symmetric={sym}, range {qrange})")
    # torchao's own choose_qparams_affine finds no dimension to reduce when every block dimension is 1, so
    # amin/amax reduce the whole tensor to one value and the keepdim reshape fails: a torchao 0.18 fact
    assert _library_rejects(lambda: _ao_qparams(x, (1, 1), INT8, True)), "torchao now handles all-1 blocks"


QFM = [  # (name, shape of min/max, range, symmetric, kind)
    ("0-d, asym int8", (), INT8, False, "randn"),
    ("vector, sym int8", (7,), INT8, True, "randn"),
    ("grid (3, 4), asym uint8", (3, 4), UINT8, False, "randn"),
    ("grid (2, 3), sym int4", (2, 3), INT4, True, "randn"),
    ("ranges wholly above or wholly below 0 (widened to hold 0), asym uint4", (6,), UINT4, False, "widen"),
    ("min == max == 0 (eps floor), asym and sym", (4,), INT8, None, "zeros"),
]

for _i, (_name, _shape, _range, _sym, _kind) in enumerate(QFM):
    @case("qparams", f"qparams_from_minmax vs torchao choose_qparams_affine_with_min_max: {_name}")
    def _check(ref, shape=_shape, qrange=_range, sym=_sym, kind=_kind, seed=_i):
        a, b = _randn(seed, *shape), _randn(seed + 50, *shape)
        lo, hi = torch.minimum(a, b), torch.maximum(a, b)
        if kind == "widen":  # even entries lie above 0 (min widened to 0), odd ones below 0 (max widened to 0)
            pos = torch.arange(a.numel()).reshape(shape) % 2 == 0
            lo_pos, hi_neg = a.abs() + 0.5, -(a.abs() + 0.5)
            lo = torch.where(pos, lo_pos, hi_neg - b.abs())
            hi = torch.where(pos, lo_pos + b.abs(), hi_neg)
        elif kind == "zeros":
            lo, hi = torch.zeros(shape), torch.zeros(shape)
        for s in ((True, False) if sym is None else (sym,)):
            got = ref.qparams_from_minmax(lo, hi, qrange[0], qrange[1], s, 1e-6)
            scale, zp = _ao().choose_qparams_affine_with_min_max(lo, hi, _mapping(s), (), _target(*qrange), qrange[0],
                                                                 qrange[1], eps=1e-6, zero_point_dtype=torch.int32)
            _exact(got[0], scale, f"scale (symmetric={s})")
            _exact(got[1], zp.to(torch.int32), f"zero_point (symmetric={s})")


for _sym in (False, True):
    @case("qparams", f"qparams_from_minmax vs torch.ao.quantization.utils.determine_qparams (the observers' rule), symmetric={_sym}")
    def _check(ref, sym=_sym):
        from torch.ao.quantization.utils import determine_qparams
        lo, hi = -_randn(3, 9).abs(), _randn(4, 9).abs()
        for dtype, qrange in ((torch.qint8, INT8), (torch.quint8, UINT8)):
            got = ref.qparams_from_minmax(lo, hi, qrange[0], qrange[1], sym, F32_EPS)
            want = determine_qparams(lo, hi, qrange[0], qrange[1], dtype, torch.tensor([F32_EPS]), False,
                                     torch.per_channel_symmetric if sym else torch.per_channel_affine)
            _values(got[0], want[0], f"scale ({dtype}; determine_qparams returns float64)", torch.float64)
            _values(got[1], want[1], f"zero_point ({dtype})", torch.int64)


for _sym in (False, True):
    @case("qparams", f"per-tensor choose_qparams vs quantized_decomposed.choose_qparams{'_symmetric' if _sym else ''} "
                     f"(test_choose_qparams_tensor_{'sym' if _sym else 'asym'})")
    def _check(ref, sym=_sym):
        x = _randn(11 + sym, 10, 10)
        op = _decomposed().choose_qparams_symmetric if sym else _decomposed().choose_qparams
        for dtype, qrange in ((torch.int8, INT8), (torch.uint8, UINT8)):
            got = ref.choose_qparams(x, (10, 10), qrange[0], qrange[1], sym)
            want = op.tensor(x, qrange[0], qrange[1], F32_EPS, dtype)
            _values(got[0], want[0], f"scale ({dtype})")
            _values(got[1], want[1], f"zero_point ({dtype})", torch.int64)


@case("qparams", "a block_size that does not divide raises ValueError (torchao: an AssertionError, test_raises)")
def _check(ref):
    x = _randn(1, 4, 6)
    for block in ((1, 4), (3, 6), (4, 5), (8, 6)):
        _raises(lambda b=block: ref.choose_qparams(x, b, -128, 127, True), ValueError, f"choose_qparams with block {block}")
        assert _library_rejects(lambda b=block: _ao_qparams(x, b, INT8, True)), f"torchao accepts block {block}"
    got = ref.choose_qparams(x, (2, 3), -128, 127, True)  # the same call with a block that fits
    _exact(got[0], _ao_qparams(x, (2, 3), INT8, True)[0], "scale for block (2, 3)")


@case("qparams", "a block_size of the wrong length raises ValueError (torchao asserts len(block_size) == x.dim())")
def _check(ref):
    x = _randn(2, 2, 4, 6)
    for block in ((4, 6), (1, 1, 4, 6), ()):
        _raises(lambda b=block: ref.choose_qparams(x, b, -8, 7, False), ValueError, f"choose_qparams with block {block}")
        assert _library_rejects(lambda b=block: _ao_qparams(x, b, INT4, False)), f"torchao accepts block {block}"


@case("qparams", "an empty x raises ValueError (torchao: an IndexError per tensor, empty qparams per row)")
def _check(ref):
    for shape, block in (((0, 4), (1, 4)), ((3, 0), (3, 0)), ((0, 4), (0, 4))):
        x = torch.empty(shape)
        _raises(lambda: ref.choose_qparams(x, block, -128, 127, True), ValueError, f"choose_qparams of shape {shape}")
    assert _library_rejects(lambda: _ao_qparams(torch.empty(0, 4), (0, 4), INT8, True)), "torchao accepts an empty tensor"
    assert _ao_qparams(torch.empty(0, 4), (1, 4), INT8, True)[0].numel() == 0, "torchao's per-row answer changed"


@case("qparams", "NaN or inf in x raises ValueError (torchao returns a NaN scale and an int32-min zero point)")
def _check(ref):
    for bad in (float("nan"), float("inf"), -float("inf")):
        x = _randn(2, 2, 4)
        x[1, 2] = bad
        _raises(lambda: ref.choose_qparams(x, (1, 4), -128, 127, False), ValueError, f"choose_qparams with {bad}")
    x = torch.tensor([[1.0, float("nan")]])
    scale, zp = _ao_qparams(x, (1, 2), INT8, False)
    assert torch.isnan(scale).all(), "torchao no longer gives a NaN scale for a NaN input"


# =================================================================================================
# Part quantize: quantize and dequantize. Modelled on torchao test_quant_primitives.py
# (test_quantize_dequantize_group_sym / _channel_asym / _tensor_asym / _channel_asym_4d /
# _4d_multi_dim_reduction: quantize_affine and dequantize_affine vs quantized_decomposed's
# quantize_per_tensor / _per_channel / _per_channel_group; check_idempotent: a second call gives the
# same result; test_raises), and on PyTorch's test_quantized_tensor.py (torch.quantize_per_tensor /
# quantize_per_channel / dequantize: int_repr against the reference formula).
# =================================================================================================
Q_DTYPE = {INT8: torch.int8, UINT8: torch.uint8, INT4: torch.int8, UINT4: torch.uint8, INT16: torch.int16,
           (-2, 1): torch.int8, (-127, 127): torch.int8}

for _i, (_name, _shape, _block, _range, _sym, _dt, _kind, _eps) in enumerate(QP_GRID):
    @case("quantize", f"quantize vs torchao quantize_affine (bit-exact, same dtype): {_name}")
    def _check(ref, shape=_shape, block=_block, qrange=_range, sym=_sym, dt=_dt, kind=_kind, seed=_i):
        x = _data(kind, shape, seed, dt)
        scale, zp = _ao_qparams(x, block, qrange, sym)
        x = x * 1.05  # a little outside the observed range: some elements clamp
        qdt = Q_DTYPE[qrange]
        got = ref.quantize(x, block, scale, zp, qrange[0], qrange[1], qdt)
        want = _ao().quantize_affine(x, block, scale, zp, qdt, qrange[0], qrange[1])
        _exact(got, want, "q")
        _exact(ref.quantize(x, block, scale, zp, qrange[0], qrange[1], qdt), got, "q of a second call (check_idempotent)")

    @case("quantize", f"dequantize vs torchao dequantize_affine (float32): {_name}")
    def _check(ref, shape=_shape, block=_block, qrange=_range, sym=_sym, dt=_dt, kind=_kind, seed=_i):
        x = _data(kind, shape, seed, dt)
        scale, zp = _ao_qparams(x, block, qrange, sym)
        qdt = Q_DTYPE[qrange]
        q = _ao().quantize_affine(x, block, scale, zp, qdt, qrange[0], qrange[1])
        before = q.clone()
        got = ref.dequantize(q, block, scale, zp)
        want = _ao().dequantize_affine(q, block, scale, zp, qdt, qrange[0], qrange[1], output_dtype=torch.float32)
        _exact(got, want, "x_hat")
        assert torch.equal(q, before), "dequantize changed q"


@case("quantize", "round half to even on exact ties (scale 0.5 and 0.25, zero points 3 and -2) vs torchao")
def _check(ref):
    x = (torch.arange(-24, 24, dtype=torch.float32) * 0.125).reshape(2, 24)  # x / s hits k + 0.5 often
    scale = torch.tensor([[0.25], [0.5]])
    zp = torch.tensor([[3], [-2]], dtype=torch.int32)
    got = ref.quantize(x, (1, 24), scale, zp, -128, 127, torch.int8)
    want = _ao().quantize_affine(x, (1, 24), scale, zp, torch.int8, -128, 127)
    _exact(got, want, "q on ties")
    assert ((x / scale) % 1 == 0.5).any(), "the case lost its ties"


def _near_ties(scale, count, seed):
    """float32 values next to (k + 0.5) * scale where round(x * (1/s)) and round(x / s) disagree."""
    k = torch.arange(-1000, 1000, dtype=torch.float64) + 0.5
    base = (k * scale).float()
    cand = torch.cat([torch.nextafter(base, torch.tensor(float("inf"))), base, torch.nextafter(base, torch.tensor(-float("inf")))])
    s = torch.tensor(scale, dtype=torch.float32)
    split = cand[torch.round(cand * (1.0 / s)) != torch.round(cand / s)]
    assert split.numel() >= count, f"only {split.numel()} values split x * (1/s) from x / s at scale {scale}"
    perm = torch.randperm(split.numel(), generator=_gen(seed))[:count]
    return split[perm]


for _i, _scale in enumerate((0.1, 0.3, 0.7)):
    @case("quantize", f"x * (1.0 / scale), not x / scale: values where the two round apart (scale {_scale}) vs torchao and ATen")
    def _check(ref, scale=_scale, seed=_i):
        x = _near_ties(scale, 32, seed).reshape(4, 8)
        s = torch.full((1, 1), scale)
        z = torch.zeros(1, 1, dtype=torch.int32)
        got = ref.quantize(x, (4, 8), s, z, -128, 127, torch.int32)
        _exact(got, _ao().quantize_affine(x, (4, 8), s, z, torch.int32, -128, 127), "q vs torchao")
        _values(got, torch.quantize_per_tensor(x, s.reshape(()), torch.tensor(0), torch.qint8).int_repr(),
                "q vs torch.quantize_per_tensor", torch.int32)
        assert not torch.equal(got, torch.round(x / s).to(torch.int32)), "x / s would agree here: the case lost its teeth"


@case("quantize", "+inf saturates to qmax, -inf to qmin, large finite values clamp (torchao does the same)")
def _check(ref):
    x = torch.tensor([[float("inf"), -float("inf"), 1e30, -1e30, 0.3, -0.3, 3.4e38, -3.4e38]])
    for qrange, qdt in ((INT8, torch.int8), (UINT8, torch.uint8), (INT4, torch.int8), (INT16, torch.int16)):
        s, z = torch.tensor([[0.01]]), torch.tensor([[qrange[0] + 3]], dtype=torch.int32)
        got = ref.quantize(x, (1, 8), s, z, qrange[0], qrange[1], qdt)
        _exact(got, _ao().quantize_affine(x, (1, 8), s, z, qdt, qrange[0], qrange[1]), f"q in range {qrange}")
        assert got[0, 0].item() == qrange[1] and got[0, 1].item() == qrange[0], "inf should saturate"


@case("quantize", "a NaN raises ValueError (torchao silently casts it to an integer)")
def _check(ref):
    x = torch.tensor([[0.5, float("nan"), 1.0, -1.0]])
    s, z = torch.tensor([[0.1]]), torch.tensor([[0]], dtype=torch.int32)
    _raises(lambda: ref.quantize(x, (1, 4), s, z, -128, 127, torch.int8), ValueError, "quantize with a NaN")
    ao = _ao().quantize_affine(x, (1, 4), s, z, torch.int8, -128, 127)
    assert ao.dtype == torch.int8, "torchao now rejects NaN"
    got = ref.quantize(x.nan_to_num(0.0), (1, 4), s, z, -128, 127, torch.int8)  # the same call without the NaN
    _exact(got, _ao().quantize_affine(x.nan_to_num(0.0), (1, 4), s, z, torch.int8, -128, 127), "q without the NaN")


QT_ATEN = [  # (torch qdtype, range, lab dtype, zero point)
    (torch.quint8, UINT8, torch.uint8, 131),
    (torch.qint8, INT8, torch.int8, -5),
    (torch.qint32, (-(2 ** 31), 2 ** 31 - 1), torch.int32, 17),
]

for _qt, _range, _ldt, _zp in QT_ATEN:
    @case("quantize", f"quantize / dequantize per tensor vs torch.quantize_per_tensor ({_qt}) int_repr and torch.dequantize")
    def _check(ref, qt=_qt, qrange=_range, ldt=_ldt, zp=_zp):
        x = _randn(21, 6, 10, scale=3.0)
        s = torch.tensor([[0.023]])
        z = torch.tensor([[zp]], dtype=torch.int32)
        qt_x = torch.quantize_per_tensor(x, s.item(), zp, qt)
        got = ref.quantize(x, (6, 10), s, z, qrange[0], qrange[1], ldt)
        _values(got, qt_x.int_repr(), "q", torch.int64)
        _exact(ref.dequantize(got, (6, 10), s, z), torch.dequantize(qt_x), "x_hat")


for _axis in (0, 1, 2):
    @case("quantize", f"quantize / dequantize per channel (axis {_axis} of a 3-d tensor) vs torch.quantize_per_channel")
    def _check(ref, axis=_axis):
        x = _randn(30 + axis, 3, 4, 5, scale=2.0)
        c = x.shape[axis]
        scales = torch.rand(c, generator=_gen(axis)) * 0.05 + 0.005
        zps = torch.randint(-20, 20, (c,), generator=_gen(axis + 9))
        block = [n if d != axis else 1 for d, n in enumerate(x.shape)]
        grid = [1 if d != axis else c for d in range(3)]
        qt_x = torch.quantize_per_channel(x, scales.double(), zps, axis, torch.qint8)
        got = ref.quantize(x, block, scales.reshape(grid), zps.to(torch.int32).reshape(grid), -128, 127, torch.int8)
        _exact(got, qt_x.int_repr(), "q")
        _exact(ref.dequantize(got, block, scales.reshape(grid), zps.to(torch.int32).reshape(grid)), torch.dequantize(qt_x), "x_hat")


@case("quantize", "per tensor vs quantized_decomposed.quantize_per_tensor / dequantize_per_tensor (test_quantize_dequantize_tensor_asym)")
def _check(ref):
    x = _randn(41, 10, 10)
    scale, zp = _ao_qparams(x, (10, 10), INT8, False)
    d = _decomposed()
    want_q = d.quantize_per_tensor(x, scale.item(), zp.item(), -128, 127, torch.int8)
    got_q = ref.quantize(x, (10, 10), scale, zp, -128, 127, torch.int8)
    _exact(got_q, want_q, "q")
    _exact(ref.dequantize(got_q, (10, 10), scale, zp),
           d.dequantize_per_tensor(want_q, scale.item(), zp.item(), -128, 127, torch.int8), "x_hat")


@case("quantize", "per channel vs quantized_decomposed.quantize_per_channel / dequantize_per_channel (test_quantize_dequantize_channel_asym_4d)")
def _check(ref):
    x = _randn(42, 3, 3, 10, 10)
    block = (3, 3, 1, 10)
    scale, zp = _ao_qparams(x, block, INT8, False)
    d = _decomposed()
    want_q = d.quantize_per_channel(x, scale.reshape(-1), zp.reshape(-1), 2, -128, 127, torch.int8)
    got_q = ref.quantize(x, block, scale, zp, -128, 127, torch.int8)
    _exact(got_q, want_q, "q")
    _exact(ref.dequantize(got_q, block, scale, zp),
           d.dequantize_per_channel(want_q, scale.reshape(-1), zp.reshape(-1), 2, -128, 127, torch.int8,
                                    out_dtype=torch.float32), "x_hat")


@case("quantize", "symmetric groups vs quantized_decomposed.quantize_per_channel_group (test_quantize_dequantize_group_sym)")
def _check(ref):
    # the decomposed group op adds the zero point *before* rounding; with a symmetric (zero) zero point that is
    # the same map, which is why torchao's test uses MappingType.SYMMETRIC
    x = _randn(43, 10, 10)
    for group, qrange in ((2, INT8), (5, INT4)):
        scale, zp = _ao_qparams(x, (1, group), qrange, True)
        want = _decomposed().quantize_per_channel_group(x, scale, zp, qrange[0], qrange[1], torch.int8, group)
        _exact(ref.quantize(x, (1, group), scale, zp, qrange[0], qrange[1], torch.int8), want, f"q (groups of {group})")


@case("quantize", "dequantize then quantize gives back every representable q (int4 groups, uint8 blocks)")
def _check(ref):
    for qrange, qdt, shape, block in ((INT4, torch.int8, (4, 32), (1, 16)), (UINT8, torch.uint8, (8, 32), (2, 16))):
        q = torch.randint(qrange[0], qrange[1] + 1, shape, generator=_gen(44), dtype=torch.int64).to(qdt)
        grid = [n // b for n, b in zip(shape, block, strict=True)]
        scale = torch.rand(grid, generator=_gen(45)) * 0.1 + 1e-3
        zp = torch.randint(qrange[0], qrange[1] + 1, grid, generator=_gen(46), dtype=torch.int32)
        x_hat = ref.dequantize(q, block, scale, zp)
        _exact(x_hat, _ao().dequantize_affine(q, block, scale, zp, qdt, qrange[0], qrange[1]), "x_hat")
        _exact(ref.quantize(x_hat, block, scale, zp, qrange[0], qrange[1], qdt), q, "quantize(dequantize(q))")


@case("quantize", "dequantize of int32 codes far outside 8 bits and of bf16 scales (float32 out) vs torchao")
def _check(ref):
    q = torch.randint(-(2 ** 20), 2 ** 20, (4, 12), generator=_gen(47), dtype=torch.int32)
    for sdt in (torch.float32, torch.bfloat16):
        scale = (torch.rand(4, 3, generator=_gen(48)) * 1e-3 + 1e-5).to(sdt)
        zp = torch.randint(-100, 100, (4, 3), generator=_gen(49), dtype=torch.int32)
        _exact(ref.dequantize(q, (1, 4), scale, zp),
               _ao().dequantize_affine(q, (1, 4), scale, zp, torch.int32, output_dtype=torch.float32), f"x_hat ({sdt} scale)")


@case("quantize", "dequantize subtracts the zero point in float32: int32 codes at the ends of their range vs torchao")
def _check(ref):
    q = torch.tensor([[2 ** 31 - 1, -(2 ** 31), 2 ** 31 - 100, -(2 ** 31) + 100]], dtype=torch.int32)
    for zp in (-100, 100, 0):
        s, z = torch.tensor([[1e-9]]), torch.tensor([[zp]], dtype=torch.int32)
        _exact(ref.dequantize(q, (1, 4), s, z), _ao().dequantize_affine(q, (1, 4), s, z, torch.int32),
               f"x_hat (zero point {zp}; an int32 subtraction would wrap)")


@case("quantize", "block_size that does not fit raises ValueError in quantize and dequantize (torchao: AssertionError/RuntimeError)")
def _check(ref):
    x = _randn(50, 4, 6)
    s, z = torch.ones(4, 2) * 0.1, torch.zeros(4, 2, dtype=torch.int32)
    for block in ((1, 4), (1, 1, 3), (3, 3)):
        _raises(lambda b=block: ref.quantize(x, b, s, z, -128, 127, torch.int8), ValueError, f"quantize, block {block}")
        _raises(lambda b=block: ref.dequantize(torch.zeros(4, 6, dtype=torch.int8), b, s, z), ValueError,
                f"dequantize, block {block}")
        assert _library_rejects(lambda b=block: _ao().quantize_affine(x, b, s, z, torch.int8)), f"torchao accepts {block}"
    _exact(ref.quantize(x, (1, 3), s, z, -128, 127, torch.int8),
           _ao().quantize_affine(x, (1, 3), s, z, torch.int8, -128, 127), "q with the block that fits")


# =================================================================================================
# Part observers. Modelled on PyTorch test_workflow_module.py: test_per_tensor_observers (the two
# batches whose running / moving-average range is [1, 8], qint8 and quint8, affine and symmetric),
# test_per_channel_observers (the 4-d tensor with ch_axis 0..3, and the 0.5x / 1.5x batches of the
# moving-average per-channel observer), test_zero_numel (an empty batch), test_fq_serializable_per_channel;
# and on torchao's AffineQuantizedMinMaxObserver (PerTensor / PerAxis granularities) and the PT2E
# AffineQuantizedMovingAverageMinMaxObserver.
# =================================================================================================
def _torch_observer(kind, dtype, symmetric, axis=None, c=None, qrange=None):
    from torch.ao.quantization import observer as ob
    kw = dict(dtype=dtype, eps=F32_EPS)
    if qrange is not None:
        kw.update(quant_min=qrange[0], quant_max=qrange[1])
    if axis is None:
        kw["qscheme"] = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
        return ob.MinMaxObserver(**kw) if c is None else ob.MovingAverageMinMaxObserver(averaging_constant=c, **kw)
    kw["qscheme"] = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
    if c is None:
        return ob.PerChannelMinMaxObserver(ch_axis=axis, **kw)
    return ob.MovingAveragePerChannelMinMaxObserver(averaging_constant=c, ch_axis=axis, **kw)


def _same_observer(lab, theirs, what):
    _exact(lab.min_val, theirs.min_val, f"{what}: min_val")
    _exact(lab.max_val, theirs.max_val, f"{what}: max_val")
    got, want = lab.calculate_qparams(), theirs.calculate_qparams()
    _values(got[0], want[0], f"{what}: scale")
    assert got[0].dtype == torch.float32 and got[1].dtype == torch.int32, f"{what}: qparams dtypes {got[0].dtype}, {got[1].dtype}"
    _values(got[1], want[1], f"{what}: zero_point", torch.int64)


QDT_RANGE = {torch.qint8: INT8, torch.quint8: UINT8}
PER_TENSOR_X = torch.tensor([1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 6.0]), torch.tensor([4.0, 5.0, 5.0, 6.0, 7.0, 8.0])
MOVING_X = torch.tensor([0.0, 2.0, 2.0, 3.0, 4.0, 5.0, 6.0]), torch.tensor([2.0, 5.0, 5.0, 6.0, 7.0, 10.0])

for _moving in (False, True):
    for _qdt in (torch.qint8, torch.quint8):
        for _sym in (False, True):
            @case("observers", f"per tensor, {'moving average c=0.5' if _moving else 'min-max'}, {_qdt}, "
                               f"{'symmetric' if _sym else 'affine'} vs torch.ao (test_per_tensor_observers: range [1, 8])")
            def _check(ref, moving=_moving, qdt=_qdt, sym=_sym):
                qrange = QDT_RANGE[qdt]
                lab = ref.MinMaxObserver(qrange[0], qrange[1], sym, averaging_constant=0.5 if moving else None)
                theirs = _torch_observer("tensor", qdt, sym, c=0.5 if moving else None)
                for x in (MOVING_X if moving else PER_TENSOR_X):
                    out = lab(x)
                    assert out is x, "forward must return its input object"
                    theirs(x)
                _same_observer(lab, theirs, "observer")
                assert (lab.min_val.item(), lab.max_val.item()) == (1.0, 8.0), "the public test's range is [1, 8]"


PER_CHANNEL_X = torch.tensor([[[[1.0, 2.0], [2.0, 2.5]], [[3.0, 4.0], [4.5, 6.0]]],
                              [[[-4.0, -3.0], [5.0, 5.0]], [[6.0, 3.0], [7.0, 8.0]]]])

for _axis in (0, 1, 2, 3, -1, -3):
    for _moving in (False, True):
        @case("observers", f"per channel axis {_axis}, {'moving average c=0.5 on 0.5x then 1.5x' if _moving else 'min-max'} "
                           "vs torch.ao (test_per_channel_observers' 4-d tensor)")
        def _check(ref, axis=_axis, moving=_moving):
            qdt, sym = (torch.quint8, True) if moving else (torch.qint8, False)
            qrange = QDT_RANGE[qdt]
            lab = ref.MinMaxObserver(qrange[0], qrange[1], sym, axis=axis, averaging_constant=0.5 if moving else None)
            theirs = _torch_observer("channel", qdt, sym, axis=axis % 4, c=0.5 if moving else None)
            for x in ((0.5 * PER_CHANNEL_X, 1.5 * PER_CHANNEL_X) if moving else (PER_CHANNEL_X,)):
                assert lab(x) is x, "forward must return its input object"
                theirs(x)
            _same_observer(lab, theirs, f"axis {axis}")


OBS_RANDOM = [  # (name, torch dtype, range or None (default), symmetric, axis, c, batches, shape)
    ("moving average c=0.01 (torch's default) over 6 batches", torch.quint8, None, False, None, 0.01, 6, (4, 16)),
    ("moving average c=1.0 (the last batch wins)", torch.qint8, None, True, None, 1.0, 4, (4, 16)),
    ("per channel moving average c=0.1 along dim 1 of 3-d batches", torch.qint8, None, False, 1, 0.1, 5, (2, 6, 5)),
    ("per channel min-max along the last dim (-1), symmetric", torch.qint8, None, True, -1, None, 3, (3, 4, 8)),
    ("custom range -8..7 (int4), affine", torch.qint8, INT4, False, None, None, 3, (5, 7)),
    ("custom range 0..15 (uint4), affine", torch.quint8, UINT4, False, 0, None, 3, (5, 7)),
    ("int16 range, symmetric", torch.int16, INT16, True, None, None, 3, (5, 7)),
    ("uint16 range, symmetric (zero point 2**15)", torch.uint16, (0, 65535), True, None, None, 2, (5, 7)),
]

for _i, (_name, _qdt, _range, _sym, _axis, _c, _n, _shape) in enumerate(OBS_RANDOM):
    @case("observers", f"{_name} vs torch.ao observers")
    def _check(ref, qdt=_qdt, qrange=_range, sym=_sym, axis=_axis, c=_c, n=_n, shape=_shape, seed=_i):
        lab_range = qrange or QDT_RANGE[qdt]
        lab = ref.MinMaxObserver(lab_range[0], lab_range[1], sym, axis=axis, averaging_constant=c)
        theirs = _torch_observer("", qdt, sym, axis=None if axis is None else axis % len(shape), c=c, qrange=qrange)
        for b in range(n):
            x = _randn(100 * seed + b, *shape, scale=1.0 + b) + 0.3 * b
            lab(x)
            theirs(x)
        _same_observer(lab, theirs, "observer")


@case("observers", "symmetric with a custom unsigned range: the lab takes (qmin + qmax + 1) // 2 like torchao "
                   "(torch.ao's observer takes the down-rounded midpoint)")
def _check(ref):
    qp = _ao()
    from torchao.quantization.granularity import PerTensor
    from torchao.quantization.observer import AffineQuantizedMinMaxObserver
    lab = ref.MinMaxObserver(0, 15, True)
    ao = AffineQuantizedMinMaxObserver(qp.MappingType.SYMMETRIC, torch.uint8, PerTensor(), quant_min=0, quant_max=15,
                                       eps=F32_EPS, zero_point_dtype=torch.int32)
    old = _torch_observer("tensor", torch.quint8, True, qrange=UINT4)
    for seed in range(3):
        x = _randn(seed, 4, 9)
        lab(x), ao(x), old(x)
    got, want = lab.calculate_qparams(), ao.calculate_qparams()
    _values(got[0], want[0], "scale vs torchao")
    _values(got[1], want[1], "zero_point vs torchao", torch.int64)
    _values(got[0], old.calculate_qparams()[0], "scale vs torch.ao")
    assert old.calculate_qparams()[1].item() == 7 and got[1].item() == 8, "the known zero-point difference moved"


for _gran in ("tensor", "axis0", "axis1"):
    for _sym in (False, True):
        @case("observers", f"vs torchao AffineQuantizedMinMaxObserver, {'PerTensor' if _gran == 'tensor' else 'PerAxis(' + _gran[-1] + ')'}, "
                           f"{'symmetric' if _sym else 'asymmetric'} int8")
        def _check(ref, gran=_gran, sym=_sym):
            from torchao.quantization.granularity import PerAxis, PerTensor
            from torchao.quantization.observer import AffineQuantizedMinMaxObserver
            g = PerTensor() if gran == "tensor" else PerAxis(int(gran[-1]))
            ao = AffineQuantizedMinMaxObserver(_mapping(sym), torch.int8, g, quant_min=-128, quant_max=127,
                                               eps=F32_EPS, zero_point_dtype=torch.int32)
            lab = ref.MinMaxObserver(-128, 127, sym, axis=None if gran == "tensor" else int(gran[-1]))
            for b in range(3):
                x = _randn(60 + b, 6, 10, scale=1 + b)
                lab(x), ao(x)
            _values(lab.min_val, ao.min_val, "min_val")
            _values(lab.max_val, ao.max_val, "max_val")
            got, want = lab.calculate_qparams(), ao.calculate_qparams()
            _values(got[0], want[0], "scale")
            _values(got[1], want[1], "zero_point", torch.int64)


@case("observers", "moving average per axis vs torchao's PT2E AffineQuantizedMovingAverageMinMaxObserver (c=0.25)")
def _check(ref):
    from torchao.quantization.granularity import PerAxis
    from torchao.quantization.pt2e._affine_quantization import AffineQuantizedMovingAverageMinMaxObserver
    ao = AffineQuantizedMovingAverageMinMaxObserver(_mapping(False), torch.uint8, PerAxis(0), averaging_constant=0.25,
                                                    quant_min=0, quant_max=255, eps=F32_EPS, zero_point_dtype=torch.int32)
    lab = ref.MinMaxObserver(0, 255, False, axis=0, averaging_constant=0.25)
    for b in range(5):
        x = _randn(70 + b, 5, 12, scale=1 + b) - 0.2 * b
        lab(x), ao(x)
    _values(lab.min_val, ao.min_val, "min_val")
    _values(lab.max_val, ao.max_val, "max_val")
    got, want = lab.calculate_qparams(), ao.calculate_qparams()
    _values(got[0], want[0], "scale")
    _values(got[1], want[1], "zero_point", torch.int64)


for _axis in (None, 1):
    @case("observers", f"an empty batch changes nothing, before and after data (test_zero_numel), axis={_axis}")
    def _check(ref, axis=_axis):
        lab = ref.MinMaxObserver(-128, 127, False, axis=axis, averaging_constant=0.5)
        theirs = _torch_observer("", torch.qint8, False, axis=axis, c=0.5)
        empty = torch.empty(0, 3) if axis is None else torch.empty(2, 3, 0)
        assert lab(empty) is empty and theirs(empty) is empty, "an empty batch must come back unchanged"
        assert lab.min_val is None and lab.max_val is None, "an empty first batch must leave min_val/max_val None"
        for b, x in enumerate((_randn(80, 2, 3, 4), empty, _randn(81, 2, 3, 4) * 2, empty)):
            lab(x), theirs(x)
        _same_observer(lab, theirs, "observer")


@case("observers", "calculate_qparams before any data raises RuntimeError (torch.ao returns scale 1, zero point 0 with a warning)")
def _check(ref):
    _raises(lambda: ref.MinMaxObserver(-128, 127, True).calculate_qparams(), RuntimeError, "calculate_qparams with no data")
    _raises(lambda: ref.MinMaxObserver(0, 255, False, axis=0).calculate_qparams(), RuntimeError, "per channel, no data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s, z = _torch_observer("tensor", torch.qint8, True).calculate_qparams()
    assert (s.item(), z.item()) == (1.0, 0), "torch.ao's empty-observer qparams changed"
    lab = ref.MinMaxObserver(-128, 127, True)
    lab(torch.tensor([0.0, -2.0, 1.0]))  # after data it answers
    _values(lab.calculate_qparams()[0], torch.tensor([2.0 / 127.5]), "scale after one batch")


@case("observers", "another channel count along the axis raises ValueError (torch.ao raises a RuntimeError from broadcasting)")
def _check(ref):
    lab = ref.MinMaxObserver(-128, 127, False, axis=-1)
    lab(_randn(1, 3, 4))
    _raises(lambda: lab(_randn(2, 3, 5)), ValueError, "a batch with 5 channels after 4")
    theirs = _torch_observer("", torch.qint8, False, axis=1)
    theirs(_randn(1, 3, 4))
    assert _library_rejects(lambda: theirs(_randn(2, 3, 5))), "torch.ao now accepts another channel count"
    lab(_randn(3, 6, 4))  # the same channel count with another batch size is fine
    theirs(_randn(3, 6, 4))
    _same_observer(lab, theirs, "after a different batch size")


@case("observers", "an all-zero batch floors the scale at eps; forward detaches (a batch that requires grad) like torch.ao")
def _check(ref):
    for sym in (False, True):
        lab, theirs = ref.MinMaxObserver(-128, 127, sym), _torch_observer("tensor", torch.qint8, sym)
        x = torch.zeros(3, 4, requires_grad=True)
        assert lab(x) is x, "forward must return its input object"
        theirs(x)
        assert not lab.min_val.requires_grad and not lab.max_val.requires_grad, "min_val/max_val carry autograd history"
        _same_observer(lab, theirs, f"all zeros (symmetric={sym})")


# =================================================================================================
# Part fake_quant: FakeQuantize / fake_quantize. Modelled on PyTorch test_workflow_ops.py
# (test_forward_per_tensor / test_backward_per_tensor, _test_forward_per_tensor_cachemask_impl: scale
# from a MinMaxObserver on 0.75 x so that some values clamp, float and tensor qparams;
# test_forward_per_channel / test_backward_per_channel; the straight-through mask at qmin / qmax),
# test_workflow_module.py (test_fq_module_per_channel, test_fq_serializable_per_channel), and torchao's
# test_fake_quantize_affine / test_fake_quantize_affine_cachemask (groups, the outlier mask).
# =================================================================================================
def _fq_both(ref, x0, block, scale, zp, qmin, qmax, torch_fn, seed):
    """Forward and x.grad of the lab's fake_quantize and of a library function, same upstream gradient."""
    dout = torch.rand(x0.shape, generator=_gen(seed)) + 0.5
    x = x0.clone().requires_grad_()
    y = ref.fake_quantize(x, block, scale, zp, qmin, qmax)
    y.backward(dout)
    xt = x0.clone().requires_grad_()
    yt = torch_fn(xt)
    yt.backward(dout)
    return (y.detach(), x.grad), (yt.detach(), xt.grad)


def _check_fq(ref, x0, block, scale, zp, qmin, qmax, torch_fn, seed, what):
    (y, gx), (yt, gt) = _fq_both(ref, x0, block, scale, zp, qmin, qmax, torch_fn, seed)
    _exact(y, yt, f"{what}: forward")
    _exact(gx, gt, f"{what}: x.grad")


for _qdt in (torch.qint8, torch.quint8):
    for _tensor_qparams in (False, True):
        @case("fake_quant", f"per tensor vs torch.fake_quantize_per_tensor_affine, {_qdt}, "
                            f"{'tensor' if _tensor_qparams else 'float/int'} qparams, scale from 0.75 x (some clamp)")
        def _check(ref, qdt=_qdt, tq=_tensor_qparams):
            x0 = _randn(90 + tq, 4, 8) * 2
            obs = _torch_observer("tensor", qdt, False)
            obs(x0 * 0.75)
            s, z = obs.calculate_qparams()
            qmin, qmax = obs.quant_min, obs.quant_max
            if tq:
                fn = lambda t: torch.fake_quantize_per_tensor_affine(t, s, z.to(torch.int32), qmin, qmax)  # noqa: E731
            else:
                fn = lambda t: torch.fake_quantize_per_tensor_affine(t, s.item(), int(z), qmin, qmax)  # noqa: E731
            (y, gx), (yt, gt) = _fq_both(ref, x0, (4, 8), s.reshape(1, 1), z.to(torch.int32).reshape(1, 1), qmin, qmax, fn, 7)
            _exact(y, yt, "forward")
            _exact(gx, gt, "x.grad")
            assert (gx == 0).any() and (gx != 0).any(), "the case should clamp some values and pass others"


BOUNDARY = [  # (range, zero point): x / s lands on qmin - 0.5, qmax + 0.5 and their neighbours
    (INT8, 0), (INT4, 0), (UINT8, 128), (UINT4, 3), ((-127, 127), 0),
]

for _range, _zp in BOUNDARY:
    @case("fake_quant", f"the straight-through mask at the boundaries, range {_range}, zero point {_zp}: "
                        "round-half-even at qmin - 0.5 / qmax + 0.5 vs torch.fake_quantize_per_tensor_affine")
    def _check(ref, qrange=_range, zp=_zp):
        qmin, qmax = qrange
        s = 0.25  # a power of two: x / s is exact, so the ties are real ties
        offsets = torch.tensor([-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0])
        units = torch.cat([qmin - zp + offsets, qmax - zp + offsets, torch.tensor([0.5, -0.5, 1.5])])
        x0 = (units * s).reshape(1, -1)
        fn = lambda t: torch.fake_quantize_per_tensor_affine(t, s, zp, qmin, qmax)  # noqa: E731
        _check_fq(ref, x0, tuple(x0.shape), torch.tensor([[s]]), torch.tensor([[zp]], dtype=torch.int32), qmin, qmax,
                  fn, 3, "boundary")


@case("fake_quant", "the docstring example: int4, scale 1, x = [-9, -8.4, -8.6, 0.3, 6.9, 7.4, 7.6] vs torch")
def _check(ref):
    x0 = torch.tensor([[-9.0, -8.4, -8.6, 0.3, 6.9, 7.4, 7.6]])
    fn = lambda t: torch.fake_quantize_per_tensor_affine(t, 1.0, 0, -8, 7)  # noqa: E731
    _check_fq(ref, x0, (1, 7), torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.int32), -8, 7, fn, 4, "example")


FQ_CHANNEL = [  # (shape, axis, range, seed)
    ((4, 6), 0, INT8, 1), ((4, 6), 1, UINT8, 2), ((2, 3, 5), 1, INT4, 3), ((2, 3, 4, 5), 3, INT8, 4),
    ((2, 3, 4, 5), 0, UINT4, 5), ((3, 8), 0, (-127, 127), 6),
]

for _shape, _axis, _range, _seed in FQ_CHANNEL:
    @case("fake_quant", f"per channel vs torch.fake_quantize_per_channel_affine: shape {_shape}, axis {_axis}, range {_range}")
    def _check(ref, shape=_shape, axis=_axis, qrange=_range, seed=_seed):
        x0 = _randn(seed, *shape, scale=2.0)
        c = shape[axis]
        s = torch.rand(c, generator=_gen(seed)) * 0.1 + 0.01
        z = torch.randint(qrange[0], qrange[1] + 1, (c,), generator=_gen(seed + 1), dtype=torch.int32)
        block = [n if d != axis else 1 for d, n in enumerate(shape)]
        grid = [1 if d != axis else c for d in range(len(shape))]
        fn = lambda t: torch.fake_quantize_per_channel_affine(t, s, z, axis, qrange[0], qrange[1])  # noqa: E731
        _check_fq(ref, x0, block, s.reshape(grid), z.reshape(grid), qrange[0], qrange[1], fn, seed, "per channel")


@case("fake_quant", "per channel at a tie next to the zero point: values where round(v) + z and round(v + z) differ")
def _check(ref):
    # 0.5 + 2**-24 rounds to 1 on its own, but 2 + (0.5 + 2**-24) is 2.5 in float32 and rounds to 2: torch rounds first
    v = torch.tensor([0.5 + 2 ** -24, -0.5 - 2 ** -24, 1.5 - 2 ** -23, 2.5 + 2 ** -22], dtype=torch.float32)
    x0 = torch.stack([v, v, v])  # channel k has zero point 2, 3, 100 and scale 1
    z = torch.tensor([2, 3, 100], dtype=torch.int32)
    fn = lambda t: torch.fake_quantize_per_channel_affine(t, torch.ones(3), z, 0, -128, 127)  # noqa: E731
    _check_fq(ref, x0, (1, 4), torch.ones(3, 1), z.reshape(3, 1), -128, 127, fn, 5, "near ties")


def _ao_fq_grad(x0, block, scale, zp, qdt, qmin, qmax, dout):
    """x.grad of torchao's _fake_quantize_affine under autograd: the path torchao's QAT trains through
    (_Round passes the gradient straight through, torch.clamp blocks it outside [qmin, qmax] inclusive).
    The chain multiplies by (1 / scale) and by scale, so it may differ from dout in the last bit."""
    x = x0.clone().requires_grad_()
    _ao()._fake_quantize_affine(x, block, scale, zp, qdt, qmin, qmax).backward(dout)
    return x.grad


def _check_group_fq(ref, x0, block, scale, zp, qrange, seed, what):
    qp = _ao()
    qdt = _target(*qrange)
    dout = torch.rand(x0.shape, generator=_gen(seed)) + 0.5
    x = x0.clone().requires_grad_()
    y = ref.fake_quantize(x, block, scale, zp, qrange[0], qrange[1])
    y.backward(dout)
    fq, cachemask = qp._fake_quantize_affine_cachemask(x0, block, scale, zp, qdt, qrange[0], qrange[1])
    _exact(y.detach(), fq, f"{what}: forward vs _fake_quantize_affine_cachemask")
    _exact(y.detach(), qp._fake_quantize_affine(x0, block, scale, zp, qdt, qrange[0], qrange[1]),
           f"{what}: forward vs _fake_quantize_affine")
    want = _ao_fq_grad(x0, block, scale, zp, qdt, qrange[0], qrange[1], dout)
    assert torch.equal(x.grad == 0, want == 0), f"{what}: the gradient is blocked at other elements than torchao's"
    _close(x.grad, want, f"{what}: x.grad vs autograd through torchao's _fake_quantize_affine", rtol=1e-6, atol=0)
    assert (x.grad == 0).any() and (x.grad != 0).any(), f"{what}: the case should clamp some values and pass others"
    # torchao's "outlier mask" is taken from the already clamped q, so it is all True (test_fake_quantize_affine_cachemask
    # expects exactly that): it is not the straight-through mask, and the lab's gradient is not dout * cachemask
    assert cachemask.all(), "torchao's cachemask is no longer all True"


for _group, _sym, _range in ((2, True, (-127, 127)), (16, False, INT8), (8, False, INT4)):
    @case("fake_quant", f"groups of {_group}, symmetric={_sym}, range {_range}: forward vs torchao _fake_quantize_affine[_cachemask], "
                        "gradient vs autograd through it (test_fake_quantize_affine[_cachemask], torchao QAT)")
    def _check(ref, group=_group, sym=_sym, qrange=_range):
        x0 = _randn(group, 6, 32)
        scale, zp = _ao_qparams(x0 * 0.8, (1, group), qrange, sym)  # 0.8: some values fall outside and clamp
        _check_group_fq(ref, x0, (1, group), scale, zp, qrange, group, f"groups of {group}")


@case("fake_quant", "2-d blocks (2, 4) and 3-d blocks (1, 2, 3) vs torchao _fake_quantize_affine (forward and autograd)")
def _check(ref):
    for shape, block, qrange, sym in (((4, 8), (2, 4), UINT8, False), ((2, 4, 6), (1, 2, 3), INT4, True)):
        x0 = _randn(sum(shape), *shape)
        scale, zp = _ao_qparams(x0 * 0.7, block, qrange, sym)
        _check_group_fq(ref, x0, block, scale, zp, qrange, 1, f"blocks {block}")


@case("fake_quant", "vs quantized_decomposed.fake_quant_per_channel (the PT2E autograd op): forward and gradient")
def _check(ref):
    x0 = _randn(95, 5, 4, 3, scale=3.0)
    s = torch.rand(4, generator=_gen(95)) * 0.05 + 0.02
    z = torch.randint(-10, 10, (4,), generator=_gen(96), dtype=torch.int32)
    fn = lambda t: _decomposed().fake_quant_per_channel(t, s, z, 1, -128, 127)  # noqa: E731
    _check_fq(ref, x0, (5, 1, 3), s.reshape(1, 4, 1), z.reshape(1, 4, 1), -128, 127, fn, 9, "decomposed")


@case("fake_quant", "with the qparams a torch.ao FakeQuantize module computes (test_fq_module_per_channel, test_fq_serializable_per_channel)")
def _check(ref):
    from torch.ao.quantization import FakeQuantize, default_per_channel_weight_observer
    xs = [torch.tensor([[-5, -3.5, -2, 0, 3, 5, 7], [1, 3, 2, 5, 6.5, 8, 10]], dtype=torch.float32), _randn(97, 3, 5, 4)]
    for x0, axis in ((xs[0], 0), (xs[1], 1)):
        fq = FakeQuantize(default_per_channel_weight_observer, quant_min=-128, quant_max=127, ch_axis=axis)
        xt = x0.clone().requires_grad_()
        dout = torch.rand(x0.shape, generator=_gen(axis)) + 0.5
        yt = fq(xt)
        yt.backward(dout)
        grid = [1] * x0.dim()
        grid[axis] = x0.shape[axis]
        block = [n if d != axis else 1 for d, n in enumerate(x0.shape)]
        x = x0.clone().requires_grad_()
        y = ref.fake_quantize(x, block, fq.scale.reshape(grid), fq.zero_point.to(torch.int32).reshape(grid), -128, 127)
        y.backward(dout)
        _exact(y.detach(), yt.detach(), f"forward (axis {axis})")
        _exact(x.grad, xt.grad, f"x.grad (axis {axis})")
        assert int(fq.zero_point.abs().sum()) == 0, "torch.ao's per-channel weight observer is symmetric: zero points 0"


@case("fake_quant", "inside a larger graph (non-leaf input, output used twice), per tensor, vs torch")
def _check(ref):
    x0 = _randn(98, 3, 6)
    grads = []
    for impl in ("lab", "torch"):
        x = x0.clone().requires_grad_()
        h = torch.sin(x) * 3
        if impl == "lab":
            y = ref.fake_quantize(h, (3, 6), torch.tensor([[0.05]]), torch.tensor([[4]], dtype=torch.int32), -64, 63)
        else:
            y = torch.fake_quantize_per_tensor_affine(h, 0.05, 4, -64, 63)
        (y * y.exp()).sum().backward()
        grads.append(x.grad)
    _close(grads[0], grads[1], "x.grad through the graph", rtol=1e-6, atol=1e-6)


@case("fake_quant", "returns float32 of x's shape, and a scale that requires grad gets none (the STE passes only x)")
def _check(ref):
    x = _randn(99, 2, 8).requires_grad_()
    s = torch.full((2, 1), 0.1, requires_grad=True)
    y = ref.fake_quantize(x, (1, 8), s, torch.zeros(2, 1, dtype=torch.int32), -8, 7)
    assert y.dtype == torch.float32 and tuple(y.shape) == (2, 8), f"got {y.dtype} {tuple(y.shape)}"
    y.sum().backward()
    assert s.grad is None, "the lab's FakeQuantize returns None for the scale"
    want = torch.fake_quantize_per_channel_affine(x.detach(), torch.full((2,), 0.1), torch.zeros(2, dtype=torch.int32),
                                                  0, -8, 7)
    _exact(y.detach(), want, "forward")


# =================================================================================================
# Part int8_linear: int_matmul and int8_linear. Modelled on PyTorch's test__int_mm (test_linalg.py:
# int8 x int8 -> int32 on M > 16, K and N multiples of 8, non-contiguous operands) and the quantized
# linear tests (test_quantized_op.py test_qlinear: uint8 per-tensor activations, int8 per-channel
# symmetric weights, float bias, requantized 8-bit output, fbgemm's quantized::linear as the oracle).
# =================================================================================================
MM = [  # (M, K, N, kind)
    (17, 8, 8, "random"), (32, 64, 16, "random"), (24, 2048, 8, "extreme"), (40, 16, 24, "transposed_b"),
]

for _m, _k, _n, _kind in MM:
    @case("int8_linear", f"int_matmul vs torch._int_mm: ({_m}, {_k}) @ ({_k}, {_n}), {_kind}")
    def _check(ref, m=_m, k=_k, n=_n, kind=_kind):
        g = _gen(m + k + n)
        if kind == "extreme":  # every product 127 * 127 or -128 * -128: float32 and int16 both lose this
            a = torch.where(torch.rand(m, k, generator=g) < 0.5, 127, -128).to(torch.int8)
            b = torch.where(a[:1].T.expand(k, n) > 0, 127, -128).to(torch.int8).contiguous()
        else:
            a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8)
            b = torch.randint(-128, 128, (k, n), generator=g, dtype=torch.int8)
        if kind == "transposed_b":
            b = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8).T  # a non-contiguous view
        _exact(ref.int_matmul(a, b), torch._int_mm(a, b.contiguous()), "a @ b")


for _adt, _bdt in ((torch.uint8, torch.int8), (torch.int8, torch.uint8), (torch.uint8, torch.uint8)):
    @case("int8_linear", f"int_matmul {_adt} @ {_bdt}: exact, vs torch._int_mm on operands shifted by 128 and an int64 matmul")
    def _check(ref, adt=_adt, bdt=_bdt):
        m, k, n = 24, 32, 16
        g = _gen(7)
        lo = {torch.uint8: 0, torch.int8: -128}
        a = torch.randint(lo[adt], lo[adt] + 256, (m, k), generator=g, dtype=torch.int64)
        b = torch.randint(lo[bdt], lo[bdt] + 256, (k, n), generator=g, dtype=torch.int64)
        want = (a @ b).to(torch.int32)
        # the same product through the library's int8 kernel: (a - sa)(b - sb) + sa * colsum(b) + sb * rowsum(a) - k sa sb
        sa, sb = 128 + lo[adt], 128 + lo[bdt]
        core = torch._int_mm((a - sa).to(torch.int8), (b - sb).to(torch.int8)).to(torch.int64)
        via_int_mm = core + sa * b.sum(0, keepdim=True) + sb * a.sum(1, keepdim=True) - k * sa * sb
        assert torch.equal(via_int_mm, want.to(torch.int64)), "the shift identity failed: the case is wrong"
        _exact(ref.int_matmul(a.to(adt), b.to(bdt)), want, "a @ b")


@case("int8_linear", "int_matmul stays exact past float32's 2**24: 255 * 255 * 4096 (1, 4096) @ (4096, 8)")
def _check(ref):
    a, b = torch.full((1, 4096), 255, dtype=torch.uint8), torch.full((4096, 8), 255, dtype=torch.uint8)
    got = ref.int_matmul(a, b)
    _exact(got, torch.full((1, 8), 255 * 255 * 4096, dtype=torch.int32), "a @ b")
    wide = torch.full((1, 4096), 255, dtype=torch.int64) @ torch.full((4096, 8), 255, dtype=torch.int64)
    _values(got, wide, "a @ b vs an int64 matmul", torch.int64)


@case("int8_linear", "int_matmul raises ValueError on 1-d / 3-d operands and mismatched inner sizes (torch._int_mm: RuntimeError)")
def _check(ref):
    a, b = torch.zeros(17, 8, dtype=torch.int8), torch.zeros(8, 8, dtype=torch.int8)
    for x, y in ((a[0], b), (a, b[0]), (a[None], b), (a, torch.zeros(16, 8, dtype=torch.int8))):
        _raises(lambda x=x, y=y: ref.int_matmul(x, y), ValueError, f"int_matmul of {tuple(x.shape)} and {tuple(y.shape)}")
        assert _library_rejects(lambda x=x, y=y: torch._int_mm(x, y)), "torch._int_mm accepts this"
    _exact(ref.int_matmul(a, b), torch._int_mm(a, b), "the same call with fitting shapes")


def _qlinear_engine():
    engines = torch.backends.quantized.supported_engines
    for e in ("fbgemm", "x86"):
        if e in engines:
            return e
    raise AssertionError(f"no fbgemm/x86 quantized engine here ({engines})")


def _fbgemm_linear(xq, xs, xz, wq, ws, bias, os_, oz):
    """torch's quantized::linear on the same integers. Its output is quint8: the lab's int8 output with
    zero point z is the same grid shifted by 128 (quint8 zero point z + 128, clamp 0..255)."""
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = _qlinear_engine()
    try:
        X = torch._make_per_tensor_quantized_tensor(xq, xs, xz)
        W = torch._make_per_channel_quantized_tensor(wq, ws.double(), torch.zeros(wq.shape[0], dtype=torch.long), 0)
        Y = torch.ops.quantized.linear(X, torch.ops.quantized.linear_prepack(W, bias), os_, oz + 128)
        return (Y.int_repr().to(torch.int32) - 128).to(torch.int8)
    finally:
        torch.backends.quantized.engine = old


QLIN = [  # (name, M, K, N, bias kind, per-tensor weight scale, x zero point, output scale)
    ("no bias", 5, 32, 6, None, False, 7, 0.05),
    ("no bias, per-tensor weight scale", 3, 64, 8, None, True, 0, 0.1),
    ("no bias, x zero point 127", 4, 16, 5, None, False, 127, 0.03),
    ("bias on the product-scale grid", 6, 32, 7, "grid", False, 11, 0.04),
    ("no bias, a small output scale: most outputs saturate at -128 / 127", 4, 48, 6, None, False, 3, 0.002),
]

for _i, (_name, _m, _k, _n, _bias, _pt, _xz, _os) in enumerate(QLIN):
    @case("int8_linear", f"int8_linear vs fbgemm quantized::linear, bit-exact: {_name}")
    def _check(ref, m=_m, k=_k, n=_n, bias_kind=_bias, per_tensor=_pt, xz=_xz, os_=_os, seed=_i, name=_name):
        g = _gen(200 + seed)
        # activations kept in 0..127: fbgemm's AVX2 path sums pairs of u8 * s8 products in int16 (vpmaddubsw)
        # and saturates above 32767; torch's observers use reduce_range for that reason. Below 128 it is exact.
        xq = torch.randint(0, 128, (m, k), generator=g, dtype=torch.uint8)
        wq = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
        xs = torch.tensor(0.0173)
        ws = torch.full((n,), 0.0041) if per_tensor else torch.rand(n, generator=g) * 0.01 + 1e-3
        bias = None
        if bias_kind == "grid":  # integers times the product scale: both the lab's rounding and fbgemm's float add agree
            bias = torch.randint(-3000, 3000, (n,), generator=g).float() * (xs * ws)
        oz = -3 + seed
        got = ref.int8_linear(xq, xs, xz, wq, ws, bias, torch.tensor(os_), oz)
        want = _fbgemm_linear(xq, xs.item(), xz, wq, ws, bias, os_, oz)
        _exact(got, want, "int8 output")
        if "saturate" in name:
            assert ((got == 127) | (got == -128)).float().mean() > 0.3, "the case lost its saturation"


def _small_operands(g, m, k, n, xz):
    """Activations within 3 of their zero point and weights in -3..3: small accumulators, so that a
    multiplier near 0.5 keeps the output inside int8 and one accumulator unit moves the output."""
    xq = (xz + torch.randint(-3, 4, (m, k), generator=g)).to(torch.uint8)
    wq = torch.randint(-3, 4, (n, k), generator=g, dtype=torch.int8)
    return xq, wq


@case("int8_linear", "the bias is rounded into the int32 accumulator with the product scale (the integers ATen's "
                     "quantize_per_channel to qint32 gives), then requantized: vs fbgemm on that grid, multiplier ~0.43")
def _check(ref):
    g = _gen(310)
    m, k, n, xz = 6, 16, 8, 60
    xq, wq = _small_operands(g, m, k, n, xz)
    xs, ws = torch.tensor(0.011), torch.rand(n, generator=g) * 0.004 + 0.008
    ps = xs * ws
    os_ = (ps[0] * 2.3).item()  # one accumulator unit is ~0.43 output steps: the bias's rounding shows
    bias = torch.randn(n, generator=g) * 40 * ps
    bias_q = torch.quantize_per_channel(bias, ps.double(), torch.zeros(n, dtype=torch.long), 0, torch.qint32).int_repr()
    assert torch.equal(bias_q, torch.round(bias / ps).to(torch.int32)), "the bias sits on a near-tie: the case is wrong"
    assert not torch.equal(bias_q, (bias / ps).to(torch.int32)), "truncating would agree here: the case lost its teeth"
    got = ref.int8_linear(xq, xs, xz, wq, ws, bias, torch.tensor(os_), 1)
    _exact(got, _fbgemm_linear(xq, xs.item(), xz, wq, ws, bias_q.float() * ps, os_, 1), "int8 output")


@case("int8_linear", "the requantization multiplier is (x_scale * w_scale) / out_scale: an out_scale of exactly twice the "
                     "product scale makes every odd accumulator a tie (half to even), vs fbgemm")
def _check(ref):
    g = _gen(320)
    for _ in range(5000):  # scales where (xs * ws) / os is exactly 0.5 but xs * (ws / os) is not
        xs, w0 = torch.rand(2, generator=g) * 0.05 + 1e-3
        os_ = xs * w0 * 2
        if (xs * w0) / os_ == 0.5 and xs * (w0 / os_) != 0.5:
            break
    else:
        raise AssertionError("no scales found: the case is wrong")
    m, k, n, xz = 8, 16, 6, 40
    xq, wq = _small_operands(g, m, k, n, xz)
    ws = torch.full((n,), w0.item())
    got = ref.int8_linear(xq, xs, xz, wq, ws, None, os_, -7)
    _exact(got, _fbgemm_linear(xq, xs.item(), xz, wq, ws, None, os_.item(), -7), "int8 output")
    acc = (xq.to(torch.int32) - xz) @ wq.to(torch.int32).T
    assert (acc % 2 == 1).any(), "no odd accumulator: the case lost its ties"


@case("int8_linear", "int8_linear with a general float bias vs fbgemm: within one output step (fbgemm adds the bias in float, "
                     "the lab rounds it to the accumulator first)")
def _check(ref):
    worst = 0
    for seed in range(6):
        g = _gen(300 + seed)
        m, k, n = 4, 32, 6
        xq = torch.randint(0, 128, (m, k), generator=g, dtype=torch.uint8)
        wq = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
        xs, ws, bias = torch.tensor(0.02), torch.rand(n, generator=g) * 0.01 + 1e-3, torch.randn(n, generator=g) * 2
        got = ref.int8_linear(xq, xs, 5, wq, ws, bias, torch.tensor(0.03), -2)
        want = _fbgemm_linear(xq, xs.item(), 5, wq, ws, bias, 0.03, -2)
        assert got.dtype == torch.int8 and got.shape == want.shape, f"got {got.dtype} {tuple(got.shape)}"
        worst = max(worst, (got.int() - want.int()).abs().max().item())
    assert worst <= 1, f"int8_linear is {worst} steps from fbgemm"


@case("int8_linear", "dequantized int8_linear approximates F.linear on float inputs within about one output step")
def _check(ref):
    g = _gen(400)
    x, w, bias = torch.randn(6, 40, generator=g).relu(), torch.randn(12, 40, generator=g), torch.randn(12, generator=g)
    xs, xz = ref.choose_qparams(x, (6, 40), 0, 255, False)
    ws, wz = _ao_qparams(w, (1, 40), INT8, True)
    y = F.linear(x, w, bias)
    ys, yz = _ao_qparams(y, (6, 12), INT8, False)
    xq = _ao().quantize_affine(x, (6, 40), xs, xz, torch.uint8, 0, 255)
    wq = _ao().quantize_affine(w, (1, 40), ws, wz, torch.int8, -128, 127)
    out = ref.int8_linear(xq, xs.reshape(()), int(xz), wq, ws.reshape(-1), bias, ys.reshape(()), int(yz))
    y_hat = _ao().dequantize_affine(out, (6, 12), ys, yz, torch.int8)
    err = ((y_hat - y).abs() / ys).max().item()
    assert err <= 1.5, f"the dequantized output is {err:.2f} output steps from F.linear"


# =================================================================================================
# Part int4: pack_int4, unpack_int4, int4_linear. Modelled on torchao's test_fp4_pack_unpack (the
# byte layout "7654:3210 = val1:val0": the first value in the low nibble), test_bitpacking.py
# (pack then unpack is the identity, several shapes), and the int4 weight-only tests (a group-wise
# int4 weight dequantized on the fly vs F.linear on the dequantized weight; ATen's CPU int4 kernel
# _weight_int4pack_mm_for_cpu with (scale, zero) pairs in the float-zero domain).
# =================================================================================================
def _mx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.prototype.mx_formats import kernels
    return kernels


def _nibbles(q):
    """int4 values as their 4-bit two's-complement codes (uint8 0..15), the input of torchao's pack_uint4."""
    return (q.to(torch.int16) & 0xF).to(torch.uint8)


def _signed(codes):
    c = codes.to(torch.int16)
    return torch.where(c >= 8, c - 16, c).to(torch.int8)


@case("int4", "pack_int4 of every pair (a, b) in -8..7 vs torchao pack_uint4 on the nibble codes")
def _check(ref):
    a, b = torch.meshgrid(torch.arange(-8, 8), torch.arange(-8, 8), indexing="ij")
    q = torch.stack([a.reshape(-1), b.reshape(-1)], dim=-1).to(torch.int8)  # (256, 2)
    got = ref.pack_int4(q)
    _exact(got, _mx().pack_uint4(_nibbles(q)), "packed bytes")
    assert sorted(got.reshape(-1).tolist()) == list(range(256)), "every byte should appear once"


for _shape in ((2, 8), (3, 4, 6), (1, 2), (5, 0), (2, 3, 2, 4)):
    @case("int4", f"pack_int4 / unpack_int4 of shape {_shape} vs torchao pack_uint4 / unpack_uint4 (test_bitpacking round trip)")
    def _check(ref, shape=_shape):
        q = torch.randint(-8, 8, shape, generator=_gen(sum(shape)), dtype=torch.int8)
        p = ref.pack_int4(q)
        _exact(p, _mx().pack_uint4(_nibbles(q)), "packed")
        _exact(ref.unpack_int4(p), q, "unpack(pack(q))")


@case("int4", "the byte layout of test_fp4_pack_unpack (val1 in bits 7..4, val0 in bits 3..0), through torchao's fp4 encoder")
def _check(ref):
    vals = torch.tensor([[0.0, 0.5, 4.0, -0.0], [-0.0, 1.0, -6.0, 3.0]])
    codes = _mx().f32_to_f4_unpacked(vals)  # 4-bit codes 0..15; read as two's complement they are int4 values
    expected = torch.tensor([[0b00010000, 0b10000110], [0b00101000, 0b01011111]], dtype=torch.uint8)
    _exact(ref.pack_int4(_signed(codes)), expected, "packed bytes")
    _exact(_nibbles(ref.unpack_int4(expected)), codes, "codes after unpack")


@case("int4", "unpack_int4 of all 256 bytes vs torchao unpack_uint4 and an arithmetic-shift identity; pack(unpack(p)) == p")
def _check(ref):
    p = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(16, 16)
    got = ref.unpack_int4(p)
    assert got.dtype == torch.int8 and tuple(got.shape) == (16, 32), f"got {got.dtype} {tuple(got.shape)}"
    _exact(_nibbles(got), _mx().unpack_uint4(p), "codes vs unpack_uint4")
    s = p.view(torch.int8)  # sign-extending shifts: low nibble (s << 4) >> 4, high nibble s >> 4
    low, high = torch.bitwise_left_shift(s, 4).bitwise_right_shift(4), s.bitwise_right_shift(4)
    _exact(got, torch.stack([low, high], dim=-1).reshape(16, 32), "signed values vs shifts")
    _exact(ref.pack_int4(got), p, "pack(unpack(p))")


@case("int4", "pack_int4 raises ValueError on an odd last dimension (torchao pack_uint4 asserts) and on values outside -8..7")
def _check(ref):
    _raises(lambda: ref.pack_int4(torch.zeros(2, 3, dtype=torch.int8)), ValueError, "pack_int4 of width 3")
    assert _library_rejects(lambda: _mx().pack_uint4(torch.zeros(2, 3, dtype=torch.uint8))), "pack_uint4 accepts width 3"
    for bad in (8, -9, 127, -128):
        q = torch.zeros(2, 4, dtype=torch.int8)
        q[1, 2] = bad
        _raises(lambda q=q: ref.pack_int4(q), ValueError, f"pack_int4 with a {bad}")
    _exact(ref.pack_int4(torch.full((2, 4), 7, dtype=torch.int8)), torch.full((2, 2), 0x77, dtype=torch.uint8), "sevens")


INT4_LIN = [  # (name, M, N, K, group, symmetric, bias, batch dims of x)
    ("groups of 32, asymmetric", 3, 16, 64, 32, False, False, ()),
    ("groups of 64, symmetric, bias", 5, 32, 128, 64, True, True, ()),
    ("one group per row (group = K), asymmetric, bias", 2, 16, 64, 64, False, True, ()),
    ("groups of 32, 3-d x (batch 2)", 4, 16, 64, 32, False, False, (2,)),
    ("groups of 128, asymmetric", 1, 32, 256, 128, False, True, ()),
]

for _i, (_name, _m, _n, _k, _g, _sym, _bias, _batch) in enumerate(INT4_LIN):
    @case("int4", f"int4_linear on a torchao-packed weight vs F.linear(dequantize_affine) and ATen's "
                  f"_weight_int4pack_mm_for_cpu: {_name}")
    def _check(ref, m=_m, n=_n, k=_k, group=_g, sym=_sym, with_bias=_bias, batch=_batch, seed=_i):
        qp = _ao()
        w = _randn(500 + seed, n, k)
        x = _randn(600 + seed, *batch, m, k)
        bias = _randn(700 + seed, n) if with_bias else None
        scale, zp = _ao_qparams(w, (1, group), INT4, sym)
        q = qp.quantize_affine(w, (1, group), scale, zp, torch.int8, -8, 7)
        packed = _mx().pack_uint4(_nibbles(q))  # packed by the library, not by the lab
        got = ref.int4_linear(x, packed, scale, zp, group, bias)
        w_hat = qp.dequantize_affine(q, (1, group), scale, zp, torch.int8, -8, 7)
        want = F.linear(x, w_hat, bias)
        _close(got, want, "y vs F.linear(x, dequantize_affine(q))", rtol=1e-5, atol=1e-5)
        # ATen's int4 CPU kernel: codes 0..15 (q + 8) and per-group (scale, zero) with w = (code - 8) * scale + zero,
        # so zero = -zp * scale in the float-zero domain
        p4 = torch.ops.aten._convert_weight_to_int4pack_for_cpu((q.to(torch.int32) + 8).contiguous(), 1)
        sz = torch.stack([scale.T, (-zp.to(torch.float32) * scale).T], dim=-1).contiguous()
        y4 = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, k), p4, group, sz).reshape(*batch, m, n)
        if bias is not None:
            y4 = y4 + bias
        _close(got, y4, "y vs _weight_int4pack_mm_for_cpu", rtol=1e-4, atol=1e-4)


# =================================================================================================
def run() -> int:
    """Every case against the reference; raises AssertionError listing every disagreement."""
    return SUITE.run()


if __name__ == "__main__":
    print(run(), "peer cases agree")
