"""Helpers for the stage-03 course notebooks (the dispatcher).

Everything here reads what the real dispatcher reports: the text of
``torch._C._dispatch_dump_table(op)`` (the *computed* table, one line per
dispatch key that has an entry) is parsed, not re-derived.

Public functions
----------------
dispatch_table(op)               -> {key name: kind} for one operator
draw_dispatch_tables(ops, keys)  -> heat-map: keys (rows) x operators (columns)
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

__all__ = ["KINDS", "DEFAULT_KEYS", "dispatch_table", "draw_dispatch_tables"]

# What a line of the computed table can say, and how we draw it.
KINDS = {
    "missing": ("no entry: error if reached", "#ffffff"),
    "fallthrough": ("fallthrough: skip this key", "#d9d9d9"),
    "fallback": ("backend fallback (boxed, any op)", "#a9d6e5"),
    "composite": ("composite / default kernel", "#b8e0a8"),
    "autograd": ("autograd kernel", "#f3a712"),
    "kernel": ("kernel for this op", "#e4572e"),
}

# Rows of the figure, highest priority on top (the order of DispatchKey).
DEFAULT_KEYS = [
    "PythonDispatcher", "PreDispatch", "PythonTLSSnapshot", "FuncTorchBatched",
    "AutocastCUDA", "AutocastCPU", "AutogradPrivateUse1", "AutogradCUDA",
    "AutogradCPU", "ADInplaceOrView", "ZeroTensor", "Negative", "Conjugate",
    "Functionalize", "Python", "BackendSelect", "SparseCPU", "QuantizedCPU",
    "Meta", "PrivateUse1", "XLA", "CPU",
]

_LINE = re.compile(r"^(\S+): (fallthrough )?registered at .*\[(.*)\]\s*$")


def dispatch_table(op: str) -> dict[str, str]:
    """Parse ``torch._C._dispatch_dump_table(op)`` into ``{key: kind}``.

    ``kind`` is one of ``KINDS``; a key with no line is simply absent
    (``missing``).
    """
    table = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        key, fallthrough, what = m.groups()
        if fallthrough:
            kind = "fallthrough"
        elif what == "backend fallback":
            kind = "fallback"
        elif what == "autograd kernel":
            kind = "autograd"
        elif what.startswith("default") or "math" in what:
            kind = "composite"
        else:
            kind = "kernel"
        table[key] = kind
    return table


def draw_dispatch_tables(ops, keys=None, ax=None, title=None):
    """One column per operator, one row per dispatch key, coloured by kind."""
    keys = list(keys or DEFAULT_KEYS)
    names = list(KINDS)
    grid = np.zeros((len(keys), len(ops)), dtype=int)
    for j, op in enumerate(ops):
        table = dispatch_table(op)
        for i, key in enumerate(keys):
            grid[i, j] = names.index(table.get(key, "missing"))
    if ax is None:
        _, ax = plt.subplots(figsize=(1.3 * len(ops) + 2.2, 0.3 * len(keys) + 2.4))
    cmap = ListedColormap([KINDS[n][1] for n in names])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(names) - 1, aspect="auto")
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels([op.replace("aten::", "") for op in ops], fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels(keys, fontsize=9)
    ax.set_xticks(np.arange(-0.5, len(ops)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(keys)), minor=True)
    ax.grid(which="minor", color="#888888", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_ylabel("dispatch key (highest priority on top)")
    handles = [Patch(facecolor=KINDS[n][1], edgecolor="#888888",
                     label=KINDS[n][0]) for n in names]
    ax.legend(handles=handles, loc="upper center", ncol=2,
              bbox_to_anchor=(0.4, -0.02), fontsize=9, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, pad=28)
    return ax
