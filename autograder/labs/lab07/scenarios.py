"""lab07 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed. Everything crosses as plain data (ints, strings, lists, numpy arrays). The trusted side
(P0) imports this module too, for the function and model definitions (the same source on both sides) and
for `aot_graphs`, which it runs with its own reference planner. So this module has no side effects at import.
"""
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# IPT-CANARY lab07 scenarios/lab07.py: hidden grading text, never shown to learners


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:400]}


def _np(t):
    return None if t is None else t.detach().numpy().copy()


def _t(a, grad=False):
    return torch.from_numpy(np.array(a, copy=True)).requires_grad_(grad)


def no_inductor():
    """Make Inductor unusable in this process: the learner's backend must be their own."""
    def refuse(*args, **kwargs):
        raise RuntimeError("Inductor is off-limits in this lab: your backend must generate its own kernels")
    import torch._dynamo.backends.registry as registry
    if registry._COMPILER_FNS.get("inductor") is refuse or getattr(registry, "_ipt_refused", False):
        return
    registry._lazy_import()
    registry._COMPILER_FNS["inductor"] = refuse
    registry._ipt_refused = True
    for name in ("torch._inductor.compile_fx",):
        if name not in sys.modules:
            sys.modules[name] = None   # importing them now raises ImportError
    import torch._inductor as inductor
    for attr in ("compile", "compile_fx", "aot_compile", "standalone_compile"):
        if hasattr(inductor, attr):
            setattr(inductor, attr, refuse)


# -- part graph_breaks ------------------------------------------------------------------------------
def gb_clean(x):
    return torch.tanh(x) * x.cos() + 1


def gb_print_middle(x):
    y = x.exp()
    print("halfway")
    return y.sum() * y


def gb_two_prints(x):
    y = x * 2
    print("one")
    y = y.sin()
    print("two")
    return y + 1


def gb_branch(x):
    y = x.abs()
    if y.mean() > 0.5:
        return y.sqrt()
    return y * y


def gb_item(x):
    s = x.sum().item()
    return x * s + x.sin()


def gb_explicit(x):
    y = x.relu()
    torch._dynamo.graph_break()
    return y * y + 1


def gb_print_first(x):
    print("start")
    return (x + 1).sigmoid()


def _gb_log(y):
    print("step")
    return y * 2


def gb_helper(x):
    return _gb_log(x.sin()) + _gb_log(x.cos())


BREAK_FUNCTIONS = {f.__name__: f for f in (gb_clean, gb_print_middle, gb_two_prints, gb_branch, gb_item,
                                            gb_explicit, gb_print_first, gb_helper)}


def analyze(sub, name, x):
    no_inductor()
    fn = BREAK_FUNCTIONS.get(name) or getattr(sub, name)
    got = sub.analyze_graph_breaks(fn, _t(x))
    return {"graphs": int(got["graphs"]), "ops": [int(v) for v in got["ops"]], "breaks": int(got["breaks"]),
            "reasons": [str(r) for r in got["reasons"]]}


def recording(sub, name, x):
    """Compile with a fresh RecordingBackend; the graphs it recorded and the result."""
    no_inductor()
    torch._dynamo.reset()
    fn = BREAK_FUNCTIONS[name]
    backend = sub.RecordingBackend()
    out = torch.compile(fn, backend=backend)(_t(x))
    graphs = list(backend.graphs)
    torch._dynamo.reset()
    return {"out": _np(out), "graphs": len(graphs),
            "ops": [sum(1 for n in gm.graph.nodes if n.op == "call_function") for gm in graphs],
            "types": [type(gm).__name__ for gm in graphs]}


def classify(sub, reasons):
    return [str(sub.classify_break(r)) for r in reasons]


def fixed(sub, name, x):
    """torch.compile(fullgraph=True) of the learner's rewrite, with a counting backend."""
    no_inductor()
    torch._dynamo.reset()
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    try:
        out = torch.compile(getattr(sub, name), backend=counting, fullgraph=True)(_t(x))
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    finally:
        torch._dynamo.reset()
    return {"out": _np(out), "graphs": len(graphs), "graph": graph_data(graphs[0]) if len(graphs) == 1 else None}


def _arg_data(a):
    from torch import fx
    if isinstance(a, fx.Node):
        return {"node": a.name}
    if isinstance(a, (list, tuple)):
        return [_arg_data(v) for v in a]
    if isinstance(a, dict):
        return {"kwargs": {str(k): _arg_data(v) for k, v in a.items()}}
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).replace("torch.", "")}
    if isinstance(a, slice):
        return {"slice": [_arg_data(a.start), _arg_data(a.stop), _arg_data(a.step)]}
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    return {"unsupported": type(a).__name__}


def graph_data(gm):
    """One captured FX graph as plain data: the grader rebuilds and runs it itself."""
    nodes = []
    for n in gm.graph.nodes:
        t = n.target
        target = t if isinstance(t, str) else f"{getattr(t, '__module__', '')}:{getattr(t, '__name__', '')}"
        nodes.append({"op": n.op, "name": n.name, "target": target, "args": _arg_data(list(n.args)),
                      "kwargs": _arg_data(dict(n.kwargs))})
    return nodes


# -- functions and models shared by fusion_plan, backend and speed -------------------------------------
class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(12, 24), nn.Linear(24, 6)

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x)))


class TinyBlock(nn.Module):
    """A pre-norm residual MLP block: layer norm, GELU MLP, residual, then a softmax head."""
    def __init__(self):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(16), nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        h = x + self.down(F.gelu(self.up(self.norm(x))))
        return torch.softmax(h, dim=-1)


class TanhNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 10)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 10))

    def forward(self, x):
        h = torch.tanh(self.fc(x)) * self.scale
        return (h - h.mean(dim=-1, keepdim=True)) ** 2


FUNCTIONS = {
    # name: (function, input shapes)
    "chain": (lambda x, y: x * torch.sigmoid(x) + y.sin(), [[6, 10], [6, 10]]),
    "bias_gelu": (lambda x, b: F.gelu(x + b), [[5, 12], [12]]),
    "softmax": (lambda x: torch.softmax(x * 2, dim=-1), [[7, 9]]),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), [[4, 11]]),
    "layernormish": (lambda x: (x - x.mean(-1, keepdim=True)) * torch.rsqrt(((x - x.mean(-1, keepdim=True)) ** 2).mean(-1, keepdim=True) + 1e-5),
                     [[6, 16]]),
    "silu_mlp": (lambda x, w1, w2: (F.silu(x @ w1) * (x @ w1)) @ w2, [[4, 8], [8, 12], [12, 3]]),
    "full_sum": (lambda x, y: ((x - y) ** 2).sum(), [[9, 7], [9, 7]]),
    "col_sum": (lambda x: torch.exp(x).sum(dim=0) * 2 + x.sum(), [[5, 6]]),
    "masked": (lambda x, y: torch.where(x > 0, x * y, -0.5 * y).amax(dim=-1), [[6, 8], [6, 8]]),
    "mm_cycle": (lambda x, w: x.exp() + (x.exp() @ w) * x.cos(), [[6, 6], [6, 6]]),
    "relu_clamp": (lambda x, y: torch.clamp(F.relu(x) - y, -1.0, 1.0) * torch.abs(y), [[3, 4, 5], [4, 5]]),
    "row_bcast": (lambda x, s: (x / s).tanh() + torch.maximum(x, s), [[5, 6], [5, 1]]),
    "sum_dims": (lambda x, y: (x * 2 + y.sin()).sum(dim=(0, 1)), [[4, 5], [4, 5]]),
    "mean_all_keep": (lambda x, y: (x.sigmoid() * y).mean(dim=(-1, -2), keepdim=True) + x, [[3, 6], [3, 6]]),
    "scalar_mix": (lambda x, s: (x * s).tanh() - s, [[4, 5], []]),
    "outer_bcast": (lambda x, y: (x * y).exp() - x, [[5, 1], [1, 4]]),
    "dtype_mix": (lambda x: ((x * 2).double().exp().float() + x).sum(-1), [[4, 6]]),
    "sum_f64": (lambda x: (x + 1).sum(-1, dtype=torch.float64).float() * 2 + x.exp().sum(-1), [[3, 5]]),
    "neg_dim0": (lambda x: x.exp().sum(dim=-2) + x.sin().sum(dim=-2).amax(-1, keepdim=True), [[4, 5]]),
    "amax_partial": (lambda x: (x * 2).amax(dim=(0, 1)) - x.sum(), [[2, 3, 4]]),
    "vec_mean": (lambda x: (x.tanh() * 3).mean(dim=[-1]), [[7]]),
    "cmp_f64": (lambda x: torch.where(x.double() > 0.5, x, x * 2).exp().sum(-1), [[4, 5]]),
    "zero_d_dims": (lambda x, y: (x * 2 + y).sum(0) + (x.exp() - y).amax(-1), [[], []]),
}

def _two_group_cycle(x, y, w):
    """add(c, a) may join c's group or a's group, but not both: a reaches c's group through the mm."""
    a, c = x.sin(), y.cos()
    return c * (a @ w).exp() - (c + a)


FUNCTIONS["two_group_cycle"] = (_two_group_cycle, [[6, 6], [6, 6], [6, 6]])

MODELS = {"tiny_mlp": (TinyMLP, [[4, 12]]), "tiny_block": (TinyBlock, [[3, 16]]), "tanh_net": (TanhNet, [[5, 10]])}


# generated functions: P0 draws a spec {"rows", "cols", "steps": [[op, i, j], ...], "final"} from the grading
# seed; the function runs the steps over the values made so far (x, y of shape (rows, cols), then each step's
# value), with b of shape (cols,) as a bias, and ends with the `final` reduction of the last value.
GEN_OPS = {
    "add": lambda a, b, bias: a + b, "sub": lambda a, b, bias: a - b, "mul": lambda a, b, bias: a * b,
    "div": lambda a, b, bias: a / (b.abs() + 1.0), "maximum": lambda a, b, bias: torch.maximum(a, b),
    "where": lambda a, b, bias: torch.where(a > b, a, b * 0.5), "bias": lambda a, b, bias: a + bias,
    "sigmoid": lambda a, b, bias: torch.sigmoid(a), "tanh": lambda a, b, bias: torch.tanh(a),
    "sin": lambda a, b, bias: a.sin(), "relu": lambda a, b, bias: F.relu(a), "gelu": lambda a, b, bias: F.gelu(a),
    "exp_neg": lambda a, b, bias: torch.exp(-a.abs()), "square": lambda a, b, bias: a * a,
    "center": lambda a, b, bias: a - a.mean(-1, keepdim=True),
    "rownorm": lambda a, b, bias: a * torch.rsqrt((a * a).mean(-1, keepdim=True) + 1e-5),
    "colmax": lambda a, b, bias: a - a.amax(0, keepdim=True),
    "softmax": lambda a, b, bias: torch.softmax(a, dim=-1),
    "mm": lambda a, b, bias: torch.tanh(a @ b.transpose(0, 1)) @ a,
}
GEN_FINAL = {"none": lambda v: v, "sum_last": lambda v: v.sum(-1), "sum_all": lambda v: v.sum(),
             "mean_first": lambda v: v.mean(0), "amax_last": lambda v: v.amax(-1)}


def generated_function(spec):
    steps, final = [tuple(s) for s in spec["steps"]], GEN_FINAL[spec["final"]]

    def generated(x, y, b):
        values = [x, y]
        for op, i, j in steps:
            values.append(GEN_OPS[op](values[i % len(values)], values[j % len(values)], b))
        return final(values[-1])
    return generated


# a max over values its kernel also stores (saved for amax's backward): under -ffast-math gcc computed the
# stored row and the reduced row differently here, and the gradient of x became NaN (a generated case found it)
FUNCTIONS["amax_of_saved"] = (generated_function({
    "rows": 6, "cols": 6, "final": "amax_last",
    "steps": [["rownorm", 1, 1], ["colmax", 0, 0], ["mul", 3, 2], ["sigmoid", 4, 0], ["where", 5, 0], ["softmax", 3, 2],
              ["div", 7, 7], ["div", 8, 2]]}), [[6, 6], [6, 6], [6]])


def make_case(case, seed, spec=None):
    """The callable, its parameters (a dict name -> tensor, may be empty) and its inputs, from a seed
    (case "generated": from a spec P0 drew)."""
    gen = torch.Generator().manual_seed(seed)
    if case == "generated":
        rows, cols = spec["rows"], spec["cols"]
        return generated_function(spec), [torch.randn(s, generator=gen) for s in ([rows, cols], [rows, cols], [cols])]
    if case in MODELS:
        cls, shapes = MODELS[case]
        torch.manual_seed(seed)
        model = cls()
        inputs = [torch.randn(s, generator=gen) for s in shapes]
        return model, inputs
    fn, shapes = FUNCTIONS[case]
    inputs = [torch.randn(s, generator=gen) for s in shapes]
    if case == "row_bcast":
        inputs[1] = inputs[1].abs() + 0.5
    return fn, inputs


def aot_graphs(fn, inputs, decompositions, with_backward=True):
    """The forward (and backward) Core-ATen graphs AOTAutograd produces for fn(*inputs), by trace."""
    import torch._dynamo
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        gm.meta["ipt_inputs"] = []

        def run(*args):
            gm.meta["ipt_inputs"].append([a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args])
            return gm.forward(*args)
        return make_boxed_func(run)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=decompositions)
    args = [t.detach().clone().requires_grad_(with_backward) for t in inputs]
    out = torch.compile(fn, backend=backend, dynamic=False)(*args)
    if with_backward:
        out.sum().backward()
    torch._dynamo.reset()
    return graphs


def warm_p1():
    """Run once in the lab's template, before any grading forks from it (worker._warm): a first torch.compile
    through AOTAutograd with decompositions (forward and backward), a first graph break and a first make_fx pay
    about 0.5 s of one-time set-up, which every part's worker would pay again. This module's own functions on
    fixed inputs, never the learner's; Dynamo is reset after."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    decompositions = core_aten_decompositions()
    try:
        aot_graphs(*make_case("tiny_block", 0), decompositions)
        torch._dynamo.reset()
        torch.compile(gb_print_middle, backend=lambda gm, example_inputs: gm.forward)(torch.linspace(-1, 1, 5))
        fn, shapes = OPS["add"]
        make_fx(fn, decomposition_table=decompositions)(*[torch.ones(s) for s in shapes])
    finally:
        torch._dynamo.reset()


# -- part fusion_plan ------------------------------------------------------------------------------
def _describe(gm):
    return [n.name for n in gm.graph.nodes]


def plan(sub, case, with_backward, spec=None):
    """The learner's plan of the forward (and backward) graph of one function or model."""
    no_inductor()
    fn, inputs = make_case(case, 0, spec)
    graphs = aot_graphs(fn, inputs, sub.DECOMPOSITIONS, with_backward)
    result = []
    for gm in graphs:
        entry = {"nodes": _describe(gm)}
        try:
            entry["pointwise"] = [n.name for n in gm.graph.nodes if sub.is_pointwise(n)]
            entry["reduction"] = [n.name for n in gm.graph.nodes if sub.is_reduction(n)]
            entry["groups"] = [[str(name) for name in g] for g in sub.plan_fusion(gm)]
        except Exception as exc:  # noqa: BLE001
            entry.update(_error(exc))
        result.append(entry)
    return result


# -- part kernels ------------------------------------------------------------------------------------
OPS = {
    # name: (function of tensors, number of tensor inputs, input shapes, domain of the inputs)
    "add": (lambda a, b: a + b, [[5, 7], [5, 7]]), "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=2.5), [[4, 6], [4, 6]]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-0.75), [[5, 4], [5, 4]]),
    "mul_scalar": (lambda a: a * 0.3, [[9]]), "div": (lambda a, b: a / b, [[3, 8], [3, 8]]),
    "neg": (lambda a: -a, [[6, 2]]), "exp": (lambda a: torch.exp(a), [[7, 5]]), "log": (lambda a: torch.log(a), [[8, 3]]),
    "sqrt": (lambda a: torch.sqrt(a), [[10]]), "rsqrt": (lambda a: torch.rsqrt(a), [[4, 4]]),
    "reciprocal": (lambda a: torch.reciprocal(a), [[12]]), "sigmoid": (lambda a: torch.sigmoid(a), [[6, 6]]),
    "tanh": (lambda a: torch.tanh(a), [[5, 5]]), "sin": (lambda a: torch.sin(a), [[33]]), "cos": (lambda a: torch.cos(a), [[3, 11]]),
    "abs": (lambda a: torch.abs(a), [[4, 9]]), "relu": (lambda a: torch.relu(a), [[17]]), "erf": (lambda a: torch.erf(a), [[6, 7]]),
    "pow2": (lambda a: a ** 2, [[8, 2]]), "pow3": (lambda a: a ** 3.0, [[5, 3]]),
    "maximum": (lambda a, b: torch.maximum(a, b), [[6, 4], [6, 4]]), "minimum": (lambda a, b: torch.minimum(a, b), [[6, 4], [6, 4]]),
    "where_gt": (lambda a, b: torch.where(a > b, a, b * 2), [[5, 5], [5, 5]]),
    "where_le_scalar": (lambda a, b: torch.where(a <= 0.25, b, a), [[7, 3], [7, 3]]),
    "eq_ne": (lambda a, b: torch.where(a == b, b * 3, a) + torch.where(a != 0.5, a, b), [[4, 4], [4, 4]]),
    "clamp": (lambda a: torch.clamp(a, -0.5, 0.75), [[9, 2]]), "clamp_min": (lambda a: torch.clamp(a, min=0.1), [[11]]),
    "log1p": (lambda a: torch.log1p(a), [[8]]), "expm1": (lambda a: torch.expm1(a), [[8]]),
    "bias_row": (lambda a, b: (a + b) * b, [[6, 5], [5]]), "bias_col": (lambda a, b: a * b - b, [[6, 5], [6, 1]]),
    "scalar_tensor": (lambda a, b: a * b + 1, [[4, 3], []]), "bias_3d": (lambda a, b: a - b, [[2, 3, 4], [3, 4]]),
    "bcast_middle": (lambda a, b: a + b, [[2, 3, 4], [2, 1, 4]]),
    "sum_last": (lambda a: torch.sigmoid(a).sum(-1), [[6, 9]]), "amax_last": (lambda a: (a * 3 - 10).amax(-1, keepdim=True), [[5, 8]]),
    "mean_last": (lambda a: (a - 1).mean(-1), [[4, 10]]), "sum_all": (lambda a, b: (a * b).sum(), [[7, 13], [7, 13]]),
    # explicit all-dims reductions, however spelled; keepdim; size-0, size-1 and 0-d shapes; reflected ops
    "sum_dims01": (lambda a: (a * 2).sum(dim=(0, 1)), [[4, 5]]),
    "mean_dims_neg": (lambda a: (a + 1).mean(dim=(-1, 0), keepdim=True), [[3, 6]]),
    "amax_all3d": (lambda a: (a * a).amax(dim=(2, 0, 1)), [[2, 3, 4]]),
    "sum_last_keepdim": (lambda a, b: (a - b).sum(dim=1, keepdim=True), [[5, 6], [5, 1]]),
    "mean_last_3d": (lambda a: a.exp().mean(dim=2), [[2, 3, 5]]),
    "sum_empty_rows": (lambda a: (a + 1).sum(-1), [[3, 0]]),
    "mean_one_col": (lambda a: (a * 3).mean(-1), [[4, 1]]),
    "zero_d": (lambda a, b: (a * b).sigmoid() - b, [[], []]),
    "zero_d_sum": (lambda a: (a + 2).sum(), [[]]),
    "size0": (lambda a, b: a * b + 1, [[0, 4], [4]]),
    "outer": (lambda a, b: a * b - a, [[4, 1], [1, 5]]),
    "one_elem_bcast": (lambda a, b: a + b * 2, [[3, 4], [1, 1]]),
    "rsub": (lambda a: 2.0 - a, [[6]]), "rdiv": (lambda a: 3.0 / a, [[7]]),
    "pow_half": (lambda a: a ** 0.5, [[9]]), "clamp_max": (lambda a: torch.clamp(a, max=0.3), [[10]]),
    "ne_ge": (lambda a, b: torch.where(a != b, a, b * 2) + torch.where(a >= 0.0, a, -a), [[3, 5], [3, 5]]),
    "lt_tensor_bool_out": (lambda a, b: a < b, [[4, 6], [6]]),
    "prefix_3d": (lambda a, b: a * b + b, [[2, 3, 4], [2, 1, 1]]),
    # broadcast inputs where the kernel is not a rows x columns nest: a reduction over everything, an empty last dim
    "sum_all_bias": (lambda a, b: (a * b).sum(), [[4, 6], [6]]),
    "mean_all_rowstat": (lambda a, b: (a - b).mean(dim=(0, 1)), [[5, 3], [5, 1]]),
    "size0_rowstat": (lambda a, b: a - b, [[3, 0], [3, 1]]),
    # precision: a long row whose few large terms sit at both ends (a softmax denominator); test_kernels draws its
    # inputs itself (test_long_row_sum_precision), not test_op
    "sum_long_row": (lambda a, b: (a * b).sum(-1), [[2, 1], [1, 1 << 20]]),
}
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal", "log1p", "rdiv", "pow_half"}


_OP_GRAPHS = {}


def op_graph(op, decompositions):
    """The Core-ATen graph of one entry of OPS (traced once per process)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    if (op, id(decompositions)) not in _OP_GRAPHS:
        fn, shapes = OPS[op]
        _OP_GRAPHS[op, id(decompositions)] = make_fx(fn, decomposition_table=decompositions)(*[torch.ones(s) for s in shapes])
    return _OP_GRAPHS[op, id(decompositions)]


def _kernel_data(kernel):
    return {"name": str(getattr(kernel, "name", "")), "source": kernel.source if isinstance(kernel.source, str) else None,
            "inputs": [str(n) for n in kernel.inputs], "outputs": [str(n) for n in kernel.outputs]}


def _op_kernel(sub, op, name):
    """The op's graph and the learner's kernel for the whole of it (all its call_function nodes)."""
    gm = op_graph(op, sub.DECOMPOSITIONS)
    return gm, sub.generate_kernel(gm, [n.name for n in gm.graph.nodes if n.op == "call_function"], name)


def op_kernel(sub, op, arrays, name=None):
    """Generate one kernel for the whole graph of one op (all its call_function nodes) and run it with run_kernel.
    The grader runs the returned source itself; `values` are what the learner's runner gave."""
    no_inductor()
    gm, kernel = _op_kernel(sub, op, name or f"op_{op}")
    data = _kernel_data(kernel)
    by_name = {n.name: torch.from_numpy(np.array(a, dtype=np.float32))
               for n, a in zip([n for n in gm.graph.nodes if n.op == "placeholder"], arrays)}
    outs = sub.run_kernel(kernel, [by_name[str(n)] for n in kernel.inputs])
    data["values"] = [_np(o) if isinstance(o, torch.Tensor) else None for o in outs]
    data["dtypes"] = [str(o.dtype) if isinstance(o, torch.Tensor) else "" for o in outs]
    return data


def op_sources(sub, ops):
    """generate_kernel for the whole graph of each op, as op_kernel makes it, without building or running it:
    per op its kernel as data, or its error. The grader's clean room compiles these ahead in one batch."""
    no_inductor()
    out = []
    for op in ops:
        try:
            out.append(_kernel_data(_op_kernel(sub, op, f"op_{op}")[1]))
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            out.append(_error(exc))
    return out


def build_cache(sub, name, scale, shift):
    """Build one source three times (twice as the same text, once changed); the constants are the grader's."""
    no_inductor()
    source = ("#include <math.h>\n#include <stdint.h>\n"
              f"void {name}(const float* restrict in0, float* restrict out0) {{\n"
              f"  for (int64_t i = 0; i < 16; i++) out0[i] = in0[i] * {float(scale)!r}f + {float(shift)!r}f;\n}}\n")
    counts = [int(sub.build_count())]
    fns = []
    for text in (source, source, source.replace(f"{float(shift)!r}f", f"{float(shift) + 2.0!r}f")):
        fns.append(sub.build(text))
        counts.append(int(sub.build_count()))
    x = torch.arange(16, dtype=torch.float32)
    outs = []
    for fn in (fns[0], fns[2]):
        out = torch.full((16,), float("nan"))
        fn(x.data_ptr(), out.data_ptr())
        outs.append(_np(out))
    return {"counts": counts, "same_object": fns[0] is fns[1], "outs": outs}


def fuse_case(sub, case, spec=None, subsets=None):
    """The learner's fuse_graph on the forward and backward graphs of one case: the kernels it made, as data. With
    `subsets` (P0's groups, one list per graph), fuse_graph(gm, groups) is asked to fuse those groups only."""
    no_inductor()
    fn, inputs = make_case(case, 0, spec)
    graphs = aot_graphs(fn, inputs, sub.DECOMPOSITIONS, True)
    result = []
    for k, gm in enumerate(graphs):
        entry = {"nodes": _describe(gm)}
        try:
            if subsets is None:
                fused, kernels = sub.fuse_graph(gm)
            else:
                fused, kernels = sub.fuse_graph(gm, [[str(m) for m in g] for g in subsets[k]] if k < len(subsets) else [])
            entry["kernels"] = [_kernel_data(k) for k in kernels]
        except Exception as exc:  # noqa: BLE001
            entry.update(_error(exc))
        result.append(entry)
    return result


# -- part pipeline ------------------------------------------------------------------------------------
def pass_counts(sub, case, spec, plans, subsets):
    """worth_fusing of every group of P0's plan of each graph, and count_passes of each graph with P0's whole plan,
    with P0's subset of it and with no group."""
    no_inductor()
    fn, inputs = make_case(case, 0, spec)
    graphs = aot_graphs(fn, inputs, sub.DECOMPOSITIONS, True)
    result = []
    for k, gm in enumerate(graphs):
        entry = {"nodes": _describe(gm)}
        plan, subset = (plans[k], subsets[k]) if k < min(len(plans), len(subsets)) else ([], [])
        try:
            entry["worth"] = [bool(sub.worth_fusing(gm, [str(m) for m in g])) for g in plan]
            entry["passes"] = [int(sub.count_passes(gm, [[str(m) for m in g] for g in groups])) for groups in (plan, subset, [])]
        except Exception as exc:  # noqa: BLE001
            entry.update(_error(exc))
        result.append(entry)
    return result


def backend_mixed_sum(sub, x, w, c):
    """torch.compile(lambda a, b, c: (a * b).sum(-1) + c.sum(-1), backend=fusing_backend) on P0's rows."""
    no_inductor()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(lambda a, b, d: (a * b).sum(-1) + d.sum(-1), backend=sub.fusing_backend, dynamic=False)
        return _np(compiled(_t(x), _t(w), _t(c)))
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    finally:
        torch._dynamo.reset()


def backend_case(sub, case, seed, with_backward=True, spec=None):
    """Compile one function or model with the learner's fusing_backend; outputs, gradients, kernel counts."""
    no_inductor()
    torch._dynamo.reset()
    fn, inputs = make_case(case, seed, spec)
    args = [t.clone().requires_grad_(with_backward) for t in inputs]
    try:
        compiled = torch.compile(fn, backend=sub.fusing_backend, dynamic=False)
        out = compiled(*args)
        grads = {}
        if with_backward:
            params = list(fn.parameters()) if isinstance(fn, nn.Module) else []
            wrt = args + params
            gen = torch.Generator().manual_seed(seed + 1)
            weight = torch.randn(out.shape, generator=gen)
            got = torch.autograd.grad((out * weight).sum(), wrt, allow_unused=True)
            names = [f"input{i}" for i in range(len(args))] + [n for n, _ in fn.named_parameters()] if params else \
                [f"input{i}" for i in range(len(args))]
            grads = {n: _np(g) for n, g in zip(names, got)}
        again = compiled(*make_case(case, seed + 1000, spec)[1])    # a second call, on fresh inputs of the same shapes
    except Exception as exc:  # noqa: BLE001
        torch._dynamo.reset()
        return _error(exc)
    torch._dynamo.reset()
    return {"out": _np(out), "again": _np(again), "grads": grads}


def backend_recompile(sub):
    """The same function at two shapes: Dynamo recompiles, the second shape must be right too."""
    no_inductor()
    torch._dynamo.reset()
    sub.COMPILED_KERNELS.clear()
    compiled = torch.compile(lambda x: torch.tanh(x) * 2 + x.exp(), backend=sub.fusing_backend, dynamic=False)
    outs = []
    try:
        for n in (6, 11):
            x = torch.linspace(-2, 2, n)
            outs.append(_np(compiled(x)))
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    finally:
        torch._dynamo.reset()
    # default settings: the second shape is recompiled with symbolic sizes (automatic dynamic shapes)
    dynamic = torch.compile(lambda x, b: torch.sigmoid(x) * 2 + b, backend=sub.fusing_backend)
    dynamic_outs = []
    try:
        for rows, cols in ((4, 8), (6, 3), (5, 7)):
            x = torch.linspace(-3, 3, rows * cols).reshape(rows, cols)
            dynamic_outs.append(_np(dynamic(x, torch.linspace(-1, 1, cols))))
    except Exception as exc:  # noqa: BLE001
        dynamic_outs = _error(exc)
    finally:
        torch._dynamo.reset()
    # an int argument that changes: recompiled with the int as a SymInt placeholder of the graph
    scaled = torch.compile(lambda x, n: (x * n).sin(), backend=sub.fusing_backend)
    int_outs = []
    try:
        for n in (2, 3, 5):
            int_outs.append(_np(scaled(torch.linspace(-1, 1, 9), n)))
    except Exception as exc:  # noqa: BLE001
        int_outs = _error(exc)
    finally:
        torch._dynamo.reset()
    return {"outs": outs, "dynamic_outs": dynamic_outs, "int_outs": int_outs}


def backend_cancelling_sum(sub, x, w):
    """torch.compile((x * w).sum(-1), backend=fusing_backend) on P0's rows: the output only."""
    no_inductor()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(lambda a, b: (a * b).sum(-1), backend=sub.fusing_backend, dynamic=False)
        return _np(compiled(_t(x), _t(w)))
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    finally:
        torch._dynamo.reset()


# -- part speed --------------------------------------------------------------------------------------
CHAINS = {
    "x*sigmoid(x) + sin(y)": lambda x, y: x * torch.sigmoid(x) + y.sin(),
    "silu(x) * y": lambda x, y: F.silu(x) * y,
    "tanh(x) * exp(-y) + x": lambda x, y: torch.tanh(x) * torch.exp(-y) + x,
    "gelu(x + y)": lambda x, y: F.gelu(x + y),
    "((x - y) ** 2).sum()": lambda x, y: ((x - y) ** 2).sum(),
}
SPEED_N = 1 << 22



def chain_inputs(seed, n=SPEED_N):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen), torch.randn(n, generator=gen)


# -- the clean room: P0's own sandbox (none of the learner's cells loaded) ----------------------------
# The graders hand the C source a learner's code generated to these functions, which compile it with the
# lab's flags beside a harness written here, link it into a separate executable (no Python in it) and run
# it on buffers the grader chose. The kernel values and timings the grader believes come from here.
CLEAN_CC = ["cc", "-O3", "-march=native", "-ffast-math"]
ALLOWED_CALLS = {
    "expf", "logf", "sqrtf", "sinf", "cosf", "tanhf", "erff", "erfcf", "log1pf", "expm1f", "powf", "fmaxf", "fminf",
    "fabsf", "floorf", "ceilf", "roundf", "truncf", "exp2f", "log2f", "log10f", "fmodf", "copysignf", "sinhf", "coshf",
    "atanf", "asinf", "acosf", "atan2f", "hypotf", "cbrtf", "rintf", "nearbyintf", "lrintf",
    "exp", "log", "sqrt", "sin", "cos", "tanh", "erf", "erfc", "log1p", "expm1", "pow", "fmax", "fmin", "fabs", "floor",
    "ceil", "round", "trunc", "exp2", "log2", "log10", "fmod", "copysign", "sinh", "cosh", "atan", "asin", "acos",
    "atan2", "hypot", "cbrt", "rint", "nearbyint",
    "memset", "memcpy", "memmove",
}
_EXE = {}


def _retry_cc(args, cwd, timeout=120):
    """Run the compiler; under load fork can fail with EAGAIN (in Python or inside the driver): retry."""
    import errno
    import subprocess
    import time
    proc = None
    for attempt in range(8):
        try:
            proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ENOMEM) or attempt == 7:
                raise
            time.sleep(0.2 * (attempt + 1))
            continue
        transient = ("Resource temporarily unavailable", "Cannot allocate memory", "cannot fork", "vfork")
        if proc.returncode != 0 and any(t in proc.stderr for t in transient) and attempt < 7:
            time.sleep(0.2 * (attempt + 1))
            continue
        return proc
    return proc


def _symbol_ok(sym):
    base = sym.split("@", 1)[0]
    if base in ALLOWED_CALLS:
        return True
    if base.startswith("_ZGV") and "_" in base[4:] and base[base.index("_", 4) + 1:] in ALLOWED_CALLS:
        return True   # glibc's vector math (libmvec), e.g. _ZGVdN8v_expf
    return base.startswith("__") and base.endswith("_finite") and base[2:-7] in ALLOWED_CALLS


# The harness is two translation units: its main program (below), compiled once per clean room, and a small
# dispatch table generated for each set of kernels (`_dispatch`), so that a check compiles only the learner's
# kernels and the table (the main program alone took 0.2 s of -O3 per executable).
_HARNESS_MAIN = r"""#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void ipt_call(int which, void** p);
#define GUARD 256
static float gen(uint32_t seed, uint32_t i) {
  uint32_t h = i * 2654435761u + seed * 40503u + 12345u;
  h ^= h >> 16; h *= 0x45d9f3bu; h ^= h >> 16; h *= 0x45d9f3bu; h ^= h >> 16;
  return (float)((double)h * (1.0 / 4294967296.0) * 6.0 - 3.0);
}
/* values: prog v <kernel> <infile> <outfile> <n_in> <n_out> <bytes...>
   timing: prog t <kernel> <reps> <seed> <call 0/1> <n_in> <n_out> <floats...> */
int main(int argc, char** argv) {
  int which = atoi(argv[2]);
  if (argv[1][0] == 'v') {
    int n_in = atoi(argv[5]), n_out = atoi(argv[6]), n = n_in + n_out;
    void* p[64]; size_t bytes[64];
    FILE* f = fopen(argv[3], "rb");
    for (int k = 0; k < n; k++) {
      bytes[k] = (size_t)atoll(argv[7 + k]);
      unsigned char* b = malloc(bytes[k] + 2 * GUARD);
      memset(b, 0x7E, bytes[k] + 2 * GUARD);
      p[k] = b + GUARD;
      if (k < n_in && bytes[k] && fread(p[k], 1, bytes[k], f) != bytes[k]) return 3;
    }
    fclose(f);
    ipt_call(which, p);
    FILE* o = fopen(argv[4], "wb");
    for (int k = 0; k < n; k++) {
      unsigned char* b = (unsigned char*)p[k] - GUARD;
      int bad = 0;
      for (size_t g = 0; g < GUARD; g++) bad |= (b[g] != 0x7E) | (b[GUARD + bytes[k] + g] != 0x7E);
      fputc(bad, o);
      if (k >= n_in) fwrite(p[k], 1, bytes[k], o);
    }
    fclose(o);
    return 0;
  }
  int reps = atoi(argv[3]); uint32_t seed = (uint32_t)atoll(argv[4]); int docall = atoi(argv[5]);
  int n_in = atoi(argv[6]), n_out = atoi(argv[7]), n = n_in + n_out;
  void* p[64]; size_t count[64];
  for (int k = 0; k < n; k++) { count[k] = (size_t)atoll(argv[8 + k]); p[k] = calloc(count[k] + 16, sizeof(float)); }
  for (int k = 0; k < n_in; k++) {
    float* x = p[k];
    for (size_t i = 0; i < count[k]; i++) x[i] = gen(seed + 104729u * (uint32_t)k, (uint32_t)i);
  }
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < n_in; k++) {   /* fresh inputs each round: a seeded sparse rewrite */
      float* x = p[k];
      for (size_t i = (size_t)((r * 13 + k * 7) % 61); i < count[k]; i += 61)
        x[i] = gen(seed + 7919u * (uint32_t)(r + 1) + 104729u * (uint32_t)k, (uint32_t)i);
    }
    for (int k = n_in; k < n; k++) memset(p[k], 0, count[k] * sizeof(float));
    if (docall) ipt_call(which, p);
    for (int k = n_in; k < n; k++) {
      double s = 0.0; float* y = p[k];
      for (size_t i = 0; i < count[k]; i++) s += y[i];
      printf("%.17g %.9g\n", s, (double)y[count[k] / 3]);
    }
  }
  return 0;
}
"""


def _dispatch(kernels):
    lines = [f"extern void {k['name']}({', '.join(['void*'] * (k['n_in'] + k['n_out']))});" for k in kernels]
    lines.append("void ipt_call(int which, void** p) {\n  switch (which) {")
    for j, k in enumerate(kernels):
        args = ", ".join(f"p[{a}]" for a in range(k["n_in"] + k["n_out"]))
        lines.append(f"    case {j}: {k['name']}({args}); break;")
    lines.append("  }\n}")
    return "\n".join(lines) + "\n"


_MAIN_OBJ = {}


def _harness_main():
    """The harness's main program compiled (once per process) with the lab's flags: the object file's path."""
    import tempfile
    if "path" not in _MAIN_OBJ:
        folder = tempfile.mkdtemp(prefix="clean-main-")
        with open(os.path.join(folder, "main.c"), "w") as f:
            f.write(_HARNESS_MAIN)
        proc = _retry_cc([*CLEAN_CC, "-c", "main.c"], folder)
        if proc.returncode != 0:
            raise RuntimeError(f"the grader's harness did not compile: {proc.stderr[-1500:]}")
        _MAIN_OBJ["path"] = os.path.join(folder, "main.o")
    return _MAIN_OBJ["path"]


def _key(kernel):
    """A kernel spec's whole text: what a compiled kernel is found by."""
    return (kernel["name"], kernel["source"], int(kernel["n_in"]), int(kernel["n_out"]))


def _compile(kernels, folder, timeout=120):
    """Each kernel source as its own translation unit kJ.c, all in one compiler run (the driver goes on past a
    source that does not compile): the compiler's run, and the indices whose object file was made."""
    for j, k in enumerate(kernels):
        with open(os.path.join(folder, f"k{j}.c"), "w") as f:
            f.write(k["source"])
    proc = _retry_cc([*CLEAN_CC, "-c", *[f"k{j}.c" for j in range(len(kernels))]], folder, timeout)
    return proc, [j for j in range(len(kernels)) if os.path.exists(os.path.join(folder, f"k{j}.o"))]


_SYMBOL = re.compile(r"^\s*\d+:\s+[0-9a-fA-F]+\s+\S+\s+\S+\s+(\S+)\s+\S+\s+(?:\[[^\]]*\]\s+)?(\S+)(?:\s+(\S+))?\s*$")


def _symbol_problems(kernels, folder, made):
    """For each index in `made`: why kernel kJ.o cannot be linked into the harness (None when it can): it must
    define exactly one global symbol, its function, and refer to no symbol but math functions. One `readelf -sW`
    lists every object's symbol table (a tenth of the CPU of `nm`, which loads binutils' plugins first); every
    symbol bound GLOBAL, WEAK or UNIQUE counts, in section UND as a call, elsewhere as a definition."""
    import subprocess
    listing = subprocess.run(["readelf", "-sW", *[f"k{j}.o" for j in made]], cwd=folder,
                             capture_output=True, text=True, timeout=60)
    symbols = {f"k{j}.o": (set(), set()) for j in made}   # object -> (defined, undefined)
    obj = f"k{made[0]}.o" if len(made) == 1 else None      # with several files, "File: kJ.o" heads each table
    for line in listing.stdout.splitlines():
        if line.startswith("File: "):
            obj = line[6:].strip()
            continue
        match = _SYMBOL.match(line)
        if obj not in symbols or not match or match.group(1) == "LOCAL" or not match.group(3):
            continue
        _, section, name = match.groups()
        symbols[obj][1 if section == "UND" else 0].add(name)
    problems = {}
    for j in made:
        k, (defined, undefined) = kernels[j], symbols[f"k{j}.o"]
        bad = sorted(s for s in undefined if not _symbol_ok(s))
        problems[j] = None
        if listing.returncode != 0 or defined != {k["name"]}:
            problems[j] = (f"kernel {k['name']}: the source must define exactly one global function, {k['name']}; "
                           f"it defines {sorted(defined)[:6]}")
        elif bad:
            problems[j] = f"kernel {k['name']} calls {bad[:4]}: a kernel may call only math functions (expf, sinf, ...)"
    return problems


def _link(kernels, folder, objs, timeout=120):
    """The harness executable: its main program, the dispatch table of `kernels` (case j calls kernels[j]) and
    the kernels' object files."""
    with open(os.path.join(folder, "dispatch.c"), "w") as f:
        f.write(_dispatch(kernels))
    return _retry_cc([*CLEAN_CC, "dispatch.c", _harness_main(), *objs, "-o", "prog", "-lm"], folder, timeout)


_PREPARED = {}   # _key of a kernel compiled ahead (c_prepare) -> (its executable, the kernel's case in it)


def _executable(kernels):
    """Compile each kernel source as its own translation unit, check its symbols, link with the harness. A set
    whose kernels were all compiled ahead into one executable (c_prepare) uses it; "index" maps each kernel of
    the set to its case in the executable's dispatch table."""
    import hashlib
    import tempfile
    ahead = [_PREPARED.get(_key(k)) for k in kernels]
    if ahead and all(ahead) and len({id(exe) for exe, _ in ahead}) == 1:
        return {**ahead[0][0], "index": [case for _, case in ahead]}
    key = hashlib.sha256(repr([_key(k) for k in kernels]).encode()).hexdigest()
    if key in _EXE:
        return _EXE[key]
    folder = tempfile.mkdtemp(prefix="clean-")
    proc, made = _compile(kernels, folder)
    if proc.returncode != 0 or len(made) != len(kernels):
        _EXE[key] = {"error": "compile", "message": proc.stderr[-1500:]}
        return _EXE[key]
    problem = next((p for p in _symbol_problems(kernels, folder, made).values() if p), None)
    if problem:
        _EXE[key] = {"error": "symbols", "message": problem}
        return _EXE[key]
    proc = _link(kernels, folder, [os.path.join(folder, f"k{j}.o") for j in made])
    if proc.returncode != 0:
        _EXE[key] = {"error": "link", "message": proc.stderr[-1500:]}
        return _EXE[key]
    _EXE[key] = {"path": os.path.join(folder, "prog"), "folder": folder, "index": list(range(len(kernels)))}
    return _EXE[key]


def c_prepare(mod, kernels, timeout=45):
    """Compile ahead, as one batch, kernels the grader will ask for one at a time (part `kernels`: every op's
    kernel). Each source is still its own translation unit compiled with the lab's flags and checked alone; one
    compiler run, one symbol listing and one link serve them all, instead of one of each per kernel. Only a cache: c_values
    finds a kernel here by its whole text (name, source, buffer counts) and compiles any other text on its own.
    A kernel that does not compile or fails the symbol check is left out here; its own check reports why."""
    import tempfile
    batch, names = [], set()
    for k in kernels:
        if _key(k) not in _PREPARED and k["name"] not in names:
            batch.append(k)
            names.add(k["name"])
    if not batch:
        return {"prepared": 0}
    folder = tempfile.mkdtemp(prefix="clean-ahead-")
    _, made = _compile(batch, folder, timeout)
    problems = _symbol_problems(batch, folder, made) if made else {}
    good = [j for j in made if problems[j] is None]
    if not good or _link([batch[j] for j in good], folder, [os.path.join(folder, f"k{j}.o") for j in good],
                         timeout).returncode != 0:
        return {"prepared": 0}
    exe = {"path": os.path.join(folder, "prog"), "folder": folder}
    for case, j in enumerate(good):
        _PREPARED[_key(batch[j])] = (exe, case)
    return {"prepared": len(good)}


def _pin():
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError):
        pass


def c_values(mod, kernels, data):
    """Run kernel j of `kernels` on the input bytes data[j] (inputs concatenated); per kernel the output bytes
    and which buffers were written out of bounds. Runs in the clean room."""
    import subprocess
    exe = _executable(kernels)
    if "error" in exe:
        return exe
    results = []
    for j, (k, blob) in enumerate(zip(kernels, data)):
        inp, out = os.path.join(exe["folder"], f"in{j}"), os.path.join(exe["folder"], f"out{j}")
        np.asarray(blob, dtype=np.uint8).tofile(inp)
        sizes = [str(int(b)) for b in list(k["in_bytes"]) + list(k["out_bytes"])]
        try:
            proc = subprocess.run([exe["path"], "v", str(exe["index"][j]), inp, out, str(k["n_in"]), str(k["n_out"]), *sizes],
                                  capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            results.append({"error": "timeout"})
            continue
        if proc.returncode != 0:
            results.append({"error": "crash", "code": int(proc.returncode)})
            continue
        raw = np.fromfile(out, dtype=np.uint8)
        pos, outs, overflow = 0, [], []
        for b_index, b in enumerate(list(k["in_bytes"]) + list(k["out_bytes"])):
            overflow.append(int(raw[pos]))
            pos += 1
            if b_index >= k["n_in"]:
                outs.append(raw[pos:pos + int(b)].copy())
                pos += int(b)
        results.append({"outputs": outs, "overflow": overflow})
    return {"results": results}


def c_speed(mod, kernel, counts, reps, seed, docall):
    """CPU seconds (of the harness process, from the OS) for `reps` rounds of fresh inputs, with or without the
    kernel call, and the checksum of every output of every round."""
    import subprocess
    exe = _executable([kernel])
    if "error" in exe:
        return exe
    _pin()
    out_path = os.path.join(exe["folder"], f"speed-{seed}-{docall}.txt")
    with open(out_path, "w") as out:
        p = subprocess.Popen([exe["path"], "t", str(exe["index"][0]), str(int(reps)), str(int(seed)), str(int(docall)), str(kernel["n_in"]),
                              str(kernel["n_out"]), *[str(int(c)) for c in counts]], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = 0
    if status != 0:
        return {"error": "crash", "code": int(status)}
    with open(out_path) as f:
        rows = [line.split() for line in f.read().splitlines()]
    return {"cpu": usage.ru_utime + usage.ru_stime, "sums": [float(r[0]) for r in rows], "samples": [float(r[1]) for r in rows]}


def hash_inputs(seed32, count, start=0, step=1):
    """The harness's inputs: element i of the array of `count` (only i = start, start + step, ... computed)."""
    i = np.arange(start, count, step, dtype=np.uint32)
    with np.errstate(over="ignore"):
        h = i * np.uint32(2654435761) + np.uint32(seed32 * 40503 & 0xFFFFFFFF) + np.uint32(12345)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x45d9f3b)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x45d9f3b)
        h ^= h >> np.uint32(16)
    return (h.astype(np.float64) * (1.0 / 4294967296.0) * 6.0 - 3.0).astype(np.float32)


def round_inputs(seed, rounds, n_in, count):
    """numpy twin of the harness's inputs: yields the inputs of each round (the same arrays, updated in place)."""
    xs = [hash_inputs((seed + 104729 * k) & 0xFFFFFFFF, count) for k in range(n_in)]
    for r in range(rounds):
        for k in range(n_in):
            start = (r * 13 + k * 7) % 61
            xs[k][start::61] = hash_inputs((seed + 7919 * (r + 1) + 104729 * k) & 0xFFFFFFFF, count, start, 61)
        yield xs


def eager_speed(mod, chain, count, reps, seed, order):
    """CPU seconds of eager PyTorch (one thread, one CPU) on the same fresh inputs as c_speed; clean room."""
    import time
    _pin()
    torch.set_num_threads(1)
    fn = CHAINS[chain]
    total = 0.0
    for xs in round_inputs(int(seed), int(reps), 2, int(count)):
        x, y = (torch.from_numpy(xs[int(k)]) for k in order)
        start = time.process_time()
        fn(x, y)
        total += time.process_time() - start
    return {"cpu": total}


def speed_kernel(sub, chain):
    """The learner's plan and kernel for one speed chain's forward graph at the timed size (traced with fake
    tensors): the grader compiles and times the kernel itself."""
    no_inductor()
    from torch.fx.experimental.proxy_tensor import make_fx
    x = torch.empty(SPEED_N)
    gm = make_fx(CHAINS[chain], decomposition_table=sub.DECOMPOSITIONS, tracing_mode="fake")(x, x.clone())
    groups = [[str(m) for m in g] for g in sub.plan_fusion(gm)]
    kernels = [_kernel_data(sub.generate_kernel(gm, g, f"speed_{k}")) for k, g in enumerate(groups)]
    return {"nodes": _describe(gm), "groups": groups, "kernels": kernels}
