"""lab07 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed. Everything crosses as plain data (ints, strings, lists, numpy arrays). The trusted side
(P0) imports this module too, for the function and model definitions (the same source on both sides) and
for `aot_graphs`, which it runs with its own reference planner. So this module has no side effects at import.
"""
import math
import os
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
    return {"out": _np(out), "graphs": len(graphs)}


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
    "col_sum": (lambda x: torch.exp(x).sum(dim=0) * 2, [[5, 6]]),
    "masked": (lambda x, y: torch.where(x > 0, x * y, -0.5 * y).amax(dim=-1), [[6, 8], [6, 8]]),
    "mm_cycle": (lambda x, w: x.exp() + (x.exp() @ w) * x.cos(), [[6, 6], [6, 6]]),
    "relu_clamp": (lambda x, y: torch.clamp(F.relu(x) - y, -1.0, 1.0) * torch.abs(y), [[3, 4, 5], [4, 5]]),
    "row_bcast": (lambda x, s: (x / s).tanh() + torch.maximum(x, s), [[5, 6], [5, 1]]),
}

MODELS = {"tiny_mlp": (TinyMLP, [[4, 12]]), "tiny_block": (TinyBlock, [[3, 16]]), "tanh_net": (TanhNet, [[5, 10]])}


def make_case(case, seed):
    """The callable, its parameters (a dict name -> tensor, may be empty) and its inputs, from a seed."""
    gen = torch.Generator().manual_seed(seed)
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
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=decompositions)
    args = [t.detach().clone().requires_grad_(with_backward) for t in inputs]
    out = torch.compile(fn, backend=backend, dynamic=False)(*args)
    if with_backward:
        out.sum().backward()
    torch._dynamo.reset()
    return graphs


# -- part fusion_plan ------------------------------------------------------------------------------
def _describe(gm):
    return [n.name for n in gm.graph.nodes]


def plan(sub, case, with_backward):
    """The learner's plan of the forward (and backward) graph of one function or model."""
    no_inductor()
    fn, inputs = make_case(case, 0)
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
}
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal", "log1p"}


_OP_GRAPHS = {}


def op_graph(op, decompositions):
    """The Core-ATen graph of one entry of OPS (traced once per process)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    if (op, id(decompositions)) not in _OP_GRAPHS:
        fn, shapes = OPS[op]
        _OP_GRAPHS[op, id(decompositions)] = make_fx(fn, decomposition_table=decompositions)(*[torch.ones(s) for s in shapes])
    return _OP_GRAPHS[op, id(decompositions)]


def op_kernel(sub, op, arrays, name=None):
    """Generate, build and run one kernel for the whole graph of one op (all its call_function nodes)."""
    no_inductor()
    gm = op_graph(op, sub.DECOMPOSITIONS)
    group = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    before = int(sub.build_count())
    kernel = sub.generate_kernel(gm, group, name or f"op_{op}")
    outs = sub.run_kernel(kernel, [torch.from_numpy(np.array(a, dtype=np.float32)) for a in arrays])
    names = [str(n) for n in kernel.outputs]
    return {"outputs": names, "values": {n: _np(o) for n, o in zip(names, outs)},
            "dtypes": {n: str(o.dtype) for n, o in zip(names, outs)}, "built": int(sub.build_count()) - before,
            "source_is_str": isinstance(kernel.source, str)}


def build_cache(sub, name):
    """Build one source three times (twice as the same text, once changed): cc runs twice."""
    no_inductor()
    source = ("#include <math.h>\n#include <stdint.h>\n"
              f"void {name}(const float* restrict in0, float* restrict out0) {{\n"
              "  for (int64_t i = 0; i < 16; i++) out0[i] = in0[i] * 2.0f + 1.0f;\n}\n")
    counts = [int(sub.build_count())]
    fns = []
    for text in (source, source, source.replace("1.0f", "3.0f")):
        fns.append(sub.build(text))
        counts.append(int(sub.build_count()))
    x = torch.arange(16, dtype=torch.float32)
    outs = []
    for fn in (fns[0], fns[2]):
        out = torch.empty(16)
        fn(x.data_ptr(), out.data_ptr())
        outs.append(_np(out))
    return {"counts": counts, "same_object": fns[0] is fns[1], "outs": outs}


# -- part pipeline ------------------------------------------------------------------------------------
def backend_case(sub, case, seed, with_backward=True):
    """Compile one function or model with the learner's fusing_backend; outputs, gradients, kernel counts."""
    no_inductor()
    torch._dynamo.reset()
    sub.COMPILED_KERNELS.clear()
    fn, inputs = make_case(case, seed)
    args = [t.clone().requires_grad_(with_backward) for t in inputs]
    before = int(sub.build_count())
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
        again = compiled(*args)
    except Exception as exc:  # noqa: BLE001
        torch._dynamo.reset()
        return _error(exc)
    torch._dynamo.reset()
    return {"out": _np(out), "again": _np(again), "grads": grads, "kernels": [int(k) for k in sub.COMPILED_KERNELS],
            "built": int(sub.build_count()) - before}


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
    return {"outs": outs}


# -- part speed --------------------------------------------------------------------------------------
CHAINS = {
    "x*sigmoid(x) + sin(y)": lambda x, y: x * torch.sigmoid(x) + y.sin(),
    "silu(x) * y": lambda x, y: F.silu(x) * y,
    "tanh(x) * exp(-y) + x": lambda x, y: torch.tanh(x) * torch.exp(-y) + x,
    "gelu(x + y)": lambda x, y: F.gelu(x + y),
    "((x - y) ** 2).sum()": lambda x, y: ((x - y) ** 2).sum(),
}
SPEED_N = 1 << 22
_STATE = {}


def chain_inputs(seed, n=SPEED_N):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen), torch.randn(n, generator=gen)


def speed_setup(sub, chain, seed):
    """Pin to one CPU, one thread; compile the chain with the learner's backend and run it once."""
    no_inductor()
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError):
        pass
    torch.set_num_threads(1)
    torch._dynamo.reset()
    sub.COMPILED_KERNELS.clear()
    x, y = chain_inputs(seed)
    compiled = torch.compile(CHAINS[chain], backend=sub.fusing_backend, dynamic=False)
    out = compiled(x, y)
    compiled(x, y)
    _STATE.update(compiled=compiled, x=x, y=y)
    flat = out.detach().reshape(-1)
    return {"sample": _np(flat[::4099]), "shape": list(out.shape), "kernels": [int(k) for k in sub.COMPILED_KERNELS],
            "built": int(sub.build_count()), "checksum": float(flat.double().sum())}


def speed_run(sub, k):
    compiled, x, y = _STATE["compiled"], _STATE["x"], _STATE["y"]
    for _ in range(int(k)):
        compiled(x, y)
    return None
