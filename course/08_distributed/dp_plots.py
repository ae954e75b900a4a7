"""Figures for the stage-08 notebook on data parallelism (8.2).

The notebook runs its worlds with ``dist_plots.run_world`` and computes every number;
the functions here only lay those numbers out.

draw_buckets(layouts, sizes)           DDP's gradient buckets, one row per setting:
                                       each bucket a box as wide as its bytes, in the
                                       order DDP reduces them
draw_overlap(grads, buckets, end)      one backward pass on a timeline: when each
                                       layer's gradient was ready (autograd) and when
                                       each bucket's all-reduce ran (gloo)
draw_zero_memory(stages, sweep, W)     bytes per rank for DDP and ZeRO-1/2/3, split
                                       into parameters, gradients and optimizer state,
                                       and per-rank totals against the world size
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

__all__ = ["draw_buckets", "draw_overlap", "draw_zero_memory", "PALETTE"]

PALETTE = ["#4c8fbd", "#f3a712", "#5aa469", "#e4572e", "#8e6bb5", "#b5895a",
           "#3fa7a0", "#d96c9a"]
MiB = 2 ** 20


def _layers(names):
    """'7.weight', '7.bias', '6.bias' ... -> 'layer 7' or 'layers 7-6' (module order kept)."""
    seen = []
    for name in names:
        layer = name.split(".")[0]
        if layer not in seen:
            seen.append(layer)
    if len(seen) == 1:
        return f"layer {seen[0]}"
    return f"layers {seen[0]}\u2013{seen[-1]}" if len(seen) > 2 else f"layers {seen[0]}, {seen[1]}"


def draw_buckets(layouts: dict, sizes: dict, title=None):
    """One row per setting; each bucket a box whose width is its size in bytes.

    ``layouts``: label -> list of buckets in the order DDP reduces them (bucket 0
    first), each bucket a list of parameter names; ``sizes``: name -> bytes.
    """
    fig, ax = plt.subplots(figsize=(11, 0.85 * len(layouts) + 1.1))
    total = max(sum(sizes[n] for b in buckets for n in b) for buckets in layouts.values())
    for row, (label, buckets) in enumerate(layouts.items()):
        y = len(layouts) - 1 - row
        x = 0.0
        for k, names in enumerate(buckets):
            width = sum(sizes[n] for n in names)
            ax.add_patch(Rectangle((x, y + 0.12), width, 0.7, facecolor=PALETTE[k % 8],
                                   edgecolor="white", lw=1.5))
            text = f"bucket {k}\n{_layers(names)}, {width / MiB:.2f} MiB"
            if width > 0.09 * total:
                ax.text(x + width / 2, y + 0.47, text, ha="center", va="center",
                        fontsize=7.5, color="white")
            else:                                # too narrow: label above the box
                ax.annotate(text.replace("\n", ": "), (x + width / 2, y + 0.82),
                            xytext=(x + width / 2 + 0.06 * total, y + 0.98), fontsize=7,
                            ha="left", va="center",
                            arrowprops=dict(arrowstyle="-", color="#777777", lw=0.7))
            x += width
        ax.text(-0.01 * total, y + 0.47, label, ha="right", va="center", fontsize=8.5)
    ax.set_xlim(0, total * 1.01)
    ax.set_ylim(-0.1, len(layouts) + 0.15)
    ax.set_yticks([])
    ax.set_xlabel("bytes of gradient, in the order the buckets are all-reduced (MiB)",
                  fontsize=9)
    ticks = np.arange(0, total / MiB + 1e-9, 1)
    ax.set_xticks(ticks * MiB, [f"{t:g}" for t in ticks])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10.5)
    fig.tight_layout()
    return fig


def draw_overlap(grads, buckets, end, title=None):
    """A backward pass on a timeline, in milliseconds from the start of ``backward()``.

    ``grads``: list of (layer, time its weight's gradient was accumulated), in the
    order they happened; each layer's bar runs from the previous one's time to its
    own. ``buckets``: list of (bucket index, launch time, completion time).
    ``end``: when ``backward()`` returned.
    """
    fig, ax = plt.subplots(figsize=(11, 2.6))
    start = 0.0
    for layer, t in grads:
        ax.add_patch(Rectangle((start, 1.1), t - start, 0.7, facecolor="#d9d9d9",
                               edgecolor="white", lw=1.2))
        ax.text((start + t) / 2, 1.45, f"L{layer}", ha="center", va="center", fontsize=7.5)
        start = t
    for index, t0, t1 in buckets:
        ax.add_patch(Rectangle((t0, 0.1), t1 - t0, 0.7, facecolor=PALETTE[index % 8],
                               edgecolor="white", lw=1.2))
        ax.text((t0 + t1) / 2, 0.45, f"b{index}", ha="center", va="center", fontsize=7.5,
                color="white")
    ax.axvline(grads[-1][1], color="#555555", lw=0.9, ls=":")
    ax.axvline(end, color="#e4572e", lw=1.1, ls="--")
    ax.text(grads[-1][1], 2.0, "last gradient ", ha="right", va="bottom", fontsize=7.5,
            color="#555555")
    ax.text(end, 2.0, " backward() returns", ha="left", va="bottom", fontsize=7.5,
            color="#e4572e")
    ax.set_yticks([0.45, 1.45], ["all-reduce\n(gloo)", "backward\n(autograd)"], fontsize=8.5)
    ax.set_xlim(0, end * 1.02)
    ax.set_ylim(0, 2.35)
    ax.set_xlabel("time since backward() was called (ms)", fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10.5)
    fig.tight_layout()
    return fig


def draw_zero_memory(stages: dict, sweep: dict, world_size: int, title=None):
    """Left: bytes per rank at ``world_size``, stacked by component, one bar per stage.
    Right: total bytes per rank against the world size, one line per stage.

    ``stages``: stage -> {"parameters": bytes, "gradients": bytes, "optimizer state":
    bytes}; ``sweep``: stage -> (world sizes, bytes per rank).
    """
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 3.9),
                                 gridspec_kw=dict(width_ratios=[1.15, 1]))
    names = list(stages)
    parts = ["parameters", "gradients", "optimizer state"]
    left = np.zeros(len(names))
    for k, part in enumerate(parts):
        values = np.array([stages[s][part] for s in names]) / 1e9
        ax.barh(range(len(names)), values, left=left, color=PALETTE[k], label=part,
                edgecolor="white")
        left += values
    for i, total in enumerate(left):
        ax.text(total, i, f" {total:.2f} GB", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xlabel(f"GB per rank at W = {world_size}", fontsize=9)
    ax.set_xlim(0, left.max() * 1.2)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    for k, (name, (ws, per_rank)) in enumerate(sweep.items()):
        bx.plot(ws, np.asarray(per_rank) / 1e9, "o-", ms=3.5, lw=1.3,
                color=PALETTE[(k + 4) % 8] if k else "#555555", label=name)
    bx.set_xscale("log", base=2)
    bx.set_yscale("log")
    bx.set_xlabel("world size W", fontsize=9)
    bx.set_ylabel("GB per rank", fontsize=9)
    bx.grid(True, which="major", color="#eeeeee")
    bx.legend(fontsize=8, frameon=False)
    for a in (ax, bx):
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout()
    return fig
