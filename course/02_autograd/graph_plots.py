"""Drawing helpers for the stage-02 course notebooks (the autograd graph).

Everything here reads the graph PyTorch really recorded: it starts at a tensor's ``grad_fn``
and follows ``next_functions``, exactly the edges the backward engine follows. Nothing is
re-derived from the Python source of the model.

Public functions
----------------
walk_graph(roots)                 -> (nodes, edges): every Node reachable from the roots
node_label(node, names)           -> a short label ("MulBackward0", "AccumulateGrad\\nw (3,)")
draw_graph(roots, names=...)      -> the backward graph as a layered DAG (root on top)
simulate_engine(root)             -> the engine's schedule: dependency counts + ready queue
draw_engine_steps(root, names=..) -> one small panel per engine step
plot_scaling(results, ...)        -> time vs size for several methods, median and min-max band
"""

from __future__ import annotations

import heapq
import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = [
    "walk_graph",
    "node_label",
    "draw_graph",
    "simulate_engine",
    "short_label",
    "draw_engine_steps",
    "plot_scaling",
]

_FILL = {"root": "#f3a712", "leaf": "#a9d6e5", "op": "#eeeeee"}
_STATE = {"done": "#d0d0d0", "running": "#e4572e", "ready": "#f3a712", "waiting": "#ffffff"}
_EDGE = "#333333"


def _as_roots(roots):
    """Accept a tensor, a Node, or a list of them; return a list of Nodes."""
    if not isinstance(roots, (list, tuple)):
        roots = [roots]
    out = []
    for r in roots:
        node = getattr(r, "grad_fn", r)  # a tensor -> its grad_fn; a Node stays a Node
        if node is None:
            raise ValueError("a root has no grad_fn: it is a leaf or does not require grad")
        out.append(node)
    return out


def walk_graph(roots):
    """All Nodes reachable from ``roots`` through ``next_functions``.

    Returns ``(nodes, edges)``: nodes in depth-first discovery order, and edges as
    ``(parent, child)`` pairs, one per entry of ``parent.next_functions`` (so an edge that
    appears twice is listed twice, as it is counted twice by the engine). ``None`` entries
    (inputs that need no gradient) are skipped.
    """
    nodes, edges, seen = [], [], set()
    stack = list(reversed(_as_roots(roots)))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        nodes.append(node)
        children = [nxt for nxt, _ in node.next_functions if nxt is not None]
        edges.extend((node, child) for child in children)
        stack.extend(reversed(children))
    return nodes, edges


def _leaf_name(node, names):
    var = getattr(node, "variable", None)
    if var is None:
        return None
    for name, t in (names or {}).items():
        if t is var:
            return f"{name} {tuple(var.shape)}"
    return f"leaf {tuple(var.shape)}"


def node_label(node, names=None) -> str:
    """Short label: the Node's class name; AccumulateGrad nodes also name their leaf tensor."""
    name = node.name().replace("torch::autograd::", "")
    leaf = _leaf_name(node, names)
    return f"{name}\n{leaf}" if leaf else name


def _layout(nodes, edges, roots):
    """Layered layout: layer = longest path from a root, so every edge points downwards.

    Order inside a layer by the mean position of the parents (barycentre heuristic), which
    keeps crossings low for the small graphs drawn in the course.
    """
    parents = {n: [] for n in nodes}
    children = {n: [] for n in nodes}
    for p, c in edges:
        parents[c].append(p)
        children[p].append(c)
    layer = {n: 0 for n in roots}
    # longest-path layering by repeated relaxation (graphs here are small and acyclic)
    order = list(nodes)
    for _ in range(len(nodes)):
        changed = False
        for p in order:
            for c in children[p]:
                if layer.get(c, -1) < layer.get(p, 0) + 1:
                    layer[c] = layer.get(p, 0) + 1
                    changed = True
        if not changed:
            break
    depth = max(layer.values()) + 1
    layers = [[n for n in nodes if layer[n] == d] for d in range(depth)]
    xpos = {}
    for d, members in enumerate(layers):
        if d > 0:
            members.sort(key=lambda n: np.mean([xpos[p] for p in parents[n]]))
        for k, n in enumerate(members):
            xpos[n] = k - (len(members) - 1) / 2.0
        # pull lonely nodes under their parents when there is room
        if d > 0 and len(members) < len(layers[d - 1]):
            want = [float(np.mean([xpos[p] for p in parents[n]])) for n in members]
            placed = []
            for n, w in zip(members, want):
                x = w if not placed else max(w, placed[-1] + 1.0)
                placed.append(x)
                xpos[n] = x
    return layer, xpos, depth


def _draw_box(ax, x, y, text, fill, edge=_EDGE, lw=1.0, fontsize=8.5, extra=None, scale=1.0):
    """A rounded box sized for ``text`` at ``fontsize`` when one data unit is one inch;
    ``scale`` shrinks the type when the figure is drawn smaller than that."""
    lines = text.split("\n")
    width = 0.075 * max(len(s) for s in lines) * fontsize / 8.5 + 0.25
    height = 0.22 + 0.17 * (len(lines) - 1)
    box = FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                         boxstyle="round,pad=0.04,rounding_size=0.08", fc=fill, ec=edge, lw=lw,
                         zorder=3)
    ax.add_patch(box)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize * scale, zorder=4,
            family="monospace")
    if extra:
        ax.text(x + width / 2 + 0.04, y + height / 2, extra, ha="left", va="center",
                fontsize=(fontsize + 0.5) * scale, color="#7a0019", zorder=5, fontweight="bold")
    return height


def _scale(xpos, nodes, labels):
    """Horizontal unit so that the widest layer's labels do not overlap."""
    widest = max(max(len(s) for s in labels[n].split("\n")) for n in nodes)
    return max(1.0, 0.075 * widest + 0.45)


def draw_graph(roots, names=None, ax=None, title=None, saved=False, fontsize=8.5,
               max_width=11.5):
    """Draw the backward graph reachable from ``roots`` (tensors or Nodes).

    Arrows go from a Node to the entries of its ``next_functions``: the direction gradients
    flow during ``backward()``. The root is orange, ``AccumulateGrad`` nodes (which write
    into a leaf's ``.grad``) are blue. ``names`` maps a display name to a leaf tensor (for
    example ``dict(model.named_parameters())``). With ``saved=True`` each Node also lists the
    ``_saved_*`` attributes it holds for its backward formula.
    """
    roots = _as_roots(roots)
    nodes, edges = walk_graph(roots)
    labels = {}
    for n in nodes:
        lab = node_label(n, names)
        if saved:
            keys = [k[len("_saved_"):] for k in dir(n) if k.startswith("_saved_")]
            if keys:
                lab += "\nsaves " + ", ".join(keys[:3]) + (" ..." if len(keys) > 3 else "")
        labels[n] = lab
    layer, xpos, depth = _layout(nodes, edges, roots)
    unit = _scale(xpos, nodes, labels)
    xs = [xpos[n] * unit for n in nodes]
    span = max(xs) - min(xs) + 1.8 * unit
    scale = min(1.0, max_width / span)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.5, scale * span), scale * depth + 0.6))
    else:
        fig = ax.figure
    root_set = set(roots)
    for n in nodes:
        kind = "root" if n in root_set else ("leaf" if hasattr(n, "variable") else "op")
        _draw_box(ax, xpos[n] * unit, -layer[n], labels[n], _FILL[kind], fontsize=fontsize,
                  scale=scale)
    _draw_edges(ax, edges, xpos, layer, unit)
    ax.set_xlim(min(xs) - unit * 0.9, max(xs) + unit * 0.9)
    ax.set_ylim(-depth + 0.45, 0.55)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _draw_edges(ax, edges, xpos, layer, unit, color=_EDGE):
    counts = {}
    for p, c in edges:
        counts[(p, c)] = counts.get((p, c), 0) + 1
    drawn = {}
    for p, c in edges:
        k = drawn.get((p, c), 0)
        drawn[(p, c)] = k + 1
        rad = 0.0 if counts[(p, c)] == 1 else (0.25 if k == 0 else -0.25)
        if layer[c] - layer[p] > 1:
            rad = rad or 0.2  # long edges bend so they do not run through boxes
        arrow = FancyArrowPatch((xpos[p] * unit, -layer[p] - 0.16),
                                (xpos[c] * unit, -layer[c] + 0.16),
                                connectionstyle=f"arc3,rad={rad}", arrowstyle="-|>",
                                mutation_scale=10, lw=1.0, color=color, zorder=2,
                                shrinkA=2, shrinkB=6)
        ax.add_patch(arrow)


def simulate_engine(root):
    """Replay the CPU backward engine's schedule for the graph below ``root``.

    1. Count dependencies: for every Node, how many edges from reachable Nodes point at it.
    2. Put the root in the ready queue.
    3. Repeatedly pop the ready Node with the *highest* sequence number (the engine's
       priority; ``AccumulateGrad`` has the maximal one, so it runs as soon as it is ready),
       "run" it, and decrement the count of each Node in its ``next_functions``; a Node whose
       count reaches zero has received all its gradients and becomes ready.

    Returns a list of steps, each a dict with ``running`` (the Node), ``ready`` (Nodes in the
    queue after the step), ``deps`` (counts after the step) and ``done`` (set of Nodes run).
    """
    (root,) = _as_roots(root)
    nodes, edges = walk_graph(root)
    deps = {n: 0 for n in nodes}
    for _, child in edges:
        deps[child] += 1
    queue = [(-root._sequence_nr(), 0, root)]
    tie = 1
    done, steps = set(), []
    while queue:
        _, _, node = heapq.heappop(queue)
        for child in (nxt for nxt, _ in node.next_functions if nxt is not None):
            deps[child] -= 1
            if deps[child] == 0:
                heapq.heappush(queue, (-child._sequence_nr(), tie, child))
                tie += 1
        done.add(node)
        steps.append({"running": node, "ready": [q[2] for q in sorted(queue)],
                      "deps": dict(deps), "done": set(done)})
    return steps


def short_label(node, names=None) -> str:
    """Very short label for small panels: "Mul" for MulBackward0, "Acc(w)" for a leaf."""
    name = node.name().replace("torch::autograd::", "")
    var = getattr(node, "variable", None)
    if var is not None:
        leaf = next((k for k, t in (names or {}).items() if t is var), "leaf")
        return f"Acc({leaf})"
    return re.sub(r"Backward\d*$", "", name)


def draw_engine_steps(root, names=None, ncols=4, fontsize=9.0, max_width=12.5):
    """One panel per engine step: running (red), ready queue (orange), done (grey),
    waiting (white, with its remaining dependency count in red)."""
    (root,) = _as_roots(root)
    nodes, edges = walk_graph(root)
    steps = simulate_engine(root)
    labels = {n: short_label(n, names) for n in nodes}
    layer, xpos, depth = _layout(nodes, edges, [root])
    unit = _scale(xpos, nodes, labels)
    xs = [xpos[n] * unit for n in nodes]
    nrows = -(-len(steps) // ncols)
    span = max(xs) - min(xs) + 1.8 * unit
    scale = min(1.0, max_width / (span * ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(scale * span * ncols,
                                                    nrows * (scale * (depth + 0.1) + 0.55)))
    axes = np.atleast_1d(axes).ravel()
    for k, (ax, step) in enumerate(zip(axes, steps)):
        for n in nodes:
            if n is step["running"]:
                state = "running"
            elif n in step["done"]:
                state = "done"
            elif n in step["ready"]:
                state = "ready"
            else:
                state = "waiting"
            extra = f"{step['deps'][n]}" if state == "waiting" else None
            _draw_box(ax, xpos[n] * unit, -layer[n], labels[n], _STATE[state],
                      fontsize=fontsize, extra=extra, scale=scale)
        _draw_edges(ax, edges, xpos, layer, unit, color="#777777")
        ax.set_xlim(min(xs) - unit * 0.9, max(xs) + unit * 0.9)
        ax.set_ylim(-depth + 0.45, 0.55)
        ax.axis("off")
        queue = ", ".join(labels[n] for n in step["ready"]) or "empty"
        run = labels[step["running"]]
        ax.set_title(f"step {k + 1}: run {run}\nqueue after: [{queue}]", fontsize=8)
    for ax in axes[len(steps):]:
        ax.axis("off")
    handles = [plt.Rectangle((0, 0), 1, 1, fc=c, ec=_EDGE) for c in _STATE.values()]
    fig.legend(handles, ["done", "running now", "ready (in queue)",
                         "waiting (red: edges still to come)"],
               loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


_COLORS = ["#e4572e", "#29335c", "#669bbc", "#a8c686"]


def plot_scaling(panels, unit="ms", title=None):
    """Time vs size for several methods, one subplot per panel.

    ``panels`` maps a panel title to ``(xlabel, sizes, {method: [[t, t, ...] per size]})``.
    Each method is a line through the medians with a shaded min-max band over the repeats.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.9), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (ptitle, (xlabel, sizes, methods)) in zip(axes, panels.items()):
        for color, (method, runs) in zip(_COLORS, methods.items()):
            runs = [np.asarray(r, dtype=float) for r in runs]
            med = [float(np.median(r)) for r in runs]
            ax.fill_between(sizes, [r.min() for r in runs], [r.max() for r in runs],
                            color=color, alpha=0.18, lw=0)
            ax.plot(sizes, med, "o-", color=color, label=method, ms=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(v) for v in sizes])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(ptitle, fontsize=10)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel(f"time for the full Jacobian ({unit})")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
