"""Figures for the 8.3 course notebook (model parallelism).

Everything here draws; nothing here is a recipe. The pipeline figures take the order in
which each stage ran its forwards and backwards (recorded from torch's own schedules in
the notebook) and place it on a time axis with fixed forward and backward times; they
return a figure and a few summary numbers (makespan, idle share, activations held).

Figures
-------
draw_device_grid(pp, dp, tp)          the ranks of a 3-D (pipeline x data x tensor) layout,
                                      once per kind of group
draw_tensor_parallel_mlp(t)           a Megatron MLP split over t ranks, with f and g
draw_sequence_parallel(t)             which dimension each rank holds, region by region,
                                      with and without sequence parallelism
draw_pipeline_schedules(orders)       Gantt charts (stage x time) of pipeline schedules,
                                      and their idle share and peak activations per stage
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from dist_plots import PALETTE

__all__ = ["draw_device_grid", "draw_tensor_parallel_mlp", "draw_sequence_parallel",
           "draw_pipeline_schedules"]

_GREY = "#d9d9d9"
_DARK = "#3d3d6b"


# ------------------------------------------------------------------- device grid
def draw_device_grid(pp: int = 2, dp: int = 2, tp: int = 2, title=None):
    """The world as a (pp, dp, tp) block of ranks, numbered row-major.

    Rank = (stage * dp + replica) * tp + shard, which is what ``init_device_mesh``
    gives for ``mesh_shape=(pp, dp, tp)``: tensor-parallel neighbours get adjacent
    ranks (one machine), pipeline stages are furthest apart. Three panels, one per kind
    of group; ranks of one group share a colour.
    """
    ranks = np.arange(pp * dp * tp).reshape(pp, dp, tp)
    kinds = [("tensor-parallel groups", lambda s, d, t: s * dp + d),
             ("data-parallel groups", lambda s, d, t: s * tp + t),
             ("pipeline groups", lambda s, d, t: d * tp + t)]
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 2.9))
    for ax, (name, group_of) in zip(axes, kinds):
        for s in range(pp):
            x0 = s * (tp + 1.2)
            ax.text(x0 + tp / 2 - 0.05, dp + 0.25, f"stage {s}", ha="center",
                    fontsize=8.5, color="#555555")
            for d in range(dp):
                y = dp - 1 - d
                ax.add_patch(Rectangle((x0 - 0.12, y - 0.07), tp + 0.14, 0.9,
                                       facecolor="none", edgecolor="#999999", lw=0.8,
                                       ls=":"))
                for t in range(tp):
                    g = group_of(s, d, t)
                    ax.add_patch(Rectangle((x0 + t, y), 0.9, 0.76,
                                           facecolor=PALETTE[g % len(PALETTE)],
                                           edgecolor="white"))
                    ax.text(x0 + t + 0.45, y + 0.38, str(ranks[s, d, t]), ha="center",
                            va="center", fontsize=9, color="white", weight="bold")
                if s == 0:
                    ax.text(-0.3, y + 0.38, f"replica {d}", ha="right", va="center",
                            fontsize=8, color="#555555")
            if s < pp - 1:
                ax.annotate("", xy=(x0 + tp + 1.0, dp / 2 - 0.1),
                            xytext=(x0 + tp + 0.05, dp / 2 - 0.1),
                            arrowprops=dict(arrowstyle="->", color="#888888", lw=1))
        ax.set_xlim(-1.7, pp * (tp + 1.2) - 0.9)
        ax.set_ylim(-0.4, dp + 0.7)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(name, fontsize=10)
    fig.text(0.5, 0.02, "dotted frame: one replica of one stage, split over "
             f"{tp} tensor-parallel ranks (one machine); arrows: activations flow "
             "from stage to stage", ha="center", fontsize=8, color="#555555")
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


# ----------------------------------------------------------- tensor parallelism
def _box(ax, x, y, w, h, text, face, color="black", size=8.5, round_=True):
    style = "round,pad=0.02,rounding_size=0.08" if round_ else "square,pad=0"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=face,
                                edgecolor="#666666", lw=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            color=color)


def _arrow(ax, a, b, color="#555555", style="->", ls="-"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=10, lw=1,
                                 color=color, linestyle=ls, shrinkA=1, shrinkB=1))


def draw_tensor_parallel_mlp(t: int = 2, title=None):
    """The MLP Z = GeLU(X A) B on t ranks: A split by columns, B by rows.

    Top: the forward pass, rank by rank, with the two conjugate operators f (identity
    forward, all-reduce backward) and g (all-reduce forward, identity backward).
    Bottom row of text: what each operator does in each direction.
    """
    fig, ax = plt.subplots(figsize=(12.5, 1.6 + 1.25 * t))
    rows = [(t - 1 - i) * 1.25 + 0.9 for i in range(t)]
    mid = (rows[0] + rows[-1]) / 2 + 0.3
    _box(ax, 0.0, mid - 0.3, 1.2, 0.6, "X\n(b·s, h)", "#eeeeee")
    _box(ax, 1.7, mid - 0.35, 0.7, 0.7, "f", PALETTE[2], color="white", size=13)
    _box(ax, 10.3, mid - 0.35, 0.7, 0.7, "g", PALETTE[3], color="white", size=13)
    _box(ax, 11.5, mid - 0.3, 1.2, 0.6, "Z\n(b·s, h)", "#eeeeee")
    _arrow(ax, (1.2, mid), (1.7, mid))
    _arrow(ax, (11.0, mid), (11.5, mid))
    for i, y in enumerate(rows):
        c = PALETTE[i % len(PALETTE)]
        ax.text(2.75, y + 0.62, f"rank {i}", fontsize=8, color="#555555")
        _box(ax, 2.9, y, 1.3, 0.55, "X (a copy)", "#eeeeee", size=8)
        _box(ax, 4.6, y, 1.5, 0.55, f"X A$_{i}$\nA$_{i}$: (h, 4h/{t})", c, "white", 8)
        _box(ax, 6.5, y, 1.3, 0.55, f"Y$_{i}$ = GeLU", c, "white", 8)
        _box(ax, 8.2, y, 1.6, 0.55, f"Z$_{i}$ = Y$_{i}$ B$_{i}$\nB$_{i}$: (4h/{t}, h)", c,
             "white", 8)
        _arrow(ax, (2.4, mid), (2.9, y + 0.27))
        for a, b in ((4.2, 4.6), (6.1, 6.5), (7.8, 8.2)):
            _arrow(ax, (a, y + 0.27), (b, y + 0.27))
        _arrow(ax, (9.8, y + 0.27), (10.3, mid))
    ax.text(5.35, rows[-1] - 0.45, "column-parallel: no communication",
            ha="center", fontsize=8, color="#555555")
    ax.text(9.0, rows[-1] - 0.45, "row-parallel: partial sums", ha="center",
            fontsize=8, color="#555555")
    ax.text(2.05, rows[-1] - 0.7, "f:  forward = identity\n     backward = all-reduce",
            ha="center", va="top", fontsize=8.5, color=PALETTE[2], family="monospace")
    ax.text(10.65, rows[-1] - 0.7, "g:  forward = all-reduce\n     backward = identity",
            ha="center", va="top", fontsize=8.5, color=PALETTE[3], family="monospace")
    ax.set_xlim(-0.1, 12.8)
    ax.set_ylim(rows[-1] - 1.35, rows[0] + 0.9)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10.5)
    fig.tight_layout()
    return fig


# --------------------------------------------------------- sequence parallelism
def _held(ax, x, y, t, rank, split, label=None):
    """A (sequence x hidden) activation; the part ``rank`` holds is coloured."""
    w, h = 1.0, 0.8
    ax.add_patch(Rectangle((x, y), w, h, facecolor="#f4f4f4", edgecolor="#999999",
                           lw=0.7))
    c = PALETTE[rank % len(PALETTE)]
    if split == "all":
        ax.add_patch(Rectangle((x, y), w, h, facecolor=c, alpha=0.85, lw=0))
    elif split == "seq":        # rows: sequence positions
        ax.add_patch(Rectangle((x, y + h - (rank + 1) * h / t), w, h / t, facecolor=c,
                               alpha=0.85, lw=0))
    elif split == "hidden":     # columns: hidden features (heads / 4h slice)
        ax.add_patch(Rectangle((x + rank * w / t, y), w / t, h, facecolor=c, alpha=0.85,
                               lw=0))
    elif split == "partial":    # full shape, but only a partial sum
        ax.add_patch(Rectangle((x, y), w, h, facecolor=c, alpha=0.35, lw=0,
                               hatch="////"))
    if label:
        ax.text(x + w / 2, y - 0.12, label, ha="center", va="top", fontsize=7.5,
                color="#555555")


def draw_sequence_parallel(t: int = 2, title=None):
    """One transformer sub-block (LayerNorm, attention or MLP, dropout + residual) on
    t ranks: what rank r holds at each point, with tensor parallelism alone (top)
    and with sequence parallelism added (bottom). Rows of a box are sequence
    positions, columns hidden features; hatched means a partial sum."""
    fig, axes = plt.subplots(2, 1, figsize=(12.5, 2.3 + 2.1 * t))
    layouts = [
        ("tensor parallelism alone",
         ["all", "all", "all", "hidden", "partial", "all", "all"],
         ["", "f: identity", "", "", "g: all-reduce", ""]),
        ("with sequence parallelism",
         ["seq", "seq", "all", "hidden", "partial", "seq", "seq"],
         ["", "g: all-gather", "", "", "ḡ: reduce-scatter", ""]),
    ]
    xs = [0.0, 1.4, 3.6, 5.0, 6.4, 8.6, 10.0]
    names = ["input", "LN output", "region input", "inner", "inner output",
             "region output", "output"]
    for ax, (name, splits, comms) in zip(axes, layouts):
        for r in range(t):
            y = (t - 1 - r) * 1.25
            ax.text(-0.25, y + 0.4, f"rank {r}", ha="right", va="center", fontsize=8)
            for k, (x, split) in enumerate(zip(xs, splits)):
                _held(ax, x, y, t, r, split, names[k] if r == t - 1 else None)
        top = (t - 1) * 1.25 + 0.8
        # regions
        for (a, b, text, face) in ((-0.1, 2.5, "LayerNorm", PALETTE[0]),
                                   (3.5, 7.5, "attention or MLP (weights split)", PALETTE[1]),
                                   (8.5, 11.1, "dropout + residual", PALETTE[0])):
            ax.add_patch(Rectangle((a, top + 0.15), b - a, 0.32, facecolor=face,
                                   alpha=0.25, lw=0))
            ax.text((a + b) / 2, top + 0.31, text, ha="center", va="center", fontsize=8)
        for (x0, x1), comm in zip(zip(xs[:-1], xs[1:]), comms):
            mid_y = top / 2
            if comm:
                ax.annotate("", xy=(x1 - 0.05, mid_y), xytext=(x0 + 1.05, mid_y),
                            arrowprops=dict(arrowstyle="->", color=PALETTE[3], lw=1.4))
                ax.text((x0 + 1.0 + x1) / 2, mid_y + 0.12, comm, ha="center",
                        fontsize=8, color=PALETTE[3])
            else:
                ax.annotate("", xy=(x1 - 0.05, mid_y), xytext=(x0 + 1.05, mid_y),
                            arrowprops=dict(arrowstyle="->", color="#aaaaaa", lw=0.8))
        ax.set_xlim(-1.3, 11.2)
        ax.set_ylim(-0.55, top + 0.6)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(name, fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------ pipeline drawing
def _simulate(orders: dict, t_fwd: float, t_bwd: float):
    """Boxes (stage, kind, microbatch, start, end) of one schedule, for drawing.

    ``orders[stage]`` is the sequence of ("F", i) and ("B", i) that the stage runs, as
    recorded from a real schedule; this function only places it on a time axis. Each
    stage works through its own sequence in order, starting a piece of work once the
    stage is free and the work's input has arrived (communication is free): the
    forward of micro-batch i on stage s needs stage s - 1's forward of i, the backward
    needs stage s + 1's backward of i.
    """
    p = len(orders)
    m = max(i for seq in orders.values() for _, i in seq) + 1
    f_end = np.full((p, m), np.inf)
    b_end = np.full((p, m), np.inf)
    position = [0] * p
    free = [0.0] * p
    boxes = []
    while any(position[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if position[s] == len(orders[s]):
                continue
            kind, i = orders[s][position[s]]
            if kind == "F":
                ready = 0.0 if s == 0 else f_end[s - 1, i]
            else:
                ready = f_end[s, i] if s == p - 1 else max(f_end[s, i], b_end[s + 1, i])
            if not np.isfinite(ready):
                continue                      # its input is not computed yet
            start = max(free[s], ready)
            end = start + (t_fwd if kind == "F" else t_bwd)
            (f_end if kind == "F" else b_end)[s, i] = end
            position[s] += 1
            free[s] = end
            boxes.append((s, kind, i, start, end))
            progressed = True
        if not progressed:
            raise RuntimeError("the recorded orders deadlock")
    return boxes


def _held_over_time(boxes, p):
    """Peak number of micro-batches whose activations each stage holds."""
    peak = []
    for s in range(p):
        events = sorted((start if k == "F" else end, 1 if k == "F" else -1)
                        for st, k, i, start, end in boxes if st == s)
        level, top = 0, 0
        for _, d in events:
            level += d
            top = max(top, level)
        peak.append(top)
    return peak


def draw_pipeline_schedules(orders: dict, t_fwd: float = 1.0, t_bwd: float = 2.0,
                            title=None):
    """Gantt charts, one per schedule: stage (row) against time, forward boxes light,
    backward boxes dark, each labelled with its micro-batch; idle time is grey.

    ``orders``: schedule name -> {stage: [("F", i) or ("B", i), ...]}, the order in
    which each stage ran its work (recorded from torch's schedules in the notebook).
    Every forward takes ``t_fwd`` and every backward ``t_bwd``.

    Returns ``(fig, stats)``; ``stats[name]`` holds ``makespan``, ``idle_share``
    (idle stage-time over all stage-time) and ``peak_held`` (per stage, the most
    micro-batches between their forward and their backward at any moment).
    """
    names = list(orders)
    p = len(orders[names[0]])
    m = max(i for seq in orders[names[0]].values() for _, i in seq) + 1
    fig, axes = plt.subplots(len(names), 1, figsize=(12.5, 1.15 + 0.62 * p * len(names)),
                             squeeze=False)
    stats = {}
    for ax, name in zip(axes[:, 0], names):
        boxes = _simulate(orders[name], t_fwd, t_bwd)
        makespan = max(end for *_, end in boxes)
        busy = sum(end - start for *_, start, end in boxes)
        peak = _held_over_time(boxes, p)
        stats[name] = dict(makespan=float(makespan),
                           idle_share=float(1 - busy / (p * makespan)),
                           peak_held=peak)
        for s in range(p):
            y = p - 1 - s
            ax.add_patch(Rectangle((0, y), makespan, 0.8, facecolor="#eeeeee", lw=0))
            ax.text(makespan + 0.3, y + 0.4, f"holds ≤ {peak[s]}", va="center",
                    fontsize=8, color="#555555")
        for s, kind, i, start, end in boxes:
            y = p - 1 - s
            c = PALETTE[i % len(PALETTE)]
            ax.add_patch(Rectangle((start, y), end - start, 0.8, facecolor=c,
                                   alpha=0.45 if kind == "F" else 1.0,
                                   edgecolor="white", lw=0.8))
            ax.text((start + end) / 2, y + 0.4, f"{kind}{i}", ha="center", va="center",
                    fontsize=7.5, color="black" if kind == "F" else "white")
        ax.set_yticks([p - 1 - s + 0.4 for s in range(p)])
        ax.set_yticklabels([f"stage {s}" for s in range(p)], fontsize=8)
        ax.set_xlim(0, makespan + 2.6)
        ax.set_ylim(-0.1, p)
        ax.set_xlabel("time (forward of one micro-batch = 1)", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        for spine in ("top", "right", "left"):
            ax.spines[spine].set_visible(False)
        ax.set_title(f"{name}: p = {p} stages, m = {m} micro-batches, idle "
                     f"{stats[name]['idle_share']:.1%} of the stage-time", fontsize=9.5)
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout()
    return fig, stats
