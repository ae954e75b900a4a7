"""Trusted-side (P0) oracles of lab04.

The mini dispatcher has no PyTorch counterpart to run, so this module is a small reference model of
PyTorch's algorithm (c10/core/DispatchKeySet.h, LocalDispatchKeySet.h, aten/src/ATen/core/dispatch/):
a keyset is a bitset whose highest bit runs first; the keyset of a call is
(union of tensor keys | TLS included) - TLS excluded; a key's entry is the op's kernel, else the key's
backend fallback; a fallthrough goes on to the next key; a boxed fallback gets (op, keyset, stack).
It exposes the same names as the learner's module, so P0 runs the very scenario functions of
autograder/labs/lab04/scenarios.py against it and compares the data. The real-torch parts use real torch.
"""
from __future__ import annotations

import ast
import threading
import types
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.labs.lab04 import scenarios as shared


class DispatchKey(IntEnum):
    Undefined = 0
    CPU = 1
    Meta = 2
    PrivateUse1 = 3
    BackendSelect = 4
    Python = 5
    Functionalize = 6
    ADInplaceOrView = 7
    AutogradCPU = 8
    Tracer = 9
    AutocastCPU = 10
    Batched = 11
    PythonDispatcher = 12


KEYS = [k for k in DispatchKey if k != DispatchKey.Undefined]
FALLTHROUGH = "FALLTHROUGH"


class MissingKernelError(LookupError):
    pass


@dataclass
class Argument:
    name: str
    type: str
    default: object = None
    has_default: bool = False
    kwarg_only: bool = False


@dataclass
class Schema:
    name: str
    arguments: list
    returns: list


@dataclass
class Node:
    op: str
    inputs: list


class DispatchKeySet:
    def __init__(self, keys=()):
        self.bits = 0
        for k in keys:
            if int(k):
                self.bits |= 1 << int(k)

    @classmethod
    def from_bits(cls, bits):
        s = cls()
        s.bits = bits
        return s

    def has(self, k):
        return int(k) > 0 and bool(self.bits & (1 << int(k)))

    def add(self, k):
        return DispatchKeySet.from_bits(self.bits | (1 << int(k) if int(k) else 0))

    def remove(self, k):
        return DispatchKeySet.from_bits(self.bits & ~(1 << int(k)))

    def __or__(self, o):
        return DispatchKeySet.from_bits(self.bits | o.bits)

    def __and__(self, o):
        return DispatchKeySet.from_bits(self.bits & o.bits)

    def __sub__(self, o):
        return DispatchKeySet.from_bits(self.bits & ~o.bits)

    def __eq__(self, o):
        return isinstance(o, DispatchKeySet) and o.bits == self.bits

    def __hash__(self):
        return hash(self.bits)

    def __len__(self):
        return sum(1 for _ in self)

    def __bool__(self):
        return bool(self.bits)

    def __iter__(self):
        return iter([k for k in reversed(KEYS) if self.has(k)])

    def highest(self):
        return next(iter(self), DispatchKey.Undefined)

    def below(self, k):
        return DispatchKeySet.from_bits(self.bits & ((1 << int(k)) - 1))


_tls = threading.local()


def local_keysets():
    return getattr(_tls, "inc", DispatchKeySet()), getattr(_tls, "exc", DispatchKeySet())


class _Guard:
    attr = ""

    def __init__(self, *keys):
        self.keys = DispatchKeySet(keys)

    def __enter__(self):
        self.prev = getattr(_tls, self.attr, DispatchKeySet())
        setattr(_tls, self.attr, self.prev | self.keys)
        return self

    def __exit__(self, *exc):
        setattr(_tls, self.attr, self.prev)
        return False


class IncludeKeys(_Guard):
    attr = "inc"


class ExcludeKeys(_Guard):
    attr = "exc"


def _tensors(args):
    flat = []
    for a in args:
        flat.extend(a if isinstance(a, (list, tuple)) else [a])
    return [t for t in flat if isinstance(t, MiniTensor)]


def compute_keyset(args):
    ks = DispatchKeySet()
    for t in _tensors(args):
        ks = ks | t.key_set
    inc, exc = local_keysets()
    return (ks | inc) - exc


class MiniTensor:
    def __init__(self, value, keys=(DispatchKey.CPU,), requires_grad=False):
        self.value, self.key_set, self.requires_grad, self.grad_fn = value, DispatchKeySet(keys), requires_grad, None


def parse_schema(text):
    head, ret = (p.strip() for p in text.split("->"))
    name, params = head[:head.index("(")], head[head.index("(") + 1:-1]
    args, kw = [], False
    for piece in filter(None, (p.strip() for p in params.split(","))):
        if piece == "*":
            kw = True
            continue
        decl, has, default = piece.partition("=")
        typ, arg = decl.split()
        args.append(Argument(arg, typ, ast.literal_eval(default.strip()) if has else None, bool(has), kw))
    rets = [r.strip() for r in ret.strip("()").split(",") if r.strip()] if ret.startswith("(") else [ret]
    return Schema(name.strip(), args, rets)


def bind(schema, args, kwargs):
    pos = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(pos):
        raise TypeError("too many positional arguments")
    known = {a.name for a in schema.arguments}
    if set(kwargs) - known:
        raise TypeError("unexpected keyword")
    out = []
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            if a.name in kwargs:
                raise TypeError("multiple values")
            out.append(args[i])
        elif a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.has_default:
            out.append(a.default)
        else:
            raise TypeError("missing argument")
    return out


@dataclass
class OperatorHandle:
    name: str
    schema: Schema
    kernels: dict = field(default_factory=dict)


class Dispatcher:
    def __init__(self):
        self.ops, self.fallbacks = {}, {}

    def define(self, text):
        s = parse_schema(text)
        if s.name in self.ops:
            raise RuntimeError("defined twice")
        self.ops[s.name] = OperatorHandle(s.name, s)
        return self.ops[s.name]

    def impl(self, name, key, kernel):
        self.ops[name].kernels[DispatchKey(key)] = kernel

    def fallback(self, key, boxed):
        self.fallbacks[DispatchKey(key)] = boxed

    def call(self, name, *args, **kwargs):
        op = self.ops[name]
        bound = bind(op.schema, args, kwargs)
        return self._dispatch(op, compute_keyset(bound), bound)

    def redispatch(self, name, keyset, *args):
        return self._dispatch(self.ops[name], keyset, list(args))

    def _dispatch(self, op, keyset, args):
        for key in keyset:
            if key in op.kernels:
                k = op.kernels[key]
                if k == FALLTHROUGH:
                    continue
                return k(keyset, *args)
            fb = self.fallbacks.get(key)
            if fb == FALLTHROUGH:
                continue
            if fb is None:
                raise MissingKernelError(f"could not run '{op.name}' with arguments from the '{key.name}' backend")
            stack = list(args)
            fb(op, keyset, stack)
            n = len(op.schema.returns)
            return None if n == 0 else stack[0] if n == 1 else tuple(stack[:n])
        raise MissingKernelError(f"could not run '{op.name}' with arguments from the 'Undefined' backend")


def make_autograd_kernel(dispatcher, name, tape):
    def kernel(keyset, *args):
        with ExcludeKeys(DispatchKey.ADInplaceOrView, DispatchKey.AutogradCPU):
            out = dispatcher.redispatch(name, keyset.below(DispatchKey.AutogradCPU), *args)
        ins = _tensors(args)
        if any(t.requires_grad for t in ins):
            node = Node(name, ins)
            tape.append(node)
            for o in _tensors([out]):
                o.requires_grad, o.grad_fn = True, node
        return out
    return kernel


def make_tracing_fallback(dispatcher, trace):
    def boxed(op, keyset, stack):
        trace.append(op.name)
        with ExcludeKeys(DispatchKey.Tracer):
            out = dispatcher.redispatch(op.name, keyset.below(DispatchKey.Tracer), *stack)
        n = len(op.schema.returns)
        stack[:] = [] if n == 0 else [out] if n == 1 else list(out)
    return boxed


#: the reference model, as a module-like object the scenarios accept as `sub`
MINI = types.SimpleNamespace(**{name: globals()[name] for name in (
    "DispatchKey", "DispatchKeySet", "FALLTHROUGH", "MissingKernelError", "MiniTensor", "local_keysets",
    "IncludeKeys", "ExcludeKeys", "compute_keyset", "parse_schema", "bind", "Dispatcher",
    "make_autograd_kernel", "make_tracing_fallback")})


def reference(scenario: str, *args, **kwargs):
    """Run a scenario of autograder/labs/lab04/scenarios.py against the reference model, in P0."""
    return getattr(shared, scenario)(MINI, *args, **kwargs)


def key_names(bits) -> str:
    if not isinstance(bits, int):
        return repr(bits)
    return "{" + ", ".join(k.name for k in reversed(KEYS) if bits >> int(k) & 1) + "}"


# -- real torch oracles ----------------------------------------------------------------------------
def close(got, want, what, rtol=1e-7, atol=1e-9, dtype=None):
    """Validate a reply (an array of the expected shape and dtype kind, or a list of numbers) and compare it."""
    from autograder.engine import replies
    if isinstance(want, list):
        items = replies.list_of(got, what, len(want))
        got = np.array([replies.number(g, f"{what}[{i}]") for i, g in enumerate(items)])
        want = np.asarray(want, dtype=float)
    else:
        want = np.asarray(want)
        got = replies.array(got, what, shape=want.shape, dtype=dtype, kind=None if dtype is not None else want.dtype.kind)
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        worst = float(np.nanmax(np.abs(got.astype(float) - want.astype(float)))) if got.size else 0.0
        raise AssertionError(f"{what}: values differ from PyTorch's by up to {worst:.3g}")


def softplus(x, beta, gout, v):
    xt = torch.tensor(np.asarray(x), requires_grad=True)
    y = torch.nn.functional.softplus(xt, beta, threshold=1e6)
    (g,) = torch.autograd.grad(y, xt, torch.tensor(np.asarray(gout)), create_graph=True)
    (h,) = torch.autograd.grad((g * torch.tensor(np.asarray(v))).sum(), xt, allow_unused=True)
    h = torch.zeros_like(xt) if h is None else h
    return {"out": y.detach().numpy(), "grad": g.detach().numpy(), "hvp": h.numpy()}


def softplus_stable(x, beta, gout, v):
    """softplus for any |beta * x|, in closed form (F.softplus with a huge threshold overflows past beta * x = 709):
    y = logaddexp(0, beta x) / beta, dy/dx = sigmoid(beta x), d2y/dx2 = beta sigmoid (1 - sigmoid)."""
    x, gout, v = (np.asarray(a, dtype=np.float64) for a in (x, gout, v))
    z = beta * x
    s = torch.sigmoid(torch.from_numpy(z)).numpy()
    return {"out": np.logaddexp(0.0, z) / beta, "grad": gout * s, "hvp": gout * v * beta * s * (1.0 - s)}


def softplus_compiled(x, beta, swap=None):
    xt = torch.tensor(x, requires_grad=True)
    inner = xt * 2
    inner = inner * swap if swap is not None else torch.nn.functional.softplus(inner, beta, threshold=1e6)
    y = inner.sin() + xt
    (g,) = torch.autograd.grad(y.sum(), xt)
    return y.detach().numpy(), g.numpy()


class _RefLogger(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def log_step(name, seed):
    model, x = shared.build_model(name, seed)
    with _RefLogger() as mode:
        model(x).sum().backward()
    return {"ops": mode.ops, "grads": {n: None if p.grad is None else p.grad.numpy() for n, p in model.named_parameters()}}


def mode_direct(a, b):
    with _RefLogger() as mode:
        values = shared._direct_program(a, b)
    with _RefLogger() as second:
        torch.ones(2).neg()
    out = {key: t.numpy() for key, t in values.items()}
    out["ops"], out["second_ops"] = mode.ops, second.ops
    return out


def mode_nested(a, b):
    with _RefLogger() as outer:
        with _RefLogger() as inner:
            out = (torch.from_numpy(a) * 2).sum(0)
        after = torch.from_numpy(b).exp()
    return {"outer": outer.ops, "inner": inner.ops, "out": out.numpy(), "after": after.numpy()}


def cpu_sgd(sizes, seed, x, y, lr, momentum=0.0, steps=1, weights=None, frozen=(), tie=False):
    model = shared.build_mlp(sizes, seed, tie)
    for n, p in model.named_parameters():
        if n in frozen:
            p.requires_grad_(False)
    if weights is not None:
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(torch.from_numpy(weights[n]))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(xt) - yt) ** 2).mean()
        losses.append(float(loss.item()))
        loss.backward()
        opt.step()
    return {"losses": losses, "params": {n: p.detach().numpy().copy() for n, p in model.named_parameters()},
            "grads": {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None},
            "requires_grad": [bool(p.requires_grad) for _, p in model.named_parameters()],
            "shapes": {n: list(p.shape) for n, p in model.named_parameters()}}


def start_weights(sizes, seed, tie=False):
    """P0's start weights for device_sgd (written into the payloads by the scenario)."""
    rng = np.random.default_rng(1000 + seed)
    model = shared.build_mlp(sizes, seed, tie)
    return {n: (rng.standard_normal(tuple(p.shape)) * 0.5).astype(np.float32) for n, p in model.named_parameters()}

# IPT-CANARY lab04 oracle.py: hidden grading text, never shown to learners
