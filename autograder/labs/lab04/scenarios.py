"""lab04 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed in this lab. Everything crosses as plain data (ints, strings, lists, numpy arrays).
The trusted side (P0) imports this module too: for the mini dispatcher it runs the *same* scenario
functions against its own reference model (autograder/labs/lab04/oracle.py), and for the real-torch
parts it shares the model builders. So this module has no side effects at import.
"""
import copy
import threading

import numpy as np
import torch
from torch import nn


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:300]}


def _np(t):
    return None if t is None else t.detach().numpy().copy()


# -- part keysets ---------------------------------------------------------------------------------
def keyset_algebra(sub, keys_a, keys_b, key):
    K, KS = sub.DispatchKey, sub.DispatchKeySet
    a, b = KS([K(k) for k in keys_a]), KS([K(k) for k in keys_b])
    k = K(key)
    return {
        "a": a.bits, "b": b.bits, "or": (a | b).bits, "and": (a & b).bits, "sub": (a - b).bits,
        "has": bool(a.has(k)), "add": a.add(k).bits, "remove": a.remove(k).bits,
        "add_keeps_a": a.bits == KS([K(x) for x in keys_a]).bits,
        "highest": int(a.highest()), "below": a.below(k).bits,
        "iter": [int(x) for x in a], "len": len(a), "bool": bool(a),
        "eq_self": a == KS(list(reversed([K(x) for x in keys_a]))), "eq_b": a == b,
        "hash_eq": hash(a) == hash(KS.from_bits(a.bits)), "from_bits": KS.from_bits(a.bits).bits,
    }


def tls_keyset(sub, tensors, guards, plain_args=(3, "x", None)):
    """compute_keyset for MiniTensors with `tensors` keys (a nested list = a Tensor[] argument),
    inside the guards [["include"|"exclude", [keys]], ...] entered in order."""
    K = sub.DispatchKey

    def make(spec):
        if spec and isinstance(spec[0], list):
            return [sub.MiniTensor(0.0, [K(k) for k in s]) for s in spec]
        return sub.MiniTensor(0.0, [K(k) for k in spec])

    args = [make(s) for s in tensors] + list(plain_args)
    result = {"before": sub.compute_keyset(args).bits, "local_before": [s.bits for s in sub.local_keysets()]}
    managers = [(sub.IncludeKeys if kind == "include" else sub.ExcludeKeys)(*[K(k) for k in keys]) for kind, keys in guards]
    seen = {}

    def other_thread():
        try:
            seen["bits"] = sub.compute_keyset(args).bits
        except Exception as exc:  # noqa: BLE001
            seen["error"] = type(exc).__name__

    inside = []
    for m in managers:
        m.__enter__()
        inside.append(sub.compute_keyset(args).bits)
    result["inside"] = inside
    result["local_inside"] = [s.bits for s in sub.local_keysets()]
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    result["other_thread"] = seen.get("bits", seen.get("error"))
    unwound = []
    for m in reversed(managers):
        m.__exit__(None, None, None)
        unwound.append(sub.compute_keyset(args).bits)
    result["unwound"] = unwound
    # an exception inside a guard must still restore the state
    if managers:
        kind, keys = guards[-1]
        try:
            with (sub.IncludeKeys if kind == "include" else sub.ExcludeKeys)(*[K(k) for k in keys]):
                raise ValueError("boom")
        except ValueError:
            pass
    result["after_error"] = sub.compute_keyset(args).bits
    result["local_after"] = [s.bits for s in sub.local_keysets()]
    return result


# -- part dispatch --------------------------------------------------------------------------------
def schema_parse(sub, text):
    try:
        s = sub.parse_schema(text)
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    return {"name": s.name, "returns": list(s.returns),
            "arguments": [[a.name, a.type, a.default, bool(a.has_default), bool(a.kwarg_only)] for a in s.arguments]}


def schema_bind(sub, text, args, kwargs):
    s = sub.parse_schema(text)
    try:
        return {"bound": list(sub.bind(s, list(args), dict(kwargs)))}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


TABLE_SCHEMAS = {
    0: "ipt::op(Tensor self, Tensor[] others, *, int n=3) -> ()",
    1: "ipt::op(Tensor self, Tensor[] others, *, int n=3) -> Tensor",
    2: "ipt::op(Tensor self, Tensor[] others, *, int n=3) -> (Tensor, Tensor)",
}


def dispatch_table(sub, table):
    """Build a dispatcher from a key/kernel table, call one op, report what ran.

    table: tensors [[keys] of self, [[keys], ...] of others], include, exclude, returns (0/1/2),
    kernels {key: "kernel"|"fallthrough"|"redispatch"}, fallbacks {key: "boxed"|"fallthrough"|"boxed_redispatch"}.
    Every kernel logs "<kind>:<key name>:<keyset bits it got>:<number of arguments>".
    """
    K = sub.DispatchKey
    d = sub.Dispatcher()
    n_ret = table["returns"]
    op_name = "ipt::op"
    d.define(TABLE_SCHEMAS[n_ret])
    log = []

    def result_for(key):
        if n_ret == 0:
            return None
        if n_ret == 1:
            return f"out@{key.name}"
        return (f"out0@{key.name}", f"out1@{key.name}")

    def make_kernel(key, kind):
        def kernel(keyset, *args):
            log.append(f"{kind}:{key.name}:{keyset.bits}:{len(args)}:{args[2]}")
            if kind == "redispatch":
                return d.redispatch(op_name, keyset.below(key), *args)
            return result_for(key)
        return kernel

    def make_boxed(key, kind):
        def boxed(op, keyset, stack):
            log.append(f"{kind}:{key.name}:{keyset.bits}:{len(stack)}:{stack[2]}:{op.name}")
            if kind == "boxed_redispatch":
                out = d.redispatch(op.name, keyset.below(key), *stack)
            else:
                out = result_for(key)
            stack[:] = [] if n_ret == 0 else [out] if n_ret == 1 else list(out)
        return boxed

    for key, kind in table["kernels"].items():
        key = K(int(key))
        d.impl(op_name, key, sub.FALLTHROUGH if kind == "fallthrough" else make_kernel(key, kind))
    for key, kind in table["fallbacks"].items():
        key = K(int(key))
        d.fallback(key, sub.FALLTHROUGH if kind == "fallthrough" else make_boxed(key, kind))
    self_t = sub.MiniTensor(1.0, [K(k) for k in table["tensors"][0]])
    others = [sub.MiniTensor(1.0, [K(k) for k in ks]) for ks in table["tensors"][1]]
    guards = [sub.IncludeKeys(*[K(k) for k in table["include"]]), sub.ExcludeKeys(*[K(k) for k in table["exclude"]])]
    out = {"log": log}
    for g in guards:
        g.__enter__()
    try:
        res = d.call(op_name, self_t, others, **({"n": table["n"]} if "n" in table else {}))
        out["result"] = list(res) if isinstance(res, tuple) else res
        out["result_type"] = type(res).__name__
    except Exception as exc:  # noqa: BLE001
        out.update(_error(exc))
        out["message"] = out["message"][:200]
    finally:
        for g in reversed(guards):
            g.__exit__(None, None, None)
    return out


def registry_errors(sub):
    """define twice, impl on an unknown op."""
    d = sub.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    out = {}
    try:
        d.define("ipt::f(Tensor self) -> Tensor")
        out["define_twice"] = None
    except Exception as exc:  # noqa: BLE001
        out["define_twice"] = type(exc).__name__
    try:
        d.impl("ipt::nope", sub.DispatchKey.CPU, lambda ks, x: x)
        out["impl_unknown"] = None
    except Exception as exc:  # noqa: BLE001
        out["impl_unknown"] = type(exc).__name__
    return out


# -- part redispatch ------------------------------------------------------------------------------
PROGRAM_OPS = {
    "add": "ipt::add(Tensor self, Tensor other, *, float alpha=1.0) -> Tensor",
    "mul": "ipt::mul(Tensor self, Tensor other) -> Tensor",
    "square": "ipt::square(Tensor self) -> Tensor",                  # CPU kernel calls ipt::mul
    "axpy": "ipt::axpy(Tensor x, Tensor y, float a) -> Tensor",       # CPU kernel calls mul and add
    "split2": "ipt::split2(Tensor self) -> (Tensor, Tensor)",
    "stack_sum": "ipt::stack_sum(Tensor[] xs) -> Tensor",
}


def autograd_program(sub, tensors, program, traced_ops=None):
    """tensors: [[keys, requires_grad, value]]; program: [[op, [input indices], kwargs]].
    CPU kernels compute floats; autograd kernels and the tracing fallback are the learner's."""
    K = sub.DispatchKey
    d, tape, trace = sub.Dispatcher(), [], []
    for schema in PROGRAM_OPS.values():
        d.define(schema)

    def like(value, *inputs):
        keys = sub.DispatchKeySet()
        for t in inputs:
            keys = keys | t.key_set
        return sub.MiniTensor(value, list(keys))

    cpu = {
        "add": lambda ks, x, y, alpha: like(x.value + alpha * y.value, x, y),
        "mul": lambda ks, x, y: like(x.value * y.value, x, y),
        "square": lambda ks, x: d.call("ipt::mul", x, x),
        "axpy": lambda ks, x, y, a: d.call("ipt::add", d.call("ipt::mul", x, like(a)), y),
        "split2": lambda ks, x: (like(x.value / 2, x), like(x.value / 2, x)),
        "stack_sum": lambda ks, xs: like(sum(x.value for x in xs), *xs),
    }
    for name, fn in cpu.items():
        d.impl(f"ipt::{name}", K.CPU, fn)
        d.impl(f"ipt::{name}", K.AutogradCPU, sub.make_autograd_kernel(d, f"ipt::{name}", tape))
    d.fallback(K.ADInplaceOrView, sub.FALLTHROUGH)
    d.fallback(K.Tracer, sub.make_tracing_fallback(d, trace))
    values = [sub.MiniTensor(float(v), [K(k) for k in keys], requires_grad=bool(rg)) for keys, rg, v in tensors]
    ids = {}

    def tid(t):
        return ids.setdefault(id(t), len(ids))

    for t in values:
        tid(t)
    steps = []
    for name, idx, kwargs in program:
        if name == "stack_sum":
            args = [[values[i] for i in idx]]
        elif name == "axpy":
            args = [values[idx[0]], values[idx[1]], 0.5]
        else:
            args = [values[i] for i in idx]
        out = d.call(f"ipt::{name}", *args, **kwargs)
        outs = list(out) if isinstance(out, tuple) else [out]
        steps.append({"returned_tuple": isinstance(out, tuple)})
        values.extend(outs)
    all_ids = [tid(t) for t in values]
    return {
        "values": [t.value for t in values],
        "keys": [t.key_set.bits for t in values],
        "requires_grad": [bool(t.requires_grad) for t in values],
        "grad_fn": [None if t.grad_fn is None else t.grad_fn.op for t in values],
        "tape": [[n.op, [tid(t) for t in n.inputs]] for n in tape],
        "grad_fn_is_tape": [t.grad_fn is None or any(t.grad_fn is n for n in tape) for t in values],
        "trace": list(trace), "steps": steps, "ids": all_ids,
        "tls_after": [s.bits for s in sub.local_keysets()],
    }


# -- part custom_op ---------------------------------------------------------------------------------
def softplus_eager(sub, x, beta, gout, v):
    xt = torch.from_numpy(np.array(x, copy=True)).requires_grad_()
    y = sub.scaled_softplus(xt, beta)
    out = {"out": _np(y), "dtype": str(y.dtype), "op": str(torch.ops.ipt.scaled_softplus.default),
           "aliases_input": y.untyped_storage().data_ptr() == xt.untyped_storage().data_ptr(),
           "grad_fn": type(y.grad_fn).__name__ if y.grad_fn is not None else None}
    (g,) = torch.autograd.grad(y, xt, torch.from_numpy(gout), create_graph=True)
    out["grad"] = _np(g)
    try:
        (h,) = torch.autograd.grad((g * torch.from_numpy(v)).sum(), xt)
        out["hvp"] = _np(h)
    except Exception as exc:  # noqa: BLE001
        out["hvp_error"] = _error(exc)
    return out


def softplus_fake(sub, shape, dtype, beta):
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with FakeTensorMode():
            x = torch.empty(shape, dtype=getattr(torch, dtype))
            y = torch.ops.ipt.scaled_softplus.default(x, beta)
        meta = torch.ops.ipt.scaled_softplus.default(torch.empty(shape, dtype=getattr(torch, dtype), device="meta"), beta)
        return {"shape": list(y.shape), "dtype": str(y.dtype), "meta_shape": list(meta.shape), "meta_device": meta.device.type}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


def softplus_opcheck(sub, x, beta, requires_grad=True):
    xt = torch.from_numpy(np.array(x, copy=True)).requires_grad_(requires_grad)
    try:
        return {"results": dict(torch.library.opcheck(sub.scaled_softplus, (xt, beta)))}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


def softplus_compile(sub, x, beta, with_backward=False):
    """torch.compile(fullgraph=True) of a function around the op, with a counting backend."""
    import torch._dynamo
    torch._dynamo.reset()
    graphs, targets = [], []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def f(t):
        return sub.scaled_softplus(t * 2, beta).sin() + t

    xt = torch.from_numpy(np.array(x, copy=True)).requires_grad_(with_backward)
    try:
        if with_backward:
            from torch._dynamo.backends.common import aot_autograd
            from functorch.compile import make_boxed_func

            def inner(gm, ex):
                targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
                graphs.append(gm)
                return make_boxed_func(gm.forward)
            compiled = torch.compile(f, backend=aot_autograd(fw_compiler=inner, bw_compiler=inner), fullgraph=True)
            y = compiled(xt)
            (g,) = torch.autograd.grad(y.sum(), xt)
            return {"out": _np(y), "grad": _np(g), "graphs": len(graphs), "targets": targets}
        compiled = torch.compile(f, backend=counting_backend, fullgraph=True)
        y = compiled(xt)
        return {"out": _np(y), "graphs": len(graphs), "targets": targets}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


# -- part logging_mode -------------------------------------------------------------------------------
def build_model(name, seed):
    torch.manual_seed(seed)
    if name == "mlp":
        return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3)), torch.randn(4, 5)
    if name == "conv":
        return nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 2)), torch.randn(2, 2, 6, 6)
    if name == "norm":
        return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.0), nn.Linear(8, 1)), torch.randn(3, 6)
    if name == "tanh_inplace":
        return nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Tanh(), nn.Linear(4, 2, bias=False)), torch.randn(3, 4)
    raise ValueError(name)


def log_step(sub, name, seed):
    model, x = build_model(name, seed)
    ops = sub.log_training_step(model, x)
    return {"ops": [str(o) for o in ops], "grads": {n: _np(p.grad) for n, p in model.named_parameters()}}


def mode_direct(sub, a, b):
    """Use the learner's LoggingMode directly: results must be real."""
    at, bt = torch.from_numpy(a), torch.from_numpy(b)
    with sub.LoggingMode() as mode:
        c = torch.mm(at, bt)
        d = torch.sum(c, dim=1, keepdim=True)
        e = torch.softmax(c, dim=-1)
        z = torch.zeros(2, dtype=torch.float64)
    return {"ops": [str(o) for o in mode.ops], "c": _np(c), "d": _np(d), "e": _np(e), "z": _np(z)}


# -- part python_device ------------------------------------------------------------------------------
def build_mlp(sizes, seed):
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def device_sgd(sub, sizes, seed, x, y, lr, momentum=0.0, steps=1):
    model = sub.module_to_device(build_mlp(sizes, seed))
    params = list(model.named_parameters())
    out = {"param_types": [type(p).__name__ for _, p in params],
           "payload_types": [type(getattr(p, "payload", None)).__name__ for _, p in params],
           "subclass": [isinstance(p, torch.Tensor) and type(p).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__ for _, p in params]}
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    xt, yt = sub.to_device(torch.from_numpy(x)), sub.to_device(torch.from_numpy(y))
    out["input_type"] = type(xt).__name__
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(xt) - yt) ** 2).mean()
        losses.append(float(sub.to_cpu(loss).item()))
        loss.backward()
        opt.step()
    out["losses"] = losses
    out["grad_types"] = [type(p.grad).__name__ for _, p in params]
    out["params"] = {n: sub.to_cpu(p).numpy().copy() for n, p in params}
    out["cpu_types"] = [type(sub.to_cpu(p)).__name__ for _, p in params]
    return out


def device_ops(sub, a, b):
    ta, tb = sub.to_device(torch.from_numpy(a)), sub.to_device(torch.from_numpy(b))
    out = {"type": type(ta).__name__, "payload": type(getattr(ta, "payload", None)).__name__,
           "shape": list(ta.shape), "dtype": str(ta.dtype)}
    out["mm"] = _np(sub.to_cpu(ta @ tb.t()))
    out["mm_type"] = type(ta @ tb.t()).__name__
    out["exp_sum"] = _np(sub.to_cpu(torch.exp(ta).sum(dim=0)))
    before = np.array(ta.payload, copy=True) if hasattr(ta, "payload") else None
    r = ta.mul_(2.0)
    out["inplace_same_object"] = r is ta
    out["inplace_payload"] = _np(torch.from_numpy(np.asarray(ta.payload))) if hasattr(ta, "payload") else None
    out["before"] = before
    src = torch.from_numpy(np.array(a, copy=True))
    moved = sub.to_device(src)
    moved.add_(1.0)
    out["to_device_copies"] = bool(np.array_equal(src.numpy(), a))
    return out

# IPT-CANARY lab04 lab04.py: hidden grading text, never shown to learners
