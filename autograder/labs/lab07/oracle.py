"""Trusted-side (P0) oracles of lab07: real torch, torch._dynamo.explain, and a reference fusion planner.

The planner below implements the notebook's rules on P0's own AOTAutograd trace of the same function (FX node
names are deterministic), so the expected kernel count of a graph never comes from the learner's side.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch import fx
from torch._decomp import core_aten_decompositions, get_decompositions

from autograder.labs.lab07 import scenarios as shared

# IPT-CANARY lab07 oracle.py: hidden grading text, never shown to learners

aten = torch.ops.aten
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
REDUCTION_OPS = frozenset({aten.sum.dim_IntList, aten.sum.default, aten.amax.default, aten.mean.dim})
DECOMPOSITIONS = {**core_aten_decompositions(), **get_decompositions([
    aten.gelu, aten.gelu_backward, aten._softmax, aten._softmax_backward_data, aten._log_softmax,
    aten._log_softmax_backward_data, aten.native_layer_norm, aten.native_layer_norm_backward, aten.var_mean,
])}
FLOATISH = (torch.float32, torch.bool)


def close(got, want, what, rtol=1e-4, atol=1e-5):
    want = np.asarray(want)
    assert got is not None, f"{what}: got nothing"
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {list(want.shape)} expected, got {list(got.shape)}"
    if got.dtype == bool or want.dtype == bool:
        assert np.array_equal(got.astype(bool), want.astype(bool)), f"{what}: wrong values"
        return
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        diff[np.isnan(diff)] = np.inf
        where = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
        raise AssertionError(f"{what}: wrong values (largest error {float(diff.max()):.3g} at index {list(map(int, where))}:"
                             f" got {got[where]!r}, expected {want[where]!r})")


# -- graph breaks ---------------------------------------------------------------------------------------
def classify(reason: str) -> str:
    if "builtin operator" in reason:
        return "builtin"
    if "generic_jump" in reason or "data-dependent" in reason:
        return "control_flow"
    if "Tensor.item()" in reason:
        return "scalar"
    if "graph_break()" in reason:
        return "explicit"
    return "other"


_explained = {}


def explain(name, x):
    """What torch._dynamo.explain says about one of the scenario functions (run here, in P0; cached)."""
    key = (name, np.asarray(x).tobytes())
    if key not in _explained:
        _explained[key] = _explain(name, x)
    return _explained[key]


def _explain(name, x):
    import contextlib
    import io

    import torch._dynamo
    fn = shared.BREAK_FUNCTIONS[name]
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        e = torch._dynamo.explain(fn)(torch.from_numpy(np.array(x, copy=True)))
    torch._dynamo.reset()
    return {"graphs": e.graph_count, "ops": [sum(1 for n in gm.graph.nodes if n.op == "call_function") for gm in e.graphs],
            "breaks": e.graph_break_count, "reasons": [r.reason for r in e.break_reasons],
            "categories": [classify(r.reason) for r in e.break_reasons]}


# -- the reference planner -----------------------------------------------------------------------------
def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _tensor_inputs(n):
    out = []
    for a in n.all_input_nodes:
        if isinstance(_val(a), torch.Tensor) and a not in out:
            out.append(a)
    return out


def pointwise(n) -> bool:
    v = _val(n)
    return (n.op == "call_function" and n.target in POINTWISE_OPS and isinstance(v, torch.Tensor) and v.dtype in FLOATISH
            and all(_val(a).dtype in FLOATISH for a in _tensor_inputs(n)))


def reduction(n) -> bool:
    if n.op != "call_function" or n.target not in REDUCTION_OPS or "dtype" in n.kwargs or pointwise(n):
        return False
    x = _val(n.args[0]) if n.args else None
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        return False
    if n.target == aten.sum.default:
        return True
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if not dims or x.dim() == 0:
        return True
    dims = sorted({d % x.dim() for d in dims})
    return dims == [x.dim() - 1] or dims == list(range(x.dim()))


def _descendants_outside(nodes: set) -> set:
    seen, stack = set(), [u for m in nodes for u in m.users if u not in nodes]
    while stack:
        u = stack.pop()
        if u in seen or u in nodes:
            continue
        seen.add(u)
        stack.extend(u.users)
    return seen


def cyclic(nodes: set) -> bool:
    return any(u in nodes for d in _descendants_outside(nodes) for u in d.users)


def reference_plan(gm) -> list[list[str]]:
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups: list[dict] = []
    owner: dict = {}
    for n in gm.graph.nodes:
        if pointwise(n):
            shape = tuple(_val(n).shape)
            mine = {"nodes": {n}, "shape": shape, "open": True}
            for a in _tensor_inputs(n):
                g = owner.get(a)
                if g is None or g is mine or not g["open"] or g["shape"] != shape:
                    continue
                if cyclic(mine["nodes"] | g["nodes"]):
                    continue
                mine["nodes"] |= g["nodes"]
                groups.remove(g)
                for m in g["nodes"]:
                    owner[m] = mine
            groups.append(mine)
            owner[n] = mine
        elif reduction(n):
            x = n.args[0]
            g = owner.get(x)
            shape = tuple(_val(x).shape)
            if g is not None and g["open"] and g["shape"] == shape and not cyclic(g["nodes"] | {n}):
                g["nodes"].add(n)
                g["open"] = False
                owner[n] = g
            else:
                g = {"nodes": {n}, "shape": shape, "open": False}
                groups.append(g)
                owner[n] = g
    plan = [sorted(g["nodes"], key=order.__getitem__) for g in groups]
    plan.sort(key=lambda g: order[g[0]])
    return [[m.name for m in g] for g in plan]


def validate_plan(gm, groups) -> list[str]:
    """Problems with a plan, whatever rules produced it: a partition of the fusible nodes, acyclic, each fusible."""
    by_name = {n.name: n for n in gm.graph.nodes}
    problems, seen = [], {}
    for k, g in enumerate(groups):
        for name in g:
            if name not in by_name:
                problems.append(f"group {k} names {name!r}, which is not a node of the graph")
            elif name in seen:
                problems.append(f"node {name!r} is in two groups ({seen[name]} and {k})")
            else:
                seen[name] = k
    if problems:
        return problems
    fusible = [n.name for n in gm.graph.nodes if pointwise(n) or reduction(n)]
    missing = [n for n in fusible if n not in seen]
    if missing:
        problems.append(f"fusible nodes in no group: {missing}")
    extra = [n for n in seen if n not in fusible]
    if extra:
        problems.append(f"nodes that cannot be fused are in groups: {extra}")
    for k, g in enumerate(groups):
        nodes = {by_name[m] for m in g}
        if cyclic(nodes):
            problems.append(f"group {k} {g} has a path that leaves it and comes back: it cannot run as one kernel")
        reds = [m for m in g if reduction(by_name[m])]
        if len(reds) > 1 or (reds and max(g, key=lambda m: list(by_name).index(m)) != reds[0]):
            problems.append(f"group {k} {g}: a reduction may only close a group (be its last node)")
    return problems


@functools.lru_cache(maxsize=None)
def graphs_of(case, with_backward=True):
    fn, inputs = shared.make_case(case, 0)
    return shared.aot_graphs(fn, inputs, DECOMPOSITIONS, with_backward)


# -- codegen ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def op_gm(op):
    return shared.op_graph(op, DECOMPOSITIONS)


def op_values(op, arrays) -> dict:
    """The value of every node of the op's graph, computed by torch here."""
    gm = op_gm(op)
    values = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n.name] = out
            return out

    Recorder(gm).run(*[torch.from_numpy(np.array(a, copy=True)) for a in arrays])
    return {k: v.numpy() for k, v in values.items() if isinstance(v, torch.Tensor)}


# -- backend ---------------------------------------------------------------------------------------------
def eager_case(case, seed, with_backward=True):
    fn, inputs = shared.make_case(case, seed)
    args = [t.clone().requires_grad_(with_backward) for t in inputs]
    out = fn(*args)
    grads = {}
    if with_backward:
        params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
        gen = torch.Generator().manual_seed(seed + 1)
        weight = torch.randn(out.shape, generator=gen)
        got = torch.autograd.grad((out * weight).sum(), args + params, allow_unused=True)
        names = [f"input{i}" for i in range(len(args))] + ([n for n, _ in fn.named_parameters()] if params else [])
        grads = {n: (None if g is None else g.numpy()) for n, g in zip(names, got)}
    return {"out": out.detach().numpy(), "grads": grads}


def expected_kernels(case, with_backward=True) -> list[int]:
    return [len(reference_plan(gm)) for gm in graphs_of(case, with_backward)]


def chain_eager(chain, seed):
    x, y = shared.chain_inputs(seed)
    return shared.CHAINS[chain](x, y)


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else 0.5 * (values[len(values) // 2 - 1] + values[len(values) // 2])


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


# -- the notebook's functions with graph breaks (the rewrites must return what these return) ------------
def branchy(x):
    y = x.sin()
    if y.sum() > 0:
        return y * 2
    return y - 1


def scaled(x):
    return x * x.abs().max().item()


def logged(x):
    y = torch.relu(x)
    print("relu done")
    return y * 3
