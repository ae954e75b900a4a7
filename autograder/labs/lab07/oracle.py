"""Trusted-side (P0) oracles of lab07: real torch, torch._dynamo.explain, and a reference fusion planner.

The planner below implements the notebook's rules on P0's own AOTAutograd trace of the same function (FX node
names are deterministic), so the expected kernel count of a graph never comes from the learner's side.
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import torch
from torch import fx
from torch._decomp import core_aten_decompositions, get_decompositions

from autograder.engine.student import StudentError
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


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """The notebook's var_mean decomposition (a mean, then a sum of squared deviations), restated."""
    dims = list(range(x.dim())) if dim is None else [d % max(x.dim(), 1) for d in dim]
    mean = aten.mean.dim(x, dims, True)
    dev = x - mean
    count = math.prod(x.shape[d] for d in dims) - (1 if correction is None else correction)
    var = aten.sum.dim_IntList(dev * dev, dims, keepdim) / float(max(count, 0))
    return var, (mean if keepdim else aten.squeeze.dims(mean, dims))


DECOMPOSITIONS = {**core_aten_decompositions(), **get_decompositions([
    aten.gelu, aten.gelu_backward, aten._softmax, aten._softmax_backward_data, aten._log_softmax,
    aten._log_softmax_backward_data, aten.native_layer_norm, aten.native_layer_norm_backward,
]), aten.var_mean.correction: _var_mean}
for _op in (aten.select_backward.default, aten.slice_backward.default):
    DECOMPOSITIONS.pop(_op, None)
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
        got, want = np.atleast_1d(got), np.atleast_1d(want)  # a 0-d result too
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


def graphs_of(case, with_backward=True, spec=None):
    if spec is None:
        return _named_graphs(case, with_backward)
    fn, inputs = shared.make_case(case, 0, spec)
    return shared.aot_graphs(fn, inputs, DECOMPOSITIONS, with_backward)


@functools.lru_cache(maxsize=None)
def _named_graphs(case, with_backward):
    fn, inputs = shared.make_case(case, 0)
    return shared.aot_graphs(fn, inputs, DECOMPOSITIONS, with_backward)


# the fixed cases of test_fusion_plan (tiny_block also feeds test_speed): their graphs do not depend on the seed
PLAN_CASES = ["bias_gelu", "softmax", "layernormish", "silu_mlp", "col_sum", "masked", "mm_cycle", "row_bcast",
              "tiny_mlp", "tiny_block", "sum_dims", "mean_all_keep", "scalar_mix", "outer_bcast", "dtype_mix", "sum_f64",
              "neg_dim0", "amax_partial", "vec_mean", "cmp_f64", "two_group_cycle"]


# and those of test_pipeline's fixed cases that test_fusion_plan does not use
PIPELINE_ONLY_CASES = ["chain", "log_softmax", "full_sum", "relu_clamp", "tanh_net", "amax_of_saved", "zero_d_dims"]


def warm_p0():
    """Run once by the P0 fork server (lab.toml's `grader_preload`) before it forks the gradings: the traced
    forward and backward graphs of the fixed cases, about 6 s that every grading would otherwise repeat."""
    for case in PLAN_CASES + PIPELINE_ONLY_CASES:
        _named_graphs(case, True)


# -- generated functions: each submission meets functions of its own (drawn from its grading seed) ----------
GEN_TEXT = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / ({b}.abs() + 1.0)",
            "maximum": "torch.maximum({a}, {b})", "where": "torch.where({a} > {b}, {a}, {b} * 0.5)", "bias": "{a} + b",
            "sigmoid": "torch.sigmoid({a})", "tanh": "torch.tanh({a})", "sin": "{a}.sin()", "relu": "F.relu({a})",
            "gelu": "F.gelu({a})", "exp_neg": "torch.exp(-{a}.abs())", "square": "{a} * {a}",
            "center": "{a} - {a}.mean(-1, keepdim=True)", "rownorm": "{a} * torch.rsqrt(({a} * {a}).mean(-1, keepdim=True) + 1e-5)",
            "colmax": "{a} - {a}.amax(0, keepdim=True)", "softmax": "torch.softmax({a}, dim=-1)",
            "mm": "torch.tanh({a} @ {b}.transpose(0, 1)) @ {a}"}
FINAL_TEXT = {"none": "{v}", "sum_last": "{v}.sum(-1)", "sum_all": "{v}.sum()", "mean_first": "{v}.mean(0)",
              "amax_last": "{v}.amax(-1)"}


def generated_spec(rng):
    """A function for scenarios.generated_function: 2-8 steps over x, y (rows, cols) and a bias b (cols,); a step
    reads the value just made more often than not, so that most steps reach the output."""
    ops, steps = sorted(shared.GEN_OPS), []
    for k in range(int(rng.integers(2, 9))):
        first = 1 + k if rng.random() < 0.7 else int(rng.integers(2 + k))
        steps.append([ops[int(rng.integers(len(ops)))], first, int(rng.integers(2 + k))])
    finals = sorted(shared.GEN_FINAL)
    return {"rows": int(rng.integers(2, 7)), "cols": int(rng.integers(3, 12)), "steps": steps,
            "final": finals[int(rng.integers(len(finals)))]}


def spec_text(spec) -> str:
    """The generated function as Python a learner can paste."""
    names, lines = ["x", "y"], []
    for op, i, j in spec["steps"]:
        a, b = names[i % len(names)], names[j % len(names)]
        names.append(f"v{len(names)}")
        lines.append(f"{names[-1]} = " + GEN_TEXT[op].format(a=a, b=b))
    ret = FINAL_TEXT[spec["final"]].format(v=names[-1])
    return (f"f(x, y, b) with x, y of shape ({spec['rows']}, {spec['cols']}) and b of shape ({spec['cols']},): "
            + "; ".join(lines) + f"; return {ret}")


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
def eager_case(case, seed, with_backward=True, spec=None):
    fn, inputs = shared.make_case(case, seed, spec)
    args = [t.clone().requires_grad_(with_backward) for t in inputs]
    out = fn(*args)
    grads = {}
    if with_backward:
        params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
        gen = torch.Generator().manual_seed(seed + 1)
        weight = torch.randn(out.shape, generator=gen)
        got = torch.autograd.grad((out * weight).sum(), args + params, allow_unused=True)
        names = [f"input{i}" for i in range(len(args))] + ([n for n, _ in fn.named_parameters()] if params else [])
        grads = {n: (None if g is None else g.numpy()) for n, g in zip(names, got, strict=True)}
    again = fn(*shared.make_case(case, seed + 1000, spec)[1]).detach().numpy()
    return {"out": out.detach().numpy(), "grads": grads, "again": again}


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


# -- generated kernels, run by P0 in its clean room ----------------------------------------------------
import re  # noqa: E402

from autograder.engine import replies  # noqa: E402

_INCLUDE = re.compile(r"^\s*#\s*include\s*<(math|stdint|stddef|stdbool|float)\.h>\s*$")
_BANNED = re.compile(r"\b(asm|__asm__|__asm|_Pragma|__attribute__|__attribute)\b|%:|\?\?=")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")


def source_problem(source, name):
    """Why a generated C source cannot be run as a kernel (None when it can)."""
    if not isinstance(source, str) or not source.strip():
        return "the kernel's source should be a non-empty string of C code"
    if len(source) > 400_000:
        return "the kernel's source is longer than 400,000 characters"
    for line in source.splitlines():
        if line.lstrip().startswith("#") and not _INCLUDE.match(line):
            return (f"kernel sources may only #include <math.h>, <stdint.h>, <stddef.h>, <stdbool.h> or <float.h>; "
                    f"found {line.strip()[:60]!r}")
    if _BANNED.search(source):
        return "kernel sources may not use asm, attributes or pragmas"
    if not re.search(r"\bvoid\s+" + re.escape(name) + r"\s*\(", source):
        return f"the source should define `void {name}(...)`"
    return None


def kernel_reply(value, what):
    got = replies.dict_of(value, {"name", "source", "inputs", "outputs"}, what)
    name = replies.string(got["name"], f"{what}: the kernel's name")
    assert _IDENT.match(name), f"{what}: the kernel's name {name[:40]!r} is not a C identifier"
    inputs = [replies.string(v, f"{what}: kernel.inputs[{i}]") for i, v in enumerate(replies.list_of(got["inputs"], f"{what}: kernel.inputs"))]
    outputs = [replies.string(v, f"{what}: kernel.outputs[{i}]") for i, v in enumerate(replies.list_of(got["outputs"], f"{what}: kernel.outputs", min_length=1))]
    assert len(inputs) + len(outputs) <= 60, f"{what}: a kernel with {len(inputs) + len(outputs)} buffers is too large"
    assert len(set(inputs)) == len(inputs) and len(set(outputs)) == len(outputs), f"{what}: kernel.inputs / outputs repeat a name"
    problem = source_problem(got["source"], name)
    assert problem is None, f"{what}: {problem}"
    return {"name": name, "source": got["source"], "inputs": inputs, "outputs": outputs}


def index_mode(shape, S):
    S = list(S)
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


def group_contract(gm, group):
    """(iteration shape, the set of outputs the kernel must write, the set of nodes it may read) of a reference group."""
    nodes = {n.name: n for n in gm.graph.nodes}
    members = [nodes[m] for m in group]
    member_set = set(members)
    red = members[-1] if reduction(members[-1]) and not pointwise(members[-1]) else None
    pw = [m for m in members if m is not red]
    S = list(_val(red.args[0]).shape) if red is not None else list(_val(pw[-1]).shape)
    outs = {m.name for m in members if any(u not in member_set for u in m.users)}
    if red is not None:
        outs.add(red.name)
    reads = {a.name for m in members for a in _tensor_inputs(m) if a not in member_set}
    return S, outs, reads


def node_values(gm, args):
    values = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n.name] = out
            return out

    Recorder(gm).run(*args)
    return values


def _as_bytes(t):
    return np.ascontiguousarray(t.detach().numpy()).reshape(-1).view(np.uint8)


def prepare_kernels(clean_room, kernels, limit=60):
    """Hand the clean room kernel replies (kernel_reply) to compile ahead in one batch (scenarios.c_prepare).
    A cache, never a verdict: run_kernels still sends each check's own kernel text, which the clean room runs
    from the batch only where name, source and buffer counts are the same. Whatever fails here (a source that
    does not compile, a timeout), each check compiles its kernel on its own and reports why."""
    specs = [{"name": k["name"], "source": k["source"], "n_in": len(k["inputs"]), "n_out": len(k["outputs"])} for k in kernels]
    if specs:
        with contextlib.suppress(StudentError):   # the clean room restarts at its next call
            clean_room.run_within(limit, "c_prepare", specs)


def run_kernels(clean_room, gm, values, matched, what, rtol=2e-4, atol=2e-5):
    """matched: list of (kernel reply, reference group). Compiles every kernel in the clean room, runs each on
    P0's values of its inputs, and compares every output with P0's value of that node."""
    specs, blobs, expect = [], [], []
    names = [k["name"] for k, _ in matched]
    assert len(set(names)) == len(names), f"{what}: two kernels share the function name {names}"
    for k, group in matched:
        S, outs, reads = group_contract(gm, group)
        assert set(k["outputs"]) == outs, (
            f"{what}: the kernel of the group {group} should write {sorted(outs)} (members used outside the group, and its "
            f"reduction), it writes {k['outputs']}")
        assert set(k["inputs"]) == reads, (
            f"{what}: the kernel of the group {group} should read {sorted(reads)}, it reads {k['inputs']}")
        ins = []
        for n in k["inputs"]:
            t = values[n].detach()
            if index_mode(list(t.shape), S)[0] == "expand":
                t = t.expand(S)
            ins.append(t.contiguous())
        outs_t = [values[n].detach().contiguous() for n in k["outputs"]]
        specs.append({"name": k["name"], "source": k["source"], "n_in": len(ins), "n_out": len(outs_t),
                      "in_bytes": [t.numel() * t.element_size() for t in ins],
                      "out_bytes": [t.numel() * t.element_size() for t in outs_t]})
        blobs.append(np.concatenate([_as_bytes(t) for t in ins]) if ins else np.zeros(0, np.uint8))
        expect.append(outs_t)
    if not specs:
        return
    got = clean_room.run("c_values", specs, blobs)
    assert "error" not in got, f"{what}: your kernels could not be built by the grader ({got['error']}): {str(got.get('message', ''))[:600]}"
    for res, ((k, group), want) in replies.pairs(got["results"], list(zip(matched, expect, strict=True)), what):
        assert "error" not in res, f"{what}: the kernel {k['name']} crashed or hung ({res.get('error')}) on contiguous buffers"
        bad = [b for flag, b in replies.pairs(res["overflow"], k["inputs"] + k["outputs"], f"{what}: the overflow flags of {k['name']}") if flag]
        assert not bad, f"{what}: the kernel {k['name']} writes outside the buffer(s) {bad}"
        for j, (raw, w) in enumerate(replies.pairs(res["outputs"], want, what)):
            n = k["outputs"][j]
            arr = np.asarray(raw, dtype=np.uint8)
            if w.dtype == torch.bool:
                assert np.all(arr <= 1), f"{what}: kernel {k['name']}, output {n}: a bool output must hold 0 or 1 in every byte"
                got_v = arr.astype(bool).reshape(w.shape)
            else:
                got_v = arr.view(np.float32).reshape(w.shape)
            wv = w.numpy()
            scale = max(1.0, float(np.max(np.abs(wv[np.isfinite(wv)]), initial=0.0))) if wv.dtype != np.bool_ else 1.0
            close(got_v, wv, f"{what}: kernel {k['name']} (run by the grader), output {n}", rtol=rtol, atol=atol * scale)


def passes(gm, groups) -> int:
    """The notebook's count of passes over memory: one per group, one per ATen call outside the groups that is not
    a view."""
    grouped = {m for g in groups for m in g}
    return len(groups) + sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.name not in grouped
                             and isinstance(n.target, torch._ops.OpOverload) and not n.target.is_view)


def match_kernels(gm, kernels, what, plan=None):
    """Pair each learner kernel with the reference group whose outputs it writes; counts must agree. `plan`: the
    groups asked for (default: the whole reference plan)."""
    plan = reference_plan(gm) if plan is None else plan
    assert len(kernels) == len(plan), f"{what}: the graph should run {len(plan)} fused kernel(s), yours made {len(kernels)}"
    by_outs = {}
    for g in plan:
        by_outs.setdefault(frozenset(group_contract(gm, g)[1]), []).append(g)
    matched = []
    for k in kernels:
        cands = by_outs.get(frozenset(k["outputs"]))
        assert cands, (f"{what}: the kernel {k['name']} writes {k['outputs']}, which are not the outputs of any group of the "
                       "plan (a group writes its members used outside it, and its reduction)")
        matched.append((k, cands.pop(0)))
    return matched


# -- a captured Dynamo graph, sent as data and run here -------------------------------------------------------
import operator as _operator  # noqa: E402

_MODULES = {"torch": torch, "_operator": _operator, "operator": _operator, "torch.nn.functional": torch.nn.functional,
            "torch._C._nn": torch._C._nn, "torch.special": torch.special, "torch.functional": torch.functional}
_NOT_OPS = {"load", "save", "compile", "jit", "hub", "from_file", "set_default_dtype", "manual_seed", "seed", "item",
            "tolist", "numpy", "data_ptr", "storage", "untyped_storage", "register_hook", "backward", "apply_", "map_",
            "set_", "copy_", "resize_", "set_num_threads", "use_deterministic_algorithms", "set_grad_enabled"}


def run_graph_data(nodes, x, what):
    """Rebuild a graph from its data and run it on x (one tensor input). Raises AssertionError with a learner
    message when the data is not a plain graph of tensor operations."""
    nodes = replies.list_of(nodes, what, min_length=2)
    env = {}

    def arg(a):
        if isinstance(a, list):
            return [arg(v) for v in a]
        if isinstance(a, dict):
            if "node" in a:
                assert a["node"] in env, f"{what}: a node reads {a['node']!r} before it exists"
                return env[a["node"]]
            if "dtype" in a:
                dt = getattr(torch, str(a["dtype"]), None)
                assert isinstance(dt, torch.dtype), f"{what}: unknown dtype {a['dtype']!r}"
                return dt
            if "slice" in a:
                return slice(*[arg(v) for v in a["slice"]])
            if "kwargs" in a:
                return {str(k): arg(v) for k, v in a["kwargs"].items()}
            raise AssertionError(f"{what}: the graph holds a value the grader cannot rebuild ({str(a)[:60]})")
        assert a is None or isinstance(a, (bool, int, float, str)), f"{what}: unexpected argument {str(a)[:60]}"
        return a

    placeholders = 0
    for node in nodes:
        node = replies.dict_of(node, {"op", "name", "target", "args", "kwargs"}, what)
        op, name, target = node["op"], replies.string(node["name"], what), replies.string(node["target"], what)
        args = arg(node["args"])
        kwargs = arg(node["kwargs"]) if node["kwargs"] else {}
        assert isinstance(args, list) and isinstance(kwargs, dict), f"{what}: malformed node {name}"
        if op == "placeholder":
            placeholders += 1
            assert placeholders == 1, f"{what}: the graph should take one tensor input"
            env[name] = x
        elif op == "call_function":
            module, _, fname = target.partition(":")
            mod = _MODULES.get(module)
            fn = getattr(mod, fname, None) if mod is not None and not fname.startswith("_") else None
            assert fn is not None and callable(fn) and fname not in _NOT_OPS, f"{what}: the graph calls {target!r}, which is not a tensor operation"
            env[name] = fn(*args, **kwargs)
        elif op == "call_method":
            assert target not in _NOT_OPS and not target.startswith("_") and hasattr(torch.Tensor, target), (
                f"{what}: the graph calls the method {target!r}, which is not a tensor operation")
            env[name] = getattr(args[0], target)(*args[1:], **kwargs)
        elif op == "output":
            out = args[0]
            out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
            assert isinstance(out, torch.Tensor), f"{what}: the graph should return one tensor"
            return out
        else:
            raise AssertionError(f"{what}: the graph has a {op!r} node; it should hold only tensor operations")
    raise AssertionError(f"{what}: the graph has no output")
