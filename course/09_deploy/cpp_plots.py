"""Figure of course/09_deploy/03_cpp.ipynb: who handles an operator at each dispatch key."""
import re

import matplotlib.pyplot as plt
import torch

# a few of the keys a CPU or meta call can meet, highest priority first (the order of c10::DispatchKey, reversed)
KEYS = ["AutocastCPU", "AutogradCPU", "ADInplaceOrView", "Functionalize", "Python", "BackendSelect", "CPU", "Meta"]
COLORS = {"kernel": "#4c78a8", "fallback": "#bab0ac", "fallthrough": "#eeeeee", "none": "#ffffff"}


def dispatch_entries(qualname, ours):
    """{key: (kind, where)} from torch._C._dispatch_dump_table; `ours` marks the files that count as ours."""
    table = {}
    for line in torch._C._dispatch_dump_table(qualname).splitlines():
        m = re.match(r"(\w+): (fallthrough )?registered at (\S+?):\d+ \[(.*)\]", line)
        if not m:
            continue
        key, fallthrough, where, what = m.groups()
        if fallthrough:
            kind = "fallthrough"
        elif "fallback" in what:
            kind = "fallback"
        else:
            kind = "kernel"
        if any(o in where for o in ours):
            short = "ours, C++"
        elif where.endswith("torch/library.py"):
            short = "ours, from Python"
        else:
            short = where.rsplit("/", 1)[-1]
        table[key] = (kind, short)
    return table


def draw_dispatch(columns, ours=("main.cpp",)):
    """One column per operator, one row per dispatch key: what the dispatcher finds there."""
    fig, ax = plt.subplots(figsize=(3.6 * len(columns) + 1.8, 0.5 * len(KEYS) + 1.2))
    for c, qualname in enumerate(columns):
        table = dispatch_entries(qualname, ours)
        ax.text(c * 3.6 + 1.6, len(KEYS) + 0.1, qualname, ha="center", fontsize=10, family="monospace", weight="bold")
        for r, key in enumerate(KEYS):
            y = len(KEYS) - 1 - r
            kind, where = table.get(key, ("none", "nothing registered"))
            ax.add_patch(plt.Rectangle((c * 3.6, y - 0.4), 3.3, 0.8, facecolor=COLORS[kind], edgecolor="#888888"))
            label = {"kernel": f"kernel ({where})", "fallback": "PyTorch's fallback", "fallthrough": "fallthrough (skipped)",
                     "none": "nothing registered"}[kind]
            ax.text(c * 3.6 + 0.1, y, label, va="center", fontsize=8.5,
                    color="white" if kind == "kernel" else "black")
    for r, key in enumerate(KEYS):
        ax.text(-0.15, len(KEYS) - 1 - r, key, ha="right", va="center", fontsize=9, family="monospace")
    ax.set_xlim(-1.9, 3.6 * len(columns))
    ax.set_ylim(-0.6, len(KEYS) + 0.5)
    ax.axis("off")
    ax.set_title("What the dispatcher finds at each key (highest priority first)", fontsize=10)
    fig.tight_layout()
    return fig
