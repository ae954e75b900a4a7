"""Trusted-side (P0) oracles of lab06: real torch.fx and eager PyTorch on the same models.

The models come from autograder/labs/lab06/scenarios.py (`build`, `harnessed`), so P0 and P1 hold the
same weights and inputs. Where this lab's rules differ from torch.fx (the tracer's buffers, plain tensor
attributes and unregistered modules; CSE's barriers; which BatchNorms fold; the exact SiLU node), the
expectation comes from real fx customised here with the lab's stated rules; outputs are always compared
with eager PyTorch. Every reply is validated (autograder.engine.replies) before it is compared.
"""
# IPT-CANARY lab06 oracle.py: hidden grading text, never shown to learners
from __future__ import annotations

import ast
import functools
import keyword
import operator
import re

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from autograder.engine import replies
from autograder.labs.lab06 import scenarios as shared


def close(got, want, what, rtol=1e-4, atol=1e-5):
    """Learner tensors (a list of arrays) vs eager ones: count, shape, dtype kind, values."""
    for i, (g, w) in enumerate(replies.pairs(got, want, f"{what}: the output tensors")):
        g = replies.array(g, f"{what}: output {i}")
        assert g.shape == w.shape, f"{what}: output {i} should have shape {list(w.shape)}, got {list(g.shape)}"
        if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
            assert g.dtype.kind == w.dtype.kind and np.array_equal(g, w), f"{what}: output {i} differs from eager PyTorch"
            continue
        assert g.dtype.kind == "f", f"{what}: output {i} should be a floating tensor, got dtype {g.dtype}"
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


# -- tracer -----------------------------------------------------------------------------------------
class LabTracer(torch.fx.Tracer):
    """torch.fx's tracer with this lab's stated differences: a buffer gets a node at every *read*, a plain
    tensor attribute stays a constant, a module not registered in the root is traced through."""

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if isinstance(attr_val, torch.Tensor) and not isinstance(attr_val, nn.Parameter):
            for name, buf in self.root.named_buffers():
                if buf is attr_val:
                    return self.create_proxy("get_attr", name, (), {})
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_arg(self, a):
        if isinstance(a, torch.Tensor) and not isinstance(a, nn.Parameter):
            return a
        return super().create_arg(a)

    def call_module(self, m, forward, args, kwargs):
        try:
            self.path_of_module(m)
        except NameError:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)


def fx_graph(name, seed=0, program=None):
    model, _ = shared.harnessed("tracer", name, seed, program)
    return shared.describe(LabTracer().trace(model).nodes)


def fx_probe(program):
    """torch.fx's own Proxy on the same straight-line program (the lab's operators equal fx's)."""
    graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(graph)
    x, y = torch.fx.Proxy(graph.placeholder("x"), tracer), torch.fx.Proxy(graph.placeholder("y"), tracer)
    out = shared.probe_run(x, y, program)
    graph.output(torch.fx.node.map_aggregate(out, lambda a: a.node if isinstance(a, torch.fx.Proxy) else a))
    return shared.describe(graph.nodes)


def probe_program(key, length=10):
    """A fixed program per test (every probe operator, in an order and with operands drawn from `key`)."""
    import random
    rng = random.Random(key)
    ops = list(shared.PROBE_OPS)
    rng.shuffle(ops)
    return [[op, rng.randrange(20), rng.randrange(20), rng.choice([0.5, 2.0, -3.0, 1])] for op in ops[:length]]


def fx_state_dict(name, seed=0, program=None):
    model, _ = shared.build(name, seed, program)
    return sorted(torch.fx.symbolic_trace(model).state_dict().keys())


def show_node(d):
    if d is None:
        return "nothing (the graph ended)"
    if not isinstance(d, dict):
        return replies.describe(d)
    return f"{d.get('op')} {d.get('target')!r} args={_short(d.get('args'))} kwargs={_short(d.get('kwargs'))}"


def _short(a):
    """A readable form of a described argument structure."""
    if isinstance(a, dict):
        if "node" in a:
            return f"%{a['node']}"
        if "tuple" in a and isinstance(a["tuple"], list):
            return "(" + ", ".join(_short(x) for x in a["tuple"]) + ("," if len(a["tuple"]) == 1 else "") + ")"
        if "dict" in a and isinstance(a["dict"], dict):
            return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in a["dict"].items()) + "}"
        if "slice" in a and isinstance(a["slice"], list):
            return "slice(" + ", ".join(_short(x) for x in a["slice"]) + ")"
        if "ellipsis" in a:
            return "..."
        if "dtype" in a:
            return str(a["dtype"])
        return f"<{a.get('object')}>"
    if isinstance(a, list):
        return "[" + ", ".join(_short(x) for x in a) + "]"
    return repr(a)[:60]


def compare_graphs(got, want, what):
    """Node-by-node comparison with a message naming the first difference."""
    got = replies.list_of(got, f"{what}: the graph's nodes")
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            raise AssertionError(f"{what}: node {i} should be {show_node(w)}, got {show_node(g)} "
                                 f"(the lab's rules give {len(want)} nodes, yours {len(got)}; %k is node k)")


# -- codegen ----------------------------------------------------------------------------------------
def graph_floats(name, program=None):
    """The float constants in the fx graph's arguments (what the generated source must spell exactly)."""
    import math
    model, _ = shared.build(name, 0, program)
    found = set()

    def walk(a):
        if isinstance(a, float) and math.isfinite(a) and a == a:
            found.add(a)
        elif isinstance(a, (tuple, list)):
            for x in a:
                walk(x)
        elif isinstance(a, dict):
            for x in a.values():
                walk(x)
        elif isinstance(a, slice):
            walk((a.start, a.stop, a.step))

    for n in torch.fx.symbolic_trace(model).graph.nodes:
        walk((n.args, n.kwargs))
    return found


def source_floats(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, float):
            out.add(node.value)
            out.add(-node.value)
    return out


def check_source(source, names, ops, what, floats=()):
    """The generated source, read back here: `def forward(self, <placeholders>)`, then exactly one
    assignment per node (in graph order, to the node's name), then one return."""
    source = replies.string(source, f"{what}: python_code(graph)[0]")
    names = [str(n) for n in names]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise AssertionError(f"{what}: the generated source does not parse ({exc.msg}, line {exc.lineno})") from None
    funcs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    assert len(tree.body) == 1 and len(funcs) == 1 and funcs[0].name == "forward", (
        f"{what}: the source should hold exactly one function, `def forward(self, ...)`, and nothing else")
    fn = funcs[0]
    params = [a.arg for a in fn.args.args]
    want_params = ["self"] + [n for n, op in zip(names, ops, strict=True) if op == "placeholder"]
    assert params == want_params and not fn.args.vararg and not fn.args.kwarg and not fn.args.kwonlyargs, (
        f"{what}: the function should be `def forward({', '.join(want_params)})`, got parameters {params}")
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                       and isinstance(s.value.value, str))]    # a docstring is fine
    want_targets = [n for n, op in zip(names, ops, strict=True) if op not in ("placeholder", "output")]
    assigned = []
    for stmt in body[:-1]:
        ok = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
        assert ok, (f"{what}: the body should be one `<node name> = ...` assignment per node and a return; "
                    f"found a {type(stmt).__name__} statement at line {stmt.lineno}")
        assigned.append(stmt.targets[0].id)
    assert assigned == want_targets, (
        f"{what}: the body should assign the nodes {want_targets[:6]}{'...' if len(want_targets) > 6 else ''} once each, "
        f"in graph order; got {assigned[:6]}{'...' if len(assigned) > 6 else ''} ({len(assigned)} assignments for "
        f"{len(want_targets)} nodes)")
    assert body and isinstance(body[-1], ast.Return), f"{what}: the function should end with one `return`"
    lost = sorted(f for f in floats if f not in source_floats(tree))
    assert not lost, (f"{what}: the float constant(s) {lost[:3]} of the graph should appear exactly in the source "
                      "(repr keeps every digit)")


# -- generated graphs: each submission meets programs of its own (drawn from its grading seed) -------
CONSTANTS = (0.5, 2.0, -3.0, 1.0, 0.25)
SILU_OPS = ("silu_l", "silu_r", "silu_m", "silu_near", "sigmoid", "mul")
FOLD_KINDS = ("bn", "bn", "bn_eps", "bn_noaffine", "bn_nostats", "relu_bn", "module_bn", "shared", "none")


def generated_program(rng, length, ops=tuple(shared.PROGRAM_OPS), repeat=0.0):
    """A straight-line program for scenarios.Program drawn from `rng` (a numpy Generator). Operands index
    values already made, so a step repeated later (probability `repeat`) reads the same values: CSE merges it."""
    steps = []
    for _ in range(length):
        if steps and rng.random() < repeat:
            steps.append(list(steps[int(rng.integers(len(steps)))]))
            continue
        made = 2 + len(steps)
        steps.append([str(ops[int(rng.integers(len(ops)))]), int(rng.integers(made)), int(rng.integers(made)),
                      float(CONSTANTS[int(rng.integers(len(CONSTANTS)))])])
    return steps


PROGRAM_TEXT = {
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "rsub": "{c} - {a}", "rmul": "{c} * {a}", "neg": "-{a}",
    "relu": "{a}.relu()", "tanh": "torch.tanh({a})", "sigmoid": "torch.sigmoid({a})", "softmax": "F.softmax({a}, dim=-1)",
    "cat_slice": "torch.cat([{a}, {b}], dim=1)[:, 3:9]", "matmul": "torch.tanh(({a} @ {b}.transpose(0, 1)) @ {a})",
    "linear": "self.lin({a})", "param": "{a} * self.w", "div": "{a} / ({c} + 2.0)", "eq": "({a} == {b}) * {c} + {a}",
    "ne": "{a} * ({a} != {c})", "floordiv": "{a} // ({c} + 3.5)", "mod": "{a} % 1.5", "pow": "{a} ** 2",
    "rdiv": "{c} / ({a} * {a} + 1)", "lt_reflected": "({c} < {a}) * {a}", "shape": "{a} * {a}.shape[0] + {a}.size(1)",
    "T": "({a}.T @ {b})[:4]", "kw_method": "{a}.transpose(dim0=0, dim1=1).transpose(0, 1)",
    "sum_kw": "{a} - {a}.sum(dim=1, keepdim=True)", "where": "torch.where({a} > {b}, {a}, {b})", "pos": "+{a} - {b}",
    "rpow": "{c} ** ({a}.abs().round() + 1) + {a}", "silu_l": "{a} * torch.sigmoid({a})", "silu_r": "torch.sigmoid({a}) * {a}",
    "silu_m": "{a}.mul({a}.sigmoid())", "silu_near": "{a} * torch.sigmoid({b})", "silu_add": "{a} + torch.sigmoid({a})"}


def program_text(program) -> str:
    """A generated program as the forward it stands for (x, y of shape (4, 6); self.lin = Linear(6, 6))."""
    names, lines = ["x", "y"], []
    for op, i, j, c in program:
        a, b = names[i % len(names)], names[j % len(names)]
        names.append(f"v{len(names)}")
        lines.append(f"{names[-1]} = " + PROGRAM_TEXT.get(op, "{a}[1:3].repeat(2, 1)").format(a=a, b=b, c=repr(c)))
    return "forward(x, y): " + "; ".join(lines) + f"; return {names[-1]}, {names[len(names) // 2]}"


def generated_fold_spec(rng):
    """A chain of 1-4 conv blocks for scenarios.FoldProgram: channels, kernels, strides, dilations, groups,
    bias and what follows each conv (foldable BatchNorm2d or one of the cases that must stay) drawn from `rng`."""
    blocks, strided = [], 0
    for _ in range(int(rng.integers(1, 5))):
        stride = 2 if strided < 2 and rng.random() < 0.25 else 1
        strided += stride == 2
        blocks.append({"cout": int(rng.choice([2, 3, 4, 6])), "k": int(rng.choice([1, 3])), "stride": stride,
                       "dil": int(rng.choice([1, 1, 2])), "groups": int(rng.choice([1, 1, 2])), "bias": bool(rng.random() < 0.5),
                       "kind": str(FOLD_KINDS[int(rng.integers(len(FOLD_KINDS)))])})
    return {"cin": int(rng.integers(1, 5)), "blocks": blocks}


# -- shape_prop -------------------------------------------------------------------------------------
def shape_prop(name, seed=0, program=None):
    """Every node's tensor metadata, recorded here by a trusted Interpreter (cross-checked with ShapeProp)."""
    from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
    model, inputs = shared.harnessed("shapes", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    nodes = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if isinstance(value, torch.Tensor):
                nodes[n.name] = {"shape": list(value.shape), "dtype": str(value.dtype), "stride": list(value.stride()),
                                 "storage_offset": int(value.storage_offset()), "requires_grad": bool(value.requires_grad)}
            else:
                nodes[n.name] = dict.fromkeys(shared.META_KEYS)
            return value

    result = Recorder(gm).run(*inputs)
    ShapeProp(gm).propagate(*inputs)
    for n in gm.graph.nodes:      # the oracle agrees with fx's own ShapeProp where both record
        tm = n.meta.get("tensor_meta")
        if isinstance(tm, TensorMetadata):
            assert nodes[n.name]["shape"] == list(tm.shape) and nodes[n.name]["stride"] == list(tm.stride), n.name
    sizes = {n.name: int(np.prod(nodes[n.name]["shape"])) * tm_itemsize(nodes[n.name]["dtype"])
             for n in gm.graph.nodes if n.op.startswith("call_") and nodes[n.name]["shape"] is not None}
    return {"nodes": nodes, "outs": shared._flat(result), "bytes": sizes}


def tm_itemsize(dtype):
    return getattr(torch, dtype.split(".")[1]).itemsize


# -- conv_bn_fold -----------------------------------------------------------------------------------
def fold_expect(name, seed=0, program=None):
    """The call_module kinds left after folding: every BatchNorm2d fed by a Conv2d call with no other user
    (and running statistics) goes; nothing else changes."""
    model, inputs = shared.harnessed("fold", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    mods = dict(gm.named_modules())
    kinds, before = [], []
    for n in gm.graph.nodes:
        if n.op != "call_module":
            continue
        before.append(type(mods[n.target]).__name__)
        if isinstance(mods[n.target], nn.BatchNorm2d):
            src = n.args[0]
            if (isinstance(src, torch.fx.Node) and src.op == "call_module" and isinstance(mods[src.target], nn.Conv2d)
                    and len(src.users) == 1 and mods[n.target].running_mean is not None):
                continue
        kinds.append(type(mods[n.target]).__name__)
    with torch.no_grad():
        outs = shared._flat(model(*inputs))
    return {"modules": kinds, "before": before, "outs": outs}


# -- dce_cse ----------------------------------------------------------------------------------------
RANDOM_FUNCTIONS = (torch.rand, torch.randn, torch.randint, torch.rand_like, torch.randn_like, torch.randint_like,
                    torch.randperm, torch.bernoulli, torch.normal, torch.multinomial, torch.dropout, F.dropout)


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
            seen.clear()                       # the lab's rule: every impure node is a barrier
            continue
        k = (n.op, n.target, _key(tuple(n.args)), _key(dict(n.kwargs)))
        if k in seen:
            n.replace_all_uses_with(seen[k])
            gm.graph.erase_node(n)
            removed += 1
        else:
            seen[k] = n
    return removed


def clean_expect(name, which, seed=0, program=None):
    model, inputs = shared.harnessed("clean", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    impure = {n.name: is_impure(n) for n in gm.graph.nodes}   # of the traced graph, before the passes
    removed = {}
    for step in which:
        if step == "cse":
            removed[step] = _cse(gm)
        else:
            before = len(gm.graph.nodes)
            gm.graph.eliminate_dead_code(is_impure_node=is_impure)   # real fx DCE with this lab's purity rule
            removed[step] = before - len(gm.graph.nodes)
    shared._seed(seed)
    with torch.no_grad():
        eager_outs = shared._flat(model(*inputs))
    return {"removed": removed, "nodes": [f"{n.op}:{shared.target_str(n.target)}" for n in gm.graph.nodes],
            "outs": eager_outs, "impure": impure}


# -- rewrite ----------------------------------------------------------------------------------------
def silu_expect(name, seed=0, program=None):
    """The graph after the lab's rewrite, done here on real fx: F.silu(x) inserted before each matching mul."""
    model, inputs = shared.harnessed("silu", name, seed, program)
    gm = torch.fx.symbolic_trace(model)

    def is_mul(n):
        return ((n.op == "call_function" and n.target in (operator.mul, torch.mul)) or (n.op == "call_method" and n.target == "mul")) \
            and len(n.args) == 2 and not n.kwargs and all(isinstance(a, torch.fx.Node) for a in n.args)

    def is_sig(n):
        return ((n.op == "call_function" and n.target is torch.sigmoid) or (n.op == "call_method" and n.target == "sigmoid")) \
            and len(n.args) == 1 and not n.kwargs

    count = 0
    for n in list(gm.graph.nodes):
        if not is_mul(n):
            continue
        a, b = n.args
        for sig, other in ((b, a), (a, b)):
            if is_sig(sig) and sig.args[0] is other and len(sig.users) == 1:
                with gm.graph.inserting_before(n):
                    new = gm.graph.call_function(F.silu, (other,))
                n.replace_all_uses_with(new)
                gm.graph.erase_node(n)
                gm.graph.erase_node(sig)
                count += 1
                break
    with torch.no_grad():
        outs = shared._flat(model(*inputs))
    return {"count": count, "graph": shared.describe(gm.graph.nodes), "outs": outs}


# -- profiler ---------------------------------------------------------------------------------------
def interpret(name, seed=0, edit=False, inject=None, program=None):
    """What interpreting the (possibly edited, never recompiled) graph gives, and which nodes run."""
    model, inputs = shared.build(name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    if edit:
        shared.stale_scale(gm.graph)
    names = [n.name for n in gm.graph.nodes]
    if inject is None:
        return {"outs": shared._flat(torch.fx.Interpreter(gm).run(*inputs)), "names": names, "ran": names}
    node = list(gm.graph.nodes)[inject]
    shape = shared._node_shape(gm, inputs, node)
    ran = []

    class Track(torch.fx.Interpreter):
        def run_node(self, n):
            ran.append(n.name)
            return super().run_node(n)

    out = Track(gm).run(*inputs, initial_env={node: torch.ones(shape)})
    return {"outs": shared._flat(out), "names": names, "ran": ran, "injected": node.name}


def float_nodes(name, seed=0, program=None):
    """Indices (in graph order) of the call nodes whose value is a floating-point tensor: where a test may
    give a value in initial_env."""
    model, inputs = shared.build(name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    found = []

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if n.op.startswith("call_") and isinstance(value, torch.Tensor) and value.is_floating_point():
                found.append(n.name)
            return value

    Rec(gm).run(*inputs)
    return [i for i, n in enumerate(gm.graph.nodes) if n.name in found]


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?%?$")


def summary_rows(summary, what):
    """(name, ms, calls, share) per line after the header."""
    lines = [line for line in replies.string(summary, f"{what}: profile_summary(...)").splitlines() if line.strip()]
    assert lines, f"{what}: profile_summary should return a header line and one line per node, got an empty string"
    rows = []
    for line in lines[1:]:
        parts = line.split()
        nums = [p for p in parts[1:] if _NUMBER.match(p)]
        assert len(parts) >= 4 and len(nums) >= 3, (
            f"{what}: each summary line should be `<node name> <total ms> <calls> <share %>`, got {line.strip()[:80]!r}")
        try:
            rows.append((parts[0], float(nums[0]), float(nums[1]), float(nums[2].rstrip("%"))))
        except ValueError:
            raise AssertionError(f"{what}: could not read the numbers of the summary line {line.strip()[:80]!r}") from None
    return rows


# -- decompose --------------------------------------------------------------------------------------
def resolve_aten(target):
    """The OpOverload a described target string names, or None."""
    if not isinstance(target, str) or not target.startswith("aten."):
        return None
    parts = target.split(".")
    if len(parts) != 3:
        return None
    packet = getattr(torch.ops.aten, parts[1], None)
    return getattr(packet, parts[2], None) if packet is not None else None


def histogram_of(graph):
    """op_histogram's answer for a described graph."""
    hist = {}
    for d in graph:
        if d["op"] == "call_function":
            t = d["target"]
            key = t if resolve_aten(t) is not None else t.rsplit(".", 1)[-1]
            hist[key] = hist.get(key, 0) + 1
    return hist


@functools.cache
def core_aten_table() -> dict:
    """core_aten_decompositions(), materialized: building it collects every CompositeImplicitAutograd op of
    every namespace (0.2 s each time). P0 registers no custom op, so one table serves every grading."""
    from torch._decomp import core_aten_decompositions
    return core_aten_decompositions().materialize()


def warm_p0():
    """Run once by the P0 fork server (lab.toml's `grader_preload`) before it forks the gradings: the core ATen
    table, and make_fx's first-call set-up on one fixed function."""
    from torch.fx.experimental.proxy_tensor import make_fx
    make_fx(lambda x: torch.nn.functional.gelu(x) * 2, decomposition_table=core_aten_table())(torch.ones(2))


@functools.lru_cache(maxsize=None)   # test_core_aten and test_run_graph ask for the same (name, seed)
def decompose_expect(name, seed=0):
    from torch.fx.experimental.proxy_tensor import make_fx
    fn, args = shared.decompose_inputs(name, seed)
    gm = make_fx(fn, decomposition_table=core_aten_table())(*args)
    with torch.no_grad():
        outs = shared._flat(fn(*args))
    edited = [o.copy() for o in outs]
    edited[0] = edited[0] * np.float32(3.0)
    return {"graph": shared.describe(gm.graph.nodes), "outs": outs, "edited": edited}


def dotted_expect(seed=0):
    gm, inp = shared.dotted_graph(seed)
    with torch.no_grad():
        return shared._flat(inp * gm.get_buffer("blocks.0.scale") - gm.get_parameter("blocks.1.shift"))


def valid_identifier(name):
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
