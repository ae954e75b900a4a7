# ---
# jupyter:
#   inside_pytorch:
#     lab: lab06
#     title: torch.fx
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
# # Lab 6 — torch.fx: graphs of Python programs
#
# `torch.fx` turns an `nn.Module` into a **graph**: a flat list of nodes, each one call (a function, a
# method, a submodule) with its arguments. A graph can be printed, edited by ordinary Python, turned back
# into Python source and run. It is the IR under PyTorch's current capture paths: `torch.compile` (Dynamo
# hands fx graphs to its backends) and `torch.export` (an `ExportedProgram` holds an fx graph of ATen ops).
# TorchScript, the older capture path, is deprecated: new code uses `torch.export` or `torch.compile`.
#
# The first half of the lab rebuilds the front of fx from scratch: a **symbolic tracer** that runs a
# module's `forward` on *proxies* that record what happens to them, and a **code generator** that turns
# the recorded graph back into a runnable module. The second half writes passes on the real `torch.fx`.
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `tracer` | a symbolic tracer: `Proxy` objects record operators, torch functions, tensor methods, leaf modules and parameters into a `Graph` | 25 | 4 |
# | `codegen` | Python source from a `Graph`, and a module that runs it | 15 | 3 |
# | `shape_prop` | an `Interpreter` that records shape, dtype and stride of every node | 10 | 0.5 |
# | `conv_bn_fold` | folding `BatchNorm2d` into the `Conv2d` before it, for inference | 15 | 1.5 |
# | `dce_cse` | dead-code elimination and common-subexpression elimination that respect side effects | 10 | 2 |
# | `rewrite` | a pattern rewrite: `x * sigmoid(x)` becomes `F.silu(x)` | 10 | 1 |
# | `profiler` | an `Interpreter` that times every node, and a summary | 7 | 1 |
# | `decompose` | a graph of Core ATen ops with `make_fx`, its op histogram, and your own graph runner | 8 | 1 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 14 in all.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests run your code. The hidden graders use other models (branches,
# shared modules and parameters, keyword arguments, constants, several outputs), so a green `check` is a
# good sign, not a guarantee.
#
# **Build it yourself.** Use `torch.fx`'s `Graph`, `Node` and `Interpreter` APIs freely in the second
# half, but write the pass each part asks for yourself. The ready-made ones (`symbolic_trace`, `ShapeProp`,
# `fuse`, `eliminate_dead_code`, `CSEPass`, `replace_pattern`) follow rules that differ from this lab's in
# places (each part says where), and the checks grade this lab's rules on cases where they differ.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import copy
import inspect
import keyword
import math
import operator
import re
import time
from collections import Counter

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")


def map_aggregate(a, fn):
    """Apply fn to every leaf of a nested structure of tuples, lists, dicts and slices; rebuild the structure."""
    if isinstance(a, tuple):
        return tuple(map_aggregate(x, fn) for x in a)
    if isinstance(a, list):
        return [map_aggregate(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn), map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a, fn):
    """Apply fn to every Node inside a nested structure (other leaves are kept)."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


class Node:
    """One operation of a Graph. `args`/`kwargs` hold constants and other Nodes; `users` the Nodes that read it."""

    def __init__(self, graph, name, op, target, args, kwargs):
        self.graph, self.name, self.op, self.target = graph, name, op, target
        self.args, self.kwargs = args, kwargs
        self.users = {}          # a dict used as an ordered set: {user_node: None}

    def __repr__(self):
        return f"%{self.name}"


RESERVED = {"self", "torch", "operator", "math", "inf", "nan", "F", "nn"}


class Graph:
    """The IR of the mini tracer: nodes in execution order, with unique names that are valid identifiers."""

    def __init__(self):
        self.nodes = []
        self._taken = {}

    def _unique_name(self, hint):
        base = re.sub(r"[^0-9a-zA-Z_]", "_", str(hint)).strip("_") or "node"
        if base[0].isdigit():
            base = "_" + base
        if keyword.iskeyword(base) or base in RESERVED:
            base = base + "_1"
        name, count = base, self._taken.get(base, 0)
        while name in self._taken:
            count += 1
            name = f"{base}_{count}"
        self._taken[base] = count
        self._taken[name] = 0
        return name

    def create_node(self, op, target, args=(), kwargs=None, name=None):
        """Append a node. `name` is a hint; the node gets a unique identifier based on it (or on the target)."""
        if op not in OPCODES:
            raise ValueError(f"unknown opcode {op!r}: one of {OPCODES}")
        hint = name or (target if isinstance(target, str) else getattr(target, "__name__", "node"))
        node = Node(self, self._unique_name(hint), op, target, tuple(args), dict(kwargs or {}))
        map_arg((node.args, node.kwargs), lambda n: n.users.setdefault(node, None))
        self.nodes.append(node)
        return node

    def output(self, result):
        """The output node: its single argument is the returned structure (a Node, a tuple, a dict...)."""
        return self.create_node("output", "output", (result,))

    def __str__(self):
        lines = []
        for n in self.nodes:
            target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", repr(n.target))
            lines.append(f"{n.name:<14} {n.op:<14} {str(target):<16} args={n.args} kwargs={n.kwargs}")
        return "\n".join(lines)


def from_fx(gm):
    """Convert a real torch.fx GraphModule's graph into our Graph (used by the codegen part's checks)."""
    graph, env = Graph(), {}
    for n in gm.graph.nodes:
        plain = lambda a: map_aggregate(a, lambda x: x)   # immutable_list/dict -> list/dict  # noqa: E731
        args = map_aggregate(plain(tuple(n.args)), lambda x: env[x] if isinstance(x, torch.fx.Node) else x)
        kwargs = map_aggregate(plain(dict(n.kwargs)), lambda x: env[x] if isinstance(x, torch.fx.Node) else x)
        env[n] = graph.create_node(n.op, n.target, args, kwargs, name=n.name)
    return graph


def is_leaf_module(module):
    """torch.fx's default rule: modules of torch.nn are leaves (recorded as call_module), except Sequential."""
    mod = type(module).__module__
    return (mod.startswith("torch.nn") or mod.startswith("torch.ao.nn")) and not isinstance(module, nn.Sequential)


RANDOM_FUNCTIONS = (torch.rand, torch.randn, torch.randint, torch.rand_like, torch.randn_like, torch.randint_like,
                    torch.randperm, torch.bernoulli, torch.normal, torch.multinomial, torch.dropout, F.dropout)
RANDOM_METHODS = ("bernoulli", "multinomial")

# %% [markdown] nbgrader={"grade": false, "grade_id": "tracer-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — A symbolic tracer (25 points)
#
# A symbolic tracer calls `forward` not with tensors but with **proxies**: objects that stand for "the
# value of node *n*". Whatever the code does to a proxy is recorded as a new node, whose result is a new
# proxy. Python does the work of walking the program: loops are unrolled, `if`s on ordinary attributes
# are decided, helper functions are inlined. The price: code that *looks at values* (`if x.sum() > 0:`)
# cannot be traced, since a proxy has no value.
#
# The IR (given above) has six opcodes, the same as `torch.fx`:
#
# | opcode | what it records | `target` |
# |---|---|---|
# | `placeholder` | an input of `forward` | the parameter's name |
# | `get_attr` | a parameter or buffer read from the module | its qualified name, `"blocks.0.weight"` |
# | `call_function` | a free function: `operator.add`, `torch.relu`, `F.softmax`... | the function object |
# | `call_method` | a tensor method: `x.view(2, -1)` | the method name, `"view"`; `args[0]` is the tensor |
# | `call_module` | a call of a leaf submodule | its qualified name, `"layer1.0.conv1"` |
# | `output` | the returned value | `"output"`; `args[0]` is the returned structure |
#
# **Write `Proxy` and `MiniTracer`**, and `mini_trace(root) -> Graph`, so that your graph equals
# `torch.fx.symbolic_trace(root).graph` node for node (opcode, target, and argument structure), except
# where the rules below say this lab differs (buffers, plain tensor attributes, unregistered modules).
# The checks also use your `Proxy` directly: `MiniTracer()`, `tracer.graph = Graph()`, placeholders from
# `tracer.create_proxy(...)`, then operators, torch functions and methods on them.
#
# 1. **Placeholders**: one per parameter of `root.forward` (`inspect.signature`), in order. A parameter
#    with a default value keeps it as the placeholder's argument, as in torch.fx: `scale=0.5` gives
#    `args == (0.5,)`; one without a default gets `args == ()`.
# 2. **Operators** on proxies: `+ - * / // % ** @`, the comparisons `< <= > >= == !=`, unary `-` and `+`,
#    and `[...]` become `call_function` of `operator.add`, `operator.sub`, ..., `operator.lt`,
#    `operator.eq`, `operator.ne`, `operator.neg`, `operator.pos`, `operator.getitem`. Reflected ones too:
#    `2 - x` records `operator.sub(2, x)`, arguments in the order Python evaluates them (for `0.5 < x`
#    Python itself calls `x > 0.5`, for `2 == x` it calls `x == 2`). `x == y` must record a node, never
#    fold to a Python bool.
# 3. **Torch functions**: `torch.relu(p)`, `torch.cat([p, q], dim=1)`, `F.softmax(p, dim=-1)` see a
#    non-tensor argument that has a `__torch_function__` classmethod, and call it with `(func, types, args,
#    kwargs)`. Record `call_function(func, args, kwargs)` with what you were given (`F.softmax` passes
#    `dim`, `_stacklevel` and `dtype` as kwargs: keep them all).
# 4. **Tensor methods and attributes**: `p.view(2, -1)` first looks up the attribute `view` on the proxy
#    (`__getattr__`, which returns an `Attribute`), then calls it: record `call_method("view", (p, 2, -1))`.
#    An attribute used as a *value* (`x.shape[0]`, `w.T @ x`, `x.dtype` passed on) records
#    `call_function(getattr, (p, "shape"))` at its first use (the `Attribute.node` property), exactly once
#    per `Attribute` object, before the node that uses it.
# 5. **Modules**: while tracing, replace `nn.Module.__call__` (and put it back afterwards, also on an
#    error). A *leaf* module (`is_leaf_module`, given) is recorded as `call_module` with its qualified name
#    from `root.named_modules()`; any other module is traced through: call its `forward` directly.
#    A module called twice gives two nodes with the same target. A module that is not registered in
#    `root` (kept in a plain list, or made inside `forward`) has no qualified name: trace it through as
#    well (torch.fx raises `NameError` here; this lab does not).
# 6. **Parameters and buffers** read in a traced `forward` (`self.weight`, `self.block.scale`) live in
#    `_parameters`/`_buffers`, so reading them goes through `nn.Module.__getattr__`: replace it too, and
#    return a proxy of a `get_attr` node. A parameter gets one node per trace, created at its first read
#    and reused afterwards, named by the first name `root.named_parameters()` gives it (a parameter shared
#    by two modules has two names). A buffer gets a new node at every *read*: `s = self.shift` read once
#    and used twice is one node. (Here this lab differs from torch.fx, which creates a buffer's node at
#    every *use*.)
# 7. **Constants** (numbers, strings, `None`, slices, `torch.float64`...) stay in `args` as they are;
#    proxies inside tuples, lists, dicts and slices become their nodes (`map_aggregate` helps). A tensor
#    kept as a plain attribute (`self.k = torch.ones(3)`, neither parameter nor buffer) is found by normal
#    attribute lookup, never reaches `__getattr__`, and so stays in `args` as a constant (torch.fx instead
#    records a `get_attr` for it).
# 8. **Output**: `graph.output(...)` of the returned structure, with nodes in place of proxies
#    (`return a, {"b": b}` gives `args == ((a, {"b": b}),)`).
#
# A proxy used as a Python bool or iterated (`if p:`, `if x == y:`, `for v in p:`) must raise `TraceError`,
# and afterwards `nn.Module` must work as before (the next trace and eager calls too). Helpers
# you may find useful: `torch.overrides.is_tensor_method_or_property`, `inspect.signature`.

#
# **Stuck?** Open the hints one at a time; each gives away a little more.
#
# <details><summary>Hint 1: where to start</summary>
#
# Make the smallest trace work end to end first: a module whose `forward(self, x)` returns `x + 1`. That
# needs `create_proxy` (one `graph.create_node`, with the proxies in the arguments replaced by their
# nodes, and a `Proxy` of the new node), one placeholder per parameter in `trace`, `__add__` from
# `install_operators`, and `graph.output`. Print your graph beside `torch.fx.symbolic_trace(m).graph`,
# then add the rules above one at a time, in their order.
# </details>
#
# <details><summary>Hint 2: the idea</summary>
#
# Everything `forward` does with a proxy reaches you through one of four doors: a Python operator (the
# methods `install_operators` puts on the class), a torch function (torch finds the `__torch_function__`
# classmethod on a non-tensor argument and hands you the call), an attribute of the proxy (`__getattr__`,
# which returns an `Attribute`), or the module machinery: `nn.Module.__call__` for submodules and
# `nn.Module.__getattr__` for parameters and buffers. Python calls `nn.Module.__getattr__` only when the
# normal lookup fails, which is exactly the case for what lives in `_parameters`, `_buffers` and
# `_modules`; a plain tensor attribute never reaches it, so rule 7 comes for free. Build the names before
# the trace: `id(module)` to its qualified name from `root.named_modules()`, `id(parameter)` to its first
# name from `root.named_parameters()`.
# </details>
#
# <details><summary>Hint 3: the shape of <code>trace</code></summary>
#
# ```python
# names = {id(m): n for n, m in root.named_modules()}
# saved = nn.Module.__call__, nn.Module.__getattr__
#
# def call(mod, *args, **kwargs):
#     if is_leaf_module(mod) and id(mod) in names:
#         return self.create_proxy("call_module", names[id(mod)], args, kwargs)
#     return mod.forward(*args, **kwargs)              # traced through
#
# nn.Module.__call__ = call
# nn.Module.__getattr__ = ...    # saved[1](mod, attr); a tensor of a registered module becomes a get_attr proxy
# try:
#     result = root.forward(*placeholders)
# finally:
#     nn.Module.__call__, nn.Module.__getattr__ = saved
# ```
#
# In `__torch_function__`, take the tracer from the first `Proxy` inside `args` and `kwargs`
# (`map_aggregate` walks nested lists), and let `torch.overrides.is_tensor_method_or_property(func)`
# tell a tensor method (`call_method`, target `func.__name__`) from a function (`call_function`, target
# `func`).
# </details>
# %% tags=["export"] nbgrader={"grade": false, "grade_id": "tracer-solution", "locked": false, "schema_version": 3, "solution": true}
class TraceError(RuntimeError):
    """Raised when traced code needs the value of a proxy (control flow, iteration)."""


class Proxy:
    """Stands for the value of `node` while `tracer` traces a forward."""

    def __init__(self, node, tracer):
        self.node, self.tracer = node, tracer

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, name):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        if name.startswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)
        ### END SOLUTION

    def __getitem__(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        return self.tracer.create_proxy("call_function", operator.getitem, (self, key), {})
        ### END SOLUTION

    def __bool__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        raise TraceError("a traced value cannot be used as a Python bool (control flow on tensor values)")
        ### END SOLUTION

    def __iter__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        raise TraceError("a traced value cannot be iterated")
        ### END SOLUTION

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        kwargs = kwargs or {}
        found = []
        map_aggregate((args, kwargs), lambda a: found.append(a) if isinstance(a, Proxy) else None)
        tracer = found[0].tracer
        if torch.overrides.is_tensor_method_or_property(func):
            return tracer.create_proxy("call_method", func.__name__, args, kwargs)
        return tracer.create_proxy("call_function", func, args, kwargs)
        ### END SOLUTION


class Attribute(Proxy):
    """`proxy.name`: calling it records a call_method; using it as a value (`x.shape[0]`, `w.T + 1`)
    records `call_function(getattr, (proxy, name))`, created at its first use (like torch.fx)."""

    def __init__(self, proxy, name):
        self.proxy, self.name, self.tracer, self._node = proxy, name, proxy.tracer, None

    @property
    def node(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.proxy, self.name), {}).node
        return self._node
        ### END SOLUTION

    def __call__(self, *args, **kwargs):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        return self.proxy.tracer.create_proxy("call_method", self.name, (self.proxy, *args), kwargs)
        ### END SOLUTION


def install_operators(cls):
    """Give the Proxy class its operators: __add__, __radd__, ..., __neg__ (setattr on the class)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 tracer-solution
    def binary(op):
        def forward(self, other):
            return self.tracer.create_proxy("call_function", op, (self, other), {})

        def reflected(self, other):
            return self.tracer.create_proxy("call_function", op, (other, self), {})

        return forward, reflected

    for name, op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                     ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow),
                     ("matmul", operator.matmul)]:
        forward, reflected = binary(op)
        setattr(cls, f"__{name}__", forward)
        setattr(cls, f"__r{name}__", reflected)
    for name, op in [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                     ("eq", operator.eq), ("ne", operator.ne)]:
        setattr(cls, f"__{name}__", binary(op)[0])
    for name, op in [("neg", operator.neg), ("pos", operator.pos)]:
        setattr(cls, f"__{name}__", lambda self, op=op: self.tracer.create_proxy("call_function", op, (self,), {}))
    ### END SOLUTION


class MiniTracer:
    def __init__(self):
        self.graph = None

    def create_proxy(self, op, target, args, kwargs, name=None):
        """Record one node (Proxies inside args/kwargs become their nodes) and return a Proxy of it."""
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        unwrap = lambda a: a.node if isinstance(a, Proxy) else a  # noqa: E731
        node = self.graph.create_node(op, target, map_aggregate(tuple(args), unwrap),
                                      map_aggregate(dict(kwargs or {}), unwrap), name=name)
        return Proxy(node, self)
        ### END SOLUTION

    def trace(self, root):
        """Run root.forward on placeholder proxies, with nn.Module.__call__/__getattr__ replaced; return the Graph."""
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 tracer-solution
        self.graph = Graph()
        module_names = {id(m): name for name, m in root.named_modules()}
        param_names = {}
        for name, p in root.named_parameters():
            param_names.setdefault(id(p), name)
        param_cache = {}
        orig_call, orig_getattr = nn.Module.__call__, nn.Module.__getattr__
        tracer = self

        def module_call(mod, *args, **kwargs):
            if is_leaf_module(mod) and id(mod) in module_names:
                return tracer.create_proxy("call_module", module_names[id(mod)], args, kwargs)
            return mod.forward(*args, **kwargs)

        def module_getattr(mod, attr):
            value = orig_getattr(mod, attr)
            if isinstance(value, torch.Tensor) and id(mod) in module_names:
                prefix = module_names[id(mod)]
                qualname = f"{prefix}.{attr}" if prefix else attr
                if isinstance(value, nn.Parameter):
                    qualname = param_names.get(id(value), qualname)
                    if qualname not in param_cache:
                        param_cache[qualname] = tracer.create_proxy("get_attr", qualname, (), {})
                    return param_cache[qualname]
                return tracer.create_proxy("get_attr", qualname, (), {})
            return value

        params = inspect.signature(root.forward).parameters.items()
        empty = inspect.Parameter.empty     # a parameter's default value is the placeholder's argument
        inputs = [self.create_proxy("placeholder", name, () if p.default is empty else (p.default,), {})
                  for name, p in params]
        nn.Module.__call__, nn.Module.__getattr__ = module_call, module_getattr
        try:
            result = root.forward(*inputs)
        finally:
            nn.Module.__call__, nn.Module.__getattr__ = orig_call, orig_getattr
        self.graph.output(map_aggregate(result, lambda a: a.node if isinstance(a, Proxy) else a))
        return self.graph
        ### END SOLUTION


def mini_trace(root):
    """Trace `root` with your MiniTracer and return the Graph."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 tracer-solution
    return MiniTracer().trace(root)
    ### END SOLUTION


install_operators(Proxy)


# %% [markdown] nbgrader={"grade": false, "grade_id": "models-md", "locked": true, "schema_version": 3, "solution": false}
# Two models to try things on: a small ResNet (convolutions, batch norm, residual additions, nested
# `Sequential`s, hence names like `layer1.0.conv1`) and a one-block transformer (embedding, layer norm,
# attention written with slices, `@` and `F.softmax`, a GELU MLP).

# %% nbgrader={"grade": false, "grade_id": "models", "locked": true, "schema_version": 3, "solution": false}
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=20, dim=16, seq=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        self.dim = dim

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        qkv = self.qkv(self.ln1(x))
        q, k, v = qkv[..., :self.dim], qkv[..., self.dim:2 * self.dim], qkv[..., 2 * self.dim:]
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dim), dim=-1)
        x = x + self.proj(att @ v)
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def randomize_bn(model, seed=0):
    """Give every BatchNorm non-trivial running statistics and affine parameters (as after training)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                    m.bias.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model


torch.manual_seed(0)
resnet = randomize_bn(TinyResNet()).eval()
transformer = TinyTransformer().eval()
images, tokens = torch.randn(2, 3, 16, 16), torch.randint(0, 20, (2, 6))

# %% nbgrader={"grade": false, "grade_id": "tracer-explore", "locked": false, "schema_version": 3, "solution": false}
graph = mini_trace(transformer)
print(graph)
reference = torch.fx.symbolic_trace(transformer).graph
print("\nsame opcodes and targets as torch.fx:",
      [(n.op, n.target) for n in graph.nodes] == [(n.op, n.target) for n in reference.nodes])


# %% [markdown] nbgrader={"grade": false, "grade_id": "draw-md", "locked": true, "schema_version": 3, "solution": false}
# A picture of the graph: one box per node, coloured by opcode, placed in columns by *depth* (the
# longest path from an input), with an arrow from each argument to its user. The residual additions of
# the ResNet show up as the long edges that skip a column or two.

# %% nbgrader={"grade": false, "grade_id": "draw", "locked": true, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt

OP_COLOURS = {"placeholder": "#8ecae6", "get_attr": "#ffb703", "call_function": "#b8e0a8",
              "call_method": "#cdb4db", "call_module": "#f4a261", "output": "#adb5bd"}


def draw_graph(graph, title, width=15):
    depth, edges = {}, []
    for n in graph.nodes:
        ins = []
        map_arg((n.args, n.kwargs), lambda a: ins.append(a))
        depth[n] = 1 + max((depth[a] for a in ins), default=-1)
        edges += [(a, n) for a in ins]
    columns = {}
    for n in graph.nodes:
        columns.setdefault(depth[n], []).append(n)
    pos = {n: (d, -i) for d, col in columns.items() for i, n in enumerate(col)}
    tall = max(len(c) for c in columns.values())
    fig, ax = plt.subplots(figsize=(width, 1.0 + 0.55 * tall))
    for a, b in edges:
        ax.annotate("", xy=pos[b], xytext=pos[a], arrowprops=dict(arrowstyle="->", color="#999", lw=0.7, shrinkA=9, shrinkB=9))
    for n, (x, y) in pos.items():
        target = n.target if isinstance(n.target, str) else n.target.__name__
        ax.text(x, y, target if len(target) < 14 else target[:12] + "…", ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.25", fc=OP_COLOURS[n.op], ec="#555", lw=0.5))
    for op, colour in OP_COLOURS.items():
        ax.scatter([], [], color=colour, label=op, s=60)
    ax.legend(loc="lower left", fontsize=7, ncol=6, frameon=False, bbox_to_anchor=(0, -0.12))
    ax.set_xlim(-0.7, max(columns) + 0.7)
    ax.set_ylim(-tall + 0.3, 0.7)
    ax.axis("off")
    ax.set_title(title)
    return fig


draw_graph(mini_trace(resnet), "TinyResNet traced by the mini tracer (columns: depth)")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "tracer", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="A symbolic tracer"
check("tracer")

# %% [markdown] nbgrader={"grade": false, "grade_id": "codegen-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — From graph back to Python (15 points)
#
# fx runs a graph by generating Python source from it (`gm.code`) and compiling that. Generated code is
# fast (no interpretation overhead), readable, and debuggable with ordinary tools.
#
# **Write `python_code(graph) -> (source, globals)`**: the source of a function
# `def forward(self, <placeholders>):` (a placeholder with an argument is a parameter with that default
# value, `scale=0.5`, so that the module can be called like the traced one) whose body is exactly one
# assignment `<node name> = ...` per node (placeholders and the output excepted), in graph order, then
# one `return` (nothing else: no `del`, no `x = None` lines as torch.fx's own generator writes), and the
# dict of globals it needs (function objects that are not spelled out, such as `F.softmax`, go in there under a
# name of your choice). Every node's name is a valid identifier, distinct from `self`, `torch`,
# `operator`, `math`, `inf`, `nan`, `F` and `nn`. Spell out every constant so that it survives exactly:
# floats (`repr` keeps every digit; `inf`/`nan` need a global), `None`, strings, slices and `...`,
# `torch.float64`, tuples vs lists, dicts. A qualified name like `layer1.0.conv1` is not valid Python
# after `self.`: write `getattr(self.layer1, "0").conv1`, or look it up another way.
#
# **Write `MiniGraphModule(root, graph)`**, an `nn.Module` that, like `torch.fx.GraphModule`, holds
# what the graph uses: for every `call_module` and `get_attr` target, the *same* object (not a copy)
# from `root`, installed under the same qualified name (create empty `nn.Module`s for the intermediate
# levels; register tensors that are not parameters as buffers). So its `state_dict()` keys are those of
# `torch.fx.GraphModule(root, graph)`, and an in-place change to `root`'s weights is seen by both.
# Set `self.code` to the source and `self.graph` to the graph, and make `forward` run the compiled code.
#
# The checks build their graphs from real `torch.fx` traces (`from_fx`, given), so this part does not
# depend on your tracer. They read your source back (with Python's `ast`), so write it yourself: the
# layout of `torch.fx`'s own `Graph.python_code` is not this one.

#
# **Stuck?** Open the hints one at a time.
#
# <details><summary>Hint 1: where to start</summary>
#
# Take a graph with one placeholder, one `call_function` of `operator.add` and an output. Generate
# `def forward(self, x):`, `add = x + 1`, `return add`; `exec` it with a dict of globals; call the
# function it defined. Then one opcode at a time: `call_method` (`args[0]` is the object), `get_attr` and
# `call_module` (both reached through `self`), and only then the constants.
# </details>
#
# <details><summary>Hint 2: the idea</summary>
#
# Write one recursive function that spells any argument as Python source. A `Node` is its name; tuples,
# lists and dicts rebuild themselves from their spelled items (a tuple of one item needs its comma:
# `(x,)`); floats use `repr`, except `inf` and `nan`, which are names in the globals; anything without a
# literal spelling (a function object, an unusual constant) goes into the globals dict under a fresh
# name, and the source uses that name. Each node then becomes `name = <right-hand side>`, and the
# right-hand side depends only on the opcode. For `MiniGraphModule`, split each `get_attr` and
# `call_module` target on `.`, create the missing intermediate `nn.Module()`s, and put the *same* object
# from `root` at the end of the path (`register_buffer` for a tensor that is not a parameter).
# </details>
#
# <details><summary>Hint 3: near code</summary>
#
# ```python
# def spell(a):
#     if isinstance(a, Node):
#         return a.name
#     if isinstance(a, tuple):
#         return "(" + "".join(spell(x) + ", " for x in a) + ")"
#     if isinstance(a, slice):
#         return f"slice({spell(a.start)}, {spell(a.stop)}, {spell(a.step)})"
#     ...                                   # lists, dicts, Ellipsis, floats, None/bool/int/str, dtypes
#     return new_global(a)                  # a fresh name, bound to `a` in the globals dict
#
# namespace = dict(the_globals)
# exec(compile(source, "<generated>", "exec"), namespace)
# self._forward = namespace["forward"]      # and forward(self, *args) returns self._forward(self, *args)
# ```
#
# A path like `layer1.0.conv1` becomes `getattr(self.layer1, "0").conv1`: each part that is not an
# identifier (`str.isidentifier`, `keyword.iskeyword`) is reached with `getattr`.
# </details>
# %% tags=["export"] nbgrader={"grade": false, "grade_id": "codegen-solution", "locked": false, "schema_version": 3, "solution": true}
def python_code(graph):
    """(source of `def forward(self, ...)`, dict of the globals it needs) for a Graph."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 codegen-solution
    INFIX = {operator.add: "{} + {}", operator.sub: "{} - {}", operator.mul: "{} * {}", operator.truediv: "{} / {}",
             operator.floordiv: "{} // {}", operator.mod: "{} % {}", operator.pow: "{} ** {}", operator.matmul: "{} @ {}",
             operator.neg: "-{}", operator.pos: "+{}", operator.getitem: "{}[{}]", operator.lt: "{} < {}",
             operator.le: "{} <= {}", operator.gt: "{} > {}", operator.ge: "{} >= {}"}

    def _attr_path(base, qualname):
        out = base
        for atom in qualname.split("."):
            out = f"{out}.{atom}" if atom.isidentifier() and not keyword.iskeyword(atom) else f"getattr({out}, {atom!r})"
        return out

    class _Emitter:
        def __init__(self):
            self.globals = {"torch": torch, "operator": operator, "inf": math.inf, "nan": math.nan}
            self.ids = {}

        def add_global(self, obj, hint):
            if id(obj) not in self.ids:
                name = "_" + re.sub(r"[^0-9a-zA-Z_]", "_", hint) + f"_{len(self.ids)}"
                self.ids[id(obj)] = name
                self.globals[name] = obj
            return self.ids[id(obj)]

        def fmt(self, a):
            if isinstance(a, Node):
                return a.name
            if isinstance(a, tuple):
                return "(" + "".join(self.fmt(x) + ", " for x in a) + ")"
            if isinstance(a, list):
                return "[" + ", ".join(self.fmt(x) for x in a) + "]"
            if isinstance(a, dict):
                return "{" + ", ".join(f"{k!r}: {self.fmt(v)}" for k, v in a.items()) + "}"
            if isinstance(a, slice):
                return f"slice({self.fmt(a.start)}, {self.fmt(a.stop)}, {self.fmt(a.step)})"
            if a is Ellipsis:
                return "..."
            if isinstance(a, float) and not math.isfinite(a):
                return "nan" if math.isnan(a) else ("inf" if a > 0 else "-inf")
            if a is None or isinstance(a, (bool, int, float, str)):
                return repr(a)
            if isinstance(a, torch.dtype):
                return str(a)
            return self.add_global(a, type(a).__name__)

        def operand(self, a):
            return a.name if isinstance(a, Node) else f"({self.fmt(a)})"

        def call_args(self, args, kwargs):
            return ", ".join([self.fmt(a) for a in args] + [f"{k}={self.fmt(v)}" for k, v in kwargs.items()])

    em = _Emitter()
    params = [n.name + (f"={em.fmt(n.args[0])}" if n.args else "") for n in graph.nodes if n.op == "placeholder"]
    lines = [f"def forward(self{''.join(', ' + p for p in params)}):"]
    for n in graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            lines.append(f"    return {em.fmt(n.args[0])}")
            continue
        if n.op == "get_attr":
            rhs = _attr_path("self", n.target)
        elif n.op == "call_module":
            rhs = f"{_attr_path('self', n.target)}({em.call_args(n.args, n.kwargs)})"
        elif n.op == "call_method":
            rhs = f"{em.operand(n.args[0])}.{n.target}({em.call_args(n.args[1:], n.kwargs)})"
        elif n.target in INFIX and not n.kwargs:
            template = INFIX[n.target]
            if n.target is operator.getitem:
                rhs = template.format(em.operand(n.args[0]), em.fmt(n.args[1]))
            else:
                rhs = template.format(*[em.operand(a) for a in n.args])
        else:
            fn = em.add_global(n.target, getattr(n.target, "__name__", "fn"))
            rhs = f"{fn}({em.call_args(n.args, n.kwargs)})"
        lines.append(f"    {n.name} = {rhs}")
    return "\n".join(lines) + "\n", em.globals
    ### END SOLUTION


class MiniGraphModule(nn.Module):
    def __init__(self, root, graph):
        super().__init__()
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 codegen-solution
        def _copy_attr(src, dst, target):
            *prefix, field = target.split(".")
            for item in prefix:
                f, t = getattr(src, item), getattr(dst, item, None)
                if f is t:
                    return
                if t is None:
                    t = nn.Module()
                    setattr(dst, item, t)
                src, dst = f, t
            value = getattr(src, field)
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                dst.register_buffer(field, value)
            else:
                setattr(dst, field, value)

        self.graph = graph
        self.training = root.training
        for n in graph.nodes:
            if n.op in ("call_module", "get_attr"):
                _copy_attr(root, self, n.target)
        self.code, namespace = python_code(graph)
        exec(compile(self.code, "<mini-fx generated>", "exec"), namespace)
        self._forward = namespace["forward"]
        ### END SOLUTION

    def forward(self, *args):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 codegen-solution
        return self._forward(self, *args)
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "codegen-explore", "locked": false, "schema_version": 3, "solution": false}
mini = MiniGraphModule(transformer, from_fx(torch.fx.symbolic_trace(transformer)))
print(mini.code)
print("equal to eager:", torch.allclose(mini(tokens), transformer(tokens), atol=1e-6))
mini_rn = MiniGraphModule(resnet, mini_trace(resnet))      # your tracer and your code generator, end to end
print("ResNet end to end:", torch.allclose(mini_rn(images), resnet(images), atol=1e-5))

# %% nbgrader={"grade": true, "grade_id": "codegen", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="From graph back to Python"
check("codegen")

# %% [markdown] nbgrader={"grade": false, "grade_id": "shape-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Shape propagation with an `Interpreter` (10 points)
#
# From here on we use the real `torch.fx`. A `torch.fx.Interpreter` runs a `GraphModule` node by node in
# Python; `run_node(n)` is called for every node (placeholders and output included) and returns its value.
# Subclassing it is the standard way to write an *analysis*: run the graph once on example inputs and
# write what you learn into `node.meta`, the dict every fx node carries. This is what fx's `ShapeProp`
# does, and what `torch.compile` does with fake tensors (no data, only metadata).
#
# **Write `ShapeRecorder(torch.fx.Interpreter)`**: for every node whose value is a `torch.Tensor`, set
# `node.meta["shape"]` (a tuple of ints), `node.meta["dtype"]`, `node.meta["stride"]` (a tuple),
# `node.meta["storage_offset"]` (an int: where a view starts in its storage) and
# `node.meta["requires_grad"]`; nodes with other values (ints, tuples of tensors) get none of these keys.
# `run(*args)` returns what the graph returns, as usual. **Write `activation_bytes(gm)`**: after a run,
# `{node name: bytes}` for every `call_*` node with a recorded shape (numel × element size): the memory
# each activation needs. (fx's `ShapeProp` records a `TensorMetadata` in `meta["tensor_meta"]` instead,
# without the storage offset.)

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "shape-solution", "locked": false, "schema_version": 3, "solution": true}
class ShapeRecorder(torch.fx.Interpreter):
    def run_node(self, n):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 shape-solution
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            n.meta["shape"] = tuple(result.shape)
            n.meta["dtype"] = result.dtype
            n.meta["stride"] = tuple(result.stride())
            n.meta["storage_offset"] = result.storage_offset()
            n.meta["requires_grad"] = result.requires_grad
        return result
        ### END SOLUTION


def activation_bytes(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 shape-solution
    out = {}
    for n in gm.graph.nodes:
        if n.op.startswith("call_") and "shape" in n.meta:
            out[n.name] = math.prod(n.meta["shape"]) * n.meta["dtype"].itemsize
    return out
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "shape-explore", "locked": false, "schema_version": 3, "solution": false}
gm = torch.fx.symbolic_trace(transformer)
ShapeRecorder(gm).run(tokens)
for n in list(gm.graph.nodes)[:8]:
    print(f"{n.name:<12} {n.op:<14} {n.meta.get('shape')!s:<14} {n.meta.get('dtype')}")
sizes = activation_bytes(gm)
print("largest activation:", max(sizes, key=sizes.get), max(sizes.values()), "bytes")

# %% nbgrader={"grade": true, "grade_id": "shape_prop", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Shape propagation"
check("shape_prop")

# %% [markdown] nbgrader={"grade": false, "grade_id": "fold-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Folding BatchNorm into convolutions (15 points)
#
# In eval mode a `BatchNorm2d` is an affine map per channel with frozen statistics:
# $\mathrm{bn}(y) = \gamma \frac{y - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta$. When its input is a
# convolution $y = W * x + b$, the two compose into one convolution with
#
# $$W' = W \cdot s, \qquad b' = (b - \mu)\, s + \beta, \qquad s = \frac{\gamma}{\sqrt{\sigma^2 + \varepsilon}}$$
#
# ($s$ per output channel, broadcast over $W$'s other dimensions; $b = 0$ for a conv without bias,
# $\gamma = 1, \beta = 0$ for a BN with `affine=False`). One kernel instead of two, and one activation less.
#
# **Write `fold_conv_bn(gm) -> gm`** for a `GraphModule` traced from a model in eval mode:
#
# * fold every `call_module` of a `BatchNorm2d` whose input is a `call_module` of a `Conv2d` that has **no
#   other user** (if the conv's output is also read elsewhere, that reader needs the un-normalized
#   values: leave the pair alone);
# * **do not change modules in place**: `gm` shares its submodules with the model it was traced from
#   (and a conv module may be called at several places). Make a folded copy (`copy.deepcopy`), register
#   it under a new name (`gm.add_submodule`), point the conv node at it, route the BN's users to the conv
#   node and erase the BN node;
# * **training mode is refused**: if `gm` or any of its `BatchNorm2d` is in training mode, raise
#   `ValueError` (in training BN normalizes with the batch's statistics, which folding cannot know);
# * finish with `gm.graph.lint()` and `gm.recompile()`, and return `gm`.
#
# Only `Conv2d` followed by `BatchNorm2d` folds here. `torch.fx.experimental.optimization.fuse` follows
# other rules: it also folds `Linear`/`Conv1d` + `BatchNorm1d`, skips nothing for a conv module called at
# several places (it changes the module itself), and raises `AssertionError` in training mode.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "fold-solution", "locked": false, "schema_version": 3, "solution": true}
def fold_conv_bn(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 fold-solution
    modules = dict(gm.named_modules())
    if gm.training or any(isinstance(m, nn.BatchNorm2d) and m.training for m in modules.values()):
        raise ValueError("fold_conv_bn folds the running statistics of eval mode: call model.eval() first")
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.BatchNorm2d):
            continue
        conv_node = node.args[0]
        if not (isinstance(conv_node, torch.fx.Node) and conv_node.op == "call_module"
                and isinstance(modules.get(conv_node.target), nn.Conv2d)):
            continue
        if len(conv_node.users) != 1:
            continue
        bn, conv = modules[node.target], modules[conv_node.target]
        if bn.running_mean is None:
            continue
        with torch.no_grad():
            scale = torch.rsqrt(bn.running_var + bn.eps)
            if bn.weight is not None:
                scale = scale * bn.weight
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            shift = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
            fused = copy.deepcopy(conv)
            fused.weight = nn.Parameter(conv.weight * scale.reshape(-1, 1, 1, 1))
            fused.bias = nn.Parameter((bias - bn.running_mean) * scale + shift)
        base = conv_node.target.replace(".", "_") + "_bn_folded"
        name, k = base, 0
        while name in modules:
            k += 1
            name = f"{base}_{k}"
        gm.add_submodule(name, fused)
        modules[name] = fused
        conv_node.target = name
        node.replace_all_uses_with(conv_node)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "fold-explore", "locked": false, "schema_version": 3, "solution": false}
folded = fold_conv_bn(torch.fx.symbolic_trace(resnet))
count_bn = lambda g: sum(isinstance(g.get_submodule(n.target), nn.BatchNorm2d) for n in g.graph.nodes if n.op == "call_module")  # noqa: E731
print("BatchNorm calls left:", count_bn(folded), "of", count_bn(torch.fx.symbolic_trace(resnet)))
print("max |difference| to eager:", (folded(images) - resnet(images)).abs().max().item())

# %% nbgrader={"grade": true, "grade_id": "conv_bn_fold", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Conv-BatchNorm folding"
check("conv_bn_fold")

# %% [markdown] nbgrader={"grade": false, "grade_id": "dce-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Dead code and common subexpressions (10 points)
#
# Two classic clean-ups. **Dead-code elimination** removes nodes whose value nobody uses;
# **common-subexpression elimination** keeps one node of several that compute the same thing from the
# same inputs. Both are only safe for *pure* nodes: an in-place op is "unused" yet changes a tensor,
# and two `torch.rand_like(x)` are not the same value. (Compilers usually *functionalize* first, turning
# mutations into pure ops; here we keep the mutations and respect them.)
#
# **Write `is_impure(node)`**, true for:
#
# * `placeholder` and `output` nodes;
# * functions in `RANDOM_FUNCTIONS` and methods in `RANDOM_METHODS` (given);
# * in-place ops: a function or method whose name ends in one `_` (`add_`, `relu_`, not `__add__`), a call
#   with the keyword argument `inplace=True`, a `call_module` of a module whose `inplace` attribute is true;
# * anything `node.is_impure()` (fx's own list: `torch._assert`, modules marked `_is_impure`...) says is.
#
# **Write `dead_code_elimination(gm) -> int`**: erase every pure node without users (a chain of dead
# nodes goes entirely; walking the graph backwards does it in one pass), recompile, return how many were
# erased. **Write `cse(gm) -> int`**: walk forwards, and for each pure node that is not a placeholder or
# output, build a key of `(op, target, args, kwargs)`; if an earlier node has the same key, route this
# node's users to it and erase it. **Every impure node is a barrier**: no node after it is merged into a
# node before it (`a = t * 3; t.add_(1); b = t * 3` computes two different values; compilers track which
# tensors each mutation touches, we simply forget everything seen so far). Keys must be hashable (lists, dicts, slices inside `args`) and tell
# constants of different types apart (`x + 1`, `x + 1.0` and `x + True` differ). Recompile and return
# how many were erased. Note that fx's own `Graph.eliminate_dead_code()` (with fx's default purity, which
# does not know `add_` or `inplace=True`) and its `CSEPass` (which merges `x + 1` with `x + 1.0` and
# ignores mutations) follow other rules than these: the checks grade the rules stated here.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "dce-solution", "locked": false, "schema_version": 3, "solution": true}
def is_impure(node):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 dce-solution
    if node.op in ("placeholder", "output"):
        return True
    if node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_function":
        if node.target in RANDOM_FUNCTIONS:
            return True
        name = getattr(node.target, "__name__", "")
        if name.endswith("_") and not name.endswith("__"):
            return True
    if node.op == "call_method":
        if node.target in RANDOM_METHODS or (node.target.endswith("_") and not node.target.endswith("__")):
            return True
    if node.op == "call_module":
        if getattr(node.graph.owning_module.get_submodule(node.target), "inplace", False):
            return True
    return node.is_impure()
    ### END SOLUTION


def dead_code_elimination(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 dce-solution
    removed = 0
    for node in reversed(list(gm.graph.nodes)):
        if not node.users and not is_impure(node):
            gm.graph.erase_node(node)
            removed += 1
    gm.recompile()
    return removed
    ### END SOLUTION


def cse(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 dce-solution
    def key_of(a):
        if isinstance(a, torch.fx.Node):
            return ("node", a)
        if isinstance(a, (tuple, list)):
            return (type(a).__name__ if isinstance(a, tuple) else "list", tuple(key_of(x) for x in a))
        if isinstance(a, dict):
            return ("dict", tuple(sorted((k, key_of(v)) for k, v in a.items())))
        if isinstance(a, slice):
            return ("slice", key_of(a.start), key_of(a.stop), key_of(a.step))
        return (type(a).__name__, a)

    seen, removed = {}, 0
    for node in list(gm.graph.nodes):
        if is_impure(node):
            seen.clear()          # a barrier: an in-place op may have changed what earlier nodes read
            continue
        key = (node.op, node.target, key_of(tuple(node.args)), key_of(dict(node.kwargs)))
        if key in seen:
            node.replace_all_uses_with(seen[key])
            gm.graph.erase_node(node)
            removed += 1
        else:
            seen[key] = node
    gm.recompile()
    return removed
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "dce-explore", "locked": false, "schema_version": 3, "solution": false}
class Messy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        a, b = torch.relu(self.lin(x)), torch.relu(self.lin(x))   # the same twice
        unused = (a * 3).sum()                                    # dead
        t = x.clone()
        t.add_(1)                                                 # unused result, but it changes t
        return a + b + t


gm = torch.fx.symbolic_trace(Messy())
print(len(gm.graph.nodes), "nodes; cse removed", cse(gm), "; dce removed", dead_code_elimination(gm), "->", len(gm.graph.nodes))
print(gm.code)

# %% nbgrader={"grade": true, "grade_id": "dce_cse", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Dead code and common subexpressions"
check("dce_cse")

# %% [markdown] nbgrader={"grade": false, "grade_id": "rewrite-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — A pattern rewrite: `x * sigmoid(x)` → `F.silu(x)` (10 points)
#
# Rewrites replace a small subgraph by an equivalent, cheaper one. SiLU written by hand,
# `x * torch.sigmoid(x)`, runs two kernels and keeps the sigmoid's output alive; `F.silu(x)` is one.
#
# **Write `fuse_silu(gm) -> int`**. A match is a **mul** node (`operator.mul`, `torch.mul`, or the method
# `mul`; exactly two node arguments, no kwargs) whose one operand is a **sigmoid** node
# (`torch.sigmoid` or the method `sigmoid`, one argument, no kwargs) of the **same node** as the other
# operand, in either order, where the sigmoid has **no other user**. Insert `F.silu(x)` before the mul
# (`gm.graph.inserting_before`, `call_function`), route the mul's users to it, erase the mul and the
# sigmoid. Near misses stay as they are: `x * torch.sigmoid(y)`, or a sigmoid whose value is also used
# elsewhere (it would have to be computed anyway). The new node is exactly `call_function(F.silu, (x,))`
# with no kwargs. Lint, recompile, return the number of rewrites. (`replace_pattern` with a traced
# replacement would record `F.silu(x, inplace=False)` and match one spelling only: write the matcher.)

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "rewrite-solution", "locked": false, "schema_version": 3, "solution": true}
def fuse_silu(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 rewrite-solution
    def is_mul(n):
        return ((n.op == "call_function" and n.target in (operator.mul, torch.mul)) or (n.op == "call_method" and n.target == "mul")) \
            and len(n.args) == 2 and not n.kwargs and all(isinstance(a, torch.fx.Node) for a in n.args)

    def is_sigmoid(n):
        return ((n.op == "call_function" and n.target is torch.sigmoid) or (n.op == "call_method" and n.target == "sigmoid")) \
            and len(n.args) == 1 and not n.kwargs

    count = 0
    for node in list(gm.graph.nodes):
        if not is_mul(node):
            continue
        a, b = node.args
        for sig, other in ((b, a), (a, b)):
            if is_sigmoid(sig) and sig.args[0] is other and len(sig.users) == 1:
                with gm.graph.inserting_before(node):
                    silu = gm.graph.call_function(F.silu, (other,))
                node.replace_all_uses_with(silu)
                gm.graph.erase_node(node)
                gm.graph.erase_node(sig)
                count += 1
                break
    gm.graph.lint()
    gm.recompile()
    return count
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "rewrite-explore", "locked": false, "schema_version": 3, "solution": false}
class HandSiLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        h = h * torch.sigmoid(h)            # a match
        g = self.b(h)
        s = g.sigmoid()
        return g * s + s                    # a near miss: s has another user


gm = torch.fx.symbolic_trace(HandSiLU())
print("rewrites:", fuse_silu(gm))
print(gm.code)

# %% nbgrader={"grade": true, "grade_id": "rewrite", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="A pattern rewrite"
check("rewrite")

# %% [markdown] nbgrader={"grade": false, "grade_id": "profiler-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — A profiling interpreter (7 points)
#
# Where does the time go? An `Interpreter` that wraps `run_node` with a clock answers per node, in terms
# of the graph you are optimizing (the PyTorch profiler answers per ATen op and kernel).
#
# **Write `ProfilingInterpreter(torch.fx.Interpreter)`** with an attribute `stats`:
# `{node name: {"seconds": total, "calls": count}}`, accumulated over every `run` (use
# `time.perf_counter()` around `super().run_node(n)`; placeholders and the output are nodes too).
# **Write `profile_graph(gm, *args, runs=3)`** returning `{"nodes": stats, "total": seconds, "runs": runs,
# "result": the last run's result}`, where `total` is the time of the `runs` calls of `run` measured
# around them. **Write `profile_summary(report, top=10) -> str`**: a header line, then one line per node,
# the slowest first, at most `top` of them, each starting with the node's name followed by its total
# milliseconds, calls and share of the total in percent, as numbers separated by spaces
# (`relu_1   0.042   3   1.7%`).
#
# Timings depend on the machine's load, so the checks look at everything else: one entry per node that
# ran (a node whose value `run` was given in `initial_env` does not run), calls per node, the result
# (interpreting the *graph*: the checks edit graphs without recompiling them), totals that contain the
# node times, and a summary that agrees with the report it was given.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "profiler-solution", "locked": false, "schema_version": 3, "solution": true}
class ProfilingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 profiler-solution
        self.stats = {}
        ### END SOLUTION

    def run_node(self, n):
        ### BEGIN SOLUTION
        # IPT-CANARY lab06 profiler-solution
        start = time.perf_counter()
        result = super().run_node(n)
        elapsed = time.perf_counter() - start
        entry = self.stats.setdefault(n.name, {"seconds": 0.0, "calls": 0})
        entry["seconds"] += elapsed
        entry["calls"] += 1
        return result
        ### END SOLUTION


def profile_graph(gm, *args, runs=3):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 profiler-solution
    interp, total, result = ProfilingInterpreter(gm), 0.0, None
    for _ in range(runs):
        start = time.perf_counter()
        result = interp.run(*args)
        total += time.perf_counter() - start
    return {"nodes": interp.stats, "total": total, "runs": runs, "result": result}
    ### END SOLUTION


def profile_summary(report, top=10):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 profiler-solution
    rows = sorted(report["nodes"].items(), key=lambda kv: kv[1]["seconds"], reverse=True)[:top]
    lines = [f"{'node':<20} {'total ms':>10} {'calls':>6} {'share':>7}"]
    for name, s in rows:
        lines.append(f"{name:<20} {1e3 * s['seconds']:>10.3f} {s['calls']:>6} {100 * s['seconds'] / report['total']:>6.1f}%")
    return "\n".join(lines)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "profiler-explore", "locked": false, "schema_version": 3, "solution": false}
report = profile_graph(torch.fx.symbolic_trace(resnet), images, runs=5)
print(profile_summary(report, top=8))

# %% [markdown] nbgrader={"grade": false, "grade_id": "profile-plot-md", "locked": true, "schema_version": 3, "solution": false}
# The same report as a bar chart. The convolutions dominate, as expected; the many tiny bars are the
# interpreter's per-node overhead (a few microseconds each), which generated code (`gm(x)`) does not pay.

# %% nbgrader={"grade": false, "grade_id": "profile-plot", "locked": true, "schema_version": 3, "solution": false}
def plot_profile(report, title):
    gm_nodes = {n.name: n.op for n in torch.fx.symbolic_trace(resnet).graph.nodes}
    names = list(report["nodes"])
    ms = [1e3 * report["nodes"][k]["seconds"] / report["runs"] for k in names]
    colours = [OP_COLOURS.get(gm_nodes.get(k, "call_function"), "#ccc") for k in names]
    fig, ax = plt.subplots(figsize=(13, 3.5))
    ax.bar(range(len(names)), ms, color=colours, edgecolor="#555", linewidth=0.4)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
    ax.set_ylabel("ms per run")
    ax.set_title(title)
    fig.tight_layout()
    return fig


plot_profile(report, "TinyResNet, time per node (ProfilingInterpreter, mean of 5 runs)")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "profiler", "locked": true, "points": 7, "schema_version": 3, "solution": false} part_title="A profiling interpreter"
check("profiler")

# %% [markdown] nbgrader={"grade": false, "grade_id": "decompose-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 8 — Down to Core ATen (8 points)
#
# The graphs so far hold whatever the Python code called: modules, `F.softmax`, methods. Compilers and
# exporters want a small, fixed vocabulary: **Core ATen**, about 190 operator overloads tagged
# `torch.Tag.core`, into which most of the others *decompose* (PyTorch 2.13 registers 1588 ATen operator
# names with 3110 overloads): `linear` → `permute`, `addmm`; `hardswish` → `clamp`, `mul`, `div`...
# Core ops stay as they are: `gelu` is Core ATen and stays `aten.gelu`. `make_fx` traces a function at the dispatcher level (below autograd, like the `TorchDispatchMode`
# of lab 4) and applies a decomposition table while doing so; `torch.export`'s `run_decompositions()` uses
# the same table.
#
# **Write `to_core_aten(fn, *args) -> GraphModule`** with
# `torch.fx.experimental.proxy_tensor.make_fx(fn, decomposition_table=torch._decomp.core_aten_decompositions())`;
# every `call_function` target must then be an `OpOverload` tagged `torch.Tag.core` (or `operator.getitem`,
# which picks one result of a multi-output op). **Write `op_histogram(gm) -> dict`**: how many
# `call_function` nodes there are per target, keyed by `str(target)` for ATen ops (`"aten.addmm.default"`)
# and by `target.__name__` for Python functions (`"getitem"`). **Write `run_graph(gm, *args)`**, your own
# small interpreter: walk `gm.graph.nodes` with an environment dict: placeholders take the arguments in
# order, `get_attr` reads the (dotted) attribute of `gm`, `call_function` calls the target with its
# arguments looked up (`torch.fx.node.map_arg`), `output` returns its argument; any other opcode
# (`call_method`, `call_module`) raises `RuntimeError`. The graph is the truth: the checks edit graphs
# without recompiling them, so `gm`'s generated code is stale. Neither calling `gm` nor
# `torch.fx.Interpreter` (which runs every opcode) follows these rules.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "decompose-solution", "locked": false, "schema_version": 3, "solution": true}
def to_core_aten(fn, *args):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 decompose-solution
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(fn, decomposition_table=core_aten_decompositions())(*args)
    ### END SOLUTION


def op_histogram(gm):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 decompose-solution
    counts = Counter()
    for n in gm.graph.nodes:
        if n.op == "call_function":
            key = str(n.target) if isinstance(n.target, torch._ops.OpOverload) else n.target.__name__
            counts[key] += 1
    return dict(counts)
    ### END SOLUTION


def run_graph(gm, *args):
    ### BEGIN SOLUTION
    # IPT-CANARY lab06 decompose-solution
    env, inputs = {}, iter(args)
    load = lambda a: torch.fx.node.map_arg(a, lambda n: env[n])  # noqa: E731
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(inputs)
        elif n.op == "get_attr":
            value = gm
            for atom in n.target.split("."):
                value = getattr(value, atom)
            env[n] = value
        elif n.op == "call_function":
            env[n] = n.target(*load(n.args), **load(n.kwargs))
        elif n.op == "output":
            return load(n.args[0])
        else:
            raise RuntimeError(f"unexpected opcode {n.op} in an ATen graph")
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "decompose-explore", "locked": false, "schema_version": 3, "solution": false}
def block(x, w, b):
    return F.layer_norm(F.gelu(F.linear(x, w, b)), (8,)).softmax(-1)


x, w, b = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8)
core = to_core_aten(block, x, w, b)
print(op_histogram(core))
print("run_graph equals eager:", torch.allclose(run_graph(core, x, w, b), block(x, w, b), atol=1e-6))

# %% nbgrader={"grade": true, "grade_id": "decompose", "locked": true, "points": 8, "schema_version": 3, "solution": false} part_title="Down to Core ATen"
check("decompose")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built the front of `torch.fx` (proxies, a tracer, code generation) and used the real one the
# way compilers do: analyses as interpreters, graph surgery for folding, clean-ups and rewrites, a
# profiler, and a lowering to Core ATen. `torch.compile` and `torch.export` produce exactly these graphs;
# lab 7 writes a `torch.compile` backend that receives them. Save the notebook and submit it
# (`make submit LAB=lab06`).
