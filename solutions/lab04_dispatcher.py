# ---
# jupyter:
#   inside_pytorch:
#     lab: lab04
#     title: The dispatcher
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
# # Lab 4 — The dispatcher
#
# Every call like `torch.add(a, b)` goes through the **dispatcher**: it looks at the arguments,
# computes a set of *dispatch keys* (`AutogradCPU`, `CPU`, `Python`, ...), and runs the kernel
# registered for the highest-priority key. That kernel may do its job (autograd records a node,
# a tracer writes down the call) and *redispatch* to the next key below, until a backend kernel
# computes the result. This is how autograd, `torch.compile`'s tracing, vmap, tensor subclasses
# and new devices all plug into one operator library.
#
# The first half of the lab rebuilds the dispatcher in plain Python; the second half uses the real
# one in PyTorch 2.13.
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `keysets` | `DispatchKeySet` (a bitset ordered by priority), thread-local include/exclude sets, the keyset of a call | 15 | 2 |
# | `dispatch` | operator schemas, a registry of kernels, dispatch by priority, fallthrough kernels, boxed fallbacks, redispatch | 25 | 3 |
# | `redispatch` | an autograd kernel that records and redispatches below itself, and a tracing fallback | 15 | 1.5 |
# | `custom_op` | a real `torch.library` custom op with a CPU kernel, a fake kernel and an autograd formula that passes `opcheck` and `torch.compile(fullgraph=True)` | 20 | 1 |
# | `logging_mode` | a `TorchDispatchMode` that logs the ATen ops a module runs, forward and backward | 10 | 0.5 |
# | `python_device` | a "device" written in Python (a `__torch_dispatch__` wrapper subclass over numpy) on which an MLP trains | 15 | 1.5 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 9.5 in all.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests run your code. The hidden graders use many more cases
# (randomly generated key and kernel tables, other modules), so a green `check` is a good sign,
# not a guarantee.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import ast
import threading
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map


class DispatchKey(IntEnum):
    """The keys of the mini dispatcher. The value is the priority: higher runs first."""
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


class MissingKernelError(LookupError):
    """Raised when the dispatcher finds no kernel to run (PyTorch raises NotImplementedError here)."""


FALLTHROUGH = "FALLTHROUGH"   # register this instead of a function to make a key a fallthrough


@dataclass
class Argument:
    name: str
    type: str                  # "Tensor", "Tensor[]", "int", "float", "bool", "Scalar", "str", ...
    default: object = None     # the Python value of the default
    has_default: bool = False
    kwarg_only: bool = False   # declared after "*"


@dataclass
class Schema:
    name: str                  # "ipt::add" (namespace included)
    arguments: list            # list[Argument], in declaration order
    returns: list              # list[str], the return types ("()" returns nothing: [])


@dataclass
class Node:
    """What the mini autograd records: the op and the input tensors of one call."""
    op: str
    inputs: list


# %% [markdown] nbgrader={"grade": false, "grade_id": "keysets-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Dispatch key sets (15 points)
#
# A `DispatchKeySet` is a 64-bit integer with one bit per key (c10/core/DispatchKeySet.h). Keys are
# ordered by priority, and the key that runs is the **highest set bit**. (Real PyTorch splits the 64
# bits into *backend* bits and *functionality* bits, so that `AutogradCPU` is "Autograd + CPU"; here
# every key has its own bit, at position `int(key)`. `Undefined` has no bit: it is what an empty set's
# highest key is.)
#
# **Write `DispatchKeySet`**, an immutable set of keys:
#
# * `DispatchKeySet(keys=())` and `DispatchKeySet.from_bits(bits)`; the attribute `bits` is the integer.
#   `Undefined` in `keys` is ignored.
# * `has(key)`, `add(key)`, `remove(key)` (both return new sets), `|`, `&`, `-`, `==`, `hash`, `len`,
#   `bool`; iteration yields the keys from the **highest priority down**.
# * `highest()`: the highest-priority key, `DispatchKey.Undefined` for an empty set.
# * `below(key)`: the keys of the set with a priority strictly lower than `key`. This is the mask a
#   kernel applies before it redispatches (PyTorch: `ks & DispatchKeySet(FULL_AFTER, key)`).
#
# The keys of a call come from its tensor arguments, plus a **thread-local** state
# (c10/core/impl/LocalDispatchKeySet.h): an *included* set, always added, and an *excluded* set, always
# removed. The keyset that dispatches is
#
# $$\text{ks} = \Big(\bigcup_{\text{tensor args}} t.\text{key\_set} \;\cup\; \text{included}\Big) \setminus \text{excluded}.$$
#
# **Write** `local_keysets()` (returns the pair `(included, excluded)` of this thread, both empty at
# first), the context managers `IncludeKeys(*keys)` and `ExcludeKeys(*keys)` (like
# `c10::impl::IncludeDispatchKeyGuard` / `ExcludeDispatchKeyGuard`: add the keys on entry, put back the
# previous set on exit, also on an exception; they nest) and `compute_keyset(args)`, which applies the
# formula above to a list of arguments. Tensors are `MiniTensor`s (defined just below your cell: they
# have `key_set`); an argument may also be a list or tuple of tensors; anything else has no keys.
# Use `threading.local()`: another thread must not see this thread's guards.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "keysets-solution", "locked": false, "schema_version": 3, "solution": true}
class DispatchKeySet:
    """An immutable set of dispatch keys, stored as a bitset; the highest bit has the highest priority."""

    def __init__(self, keys=()):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        bits = 0
        for key in keys:
            key = DispatchKey(key)
            if key != DispatchKey.Undefined:
                bits |= 1 << int(key)
        self.bits = bits
        ### END SOLUTION

    @classmethod
    def from_bits(cls, bits):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        ks = cls()
        ks.bits = int(bits)
        return ks
        ### END SOLUTION

    def has(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return bool((self.bits >> int(key)) & 1) if key != DispatchKey.Undefined else False
        ### END SOLUTION

    def add(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return self | DispatchKeySet([key])
        ### END SOLUTION

    def remove(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return self - DispatchKeySet([key])
        ### END SOLUTION

    def __or__(self, other):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return DispatchKeySet.from_bits(self.bits | other.bits)
        ### END SOLUTION

    def __and__(self, other):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return DispatchKeySet.from_bits(self.bits & other.bits)
        ### END SOLUTION

    def __sub__(self, other):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return DispatchKeySet.from_bits(self.bits & ~other.bits)
        ### END SOLUTION

    def __eq__(self, other):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return isinstance(other, DispatchKeySet) and self.bits == other.bits
        ### END SOLUTION

    def __hash__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return hash(self.bits)
        ### END SOLUTION

    def __len__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return bin(self.bits).count("1")
        ### END SOLUTION

    def __bool__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return self.bits != 0
        ### END SOLUTION

    def __iter__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        for bit in range(self.bits.bit_length() - 1, 0, -1):
            if (self.bits >> bit) & 1:
                yield DispatchKey(bit)
        ### END SOLUTION

    def highest(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return DispatchKey(self.bits.bit_length() - 1) if self.bits else DispatchKey.Undefined
        ### END SOLUTION

    def below(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        return DispatchKeySet.from_bits(self.bits & ((1 << int(key)) - 1))
        ### END SOLUTION

    def __repr__(self):
        return "DispatchKeySet(" + ", ".join(k.name for k in self) + ")"


_tls = threading.local()


def local_keysets():
    """(included, excluded) of the current thread."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 keysets-solution
    return (getattr(_tls, "included", DispatchKeySet()), getattr(_tls, "excluded", DispatchKeySet()))
    ### END SOLUTION


class IncludeKeys:
    """with IncludeKeys(DispatchKey.Tracer): ...  adds the keys to this thread's included set."""

    def __init__(self, *keys):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        self.keys = DispatchKeySet(keys)
        ### END SOLUTION

    def __enter__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        self.previous = local_keysets()[0]
        _tls.included = self.previous | self.keys
        return self
        ### END SOLUTION

    def __exit__(self, *exc):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        _tls.included = self.previous
        return False
        ### END SOLUTION


class ExcludeKeys:
    """with ExcludeKeys(DispatchKey.AutogradCPU): ...  adds the keys to this thread's excluded set."""

    def __init__(self, *keys):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        self.keys = DispatchKeySet(keys)
        ### END SOLUTION

    def __enter__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        self.previous = local_keysets()[1]
        _tls.excluded = self.previous | self.keys
        return self
        ### END SOLUTION

    def __exit__(self, *exc):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 keysets-solution
        _tls.excluded = self.previous
        return False
        ### END SOLUTION


def compute_keyset(args):
    """The keyset of a call: the keys of its tensor arguments, plus included, minus excluded."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 keysets-solution
    ks = DispatchKeySet()
    for arg in args:
        for item in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if isinstance(item, MiniTensor):
                ks = ks | item.key_set
    included, excluded = local_keysets()
    return (ks | included) - excluded
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "minitensor", "locked": true, "schema_version": 3, "solution": false}
class MiniTensor:
    """A stand-in for a tensor: a value and the dispatch keys it carries."""

    def __init__(self, value, keys=(DispatchKey.CPU,), requires_grad=False):
        self.value = value
        self.key_set = DispatchKeySet(keys)
        self.requires_grad = requires_grad
        self.grad_fn = None

    def __repr__(self):
        return f"MiniTensor({self.value!r}, {self.key_set})"


# %% nbgrader={"grade": false, "grade_id": "keysets-explore", "locked": false, "schema_version": 3, "solution": false}
a = MiniTensor(1.0, [DispatchKey.CPU, DispatchKey.AutogradCPU])
b = MiniTensor(2.0, [DispatchKey.CPU, DispatchKey.Python])
print(compute_keyset([a, b, 3]), "highest:", compute_keyset([a, b]).highest().name)
with ExcludeKeys(DispatchKey.AutogradCPU), IncludeKeys(DispatchKey.Tracer):
    print("inside the guards:", compute_keyset([a, b]))
print("after:", compute_keyset([a, b]))

# %% nbgrader={"grade": true, "grade_id": "keysets", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Dispatch key sets"
check("keysets")

# %% [markdown] nbgrader={"grade": false, "grade_id": "dispatch-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — Schemas, kernels and dispatch (25 points)
#
# Every operator is declared once with a **schema**, the same language as
# `aten/src/ATen/native/native_functions.yaml` and `torch.library.define`:
#
# ```
# ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
# ipt::split2(Tensor self) -> (Tensor, Tensor)
# ipt::log_it(Tensor self, str msg="") -> ()
# ```
#
# **Write `parse_schema(text)`** returning a `Schema`: the name, the arguments (type, name, an
# optional `=default` parsed as a Python literal: `1`, `-1.5`, `True`, `None`, `"text"`; arguments after
# `*` are keyword-only) and the list of return types (`()` is no return). You may assume that default
# values contain no commas or parentheses. **Write `bind(schema, args, kwargs)`**: the full list of
# argument values in schema order, defaults filled in. Raise `TypeError` for too many positional
# arguments, a keyword-only argument passed positionally, an unknown or repeated keyword, or a missing
# argument without default.
#
# **Write the `Dispatcher`**, the registry (aten/src/ATen/core/dispatch/Dispatcher.h, OperatorEntry.h):
#
# * `define(schema_text)` registers an operator (`RuntimeError` if its name is already defined) and
#   returns its `OperatorHandle` (given below: `name`, `schema`, `kernels`).
# * `impl(name, key, kernel)` registers a kernel of one operator for one key. A kernel is called as
#   `kernel(keyset, *args)` with the keyset it was dispatched with and the **bound** arguments.
#   `kernel=FALLTHROUGH` makes the key a *fallthrough* for this operator. Unknown name: `KeyError`.
#   Registering again for the same operator and key **replaces** the earlier kernel (PyTorch warns
#   "Overriding a previously registered kernel" and does the same). In this lab a second `fallback` for a
#   key replaces the first too (PyTorch is stricter there: it raises "Tried to register multiple backend
#   fallbacks for the same dispatch key").
# * `fallback(key, boxed)` registers a **boxed fallback** for a key, used by every operator that has
#   no kernel of its own for that key (PyTorch: `m.fallback(...)` in `TORCH_LIBRARY_IMPL(_, Key, m)`).
#   A boxed kernel is generic: it is called as `boxed(op, keyset, stack)` with the `OperatorHandle`
#   and the bound arguments as a list, the *stack*, and it leaves the op's **outputs** on the stack
#   (PyTorch: it pops the arguments and pushes the returns). The dispatcher then returns `stack[0]`
#   for one return, a tuple for several, `None` for `()`. `boxed=FALLTHROUGH` makes the key a
#   fallthrough for every operator without a kernel of its own for it.
# * `call(name, *args, **kwargs)`: bind the arguments, compute the keyset (`compute_keyset`, TLS
#   included) and dispatch.
# * `_dispatch(op, keyset, args)` is the core that both `call` and `redispatch` use.
# * `redispatch(name, keyset, *args)`: dispatch the **already bound** arguments with exactly the keyset
#   given (no TLS, no recomputation). This is how a kernel hands over to the keys below it.
#
# Dispatching on a keyset: walk the keys from the highest down. For each key take the op's own kernel,
# else the key's fallback. A fallthrough means "not my business": go on to the next key. A kernel or a
# boxed fallback runs, and its result is the result. A key with neither (or an empty keyset) raises
# `MissingKernelError` naming the op and the key, e.g.
# `could not run 'ipt::add' with arguments from the 'Python' backend`. Note that a missing kernel does
# **not** fall through: only an explicit fallthrough does. (PyTorch precomputes the fallthrough keys
# into a mask per operator so that `highest()` lands directly on the right key; the result is the same.)

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "dispatch-solution", "locked": false, "schema_version": 3, "solution": true}
@dataclass
class OperatorHandle:
    name: str
    schema: Schema
    kernels: dict = field(default_factory=dict)   # DispatchKey -> kernel function or FALLTHROUGH


def parse_schema(text):
    """'ns::name(Type arg, ..., *, Type kw=default) -> Ret' -> Schema."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 dispatch-solution
    head, _, ret = text.partition("->")
    head, ret = head.strip(), ret.strip()
    name, _, rest = head.partition("(")
    assert rest.endswith(")"), f"bad schema: {text!r}"
    arguments, kwarg_only = [], False
    for piece in rest[:-1].split(","):
        piece = piece.strip()
        if not piece:
            continue
        if piece == "*":
            kwarg_only = True
            continue
        decl, eq, default = piece.partition("=")
        typ, arg_name = decl.split()
        arguments.append(Argument(arg_name, typ, ast.literal_eval(default.strip()) if eq else None, bool(eq), kwarg_only))
    if ret.startswith("("):
        returns = [r.strip() for r in ret[1:-1].split(",") if r.strip()]
    else:
        returns = [ret]
    return Schema(name.strip(), arguments, returns)
    ### END SOLUTION


def bind(schema, args, kwargs):
    """The full argument list of a call, in schema order, defaults filled in."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 dispatch-solution
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(positional):
        raise TypeError(f"{schema.name}() takes {len(positional)} positional arguments but {len(args)} were given")
    names = [a.name for a in schema.arguments]
    for key in kwargs:
        if key not in names:
            raise TypeError(f"{schema.name}() got an unexpected keyword argument {key!r}")
    bound = []
    for index, arg in enumerate(schema.arguments):
        if index < len(args):
            if arg.name in kwargs:
                raise TypeError(f"{schema.name}() got multiple values for argument {arg.name!r}")
            bound.append(args[index])
        elif arg.name in kwargs:
            bound.append(kwargs[arg.name])
        elif arg.has_default:
            bound.append(arg.default)
        else:
            raise TypeError(f"{schema.name}() missing required argument {arg.name!r}")
    return bound
    ### END SOLUTION


class Dispatcher:
    def __init__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        self.ops = {}
        self.fallbacks = {}
        ### END SOLUTION

    def define(self, schema_text):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        schema = parse_schema(schema_text)
        if schema.name in self.ops:
            raise RuntimeError(f"operator {schema.name} is already defined")
        op = self.ops[schema.name] = OperatorHandle(schema.name, schema)
        return op
        ### END SOLUTION

    def impl(self, name, key, kernel):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        self.ops[name].kernels[DispatchKey(key)] = kernel
        ### END SOLUTION

    def fallback(self, key, boxed):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        self.fallbacks[DispatchKey(key)] = boxed
        ### END SOLUTION

    def call(self, name, *args, **kwargs):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        op = self.ops[name]
        bound = bind(op.schema, args, kwargs)
        return self._dispatch(op, compute_keyset(bound), bound)
        ### END SOLUTION

    def redispatch(self, name, keyset, *args):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        return self._dispatch(self.ops[name], keyset, list(args))
        ### END SOLUTION

    def _dispatch(self, op, keyset, args):
        """The core shared by call and redispatch: run the right kernel for `keyset`."""
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 dispatch-solution
        for key in keyset:
            kernel = op.kernels.get(key)
            if kernel is not None:
                if kernel is FALLTHROUGH:
                    continue
                return kernel(keyset, *args)
            boxed = self.fallbacks.get(key)
            if boxed is FALLTHROUGH:
                continue
            if boxed is None:
                raise MissingKernelError(f"could not run '{op.name}' with arguments from the '{key.name}' backend")
            stack = list(args)
            boxed(op, keyset, stack)
            if len(op.schema.returns) == 0:
                return None
            if len(op.schema.returns) == 1:
                return stack[0]
            return tuple(stack[:len(op.schema.returns)])
        raise MissingKernelError(f"could not run '{op.name}' with arguments from the 'Undefined' backend (empty keyset)")
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "dispatch-explore", "locked": false, "schema_version": 3, "solution": false}
d = Dispatcher()
d.define("ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
d.impl("ipt::add", DispatchKey.CPU, lambda ks, x, y, alpha: MiniTensor(x.value + alpha * y.value))
d.fallback(DispatchKey.ADInplaceOrView, FALLTHROUGH)


def python_fallback(op, keyset, stack):
    print(f"  Python fallback sees {op.name} with {len(stack)} arguments; handing over below Python")
    stack[:] = [d.redispatch(op.name, keyset.below(DispatchKey.Python), *stack)]


d.fallback(DispatchKey.Python, python_fallback)
x = MiniTensor(1.0, [DispatchKey.CPU, DispatchKey.ADInplaceOrView])
y = MiniTensor(2.0, [DispatchKey.CPU, DispatchKey.Python])
print(d.call("ipt::add", x, y, alpha=10))

# %% nbgrader={"grade": true, "grade_id": "dispatch", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="Schemas, kernels and dispatch"
check("dispatch")

# %% [markdown] nbgrader={"grade": false, "grade_id": "redispatch-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Autograd and tracing as dispatch keys (15 points)
#
# Autograd is not special in PyTorch: it is the kernel at `AutogradCPU` (generated into
# `torch/csrc/autograd/generated/VariableType*.cpp`). Each one does, in essence:
#
# ```cpp
# {
#   at::AutoDispatchBelowADInplaceOrView guard;          // TLS: exclude the autograd keys
#   result = at::redispatch::add(ks & c10::after_autograd_keyset, self, other, alpha);
# }
# if (compute_requires_grad(self, other)) set_history(result, grad_fn);   // record a node
# ```
#
# The redispatch uses the keyset **masked below** autograd, so the call continues at the next key. The
# guard matters for kernels below that call other ops: while it is active those inner calls skip
# autograd, so one user-visible op records exactly one node.
#
# **Write `make_autograd_kernel(dispatcher, name, tape)`**, returning a kernel for `AutogradCPU`:
# under `ExcludeKeys(ADInplaceOrView, AutogradCPU)`, redispatch the arguments below `AutogradCPU`;
# then, if any `MiniTensor` argument (lists included) has `requires_grad`, append one
# `Node(name, inputs)` to `tape` (inputs: those tensor arguments, in order) and mark every output
# tensor (`MiniTensor`, or one inside a returned tuple) with `requires_grad = True` and
# `grad_fn = node`. Return the result.
#
# **Write `make_tracing_fallback(dispatcher, trace)`**, a *boxed* fallback for `Tracer`, the key
# `torch.jit.trace` used: append the op's name to `trace`, then, with `Tracer` excluded, redispatch the
# stack below `Tracer` and leave the outputs on the stack. Being boxed, one fallback traces every
# operator, even ones defined after it.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "redispatch-solution", "locked": false, "schema_version": 3, "solution": true}
def _tensors(args):
    out = []
    for arg in args:
        for item in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if isinstance(item, MiniTensor):
                out.append(item)
    return out


def make_autograd_kernel(dispatcher, name, tape):
    """A kernel for DispatchKey.AutogradCPU: redispatch below autograd, then record a Node."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 redispatch-solution
    def autograd_kernel(keyset, *args):
        with ExcludeKeys(DispatchKey.ADInplaceOrView, DispatchKey.AutogradCPU):
            result = dispatcher.redispatch(name, keyset.below(DispatchKey.AutogradCPU), *args)
        inputs = _tensors(args)
        if any(t.requires_grad for t in inputs):
            node = Node(name, inputs)
            tape.append(node)
            for out in _tensors([result]):
                out.requires_grad = True
                out.grad_fn = node
        return result
    return autograd_kernel
    ### END SOLUTION


def make_tracing_fallback(dispatcher, trace):
    """A boxed fallback for DispatchKey.Tracer: record the op's name, redispatch below Tracer."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 redispatch-solution
    def tracing_fallback(op, keyset, stack):
        trace.append(op.name)
        with ExcludeKeys(DispatchKey.Tracer):
            result = dispatcher.redispatch(op.name, keyset.below(DispatchKey.Tracer), *stack)
        if len(op.schema.returns) == 0:
            stack[:] = []
        elif len(op.schema.returns) == 1:
            stack[:] = [result]
        else:
            stack[:] = list(result)
    return tracing_fallback
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "redispatch-explore", "locked": false, "schema_version": 3, "solution": false}
d, tape, trace = Dispatcher(), [], []
d.define("ipt::mul(Tensor self, Tensor other) -> Tensor")
d.define("ipt::square(Tensor self) -> Tensor")
d.impl("ipt::mul", DispatchKey.CPU, lambda ks, x, y: MiniTensor(x.value * y.value, x.key_set | y.key_set))
d.impl("ipt::square", DispatchKey.CPU, lambda ks, x: d.call("ipt::mul", x, x))   # calls another op
for op_name in ("ipt::mul", "ipt::square"):
    d.impl(op_name, DispatchKey.AutogradCPU, make_autograd_kernel(d, op_name, tape))
d.fallback(DispatchKey.Tracer, make_tracing_fallback(d, trace))
x = MiniTensor(3.0, [DispatchKey.CPU, DispatchKey.AutogradCPU, DispatchKey.Tracer], requires_grad=True)
y = d.call("ipt::square", x)
print(y.value, "tape:", [n.op for n in tape], "trace:", trace)   # one node, one traced op

# %% nbgrader={"grade": true, "grade_id": "redispatch", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Autograd and tracing as dispatch keys"
check("redispatch")

# %% [markdown] nbgrader={"grade": false, "grade_id": "custom-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — A real custom op with `torch.library` (20 points)
#
# Now the real dispatcher. `torch.library.custom_op` defines an operator (schema inferred from the type
# hints), registers your function as its kernel for every backend (with no `device_types`, under the alias
# key `CompositeExplicitAutograd`; `torch._C._dispatch_dump("ipt::scaled_softplus")` shows it, next to the
# `Autograd` and `Meta` entries it adds too, which call what you register next), and makes it **opaque**:
# `torch.compile` and `torch.export` see one node `ipt.scaled_softplus`, not its insides. Opaque ops
# need two more things:
#
# * a **fake kernel** (`register_fake`): given *fake* tensors (shape, dtype, device but no data), it
#   returns fake outputs with the right metadata. `torch.compile` traces with fake tensors; without it
#   your op cannot be compiled, and a kernel that reads data (numpy!) cannot run on fake tensors.
# * an **autograd formula** (`register_autograd(backward, setup_context=...)`): the op's kernel runs
#   below autograd, so autograd knows nothing of its insides.
#
# ```python
# @torch.library.custom_op("ipt::scaled_softplus", mutates_args=())
# def scaled_softplus(x: torch.Tensor, beta: float) -> torch.Tensor: ...
#
# @scaled_softplus.register_fake
# def _(x, beta): ...
#
# scaled_softplus.register_autograd(backward, setup_context=setup_context)
# ```
#
# **Write `ipt::scaled_softplus`**: $y = \frac{1}{\beta}\log(1 + e^{\beta x})$, like
# `torch.nn.functional.softplus(x, beta)` without its threshold, for tensors of any shape (0-d and empty
# ones included) in float32 or float64, and any nonzero `beta`. Its CPU kernel must compute with
# **numpy** (`x.detach().numpy()`; `np.logaddexp(0, z)` is a stable $\log(1+e^z)$) and return a
# new tensor of `x`'s dtype, never `x` itself or a view of it. The backward:
# $\partial y/\partial x = \sigma(\beta x)$, no gradient for `beta`, written with torch ops so that it is
# itself differentiable. `torch.library.opcheck(scaled_softplus, (x, beta))` must pass, and a
# function that calls it must compile with `torch.compile(fullgraph=True)`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "custom-solution", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# IPT-CANARY lab04 custom-solution
@torch.library.custom_op("ipt::scaled_softplus", mutates_args=())
def scaled_softplus(x: torch.Tensor, beta: float) -> torch.Tensor:
    z = beta * x.detach().numpy()
    y = np.asarray(np.logaddexp(0.0, z) / beta)   # np.asarray: a 0-d input gives a numpy scalar here
    return torch.from_numpy(y).to(x.dtype)


@scaled_softplus.register_fake
def _scaled_softplus_fake(x, beta):
    return torch.empty_like(x)


def _scaled_softplus_setup_context(ctx, inputs, output):
    x, beta = inputs
    ctx.save_for_backward(x)
    ctx.beta = beta


def _scaled_softplus_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.sigmoid(ctx.beta * x), None


scaled_softplus.register_autograd(_scaled_softplus_backward, setup_context=_scaled_softplus_setup_context)
### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "custom-explore", "locked": false, "schema_version": 3, "solution": false}
x = torch.randn(4, 5, dtype=torch.double, requires_grad=True)
print(torch.library.opcheck(scaled_softplus, (x, 1.5)))
print(torch.ops.ipt.scaled_softplus.default)
compiled = torch.compile(lambda t: scaled_softplus(t, 2.0).sum(), fullgraph=True, backend="eager")
print(compiled(x), torch.nn.functional.softplus(x, 2.0, threshold=100).sum())

# %% nbgrader={"grade": true, "grade_id": "custom_op", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="A custom op with torch.library"
check("custom_op")

# %% [markdown] nbgrader={"grade": false, "grade_id": "logging-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Watching the dispatcher: a `TorchDispatchMode` (10 points)
#
# The `Python` dispatch key lets Python code sit in the dispatcher. A `TorchDispatchMode` is active for
# a `with` block: every ATen op that reaches the `Python` key (below autograd, so the backward's ops
# too) calls its `__torch_dispatch__(self, func, types, args=(), kwargs=None)`, where `func` is an
# `OpOverload` such as `aten.addmm.default`. Inside it the mode is switched off, so `func(*args,
# **kwargs)` simply runs the op. `FlopCounterMode`, `FakeTensorMode` and `make_fx` are built this way.
#
# **Write `LoggingMode`**, whose `ops` list gets `str(func)` (e.g. `"aten.addmm.default"`) of every op it
# sees, in order, and which returns each op's real result. **Write `log_training_step(module, x)`**:
# inside your mode, run `module(x).sum().backward()` and return the list of ops.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "logging-solution", "locked": false, "schema_version": 3, "solution": true}
class LoggingMode(TorchDispatchMode):
    def __init__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 logging-solution
        super().__init__()
        self.ops = []
        ### END SOLUTION

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 logging-solution
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))
        ### END SOLUTION


def log_training_step(module, x):
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 logging-solution
    with LoggingMode() as mode:
        module(x).sum().backward()
    return mode.ops
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "logging-explore", "locked": false, "schema_version": 3, "solution": false}
torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
for op_name in log_training_step(mlp, torch.randn(5, 3)):
    print(op_name)

# %% nbgrader={"grade": true, "grade_id": "logging_mode", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="A logging TorchDispatchMode"
check("logging_mode")

# %% [markdown] nbgrader={"grade": false, "grade_id": "device-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — A device written in Python (15 points)
#
# A new backend is "just" a set of kernels for its dispatch key. PyTorch reserves `PrivateUse1` for
# out-of-tree backends (C++ usually; a pure-Python one only works through the private helper
# `torch.utils.backend_registration._setup_privateuseone_for_python_backend`). This lab does **not**
# use `PrivateUse1`: its device is built only with the fully public route, a **wrapper subclass**: `torch.Tensor._make_wrapper_subclass(cls, shape, dtype=..., device=...,
# requires_grad=...)` makes a tensor with metadata and *no data*; its `__torch_dispatch__` classmethod
# receives every ATen op on it (after autograd, which works unchanged above it) and computes on your own
# payload.
#
# **Write `NumpyTensor`**, whose payload is a numpy array in the attribute `payload`:
#
# * `NumpyTensor(array)` wraps an array (metadata from the array; `device="cpu"`).
# * `__torch_dispatch__`: turn every `NumpyTensor` argument into a CPU tensor that **shares** its
#   payload's memory (`torch.from_numpy`), run `func`, and wrap every tensor result back
#   (`NumpyTensor(result.numpy())`). In-place ops (`add_`, used by SGD) then write straight into the
#   payload; they must return their **input** wrapper (the op's `func._schema.returns[0].alias_info`
#   has `is_write`), not a new one.
#
# and `to_device(t)` (a copy of a CPU tensor as a `NumpyTensor`), `to_cpu(t)` (back, a plain tensor; a copy too,
# as `.cpu()` from a real device is),
# and `module_to_device(module)`, which replaces every parameter of every submodule by an
# `nn.Parameter` wrapping a `NumpyTensor` and returns the module. (`module.to()`/`_apply` would try to
# assign `param.data`, which a wrapper subclass cannot take.) Then forward, backward and
# `torch.optim.SGD` run on your device and must match the CPU.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "device-solution", "locked": false, "schema_version": 3, "solution": true}
class NumpyTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, payload, requires_grad=False):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 device-solution
        payload = np.asarray(payload)
        dtype = torch.from_numpy(np.empty(0, payload.dtype)).dtype
        t = torch.Tensor._make_wrapper_subclass(cls, payload.shape, dtype=dtype, device="cpu",
                                                requires_grad=requires_grad)
        t.payload = payload
        return t
        ### END SOLUTION

    def __repr__(self):
        return f"NumpyTensor({self.payload!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        ### BEGIN SOLUTION
        # IPT-CANARY lab04 device-solution
        def unwrap(a):
            return torch.from_numpy(a.payload) if isinstance(a, NumpyTensor) else a

        def wrap(o):
            return NumpyTensor(np.asarray(o.numpy())) if isinstance(o, torch.Tensor) else o

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        returns = func._schema.returns
        if returns and returns[0].alias_info is not None and returns[0].alias_info.is_write:
            return args[0]
        return tree_map(wrap, out)
        ### END SOLUTION


def to_device(t):
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 device-solution
    return NumpyTensor(t.detach().numpy().copy())
    ### END SOLUTION


def to_cpu(t):
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 device-solution
    return torch.from_numpy(np.array(t.detach().payload, copy=True))
    ### END SOLUTION


def module_to_device(module):
    ### BEGIN SOLUTION
    # IPT-CANARY lab04 device-solution
    moved = {}                          # a parameter shared by two modules stays one parameter
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is not None:
                if id(p) not in moved:
                    moved[id(p)] = nn.Parameter(to_device(p), requires_grad=p.requires_grad)
                sub._parameters[name] = moved[id(p)]
    return module
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "device-explore", "locked": false, "schema_version": 3, "solution": false}
torch.manual_seed(0)
cpu_net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
dev_net = module_to_device(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)))
for p, q in zip(dev_net.parameters(), cpu_net.parameters()):
    p.payload[...] = q.detach().numpy()
x, y = torch.randn(16, 3), torch.randn(16, 1)
for net, inp, tgt in [(cpu_net, x, y), (dev_net, to_device(x), to_device(y))]:
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = ((net(inp) - tgt) ** 2).mean()
    loss.backward()
    opt.step()
print(type(dev_net[0].weight).__name__, type(dev_net[0].weight.grad).__name__)
print("same weights after one step:", torch.allclose(to_cpu(dev_net[0].weight), cpu_net[0].weight))

# %% nbgrader={"grade": true, "grade_id": "python_device", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="A device written in Python"
check("python_device")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built the dispatcher's core (key sets, TLS, priority, fallthroughs, boxed fallbacks,
# redispatch), the two classic keys above the backend (autograd and tracing), and then used the real
# one: an opaque custom op that compiles, a mode that watches every ATen call, and a backend of your
# own. Save the notebook and submit it (`make submit LAB=lab04`).
