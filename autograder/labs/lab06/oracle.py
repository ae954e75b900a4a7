"""Trusted-side (P0) oracles of lab06: real torch.fx and eager PyTorch on the same models.

The models come from autograder/labs/lab06/scenarios.py (`build`), so P0 and P1 hold the same weights and
inputs. Where torch.fx has no exact counterpart of a pass's rule (CSE with this lab's purity rule, the
SiLU matcher, which BatchNorms are foldable), the expected node counts come from a small reference run
here on the real fx graph; outputs are always compared with eager PyTorch.
"""
# IPT-CANARY lab06 oracle.py: hidden grading text, never shown to learners
from __future__ import annotations

import operator

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from autograder.labs.lab06 import scenarios as shared


def close(got, want, what, rtol=1e-4, atol=1e-5):
    assert isinstance(got, list) and len(got) == len(want), (
        f"{what}: expected {len(want)} output tensor(s), got {len(got) if isinstance(got, list) else got!r}")
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what}: output {i} should have shape {list(w.shape)}, got {list(g.shape)}"
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            assert np.array_equal(g, w), f"{what}: output {i} differs from eager PyTorch"
            continue
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            err = float(np.nanmax(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            raise AssertionError(f"{what}: output {i} differs from eager PyTorch (max |difference| {err:.3g})")


def eager(name, seed=0, program=None, bump=False):
    model, inputs = shared.build(name, seed, program)
    if bump:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
    with torch.no_grad():
        out = model(*inputs)
    return shared._flat(out), shared._structure(out)


def fx_graph(name, seed=0, program=None):
    model, _ = shared.build(name, seed, program)
    return shared.describe(torch.fx.symbolic_trace(model).graph.nodes)


def fx_state_dict(name, seed=0, program=None):
    model, _ = shared.build(name, seed, program)
    return sorted(torch.fx.symbolic_trace(model).state_dict().keys())


def show_node(d):
    if d is None:
        return "nothing (the graph ended)"
    return f"{d['op']} {d['target']!r} args={_short(d['args'])} kwargs={_short(d['kwargs'])}"


def _short(a):
    """A readable form of a described argument structure."""
    if isinstance(a, dict):
        if "node" in a:
            return f"%{a['node']}"
        if "tuple" in a:
            return "(" + ", ".join(_short(x) for x in a["tuple"]) + ("," if len(a["tuple"]) == 1 else "") + ")"
        if "dict" in a:
            return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in a["dict"].items()) + "}"
        if "slice" in a:
            return "slice(" + ", ".join(_short(x) for x in a["slice"]) + ")"
        if "ellipsis" in a:
            return "..."
        if "dtype" in a:
            return a["dtype"]
        return f"<{a.get('object')}>"
    if isinstance(a, list):
        return "[" + ", ".join(_short(x) for x in a) + "]"
    return repr(a)


def compare_graphs(got, want, what):
    """Node-by-node comparison with a message naming the first difference."""
    assert isinstance(got, list), f"{what}: mini_trace should return a Graph, got {got!r}"
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            raise AssertionError(f"{what}: node {i} should be {show_node(w)}, got {show_node(g)} "
                                 f"(torch.fx gives {len(want)} nodes, yours {len(got)}; %k is node k)")


# -- shape_prop -------------------------------------------------------------------------------------
def shape_prop(name, seed=0):
    from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
    model, inputs = shared.build(name, seed)
    gm = torch.fx.symbolic_trace(model)
    result = ShapeProp(gm).propagate(*inputs)
    nodes = {}
    for n in gm.graph.nodes:
        tm = n.meta.get("tensor_meta")
        if isinstance(tm, TensorMetadata):
            nodes[n.name] = {"shape": list(tm.shape), "dtype": str(tm.dtype), "stride": list(tm.stride),
                             "requires_grad": bool(tm.requires_grad)}
        else:
            nodes[n.name] = {"shape": None, "dtype": None, "stride": None, "requires_grad": None}
    sizes = {n.name: int(np.prod(nodes[n.name]["shape"])) * tm_itemsize(nodes[n.name]["dtype"])
             for n in gm.graph.nodes if n.op.startswith("call_") and nodes[n.name]["shape"] is not None}
    return {"nodes": nodes, "outs": shared._flat(result), "bytes": sizes}


def tm_itemsize(dtype):
    return getattr(torch, dtype.split(".")[1]).itemsize


# -- conv_bn_fold -----------------------------------------------------------------------------------
def fold_expect(name, seed=0):
    """How many BatchNorm2d calls must remain: those not fed by a Conv2d call with no other user."""
    model, inputs = shared.build(name, seed)
    gm = torch.fx.symbolic_trace(model)
    mods = dict(gm.named_modules())
    left = 0
    for n in gm.graph.nodes:
        if n.op == "call_module" and isinstance(mods[n.target], nn.BatchNorm2d):
            src = n.args[0]
            foldable = (isinstance(src, torch.fx.Node) and src.op == "call_module" and isinstance(mods[src.target], nn.Conv2d)
                        and len(src.users) == 1 and mods[n.target].running_mean is not None)
            left += not foldable
    with torch.no_grad():
        outs = shared._flat(model(*inputs))
    convs = shared._count_modules(gm, nn.Conv2d)
    return {"bn_left": left, "outs": outs, "convs": convs, "bn_before": shared._count_modules(gm, nn.BatchNorm2d)}


# -- dce_cse ----------------------------------------------------------------------------------------
def is_impure(node):
    if node.op in ("placeholder", "output") or node.kwargs.get("inplace") is True:
        return True
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if node.op in ("call_function", "call_method") and name.endswith("_") and not name.endswith("__"):
        return True
    if node.op == "call_function" and node.target in RANDOM_FUNCTIONS:
        return True
    if node.op == "call_method" and node.target in ("bernoulli", "multinomial"):
        return True
    if node.op == "call_module" and getattr(node.graph.owning_module.get_submodule(node.target), "inplace", False):
        return True
    return node.is_impure()


RANDOM_FUNCTIONS = (torch.rand, torch.randn, torch.randint, torch.rand_like, torch.randn_like, torch.randint_like,
                    torch.randperm, torch.bernoulli, torch.normal, torch.multinomial, torch.dropout, F.dropout)


def _key(a):
    if isinstance(a, torch.fx.Node):
        return ("node", a)
    if isinstance(a, tuple):
        return ("tuple", tuple(_key(x) for x in a))
    if isinstance(a, list):
        return ("list", tuple(_key(x) for x in a))
    if isinstance(a, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in a.items())))
    if isinstance(a, slice):
        return ("slice", _key(a.start), _key(a.stop), _key(a.step))
    return (type(a).__name__, a)


def _cse(gm):
    seen, removed = {}, 0
    for n in list(gm.graph.nodes):
        if is_impure(n):
            continue
        k = (n.op, n.target, _key(tuple(n.args)), _key(dict(n.kwargs)))
        if k in seen:
            n.replace_all_uses_with(seen[k])
            gm.graph.erase_node(n)
            removed += 1
        else:
            seen[k] = n
    return removed


def clean_expect(name, which, seed=0):
    model, inputs = shared.build(name, seed)
    gm = torch.fx.symbolic_trace(model)
    removed = {}
    for step in which:
        if step == "cse":
            removed[step] = _cse(gm)
        else:
            before = len(gm.graph.nodes)
            gm.graph.eliminate_dead_code(is_impure_node=is_impure)   # real fx DCE with this lab's purity rule
            removed[step] = before - len(gm.graph.nodes)
    gm.recompile()
    torch.manual_seed(seed)
    with torch.no_grad():
        eager_outs = shared._flat(model(*inputs))
    return {"removed": removed, "nodes": [f"{n.op}:{shared.target_str(n.target)}" for n in gm.graph.nodes],
            "outs": eager_outs, "impure": {n.name: is_impure(n) for n in torch.fx.symbolic_trace(model).graph.nodes}}


# -- rewrite ----------------------------------------------------------------------------------------
def silu_expect(name, seed=0):
    model, inputs = shared.build(name, seed)
    gm = torch.fx.symbolic_trace(model)

    def is_mul(n):
        return ((n.op == "call_function" and n.target in (operator.mul, torch.mul)) or (n.op == "call_method" and n.target == "mul")) \
            and len(n.args) == 2 and not n.kwargs and all(isinstance(a, torch.fx.Node) for a in n.args)

    def is_sig(n):
        return ((n.op == "call_function" and n.target is torch.sigmoid) or (n.op == "call_method" and n.target == "sigmoid")) \
            and len(n.args) == 1 and not n.kwargs

    count = 0
    for n in gm.graph.nodes:
        if is_mul(n):
            a, b = n.args
            if any(is_sig(s) and s.args[0] is o and len(s.users) == 1 for s, o in ((b, a), (a, b))):
                count += 1
    sig_before = sum(1 for n in gm.graph.nodes if is_sig(n))
    silu_before = sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target is F.silu)
    with torch.no_grad():
        outs = shared._flat(model(*inputs))
    return {"count": count, "sigmoids_left": sig_before - count, "silus": silu_before + count,
            "nodes": len(gm.graph.nodes) - count, "outs": outs}


# -- decompose --------------------------------------------------------------------------------------
def decompose_expect(name, seed=0):
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    fn, args = shared.decompose_inputs(name, seed)
    gm = make_fx(fn, decomposition_table=core_aten_decompositions())(*args)
    hist = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            key = str(n.target) if isinstance(n.target, torch._ops.OpOverload) else n.target.__name__
            hist[key] = hist.get(key, 0) + 1
    with torch.no_grad():
        outs = shared._flat(fn(*args))
    return {"histogram": hist, "outs": outs}
