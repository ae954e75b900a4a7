# ---
# jupyter:
#   inside_pytorch:
#     lab: lab07
#     title: A fusing torch.compile backend
#   jupytext:
#     notebook_metadata_filter: inside_pytorch,kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Lab 7 — A fusing `torch.compile` backend
#
# `torch.compile(f)` runs a stack of three components. **Dynamo** reads the bytecode of `f`, records
# the tensor operations into FX graphs and *breaks the graph* where it meets something it cannot
# record. **AOTAutograd** traces each graph down to ATen, applies the *decomposition table the backend
# passes it* (with none, ops such as `aten.gelu` or `aten.native_layer_norm` stay whole; with
# `core_aten_decompositions()` the graph is reduced towards the small *Core ATen* op set) and splits it into a
# forward graph and a backward graph. A **backend compiler** turns those graphs into
# code: by default that is Inductor, which fuses operations into generated C++ (on CPU) or Triton (on
# GPU) kernels.
#
# In this lab you replace Inductor with your own backend. It receives the forward and backward ATen
# graphs, groups pointwise operations (and the reduction that may close them) into *fused kernels*,
# writes C code for each group, compiles it with the system C compiler `cc`, loads it with `ctypes`,
# and runs the rest of the graph as ordinary ATen calls. On a memory-bound chain such as
# `x * sigmoid(x) + sin(y)` eager PyTorch reads and writes a 16 MB temporary for every op; your fused
# kernel reads `x` and `y` once and writes the result once. Where fusing cannot save such passes over
# memory (a block made of matmuls and ops that are already one kernel each in eager), a small cost model
# keeps the graph in eager PyTorch (part 4).
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `graph_breaks` | a recording backend, a graph-break report, three functions rewritten to compile as one graph | 15 | 1.5 |
# | `fusion_plan` | the partition of an ATen graph into fused groups, following precise rules | 25 | 3 |
# | `kernels` | C source for one group, built with `cc`, loaded with `ctypes`, cached by source hash | 20 | 5 |
# | `pipeline` | the full backend through AOTAutograd: forward and gradients equal to eager | 25 | 3 |
# | `speed` | your compiled chains against eager PyTorch, timed by the grader | 15 | 1.5 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 14 in all.
#
# **Rules of the game.** Inductor is off-limits inside your backend, and your kernels must be
# single-threaded: plain C loops, no OpenMP, no threads. The graders do not take your word for what your
# backend did: they take the C source your code generator writes, compile it themselves with the lab's
# flags, and run and time it on their own inputs in a separate process (part 3 lists what such a source may
# contain). The values your compiled functions return are checked against eager PyTorch as well.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests run your code. The hidden graders use other functions, models
# and shapes, so a green `check` is a good sign, not a guarantee.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import ctypes
import hashlib
import heapq
import math
import operator
import os
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch._dynamo
from functorch.compile import make_boxed_func
from torch import fx
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.proxy_tensor import make_fx

aten = torch.ops.aten

# The pointwise ops your kernels support. A node is fusible only if its target is in this set.
POINTWISE_OPS = frozenset({
    aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor, aten.mul.Scalar,
    aten.div.Tensor, aten.div.Scalar, aten.neg.default, aten.exp.default, aten.log.default,
    aten.sqrt.default, aten.rsqrt.default, aten.reciprocal.default, aten.sigmoid.default, aten.tanh.default,
    aten.sin.default, aten.cos.default, aten.abs.default, aten.relu.default, aten.erf.default,
    aten.pow.Tensor_Scalar, aten.maximum.default, aten.minimum.default, aten.where.self,
    aten.gt.Scalar, aten.gt.Tensor, aten.ge.Scalar, aten.ge.Tensor, aten.lt.Scalar, aten.lt.Tensor,
    aten.le.Scalar, aten.le.Tensor, aten.eq.Scalar, aten.eq.Tensor, aten.ne.Scalar, aten.ne.Tensor,
    aten.clamp.default, aten.log1p.default, aten.expm1.default,
})
# The reductions that may close a group (over the last dimension, or over everything).
REDUCTION_OPS = frozenset({aten.sum.dim_IntList, aten.sum.default, aten.amax.default, aten.mean.dim})



def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """var_mean as a mean, then a sum of squared deviations: two reductions the fuser knows. (PyTorch's own
    decomposition of var_mean goes down to `prims` ops, which no group can hold and which run slowly.)"""
    dims = list(range(x.dim())) if dim is None else [d % max(x.dim(), 1) for d in dim]
    mean = aten.mean.dim(x, dims, True)
    dev = x - mean
    count = math.prod(x.shape[d] for d in dims) - (1 if correction is None else correction)
    var = aten.sum.dim_IntList(dev * dev, dims, keepdim) / float(max(count, 0))
    return var, (mean if keepdim else aten.squeeze.dims(mean, dims))


# Core ATen keeps softmax, layer norm and GELU as single ops; we decompose them further so that
# their pointwise and reduction pieces are visible to the fuser. Two entries of the Core ATen table are
# dropped: the backward of `select` and `slice` stay single ATen calls (decomposed, each becomes a
# full-size `where` over an `arange` mask, several times slower).
DECOMPOSITIONS = {**core_aten_decompositions(), **get_decompositions([
    aten.gelu, aten.gelu_backward, aten._softmax, aten._softmax_backward_data, aten._log_softmax,
    aten._log_softmax_backward_data, aten.native_layer_norm, aten.native_layer_norm_backward,
]), aten.var_mean.correction: _var_mean}
for _op in (aten.select_backward.default, aten.slice_backward.default):
    DECOMPOSITIONS.pop(_op, None)

CC = ["cc", "-O3", "-march=native", "-ffast-math", "-shared", "-fPIC"]


class Kernel:
    """One fused group, as code. `inputs` and `outputs` are FX node names of the graph it came from.

    source: the C source (one function named `name`); inputs / outputs: node names read / written, in argument
    order; out_shapes, out_dtypes: per output (a list of ints, torch.float32 or torch.bool); in_modes: per input,
    how the kernel indexes it (see index_mode); shape: the iteration shape (for a reduction group, the shape
    reduced); fn: the loaded ctypes function, set once built.
    """

    def __init__(self, name, source, inputs, outputs, out_shapes, out_dtypes, in_modes, shape, fn=None):
        self.name, self.source, self.inputs, self.outputs = name, source, list(inputs), list(outputs)
        self.out_shapes, self.out_dtypes, self.in_modes, self.shape, self.fn = out_shapes, out_dtypes, in_modes, shape, fn

    def __repr__(self):
        return f"Kernel({self.name!r}, inputs={self.inputs}, outputs={self.outputs}, shape={self.shape})"


# Three functions that break Dynamo's graph (part 1 asks you to rewrite them).
def branchy(x):
    y = x.sin()
    if y.sum() > 0:          # data-dependent Python control flow
        return y * 2
    return y - 1


def scaled(x):
    return x * x.abs().max().item()    # a Python float out of a tensor


def logged(x):
    y = torch.relu(x)
    print("relu done")       # a side effect Dynamo cannot put in a graph
    return y * 3


# %% [markdown] nbgrader={"grade": false, "grade_id": "breaks-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Graphs and graph breaks (15 points)
#
# A backend is any callable `backend(gm, example_inputs)` that returns a callable. Dynamo calls it once
# per graph it captures. When Dynamo meets code it cannot record (a `print`, Python control flow on a
# tensor's value, `.item()`), it ends the graph there, runs that bit in plain Python, and starts a new
# graph after it: a **graph break**. Breaks cost speed (no fusion across them) and every graph is one
# more compilation.
#
# **Write**
#
# * `RecordingBackend`: a backend whose instances record every `fx.GraphModule` they are handed in
#   `self.graphs` (a list, in call order) and return `gm.forward` (run the graph as it is).
# * `classify_break(reason)`: the category of one break reason string (`torch._dynamo.explain(f)(*args)
#   .break_reasons[i].reason`): `"builtin"` if it contains `"builtin operator"`, `"control_flow"` if it
#   contains `"generic_jump"` or `"data-dependent"`, `"scalar"` if it contains `"Tensor.item()"`,
#   `"explicit"` if it contains `"graph_break()"`, else `"other"` (test in this order).
# * `analyze_graph_breaks(fn, *args)`: call `torch._dynamo.reset()`, compile `fn` with a fresh
#   `RecordingBackend`, call it once, and return a dict `{"graphs": number of graphs your backend saw,
#   "ops": [number of call_function nodes of each graph], "breaks": number of graph breaks,
#   "reasons": [category of each break reason]}`. The graph count and ops come from your backend; the
#   breaks are `graph_break_count` and the reasons `break_reasons` of `torch._dynamo.explain` (call
#   `torch._dynamo.reset()` before it too). The count and the list of reasons need not have the same
#   length (a break inside a helper called twice, for instance), so take each from its source.
# * `branchy_fixed`, `scaled_fixed`, `logged_fixed`: the three functions of the setup cell rewritten so
#   that `torch.compile(f, fullgraph=True)` accepts them and they return what the originals return
#   (the print may go).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "breaks-solution", "locked": false, "schema_version": 3, "solution": true}
class RecordingBackend:
    """A torch.compile backend that records the FX graphs Dynamo hands it and runs them unchanged."""

    def __init__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab07 breaks-solution
        self.graphs = []
        ### END SOLUTION

    def __call__(self, gm, example_inputs):
        ### BEGIN SOLUTION
        # IPT-CANARY lab07 breaks-solution
        self.graphs.append(gm)
        return gm.forward
        ### END SOLUTION


def classify_break(reason):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 breaks-solution
    for needle, category in [("builtin operator", "builtin"), ("generic_jump", "control_flow"),
                             ("data-dependent", "control_flow"), ("Tensor.item()", "scalar"),
                             ("graph_break()", "explicit")]:
        if needle in reason:
            return category
    return "other"
    ### END SOLUTION


def analyze_graph_breaks(fn, *args):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 breaks-solution
    torch._dynamo.reset()
    backend = RecordingBackend()
    torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    return {
        "graphs": len(backend.graphs),
        "ops": [sum(1 for n in gm.graph.nodes if n.op == "call_function") for gm in backend.graphs],
        "breaks": explanation.graph_break_count,
        "reasons": [classify_break(r.reason) for r in explanation.break_reasons],
    }
    ### END SOLUTION


def branchy_fixed(x):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 breaks-solution
    y = x.sin()
    return torch.where(y.sum() > 0, y * 2, y - 1)
    ### END SOLUTION


def scaled_fixed(x):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 breaks-solution
    return x * x.abs().max()
    ### END SOLUTION


def logged_fixed(x):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 breaks-solution
    return torch.relu(x) * 3
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "breaks-explore", "locked": false, "schema_version": 3, "solution": false}
x = torch.randn(16)
for f in (branchy, scaled, logged, branchy_fixed):
    print(f"{f.__name__:14s}", analyze_graph_breaks(f, x))

# %% nbgrader={"grade": true, "grade_id": "graph_breaks", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Graphs and graph breaks"
check("graph_breaks")

# %% [markdown] nbgrader={"grade": false, "grade_id": "plan-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — The fusion plan (25 points)
#
# Here is the forward graph AOTAutograd hands a backend for a small softmax, decomposed with
# `DECOMPOSITIONS` (the cell below prints it). Every `call_function` node is one ATen call, and in eager
# mode one pass over memory. Fusion puts several nodes into one kernel.
#
# **The rules** (Inductor's scheduler is far more clever; these are simple and exact, so that the
# number of kernels of a graph is well defined):
#
# 1. A node is **pointwise** when it is a `call_function` whose target is in `POINTWISE_OPS`, and its
#    result (`node.meta["val"]`) and every tensor argument's `meta["val"]` have dtype `float32` or `bool`.
# 2. A node is a **reduction** when its target is in `REDUCTION_OPS`, its input is `float32`, it has no
#    `dtype` argument, and it reduces over the **last dimension only** (`dim` is `[-1]` or `[ndim - 1]`;
#    any `keepdim`) or over **all dimensions** (`sum.default`, `dim=[]`, or `dim` listing every
#    dimension, in any order and with negative dims allowed: `dim=(0, 1)` and `dim=(-1, 0)` of a 2-D input
#    both reduce everything, to a single value). A 0-dim or 1-D input reduces everything. Other reductions
#    (over dim 0 of a 2-D input, over two of three dims, with `dtype=`) are ordinary ATen calls.
# 3. Walk the nodes in graph order. A group is *open* or *closed*; its *shape* is the shape of its
#    pointwise results. For a pointwise node `n`, look at its arguments in order (each node once): each
#    one that belongs to an **open** group with the **same shape** as `n`'s result is a candidate. Start
#    from `{n}` and merge each candidate in turn, unless the merge would create a **cycle** (see 5). The
#    result is an open group with `n`'s shape.
# 4. A reduction `r` looks only at its input `x`: if `x` is in an open group whose shape is `x`'s shape
#    and adding `r` makes no cycle, `r` joins that group and **closes** it (the reduction is the kernel's
#    epilogue). Otherwise `r` is a group of its own, closed. Nothing joins a closed group.
# 5. A group must not contain two nodes with a path between them that leaves the group: the kernel would
#    need a value that can only be computed after it ran.
# 6. Everything else (placeholders, `mm`, views, `expand`, `var_mean`, other reductions) stays an ATen
#    call, outside every group.
#
# **Write** `is_pointwise(node)`, `is_reduction(node)` and `plan_fusion(gm)`, which returns the groups as
# lists of node names, each group in graph order, groups ordered by their first node. Every fusible node
# is in exactly one group. The softmax below plans 3 kernels: `amax`; `sub, exp, sum`; `div`. The helper
# `_creates_cycle(members)` (rule 5 for a set of nodes) is there for you to write and use; `reduction_dims`
# is given.

#
# **Stuck?** Open the hints one at a time.
#
# <details><summary>Hint 1: where to start</summary>
#
# Write `is_pointwise` and `is_reduction` first, and print them for every node of `softmax_gm` and of the
# graphs of `x.mean(-1)`, `x.sum(0)` and `x.sum(-1, dtype=torch.float64)` (use `aten_graph` below). Then
# plan with rules 3 and 4 alone, ignoring cycles, until the softmax gives its three kernels. Add rule 5
# last, with a graph where a path leaves a group and comes back (`a = x.sin(); b = a @ w; return a * b`
# for a square `w`).
# </details>
#
# <details><summary>Hint 2: the idea</summary>
#
# Keep two maps: node to group id, and group id to `{nodes, shape, open}`. A pointwise node always makes
# a new group; merging a candidate takes the union and removes the candidate's entry (point every member
# at the new id). Rule 5 is a search along `.users`: start from the users of the members that are
# outside the set and walk forward; if the walk ever reaches a member again, the set would need a value
# computed after it. Nodes are in topological order, so the walk ends.
# </details>
#
# <details><summary>Hint 3: near code</summary>
#
# ```python
# for node in gm.graph.nodes:
#     if is_pointwise(node):
#         members, shape = {node}, tuple(node.meta["val"].shape)
#         for arg in the distinct tensor arguments of node, in order:
#             g = the group of arg
#             if g exists and is open and has this shape and not _creates_cycle(members | g.nodes):
#                 members |= g.nodes and forget g
#         record an open group (members, shape)
#     elif is_reduction(node):
#         x = node.args[0]
#         if x's group is open, has x's shape and accepts node without a cycle: node joins it
#         otherwise node is a group of its own; either way the group is closed
# ```
#
# The result: each group's names in graph order, the groups sorted by their first node.
# </details>
# %% tags=["export"] nbgrader={"grade": false, "grade_id": "plan-solution", "locked": false, "schema_version": 3, "solution": true}
def _val(node):
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def _tensor_args(node):
    """The distinct fx.Node arguments of `node` that carry a tensor, in argument order."""
    seen = []
    for a in node.all_input_nodes:
        if isinstance(_val(a), torch.Tensor) and a not in seen:
            seen.append(a)
    return seen


def is_pointwise(node):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 plan-solution
    if node.op != "call_function" or node.target not in POINTWISE_OPS:
        return False
    out = _val(node)
    if not isinstance(out, torch.Tensor) or out.dtype not in (torch.float32, torch.bool):
        return False
    return all(_val(a).dtype in (torch.float32, torch.bool) for a in _tensor_args(node))
    ### END SOLUTION


def reduction_dims(node):
    """For a reduction node: the list of reduced dims as written (None when it reduces everything)."""
    if node.target == aten.sum.default:
        return None
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    return None if dims is None or len(dims) == 0 else list(dims)


def is_reduction(node):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 plan-solution
    if node.op != "call_function" or node.target not in REDUCTION_OPS or "dtype" in node.kwargs:
        return False
    if not node.args or not isinstance(_val(node.args[0]), torch.Tensor) or _val(node.args[0]).dtype != torch.float32:
        return False
    ndim = _val(node.args[0]).dim()
    dims = reduction_dims(node)
    if dims is None or ndim == 0:
        return True
    dims = sorted({d % ndim for d in dims})
    return dims == [ndim - 1] or dims == list(range(ndim))
    ### END SOLUTION


def _creates_cycle(members):
    """True when some path leaves the node set `members` and comes back into it."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 plan-solution
    stack = [u for m in members for u in m.users if u not in members]
    seen = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for user in node.users:
            if user in members:
                return True
            stack.append(user)
    return False
    ### END SOLUTION


def plan_fusion(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 plan-solution
    group_of = {}          # node -> group id
    groups = {}            # id -> {"nodes": set, "shape": tuple, "open": bool}
    next_id = 0
    for node in gm.graph.nodes:
        pointwise, reduction = is_pointwise(node), (not is_pointwise(node)) and is_reduction(node)
        if not (pointwise or reduction):
            continue
        if pointwise:
            shape = tuple(_val(node).shape)
            members = {node}
            merged = []
            for arg in _tensor_args(node):
                gid = group_of.get(arg)
                if gid is None or gid in merged or not groups[gid]["open"] or groups[gid]["shape"] != shape:
                    continue
                if not _creates_cycle(members | groups[gid]["nodes"]):
                    members |= groups[gid]["nodes"]
                    merged.append(gid)
            for gid in merged:
                del groups[gid]
            groups[next_id] = {"nodes": members, "shape": shape, "open": True}
        else:
            x = node.args[0]
            gid = group_of.get(x)
            if (gid is not None and groups[gid]["open"] and groups[gid]["shape"] == tuple(_val(x).shape)
                    and not _creates_cycle(groups[gid]["nodes"] | {node})):
                members = groups.pop(gid)["nodes"] | {node}
            else:
                members = {node}
            groups[next_id] = {"nodes": members, "shape": tuple(_val(x).shape), "open": False}
        for m in groups[next_id]["nodes"]:
            group_of[m] = next_id
        next_id += 1
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    result = [sorted(g["nodes"], key=order.__getitem__) for g in groups.values()]
    result.sort(key=lambda g: order[g[0]])
    return [[n.name for n in g] for g in result]
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "plan-explore", "locked": false, "schema_version": 3, "solution": false}
def aten_graph(fn, *args):
    """The Core ATen graph of fn (forward only), the way your backend will see it."""
    return make_fx(fn, decomposition_table=DECOMPOSITIONS)(*args)


softmax_gm = aten_graph(lambda t: torch.softmax(t, -1), torch.randn(4, 8))
print(softmax_gm.code)
print(plan_fusion(softmax_gm))

# %% [markdown] nbgrader={"grade": false, "grade_id": "plan-figure-md", "locked": true, "schema_version": 3, "solution": false}
# The figure draws a graph with one colour per fused group (grey: ATen calls and inputs). Try
# your own functions: a GELU MLP layer, a layer norm, a chain with a broadcast bias.

# %% nbgrader={"grade": false, "grade_id": "plan-figure", "locked": false, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt


def draw_plan(gm, groups, title=""):
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    where = {n.name: i for i, n in enumerate(nodes)}
    colour = {name: plt.cm.tab10(g % 10) for g, members in enumerate(groups) for name in members}
    fig, ax = plt.subplots(figsize=(5, 0.42 * len(nodes) + 0.6))
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name in where:
                ax.annotate("", (0.5, -where[n.name]), (0.5, -where[a.name]),
                            arrowprops=dict(arrowstyle="->", color="0.6", connectionstyle="arc3,rad=-0.4"))
    for n in nodes:
        label = n.name if n.op != "call_function" else f"{n.name} = {n.target}"
        ax.text(0.5, -where[n.name], label, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round", fc=colour.get(n.name, (0.88, 0.88, 0.88, 1)), ec="none"))
    ax.set_xlim(0, 1)
    ax.set_ylim(-len(nodes), 1)
    ax.axis("off")
    ax.set_title(title or f"{len(groups)} fused kernels")
    plt.show()


draw_plan(softmax_gm, plan_fusion(softmax_gm), "softmax: 3 fused kernels")

# %% nbgrader={"grade": true, "grade_id": "fusion_plan", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="The fusion plan"
check("fusion_plan")

# %% [markdown] nbgrader={"grade": false, "grade_id": "codegen-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Generated kernels (20 points)
#
# One group becomes one C function. All buffers are contiguous; float values are `float`, bool values are
# `unsigned char` (0 or 1, what `torch.bool` stores). The kernel loops over the group's *iteration
# shape*, computes every member into a local variable, stores the members that are used outside the group
# (or are graph outputs), and, if the group ends with a reduction, accumulates it and stores one value per
# row. Accumulate a sum or mean in `double` (a `float` running sum over a million elements drops the small
# terms; the graders check long rows to 1e-5), a max in `float`. Scalar arguments (`mul(x, 0.5)`) are C
# constants.
#
# **A max over values the kernel also stores.** `amax`'s backward compares the maximum with its input for
# equality (`eq(amax, x)`, then divides by the count of equal elements). When the kernel stores `x` (it is
# saved for the backward), the stored row must contain the maximum exactly. Under `-ffast-math`, gcc may
# compute the stored value and the value fed to `fmaxf` in two different ways, a row then loses its maximum
# by one ulp, and the gradient becomes 0/0 = NaN. So reduce what was stored: after the row's loop, a second
# loop takes the max of the row read back through a `const volatile float*` pointer into the output buffer
# (a volatile read is a real load: gcc cannot substitute a recomputed value).
#
# **Broadcasting.** Inputs of a pointwise op may have a smaller shape than its result: a bias `[D]`
# added to `[N, D]`, a row statistic `[N, 1]` subtracted from `[N, D]`, a 0-dim tensor. Align shapes on
# the right (pad with 1s on the left). With `i` the flat index into the iteration shape `S`:
# an input equal to `S` reads `p[i]`; one element reads `p[0]`; a *suffix* input (1s, then `S`'s last
# dims from some `k` on) reads `p[i % prod(S[k:])]`; a *prefix* input (`S`'s first dims up to `k`, then
# 1s) reads `p[i / prod(S[k:])]`. Any other shape: mode `"expand"`, and the runner passes
# `t.expand(S).contiguous()`. The runner also calls `.contiguous()` on every input.
#
# **Kernel shape: one flat loop, or rows and columns.** A pointwise chain whose inputs are all full-size
# or single values is one flat loop over `i`. A group that reduces over the last dim, or that reads an input
# broadcast along rows or columns (modes `"div"` and `"mod"`: a per-row statistic `[N, 1]`, a bias or a
# LayerNorm weight `[D]`), is a loop nest instead: rows outside, the last dimension inside (`cols = S[-1]`,
# `i = r * cols + c`; a reduction over everything is one row of `numel` columns). In the nest, an input of
# mode `("div", d)` with `d` a multiple of `cols` reads `p[r / (d / cols)]`, one value for the whole row
# (`p[r]` when `d == cols`), and `("mod", m)` with `m` a multiple of `cols` reads
# `p[(r % (m / cols)) * cols + c]`, contiguous along the row (`p[c]` when `m == cols`); other modes index
# with `i` as above. The values are the same as with the flat loop; the speed is not. In a flat loop,
# `p[i / D]` and `p[i % D]` are *gathers*: the compiler cannot see that neighbouring `i` read the same or
# neighbouring elements, and gathers are slow. LayerNorm's epilogue (normalise, scale, shift, GELU on
# 256 x 1024) took 1.6 ms as a flat loop here and 0.29 ms as a nest, where the row's statistic is one
# broadcast value and the weight a plain vector load.
#
# **Write**
#
# * `c_expr(target, args, kwargs)`: the C expression of one pointwise op, given the C expressions of its
#   arguments (tensor or constant) as strings. Booleans are `0.0f`/`1.0f` floats inside the kernel.
# * `index_mode(shape, iteration_shape)`: the broadcasting rule above, as a tuple (its docstring lists them).
# * `generate_kernel(gm, group, name)`: a `Kernel` (setup cell) whose `source` defines
#   `void name(<inputs>, <outputs>)`, pointers in the order of `inputs` then `outputs`. The graders call
#   it with any group that follows the rules of part 2, forward or backward, including 0-dim and size-0
#   shapes (a sum over an empty last dimension is 0; a mean of nothing is NaN, as in PyTorch). `inputs` are
#   exactly the nodes outside the group that members read; `outputs` exactly the members used outside the
#   group (graph outputs included) plus the closing reduction.
#
#   **What the graders run.** They compile `source` themselves with `CC`'s flags as its own translation
#   unit, link it with their own test harness into a separate program and call `name` on contiguous
#   buffers (an `"expand"` input already expanded to the iteration shape). So the source must stand alone:
#   it may `#include` only `<math.h>`, `<stdint.h>`, `<stddef.h>`, `<stdbool.h>` and `<float.h>`, define
#   exactly one global function (`name`; helpers must be `static`), call only math functions (`expf`,
#   `sinf`, ...), use no `asm`, attributes or pragmas, and write nothing outside the output buffers.
# * `build(source)`: compile with `CC` (add `-o file.so`, and `-lm`) in a directory under
#   `tempfile.gettempdir()`, load it with `ctypes.CDLL`, and return the function named in the source
#   (argument types all `ctypes.c_void_p`). Cache by the SHA-256 of the source: building the same source
#   twice compiles once. `build_count()` returns how many times `cc` actually ran. On a busy machine
#   starting `cc` can fail for a moment (`EAGAIN`, "Resource temporarily unavailable"): try again a few
#   times before giving up.
# * `run_kernel(kernel, inputs)`: allocate the outputs, call `kernel.fn` (build it first if it is `None`)
#   with the data pointers, return the list of output tensors.
#
# `-ffast-math` lets gcc vectorise `expf`, `sinf` and friends (glibc's libmvec) and reassociate sums; it
# also lets the compiler assume there are no NaNs or infinities. NaN inputs are not part of the contract
# here; infinities are, where an op is meaningful with them (`exp(-inf)`, `relu(inf)`, `sigmoid(-inf)`,
# `log(0)`), so keep intermediate values finite (clamp the exponent of `sigmoid`, for instance). One
# exception you cannot fix from C: under `-ffast-math` gcc computes `sqrtf`, `1 / sqrtf` and divisions with
# approximate reciprocal instructions, which give NaN at 0 and at ±inf (`rsqrt(0)`, `1 / inf`), so the graders
# never give those ops 0 or an infinity.

#
# **Stuck?** Open the hints one at a time.
#
# <details><summary>Hint 1: where to start</summary>
#
# Generate the kernel of a one-node group, `[sin]` on a `[4, 8]` input: one flat loop, one input, one
# output. Print the source, `build` it, and compare `run_kernel` with `torch.sin`. Then two members (one
# local variable per member), then inputs of smaller shapes (`index_mode`), then a closing reduction.
# </details>
#
# <details><summary>Hint 2: the idea</summary>
#
# A kernel is one loop over the flat index `i` of the iteration shape `S`. Each input is loaded once per
# element into a local `float` with its index mode (`i`, `0`, `i % k`, `i / k`); each member becomes a
# local computed from `c_expr`; each output is stored at `[i]`. A reduction over the last dim splits the
# loop in two: rows outside, each with its accumulator, columns inside running the same body, one store
# per row. A reduction over everything is the same loop with a single row. A group with row- or
# column-broadcast inputs uses the same two loops (without the accumulator), and reads those inputs at
# `r` and `c`.
# </details>
#
# <details><summary>Hint 3: near code</summary>
#
# The middle group of the softmax above (`sub, exp, sum_1` on `[4, 8]`; inputs `t_1` and `amax`, which
# has shape `[4, 1]`; outputs `exp`, read later by `div`, and the sum):
#
# ```c
# #include <math.h>
# #include <stdint.h>
# void k1(const float* restrict in0, const float* restrict in1, float* restrict out0, float* restrict out1) {
#   for (int64_t r = 0; r < 4; r++) {
#     double acc = 0.0;
#     for (int64_t c = 0; c < 8; c++) {
#       int64_t i = r * 8 + c;
#       float v_t_1 = in0[i];
#       float v_amax = in1[r];
#       float v_sub = v_t_1 - v_amax;
#       float v_exp = expf(v_sub);
#       out0[i] = v_exp;
#       acc += v_exp;
#     }
#     out1[r] = (float)acc;
#   }
# }
# ```
# </details>
# %% tags=["export"] nbgrader={"grade": false, "grade_id": "codegen-solution", "locked": false, "schema_version": 3, "solution": true}
def c_const(value):
    """A Python number as a C float constant."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    return f"((float){value!r})"


def c_expr(target, args, kwargs):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    a = args[0]
    b = args[1] if len(args) > 1 else None
    alpha = kwargs.get("alpha")
    if target in (aten.add.Tensor, aten.add.Scalar):
        return f"({a} + {b})" if alpha is None else f"({a} + {c_const(alpha)} * {b})"
    if target in (aten.sub.Tensor, aten.sub.Scalar):
        return f"({a} - {b})" if alpha is None else f"({a} - {c_const(alpha)} * {b})"
    if target in (aten.mul.Tensor, aten.mul.Scalar):
        return f"({a} * {b})"
    if target in (aten.div.Tensor, aten.div.Scalar):
        return f"({a} / {b})"
    unary = {
        aten.neg.default: "(-{a})", aten.exp.default: "expf({a})", aten.log.default: "logf({a})",
        aten.sqrt.default: "sqrtf({a})", aten.rsqrt.default: "(1.0f / sqrtf({a}))",
        aten.reciprocal.default: "(1.0f / {a})", aten.sigmoid.default: "(1.0f / (1.0f + expf(fminf(-{a}, 88.0f))))",
        aten.tanh.default: "tanhf({a})", aten.sin.default: "sinf({a})", aten.cos.default: "cosf({a})",
        aten.abs.default: "fabsf({a})", aten.relu.default: "fmaxf({a}, 0.0f)", aten.erf.default: "erff({a})",
        aten.log1p.default: "log1pf({a})", aten.expm1.default: "expm1f({a})",
    }
    if target in unary:
        return unary[target].format(a=a)
    if target == aten.pow.Tensor_Scalar:
        return f"({a} * {a})" if b == c_const(2) else f"powf({a}, {b})"
    if target == aten.maximum.default:
        return f"fmaxf({a}, {b})"
    if target == aten.minimum.default:
        return f"fminf({a}, {b})"
    if target == aten.where.self:
        return f"({a} != 0.0f ? {b} : {args[2]})"
    compare = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
    if target.overloadpacket.__name__ in compare and target in POINTWISE_OPS:
        return f"(({a} {compare[target.overloadpacket.__name__]} {b}) ? 1.0f : 0.0f)"
    if target == aten.clamp.default:
        lo = args[1] if len(args) > 1 else kwargs.get("min")
        hi = args[2] if len(args) > 2 else kwargs.get("max")
        out = a
        if lo is not None and lo != "None":
            out = f"fmaxf({out}, {lo})"
        if hi is not None and hi != "None":
            out = f"fminf({out}, {hi})"
        return out
    raise NotImplementedError(f"no C expression for {target}")
    ### END SOLUTION


def index_mode(shape, iteration_shape):
    """How a kernel reads an input of `shape` inside a loop over `iteration_shape`:
    ("flat",) -> p[i]; ("scalar",) -> p[0]; ("mod", m) -> p[i % m]; ("div", d) -> p[i / d]; ("expand",)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    S = list(iteration_shape)
    s = [1] * (len(S) - len(shape)) + list(shape)
    if s == S:
        return ("flat",)
    if math.prod(s) == 1:
        return ("scalar",)
    for k in range(len(S) + 1):
        if all(d == 1 for d in s[:k]) and s[k:] == S[k:]:
            return ("mod", math.prod(S[k:]))
    for k in range(len(S), -1, -1):
        if s[:k] == S[:k] and all(d == 1 for d in s[k:]):
            return ("div", math.prod(S[k:]))
    return ("expand",)
    ### END SOLUTION


def generate_kernel(gm, group, name):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    nodes = {n.name: n for n in gm.graph.nodes}
    members = [nodes[m] for m in group]
    member_set = set(members)
    reduction = members[-1] if is_reduction(members[-1]) and not is_pointwise(members[-1]) else None
    pointwise = [m for m in members if m is not reduction]
    if reduction is not None:
        S = list(_val(reduction.args[0]).shape)
    else:
        S = list(_val(pointwise[-1]).shape)
    numel = math.prod(S)
    dims = reduction_dims(reduction) if reduction is not None else None
    if dims is not None and len(S) > 0 and sorted({d % len(S) for d in dims}) != list(range(len(S))):
        cols, rows = S[-1], math.prod(S[:-1])     # over the last dim only: one value per row
    else:
        cols, rows = numel, 1                     # over everything (however it is spelled): one value

    inputs, in_modes = [], []
    for m in members:
        for a in _tensor_args(m):
            if a not in member_set and a.name not in inputs:
                inputs.append(a.name)
                mode = index_mode(list(_val(a).shape), S)
                in_modes.append(mode if mode[0] != "expand" else ("expand", S))
    outputs = [m.name for m in members if any(u not in member_set for u in m.users)]
    if reduction is not None and reduction.name not in outputs:
        outputs.append(reduction.name)

    def ctype(node):
        return "unsigned char" if _val(node).dtype == torch.bool else "float"

    params = [f"const {ctype(nodes[n])}* restrict in{k}" for k, n in enumerate(inputs)]
    params += [f"{ctype(nodes[n])}* restrict out{k}" for k, n in enumerate(outputs)]
    if reduction is None and any(mode[0] in ("div", "mod") for mode in in_modes):
        cols, rows = S[-1], math.prod(S[:-1])     # broadcast inputs: loop over rows, then along each row

    def index(mode):
        if mode[0] in ("flat", "expand", "scalar"):
            return "0" if mode[0] == "scalar" else "i"
        m = mode[-1]
        if cols == 0 or m % cols:                 # not whole rows: from the flat index
            return f"(i / {m})" if mode[0] == "div" else f"(i % {m})"
        if mode[0] == "div":                      # one value for the whole row
            return "r" if m == cols else f"(r / {m // cols})"
        return "c" if m == cols else f"((r % {m // cols}) * {cols} + c)"   # a whole row, read along it

    body = [f"float v_{n} = (float)in{k}[{index(mode)}];" for k, (n, mode) in enumerate(zip(inputs, in_modes))]

    def arg_expr(a):
        if isinstance(a, fx.Node):
            return f"v_{a.name}"
        if isinstance(a, (bool, int, float)):
            return c_const(a)
        if a is None:
            return "None"
        raise NotImplementedError(f"argument {a!r} in a fused kernel")

    for m in pointwise:
        args = [arg_expr(a) for a in m.args]
        kwargs = {k: (v if not isinstance(v, fx.Node) else arg_expr(v)) for k, v in m.kwargs.items()}
        body.append(f"float v_{m.name} = {c_expr(m.target, args, kwargs)};")
    for k, n in enumerate(outputs):
        if reduction is not None and n == reduction.name:
            continue
        value = f"(unsigned char)(v_{n} != 0.0f)" if ctype(nodes[n]) == "unsigned char" else f"v_{n}"
        body.append(f"out{k}[i] = {value};")

    lines = ["#include <math.h>", "#include <stdint.h>", f"void {name}({', '.join(params)}) {{"]
    lines.append(f"  for (int64_t r = 0; r < {rows}; r++) {{")
    if reduction is not None:
        x = f"v_{reduction.args[0].name}"
        is_max = reduction.target == aten.amax.default
        acc_type, init = ("float", "(-INFINITY)") if is_max else ("double", "0.0")
        update = f"acc = fmaxf(acc, {x});" if is_max else f"acc += {x};"
        final = f"acc / {cols}.0" if reduction.target == aten.mean.dim else "acc"
        out_k = outputs.index(reduction.name)
        stored = is_max and reduction.args[0].name in outputs      # reduce the stored values (see the text)
        lines.append(f"    {acc_type} acc = {init};")
    lines.append(f"    for (int64_t c = 0; c < {cols}; c++) {{")
    lines.append(f"      int64_t i = r * {cols} + c;")
    lines += ["      " + b for b in body]
    if reduction is not None and not stored:
        lines.append(f"      {update}")
    lines.append("    }")
    if reduction is not None:
        if stored:
            x_k = outputs.index(reduction.args[0].name)
            lines.append(f"    const volatile float* stored = out{x_k} + r * {cols};")
            lines.append(f"    for (int64_t c = 0; c < {cols}; c++) acc = fmaxf(acc, stored[c]);")
        lines.append(f"    out{out_k}[r] = (float)({final});")
    lines.append("  }")
    lines.append("}")
    return Kernel(name=name, source="\n".join(lines) + "\n", inputs=inputs, outputs=outputs,
                  out_shapes=[list(_val(nodes[n]).shape) for n in outputs],
                  out_dtypes=[_val(nodes[n]).dtype for n in outputs], in_modes=in_modes, shape=S)
    ### END SOLUTION


_BUILT = {}          # sha256 of the source -> loaded ctypes function
_BUILDS = [0]        # how many times cc ran


def build(source):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    key = hashlib.sha256(source.encode()).hexdigest()
    if key in _BUILT:
        return _BUILT[key]
    folder = os.path.join(tempfile.gettempdir(), "lab07-kernels")
    os.makedirs(folder, exist_ok=True)
    c_file, so_file = os.path.join(folder, f"{key[:20]}.c"), os.path.join(folder, f"{key[:20]}-{os.getpid()}.so")
    with open(c_file, "w") as f:
        f.write(source)
    for attempt in range(6):                 # fork can fail for a moment on a busy machine: retry
        try:
            proc = subprocess.run([*CC, c_file, "-o", so_file, "-lm"], capture_output=True, text=True)
        except BlockingIOError:
            proc = None
        if proc is not None and (proc.returncode == 0 or "temporarily unavailable" not in proc.stderr):
            break
        time.sleep(0.1 * (attempt + 1))
    if proc is None or proc.returncode != 0:
        raise RuntimeError(f"cc failed:\n{proc.stderr[-2000:] if proc else 'could not start'}\n{source}")
    _BUILDS[0] += 1
    name = source.split("void ", 1)[1].split("(", 1)[0].strip()
    fn = getattr(ctypes.CDLL(so_file), name)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * source.split("void ", 1)[1].split(")", 1)[0].count("*")
    _BUILT[key] = fn
    return fn
    ### END SOLUTION


def build_count():
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    return _BUILDS[0]
    ### END SOLUTION


def run_kernel(kernel, inputs):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 codegen-solution
    if kernel.fn is None:
        kernel.fn = build(kernel.source)
    args, keep = [], []
    for t, mode in zip(inputs, kernel.in_modes):
        if mode[0] == "expand":
            t = t.expand(mode[1])
        t = t.contiguous()
        keep.append(t)
        args.append(t.data_ptr())
    outs = [torch.empty(shape, dtype=dtype) for shape, dtype in zip(kernel.out_shapes, kernel.out_dtypes)]
    kernel.fn(*args, *[o.data_ptr() for o in outs])
    return outs
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "codegen-explore", "locked": false, "schema_version": 3, "solution": false}
chain_gm = aten_graph(lambda a, b: a * torch.sigmoid(a) + b, torch.randn(4, 8), torch.randn(8))
group = plan_fusion(chain_gm)[0]
kernel = generate_kernel(chain_gm, group, "chain")
print(kernel.source)
a, b = torch.randn(4, 8), torch.randn(8)
print(torch.allclose(run_kernel(kernel, [a, b])[0], a * torch.sigmoid(a) + b, atol=1e-6), "builds:", build_count())

# %% nbgrader={"grade": true, "grade_id": "kernels", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Generated kernels"
check("kernels")

# %% [markdown] nbgrader={"grade": false, "grade_id": "backend-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — The backend (25 points)
#
# `aot_autograd(fw_compiler=..., bw_compiler=..., decompositions=DECOMPOSITIONS)` turns a graph compiler
# into a Dynamo backend: it traces the forward and the backward of every Dynamo graph, hands each one to
# your compiler, and wires the results into an `autograd.Function`. Its graphs take one flat list of
# tensors ("boxed" calling convention: wrap your callable with `make_boxed_func`).
#
# **Write** `fuse_graph(gm)`, which returns the new `GraphModule` and the list of `Kernel`s it runs (one
# per group of `plan_fusion(gm)`), and `compile_graph(gm, example_inputs)`: plan the graph, generate and
# build a kernel per group, and return a boxed callable that runs the graph with every group replaced by its
# kernel and every other node as the ATen call it was. The graders compile and run the kernels `fuse_graph`
# returns themselves (see part 3), and check the values and gradients of your compiled functions. A tidy way: build a new `fx.Graph` in a topological order of the groups
# and the remaining nodes (a group can run once all its inputs exist; a plain graph order does not always
# work), where a group is one `call_function` of a small Python function that calls `run_kernel`, and
# its outputs are `operator.getitem`s of that call. Append the number of kernels of every graph you
# compile to `COMPILED_KERNELS` (forward and backward are two graphs). Your kernels may hard-code shapes:
# with `dynamic=False` Dynamo guards on every shape and recompiles a new shape as static again. With the
# default settings, though, a *second* shape (or a second value of an int argument) is recompiled with
# symbolic sizes (automatic dynamic shapes): the graph's placeholders then carry `torch.SymInt`s, as sizes
# of their `meta["val"]` or as values. Such a graph cannot have fixed-size kernels: `compile_graph` runs it
# unfused (`make_boxed_func(gm.forward)`, 0 kernels).
#
# **When fusing does not pay.** A kernel earns its keep by saving passes over memory: a group of n nodes
# replaces n ATen calls, each of which writes its result for the next one to read back, by one pass. A
# group of one node saves nothing: the same pass, through a slower call (Python and `ctypes` around a
# kernel less tuned than ATen's). So the backend has a small cost model:
#
# * `worth_fusing(gm, group)`: `True` when the group holds at least two nodes.
# * `count_passes(gm, groups)`: the passes over memory `gm` makes when each group in `groups` (lists of node
#   names) runs as one kernel: one per group, plus one per `call_function` node outside the groups whose
#   target is an ATen op (`isinstance(node.target, torch._ops.OpOverload)`) that is not a view
#   (`node.target.is_view` is `False`; `view`, `permute`, `expand`, `alias` move no data).
# * `fuse_graph(gm, groups=None)` fuses the groups it is given (by default the whole `plan_fusion(gm)`), one
#   kernel each, and runs every other node as the ATen call it was.
# * `compile_graph` fuses only the groups of `plan_fusion(gm)` that are worth fusing, and appends their
#   number to `COMPILED_KERNELS`.
#
# The whole graph's decision is taken by the given `fusing_backend` (the cell after yours), before
# AOTAutograd: it traces Dynamo's graph twice, once as eager PyTorch runs it (`layer_norm`, `gelu`,
# `softmax`, `addmm` are one ATen call each) and once decomposed with `DECOMPOSITIONS`, and compares
# `count_passes` of the eager trace (no groups) with `count_passes` of the decomposed one with the groups
# worth fusing. If fusing saves no pass, the graph stays in eager PyTorch (`gm.forward`). It has to be decided
# there: once AOTAutograd has decomposed `layer_norm` into a dozen ops, "not fusing" would run the pieces one
# by one, slower than eager's single kernel. (It decides on the forward graph; the backward follows.)
#
# What this does on real blocks (`make bench LAB=lab07` times them):
#
# * **Matmuls stay library calls; the epilogues around them fuse.** `mm`, `addmm`, `bmm` and `convolution`
#   are not pointwise: they stay ATen calls (BLAS and oneDNN kernels no generated loop beats), and the
#   pointwise work between them becomes kernels. In RMSNorm + SwiGLU, the normalisation and `silu(a) * b`
#   between the matmuls become 4 kernels where eager makes 8 calls: 7 passes instead of 11, so it is fused.
#   In an MLP with GELU, the epilogue is already one pass in eager (`addmm` adds the bias, `gelu` is one
#   ATen kernel): 3 passes either way, and the MLP stays in eager.
# * **A row reduction needs a different kernel shape than a pointwise chain.** LayerNorm computes a mean
#   and a variance per row before it can normalise a single element of that row. Our rule 4 closes a group
#   at its reduction, so LayerNorm + GELU becomes four calls (the mean, the variance, the per-row `rsqrt` and
#   the normalisation with the GELU), three of which read the whole tensor, where ATen's `layer_norm` is one
#   kernel that keeps each row in cache for its statistics and its normalisation: 4 passes against eager's
#   2, so the block stays in eager. Softmax attention stays in eager for the same reason: its scaling and
#   softmax take two kernels and an ATen `div` where eager makes two calls (`div`, `_softmax`). Winning there takes a third kernel shape: one per-row
#   kernel that loops over the row for the statistics and then, in the same row loop, normalises and applies
#   the epilogue. Inductor's scheduler makes such kernels (it fuses a reduction with the pointwise consumers
#   of its result, "persistent reductions" when the row fits); our rules stop short of it.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "backend-solution", "locked": false, "schema_version": 3, "solution": true}
COMPILED_KERNELS = []    # the kernel count of each graph compiled, in order


def _kernel_call(kernel):
    def call(*tensors):
        return tuple(run_kernel(kernel, list(tensors)))
    call.__name__ = call.__qualname__ = f"fused_{kernel.name}"
    call.__module__ = "fused_kernels"     # FX prints calls as module.name
    return call


def worth_fusing(gm, group):
    """Whether one group of plan_fusion(gm) should run as a generated kernel (else it stays ATen calls)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 backend-solution
    return len(group) >= 2
    ### END SOLUTION


def count_passes(gm, groups):
    """How many passes over memory gm runs when each group in `groups` is one kernel and every other node stays
    what it is: one per group, plus one per ATen call outside the groups that is not a view."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 backend-solution
    grouped = {name for group in groups for name in group}
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.name not in grouped
             and isinstance(n.target, torch._ops.OpOverload) and not n.target.is_view]
    return len(groups) + len(calls)
    ### END SOLUTION


def fuse_graph(gm, groups=None):
    """A new GraphModule where every group (default: the whole plan) runs as one generated kernel; also the kernels."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 backend-solution
    groups = plan_fusion(gm) if groups is None else groups
    nodes = list(gm.graph.nodes)
    by_name = {n.name: n for n in nodes}
    position = {n: i for i, n in enumerate(nodes)}
    kernels = []
    item_of = {}                               # node -> item id; items are plain nodes or groups
    items = []
    for g, members in enumerate(groups):
        kernel = generate_kernel(gm, members, f"k{g}_{len(members)}_{hashlib.sha256(str(members).encode()).hexdigest()[:8]}")
        kernel.fn = build(kernel.source)
        kernels.append(kernel)
        items.append(("kernel", kernel, [by_name[m] for m in members]))
        for m in members:
            item_of[by_name[m]] = len(items) - 1
    output = None
    for n in nodes:
        if n.op == "output":
            output = n
        elif n not in item_of:
            items.append(("node", n, [n]))
            item_of[n] = len(items) - 1
    deps = [set() for _ in items]
    users = [set() for _ in items]
    for k, (_, _, members) in enumerate(items):
        for m in members:
            for a in m.all_input_nodes:
                if item_of[a] != k:
                    deps[k].add(item_of[a])
                    users[item_of[a]].add(k)
    missing = [len(d) for d in deps]
    ready = [(min(position[m] for m in members), k) for k, (_, _, members) in enumerate(items) if not missing[k]]
    heapq.heapify(ready)
    graph, env = fx.Graph(), {}
    while ready:
        _, k = heapq.heappop(ready)
        kind, what, members = items[k]
        if kind == "node":
            env[what] = graph.node_copy(what, lambda a: env[a])
        else:
            call = graph.call_function(_kernel_call(what), tuple(env[by_name[i]] for i in what.inputs))
            for j, out in enumerate(what.outputs):
                env[by_name[out]] = graph.call_function(operator.getitem, (call, j))
        for u in users[k]:
            missing[u] -= 1
            if not missing[u]:
                heapq.heappush(ready, (min(position[m] for m in items[u][2]), u))
    graph.node_copy(output, lambda a: env[a])
    return fx.GraphModule(gm, graph), kernels
    ### END SOLUTION


def compile_graph(gm, example_inputs):
    ### BEGIN SOLUTION
    # IPT-CANARY lab07 backend-solution
    for n in gm.graph.nodes:                       # symbolic sizes (automatic dynamic shapes): run unfused
        val = n.meta.get("val") if n.op == "placeholder" else None
        if isinstance(val, torch.SymInt) or (isinstance(val, torch.Tensor) and not all(isinstance(s, int) for s in val.shape)):
            COMPILED_KERNELS.append(0)
            return make_boxed_func(gm.forward)
    fused, kernels = fuse_graph(gm, [g for g in plan_fusion(gm) if worth_fusing(gm, g)])
    COMPILED_KERNELS.append(len(kernels))
    return make_boxed_func(fused.forward)
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "backend-wiring", "locked": true, "schema_version": 3, "solution": false}
EAGER_VIEWS = get_decompositions([aten._unsafe_view])    # eager's reshapes of fresh results: views, as in DECOMPOSITIONS
_aot_fusing = aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph, decompositions=DECOMPOSITIONS)


def _symbolic(value):
    return isinstance(value, torch.SymInt) or (isinstance(value, torch.Tensor) and not all(isinstance(s, int) for s in value.shape))


def fusing_backend(gm, example_inputs):
    """The backend Dynamo calls with each graph it captures. When fusing the graph's forward saves no pass over
    memory (count_passes of its decomposed ATen graph, with the groups worth fusing, against count_passes of the
    ATen calls eager makes), the graph stays in eager PyTorch; otherwise AOTAutograd decomposes it (forward and
    backward) and compile_graph fuses each graph."""
    if not any(_symbolic(v) for v in example_inputs):
        with torch._guards.tracing(None):             # fake traces of our own, outside Dynamo's shape environment
            eager = make_fx(gm, decomposition_table=EAGER_VIEWS, tracing_mode="fake")(*example_inputs)  # eager's ATen calls
            forward = make_fx(gm, decomposition_table=DECOMPOSITIONS, tracing_mode="fake")(*example_inputs)
        worth = [group for group in plan_fusion(forward) if worth_fusing(forward, group)]
        if count_passes(forward, worth) >= count_passes(eager, []):
            return gm.forward                         # fusing saves no pass over memory: eager runs this graph
    return _aot_fusing(gm, example_inputs)

# %% nbgrader={"grade": false, "grade_id": "backend-explore", "locked": false, "schema_version": 3, "solution": false}
torch._dynamo.reset()
COMPILED_KERNELS.clear()


def gelu_mlp(x, w1, b1, w2):
    return torch.nn.functional.gelu(x @ w1 + b1) @ w2


args = [torch.randn(8, 16, requires_grad=True), torch.randn(16, 32, requires_grad=True),
        torch.randn(32, requires_grad=True), torch.randn(32, 4, requires_grad=True)]
compiled = torch.compile(gelu_mlp, backend=fusing_backend)
out = compiled(*args)
grads = torch.autograd.grad(out.sum(), args)
want = torch.autograd.grad(gelu_mlp(*args).sum(), args)
print("kernels per graph (forward, backward):", COMPILED_KERNELS)
print("gradients equal to eager:", all(torch.allclose(g, w, atol=1e-5) for g, w in zip(grads, want)))

# %% nbgrader={"grade": true, "grade_id": "pipeline", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="The backend"
check("pipeline")

# %% [markdown] nbgrader={"grade": false, "grade_id": "speed-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Speed (15 points)
#
# Nothing new to write: this part grades how fast the kernel your planner and code generator make runs
# memory-bound pointwise chains on 4M float32 elements (16 MB per tensor), compared with eager PyTorch.
# The grader traces a few chains, takes your plan (one group) and your kernel's source, compiles it with
# `CC`'s flags beside its own harness, and measures, with the operating system's CPU-time accounting, the
# kernel on one CPU against eager PyTorch with `torch.set_num_threads(1)` on the same CPU, on fresh inputs
# every round, until two rounds agree. Every timed call's result is checked (a fast wrong kernel earns
# nothing) and implausible speedups are rejected. Full marks from 1.2x eager (geometric mean). A kernel that
# does not vectorise is what costs you here: keep the loop body plain float arithmetic and `math.h` calls.
#
# The grade is measured on the grading host (Linux, gcc and glibc's vectorised math under `-ffast-math
# -march=native`). On another system (macOS and clang, say) the cell below and `check("speed")` still run,
# but their timing need not match the grading host's, and the public check says so instead of failing.

# %% nbgrader={"grade": false, "grade_id": "speed-explore", "locked": false, "schema_version": 3, "solution": false}
import time

torch.set_num_threads(1)
N = 1 << 22
chains = {
    "x*sigmoid(x) + sin(y)": lambda x, y: x * torch.sigmoid(x) + y.sin(),
    "silu(x) * y": lambda x, y: torch.nn.functional.silu(x) * y,
    "tanh(x) * exp(-y) + x": lambda x, y: torch.tanh(x) * torch.exp(-y) + x,
    "((x - y) ** 2).sum()": lambda x, y: ((x - y) ** 2).sum(),
}


def median_time(fn, *args, repeat=7):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


x, y = torch.randn(N), torch.randn(N)
speedups = {}
for label, fn in chains.items():
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=fusing_backend)
    compiled(x, y)
    speedups[label] = median_time(fn, x, y) / median_time(compiled, x, y)
plt.figure(figsize=(6, 2.5))
plt.barh(list(speedups), list(speedups.values()), color="tab:green")
plt.axvline(1.0, color="0.3", lw=1)
plt.xlabel("speedup of your backend over eager (1 thread)")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "speed", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Speed"
check("speed")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have written the part of `torch.compile` that turns graphs into code: Dynamo captured the Python,
# AOTAutograd gave you forward and backward in Core ATen, and your backend fused, generated, compiled,
# cached and ran kernels. Inductor does the same with far more machinery: a loop-level IR, a scheduler
# that also fuses reductions with their consumers, tiling, vectorisation with its own SIMD classes,
# OpenMP parallelism, dynamic shapes and autotuning. Save the notebook and submit it
# (`make submit LAB=lab07`).
