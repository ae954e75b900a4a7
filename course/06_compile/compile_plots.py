"""Helpers for the stage-06 course notebooks (torch.compile).

Everything drawn here is read back from what PyTorch itself reports: Dynamo's
logs and graphs, the code Inductor generates, and wall-clock timings.

Logs and guards
---------------
torch_logs(**artifacts)        context manager: turn on ``torch._logging`` artifacts
                               (guards=True, recompiles=True, ...) and collect the
                               messages instead of printing them to stderr
tidy(text)                     drop absolute paths, object ids and uuids from a log
tidy_guards(text)              a guard tree, trimmed to the lines worth reading

Figures
-------
draw_capture_map(fn, graphs)   the source of ``fn``, each line coloured by the
                               captured graph its ops went into (or none: Python)
draw_call_costs(calls)         time per call, compiles and cache hits coloured
generated_kernels(code)        the kernels of an Inductor wrapper, in call order
kernel_source(code, name)      the C++ source of one generated kernel
fusion_groups(gm, kernels)     which generated kernel computed each ATen node
draw_fusion_graph(gm, groups)  the ATen graph, nodes coloured by kernel
median_times(fns, args)        interleaved timings, median per function
draw_speedups(rows)            eager vs compiled bars with speedups

Nothing here plans fusions or generates code: the groups are Inductor's own,
recovered from the names it gives its kernels.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import statistics
import textwrap
import time
from collections import defaultdict

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import FancyBboxPatch, Patch

__all__ = [
    "torch_logs", "tidy", "tidy_guards", "draw_capture_map", "draw_call_costs",
    "generated_kernels", "kernel_source", "fusion_groups", "draw_fusion_graph",
    "median_times", "draw_speedups", "PALETTE",
]

PALETTE = ["#a9d6e5", "#f3a712", "#b8e0a8", "#e4572e", "#c3a6d8", "#f7d08a",
           "#8fb9a8", "#f4a6a6"]
_PYTHON = "#eeeeee"
_EXTERN = "#9e9e9e"
_NONE = "#ffffff"


# --------------------------------------------------------------------------- logs
class LogCapture(list):
    """The messages logged while the context was open (one string each)."""

    def text(self, contains: str | None = None) -> str:
        msgs = [m for m in self if contains is None or contains in m]
        return "\n".join(msgs)


class _ListHandler(logging.Handler):
    def __init__(self, sink):
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record):
        self.sink.append(record.getMessage())


@contextlib.contextmanager
def torch_logs(**artifacts):
    """``torch._logging.set_logs(**artifacts)`` for the block, messages collected.

    torch's loggers write to stderr through their own handlers; inside the block
    those handlers are swapped for one that appends to the returned list, and
    every torch logger goes back to the default configuration afterwards.
    Warnings Dynamo logs (a graph break, for instance) are collected too.
    """
    torch._logging.set_logs(**artifacts)
    captured = LogCapture()
    handler = _ListHandler(captured)
    swapped = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or not name.startswith("torch"):
            continue
        streams = [h for h in logger.handlers if type(h) is logging.StreamHandler]
        if streams:
            swapped.append((logger, streams))
            for h in streams:
                logger.removeHandler(h)
            logger.addHandler(handler)
    try:
        yield captured
    finally:
        for logger, streams in swapped:
            logger.removeHandler(handler)
            for h in streams:
                logger.addHandler(h)
        torch._logging.set_logs()


_PATH = re.compile(r"""(?:[A-Za-z]:)?[^\s"':,()<>]*/[^\s"':,()<>]+\.py""")
_UUID = re.compile(r"_[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}")
_ID = re.compile(r"\b\d{10,}\b")


def tidy(text: str) -> str:
    """Replace absolute file paths by ``<file>``, object ids by ``<id>``, drop uuids."""
    text = _PATH.sub("<file>", text)
    text = _UUID.sub("", text)
    return _ID.sub("<id>", text)


_GUARD_NOISE = ("DIMENSION_DYNAMIC_MARKING_GUARD", "TORCH_FUNCTION_MODE_STACK",
                "top_saved_tensors_hooks", "Guard eval latency")


def tidy_guards(text: str, width: int = 100) -> str:
    """A guard tree as Dynamo logs it, trimmed for reading.

    Drops the source comments after ``#``, the per-dimension "was this marked
    dynamic" checks and two ambient checks, shortens the global-state snapshot
    and the accessor details, and cuts long lines at ``width``.
    """
    out = []
    for line in tidy(text).splitlines():
        if any(noise in line for noise in _GUARD_NOISE) or not line.strip():
            continue
        if line.strip() in ("GUARDS:", "TREE_GUARD_MANAGER:"):
            continue
        line = re.sub(r"\s+#.*$", "", line)
        line = re.sub(r"against \{.*\}", "against {grad_mode, autocast, "
                      "default dtype, num_threads, ...}", line)
        line = re.sub(r"GuardManager: source=(.*?)(?:, accessed_by=\w+(?:\([^)]*\))?)?"
                      r", type=<class '([^']*)'>.*$", r"\1  (a \2)", line)
        line = re.sub(r", type=<class '[^']*'>$", "", line)
        line = line.replace("Tensor, DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, "
                            "AutogradCPU), ", "").replace("device=None, ", "")
        out.append(textwrap.shorten(line, width, placeholder=" ...")
                   if len(line) > width else line)
    return "\n".join(out)


# ------------------------------------------------------------- capture map (6.1)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _graph_lines(fn, graphs):
    """{source line number: index of the first graph holding an op from it}."""
    filename = fn.__code__.co_filename
    owner = {}
    for i, gm in enumerate(graphs):
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            for file, line, _ in _FRAME.findall(node.meta.get("stack_trace") or ""):
                if file == filename:
                    owner.setdefault(int(line), i)
    return owner


def _short_reason(reason):
    first = reason.splitlines()[0]
    for needle, short in [("generic_jump", "branch on a tensor value"),
                          ("Data-dependent branching", "branch on a tensor value"),
                          ("Tensor.item()", ".item() to a Python number"),
                          ("builtin operator", "unsupported builtin call"),
                          ("graph_break()", "explicit graph_break()")]:
        if needle in first:
            return short
    return textwrap.shorten(first, 32, placeholder="...")


def draw_capture_map(fn, graphs, breaks=(), ax=None, title=None):
    """The source of ``fn``, one row per line, coloured by the graph its ops are in.

    Lines with no op in any graph ran as ordinary Python bytecode. ``breaks`` is
    ``explain(...).break_reasons``: each break is marked on its line.
    """
    lines, first = inspect.getsourcelines(fn)
    owner = _graph_lines(fn, graphs)
    broken = {}
    for br in breaks:
        frames = [f for f in br.user_stack if f.filename == fn.__code__.co_filename]
        if frames:
            broken[frames[-1].lineno] = _short_reason(br.reason)
    n = len(lines)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 0.36 * n + 1.1))
    for k, src in enumerate(lines):
        lineno = first + k
        g = owner.get(lineno)
        color = _PYTHON if g is None else PALETTE[g % len(PALETTE)]
        y = n - 1 - k
        ax.add_patch(FancyBboxPatch((0, y + 0.08), 1, 0.84, boxstyle="round,pad=0.0,"
                                    "rounding_size=0.02", facecolor=color,
                                    edgecolor="none", transform=ax.transData))
        ax.text(0.012, y + 0.5, f"{lineno - first + 1:>2}  {src.rstrip()}",
                family="monospace", fontsize=9.5, va="center")
        where = "Python" if g is None else f"graph {g + 1}"
        if lineno in broken:
            ax.text(0.988, y + 0.5, f"graph break: {broken[lineno]}  |  {where}",
                    fontsize=8.5, va="center", ha="right", color="#b00020")
            ax.plot([0, 1], [y + 0.04, y + 0.04], color="#b00020", lw=1.6, ls="--")
        else:
            ax.text(0.988, y + 0.5, where, fontsize=8.5, va="center", ha="right",
                    color="#444444")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, n)
    ax.axis("off")
    handles = [Patch(facecolor=PALETTE[i % len(PALETTE)], label=f"graph {i + 1}")
               for i in range(len(graphs))]
    handles.append(Patch(facecolor=_PYTHON, label="no captured op: runs in Python"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              ncol=len(handles), fontsize=8.5, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def draw_call_costs(calls, ax=None, title=None):
    """One bar per call: ``calls`` is a list of (label, seconds, compiled: bool)."""
    labels = [c[0] for c in calls]
    ms = np.array([c[1] for c in calls]) * 1e3
    colors = [PALETTE[3] if c[2] else PALETTE[0] for c in calls]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.6))
    ax.bar(range(len(calls)), ms, color=colors, edgecolor="#555555", linewidth=0.5)
    ax.set_yscale("log")
    ax.set_xticks(range(len(calls)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8.5)
    ax.set_ylabel("time of the call (ms, log scale)")
    for i, v in enumerate(ms):
        ax.text(i, v * 1.15, f"{v:.2g}", ha="center", fontsize=8)
    ax.legend(handles=[Patch(facecolor=PALETTE[3], label="Dynamo compiled a new graph"),
                       Patch(facecolor=PALETTE[0], label="guards passed: cached code")],
              fontsize=8.5, loc="upper right", frameon=False)
    ax.set_ylim(top=ms.max() * 8)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


# ---------------------------------------------------------- Inductor code (6.2)
_CALL = re.compile(r"^\s+(cpp_fused_\w+|extern_kernels\.\w+)\(", re.M)


def generated_kernels(code: str):
    """Kernels called by an Inductor wrapper, in call order.

    Returns a list of dicts: ``name``; ``extern`` (a library call such as
    ``extern_kernels.mm``, not generated code); ``ops``, the ATen op names the
    kernel's name lists (Inductor names a fused kernel after the original ATen
    ops of the nodes inside it: ``cpp_fused_add_mul_sigmoid_sin_0``).
    """
    call = code[code.index("def call("):]
    kernels = []
    for name in _CALL.findall(call):
        if name.startswith("extern_kernels."):
            op = name.split(".", 1)[1]
            ops = {op, "mm", "add"} if op == "addmm" else {op}
            kernels.append({"name": name, "extern": True, "ops": ops, "_key": f"_{op}_"})
        else:
            middle = re.sub(r"^cpp_fused_|_\d+$", "", name)
            kernels.append({"name": name, "extern": False, "ops": None,
                            "_key": f"_{middle}_"})
    return kernels


def kernel_source(code: str, name: str, tails: bool = True) -> str:
    """The C++ source Inductor generated for kernel ``name`` (between r''' and ''').

    ``tails=False`` leaves out what only matters at the edges: the blocks that
    handle the last few elements when a row is not a multiple of the vector
    width (``if(C10_UNLIKELY(...))``) and the integer-division error checks.
    """
    start = code.index(f"{name} = async_compile.cpp_pybinding(")
    body = code[code.index("r'''", start) + 4:]
    src = body[:body.index("'''")].strip("\n")
    if tails:
        return src
    out, skipping, opened, depth = [], False, False, 0
    for line in src.splitlines():
        if skipping:
            depth += line.count("{") - line.count("}")
            opened = opened or "{" in line
            skipping = not (opened and depth <= 0)
            continue
        if "C10_UNLIKELY" in line:
            depth = line.count("{") - line.count("}")
            opened, skipping = "{" in line, True
            continue
        if "integer_div_error" in line:
            continue
        out.append(line)
    return "\n".join(out)


def _names_op(kernel, op):
    if kernel["extern"]:
        return op in kernel["ops"]
    return f"_{op}_" in kernel["_key"]


def fusion_groups(gm, kernels):
    """{node name: index into ``kernels``} for the ATen nodes of ``gm``.

    A node goes to a kernel whose name lists its op. When an op name appears in
    several kernels (two ``mul``), the order fixes it: a node runs no earlier
    than the kernels of its inputs and no later than those of its users. Nodes
    that no kernel names (views, transposes folded into a library call) are
    left out. Raises ``ValueError`` if a node stays ambiguous.
    """
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    cand = {}
    for n in nodes:
        op = getattr(n.target, "__name__", str(n.target)).split(".")[0]
        ks = [i for i, k in enumerate(kernels) if _names_op(k, op)]
        if ks:
            cand[n] = ks
    for _ in range(len(nodes) + 1):
        changed = False
        for n, ks in cand.items():
            lo = max((min(cand[a]) for a in n.all_input_nodes if a in cand), default=0)
            hi = min((max(cand[u]) for u in n.users if u in cand), default=len(kernels))
            keep = [k for k in ks if lo <= k <= hi] or ks
            if keep != ks:
                cand[n], changed = keep, True
        if not changed:
            break
    groups = {}
    for n, ks in cand.items():
        if len(ks) > 1:
            raise ValueError(f"node {n.name} could be in kernels {ks}")
        groups[n.name] = ks[0]
    return groups


def _layout(gm):
    """Positions: ops in columns by depth (inputs ignored), inputs in a row above."""
    depth, pos = {}, {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            depth[n] = 1 + max((depth[a] for a in n.all_input_nodes if a in depth),
                               default=-1)
    columns = defaultdict(list)
    for n, d in depth.items():
        columns[d].append(n)
    for d, col in columns.items():
        for j, n in enumerate(col):
            pos[n] = (float(d), 0.8 * ((len(col) - 1) / 2 - j))
    top = max(p[1] for p in pos.values()) + 1.1
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            xs = [pos[u][0] for u in n.users if u in pos]
            pos[n] = (min(xs) - 0.5 if xs else 0.0, top)
    return pos


def _label(n):
    if n.op == "placeholder":
        val = n.meta.get("val")
        shape = "x".join(map(str, val.shape)) if val is not None else ""
        return f"{n.name}\n{shape}"
    if n.op == "output":
        return "output"
    return getattr(n.target, "__name__", str(n.target)).split(".")[0]


def draw_fusion_graph(gm, groups, kernels, ax=None, title=None):
    """The ATen graph left to right, each op coloured by the kernel that ran it."""
    pos = _layout(gm)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    if ax is None:
        _, ax = plt.subplots(figsize=(1.45 * (max(xs) - min(xs) + 1.4),
                                      1.2 * (max(ys) - min(ys) + 1.0) + 1.4))
    colours, fused = {}, 0
    for i, k in enumerate(kernels):
        if k["extern"]:
            colours[i] = _EXTERN
        else:
            colours[i] = PALETTE[fused % len(PALETTE)]
            fused += 1
    boxes, viewish = {}, False
    for n, (x, y) in pos.items():
        if n.op in ("placeholder", "output"):
            face, edge, style = _NONE, "#333333", "-"
        elif n.name in groups:
            face, edge, style = colours[groups[n.name]], "#333333", "-"
        else:
            face, edge, style, viewish = _NONE, "#999999", "--", True
        box = FancyBboxPatch((x - 0.36, y - 0.2), 0.72, 0.4, boxstyle="round,pad=0.02",
                             facecolor=face, edgecolor=edge, linewidth=0.9,
                             linestyle=style)
        ax.add_patch(box)
        boxes[n] = box
        ax.text(x, y, _label(n), ha="center", va="center", fontsize=8.5)
    for n in pos:
        for a in n.all_input_nodes:
            ax.annotate("", xy=pos[n], xytext=pos[a],
                        arrowprops=dict(arrowstyle="->", color="#777777", lw=0.8,
                                        patchA=boxes[a], patchB=boxes[n],
                                        shrinkA=1, shrinkB=1))
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.set_ylim(min(ys) - 0.5, max(ys) + 0.45)
    ax.set_aspect("equal")
    ax.axis("off")
    handles = {}
    for i, k in enumerate(kernels):
        label = ("library call: " + k["name"].split(".", 1)[1]) if k["extern"] else k["name"]
        handles.setdefault(label, Patch(facecolor=colours[i], edgecolor="#333333",
                                        label=label))
    if viewish:
        handles["view"] = Patch(facecolor=_NONE, edgecolor="#999999", linestyle="--",
                                label="no kernel of its own (a view, folded into a call)")
    ax.legend(handles=list(handles.values()), loc="upper center",
              bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8.5, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


# ------------------------------------------------------------------ timing (6.2)
def median_times(fns, args, reps=15, settle=1):
    """Median seconds per call of each function in ``fns`` (a dict).

    Rounds interleave the functions, so that a burst of load on a shared machine
    hits them alike. Within a round each function first runs ``settle`` untimed
    calls, then one timed call: the memory allocator is then in the state the
    function itself leaves it in (right after another function's large frees,
    the first call can pay for fresh pages and look several times slower).
    """
    samples = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            for _ in range(settle):
                fn(*args)
            t0 = time.perf_counter()
            fn(*args)
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(s) for name, s in samples.items()}


def draw_speedups(rows, ax=None, title=None):
    """Eager vs compiled per case, as time relative to eager (lower is faster).

    ``rows`` = [(case, eager seconds, compiled seconds)]; the bars carry the
    milliseconds, the speedup (eager / compiled) is written above each pair.
    """
    names = [r[0] for r in rows]
    eager = np.array([r[1] for r in rows])
    comp = np.array([r[2] for r in rows])
    rel = comp / eager
    x = np.arange(len(rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(2.0 * len(rows) + 2.0, 4.2))
    ax.bar(x - 0.19, np.ones_like(rel), 0.38, color=PALETTE[0], edgecolor="#555555",
           linewidth=0.5, label="eager")
    ax.bar(x + 0.19, rel, 0.38, color=PALETTE[1], edgecolor="#555555",
           linewidth=0.5, label="torch.compile (Inductor)")
    for i in range(len(rows)):
        ax.text(x[i] - 0.19, 0.03, f"{eager[i] * 1e3:.3g} ms", ha="center",
                va="bottom", fontsize=7.5, rotation=90)
        ax.text(x[i] + 0.19, 0.03, f"{comp[i] * 1e3:.3g} ms", ha="center",
                va="bottom", fontsize=7.5, rotation=90)
        ax.text(x[i], max(1.0, rel[i]) + 0.05, f"{1 / rel[i]:.2f}x", ha="center",
                fontsize=10, fontweight="bold")
    ax.axhline(1.0, color="#555555", lw=0.6, ls=":")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=9)
    ax.set_ylabel("time relative to eager (lower is faster)")
    ax.set_ylim(0, max(1.0, rel.max()) * 1.3)
    ax.legend(fontsize=9, frameon=False, loc="upper center", ncol=2,
              bbox_to_anchor=(0.5, -0.16))
    if title:
        ax.set_title(title + "\n(bold: speedup, eager / compiled)", fontsize=10)
    return ax
