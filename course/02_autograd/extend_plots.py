"""Plotting helpers for notebook 2.3 (extending autograd).

The notebook computes every number; these functions only draw them.

Public functions
----------------
plot_jacobians(panels, title)              -> Jacobians side by side as heatmaps, one colour scale
plot_fd_error(eps, errors, title, mark)    -> finite-difference error against the step size (log-log)
plot_saved_memory(depths, series, title)   -> bytes saved for backward against network depth
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_jacobians", "plot_fd_error", "plot_saved_memory"]

_COLORS = ["#1f77b4", "#e4572e", "#2a9d8f", "#f3a712", "#6a4c93"]


def _as_array(t):
    """A tensor or array as a float64 numpy array (tensors are detached first)."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


def plot_jacobians(panels, title=None, cmap="RdBu_r"):
    """Draw each ``name -> matrix`` of ``panels`` as a heatmap, all on one symmetric colour scale.

    Rows are outputs, columns are inputs, as in ``J[i, j] = d out_i / d in_j``. A shared scale
    makes equal colours mean equal numbers across panels, so a difference panel reads directly.
    """
    mats = {name: _as_array(m) for name, m in panels.items()}
    vmax = max(float(np.abs(m).max()) for m in mats.values()) or 1.0
    fig, axes = plt.subplots(1, len(mats), figsize=(3.3 * len(mats) + 0.8, 3.4))
    axes = np.atleast_1d(axes)
    for ax, (name, m) in zip(axes, mats.items()):
        im = ax.imshow(m, cmap=cmap, vmin=-vmax, vmax=vmax)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("input j")
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(m.shape[0]))
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("output i")
    fig.colorbar(im, ax=list(axes), shrink=0.85, pad=0.02)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def plot_fd_error(eps, errors, title=None, mark=None):
    """Error of a finite-difference derivative against the step ``eps``, one line per dtype.

    ``errors`` maps a label to an array of errors (one per eps). ``mark`` (optional) draws a
    vertical line at a step worth pointing out, such as gradcheck's default.
    """
    eps = _as_array(eps)
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    lowest = np.inf
    for color, (label, err) in zip(_COLORS, errors.items()):
        err = np.maximum(_as_array(err), 1e-17)   # an exact zero would vanish from a log plot
        ax.loglog(eps, err, "o-", ms=3.5, color=color, label=label)
        best = int(np.argmin(err))
        lowest = min(lowest, float(err[best]))
        ax.annotate(f"best eps ~ {eps[best]:.0e}", (eps[best], err[best]), ha="center",
                    textcoords="offset points", xytext=(0, -15), fontsize=8, color=color)
    ax.set_ylim(bottom=lowest / 50)               # room for the label under the lowest point
    if mark is not None:
        ax.axvline(mark, color="#555555", ls="--", lw=1)
        ax.text(mark, ax.get_ylim()[1], f" eps={mark:g}\n (default)", va="top", fontsize=8,
                color="#555555")
    ax.set_xlabel("finite-difference step eps")
    ax.set_ylabel("max |numerical - exact| over the Jacobian")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def plot_saved_memory(depths, series, title=None, unit=2 ** 20, unit_name="MiB"):
    """Bytes saved for backward against depth, one line per ``label -> [bytes per depth]``."""
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    for color, (label, values) in zip(_COLORS, series.items()):
        vals = np.asarray(values, dtype=np.float64) / unit
        ax.plot(depths, vals, "o-", color=color, label=label)
        ax.annotate(f"{vals[-1]:.1f} {unit_name}", (depths[-1], vals[-1]),
                    textcoords="offset points", xytext=(6, -3), fontsize=8, color=color)
    ax.set_xlabel("number of blocks")
    ax.set_ylabel(f"activations saved for backward ({unit_name})")
    ax.set_xticks(depths)
    ax.set_xlim(min(depths) - 0.5, max(depths) * 1.15)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig
