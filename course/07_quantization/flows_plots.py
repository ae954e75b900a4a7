"""Helpers for the stage-07 notebooks 7.2 (calibration, QAT, flows) and 7.3 (pruning,
parametrizations, distillation).

The numbers drawn here are computed in the notebooks; these functions only lay them out
(and, for graphs, list them). The palette is the one of ``quant_plots`` (notebook 7.1).

Graphs
------
graph_calls(gm)                      one line per call_function / call_module node of an
                                     FX graph: its name, its target and its arguments,
                                     with long constants shortened

Figures
-------
draw_observers(values, bounds, sqnr, scenarios)
                                     a histogram of calibration values with each
                                     observer's upper range end, and the SQNR each
                                     observer's range gives on held-out values
draw_fake_quant(x, x_hat, grad, ...) fake quantization's forward (a staircase) and the
                                     straight-through gradient (a 0/1 mask)
draw_masks(masks)                    which weights a pruning method keeps, one panel each
draw_sparsity_curves(curves)         test accuracy against the fraction of weights removed
draw_soft_targets(probs)             a teacher's output distribution at a few temperatures
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap

from quant_plots import PALETTE

__all__ = ["graph_calls", "draw_observers", "draw_fake_quant", "draw_masks",
           "draw_sparsity_curves", "draw_soft_targets", "PALETTE"]

_GREY = "#c8c8c8"


def _np(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


# -------------------------------------------------------------------------- graphs
def _short(arg) -> str:
    if hasattr(arg, "name") and hasattr(arg, "op"):          # an fx.Node
        return f"%{arg.name}"
    if isinstance(arg, float):
        return f"{arg:.6g}"
    if isinstance(arg, (list, tuple)):
        inner = ", ".join(_short(a) for a in arg)
        return f"[{inner}]" if isinstance(arg, list) else f"({inner})"
    if isinstance(arg, torch.dtype):
        return str(arg).replace("torch.", "")
    return repr(arg) if isinstance(arg, str) else str(arg)


def graph_calls(gm, skip=("_guards_fn",)) -> str:
    """The call nodes of ``gm.graph``, one per line: ``name = target(args)``.

    Targets are printed as ``namespace.op`` (``quantized_decomposed.quantize_per_tensor``,
    ``aten.linear``); placeholders, attribute reads and outputs are left out, so only
    the computation remains. Arguments that are nodes are written ``%name``.
    """
    lines = []
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_module") or node.name in skip \
                or node.target in skip:
            continue
        if node.op == "call_module":
            target = f"self.{node.target}"
        else:
            target = str(node.target)
            if target.startswith("torch.ops."):
                target = target[len("torch.ops."):]
            target = target.removesuffix(".default")
        args = ", ".join(_short(a) for a in node.args)
        lines.append(f"{node.name} = {target}({args})")
    return "\n".join(lines)


# ------------------------------------------------------------------------ observers
def draw_observers(values, bounds: dict, sqnr: dict, scenarios, title=None):
    """Left: histogram (log counts) of ``values``, with each observer's upper range end
    from ``bounds`` (name -> value) as a vertical line. Right: ``sqnr`` (name -> one
    number per scenario, in dB) as grouped bars, one group per observer.
    """
    v = _np(values).ravel()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.0),
                                      gridspec_kw={"width_ratios": [1.25, 1]})
    top = max(v.max(), max(bounds.values())) * 1.03
    left.hist(v[v > 0], bins=np.linspace(0, top, 160), color=_GREY, log=True)
    styles = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]
    for k, (name, hi) in enumerate(bounds.items()):
        left.axvline(hi, color=PALETTE[k % len(PALETTE)], lw=1.8, ls=styles[k % len(styles)],
                     label=f"{name}: {hi:.2f}")
    left.set_xlabel("value (zeros left out)", fontsize=9)
    left.set_ylabel("count (log)", fontsize=9)
    left.set_title("calibration values, and where each observer ends its range", fontsize=9.5)
    left.legend(fontsize=8, frameon=False, loc="upper right")

    names = list(sqnr)
    width = 0.8 / len(scenarios)
    for j, scenario in enumerate(scenarios):
        heights = [sqnr[n][j] for n in names]
        xs = np.arange(len(names)) + (j - (len(scenarios) - 1) / 2) * width
        bars = right.bar(xs, heights, width=width * 0.95, label=scenario,
                         color=["#9cc3dc", "#f3a712", "#e4572e", "#5aa469"][j % 4])
        for b, h in zip(bars, heights):
            right.text(b.get_x() + b.get_width() / 2, h + 0.6, f"{h:.0f}", ha="center",
                       fontsize=7.5)
    right.set_xticks(range(len(names)))
    right.set_xticklabels(names, fontsize=8.5)
    right.set_ylabel("SQNR on held-out values (dB)", fontsize=9)
    right.set_ylim(0, max(max(s) for s in sqnr.values()) * 1.15)
    right.legend(fontsize=8, frameon=False, loc="lower left")
    right.set_title("error of each observer's range, higher is better", fontsize=9.5)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------- fake quant
def draw_fake_quant(x, x_hat, grad, scale, zero_point, qmin, qmax, title=None):
    """Left: x -> fake_quantize(x), with the identity dashed and the clamped regions
    shaded. Right: d fake_quantize / dx as autograd returns it (the STE mask)."""
    x, x_hat, grad = _np(x), _np(x_hat), _np(grad)
    lo, hi = (qmin - zero_point) * scale, (qmax - zero_point) * scale
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax in (left, right):
        ax.axvspan(x.min(), lo - scale / 2, color="#f6e0dc", zorder=-1)
        ax.axvspan(hi + scale / 2, x.max(), color="#f6e0dc", zorder=-1)
        ax.axvline(0, color="#333333", lw=0.6)
        ax.set_xlim(x.min(), x.max())
        ax.set_xlabel("x", fontsize=9)
    left.plot(x, x, color="#999999", lw=0.8, ls="--", label="identity")
    left.plot(x, x_hat, color=PALETTE[3], lw=1.6, label="fake_quantize(x)")
    left.axhline(0, color="#333333", lw=0.6)
    left.set_title(f"forward: dequantize(quantize(x)), scale={scale:g}, "
                   f"codes {qmin}..{qmax}", fontsize=9)
    left.legend(fontsize=8, frameon=False, loc="upper left")
    right.plot(x, grad, color=PALETTE[0], lw=1.8, drawstyle="steps-mid")
    right.set_ylim(-0.1, 1.2)
    right.set_yticks([0, 1])
    right.set_title("backward: the gradient autograd returns (straight-through)", fontsize=9)
    right.text(0.01, 0.93, "shaded: round(x/s)+z outside [qmin, qmax]",
               transform=right.transAxes, fontsize=8, color="#a0473a")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# -------------------------------------------------------------------------- pruning
def draw_masks(masks: dict, title=None):
    """One panel per mask (name -> 2-D 0/1 tensor, rows = output channels): kept weights
    dark, removed ones light, with the fraction removed in the panel title."""
    cmap = ListedColormap(["#f1efe8", "#2f5f80"])
    fig, axes = plt.subplots(1, len(masks), figsize=(3.6 * len(masks), 3.9))
    axes = np.atleast_1d(axes)
    for ax, (name, m) in zip(axes, masks.items()):
        a = _np(m).astype(float)
        ax.imshow(a, cmap=cmap, vmin=0, vmax=1, interpolation="nearest", aspect="auto")
        ax.set_title(f"{name}\n{1 - a.mean():.0%} removed", fontsize=9)
        ax.set_xlabel("input feature", fontsize=8.5)
        ax.tick_params(labelsize=7.5)
    axes[0].set_ylabel("output channel (row of the weight)", fontsize=8.5)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def draw_sparsity_curves(curves: dict, baseline=None, title=None):
    """Test accuracy (y) against the fraction of weights removed (x), one line per
    method (name -> (fractions, accuracies))."""
    fig, ax = plt.subplots(figsize=(6.8, 3.9))
    markers = ["o", "s", "^", "D"]
    for k, (name, (fr, acc)) in enumerate(curves.items()):
        ax.plot(_np(fr), 100 * _np(acc), marker=markers[k % 4], ms=4, lw=1.5,
                color=PALETTE[k % len(PALETTE)], label=name)
    if baseline is not None:
        ax.axhline(100 * baseline, color="#777777", lw=0.8, ls="--", label="dense")
    ax.set_xlabel("fraction of the Linear weights set to zero", fontsize=9)
    ax.set_ylabel("test accuracy (%)", fontsize=9)
    ax.grid(True, color="#eeeeee")
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------- distillation
def draw_soft_targets(probs: dict, label=None, title=None):
    """softmax(logits / T) of one example for a few temperatures (name -> 10 probabilities),
    as grouped bars on a log scale, so the small probabilities are visible."""
    names = list(probs)
    n_cls = len(_np(probs[names[0]]))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for j, name in enumerate(names):
        xs = np.arange(n_cls) + (j - (len(names) - 1) / 2) * width
        ax.bar(xs, _np(probs[name]), width=width * 0.95, color=PALETTE[j % len(PALETTE)],
               label=name)
    ax.set_yscale("log")
    smallest = min(float(_np(p).min()) for p in probs.values())
    ax.set_ylim(10 ** np.floor(np.log10(max(smallest, 1e-30))), 60)   # room for the legend
    ax.set_xticks(range(n_cls))
    ax.set_xlabel("class" + ("" if label is None else f" (true label: {label})"), fontsize=9)
    ax.set_ylabel("probability (log)", fontsize=9)
    ax.legend(fontsize=8, frameon=False, ncol=len(names), loc="upper right")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
