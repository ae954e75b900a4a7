# ---
# jupyter:
#   inside_pytorch:
#     lab: lab08
#     title: Quantization
#   jupytext:
#     notebook_metadata_filter: inside_pytorch,kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Lab 8 — Quantization
#
# A quantized model stores and multiplies small integers instead of floats. Everything rests on one
# affine map between a float `x` and an integer `q`:
#
# $$q = \operatorname{clamp}\big(\operatorname{round}(x \cdot \tfrac{1}{s}) + z,\; q_{min},\; q_{max}\big),
# \qquad \hat{x} = (q - z)\cdot s$$
#
# with a **scale** $s$ (float) and a **zero point** $z$ (integer). In this lab you build that map
# and the machinery around it, and the graders compare you bit for bit with **torchao**, the
# library where PyTorch's quantization lives today (`torch.ao.quantization` is deprecated):
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `qparams` | integer ranges, and scale / zero point per tensor, per channel or per group (`block_size`) | 15 | 2 |
# | `quantize` | `quantize` and `dequantize`, bit-exact against `torchao`'s `quantize_affine` / `dequantize_affine` | 15 | 1 |
# | `observers` | a min-max observer, per tensor or per channel, with an optional moving average; a histogram observer that leaves out the tails | 15 | 2 |
# | `fake_quant` | fake quantization with a straight-through estimator, as an `autograd.Function` | 15 | 1 |
# | `int8_linear` | an integer matmul with int32 accumulation, and a fully int8 linear layer with requantization | 15 | 1 |
# | `int4` | int4 weights packed two per byte, and a group-wise int4 weight-only linear | 10 | 1.5 |
# | `ptq` | post-training quantization as a `torch.fx` graph pass, checked against torchao's PT2E flow | 15 | 3 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 11.5 in all.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests compare you with torchao or PyTorch. The hidden graders
# use more and different inputs, so a green `check` is a good sign, not a guarantee.
#
# Ground rules:
#
# * Use plain `torch` tensor operations. Your code may **not** import `torchao` (it is the graders'
#   oracle; the public tests and the exploration cells use it to show you the answer).
# * In parts 1–4 and 7 do not use PyTorch's own quantization functions either
#   (`torch.quantize_per_tensor` / `_per_channel`, `torch.fake_quantize_*`, quantized tensors,
#   `torch.ao.quantization`): they are what you are rebuilding there. The graders include cases
#   where they answer differently from this lab's spec (unsigned symmetric zero points, infinities
#   and huge values, bfloat16, groups), so a submission that leans on them loses those points. In
#   parts 5 and 6 any PyTorch operation is fair, `torch._int_mm` included, as long as the numbers
#   are exact: what those parts teach is the arithmetic and the layout, and the graders check both.
# * "Bit-exact" means the same integers and the same float32 bits. Follow each formula in the order
#   written, in the tensor's own dtype: `x * (1.0 / scale)` and `x / scale` differ in the last bit
#   often enough to move a rounding tie.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import math

import torch
import torch.nn.functional as F
from torch import nn

# %% [markdown] nbgrader={"grade": false, "grade_id": "qparams-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Ranges, scales and zero points (15 points)
#
# **Ranges.** `qrange(bits, signed)` returns `(qmin, qmax)`: two's complement for signed integers
# (`qrange(8, True) == (-128, 127)`, `qrange(4, True) == (-8, 7)`), `0 … 2**bits - 1` unsigned.
# `bits` is between 1 and 16 (anything else: `ValueError`).
#
# **From a range to qparams.** `qparams_from_minmax(min_val, max_val, qmin, qmax, symmetric, eps)`
# turns observed minima and maxima (float tensors of one shape) into `(scale, zero_point)` of that
# shape, element by element, in the dtype of `min_val` for the scale and `torch.int32` for the
# zero point:
#
# 1. widen the range to include 0: `lo = min(min_val, 0)`, `hi = max(max_val, 0)`
#    (so that 0 — padding, a ReLU's output — is exactly representable);
# 2. **symmetric**: `scale = max(-lo, hi) / ((qmax - qmin) / 2)` and
#    `zero_point = (qmin + qmax + 1) / 2` truncated toward zero (0 for int8, 128 for uint8);
#    **asymmetric**: `scale = (hi - lo) / (qmax - qmin)`, then (step 3) the floor, then
#    `zero_point = clamp(qmin - round(lo / scale), qmin, qmax)`;
# 3. floor the scale: `scale = max(scale, eps)`, so that an all-zero block still divides.
#    (Symmetric floors after computing the zero point, asymmetric before: the zero point uses the
#    floored scale.)
#
# `round` is `torch.round`: half to even, so `round(2.5) == 2`. The divisors
# `(qmax - qmin) / 2` and `qmax - qmin` are Python floats; divide the tensor by them.
#
# **Blocks.** `choose_qparams(x, block_size, qmin, qmax, symmetric, eps=None)` cuts `x` into blocks
# of shape `block_size` (one entry per dimension of `x`, each dividing that dimension) and computes
# one `(scale, zero_point)` per block from the block's min and max. The result has the shape of the
# block grid, `[x.shape[d] // block_size[d] for each d]`. So for a weight of shape `(N, K)`:
# per tensor is `block_size = (N, K)` (grid `(1, 1)`), per output channel `(1, K)` (grid `(N, 1)`),
# per group of 32 `(1, 32)` (grid `(N, K // 32)`). `eps=None` means
# `torch.finfo(torch.float32).eps`. `x` is float32 or bfloat16; scale has `x`'s dtype.
# Raise `ValueError` for a `block_size` of the wrong length or that does not divide, for an empty
# `x`, and for an `x` with a NaN or an infinity (there is no sensible range to choose).
#
# *Hint*: a reshape turns blocks into dimensions you can reduce over: `(N, K)` with blocks
# `(1, 32)` is a view of shape `(N, 1, K // 32, 32)`; `amin`/`amax` over the block dimensions.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "qparams-solution", "locked": false, "schema_version": 3, "solution": true}
def qrange(bits, signed):
    """(qmin, qmax) of a `bits`-bit integer."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 qparams-solution
    if not isinstance(bits, int) or not 1 <= bits <= 16:
        raise ValueError(f"bits must be an int in 1..16, got {bits!r}")
    if signed:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1
    ### END SOLUTION


def qparams_from_minmax(min_val, max_val, qmin, qmax, symmetric, eps):
    """Element-wise (scale, zero_point) for the ranges [min_val, max_val]."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 qparams-solution
    lo = torch.minimum(min_val, torch.zeros_like(min_val))
    hi = torch.maximum(max_val, torch.zeros_like(max_val))
    if symmetric:
        scale = torch.maximum(-lo, hi) / (float(qmax - qmin) / 2)
        zero_point = torch.full_like(scale, int((qmax + qmin + 1) / 2))
        scale = scale.clamp(min=eps)
    else:
        scale = (hi - lo) / float(qmax - qmin)
        scale = scale.clamp(min=eps)
        zero_point = torch.clamp(qmin - torch.round(lo / scale), qmin, qmax)
    return scale, zero_point.to(torch.int32)
    ### END SOLUTION


def _blocked(x, block_size):
    """x viewed as (g0, b0, g1, b1, ...): grid and block dimensions interleaved."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 qparams-solution
    block_size = tuple(block_size)
    if len(block_size) != x.dim():
        raise ValueError(f"block_size {block_size} needs one entry per dimension of a {x.dim()}-d tensor")
    shape = []
    for size, block in zip(x.shape, block_size):
        if block < 1 or size % block:
            raise ValueError(f"block size {block} does not divide dimension {size}")
        shape += [size // block, block]
    return x.reshape(shape)
    ### END SOLUTION


def choose_qparams(x, block_size, qmin, qmax, symmetric, eps=None):
    """One (scale, zero_point) per block of x, shaped as the block grid."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 qparams-solution
    if x.numel() == 0:
        raise ValueError("cannot choose qparams for an empty tensor")
    if not torch.isfinite(x).all():
        raise ValueError("x has a NaN or an infinity")
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    blocks = _blocked(x, block_size)
    dims = tuple(range(1, blocks.dim(), 2))
    grid = [s // b for s, b in zip(x.shape, block_size)]
    min_val = blocks.amin(dim=dims).reshape(grid)
    max_val = blocks.amax(dim=dims).reshape(grid)
    return qparams_from_minmax(min_val, max_val, qmin, qmax, symmetric, eps)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "qparams-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: a weight row holds [-1.0, 0.5, 3.0]. What are the int8 scale and zero point,
# symmetric and asymmetric? (Then compare with torchao below.)
w = torch.tensor([[-1.0, 0.5, 3.0, 0.25], [0.1, 0.2, 0.3, 0.4]])
for symmetric in (True, False):
    print("symmetric" if symmetric else "asymmetric", choose_qparams(w, (1, 4), -128, 127, symmetric))

from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine  # noqa: E402
print("torchao   ", choose_qparams_affine(w, MappingType.SYMMETRIC, (1, 4), torch.int8, -128, 127,
                                          eps=torch.finfo(torch.float32).eps, keepdim=True))

# %% nbgrader={"grade": true, "grade_id": "qparams", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Ranges, scales and zero points"
check("qparams")

# %% [markdown] nbgrader={"grade": false, "grade_id": "quantize-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — Quantize and dequantize (15 points)
#
# `quantize(x, block_size, scale, zero_point, qmin, qmax, dtype)` maps every element of `x` with
# the `(scale, zero_point)` of its block (scale and zero point have the block grid's shape, as
# `choose_qparams` returns them):
#
# ```
# q = clamp(round(x * (1.0 / scale)) + zero_point, qmin, qmax)      computed in x's dtype
# ```
#
# then converts to `dtype` (`torch.int8`, `torch.uint8`, `torch.int16` or `torch.int32`; int4
# values live in `torch.int8`). Compute `1.0 / scale` first and multiply by it; `round` is half to
# even. An infinity saturates (`+inf` → `qmax`); a NaN has no integer: raise `ValueError`.
#
# `dequantize(q, block_size, scale, zero_point)` is the way back, in float32:
#
# ```
# x_hat = (q.float() - zero_point.float()) * scale
# ```
#
# Both return the shape of their input; both raise `ValueError` where `block_size` does not fit.
#
# *Hint*: the blocked view of part 1 and a view of the scale as `(g0, 1, g1, 1, ...)` broadcast
# against each other.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "quantize-solution", "locked": false, "schema_version": 3, "solution": true}
def _grid_view(t, x_shape, block_size):
    """scale or zero point (grid-shaped) viewed as (g0, 1, g1, 1, ...) to broadcast over blocks."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 quantize-solution
    shape = []
    for size, block in zip(x_shape, block_size):
        shape += [size // block, 1]
    return t.reshape(shape)
    ### END SOLUTION


def quantize(x, block_size, scale, zero_point, qmin, qmax, dtype=torch.int8):
    """Integers q of x's shape in `dtype`."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 quantize-solution
    if torch.isnan(x).any():
        raise ValueError("cannot quantize a NaN")
    blocks = _blocked(x, block_size)
    s = _grid_view(scale, x.shape, block_size)
    z = _grid_view(zero_point, x.shape, block_size)
    q = torch.clamp(torch.round(blocks * (1.0 / s)) + z, qmin, qmax)
    return q.reshape(x.shape).to(dtype)
    ### END SOLUTION


def dequantize(q, block_size, scale, zero_point):
    """float32 x_hat of q's shape."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 quantize-solution
    blocks = _blocked(q, block_size)
    s = _grid_view(scale, q.shape, block_size)
    z = _grid_view(zero_point, q.shape, block_size)
    x_hat = (blocks.to(torch.float32) - z.to(torch.float32)) * s
    return x_hat.reshape(q.shape).to(torch.float32)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "quantize-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: with scale 0.5 and zero point 0, what do 0.25, 0.75 and 1.25 quantize to?
x = torch.tensor([[0.25, 0.75, 1.25, -0.25]])
s, z = torch.tensor([[0.5]]), torch.tensor([[0]], dtype=torch.int32)
print(quantize(x, (1, 4), s, z, -128, 127))
torch.manual_seed(0)
w = torch.randn(8, 64)
for name, block in [("per tensor", (8, 64)), ("per channel", (1, 64)), ("per group of 16", (1, 16))]:
    s, z = choose_qparams(w, block, -8, 7, symmetric=True)
    err = w - dequantize(quantize(w, block, s, z, -8, 7), block, s, z)
    print(f"int4 {name:16s} mean |error| {err.abs().mean():.4f}")

# %% nbgrader={"grade": true, "grade_id": "quantize", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Quantize and dequantize"
check("quantize")

# %% [markdown] nbgrader={"grade": false, "grade_id": "observers-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Observers (15 points)
#
# To quantize activations, a model first runs on calibration data while **observers** watch the
# tensors that will be quantized and record their range. `MinMaxObserver(qmin, qmax, symmetric,
# axis=None, averaging_constant=None, eps=None)` is an `nn.Module` whose `forward(x)` records and
# returns `x` unchanged (the same object):
#
# * `axis=None`: one range for the whole tensor (`min_val`, `max_val` are 0-d tensors);
#   `axis=a` (negative allowed): one range per index along dimension `a`, over all the other
#   dimensions (shape `(x.shape[a],)`); a later batch with another size along `a` is a `ValueError`.
# * `averaging_constant=None`: the running range is the min of all minima and the max of all
#   maxima seen. `averaging_constant=c`: the first batch sets the range, each later batch moves it
#   `min_val = min_val + c * (batch_min - min_val)` (and the same for `max_val`), in float32.
# * An empty batch changes nothing. Batches are float32; store the range as float32 tensors in
#   the attributes `min_val` and `max_val` (`None` until the first non-empty batch).
# * `calculate_qparams()` returns `qparams_from_minmax(min_val, max_val, ...)` with `eps=None`
#   meaning `torch.finfo(torch.float32).eps`; before any data it raises `RuntimeError`.
#
# Observers are the deprecated `torch.ao.quantization.observer` classes' idea, and torchao's PT2E
# flow still inserts this kind of module into the graph before calibration.
#
# **A histogram observer.** One outlier stretches a min-max range, and every other value then gets
# fewer levels. A histogram observer counts how many values fall in each bin, and afterwards chooses a
# range that leaves out a small fraction `tail` of the values at each end. (torch.ao's
# `HistogramObserver` keeps 2048 bins over a range that grows, re-binning as it grows, and searches
# for the range with the smallest quantization error; this one is simpler, and exact.)
# `HistogramObserver(qmin, qmax, symmetric, bin_width, tail=0.0, eps=None)`, per tensor:
#
# * Bins have a fixed width, a power of two (`2.0 ** -6`, `0.25`, `1.0`, `4.0`; any other width,
#   zero or negative included, is a `ValueError`), and are aligned at 0: the value `v` falls in bin
#   `k = floor(v / bin_width)`, which covers `[k * bin_width, (k + 1) * bin_width)`. Dividing by a
#   power of two is exact in floating point, so every correct implementation agrees on `k`. Negative
#   values have negative bins: with width 1, `-0.1` is in bin `-1` and `2.0` in bin `2`.
# * `forward(x)` adds each value of `x` to its bin's count and returns `x` (the same object). An empty
#   batch changes nothing; a batch holding a NaN or an infinity raises `ValueError` and changes
#   nothing. `self.bins` is a dict `{k: count}` of Python ints, with the bins that hold at least one value.
# * `range()` returns `(min_val, max_val)`, 0-d float32 tensors. With `N` values seen so far and
#   `drop = math.floor(tail * N)`, `min_val` is the left edge of the bin that holds the
#   `(drop + 1)`-th smallest value, and `max_val` the right edge of the bin that holds the
#   `(drop + 1)`-th largest. `tail` must be in `[0, 0.5)` (otherwise a `ValueError` from the constructor).
# * `calculate_qparams()` returns `qparams_from_minmax(min_val, max_val, ...)` as `MinMaxObserver`
#   does. Before any data, `range()` and `calculate_qparams()` raise `RuntimeError`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "observers-solution", "locked": false, "schema_version": 3, "solution": true}
class MinMaxObserver(nn.Module):
    def __init__(self, qmin, qmax, symmetric, axis=None, averaging_constant=None, eps=None):
        super().__init__()
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        self.qmin, self.qmax, self.symmetric = qmin, qmax, symmetric
        self.axis, self.averaging_constant = axis, averaging_constant
        self.eps = torch.finfo(torch.float32).eps if eps is None else eps
        self.min_val = None
        self.max_val = None
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        if x.numel() == 0:
            return x
        t = x.detach().to(torch.float32)
        if self.axis is None:
            lo, hi = t.amin(), t.amax()
        else:
            axis = self.axis % t.dim()
            rows = t.movedim(axis, 0).reshape(t.shape[axis], -1)
            lo, hi = rows.amin(dim=1), rows.amax(dim=1)
            if self.min_val is not None and self.min_val.shape != lo.shape:
                raise ValueError(f"observed {lo.shape[0]} channels, expected {self.min_val.shape[0]}")
        if self.min_val is None:
            self.min_val, self.max_val = lo.clone(), hi.clone()
        elif self.averaging_constant is None:
            self.min_val = torch.minimum(self.min_val, lo)
            self.max_val = torch.maximum(self.max_val, hi)
        else:
            c = self.averaging_constant
            self.min_val = self.min_val + c * (lo - self.min_val)
            self.max_val = self.max_val + c * (hi - self.max_val)
        return x
        ### END SOLUTION

    def calculate_qparams(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        if self.min_val is None:
            raise RuntimeError("the observer has seen no data")
        return qparams_from_minmax(self.min_val, self.max_val, self.qmin, self.qmax, self.symmetric, self.eps)
        ### END SOLUTION


class HistogramObserver(nn.Module):
    def __init__(self, qmin, qmax, symmetric, bin_width, tail=0.0, eps=None):
        super().__init__()
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        if math.frexp(bin_width)[0] != 0.5:          # 0.5 for positive powers of two only
            raise ValueError(f"bin_width must be a power of two, got {bin_width}")
        if not 0.0 <= tail < 0.5:
            raise ValueError(f"tail must be in [0, 0.5), got {tail}")
        self.qmin, self.qmax, self.symmetric = qmin, qmax, symmetric
        self.bin_width, self.tail = float(bin_width), float(tail)
        self.eps = torch.finfo(torch.float32).eps if eps is None else eps
        self.bins = {}
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        t = x.detach().to(torch.float32).reshape(-1)
        if not bool(torch.isfinite(t).all()):
            raise ValueError("a histogram observer cannot count NaN or infinite values")
        ks, counts = torch.unique(torch.floor(t / self.bin_width).to(torch.int64), return_counts=True)
        for k, n in zip(ks.tolist(), counts.tolist()):
            self.bins[k] = self.bins.get(k, 0) + n
        return x
        ### END SOLUTION

    def range(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        if not self.bins:
            raise RuntimeError("the observer has seen no data")
        drop = math.floor(self.tail * sum(self.bins.values()))

        def edge_bin(keys):
            seen = 0
            for k in keys:
                seen += self.bins[k]
                if seen > drop:
                    return k

        lo, hi = edge_bin(sorted(self.bins)), edge_bin(sorted(self.bins, reverse=True))
        return (torch.tensor(lo * self.bin_width, dtype=torch.float32),
                torch.tensor((hi + 1) * self.bin_width, dtype=torch.float32))
        ### END SOLUTION

    def calculate_qparams(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 observers-solution
        min_val, max_val = self.range()
        return qparams_from_minmax(min_val, max_val, self.qmin, self.qmax, self.symmetric, self.eps)
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "observers-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: a moving average with c = 0.1 sees a batch with max 10 and then nine batches with
# max 1. Where does its max end up? Where does the plain min-max observer's?
plain, moving = MinMaxObserver(0, 255, False), MinMaxObserver(0, 255, False, averaging_constant=0.1)
for i in range(10):
    batch = torch.linspace(-1, 10 if i == 0 else 1, 50)
    plain(batch)
    moving(batch)
print("min-max max:", plain.max_val.item(), " moving-average max:", round(moving.max_val.item(), 4))

# Predict first: 1000 values from a normal distribution plus one outlier at 40. Which range does a
# min-max observer choose, and which does a histogram observer with tail=0.001 choose?
acts = torch.cat([torch.randn(1000, generator=torch.Generator().manual_seed(0)), torch.tensor([40.0])])
hist = HistogramObserver(0, 255, False, bin_width=0.25, tail=0.001)
hist(acts)
print("min-max range:", [acts.min().item(), acts.max().item()])
print("histogram range:", [v.item() for v in hist.range()], " bins used:", len(hist.bins))

# %% nbgrader={"grade": true, "grade_id": "observers", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Observers"
check("observers")

# %% [markdown] nbgrader={"grade": false, "grade_id": "fakequant-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Fake quantization and the straight-through estimator (15 points)
#
# Quantization-aware training (QAT) trains in float but makes the forward pass see the rounding:
# each weight (and activation) goes through **fake quantization**, `dequantize(quantize(x))`, a
# float tensor that holds only representable values. Its true derivative is zero almost everywhere
# (rounding is a staircase), which would stop learning. The **straight-through estimator** (STE)
# pretends rounding is the identity inside the range and blocks the gradient where the value was
# clamped:
#
# $$\frac{\partial L}{\partial x} = \frac{\partial L}{\partial \hat{x}} \cdot
# \mathbb{1}\big[q_{min} \le \operatorname{round}(x \cdot \tfrac1s) + z \le q_{max}\big]$$
#
# (the unclamped `round(x * (1.0 / scale)) + zero_point`, both ends inclusive).
#
# Write `FakeQuantize`, an `autograd.Function` with `forward(x, block_size, scale, zero_point,
# qmin, qmax)` returning `dequantize(quantize(x, ...), ...)` as float32 (your parts 1–2 with
# `dtype=torch.int32`), and a `backward` that returns the STE gradient for `x` and `None` for the
# rest. Save what backward needs (the mask is enough). `fake_quantize(...)` calls it. For
# per-tensor and per-channel blocks PyTorch's `torch.fake_quantize_per_channel_affine` computes the
# same forward and gradient (it is the graders' oracle there; your code may not call it).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "fakequant-solution", "locked": false, "schema_version": 3, "solution": true}
class FakeQuantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, block_size, scale, zero_point, qmin, qmax):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 fakequant-solution
        blocks = _blocked(x, block_size)
        s = _grid_view(scale, x.shape, block_size)
        z = _grid_view(zero_point, x.shape, block_size)
        unclamped = torch.round(blocks * (1.0 / s)) + z
        ctx.save_for_backward(((unclamped >= qmin) & (unclamped <= qmax)).reshape(x.shape))
        q = quantize(x, block_size, scale, zero_point, qmin, qmax, torch.int32)
        return dequantize(q, block_size, scale, zero_point)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_out):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 fakequant-solution
        (mask,) = ctx.saved_tensors
        return grad_out * mask, None, None, None, None, None
        ### END SOLUTION


def fake_quantize(x, block_size, scale, zero_point, qmin, qmax):
    return FakeQuantize.apply(x, block_size, scale, zero_point, qmin, qmax)


# %% nbgrader={"grade": false, "grade_id": "fakequant-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: int4 (-8..7), scale 1. Which of these x get a gradient?
x = torch.tensor([[-9.0, -8.4, -8.6, 0.3, 6.9, 7.4, 7.6]], requires_grad=True)
y = fake_quantize(x, (1, 7), torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.int32), -8, 7)
y.sum().backward()
print("x_hat:", y.detach().tolist())
print("grad: ", x.grad.tolist())

# %% nbgrader={"grade": true, "grade_id": "fake_quant", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Fake quantization and the straight-through estimator"
check("fake_quant")

# %% [markdown] nbgrader={"grade": false, "grade_id": "int8-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — An int8 linear layer (15 points)
#
# **Integer matmul.** `int_matmul(a, b)` multiplies `a` (int8 or uint8, shape `(M, K)`) by `b`
# (int8 or uint8, `(K, N)`) and returns the **exact** `(M, N)` result in `torch.int32` (`ValueError`
# when `a` or `b` is not 2-d or the inner sizes differ). Products of
# two 8-bit numbers reach 16384 and a few hundred of them overflow int16; int8 arithmetic wraps
# at the first product; and float32 is exact only up to $2^{24}$, which long rows of large values
# pass. So: widen to int32 *before* multiplying, and accumulate in int32 (that is what x86's
# VNNI instructions and fbgemm do in hardware).
#
# **The layer.** `int8_linear(xq, x_scale, x_zp, wq, w_scale, bias, out_scale, out_zp)` computes a
# whole quantized `F.linear` in integers and produces int8 output:
#
# * `xq`: uint8 `(M, K)` activations, per tensor, asymmetric: 0-d float32 `x_scale`, int `x_zp`;
# * `wq`: int8 `(N, K)` weights, per output channel, symmetric (zero point 0): float32 `w_scale` `(N,)`;
# * `bias`: float32 `(N,)` or `None`; output: int8 `(M, N)` with 0-d float32 `out_scale`, int `out_zp`.
#
# In this order, in float32 where floats appear:
#
# 1. `acc = int_matmul(xq - x_zp, wq.T)` (subtract the zero point in int32, so nothing wraps);
# 2. with a bias: `acc += round(bias / (x_scale * w_scale))` as int32 — the bias is quantized with the
#    product scale, so it adds directly to the accumulator;
# 3. **requantize**: `out = clamp(round(acc.float() * (x_scale * w_scale / out_scale)) + out_zp, -128, 127)`
#    as int8, with the multiplier computed as written (`(x_scale * w_scale) / out_scale`).
#
# Dequantized, `out` approximates `F.linear(x, w, bias)` within about one output step.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "int8-solution", "locked": false, "schema_version": 3, "solution": true}
def int_matmul(a, b):
    """Exact (M, K) @ (K, N) of 8-bit integers, as int32."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 int8-solution
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"cannot multiply {tuple(a.shape)} by {tuple(b.shape)}")
    return a.to(torch.int32) @ b.to(torch.int32)
    ### END SOLUTION


def int8_linear(xq, x_scale, x_zp, wq, w_scale, bias, out_scale, out_zp):
    """Quantized F.linear: uint8 activations, int8 per-channel weights, int8 output."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 int8-solution
    acc = int_matmul(xq.to(torch.int32) - x_zp, wq.to(torch.int32).T)
    product_scale = x_scale * w_scale
    if bias is not None:
        acc = acc + torch.round(bias / product_scale).to(torch.int32)
    multiplier = product_scale / out_scale
    out = torch.clamp(torch.round(acc.to(torch.float32) * multiplier) + out_zp, -128, 127)
    return out.to(torch.int8)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "int8-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: a row of 2048 products 127 * 127 summed in float32 — exact or not?
a = torch.full((1, 2048), 127, dtype=torch.int8)
b = torch.full((2048, 1), 127, dtype=torch.int8)
print("int32 :", int_matmul(a, b).item(), " float32:", (a.float() @ b.float()).item(), " exact:", 2048 * 127 * 127)
# a quantized layer against float
torch.manual_seed(0)
x, w, bias = torch.randn(4, 16).relu(), torch.randn(8, 16), torch.randn(8)
xs, xz = choose_qparams(x, (4, 16), 0, 255, False)
ws, wz = choose_qparams(w, (1, 16), -128, 127, True)
ref = F.linear(x, w, bias)
os_, oz = choose_qparams(ref, (4, 8), -128, 127, False)
out = int8_linear(quantize(x, (4, 16), xs, xz, 0, 255, torch.uint8), xs.reshape(()), int(xz),
                  quantize(w, (1, 16), ws, wz, -128, 127), ws.reshape(-1), bias, os_.reshape(()), int(oz))
print("max |error| in output steps:", ((dequantize(out, (4, 8), os_, oz) - ref).abs().max() / os_).item())

# %% nbgrader={"grade": true, "grade_id": "int8_linear", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="An int8 linear layer"
check("int8_linear")

# %% [markdown] nbgrader={"grade": false, "grade_id": "int4-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — int4 weights, two per byte (10 points)
#
# Large language models are often served with 4-bit weights and float activations ("weight-only"
# quantization): the weights take a quarter of their bf16 memory, and each matmul dequantizes a
# tile on the fly. Two int4 values share one byte.
#
# * `pack_int4(q)`: `q` is int8 with values in `-8 … 7`, shape `(..., K)` with `K` even; return
#   uint8 `(..., K // 2)` where byte `i` holds `q[..., 2i]` in its **low** nibble and
#   `q[..., 2i + 1]` in its **high** nibble, each as a 4-bit two's complement (`-1` is `0b1111`).
#   Values outside `-8 … 7` or an odd `K`: `ValueError`.
# * `unpack_int4(p)`: the inverse, int8 `(..., 2 * K')` with the sign restored.
# * `int4_linear(x, packed_w, scale, zero_point, group_size, bias=None)`: `packed_w` is `pack_int4`
#   of an int4 weight `(N, K)`; `scale` (float32) and `zero_point` (int32) have shape
#   `(N, K // group_size)` (one pair per group of `group_size` consecutive inputs of a row, as
#   `choose_qparams(w, (1, group_size), -8, 7, ...)` gives them). Return
#   `F.linear(x, w_hat, bias)` with `w_hat` = the dequantized weight (float32, within float
#   rounding of the graders' result: the order of the sum may differ).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "int4-solution", "locked": false, "schema_version": 3, "solution": true}
def pack_int4(q):
    """int8 values in [-8, 7], (..., K) with K even -> uint8 (..., K // 2), low nibble first."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 int4-solution
    if q.shape[-1] % 2:
        raise ValueError(f"the last dimension must be even to pack, got {q.shape[-1]}")
    if q.numel() and (q.min() < -8 or q.max() > 7):
        raise ValueError("int4 values must lie in [-8, 7]")
    nibbles = q.to(torch.int32) & 0xF
    return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).to(torch.uint8)
    ### END SOLUTION


def unpack_int4(p):
    """uint8 (..., K') -> int8 (..., 2 K') with signs restored."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 int4-solution
    p = p.to(torch.int32)
    low, high = p & 0xF, (p >> 4) & 0xF
    both = torch.stack((low, high), dim=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])
    return torch.where(both >= 8, both - 16, both).to(torch.int8)
    ### END SOLUTION


def int4_linear(x, packed_w, scale, zero_point, group_size, bias=None):
    """F.linear with group-wise int4 weights dequantized on the fly."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 int4-solution
    q = unpack_int4(packed_w)
    w_hat = dequantize(q, (1, group_size), scale, zero_point)
    return F.linear(x, w_hat, bias)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "int4-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: what byte holds the pair (-1, 2)? And how many bytes does a 4096 x 4096 int4 weight take?
print(pack_int4(torch.tensor([-1, 2], dtype=torch.int8)))
torch.manual_seed(0)
w, x = torch.randn(64, 256), torch.randn(3, 256)
s, z = choose_qparams(w, (1, 32), -8, 7, symmetric=False)
packed = pack_int4(quantize(w, (1, 32), s, z, -8, 7))
print(f"{packed.numel()} bytes instead of {w.numel() * 4};",
      "max |y - y_float|:", (int4_linear(x, packed, s, z, 32) - x @ w.T).abs().max().item())

# %% nbgrader={"grade": true, "grade_id": "int4", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="int4 weights, two per byte"
check("int4")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ptq-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — Post-training quantization as a graph pass (15 points)
#
# Everything so far worked on one tensor. A whole model is quantized by a **graph pass**. torchao's
# PT2E flow (the current one; `torch.ao.quantization`'s eager and FX flows are deprecated) goes:
#
# ```python
# gm = torch.export.export(model, example_inputs).module()
# gm = prepare_pt2e(gm, X86InductorQuantizer().set_global(config))   # insert observers
# for batch in calibration_data: gm(batch)                            # calibrate
# gm = convert_pt2e(gm)                                               # observers -> quantize/dequantize
# ```
#
# and the converted graph (printed below) computes every `linear` on **fake-quantized** operands:
# the input through a per-tensor uint8 quantize → dequantize pair with the calibrated range, the
# weight as int8 per output channel, dequantized; the bias stays float. (A backend such as Inductor
# then pattern-matches each `dequantize → linear → ...` into a real int8 kernel.) You build the
# same two passes on a `torch.fx.GraphModule` from `symbolic_trace`, for models made of `nn.Linear`
# modules and anything else:
#
# * `prepare_ptq(gm)`: before **every** `call_module` node whose module is an `nn.Linear`, insert a
#   `call_module` node to a new `MinMaxObserver(0, 255, symmetric=False)` (your part 3) registered on
#   `gm`, and make the Linear read the observer's output. One observer per Linear *call*: a Linear
#   used twice gets two, and two Linears reading the same tensor get one each. Recompile and return
#   `gm`. A prepared model computes exactly what the float model computes.
# * `convert_ptq(gm)`: replace each observed Linear call by a call to a new `QuantLinear` module built
#   from that Linear and its observer's `calculate_qparams()`; the observer nodes and modules
#   disappear; recompile and return `gm`.
# * `QuantLinear(linear, x_scale, x_zero_point)` holds the buffers `weight_q` (int8, `(N, K)`,
#   per output channel, symmetric: `choose_qparams(w, (1, K), -128, 127, True)`), `weight_scale`
#   (`(N, 1)` float32), `x_scale` and `x_zero_point` (as the observer gave them), and `bias` (float or
#   `None`). `forward(x)` (any number of leading dimensions, at least one row) is
#   `F.linear(x_hat, w_hat, bias)` with `x_hat` = `x` quantized per tensor to `[0, 255]` and dequantized,
#   and `w_hat = dequantize(weight_q, ...)`.
#
# The graders trace small models (chains, a residual branch, a Linear used twice, 3-d inputs),
# calibrate them on data they choose and compare your converted model with torchao's PT2E result on
# the same model and data, and your `weight_q` / scales with their own. (They configure PT2E with
# min-max observers like yours. The default x86 config, used below, observes activations with a
# histogram observer that trims outliers, so its scales come out a little smaller.)

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ptq-solution", "locked": false, "schema_version": 3, "solution": true}
class QuantLinear(nn.Module):
    def __init__(self, linear, x_scale, x_zero_point):
        super().__init__()
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 ptq-solution
        w = linear.weight.detach().to(torch.float32)
        k = w.shape[1]
        scale, zp = choose_qparams(w, (1, k), -128, 127, True)
        self.register_buffer("weight_q", quantize(w, (1, k), scale, zp, -128, 127, torch.int8))
        self.register_buffer("weight_scale", scale)
        self.register_buffer("x_scale", x_scale.detach().clone())
        self.register_buffer("x_zero_point", x_zero_point.detach().clone())
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        # IPT-CANARY lab08 ptq-solution
        rows = x.reshape(1, -1)
        s, z = self.x_scale.reshape(1, 1), self.x_zero_point.reshape(1, 1)
        q = quantize(rows, tuple(rows.shape), s, z, 0, 255, torch.uint8)
        x_hat = dequantize(q, tuple(rows.shape), s, z).reshape(x.shape)
        k = self.weight_q.shape[1]
        w_hat = dequantize(self.weight_q, (1, k), self.weight_scale, torch.zeros_like(self.weight_scale, dtype=torch.int32))
        return F.linear(x_hat, w_hat, self.bias)
        ### END SOLUTION


def prepare_ptq(gm):
    """Insert a MinMaxObserver before every nn.Linear call of a torch.fx.GraphModule."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 ptq-solution
    modules = dict(gm.named_modules())
    count = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and isinstance(modules.get(node.target), nn.Linear):
            name = f"ptq_observer_{count}"
            count += 1
            gm.add_submodule(name, MinMaxObserver(0, 255, symmetric=False))
            with gm.graph.inserting_before(node):
                observed = gm.graph.call_module(name, (node.args[0],))
            node.replace_input_with(node.args[0], observed)
    gm.recompile()
    return gm
    ### END SOLUTION


def convert_ptq(gm):
    """Replace every observed nn.Linear call by a QuantLinear; drop the observers."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab08 ptq-solution
    modules = dict(gm.named_modules())
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.Linear):
            continue
        observed = node.args[0]
        observer = modules[observed.target]
        x_scale, x_zero_point = observer.calculate_qparams()
        name = f"ptq_linear_{count}"
        count += 1
        gm.add_submodule(name, QuantLinear(modules[node.target], x_scale, x_zero_point))
        node.target = name
        node.replace_input_with(observed, observed.args[0])
        gm.graph.erase_node(observed)
        gm.delete_submodule(observed.target)
    gm.graph.lint()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return gm
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ptq-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: on the digits, how much accuracy does int8 PTQ of a small MLP cost? And how much
# smaller are its Linear weights?
import logging  # noqa: E402
import warnings  # noqa: E402

from sklearn.datasets import load_digits  # noqa: E402

logging.getLogger("torchao").setLevel(logging.ERROR)
digits = load_digits()
X, y = torch.tensor(digits.data, dtype=torch.float32) / 16, torch.tensor(digits.target)
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(mlp.parameters(), 1e-2)
for _ in range(150):
    opt.zero_grad()
    F.cross_entropy(mlp(X[:1400]), y[:1400]).backward()
    opt.step()
mlp.eval()
gm = prepare_ptq(torch.fx.symbolic_trace(mlp))
with torch.no_grad():
    for i in range(0, 1400, 200):
        gm(X[i:i + 200])
    gm = convert_ptq(gm)
    acc_fp32 = (mlp(X[1400:]).argmax(1) == y[1400:]).float().mean().item()
    acc_int8 = (gm(X[1400:]).argmax(1) == y[1400:]).float().mean().item()
print(gm.code)
print(f"accuracy fp32 {acc_fp32:.3f}, int8 PTQ {acc_int8:.3f}")
fp32_bytes = sum(m.weight.numel() * 4 for m in mlp if isinstance(m, nn.Linear))
int8_bytes = sum(m.weight_q.numel() + m.weight_scale.numel() * 4 for m in gm.modules() if isinstance(m, QuantLinear))
print(f"Linear weights: {fp32_bytes} bytes in fp32, {int8_bytes} in int8 with their scales ({fp32_bytes / int8_bytes:.2f}x smaller)")
# torchao's PT2E on the same model, for comparison: its converted graph
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (X86InductorQuantizer,
                                                                            get_default_x86_inductor_quantization_config)
    exported = torch.export.export(mlp, (X[:200],)).module()
    pt2e = prepare_pt2e(exported, X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()))
    for i in range(0, 1400, 200):
        pt2e(X[i:i + 200])
    pt2e = convert_pt2e(pt2e)
print(pt2e.code)

# %% nbgrader={"grade": true, "grade_id": "ptq", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Post-training quantization as a graph pass"
check("ptq")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built the numerics every quantization flow rests on: ranges and qparams at three
# granularities, the affine map both ways, the observers that calibrate activations, the
# straight-through estimator that makes QAT train, integer kernels that accumulate in int32 and
# requantize, packed int4 weights, and a graph pass that quantizes a whole model the way PT2E does.
# Save the notebook and submit it (`make submit LAB=lab08`).
