"""Helpers for the stage-05 course notebooks (torch.fx and graph capture).

Everything drawn here is read from the graphs PyTorch really built: the nodes of a
``torch.fx.Graph`` (``node.op``, ``node.target``, ``node.args``) and the outcomes of real
capture calls. Nothing is re-derived from the Python source of a model.

Public functions
----------------
target_name(node)                  -> readable target: "torch.relu", "aten.addmm.default", "self.conv1"
node_rows(gm)                      -> one (opcode, name, target, args, kwargs) tuple per node
print_nodes(gm)                    -> a plain-text table of the nodes (print_tabular without tabulate)
show_code(gm)                      -> print gm.code without blank lines and source-location comments
op_counts(gm)                      -> Counter of the operations a graph calls
summary(counts)                    -> that Counter as one wrapped line of text
draw_fx_graph(gm, ...)             -> the graph as a layered DAG, nodes coloured by opcode
draw_fx_graphs([gm, ...], titles)  -> several graphs side by side, at the same scale
plot_op_histograms({level: Counter}) -> op counts of one program at several levels, grouped bars
plot_capture_matrix(outcomes, ...) -> which capture method handles which program, measured
"""

from __future__ import annotations

import collections
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch
from matplotlib.path import Path

__all__ = [
    "OPCODE_COLORS",
    "target_name",
    "node_rows",
    "print_nodes",
    "show_code",
    "op_counts",
    "summary",
    "draw_fx_graph",
    "draw_fx_graphs",
    "plot_op_histograms",
    "OUTCOMES",
    "plot_capture_matrix",
]

# The six opcodes of torch.fx, in the order a graph usually lists them.
OPCODE_COLORS = {
    "placeholder": "#a9d6e5",
    "get_attr": "#cdb4db",
    "call_module": "#f3a712",
    "call_function": "#e9e9e9",
    "call_method": "#b8e0a8",
    "output": "#e4572e",
}
_EDGE = "#333333"


# --------------------------------------------------------------------------- reading nodes

def target_name(node) -> str:
    """A readable name for ``node.target``.

    Functions get their qualified name (``torch.relu``, ``operator.add``), ATen overloads
    their dotted name (``aten.addmm.default``); modules and attributes are strings already.
    """
    target = node.target
    if node.op in ("call_module", "get_attr"):
        return f"self.{target}"
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    try:
        return torch.fx.node._get_qualified_name(target).replace("_operator.", "operator.")
    except Exception:  # a callable fx cannot name: fall back to its repr
        return getattr(target, "__name__", repr(target))


def _short(value, width=28) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def node_rows(gm):
    """``(opcode, name, target, args, kwargs)`` for every node, as strings."""
    graph = getattr(gm, "graph", gm)
    return [(n.op, n.name, target_name(n), _short(n.args), _short(n.kwargs))
            for n in graph.nodes]


def print_nodes(gm) -> None:
    """Print the node table that ``Graph.print_tabular`` prints, without ``tabulate``."""
    head = ("opcode", "name", "target", "args", "kwargs")
    rows = [head] + node_rows(gm)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for k, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


def summary(counts, width=88) -> str:
    """``Counter`` of ops -> "nn.Linear×5, .transpose×4, ..." wrapped to ``width``."""
    text = ", ".join(f"{_short_op(op)}×{n}" for op, n in counts.most_common())
    return textwrap.fill(text, width=width, subsequent_indent="    ")


_FREES = re.compile(r";\s+(?:\w+ = )+None$")


def show_code(gm, width=100) -> None:
    """Print the Python that a GraphModule runs (``gm.code``).

    Blank lines, the ``# File: ...`` comments that torch.export and make_fx add (they
    name the source file and line each node came from) and the trailing ``;  a = b = None``
    that free values after their last use are dropped; long lines are cut.
    """
    for line in gm.code.splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        line = _FREES.sub("", line)
        print(line if len(line) <= width else line[: width - 4] + " ...")


def op_counts(gm, modules=True) -> collections.Counter:
    """Count what a graph calls.

    ``call_function`` nodes count by target name, ``call_method`` nodes as ``.name``, and
    ``call_module`` nodes by the class of the submodule (``nn.Linear``); placeholders,
    attributes and the output are not operations and are left out. ``getitem`` (unpacking
    a tuple result) is left out too.
    """
    counts = collections.Counter()
    for n in getattr(gm, "graph", gm).nodes:
        if n.op == "call_function":
            name = target_name(n)
            if name in ("_operator.getitem", "operator.getitem"):
                continue
            counts[name] += 1
        elif n.op == "call_method":
            counts[f".{n.target}"] += 1
        elif n.op == "call_module" and modules:
            counts[f"nn.{type(gm.get_submodule(n.target)).__name__}"] += 1
    return counts


# --------------------------------------------------------------------------- the DAG figure

def _label(node, gm) -> str:
    if node.op == "placeholder":
        return node.name
    if node.op == "output":
        return "output"
    if node.op == "call_module":
        cls = type(gm.get_submodule(node.target)).__name__
        return f"{node.name}\n{cls}"
    if node.op == "get_attr":
        return f"{node.name}\nself.{node.target}"
    if node.op == "call_method":
        return f"{node.name}\n.{node.target}()"
    name = target_name(node)
    name = name.replace("torch.nn.functional.", "F.").removesuffix(".default")
    return f"{node.name}\n{name}"


def _layout(nodes, parents, children):
    """Layered layout: a node sits one layer below its deepest input.

    Nodes without inputs of their own (attributes, and placeholders read only once) are
    pulled down next to their first user; other placeholders stay on top. Inside a layer nodes are ordered by the
    mean position of their inputs (barycentre heuristic), which keeps crossings low on the
    small graphs drawn in the course.
    """
    layer = {}
    for n in nodes:  # graph order is a topological order
        layer[n] = 1 + max((layer[p] for p in parents[n]), default=-1)
    for n in nodes:
        lonely = n.op != "placeholder" or len(children[n]) == 1
        if not parents[n] and lonely and children[n]:
            layer[n] = min(layer[c] for c in children[n]) - 1
    depth = max(layer.values()) + 1
    layers = [[n for n in nodes if layer[n] == d] for d in range(depth)]
    xpos = {}
    for d, members in enumerate(layers):
        def key(n):
            placed = [xpos[p] for p in parents[n] if p in xpos]
            return float(np.mean(placed)) if placed else -1e9 + nodes.index(n)
        members.sort(key=key)
        want = [key(n) if key(n) > -1e8 else None for n in members]
        start = -(len(members) - 1) / 2.0
        xs = []
        for k, w in enumerate(want):
            x = start + k if w is None else w
            if xs:
                x = max(x, xs[-1] + 1.0)
            xs.append(x)
        if xs:  # centre the layer on its inputs without changing the spacing
            shift = (np.mean([w for w in want if w is not None]) - np.mean(xs)
                     if any(w is not None for w in want) else -np.mean(xs))
            xs = [x + shift for x in xs]
        for n, x in zip(members, xs):
            xpos[n] = x
    return layer, xpos, depth


def _prepare(gm, fontsize):
    """Layout of one graph in inches (one data unit = one inch at scale 1)."""
    nodes = list(gm.graph.nodes)
    parents = {n: list(dict.fromkeys(n.all_input_nodes)) for n in nodes}
    children = {n: list(n.users) for n in nodes}
    layer, xpos, depth = _layout(nodes, parents, children)
    labels = {n: _label(n, gm) for n in nodes}
    widest = max(len(line) for s in labels.values() for line in s.split("\n"))
    unit = max(1.2, 0.075 * widest * fontsize / 8.0 + 0.45)
    xs = [xpos[n] * unit for n in nodes]
    return dict(nodes=nodes, parents=parents, layer=layer, xpos=xpos, depth=depth,
                labels=labels, unit=unit, lo=min(xs) - 0.8 * unit, hi=max(xs) + 0.8 * unit)


def _render(ax, prep, fontsize, scale, row, title, depth, lanes):
    nodes, parents, layer = prep["nodes"], prep["parents"], prep["layer"]
    xpos, unit, labels = prep["xpos"], prep["unit"], prep["labels"]
    size = {n: _box_size(labels[n], fontsize) for n in nodes}
    for n in nodes:
        _box(ax, xpos[n] * unit, -layer[n] * row, labels[n], OPCODE_COLORS[n.op], fontsize,
             scale)
    lo, hi = prep["lo"], prep["hi"]
    lane = {}  # long edges run down a lane beside the layers they skip
    for n in nodes:
        for p in parents[n]:
            top = (xpos[p] * unit, -layer[p] * row - size[p][1] / 2 - 0.035)
            bottom = (xpos[n] * unit, -layer[n] * row + size[n][1] / 2 + 0.035)
            between = [m for m in nodes if layer[p] < layer[m] < layer[n]]
            if between and not lanes:  # a light curve behind the boxes
                ax.add_patch(FancyArrowPatch(top, bottom, arrowstyle="-|>", mutation_scale=9,
                                             lw=0.8, color="#9a9a9a", zorder=1, shrinkA=0,
                                             shrinkB=0, connectionstyle="arc3,rad=0.12"))
                continue
            if not between:
                ax.add_patch(FancyArrowPatch(top, bottom, arrowstyle="-|>", mutation_scale=9,
                                             lw=0.9, color=_EDGE, zorder=2, shrinkA=0,
                                             shrinkB=0))
                continue
            left = min(xpos[m] * unit - size[m][0] / 2 for m in between)
            right = max(xpos[m] * unit + size[m][0] / 2 for m in between)
            mid = (top[0] + bottom[0]) / 2
            side = "left" if mid - left <= right - mid else "right"
            k = lane[side] = lane.get(side, 0) + 1
            x = left - 0.18 * k if side == "left" else right + 0.18 * k
            y0, y1 = -(layer[p] + 0.5) * row, -(layer[n] - 0.5) * row
            path = Path([top, (top[0], y0), (x, y0), (x, y1), (bottom[0], y1), bottom])
            ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=9,
                                         lw=0.9, color="#555555", zorder=1,
                                         connectionstyle=None, shrinkA=0, shrinkB=0))
            lo, hi = min(lo, x - 0.3), max(hi, x + 0.3)
    ax.set_xlim(lo, hi)
    ax.set_ylim(-(depth - 1) * row - 0.45, 0.45)
    ax.set_aspect("equal")
    ax.set_anchor("N")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)


def _legend(fig, gms):
    present = [op for op in OPCODE_COLORS
               if any(n.op == op for gm in gms for n in gm.graph.nodes)]
    fig.legend(handles=[Patch(fc=OPCODE_COLORS[op], ec="#888888", label=op) for op in present],
               loc="lower center", ncol=min(6, len(present)), fontsize=8, frameon=False)


def draw_fx_graphs(gms, titles=None, fontsize=8.0, row=0.62, max_width=12.0, lanes=True):
    """Draw several graphs side by side at the same scale, top to bottom, one box per
    node coloured by opcode.

    Arrows follow ``node.args``/``node.kwargs``: from the node that produces a value to
    the nodes that read it (``node.users``). Edges that skip layers run down a lane beside
    the graph (``lanes=True``) or as light curves behind the boxes (``lanes=False``, better
    when one value has many users). Returns the figure.
    """
    titles = list(titles or [None] * len(gms))
    preps = [_prepare(gm, fontsize) for gm in gms]
    widths = [p["hi"] - p["lo"] + 0.6 for p in preps]
    scale = min(1.0, max_width / sum(widths))
    depth = max(p["depth"] for p in preps)
    height = depth * row + 0.4
    fig, axes = plt.subplots(1, len(gms), figsize=(max(5.0, scale * sum(widths)),
                                                  scale * height + 1.1),
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    for ax, prep, title in zip(axes[0], preps, titles):
        _render(ax, prep, fontsize, scale, row, title, depth, lanes)
    _legend(fig, gms)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def draw_fx_graph(gm, title=None, **kwargs):
    """Draw one graph (see ``draw_fx_graphs``)."""
    return draw_fx_graphs([gm], [title], **kwargs)


def _box_size(text, fontsize):
    lines = text.split("\n")
    return (0.075 * max(len(s) for s in lines) * fontsize / 8.0 + 0.2,
            0.14 + 0.13 * len(lines) * fontsize / 8.0)


def _box(ax, x, y, text, fill, fontsize, scale=1.0):
    """A box sized in data units for ``fontsize``; the text is drawn at ``fontsize * scale``
    because one data unit is ``scale`` inches on the page."""
    width, height = _box_size(text, fontsize)
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.03,rounding_size=0.06", fc=fill,
                                ec=_EDGE, lw=0.9, zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize * scale, zorder=4,
            family="monospace", linespacing=1.1)


# --------------------------------------------------------------------------- op histograms

_LEVEL_COLORS = ["#29335c", "#f3a712", "#e4572e", "#669bbc", "#a8c686"]


def _short_op(name: str) -> str:
    """"torch.nn.functional.silu" -> "F.silu", "aten.view.default" -> "aten.view"."""
    for prefix in ("torch.nn.functional.", "torch._C._nn."):
        if name.startswith(prefix):
            return "F." + name[len(prefix):]
    return name.removesuffix(".default")


def plot_op_histograms(levels, title=None):
    """Op counts of one program at several levels, as grouped horizontal bars.

    ``levels`` maps a level name (say "ATen" and "Core ATen") to a ``Counter`` (see
    ``op_counts``). One row per op found at any level, most frequent first; each level
    has its own colour, and the legend gives its total number of op nodes.
    """
    names = list(levels)
    ops = sorted(set().union(*levels.values()),
                 key=lambda op: (-max(levels[n][op] for n in names), op))
    height = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(8.0, 0.075 * len(ops) * len(names) + 0.07 * len(ops) + 1.3))
    y = np.arange(len(ops))
    for k, name in enumerate(names):
        values = [levels[name][op] for op in ops]
        total, distinct = sum(levels[name].values()), len(levels[name])
        bars = ax.barh(y - 0.4 + height * (k + 0.5), values, height=height,
                       color=_LEVEL_COLORS[k % len(_LEVEL_COLORS)],
                       label=f"{name}: {total} nodes, {distinct} distinct ops")
        ax.bar_label(bars, labels=[str(v) if v else "" for v in values], fontsize=6,
                     padding=1.5)
    ax.set_yticks(y, [_short_op(op) for op in ops], fontsize=7, family="monospace")
    ax.set_ylim(len(ops) - 0.5, -0.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel("nodes calling the op", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.45, -0.06 - 1.0 / len(ops)),
              frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- capture matrix

OUTCOMES = {
    "correct": ("right answer on a new input", "#a8c686"),
    "wrong": ("silently wrong on a new input", "#e4572e"),
    "capture error": ("refused while capturing", "#d9d9d9"),
    "call error": ("refused the new input (guard)", "#f3a712"),
}


def plot_capture_matrix(outcomes, methods, programs, title=None):
    """A grid: capture methods (rows) x programs (columns), coloured by outcome.

    ``outcomes[(method, program)]`` is ``(kind, note)`` with ``kind`` one of ``OUTCOMES``
    and ``note`` a short text written in the cell (an exception name, a graph count).
    """
    kinds = list(OUTCOMES)
    fig, ax = plt.subplots(figsize=(1.9 * len(programs) + 2.2, 0.55 * len(methods) + 1.6))
    for i, method in enumerate(methods):
        for j, program in enumerate(programs):
            kind, note = outcomes[(method, program)]
            ax.add_patch(plt.Rectangle((j, i), 1, 1, fc=OUTCOMES[kind][1], ec="white", lw=2))
            ax.text(j + 0.5, i + 0.5, note, ha="center", va="center", fontsize=7.5,
                    wrap=True)
    ax.set_xlim(0, len(programs))
    ax.set_ylim(len(methods), 0)
    ax.set_xticks(np.arange(len(programs)) + 0.5, programs, fontsize=8.5, family="monospace")
    ax.xaxis.tick_top()
    ax.set_yticks(np.arange(len(methods)) + 0.5, methods, fontsize=8.5, family="monospace")
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.legend(handles=[Patch(fc=OUTCOMES[k][1], label=OUTCOMES[k][0]) for k in kinds],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8,
              frameon=False)
    if title:
        ax.set_title(title, fontsize=10, pad=24)
    fig.tight_layout()
    return fig
