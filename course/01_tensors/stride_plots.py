"""Drawing helpers for the stage-01 course notebooks (tensor layout).

Which storage cell each element is drawn against is computed from the tensor's *metadata*
alone -- sizes, strides and storage offset -- so what you see is exactly the address
arithmetic PyTorch does:

    storage index of t[i0, i1, ...] = storage_offset + i0 * stride[0] + i1 * stride[1] + ...

Public functions
----------------
storage_index_map(t)          -> numpy array (t.shape) of storage indices, one per element
torch_flat_storage(t)         -> t's whole storage as a flat 1-D tensor (a view, no copy)
draw_strided(t, ax=...)       -> one 1-D/2-D tensor as a grid over its 1-D storage
draw_views([(label, t), ...]) -> several such panels, stacked vertically
draw_memory_formats(x)        -> storage order of a 4-D tensor, NCHW vs NHWC (channels_last)
plot_timings(results)         -> every timed repeat as a dot, the median as a bar
"""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

__all__ = [
    "storage_index_map",
    "torch_flat_storage",
    "draw_strided",
    "draw_views",
    "draw_memory_formats",
    "plot_timings",
]

_UNUSED = "#eeeeee"  # storage cells that no element of the view reaches
_EDGE = "#333333"
_CHANNEL_COLORS = ["#e4572e", "#29335c", "#f3a712", "#669bbc", "#a8c686", "#8e7dbe"]


def storage_index_map(t) -> np.ndarray:
    """Storage index (in elements, not bytes) of every element of ``t``.

    Uses only ``t.shape``, ``t.stride()`` and ``t.storage_offset()``.
    """
    idx = np.full(tuple(t.shape), t.storage_offset(), dtype=np.int64)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[dim] = size
        idx = idx + (np.arange(size) * stride).reshape(shape)
    return idx


def torch_flat_storage(t):
    """The whole storage of ``t`` as a flat 1-D tensor of ``t.dtype`` (a view, no copy)."""
    import torch  # local import: keeps this module importable for docs tooling

    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())


def _storage_length(t) -> int:
    """Number of elements the tensor's storage holds."""
    return t.untyped_storage().nbytes() // t.element_size()


def _colors(n: int):
    cmap = plt.get_cmap("viridis")
    return [cmap(0.15 + 0.75 * k / max(n - 1, 1)) for k in range(n)]


def _text_color(rgba) -> str:
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _fmt(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else f"{v:.2g}"


_STEP_COLORS = ["#e4572e", "#1f77b4"]


def _step_rad(stride: int, dim: int) -> float:
    return min(0.35, 1.6 / stride) + 0.25 * dim


def _steps_depth(t) -> float:
    """How far below the storage strip the step arcs and their labels reach."""
    depth = 0.0
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        if size > 1 and stride > 0:
            depth = max(depth, 0.5 * _step_rad(stride, dim) * stride)
    return depth + 0.9


def _draw_steps(ax, t):
    """Under the storage strip, one arc per dimension: the jump taken when that index grows."""
    k0 = t.storage_offset()
    label_y = -0.6 - _steps_depth(t) + 0.35
    label_x = k0 + 0.2
    for dim in range(t.dim()):
        if t.shape[dim] < 2:
            continue
        stride = t.stride(dim)
        color = _STEP_COLORS[dim % len(_STEP_COLORS)]
        if stride == 0:
            ax.plot([k0 + 0.5], [-0.75], marker="o", color=color, ms=5)
        else:
            ax.add_patch(FancyArrowPatch(
                (k0 + 0.5, -0.6), (k0 + stride + 0.5, -0.6), arrowstyle="-|>",
                connectionstyle=f"arc3,rad={_step_rad(stride, dim)}",
                mutation_scale=8, color=color, lw=1.2))
        text = f"dim {dim}: +{stride}" + (" (stays put)" if stride == 0 else "")
        ax.text(label_x, label_y, text, ha="left", va="center", fontsize=8, color=color)
        label_x += 0.16 * len(text) + 0.8


def draw_strided(t, ax=None, title: str | None = None, arrows: bool = True,
                 show_steps: bool = True):
    """Draw a 1-D or 2-D tensor as a grid above its storage.

    Each element of the view is a cell showing its value; below, the storage is a strip of
    cells numbered by storage index. An element and the storage cell it reads share a colour,
    and a line joins them. Storage cells the view never reaches stay grey; a storage cell that
    several elements read (stride 0, overlapping windows) receives several lines.
    """
    if t.dim() not in (1, 2):
        raise ValueError(f"draw_strided draws 1-D or 2-D tensors, got {t.dim()}-D")
    t2 = t if t.dim() == 2 else t.unsqueeze(0)
    rows, cols = t2.shape
    index = storage_index_map(t)
    index2 = index.reshape(rows, cols)
    n_storage = _storage_length(t)
    values = t2.detach().cpu()
    base = torch_flat_storage(t)
    colors = _colors(n_storage)
    reached = set(index2.ravel().tolist())

    if ax is None:
        width = max(n_storage, cols) * 0.55 + 1.5
        _, ax = plt.subplots(figsize=(width, 0.55 * rows + 2.6))

    # Layout: the storage strip on y in [0, 1]; the grid sits above it, centred.
    grid_y0 = 2.6
    grid_x0 = (n_storage - cols) / 2.0
    for k in range(n_storage):
        used = k in reached
        face = colors[k] if used else _UNUSED
        ax.add_patch(Rectangle((k, 0), 1, 1, facecolor=face, edgecolor=_EDGE, lw=0.8))
        ax.text(k + 0.5, 0.5, _fmt(base[k]), ha="center", va="center", fontsize=9,
                color=_text_color(face) if used else "#999999")
        ax.text(k + 0.5, -0.35, str(k), ha="center", va="center", fontsize=7, color="#666666")
    ax.text(-0.3, 0.5, "storage", ha="right", va="center", fontsize=9, style="italic")
    ax.text(-0.3, -0.35, "index", ha="right", va="center", fontsize=7, color="#666666")

    for i, j in itertools.product(range(rows), range(cols)):
        k = int(index2[i, j])
        x = grid_x0 + j
        y = grid_y0 + (rows - 1 - i)
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=colors[k], edgecolor=_EDGE, lw=0.8))
        ax.text(x + 0.5, y + 0.5, _fmt(values[i, j]), ha="center", va="center", fontsize=9,
                color=_text_color(colors[k]))
        if arrows:
            ax.add_patch(FancyArrowPatch(
                (x + 0.5, grid_y0 - 0.02), (k + 0.5, 1.02), arrowstyle="-|>",
                mutation_scale=7, color=colors[k], lw=0.9, alpha=0.75,
                shrinkA=0, shrinkB=0))
    if show_steps:
        _draw_steps(ax, t)
    # row / column labels of the view
    for i in range(rows):
        label = f"[{i}]" if t.dim() == 2 else ""
        ax.text(grid_x0 - 0.2, grid_y0 + rows - 1 - i + 0.5, label, ha="right", va="center",
                fontsize=8, color="#666666")
    for j in range(cols):
        label = f"[:,{j}]" if t.dim() == 2 else f"[{j}]"
        ax.text(grid_x0 + j + 0.5, grid_y0 + rows + 0.25, label, ha="center", va="center",
                fontsize=7, color="#666666")

    meta = (f"size={tuple(t.shape)}  stride={tuple(t.stride())}  "
            f"offset={t.storage_offset()}  contiguous={t.is_contiguous()}")
    ax.set_title(f"{title}\n{meta}" if title else meta, fontsize=10, loc="left",
                 family="monospace")
    ax.set_xlim(-2.2, max(n_storage, grid_x0 + cols) + 0.3)
    bottom = -0.7 - _steps_depth(t) if show_steps else -0.8
    ax.set_ylim(bottom, grid_y0 + rows + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def draw_views(views, arrows: bool = True):
    """Stack several :func:`draw_strided` panels; ``views`` is a list of (label, tensor)."""
    heights = [(t.shape[0] if t.dim() == 2 else 1) + 4.8 for _, t in views]
    width = max(max(_storage_length(t), t.shape[-1]) for _, t in views) * 0.55 + 1.5
    fig, axes = plt.subplots(len(views), 1, figsize=(width, 0.55 * sum(heights) + 0.4),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (label, t) in zip(axes[:, 0], views):
        draw_strided(t, ax=ax, title=label, arrows=arrows)
    fig.tight_layout()
    return fig


def draw_memory_formats(x, channel_names=None):
    """Show where the elements of a 4-D (N, C, H, W) tensor live, for both memory formats.

    Top: the logical picture, one H x W plane per channel (image 0). Below: the storage of
    the same tensor in ``contiguous_format`` (NCHW) and in ``channels_last`` (NHWC), each
    cell coloured by channel and labelled with the channel letter and its (h, w) position.
    """
    import torch

    if x.dim() != 4:
        raise ValueError("draw_memory_formats expects an N, C, H, W tensor")
    n, c, h, w = x.shape
    names = channel_names or ["RGBCMY"[k] if k < 6 else str(k) for k in range(c)]
    ccols = [_CHANNEL_COLORS[k % len(_CHANNEL_COLORS)] for k in range(c)]
    total = n * c * h * w
    width = max(total, c * (w + 1)) + 4
    fig, ax = plt.subplots(figsize=(0.5 * width, 0.5 * (h + 9.5)))

    def cell(xpos, ypos, ch, text, alpha=1.0):
        ax.add_patch(Rectangle((xpos, ypos), 1, 1, facecolor=ccols[ch], edgecolor="white",
                               lw=1.5, alpha=alpha))
        ax.text(xpos + 0.5, ypos + 0.5, text, ha="center", va="center", fontsize=8,
                color="white")

    # logical planes, side by side
    top = 7.0
    plane_x0 = (total - c * (w + 1) + 1) / 2.0
    for ch in range(c):
        for i, j in itertools.product(range(h), range(w)):
            cell(plane_x0 + ch * (w + 1) + j, top + h - 1 - i, ch, f"{names[ch]}{i}{j}")
        ax.text(plane_x0 + ch * (w + 1) + w / 2, top + h + 0.35, f"channel {names[ch]}",
                ha="center", fontsize=9)
    ax.text(-0.4, top + h / 2, f"logical\n(N={n}, C={c},\nH={h}, W={w})", ha="right",
            va="center", fontsize=9)

    rows = [(torch.contiguous_format, "NCHW\ncontiguous_format", 3.6),
            (torch.channels_last, "NHWC\nchannels_last", 0.0)]
    for fmt, label, ybase in rows:
        y = x.contiguous(memory_format=fmt)
        idx = storage_index_map(y)
        for pos in itertools.product(range(n), range(c), range(h), range(w)):
            bn, ch, i, j = pos
            prefix = f"{bn}" if n > 1 else ""
            cell(int(idx[pos]), ybase, ch, f"{prefix}{names[ch]}{i}{j}",
                 alpha=1.0 if bn % 2 == 0 else 0.6)
        ax.text(-0.4, ybase + 0.5, label, ha="right", va="center", fontsize=9)
        ax.text(total / 2, ybase + 1.25, f"stride={tuple(y.stride())}", ha="center",
                fontsize=9, family="monospace")
        # brace-like marker over the first run of adjacent elements the format keeps together
        run = h * w if fmt is torch.contiguous_format else c
        what = (f"one channel: all {h * w} pixels adjacent" if fmt is torch.contiguous_format
                else f"one pixel: all {c} channels adjacent")
        ax.plot([0.05, 0.05, run - 0.05, run - 0.05], [ybase - 0.15, ybase - 0.3, ybase - 0.3,
                ybase - 0.15], color="#333333", lw=1)
        ax.text(0.05, ybase - 0.75, what, ha="left", va="center", fontsize=8, color="#333333")
    ax.set_xlim(-4.0, max(total, plane_x0 + c * (w + 1)) + 0.3)
    ax.set_ylim(-1.2, top + h + 1.0)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


def plot_timings(results: dict, unit: str = "ms", title: str | None = None):
    """Dot plot of timings: one dot per repeat, a bar at the median.

    ``results`` maps a label to a list of measurements (already in ``unit``).
    """
    labels = list(results)
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(labels) + 1.3))
    rng = np.random.default_rng(0)  # vertical jitter only, so dots do not hide each other
    for row, label in enumerate(labels):
        vals = np.asarray(results[label], dtype=float)
        med = float(np.median(vals))
        ax.scatter(vals, row + rng.uniform(-0.15, 0.15, size=vals.size), s=14,
                   color="#669bbc", alpha=0.8, zorder=2)
        ax.plot([med, med], [row - 0.3, row + 0.3], color="#e4572e", lw=2.5, zorder=3)
        ax.annotate(f"median {med:.2f} {unit}", (med, row - 0.3), xytext=(4, 0),
                    textcoords="offset points", ha="left", va="center", fontsize=8,
                    color="#e4572e")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, family="monospace", fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    ticks = [m * 10.0 ** e for e in range(-3, 5) for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"time per call ({unit}, log scale) — dots: repeats, red bar: median")
    ax.grid(axis="x", which="both", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
