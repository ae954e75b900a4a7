"""Helpers for notebook 6.3 (Inductor's IR and scheduler).

Everything shown is read back from Inductor while it compiles: the scheduler
nodes it builds, the fusion pairs it considers and scores, the reasons it logs
for the pairs it refuses, and the code it generates. Nothing here decides a
fusion itself.

Capture
-------
capture(fn, *args)        compile ``fn`` with Inductor and record what its
                          scheduler saw: a ``Capture`` (fields listed there)

Text
----
origins(snode)            the ATen ops a scheduler node was lowered from
kind(snode)               "Pointwise", "Reduction (sum)", "extern mm", ...
loops(snode)              its loop nest: "64x128" or "64 | reduce 128"
describe(nodes)           one line per scheduler node: kind, loops, ATen ops,
                          what it reads and writes
story(cap)                the fusion rounds: candidate pairs in score order,
                          the pairs fused, the pairs refused and why

Figure
------
draw_fusion(cap)          the scheduler nodes before fusion in a row with their
                          dependencies, and below them the kernels after fusion
"""

from __future__ import annotations

import dataclasses
import re
from unittest import mock

import matplotlib.pyplot as plt
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch
from torch._inductor import config, ir
from torch._inductor.dependencies import MemoryDep, StarDep
from torch._inductor.scheduler import Scheduler
from torch._inductor.utils import run_and_get_code
from torch._inductor.virtualized import V

import compile_plots as cp

__all__ = ["Capture", "capture", "origins", "kind", "loops", "describe", "story",
           "draw_fusion"]

_EXTERN = "#9e9e9e"
_REFUSED = "#b00020"


# --------------------------------------------------------------------------- capture
@dataclasses.dataclass
class Capture:
    """What one compile of ``fn`` showed.

    graph    the post-grad ATen graph Inductor lowered (an ``fx.GraphModule``)
    inputs   {name: IR node} of the graph's inputs
    nodes    the scheduler nodes before fusion (``SchedulerNode``, ...)
    fused    the scheduler nodes after fusion (``FusedSchedulerNode``, ...)
    rounds   per call of ``get_possible_fusions``: [(name1, name2, FusionScore)],
             best first, as the scheduler sorted them
    log      the messages of the ``fusion`` log
    code     the wrapper module Inductor generated
    out      what the compiled function returned
    """
    graph: object
    inputs: dict
    nodes: list
    fused: list
    rounds: list
    log: list
    code: str
    out: object

    @property
    def kernels(self):
        """The kernels the wrapper calls, in order (see compile_plots.generated_kernels)."""
        return cp.generated_kernels(self.code)

    def refusals(self):
        """[(name1, name2, reason)] from the log, each pair once."""
        seen = {}
        for msg in self.log:
            m = re.match(r"cannot fuse (\S+) with (\S+): (.*)", msg)
            if m:
                seen.setdefault((m[1], m[2]), m[3])
        return [(a, b, why) for (a, b), why in seen.items()]

    def fusions(self):
        """[(name1, name2)] in the order the scheduler fused them."""
        return [tuple(m.groups()) for m in
                (re.match(r"fusing (\S+) with (\S+)$", msg) for msg in self.log) if m]


def capture(fn, *args):
    """Compile ``fn`` (static shapes, no grad) with Inductor and record its scheduler.

    Two of Inductor's own hooks hand over the scheduler nodes:
    ``config._pre_fusion_custom_pass`` and ``config._post_fusion_custom_pass``
    are called with the list of nodes right before and right after fusion.
    ``Scheduler.get_possible_fusions`` is wrapped to record the candidate pairs
    of each round with their ``FusionScore``. The FX graph cache is off: on a
    cache hit Inductor would reuse compiled code and never schedule anything.
    """
    rec, rounds = {}, []

    def before(nodes):
        rec.update(nodes=list(nodes), graph=V.graph.module, inputs=dict(V.graph.graph_inputs))
        return nodes

    def after(nodes):
        rec["fused"] = list(nodes)
        return nodes

    original = Scheduler.get_possible_fusions

    def spy(self, nodes, is_reorder_round):
        pairs = original(self, nodes, is_reorder_round)
        rounds.append([(a.get_name(), b.get_name(), V.choices.score_fusion(self, a, b))
                       for a, b in pairs])
        return pairs

    torch.compiler.reset()
    with config.patch(_pre_fusion_custom_pass=before, _post_fusion_custom_pass=after,
                      fx_graph_cache=False), \
            mock.patch.object(Scheduler, "get_possible_fusions", spy), \
            torch.no_grad(), cp.torch_logs(fusion=True) as log:
        out, (code,) = run_and_get_code(torch.compile(fn, dynamic=False), *args)
    return Capture(rec["graph"], rec["inputs"], rec["nodes"], rec["fused"], rounds,
                   list(log), code, out)


# --------------------------------------------------------------------------- text
def origins(snode):
    """The ATen ops (FX node names) a scheduler node was lowered from, in graph order.

    A library call lists only its own op (its IR also remembers the origins of
    the inputs it forced into buffers).
    """
    found = set()
    for n in snode.get_nodes():
        if isinstance(n.node, ir.ExternKernel) and n.node.origin_node is not None:
            found.add(n.node.origin_node)
        else:
            found |= {o for o in n.node.origins if o.op == "call_function"}
    if not found:
        return []
    order = {x: i for i, x in enumerate(next(iter(found)).graph.nodes)}
    return [o.name for o in sorted(found, key=lambda o: order.get(o, -1))]


def kind(snode):
    node = snode.node
    if isinstance(node, ir.ExternKernel):
        return "extern " + str(getattr(node, "python_kernel_name", "")).split(".")[-1]
    data = getattr(node, "data", None)
    if isinstance(data, ir.Reduction):
        return f"Reduction ({data.reduction_type})"
    return type(data).__name__ if data is not None else type(node).__name__


def _size(seq):
    return "x".join(str(s) for s in seq)


def loops(snode):
    """The loop nest the scheduler keeps for a node: ``group[1]`` = (ranges, reduction ranges)."""
    if not hasattr(snode, "group") or snode.group[1] is None or isinstance(snode.node, ir.ExternKernel):
        return "-"
    ranges, reduce = snode.group[1]
    return _size(ranges) + (f" | reduce {_size(reduce)}" if reduce else "")


def _dep(d):
    if isinstance(d, MemoryDep):
        ranges = ", ".join(f"{v}<{r}" for v, r in d.ranges.items())
        return f"{d.name}[{d.index} | {ranges}]"
    if isinstance(d, StarDep):
        return f"{d.name}[*]"
    return str(d)


def describe(nodes):
    """One line per scheduler node (before fusion)."""
    rows = [("node", "class", "IR / kernel", "loops", "ATen ops", "reads", "writes")]
    for n in nodes:
        rows.append((n.get_name(), type(n).__name__, kind(n), loops(n),
                     ", ".join(origins(n)),
                     " ".join(_dep(d) for d in n.read_writes.reads),
                     " ".join(_dep(d) for d in n.read_writes.writes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _score(s):
    return (f"type {s.node_type_score:+d}  bytes {s.memory_score:6d}  "
            f"proximity {s.proximity_score:+d}")


def story(cap):
    """The fusion log, round by round, with the scores of the candidate pairs."""
    out, k = [], 0
    for msg in cap.log:
        if msg.startswith("===== attempting"):
            out.append(re.sub(r"=+ attempting fusion \((\d+)/10\): (\d+) nodes =+",
                              r"round \1: \2 nodes", msg))
        elif msg.startswith("===== fusion complete"):
            out.append("no more fusions; one last round may reorder loops to fuse more:")
        elif msg.startswith("found"):
            out.append("  " + msg + (":" if k < len(cap.rounds) and cap.rounds[k] else ""))
            if k < len(cap.rounds):
                for a, b, s in cap.rounds[k]:
                    out.append(f"    {a} + {b}:  {_score(s)}")
            k += 1
        elif msg.startswith(("fusing", "cannot fuse")):
            out.append("  " + msg)
    return "\n".join(out)


# --------------------------------------------------------------------------- figure
_DX, _W, _H = 2.0, 1.8, 1.0   # column spacing, box width and height (data units)


def _groups(cap):
    """{pre-fusion node name: index into cap.fused}."""
    return {s.get_name(): i for i, f in enumerate(cap.fused) for s in f.get_nodes()}


def _label(snode, width=22):
    ops = ", ".join(origins(snode))
    if len(ops) > width:
        ops = ops[:width - 3] + "..."
    nest = loops(snode)
    return f"{snode.get_name()}: {kind(snode)}\n{ops}" + ("" if nest == "-" else f"\n{nest}")


def _arc(ax, x0, x1, y, rad, **style):
    ax.annotate("", xy=(x1, y), xytext=(x0, y),
                arrowprops=dict(connectionstyle=f"arc3,rad={rad}", **style))
    return y - rad * (x1 - x0) / 2      # the height of the arc's apex (rad < 0: above)


def draw_fusion(cap, ax=None, title=None):
    """Scheduler nodes before fusion (top row), nodes after fusion (bottom row).

    Top: one box per scheduler node in schedule order, coloured by the node it
    ends up in after fusion (grey: a library call). Arcs above are dependencies,
    labelled with the buffer: solid for a ``MemoryDep`` (the consumer's loop reads
    known elements), dotted for a ``StarDep`` (a library call takes the whole
    buffer). Red dashed arcs below join pairs the scheduler refused to fuse, with
    its reason. Bottom: one box per node after fusion, spanning its members.
    """
    nodes, fused = cap.nodes, cap.fused
    col = {n.get_name(): i for i, n in enumerate(nodes)}
    group = _groups(cap)
    colours, k = {}, 0
    for i, f in enumerate(fused):
        if isinstance(getattr(f, "node", None), ir.ExternKernel):
            colours[i] = _EXTERN
        else:
            colours[i] = cp.PALETTE[k % len(cp.PALETTE)]
            k += 1
    n = len(nodes)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(5.0, 1.05 * n * _DX), 4.6))
    writer = {buf: m.get_name() for m in nodes for buf in m.get_buffer_names()}
    top = _H / 2
    for j, node in enumerate(nodes):
        for dep in node.read_writes.reads:
            src = writer.get(dep.name)
            if src is None or src == node.get_name():
                continue
            i = col[src]
            rad = -0.5 if j - i == 1 else -0.3
            apex = _arc(ax, i * _DX + 0.3, j * _DX - 0.3, _H / 2, rad, arrowstyle="->",
                        color="#666666", lw=1.0,
                        linestyle=":" if isinstance(dep, StarDep) else "-")
            ax.text((i + j) / 2 * _DX, apex + 0.03, dep.name, ha="center", va="bottom",
                    fontsize=7.5, color="#444444")
            top = max(top, apex + 0.3)
    bottom = -_H / 2
    by_reason = {}
    for a, b, why in cap.refusals():
        if a in col and b in col:
            by_reason.setdefault(why, []).append(tuple(sorted((col[a], col[b]))))
    for why, pairs in by_reason.items():
        deepest = None
        for i, j in pairs:
            apex = _arc(ax, i * _DX, j * _DX, -_H / 2, 0.3, arrowstyle="-", color=_REFUSED,
                        lw=1.2, linestyle="--")
            if deepest is None or apex < deepest[0]:
                deepest = (apex, (i + j) / 2 * _DX)
        ax.text(deepest[1], deepest[0] - 0.05, why, ha="center", va="top", fontsize=7.5,
                color=_REFUSED)
        bottom = min(bottom, deepest[0] - 0.35)
    for j, node in enumerate(nodes):
        ax.add_patch(FancyBboxPatch((j * _DX - _W / 2, -_H / 2), _W, _H,
                                    boxstyle="round,pad=0.02",
                                    facecolor=colours[group[node.get_name()]],
                                    edgecolor="#333333", linewidth=0.9))
        ax.text(j * _DX, 0, _label(node), ha="center", va="center", fontsize=7.5)
    y2 = bottom - 0.6
    for g, f in enumerate(fused):
        members = [col[m.get_name()] for m in f.get_nodes() if m.get_name() in col]
        lo, hi = min(members), max(members)
        ax.add_patch(FancyBboxPatch((lo * _DX - _W / 2, y2 - 0.6), (hi - lo) * _DX + _W, 0.6,
                                    boxstyle="round,pad=0.02", facecolor=colours[g],
                                    edgecolor="#333333", linewidth=0.9))
        label = type(f).__name__ if len(f.get_nodes()) > 1 else kind(f)
        ax.text((lo + hi) / 2 * _DX, y2 - 0.3, f"{f.get_name()}\n{label}", ha="center",
                va="center", fontsize=7.5)
        for m in members:
            ax.plot([m * _DX, m * _DX], [-_H / 2 - 0.02, y2 + 0.02], color=colours[g],
                    lw=3, alpha=0.45, zorder=0)
    ax.text(-_W / 2 - 0.15, 0, f"{n} nodes\nbefore\nfusion", ha="right", va="center",
            fontsize=8.5)
    ax.text(-_W / 2 - 0.15, y2 - 0.3, f"{len(fused)} after", ha="right", va="center",
            fontsize=8.5)
    ax.set_xlim(-_W / 2 - 1.3, (n - 1) * _DX + _W / 2 + 0.1)
    ax.set_ylim(y2 - 0.75, top + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    handles = [Line2D([], [], color="#666666", label="reads elements (MemoryDep)"),
               Line2D([], [], color="#666666", ls=":", label="reads whole buffer (StarDep)"),
               Line2D([], [], color=_REFUSED, ls="--", label="fusion refused")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
              fontsize=7.5, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
