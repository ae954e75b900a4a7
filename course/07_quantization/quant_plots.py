"""Helpers for the stage-07 course notebooks (quantization).

The numbers drawn here are computed in the notebooks, with torchao's quantization
primitives or with plain tensor arithmetic; these functions only lay them out.

Source
------
source_excerpt(module, name, keep)   lines of a function in a module's source file that
                                     contain one of the strings in ``keep``, numbered

Figures
-------
representable_values(dtype)          every finite value of a floating dtype, sorted
draw_number_grids(grids)             the non-negative values of several formats on one
                                     line each, and the gap to the next value
draw_staircases(x, panels)           x -> dequantize(quantize(x)) for a few mappings,
                                     every code level drawn, unused ones greyed
draw_granularity(shape, blocks)      which elements of a matrix share one scale
draw_error_hists(errors)             histograms of dequantized - original
draw_sqnr_heatmap(rows, cols, table) an SQNR table as a coloured grid, values written in
draw_error_maps(maps)                |error| of a matrix, one panel per scheme
"""

from __future__ import annotations

import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.patches import Rectangle

__all__ = [
    "source_excerpt", "representable_values", "draw_number_grids", "draw_staircases",
    "draw_granularity", "draw_error_hists", "draw_sqnr_heatmap", "draw_error_maps",
    "PALETTE",
]

PALETTE = ["#4c8fbd", "#f3a712", "#5aa469", "#e4572e", "#8e6bb5", "#b5895a",
           "#3fa7a0", "#d96c9a"]
_GREY = "#c8c8c8"


def _np(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


# ------------------------------------------------------------------------- source
def source_excerpt(module, name: str, keep, context: int = 0) -> str:
    """Lines of ``def name(`` in ``module``'s source file that contain a string in ``keep``.

    Each line is prefixed with its line number in the file, so that it can be found
    in the installed package. ``context`` adds that many lines after each match.
    Lines that were skipped are shown as ``...``.
    """
    path = inspect.getsourcefile(module)
    with open(path) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i] and not lines[i][0].isspace() and not lines[i].startswith(")")),
               len(lines))
    picked = set()
    for i in range(start, end):
        if any(k in lines[i] for k in keep):
            picked.update(range(i, min(i + context + 1, end)))
    out, last = [f"{start + 1:5d}  {lines[start]}"], start
    for i in sorted(picked - {start}):
        if i != last + 1:
            out.append("   ...")
        out.append(f"{i + 1:5d}  {lines[i]}")
        last = i
    return "\n".join(out)


# ------------------------------------------------------------------------ formats
def representable_values(dtype: torch.dtype) -> torch.Tensor:
    """Every finite value of an 8-bit floating dtype, sorted and without duplicates.

    All 256 bit patterns are reinterpreted as ``dtype`` (a view, no rounding), so the
    list is exactly what the format can hold: NaNs and infinities are dropped, and
    +0 and -0 count once.
    """
    if torch.finfo(dtype).bits != 8:
        raise ValueError("only 8-bit floating formats can be enumerated here")
    vals = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    return vals[torch.isfinite(vals)].unique()


def draw_number_grids(grids: dict, title=None):
    """Two panels for formats scaled to the same largest value (``grids``: name -> values).

    Top: each format's non-negative values as ticks on a line from 0 to the largest
    value. Bottom: the gap from each value to the next one, relative to the value,
    on log axes. A uniform grid has a constant absolute gap, so its relative gap
    falls as 1/x; a floating grid keeps its relative gap within a factor of two.
    """
    names = list(grids)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.5, 2.0 + 0.55 * len(names) + 3.2),
                                      gridspec_kw={"height_ratios": [0.55 * len(names), 3.2]})
    for row, name in enumerate(names):
        v = np.sort(_np(grids[name]))
        v = v[v >= 0]
        y = len(names) - 1 - row
        top.vlines(v, y - 0.32, y + 0.32, color=PALETTE[row % len(PALETTE)], lw=0.7)
        top.text(-0.01 * v.max(), y, f"{name}  ({len(v)} values)", ha="right",
                 va="center", fontsize=9)
        rel = np.diff(v) / v[:-1].clip(min=np.finfo(np.float32).tiny)
        keep = v[:-1] > 0
        bottom.plot(v[:-1][keep], rel[keep], ".", ms=3.5, color=PALETTE[row % len(PALETTE)],
                    label=name)
    top.set_ylim(-0.6, len(names) - 0.4)
    top.set_yticks([])
    for side in ("left", "right", "top"):
        top.spines[side].set_visible(False)
    top.set_xlabel("value (each format scaled so that its largest value is 1)", fontsize=9)
    bottom.set_xscale("log")
    bottom.set_yscale("log")
    bottom.set_xlabel("value", fontsize=9)
    bottom.set_ylabel("gap to the next value / value", fontsize=9)
    bottom.grid(True, which="major", color="#eeeeee")
    bottom.legend(fontsize=8.5, frameon=False, markerscale=2.5)
    if title:
        top.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def draw_staircases(x, panels, data_range, title=None):
    """One panel per mapping: x -> dequantize(quantize(x)), with the code levels.

    ``panels`` is a list of dicts with ``title``, ``xhat`` (values on ``x``), ``scale``,
    ``zero_point``, ``qmin`` and ``qmax``. Each level (q - zero_point) * scale is a
    horizontal line: coloured when some value inside ``data_range`` rounds to it,
    grey when no value in the data can ever use it.
    """
    x = _np(x)
    lo, hi = data_range
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, p in zip(axes, panels):
        s, zp = float(p["scale"]), int(p["zero_point"])
        levels = (np.arange(p["qmin"], p["qmax"] + 1) - zp) * s
        used = (levels >= lo - s / 2) & (levels <= hi + s / 2)
        for lev, u in zip(levels, used):
            ax.axhline(lev, color=PALETTE[0] if u else _GREY, lw=0.6,
                       ls="-" if u else ":", zorder=0)
        ax.axvspan(lo, hi, color="#f6f1e0", zorder=-1)
        ax.plot(x, x, color="#999999", lw=0.8, ls="--")
        ax.plot(x, _np(p["xhat"]), color=PALETTE[3], lw=1.6, drawstyle="steps-mid")
        ax.axvline(0, color="#333333", lw=0.6)
        ax.axhline(0, color="#333333", lw=0.6)
        ax.set_title(f"{p['title']}\nscale={s:.4f}, zero_point={zp}: "
                     f"{used.sum()} of {len(levels)} codes used", fontsize=9)
        ax.set_xlabel("x", fontsize=9)
        ax.set_xlim(x.min(), x.max())
    axes[0].set_ylabel("dequantize(quantize(x))", fontsize=9)
    lim = max(abs(levels).max() for levels in
              [(np.arange(p["qmin"], p["qmax"] + 1) - int(p["zero_point"])) * float(p["scale"])
               for p in panels])
    axes[0].set_ylim(-lim * 1.05, lim * 1.05)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# -------------------------------------------------------------------- granularity
def _block_ids(shape, block):
    rows, cols = shape
    br, bc = block
    r = np.arange(rows)[:, None] // br
    c = np.arange(cols)[None, :] // bc
    return r * (cols // bc) + c


def draw_granularity(shape, blocks: dict, title=None):
    """Which elements of a ``shape`` matrix share a scale, for each ``block_size``.

    ``blocks`` maps a label to a 2-D block_size (as passed to torchao). Elements with
    the same colour share one scale and one zero point.
    """
    rows, cols = shape
    fig, axes = plt.subplots(1, len(blocks), figsize=(3.3 * len(blocks), 2.9))
    axes = np.atleast_1d(axes)
    for ax, (label, block) in zip(axes, blocks.items()):
        ids = _block_ids(shape, block)
        for i in range(rows):
            for j in range(cols):
                ax.add_patch(Rectangle((j, rows - 1 - i), 1, 1,
                                       facecolor=PALETTE[ids[i, j] % len(PALETTE)],
                                       edgecolor="white", lw=0.8))
        ax.set_xlim(0, cols)
        ax.set_ylim(0, rows)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"{label}\nblock_size={tuple(block)}: {ids.max() + 1} scale(s)",
                     fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------- errors
def draw_error_hists(errors: dict, normalized: dict | None = None, bins=80, title=None):
    """Histograms of dequantize(quantize(x)) - x, one outline per scheme.

    ``normalized`` (optional, same keys) holds the same errors divided by the scale
    each element was quantized with; it is drawn in a second panel.
    """
    n = 1 if normalized is None else 2
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 3.6))
    axes = np.atleast_1d(axes)
    width = max(float(np.abs(_np(e)).max()) for e in errors.values())
    edges = np.linspace(-width, width, bins + 1)
    for k, (name, e) in enumerate(errors.items()):
        axes[0].hist(_np(e).ravel(), bins=edges, histtype="step", lw=1.4,
                     color=PALETTE[k % len(PALETTE)], label=name)
    axes[0].set_xlabel("dequantized - original", fontsize=9)
    axes[0].set_ylabel("count", fontsize=9)
    axes[0].legend(fontsize=8, frameon=False)
    if normalized is not None:
        edges = np.linspace(-0.6125, 0.6125, 50)   # bins centred on -0.5 and 0.5
        for k, (name, e) in enumerate(normalized.items()):
            axes[1].hist(_np(e).ravel(), bins=edges, histtype="step", lw=1.4,
                         color=PALETTE[k % len(PALETTE)], label=name, density=True)
        axes[1].set_xlabel("(dequantized - original) / scale", fontsize=9)
        axes[1].set_ylabel("density", fontsize=9)
        for v in (-0.5, 0.5):
            axes[1].axvline(v, color="#555555", lw=0.7, ls=":")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def draw_sqnr_heatmap(rows, cols, table, title=None):
    """An SQNR table (dB), rows x cols, as a coloured grid with the numbers written in."""
    table = np.asarray(table, dtype=float)
    fig, ax = plt.subplots(figsize=(1.25 * len(cols) + 2.6, 0.42 * len(rows) + 1.6))
    im = ax.imshow(table, cmap="viridis", aspect="auto", vmin=0, vmax=max(60, table.max()))
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = table[i, j]
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8.5,
                    color="white" if v < 35 else "black")
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, fontsize=8.5)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8.5)
    fig.colorbar(im, ax=ax, label="SQNR (dB), higher is better", shrink=0.85)
    if title:
        ax.set_title(title, fontsize=10, pad=28)
    fig.tight_layout()
    return fig


def draw_error_maps(maps: dict, mark=None, title=None):
    """|dequantized - original| of one matrix per panel, on a shared log colour scale.

    ``mark`` = (row, col) circles one element in every panel (the outlier).
    """
    arrays = {k: _np(v) for k, v in maps.items()}
    positive = np.concatenate([a[a > 0].ravel() for a in arrays.values()])
    norm = LogNorm(vmin=np.percentile(positive, 1), vmax=positive.max())
    first = next(iter(arrays.values()))
    fig, axes = plt.subplots(len(arrays), 1, figsize=(10, 1.0 + 0.032 * first.shape[0]
                                                      * len(arrays) + 0.5 * len(arrays)),
                             sharex=True)
    axes = np.atleast_1d(axes)
    for ax, (name, a) in zip(axes, arrays.items()):
        im = ax.imshow(np.where(a > 0, a, norm.vmin), cmap="magma", norm=norm,
                       aspect="auto", interpolation="nearest")
        ax.set_title(name, fontsize=9, loc="left")
        ax.set_ylabel("row", fontsize=8.5)
        if mark is not None:
            ax.plot(mark[1], mark[0], "o", mfc="none", mec="#00c0ff", ms=9, mew=1.4)
    axes[-1].set_xlabel("column", fontsize=8.5)
    fig.colorbar(im, ax=list(axes), label="|dequantized - original|", shrink=0.9)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
