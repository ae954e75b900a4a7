"""Figures of course/09_deploy/01_export.ipynb: an ExportedProgram's graph signature as a picture."""
from collections import Counter

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

KIND_COLORS = {"PARAMETER": "#4c78a8", "BUFFER": "#f58518", "CONSTANT_TENSOR": "#b279a2",
               "USER_INPUT": "#54a24b", "USER_OUTPUT": "#54a24b", "BUFFER_MUTATION": "#e45756",
               "GRADIENT_TO_PARAMETER": "#72b7b2", "USER_INPUT_MUTATION": "#e45756", "TOKEN": "#bab0ac"}


def _box(ax, x, y, text, color, width=3.3):
    ax.add_patch(plt.Rectangle((x, y - 0.35), width, 0.7, facecolor=color, alpha=0.25, edgecolor=color))
    ax.text(x + 0.1, y, text, va="center", ha="left", fontsize=9, family="monospace")


def draw_signature(ep, title):
    """Left: where each placeholder's value comes from (a state_dict entry or the caller). Middle: the graph's
    placeholders in order. Right: the graph's outputs and where each one goes."""
    sig = ep.graph_signature
    ins, outs = sig.input_specs, sig.output_specs
    rows = max(len(ins), len(outs))
    fig, ax = plt.subplots(figsize=(12, 0.45 * rows + 1.4))
    for i, spec in enumerate(ins):
        y = rows - i
        kind = spec.kind.name
        source = spec.target if spec.target is not None else "argument of the call"
        _box(ax, 0, y, source, "#dddddd")
        _box(ax, 4.1, y, spec.arg.name, KIND_COLORS.get(kind, "#999999"))
        ax.annotate("", xy=(4.1, y), xytext=(3.3, y), arrowprops={"arrowstyle": "->", "color": "#666666"})
    for j, spec in enumerate(outs):
        y = rows - j
        kind = spec.kind.name
        _box(ax, 8.2, y, spec.arg.name, KIND_COLORS.get(kind, "#999999"), width=2.4)
        where = f"written back to {spec.target}" if spec.target is not None else "returned to the caller"
        ax.text(10.8, y, where, va="center", fontsize=9)
    ax.text(1.65, rows + 0.9, "value from", ha="center", fontsize=10, weight="bold")
    ax.text(5.75, rows + 0.9, "graph placeholders (in order)", ha="center", fontsize=10, weight="bold")
    ax.text(9.4, rows + 0.9, "graph outputs", ha="center", fontsize=10, weight="bold")
    kinds = Counter(s.kind.name for s in list(ins) + list(outs))
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=KIND_COLORS.get(k, "#999999"), alpha=0.4) for k in kinds]
    ax.legend(handles, [f"{k} ({n})" for k, n in kinds.items()], loc="lower right", fontsize=8, frameon=False,
              bbox_to_anchor=(1.0, -0.02))
    ax.set_xlim(-0.2, 14.6)
    ax.set_ylim(0.2, rows + 1.4)
    ax.axis("off")
    ax.set_title(title, fontsize=11)
    return fig


def draw_op_counts(graphs, title):
    """graphs: {label: fx.Graph}. One bar group per op (call_function targets), one bar per graph."""
    counts = {label: Counter(getattr(n.target, "__name__", str(n.target)).replace(".default", "")
                             for n in g.nodes if n.op == "call_function") for label, g in graphs.items()}
    ops = sorted(set().union(*counts.values()))
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(ops) + 1.2))
    height = 0.8 / len(counts)
    for k, (label, c) in enumerate(counts.items()):
        ax.barh([i + k * height for i in range(len(ops))], [c.get(op, 0) for op in ops], height=height, label=label)
    ax.set_yticks([i + height * (len(counts) - 1) / 2 for i in range(len(ops))])
    ax.set_yticklabels(ops, fontsize=8, family="monospace")
    ax.invert_yaxis()
    ax.set_xlabel("nodes")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=9)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig
