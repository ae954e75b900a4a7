# ---
# jupyter:
#   inside_pytorch:
#     lab: lab02
#     title: An autograd engine
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
# # Lab 2 — An autograd engine
#
# When you write `loss.backward()`, PyTorch walks a graph that it recorded while your forward
# pass ran. Every operation on a tensor that requires grad leaves behind a **node** (`y.grad_fn`)
# that knows two things: how to turn the gradient of its output into gradients of its inputs
# (its backward formula), and where those gradients go next (`grad_fn.next_functions`). The
# **engine** runs those nodes in an order where each node fires once, after every gradient
# meant for it has arrived, and the leaves collect their gradients in `.grad`.
#
# In this lab you build that machinery from scratch on numpy, with PyTorch's names, so the same
# program runs on your engine and on `torch.autograd`:
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `graph` | leaves and non-leaves, gradient edges, recording a node | 10 | 1 |
# | `engine` | `AccumulateGrad`, dependency counting, the backward loop, `retain_graph` | 25 | 2.5 |
# | `modes_hooks` | `no_grad`, tensor hooks, `retain_grad` | 10 | 1.5 |
# | `ops` | broadcasting-aware `sum_to_size`, eleven elementwise backward formulas | 20 | 1.5 |
# | `reductions_broadcast` | `sum`/`mean` over dims, `reshape`, `transpose`, `matmul`, `sum_to_size` | 15 | 1.5 |
# | `softmax_max` | numerically stable `softmax`/`log_softmax` and their backward, `max` over a dim | 10 | 1 |
# | `mlp` | a linear layer, cross-entropy, SGD: train a small MLP | 10 | 1.5 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 10.5 in all.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the
# part's `check("...")` cell: it runs a few public tests against real PyTorch. Grading uses
# hidden tests that run many generated programs (shared subexpressions, diamonds, broadcasting)
# on your engine and on `torch.autograd` and compare values and gradients, so a green `check` is
# a good sign, not a guarantee.
#
# Ground rules:
#
# * The cells you fill in must not import `torch`: grading runs them without it. The
#   exploration cells may, to compare with the real thing.
# * Everything is `float64` numpy. Gradients travel through the engine as plain numpy arrays;
#   `.grad` and the arguments of hooks are `Tensor`s, as in PyTorch.
# * Never modify a gradient array in place (`g += ...`): the same array may be shared by several
#   nodes, and some are read-only broadcast views. Write `g = g + ...`.
# * Do the parts in order; each builds on the earlier ones.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% [markdown] nbgrader={"grade": false, "grade_id": "setup-md", "locked": true, "schema_version": 3, "solution": false}
# ## The scaffold
#
# Read this cell once; it is the skeleton your code hangs on.
#
# * `Tensor(data, requires_grad=False)` holds a float64 numpy array in `.data`, plus the
#   autograd fields `.requires_grad`, `.grad` (a `Tensor` or `None`) and `.grad_fn` (a `Node` or
#   `None`). `t.backward(gradient=None, retain_graph=False)` calls your `run_backward`.
# * `Node` is a backward function. `next_functions` is a tuple with one `(node, 0)` pair per
#   input of the forward op, `(None, 0)` for an input that needs no gradient; the `0` is the
#   output number (all our ops have one output). `apply(grad)` takes the gradient of the output
#   and returns one gradient per input, in the order of `next_functions`.
# * Values a backward formula needs (inputs, outputs) are stored with `save_for_backward` and
#   read back through `saved_tensors`. `release_saved()` frees them, as PyTorch does after a
#   backward without `retain_graph=True`; reading them afterwards raises PyTorch's error.
#   Shapes, dims and exponents are plain attributes of the node and are never freed.
# * `pre_hooks` and `retain_grad_hooks` are lists that part 3 fills.
# * `AccumulateGrad` is the node that ends every path at a leaf: it adds the gradient into
#   `variable.grad`.
# * `add_to_class(Tensor)` above a function makes it a method of `Tensor`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import builtins
import contextlib
import math
import operator

import numpy as np

SECOND_BACKWARD_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward.")

_grad_mode = {"enabled": True}


def is_grad_enabled():
    """True unless inside `no_grad()` (torch.is_grad_enabled)."""
    return _grad_mode["enabled"]


def add_to_class(cls):
    """Decorator: attach the function below it to `cls` as a method (builtins keep their name)."""
    def register(fn):
        setattr(cls, fn.__name__, fn)
        return getattr(builtins, fn.__name__, fn)
    return register


def wrap_dim(d, ndim):
    """One dim (negatives allowed) as a non-negative int. A 0-d tensor accepts 0 and -1, as in PyTorch."""
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def wrap_dims(dim, ndim):
    """`dim` (None, an int or a tuple of ints, negatives allowed) as a sorted tuple of dims.

    As in PyTorch: None and the empty tuple mean every dim; a dim named twice (in any spelling) raises;
    a 0-d tensor accepts dim 0 or -1, which reduce nothing."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    out = [wrap_dim(d, ndim) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {[d for d in out if out.count(d) > 1][0]} appears multiple times in the list of dims")
    return tuple(sorted(out)) if ndim else ()


class Tensor:
    """A float64 numpy array with autograd fields."""

    def __init__(self, data, requires_grad=False):
        data = np.array(data)
        if data.dtype.kind not in "iub":
            data = data.astype(np.float64)
        self.data = data
        self.requires_grad = bool(requires_grad)
        self.grad = None          # a Tensor once a backward pass has reached this leaf
        self.grad_fn = None       # the Node that produced this tensor (None for leaves)
        self._accumulator = None  # this leaf's AccumulateGrad node, made on demand

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    def dim(self):
        return self.data.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return self.data.size

    def numpy(self):
        return self.data

    def item(self):
        return self.data.item()

    @property
    def is_leaf(self):
        return is_leaf(self)

    def detach(self):
        """A new leaf on the same data, outside the graph."""
        return Tensor(self.data)

    def backward(self, gradient=None, retain_graph=False):
        run_backward(self, gradient, retain_graph)

    def __repr__(self):
        extra = ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{self.grad_fn.name()}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        return f"tensor({np.array2string(self.data, separator=', ')}{extra})"


def tensor(data, requires_grad=False):
    return Tensor(data, requires_grad=requires_grad)


def as_tensor(value):
    """Tensors pass through; numbers and arrays become constant leaves (no grad)."""
    return value if isinstance(value, Tensor) else Tensor(value)


class Node:
    """A backward function in the graph."""

    def __init__(self):
        self.next_functions = ()     # one (node or None, 0) pair per input of the forward op
        self.pre_hooks = []          # tensor hooks, run on the incoming gradient (part 3)
        self.retain_grad_hooks = []  # retain_grad() hooks, run after pre_hooks (part 3)
        self._saved = ()
        self._freed = False

    def name(self):
        return type(self).__name__

    def save_for_backward(self, *values):
        self._saved = values

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(SECOND_BACKWARD_MESSAGE)
        return self._saved

    def release_saved(self):
        """Free the saved values (what PyTorch does after backward without retain_graph)."""
        if self._saved:
            self._saved = ()
            self._freed = True

    def apply(self, grad):
        """Gradient of the output -> tuple with one gradient per input."""
        raise NotImplementedError(f"{self.name()}.apply")

    def __repr__(self):
        return f"<{self.name()}>"


class AccumulateGrad(Node):
    """The node at the end of every path into a leaf: accumulates into variable.grad (part 2)."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable


def call_pre_hooks(node, grad):
    """Run the node's hooks, if it has any (your run_pre_hooks of part 3), and return the gradient."""
    if node.pre_hooks or node.retain_grad_hooks:
        return node.run_pre_hooks(grad)
    return grad


# %% [markdown] nbgrader={"grade": false, "grade_id": "graph-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Recording the graph (10 points)
#
# PyTorch records the graph *during the forward pass*. After `y = x * w`, `y.grad_fn` is a
# `MulBackward0` node, and `y.grad_fn.next_functions` tells where the two gradients it computes
# must go:
#
# ```python
# >>> x = torch.ones(2, requires_grad=True); c = torch.ones(2)
# >>> (x * c).grad_fn.next_functions
# ((<AccumulateGrad object at ...>, 0), (None, 0))
# ```
#
# Write four small pieces:
#
# 1. **`Tensor.is_leaf`** (a property): a tensor is a leaf when it has no `grad_fn`. Tensors
#    that do not require grad are all leaves; so are tensors you create with
#    `requires_grad=True`. Only results of recorded ops are non-leaves.
# 2. **`grad_accumulator(t)`**: the `AccumulateGrad` node of a leaf. Make it once and keep it in
#    `t._accumulator`: a leaf used twice (`x * x`) must have *one* accumulator, with two edges
#    into it.
# 3. **`gradient_edge(t)`**: where the gradient for `t` goes: `(t.grad_fn, 0)` for a non-leaf,
#    `(grad_accumulator(t), 0)` for a leaf that requires grad, `(None, 0)` otherwise.
# 4. **`record(node, inputs, data)`**: called by every op after computing its result `data`
#    (a numpy array). It returns the output `Tensor(data)`, and records the graph when grad mode
#    is on (`is_grad_enabled()`) and at least one input requires grad: then
#    `node.next_functions` gets one `gradient_edge` per input, and the output gets
#    `requires_grad=True` and `grad_fn=node`. Otherwise the output is a plain leaf that does not
#    require grad, and the node is dropped.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "graph-solution", "locked": false, "schema_version": 3, "solution": true}
def is_leaf(t):
    """True when t is a leaf of the graph (Tensor.is_leaf calls this)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 graph-solution
    return t.grad_fn is None
    ### END SOLUTION


def grad_accumulator(t):
    """The leaf's AccumulateGrad node, created once and cached in t._accumulator."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 graph-solution
    if t._accumulator is None:
        t._accumulator = AccumulateGrad(t)
    return t._accumulator
    ### END SOLUTION


def gradient_edge(t):
    """(node, 0): where the gradient for tensor t must be sent."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 graph-solution
    if t.grad_fn is not None:
        return (t.grad_fn, 0)
    if t.requires_grad:
        return (grad_accumulator(t), 0)
    return (None, 0)
    ### END SOLUTION


def record(node, inputs, data):
    """The output Tensor of an op; wired into the graph when grad mode is on and an input requires grad."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 graph-solution
    out = Tensor(data)
    if is_grad_enabled() and any(t.requires_grad for t in inputs):
        node.next_functions = tuple(gradient_edge(t) for t in inputs)
        out.requires_grad = True
        out.grad_fn = node
    return out
    ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "graph-ops-md", "locked": true, "schema_version": 3, "solution": false}
# Three ops to try the graph with: `given_add`, `given_mul` and `given_sum` (a full sum). Their
# backward formulas are given, so parts 1–3 do not depend on your formulas of part 4. They do
# not broadcast: the shapes must match, or one side is a number or a 0-d tensor. Until part 4 replaces
# them, `+` and `*` use them too. Each computes with numpy and hands its node to your `record`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "graph-ops", "locked": true, "schema_version": 3, "solution": false}
def _given_to_shape(grad, shape):
    """A 0-d input met a larger one: its gradient is the sum (the only broadcasting the given ops do)."""
    return grad if grad.shape == shape else np.asarray(np.sum(grad))


class GivenAddBackward(Node):
    def apply(self, grad):
        shape_a, shape_b = self.shapes
        return _given_to_shape(grad, shape_a), _given_to_shape(grad, shape_b)


class GivenMulBackward(Node):
    def apply(self, grad):
        a, b = self.saved_tensors
        return _given_to_shape(grad * b, a.shape), _given_to_shape(grad * a, b.shape)


class GivenSumBackward(Node):
    def apply(self, grad):
        return (np.broadcast_to(grad, self.shape),)


def _same_shapes(a, b):
    a, b = as_tensor(a), as_tensor(b)
    if a.shape != b.shape and a.ndim and b.ndim:
        raise ValueError(f"given ops do not broadcast: shapes {a.shape} and {b.shape}")
    return a, b


def given_add(a, b):
    a, b = _same_shapes(a, b)
    node = GivenAddBackward()
    node.shapes = (a.shape, b.shape)
    return record(node, (a, b), a.data + b.data)


def given_mul(a, b):
    a, b = _same_shapes(a, b)
    node = GivenMulBackward()
    node.save_for_backward(a.data, b.data)
    return record(node, (a, b), a.data * b.data)


def given_sum(a):
    node = GivenSumBackward()
    node.shape = a.shape
    return record(node, (a,), np.sum(a.data))


Tensor.__add__ = given_add
Tensor.__radd__ = lambda self, other: given_add(self, other)
Tensor.__mul__ = given_mul
Tensor.__rmul__ = lambda self, other: given_mul(self, other)

# %% nbgrader={"grade": false, "grade_id": "graph-explore", "locked": false, "schema_version": 3, "solution": false}
x = tensor([1.0, 2.0], requires_grad=True)
w = tensor([3.0, 4.0], requires_grad=True)
c = tensor([1.0, 1.0])
y = x * w + c
print(y, y.is_leaf, x.is_leaf)
print(y.grad_fn, y.grad_fn.next_functions)
print((x * x).grad_fn.next_functions)

import torch

xt = torch.tensor([1.0, 2.0], requires_grad=True)
wt = torch.tensor([3.0, 4.0], requires_grad=True)
print((xt * wt + torch.ones(2)).grad_fn.next_functions)

# %% nbgrader={"grade": true, "grade_id": "graph", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Recording the graph"
check("graph")

# %% [markdown] nbgrader={"grade": false, "grade_id": "engine-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — The engine (25 points)
#
# A gradient may reach a node along several paths. In `y = a * b` with `a = x * 2`, `b = x * 3`
# (a **diamond**), the node for `x` gets one contribution through `a` and one through `b`, and
# must add them up before it runs. PyTorch's engine (`torch/csrc/autograd/engine.cpp`) does it
# in two passes:
#
# 1. **Count dependencies.** Walk every node reachable from the root once, and count for each
#    node how many edges point into it (`compute_dependencies`).
# 2. **Run a ready queue.** Each node has an *input buffer* where arriving gradients are summed.
#    Start with the root's node and the root gradient. Take a ready node, run its hooks and
#    `apply`, and send each result down its edge: add it into the child's buffer and decrement
#    the child's count. A child whose count reaches zero has all its gradient: it is ready.
#
# Each node runs once, and nothing is recursive, so a chain of 10,000 ops works as well as a
# short one (Python's recursion limit is 1,000). On CPU, PyTorch's ready queue is a priority
# queue that prefers the most recently created node; any order works as long as the counts are
# respected. (So when a backward fails midway, for instance on freed saved values, which leaves
# already got their gradient depends on that order; only errors found before any node runs leave
# `.grad` untouched for sure.)
#
# ```text
#        x (leaf) ──► AccumulateGrad ◄─┐          dependencies:
#        │                             │            MulBackward0 (y)   0   root
#        ├── a = x * 2 ── MulBackward0 ┤            MulBackward0 (a)   1
#        └── b = x * 3 ── MulBackward0 ┘            MulBackward0 (b)   1
#               y = a * b ── MulBackward0 (root)    AccumulateGrad(x)  2
# ```
#
# The paths end in **`AccumulateGrad`** nodes, one per leaf: it adds the incoming gradient into
# `variable.grad` (a fresh `Tensor` the first time, the sum with the old `.grad` afterwards), so
# two `backward()` calls **accumulate**. That is why training loops zero the gradients.
#
# **Saved values and `retain_graph`.** After a node runs, PyTorch frees what it saved for
# backward, unless `retain_graph=True`. A second `backward()` through a node whose saved values
# are gone raises
# `RuntimeError: Trying to backward through the graph a second time (...)`. Nodes that save
# nothing (an add, a sum, a reshape) can run again: in PyTorch `(x + 1).sum()` can be
# backwarded twice, `(x * 2).sum()` cannot. The scaffold's `saved_tensors` raises the error;
# your engine calls `node.release_saved()` after `apply` unless `retain_graph` is true.
#
# Write:
#
# 1. **`AccumulateGrad.apply(grad)`**: accumulate into `self.variable.grad`; return `()`.
# 2. **`compute_dependencies(root)`**: a dict `{node: number of edges into it}` over every node
#    reachable from `root` (the root itself has 0). Use an explicit stack, not recursion, and
#    skip `None` edges.
# 3. **`run_backward(tensor, gradient, retain_graph)`**:
#    * if `tensor` does not require grad, raise
#      `RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")`;
#    * `gradient=None` means ones, allowed only for a one-element tensor; otherwise raise
#      `RuntimeError("grad can be implicitly created only for scalar outputs")`. A given gradient
#      (a `Tensor` or array) must have the tensor's shape, else raise `RuntimeError` ("Mismatch in
#      shape: ...");
#    * the root node is `gradient_edge(tensor)[0]` (for a leaf that is its `AccumulateGrad`);
#    * then the ready-queue loop. Before `apply`, pass the buffered gradient through
#      `call_pre_hooks(node, grad)` (it does nothing until part 3).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "engine-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(AccumulateGrad)
def apply(self, grad):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 engine-solution
    variable = self.variable
    if variable.grad is None:
        variable.grad = Tensor(grad)
    else:
        variable.grad = Tensor(variable.grad.data + grad)
    return ()
    ### END SOLUTION


def compute_dependencies(root):
    """{node: number of edges into it} for every node reachable from root."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 engine-solution
    dependencies = {root: 0}
    stack = [root]
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is None:
                continue
            if child not in dependencies:
                dependencies[child] = 0
                stack.append(child)
            dependencies[child] += 1
    return dependencies
    ### END SOLUTION


def run_backward(tensor, gradient=None, retain_graph=False):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 engine-solution
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = np.ones_like(tensor.data)
    else:
        grad = np.array(gradient.data if isinstance(gradient, Tensor) else gradient, dtype=np.float64)
        if grad.shape != tensor.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {list(grad.shape)} "
                               f"and output[0] has a shape of {list(tensor.shape)}.")
    root = gradient_edge(tensor)[0]
    dependencies = compute_dependencies(root)
    buffers = {root: grad}
    ready = [root]
    while ready:
        node = ready.pop()
        grad = call_pre_hooks(node, buffers.pop(node))
        grads = node.apply(grad)
        if not retain_graph:
            node.release_saved()
        for (child, _), child_grad in zip(node.next_functions, grads):
            if child is None:
                continue
            if child in buffers:
                buffers[child] = buffers[child] + child_grad
            else:
                buffers[child] = child_grad
            dependencies[child] -= 1
            if dependencies[child] == 0:
                ready.append(child)
    ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "engine-explore-md", "locked": true, "schema_version": 3, "solution": false}
# Try the diamond, accumulation, and a deep chain; then draw a graph (the figure walks
# `next_functions` exactly as your `compute_dependencies` does).

# %% nbgrader={"grade": false, "grade_id": "engine-explore", "locked": false, "schema_version": 3, "solution": false}
x = tensor([1.0, 2.0], requires_grad=True)
a, b = x * 2.0, x * 3.0
y = a * b                    # y = 6 x^2, dy/dx = 12 x
y.backward(np.ones(2))
print(x.grad)                # [12, 24]
print(compute_dependencies(y.grad_fn))

deep = x
for _ in range(10_000):
    deep = deep * 1.0
deep.backward(np.ones(2))
print("after a 10,000-node chain, x.grad =", x.grad)   # accumulated: [13, 25]


def draw_graph(t):
    import matplotlib.pyplot as plt
    levels, seen, frontier = {}, {t.grad_fn: 0}, [t.grad_fn]
    while frontier:
        node = frontier.pop()
        for child, _ in node.next_functions:
            if child is not None and seen.get(child, -1) < seen[node] + 1:
                seen[child] = seen[node] + 1
                frontier.append(child)
    for node, level in seen.items():
        levels.setdefault(level, []).append(node)
    pos = {n: (i - (len(ns) - 1) / 2, -lvl) for lvl, ns in levels.items() for i, n in enumerate(ns)}
    fig, ax = plt.subplots(figsize=(5, 1.3 * len(levels)))
    for node, (px, py) in pos.items():
        for child, _ in node.next_functions:
            if child is not None:
                ax.annotate("", pos[child], (px, py), arrowprops=dict(arrowstyle="->", color="0.5"))
        ax.text(px, py, node.name(), ha="center", va="center", bbox=dict(boxstyle="round", fc="lightyellow"))
    ax.set_xlim(-2, 2)
    ax.set_ylim(-len(levels), 1)
    ax.axis("off")
    plt.show()


draw_graph(y)

# %% nbgrader={"grade": true, "grade_id": "engine", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="The engine"
check("engine")

# %% [markdown] nbgrader={"grade": false, "grade_id": "modes-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — `no_grad` and hooks (10 points)
#
# **`no_grad()`** turns recording off: inside `with no_grad():` results do not require grad and
# have no `grad_fn` (your `record` already asks `is_grad_enabled()`). On exit it restores the
# mode it found on entry, so nested `no_grad` blocks work, and it restores it even when the
# block raises. The scaffold makes it usable as a decorator too. Write `__enter__` and
# `__exit__`; the mode lives in `_grad_mode["enabled"]`.
#
# **Tensor hooks.** `t.register_hook(fn)` asks autograd to call `fn(grad)` with the gradient of
# `t` (a `Tensor`) during backward; if `fn` returns a tensor, it replaces the gradient. PyTorch
# attaches the hook to the node that *receives* `t`'s gradient: `t.grad_fn` for a non-leaf,
# the leaf's `AccumulateGrad` otherwise (so a hook on a leaf changes what is accumulated into
# `.grad`). Because the engine runs a node once, with the sum of all its contributions, a hook
# on a tensor used twice is called **once**, with the total. Registering a hook on a tensor
# that does not require grad raises
# `RuntimeError("cannot register a hook on a tensor that doesn't require gradient")`.
# `register_hook` returns a `RemovableHandle` whose `remove()` unregisters the hook.
#
# **`t.retain_grad()`** keeps the gradient of a non-leaf in `t.grad` (accumulating, like a
# leaf). It is a hook too, kept in `grad_fn.retain_grad_hooks`, and PyTorch runs it *after* the
# ordinary hooks, so `.grad` shows the gradient the hooks produced. On a leaf it does nothing;
# on a tensor that does not require grad it raises
# `RuntimeError("can't retain_grad on Tensor that has requires_grad=False")`. Calling it a second
# time changes nothing (one hook per tensor: the gradient is not counted twice).
#
# **`Node.run_pre_hooks(grad)`** (called by the engine through `call_pre_hooks`): call each hook
# in `pre_hooks` in order with `Tensor(grad)`; a hook that returns something (a `Tensor`)
# replaces the gradient (`.data`) for the next hooks and for `apply`. Then call each function in
# `retain_grad_hooks` with the numpy gradient. Return the gradient.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "modes-scaffold", "locked": true, "schema_version": 3, "solution": false}
class RemovableHandle:
    """Returned by register_hook: remove() takes `hook` out of `hooks`."""

    def __init__(self, hooks, hook):
        self.hooks, self.hook = hooks, hook

    def remove(self):
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "modes-solution", "locked": false, "schema_version": 3, "solution": true}
class no_grad(contextlib.ContextDecorator):
    def __enter__(self):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 modes-solution
        self.previous = _grad_mode["enabled"]
        _grad_mode["enabled"] = False
        ### END SOLUTION
        return self

    def __exit__(self, *exc_info):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 modes-solution
        _grad_mode["enabled"] = self.previous
        ### END SOLUTION
        return False


@add_to_class(Tensor)
def register_hook(self, hook):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 modes-solution
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    node = self.grad_fn if self.grad_fn is not None else grad_accumulator(self)
    node.pre_hooks.append(hook)
    return RemovableHandle(node.pre_hooks, hook)
    ### END SOLUTION


@add_to_class(Tensor)
def retain_grad(self):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 modes-solution
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or getattr(self, "_retains_grad", False):
        return  # a leaf keeps its .grad anyway; a second retain_grad() changes nothing
    self._retains_grad = True

    def keep(grad):
        self.grad = Tensor(grad) if self.grad is None else Tensor(self.grad.data + grad)

    self.grad_fn.retain_grad_hooks.append(keep)
    ### END SOLUTION


@add_to_class(Node)
def run_pre_hooks(self, grad):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 modes-solution
    for hook in list(self.pre_hooks):
        result = hook(Tensor(grad))
        if result is not None:
            grad = result.data if isinstance(result, Tensor) else np.asarray(result, dtype=np.float64)
    for keep in self.retain_grad_hooks:
        keep(grad)
    return grad
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "modes-explore", "locked": false, "schema_version": 3, "solution": false}
x = tensor([1.0, 2.0], requires_grad=True)
with no_grad():
    z = x * 2.0
print(z.requires_grad, z.grad_fn, is_grad_enabled())
a = x * 3.0
a.retain_grad()
handle = a.register_hook(lambda g: g * 10.0)
(a * a).backward(np.ones(2))
print("a.grad", a.grad, "x.grad", x.grad)
handle.remove()

# %% nbgrader={"grade": true, "grade_id": "modes_hooks", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="no_grad and hooks"
check("modes_hooks")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ops-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Elementwise ops and broadcasting (20 points)
#
# **Broadcasting runs backwards as a sum.** In `x + b` with `x` of shape `(4, 3)` and `b` of
# shape `(3,)`, each `b[j]` is used by four outputs, so its gradient is the sum of the four:
# the gradient of shape `(4, 3)` must be *summed down* to `(3,)`. PyTorch calls this
# `sum_to_size`. Write **`sum_to_size(grad, shape)`** (numpy in, numpy out): sum over the
# leading dims that `shape` does not have, then over each dim where `shape` has size 1 and the
# gradient does not, keeping that dim (`keepdims=True`). `(2, 4, 3)` summed to `(4, 1)` sums
# dim 0, then dim 1 of what is left (`(4, 3)` becomes `(4, 1)`).
#
# Then the **backward formulas**. Each node's `apply(grad)` returns one numpy gradient per input
# of its forward op, *of that input's shape* (use `sum_to_size` for binary ops, whose inputs may
# have been broadcast). `a`, `b` and `result` below are what the forward saved.
#
# **Derive them before you write them.** For an input `a` of a forward `out = f(a, b)`, the chain rule
# gives `grad_a = grad * ∂f/∂a`, element by element, then summed to `a`'s shape. Two are worked for
# you; fill in the rest on paper first. Where the derivative can be written with the forward's *result*
# (exp, tanh, sigmoid), use the saved `result`: it saves recomputing the function.
#
# | node | forward | gradient(s) |
# |---|---|---|
# | `AddBackward0` | `a + b` | `grad`, `grad` (summed to each shape) |
# | `MulBackward0` | `a * b` | `grad * b`, `grad * a` |
# | `SubBackward0` | `a - b` | ? |
# | `DivBackward0` | `a / b` | ? (two of them: write `a / b` as `a * b**-1` for the second) |
# | `NegBackward0` | `-a` | ? |
# | `PowBackward0` | `a ** p` (`p` a number) | ? (for `p == 0`: exactly zero, even at `a = 0`) |
# | `ExpBackward0` | `exp(a)` | ? in terms of `result` |
# | `LogBackward0` | `log(a)` | ? |
# | `TanhBackward0` | `tanh(a)` | ? in terms of `result` (hint: `tanh' = 1 - tanh²`) |
# | `SigmoidBackward0` | `1 / (1 + exp(-a))` | ? in terms of `result` |
# | `ReluBackward0` | `max(a, 0)` | ? (PyTorch's choice at `a = 0` is 0, even when `grad` is infinite) |
#
# <details><summary>Check your derivations</summary>
#
# | node | forward | gradient(s) |
# |---|---|---|
# | `AddBackward0` | `a + b` | `grad`, `grad` (summed to each shape) |
# | `SubBackward0` | `a - b` | `grad`, `-grad` |
# | `MulBackward0` | `a * b` | `grad * b`, `grad * a` |
# | `DivBackward0` | `a / b` | `grad / b`, `-grad * a / b**2` |
# | `NegBackward0` | `-a` | `-grad` |
# | `PowBackward0` | `a ** p` (`p` a number) | `grad * p * a**(p - 1)`; zeros when `p == 0` |
# | `ExpBackward0` | `exp(a)` | `grad * result` |
# | `LogBackward0` | `log(a)` | `grad / a` |
# | `TanhBackward0` | `tanh(a)` | `grad * (1 - result**2)` |
# | `SigmoidBackward0` | `1 / (1 + exp(-a))` | `grad * result * (1 - result)` |
# | `ReluBackward0` | `max(a, 0)` | `grad` where `result > 0`, else 0 (PyTorch's choice at 0) — *select*, do not multiply by a mask: an infinite `grad` times 0 is `nan` (`(x.relu() ** 0.5).sum()` at `x = 0`), PyTorch gives 0 |
#
# </details>
#
# The forward functions come after your cell: they compute with numpy, save what the table
# uses, and call your `record`. A plain number in `x * 2` or `1 - x` becomes a constant
# that needs no gradient (its edge is `(None, 0)`). Shapes broadcast as in PyTorch, 0-d and
# size-0 tensors included (a size-1 dim meets a size-0 one: its gradient is a sum over nothing,
# 0); shapes that do not broadcast raise PyTorch's `RuntimeError` in the forward.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ops-sum-to-size", "locked": false, "schema_version": 3, "solution": true}
def sum_to_size(grad, shape):
    """Sum a broadcast gradient back down to `shape` (numpy in, numpy out)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 ops-sum-to-size
    shape = tuple(shape)
    lead = grad.ndim - len(shape)
    if lead > 0:
        grad = grad.sum(axis=tuple(range(lead)))
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and grad.shape[d] != 1)
    if dims:
        grad = grad.sum(axis=dims, keepdims=True)
    return grad
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ops-backward", "locked": false, "schema_version": 3, "solution": true}
class AddBackward0(Node):
    def apply(self, grad):
        shape_a, shape_b = self.shapes
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return sum_to_size(grad, shape_a), sum_to_size(grad, shape_b)
        ### END SOLUTION


class SubBackward0(Node):
    def apply(self, grad):
        shape_a, shape_b = self.shapes
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return sum_to_size(grad, shape_a), sum_to_size(-grad, shape_b)
        ### END SOLUTION


class MulBackward0(Node):
    def apply(self, grad):
        a, b = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return sum_to_size(grad * b, a.shape), sum_to_size(grad * a, b.shape)
        ### END SOLUTION


class DivBackward0(Node):
    def apply(self, grad):
        a, b = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return sum_to_size(grad / b, a.shape), sum_to_size(-grad * a / (b * b), b.shape)
        ### END SOLUTION


class NegBackward0(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (-grad,)
        ### END SOLUTION


class PowBackward0(Node):
    def apply(self, grad):
        (a,) = self.saved_tensors
        p = self.exponent
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        if p == 0:
            return (np.zeros_like(a),)
        return (grad * p * a ** (p - 1),)
        ### END SOLUTION


class ExpBackward0(Node):
    def apply(self, grad):
        (result,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (grad * result,)
        ### END SOLUTION


class LogBackward0(Node):
    def apply(self, grad):
        (a,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (grad / a,)
        ### END SOLUTION


class TanhBackward0(Node):
    def apply(self, grad):
        (result,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (grad * (1 - result * result),)
        ### END SOLUTION


class SigmoidBackward0(Node):
    def apply(self, grad):
        (result,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (grad * result * (1 - result),)
        ### END SOLUTION


class ReluBackward0(Node):
    def apply(self, grad):
        (result,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 ops-backward
        return (np.where(result > 0, grad, 0.0),)
        ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ops-forward", "locked": true, "schema_version": 3, "solution": false}
def _broadcast_check(a, b):
    """PyTorch's error for shapes that do not broadcast (numpy would raise a ValueError)."""
    for i in range(1, builtins.min(a.ndim, b.ndim) + 1):
        m, n = a.shape[-i], b.shape[-i]
        if m != n and m != 1 and n != 1:
            raise RuntimeError(f"The size of tensor a ({m}) must match the size of tensor b ({n}) "
                               f"at non-singleton dimension {builtins.max(a.ndim, b.ndim) - i}")


def _binary(node, a, b, data, save):
    node.shapes = (a.shape, b.shape)
    if save:
        node.save_for_backward(a.data, b.data)
    return record(node, (a, b), data)


def add(a, b):
    a, b = as_tensor(a), as_tensor(b)
    _broadcast_check(a, b)
    return _binary(AddBackward0(), a, b, a.data + b.data, save=False)


def sub(a, b):
    a, b = as_tensor(a), as_tensor(b)
    _broadcast_check(a, b)
    return _binary(SubBackward0(), a, b, a.data - b.data, save=False)


def mul(a, b):
    a, b = as_tensor(a), as_tensor(b)
    _broadcast_check(a, b)
    return _binary(MulBackward0(), a, b, a.data * b.data, save=True)


def div(a, b):
    a, b = as_tensor(a), as_tensor(b)
    _broadcast_check(a, b)
    return _binary(DivBackward0(), a, b, a.data / b.data, save=True)


def neg(a):
    return record(NegBackward0(), (a,), -a.data)


def pow(a, exponent):
    node = PowBackward0()
    node.exponent = exponent
    node.save_for_backward(a.data)
    return record(node, (a,), a.data ** exponent)


def _unary(node_cls, a, data, saved):
    node = node_cls()
    node.save_for_backward(saved)
    return record(node, (a,), data)


def exp(a):
    data = np.exp(a.data)
    return _unary(ExpBackward0, a, data, data)


def log(a):
    return _unary(LogBackward0, a, np.log(a.data), a.data)


def tanh(a):
    data = np.tanh(a.data)
    return _unary(TanhBackward0, a, data, data)


def sigmoid(a):
    data = 1.0 / (1.0 + np.exp(-a.data))
    return _unary(SigmoidBackward0, a, data, data)


def relu(a):
    data = np.maximum(a.data, 0.0)
    return _unary(ReluBackward0, a, data, data)


Tensor.__add__ = add
Tensor.__radd__ = lambda self, other: add(self, other)
Tensor.__sub__ = sub
Tensor.__rsub__ = lambda self, other: sub(other, self)
Tensor.__mul__ = mul
Tensor.__rmul__ = lambda self, other: mul(self, other)
Tensor.__truediv__ = div
Tensor.__rtruediv__ = lambda self, other: div(other, self)
Tensor.__neg__ = neg
Tensor.__pow__ = pow
Tensor.pow = pow
Tensor.exp = exp
Tensor.log = log
Tensor.tanh = tanh
Tensor.sigmoid = sigmoid
Tensor.relu = relu

# %% nbgrader={"grade": false, "grade_id": "ops-explore", "locked": false, "schema_version": 3, "solution": false}
x = tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
b = tensor([0.5, 1.0, 2.0], requires_grad=True)
y = ((x * b).tanh() + x / b).sigmoid()
y.backward(np.ones((2, 3)))
print(x.grad, b.grad, sep="\n")

xt = torch.tensor(x.data, requires_grad=True)
bt = torch.tensor(b.data, requires_grad=True)
((xt * bt).tanh() + xt / bt).sigmoid().sum().backward()
print(xt.grad, bt.grad, sep="\n")

# %% nbgrader={"grade": true, "grade_id": "ops", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Elementwise ops and broadcasting"
check("ops")

# %% [markdown] nbgrader={"grade": false, "grade_id": "reductions-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Reductions, shapes and matmul (15 points)
#
# * **`SumBackward`** (`x.sum(dim=None, keepdim=False)`): every input element contributes once,
#   so the gradient is `grad` copied back to the input shape. The node keeps `self.shape` (the
#   input shape), `self.dims` (the reduced dims, a sorted tuple) and `self.keepdim`. Without
#   `keepdim` the reduced dims are gone from `grad`: put them back as size 1
#   (`np.expand_dims(grad, dims)`), then `np.broadcast_to` the input shape. PyTorch names the
#   node `SumBackward0` for a full sum and `SumBackward1` with `dim`; one class does both here.
# * **`MeanBackward`**: the same, divided by the number of elements averaged (the product of
#   the reduced sizes).
# * **`ViewBackward0`** (`x.reshape(*shape)`): reshape `grad` back to `self.shape`.
# * **`TransposeBackward0`** (`x.transpose(d0, d1)`): swap the same two dims back.
# * **`MmBackward0`** (`a @ b`, both at least 2-D; leading batch dims broadcast as in numpy):
#   `grad @ bᵀ` for `a` and `aᵀ @ grad` for `b`, with `ᵀ` swapping the *last two* dims, then
#   `sum_to_size` to each input's shape (broadcast batch dims sum away).
# * **`SumToSizeBackward0`** (`x.sum_to_size(*shape)`, the differentiable version of your
#   helper): the inverse, `np.broadcast_to(grad, self.shape)`.
#
# **Dims follow PyTorch** (the locked forwards check them, so your backward always sees
# `self.dims` as a sorted tuple of non-negative dims): negative dims count from the end; `dim`
# may be a tuple, and `None` or `()` means every dim; a dim named twice (`(0, -2)` on a 2-D
# tensor) raises `RuntimeError`, a dim out of range `IndexError`. A 0-d tensor accepts dim `0`
# and `-1` (`tensor(2.).sum(0)` is `tensor(2.)`: nothing is reduced, `self.dims == ()`), and
# transposes to itself. `reshape` takes `-1` for one size; an impossible shape raises
# `RuntimeError`. One deliberate difference: this lab's `matmul` needs both sides at least 2-D.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "reductions-solution", "locked": false, "schema_version": 3, "solution": true}
class SumBackward(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        if not self.keepdim:
            grad = np.expand_dims(grad, self.dims)
        return (np.broadcast_to(grad, self.shape),)
        ### END SOLUTION


class MeanBackward(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        count = math.prod(self.shape[d] for d in self.dims)
        if not self.keepdim:
            grad = np.expand_dims(grad, self.dims)
        return (np.broadcast_to(grad / count, self.shape),)
        ### END SOLUTION


class ViewBackward0(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        return (grad.reshape(self.shape),)
        ### END SOLUTION


class TransposeBackward0(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        return (np.swapaxes(grad, self.dim0, self.dim1),)
        ### END SOLUTION


class MmBackward0(Node):
    def apply(self, grad):
        a, b = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        grad_a = grad @ np.swapaxes(b, -1, -2)
        grad_b = np.swapaxes(a, -1, -2) @ grad
        return sum_to_size(grad_a, a.shape), sum_to_size(grad_b, b.shape)
        ### END SOLUTION


class SumToSizeBackward0(Node):
    def apply(self, grad):
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 reductions-solution
        return (np.broadcast_to(grad, self.shape),)
        ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "reductions-forward", "locked": true, "schema_version": 3, "solution": false}
def _reduce(node_cls, name, a, dim, keepdim, fn):
    dims = wrap_dims(dim, a.ndim)
    node = node_cls()
    node.shape, node.dims, node.keepdim = a.shape, dims, keepdim
    if name:
        node.name = lambda: name
    return record(node, (a,), fn(a.data, axis=dims, keepdims=keepdim))


@add_to_class(Tensor)
def sum(self, dim=None, keepdim=False):
    return _reduce(SumBackward, "SumBackward0" if dim is None else "SumBackward1", self, dim, keepdim, np.sum)


@add_to_class(Tensor)
def mean(self, dim=None, keepdim=False):
    return _reduce(MeanBackward, "MeanBackward0" if dim is None else "MeanBackward1", self, dim, keepdim, np.mean)


@add_to_class(Tensor)
def reshape(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        data = self.data.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {self.numel()}") from None
    node = ViewBackward0()
    node.shape = self.shape
    return record(node, (self,), data)


@add_to_class(Tensor)
def transpose(self, dim0, dim1):
    dim0, dim1 = wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim)
    if self.ndim == 0:  # a 0-d tensor transposes to itself (recorded as a view)
        return self.reshape(())
    node = TransposeBackward0()
    node.dim0, node.dim1 = dim0, dim1
    return record(node, (self,), np.swapaxes(self.data, dim0, dim1))


def matmul(a, b):
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError("this lab's matmul needs tensors with at least 2 dims")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if a.shape[-1] != b.shape[-2]:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied") from None
    node = MmBackward0()
    node.save_for_backward(a.data, b.data)
    return record(node, (a, b), a.data @ b.data)


def _tensor_sum_to_size(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(shape)
    if shape == self.shape:
        return self
    if len(shape) > self.ndim or any(n != 1 and n != m for n, m in zip(shape[::-1], self.shape[::-1])):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(self.shape)}}}.")
    node = SumToSizeBackward0()
    node.shape = self.shape
    return record(node, (self,), sum_to_size(self.data, shape))


Tensor.sum_to_size = _tensor_sum_to_size
Tensor.__matmul__ = matmul
Tensor.matmul = matmul

# %% nbgrader={"grade": false, "grade_id": "reductions-explore", "locked": false, "schema_version": 3, "solution": false}
w = tensor(np.arange(6.0).reshape(2, 3) / 6, requires_grad=True)
xb = tensor(np.ones((4, 5, 3)))
out = (xb @ w.transpose(0, 1)).mean(dim=(0, 2), keepdim=True).sum()
out.backward()
print(w.grad)
wt = torch.tensor(w.data, requires_grad=True)
(torch.ones(4, 5, 3, dtype=torch.float64) @ wt.transpose(0, 1)).mean(dim=(0, 2), keepdim=True).sum().backward()
print(wt.grad)

# %% nbgrader={"grade": true, "grade_id": "reductions_broadcast", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Reductions, shapes and matmul"
check("reductions_broadcast")

# %% [markdown] nbgrader={"grade": false, "grade_id": "softmax-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — Softmax, log-softmax and max (10 points)
#
# **Numerically stable forward.** `softmax(x)_i = exp(x_i) / Σ_j exp(x_j)` overflows for
# `x_i = 1000`. Subtracting the max along `dim` first changes nothing mathematically and keeps
# every `exp` at most 1: `softmax(x) = softmax(x - max(x))`. Likewise
# `log_softmax(x) = (x - m) - log Σ_j exp(x_j - m)` with `m = max(x)`, never `log(softmax(x))`
# (that gives `-inf` once a probability underflows to 0). Write both forwards on numpy arrays.
#
# **Backward.** With `y = softmax(x)` saved:
# `grad_x = y * (grad - Σ_dim(grad * y))`, the sum kept as a size-1 dim.
# With `y = log_softmax(x)` saved: `grad_x = grad - exp(y) * Σ_dim(grad)`.
#
# **`x.max(dim, keepdim=False)`** returns `(values, indices)` like PyTorch. Only the maximum of
# each slice influences the output, so the gradient goes to the position in `indices` and every
# other element gets 0. Write `MaxBackward0.apply`: make zeros of the input shape `self.shape`
# and put `grad` at the saved `indices` along `self.dim` (`np.put_along_axis`; without
# `keepdim`, first give `grad` and the indices their size-1 dim back). On ties the first maximum
# is the index (as PyTorch on CPU), and it alone gets the gradient. A 0-d tensor is its own
# maximum (index 0), and softmax over a size-0 dim is empty; the locked forwards handle both.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "softmax-solution", "locked": false, "schema_version": 3, "solution": true}
def softmax_forward(x, dim):
    """softmax of the numpy array x along dim, without overflow."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 softmax-solution
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)
    ### END SOLUTION


def log_softmax_forward(x, dim):
    """log_softmax of the numpy array x along dim, without overflow or log(0)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 softmax-solution
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    ### END SOLUTION


class SoftmaxBackward0(Node):
    def apply(self, grad):
        (y,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 softmax-solution
        return (y * (grad - (grad * y).sum(axis=self.dim, keepdims=True)),)
        ### END SOLUTION


class LogSoftmaxBackward0(Node):
    def apply(self, grad):
        (y,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 softmax-solution
        return (grad - np.exp(y) * grad.sum(axis=self.dim, keepdims=True),)
        ### END SOLUTION


class MaxBackward0(Node):
    def apply(self, grad):
        (indices,) = self.saved_tensors
        ### BEGIN SOLUTION
        # IPT-CANARY lab02 softmax-solution
        if not self.keepdim:
            grad = np.expand_dims(grad, self.dim)
            indices = np.expand_dims(indices, self.dim)
        out = np.zeros(self.shape)
        np.put_along_axis(out, indices, grad, axis=self.dim)
        return (out,)
        ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "softmax-forward", "locked": true, "schema_version": 3, "solution": false}
def softmax(x, dim):
    dim = wrap_dim(dim, x.ndim)
    if x.ndim == 0:  # a 0-d tensor: the softmax of one element (recorded through a view)
        return softmax(x.reshape(1), 0).reshape(())
    node = SoftmaxBackward0()
    node.dim = dim
    data = softmax_forward(x.data, dim) if x.numel() else np.zeros(x.shape)  # empty: nothing to normalise
    node.save_for_backward(data)
    return record(node, (x,), data)


def log_softmax(x, dim):
    dim = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return log_softmax(x.reshape(1), 0).reshape(())
    node = LogSoftmaxBackward0()
    node.dim = dim
    data = log_softmax_forward(x.data, dim) if x.numel() else np.zeros(x.shape)  # empty: nothing to normalise
    node.save_for_backward(data)
    return record(node, (x,), data)


@add_to_class(Tensor)
def max(self, dim, keepdim=False):
    dim = wrap_dim(dim, self.ndim)
    if self.ndim == 0:  # a 0-d tensor is its own maximum, at index 0 (recorded through a view)
        values, indices = self.reshape(1).max(0)
        return values.reshape(()), indices
    if self.shape[dim] == 0:
        raise IndexError(f"max(): Expected reduction dim {dim} to have non-zero size.")
    indices = np.argmax(self.data, axis=dim)
    values = np.take_along_axis(self.data, np.expand_dims(indices, dim), axis=dim)
    if keepdim:
        indices = np.expand_dims(indices, dim)
    else:
        values = np.squeeze(values, axis=dim)
    node = MaxBackward0()
    node.shape, node.dim, node.keepdim = self.shape, dim, keepdim
    node.save_for_backward(indices)
    return record(node, (self,), values), Tensor(indices)


Tensor.softmax = softmax
Tensor.log_softmax = log_softmax

# %% nbgrader={"grade": false, "grade_id": "softmax-explore", "locked": false, "schema_version": 3, "solution": false}
logits = tensor([[1000.0, 0.0, -1000.0], [1.0, 2.0, 3.0]], requires_grad=True)
print(softmax(logits, 1), log_softmax(logits, 1), sep="\n")
values, indices = logits.max(1)
(values * tensor([1.0, 2.0])).sum().backward()
print(indices, logits.grad, sep="\n")

# %% nbgrader={"grade": true, "grade_id": "softmax_max", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Softmax, log-softmax and max"
check("softmax_max")

# %% [markdown] nbgrader={"grade": false, "grade_id": "mlp-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — Train a small MLP (10 points)
#
# Time to use the engine. The locked `MLP` below is `Linear → tanh → Linear`, with its
# parameters given (so a test can start PyTorch from the same numbers). Write:
#
# * **`Linear.__call__(x)`**: `x @ weightᵀ + bias`, with `weight` of shape `(out, in)` as in
#   `torch.nn.Linear`.
# * **`cross_entropy(logits, target)`**: the mean over the batch of `-log_softmax(logits)[i,
#   target[i]]` (`target` holds class numbers). Pick the entries with a constant one-hot array:
#   multiply, sum, divide by the batch size. This equals `torch.nn.functional.cross_entropy`.
# * **`sgd_step(params, lr)`**: under `no_grad()`, replace each parameter's `data` with
#   `data - lr * grad`, then set its `grad` to `None` (what `optimizer.zero_grad()` does).
# * **`train(model, x, target, lr, steps)`**: `steps` rounds of forward, loss, `backward()`,
#   `sgd_step`; return the list of losses (floats), one per step, each before its update.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "mlp-scaffold", "locked": true, "schema_version": 3, "solution": false}
class Linear:
    def __init__(self, weight, bias):
        self.weight = tensor(weight, requires_grad=True)
        self.bias = tensor(bias, requires_grad=True)

    def parameters(self):
        return [self.weight, self.bias]


class MLP:
    def __init__(self, w1, b1, w2, b2):
        self.hidden, self.out = Linear(w1, b1), Linear(w2, b2)

    def __call__(self, x):
        return self.out(self.hidden(x).tanh())

    def parameters(self):
        return self.hidden.parameters() + self.out.parameters()


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "mlp-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(Linear)
def __call__(self, x):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 mlp-solution
    return x @ self.weight.transpose(0, 1) + self.bias
    ### END SOLUTION


def cross_entropy(logits, target):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 mlp-solution
    target = np.asarray(target)
    one_hot = np.zeros(logits.shape)
    one_hot[np.arange(len(target)), target] = 1.0
    return -(log_softmax(logits, 1) * one_hot).sum() / len(target)
    ### END SOLUTION


def sgd_step(params, lr):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 mlp-solution
    with no_grad():
        for p in params:
            p.data = p.data - lr * p.grad.data
            p.grad = None
    ### END SOLUTION


def train(model, x, target, lr, steps):
    ### BEGIN SOLUTION
    # IPT-CANARY lab02 mlp-solution
    x = as_tensor(x)
    losses = []
    for _ in range(steps):
        loss = cross_entropy(model(x), target)
        losses.append(loss.item())
        loss.backward()
        sgd_step(model.parameters(), lr)
    return losses
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "mlp-explore", "locked": false, "schema_version": 3, "solution": false}
rng = np.random.default_rng(0)
X = rng.normal(size=(64, 2))
Y = (X[:, 0] * X[:, 1] > 0).astype(int)            # XOR-like quadrants
params = [rng.normal(size=(16, 2)) * 0.5, np.zeros(16), rng.normal(size=(2, 16)) * 0.5, np.zeros(2)]
losses = train(MLP(*params), X, Y, lr=0.5, steps=200)

import torch.nn.functional as F

tp = [torch.tensor(p, requires_grad=True) for p in params]
Xt, Yt = torch.tensor(X), torch.tensor(Y)
torch_losses = []
for _ in range(200):
    loss = F.cross_entropy(torch.tanh(Xt @ tp[0].T + tp[1]) @ tp[2].T + tp[3], Yt)
    torch_losses.append(loss.item())
    loss.backward()
    with torch.no_grad():
        for p in tp:
            p -= 0.5 * p.grad
            p.grad = None

import matplotlib.pyplot as plt

plt.plot(losses, label="your engine", lw=3)
plt.plot(torch_losses, "--", label="torch.autograd")
plt.xlabel("step")
plt.ylabel("cross-entropy")
plt.legend()
plt.show()

# %% nbgrader={"grade": true, "grade_id": "mlp", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Train a small MLP"
check("mlp")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built reverse-mode automatic differentiation the way PyTorch does it: a graph
# recorded during the forward pass, a dependency-counted ready queue instead of recursion,
# `AccumulateGrad` at the leaves, saved values freed after use, hooks on the edges. Lab 3 extends
# the real `torch.autograd` with functions of your own. Save the notebook and submit it
# (`make submit LAB=lab02`).
