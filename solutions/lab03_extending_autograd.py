# ---
# jupyter:
#   inside_pytorch:
#     lab: lab03
#     title: Extending autograd
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
# # Lab 3 — Extending autograd
#
# In lab 2 you built a reverse-mode engine. Real PyTorch lets you plug into its engine at many
# points, and this lab walks through the ones you will meet in practice, all in PyTorch 2.13:
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `custom_function` | a fused `linear + tanh` as a `torch.autograd.Function` with a hand-written backward | 15 | 1 |
# | `double_backward` | a Function whose backward is itself differentiable (checked with `gradgradcheck`) | 10 | 1 |
# | `my_gradcheck` | your own `gradcheck`: numerical and analytical Jacobians, and a verdict | 20 | 2 |
# | `forward_ad` | forward-mode AD with dual tensors (`jvp`) and a reverse-over-forward Hessian-vector product | 15 | 1 |
# | `per_sample_grads` | per-sample gradients with `torch.func.vmap(grad(...))` | 15 | 1 |
# | `ensembling` | running an ensemble of models as one vectorized model (`stack_module_state`) | 10 | 0.5 |
# | `saved_tensor_hooks` | offloading saved activations to numpy, and activation checkpointing | 15 | 1 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 7.5 in all.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests compare you with PyTorch. The hidden graders use more
# and different inputs, so a green `check` is a good sign, not a guarantee.
#
# Ground rules:
#
# * You may use `torch` everywhere. Where a part asks you to *write* something (a backward
#   formula, a Jacobian, a gradcheck), the graders check it by behaviour: they include cases where
#   the part's rules and PyTorch's ready-made tool give different answers (each part says which),
#   so a backward that calls autograd on the forward, or a `my_gradcheck` that calls
#   `torch.autograd.gradcheck`, gives wrong answers there and loses those points.
# * Work in float64 when you check gradients numerically: float32 finite differences are too noisy.
# * `functorch` is the old name of `torch.func`; use `torch.func`.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import forward_ad as fwAD
from torch.func import functional_call, grad, stack_module_state, vmap


# %% [markdown] nbgrader={"grade": false, "grade_id": "custom-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — A fused op with a hand-written backward (15 points)
#
# A `torch.autograd.Function` is a node you write yourself: a `forward` that computes the result
# (autograd does not record anything inside it) and a `backward` that receives
# $\partial L/\partial\text{output}$ and returns $\partial L/\partial\text{input}$ for every input.
# The modern form, and the one `torch.func` transforms require, splits the forward in two:
#
# ```python
# class MyOp(torch.autograd.Function):
#     @staticmethod
#     def forward(x, w):                         # no ctx: just the computation
#         ...
#     @staticmethod
#     def setup_context(ctx, inputs, output):    # decide what backward needs
#         x, w = inputs
#         ctx.save_for_backward(x, w, output)
#     @staticmethod
#     def backward(ctx, grad_out):               # one gradient per forward input (None if unneeded)
#         x, w, out = ctx.saved_tensors
#         ...
# ```
#
# You call it with `MyOp.apply(x, w)`; the result's `grad_fn` is a `MyOpBackward` node.
# The older form, `forward(ctx, ...)` with the saves inside it, still works.
#
# **Write `LinearTanh`**, the fusion of `F.linear` and `tanh`:
# $y = \tanh(x W^\top + b)$, with `x` of shape `(B, in)`, `weight` `(out, in)` and `bias`
# `(out,)` or `None`. With $g = \partial L/\partial y \odot (1 - y^2)$:
#
# $$\frac{\partial L}{\partial x} = g\,W, \qquad \frac{\partial L}{\partial W} = g^\top x, \qquad
# \frac{\partial L}{\partial b} = \textstyle\sum_{\text{batch}} g .$$
#
# Save `x`, `weight` and the output `y` with `ctx.save_for_backward`, and compute the gradients
# from `ctx.saved_tensors` with the formulas above: use the saved `y` rather than recomputing the
# tanh. (The graders check this: in some cases autograd hands your backward a saved `y` that
# differs from `tanh(x W^T + b)`, through saved-tensor hooks (part 7), and expect the formulas
# evaluated on it.) Return `None` for an input that does not need a gradient
# (`ctx.needs_input_grad[i]` tells you; `bias=None` never does). The backward must be your
# formula: no `torch.autograd.grad` or `.backward()` inside it. `x` may have a batch of 0 or 1,
# and `backward` may run twice on one graph (`retain_graph=True`): gradients then accumulate.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "custom-solution", "locked": false, "schema_version": 3, "solution": true}
class LinearTanh(torch.autograd.Function):
    """y = tanh(x @ weight.T + bias), with a hand-written backward."""

    @staticmethod
    def forward(x, weight, bias=None):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 custom-solution
        z = x @ weight.T
        if bias is not None:
            z = z + bias
        return torch.tanh(z)
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 custom-solution
        x, weight, *_ = inputs
        ctx.save_for_backward(x, weight, output)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_out):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 custom-solution
        x, weight, y = ctx.saved_tensors
        g = grad_out * (1 - y * y)
        grad_x = g @ weight if ctx.needs_input_grad[0] else None
        grad_w = g.T @ x if ctx.needs_input_grad[1] else None
        grad_b = g.sum(0) if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b
        ### END SOLUTION


def linear_tanh(x, weight, bias=None):
    return LinearTanh.apply(x, weight, bias)


# %% nbgrader={"grade": false, "grade_id": "custom-explore", "locked": false, "schema_version": 3, "solution": false}
x = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
w = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
b = torch.randn(5, dtype=torch.double, requires_grad=True)
y = linear_tanh(x, w, b)
print(y.grad_fn)
print("matches torch:", torch.allclose(y, torch.tanh(F.linear(x, w, b))))
print("gradcheck:", torch.autograd.gradcheck(linear_tanh, (x, w, b)))

# %% nbgrader={"grade": true, "grade_id": "custom_function", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="A fused op with a hand-written backward"
check("custom_function")

# %% [markdown] nbgrader={"grade": false, "grade_id": "double-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — Double backward (10 points)
#
# `torch.autograd.grad(..., create_graph=True)` runs your `backward` with grad mode **on**, so
# the operations inside it are recorded and the gradient can be differentiated again (for
# Hessian-vector products, gradient penalties, meta-learning). That works exactly when the
# backward is written with differentiable torch operations on tensors that are still connected
# to the inputs. The trap: a value computed in `forward` or `setup_context` has no history
# (autograd records nothing there). Save the **inputs** and recompute what the backward needs from
# them, and the second derivative comes for free. (A backward that cannot be differentiated
# should say so with `@torch.autograd.function.once_differentiable`.)
#
# **Write `ScaledSwish`**: $y = x\,\sigma(\beta x)$ for a tensor `x` and a 0-d tensor `beta`.
# With $s = \sigma(\beta x)$:
#
# $$\frac{\partial y}{\partial x} = s + \beta x\, s(1-s), \qquad
# \frac{\partial y}{\partial \beta} = x^2 s(1-s).$$
#
# Remember that `beta` was broadcast: its gradient is a sum, with shape `()`. `x` may have any
# shape, 0-d and size-0 included. Save the inputs `x` and `beta` with `ctx.save_for_backward`
# and compute the first derivatives from `ctx.saved_tensors` with the formulas above (the graders
# may hand your backward a saved `x` that differs from the input, and expect the formulas
# evaluated on it). `torch.autograd.gradgradcheck` must pass.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "double-solution", "locked": false, "schema_version": 3, "solution": true}
class ScaledSwish(torch.autograd.Function):
    """y = x * sigmoid(beta * x), twice differentiable."""

    @staticmethod
    def forward(x, beta):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 double-solution
        return x * torch.sigmoid(beta * x)
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 double-solution
        x, beta = inputs
        ctx.save_for_backward(x, beta)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_out):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 double-solution
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        ds = s * (1 - s)
        grad_x = grad_out * (s + beta * x * ds)
        grad_beta = (grad_out * x * x * ds).sum()
        return grad_x, grad_beta
        ### END SOLUTION


def scaled_swish(x, beta):
    return ScaledSwish.apply(x, beta)


# %% nbgrader={"grade": false, "grade_id": "double-explore", "locked": false, "schema_version": 3, "solution": false}
x = torch.randn(6, dtype=torch.double, requires_grad=True)
beta = torch.tensor(1.5, dtype=torch.double, requires_grad=True)
print("gradcheck:", torch.autograd.gradcheck(scaled_swish, (x, beta)))
print("gradgradcheck:", torch.autograd.gradgradcheck(scaled_swish, (x, beta)))

# %% nbgrader={"grade": true, "grade_id": "double_backward", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Double backward"
check("double_backward")

# %% [markdown] nbgrader={"grade": false, "grade_id": "gradcheck-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Your own gradcheck (20 points)
#
# `torch.autograd.gradcheck(fn, inputs)` compares two Jacobians of `fn`, for every input that
# requires grad:
#
# * the **numerical** one, by central differences: column $j$ is
#   $\big(f(x + \varepsilon e_j) - f(x - \varepsilon e_j)\big) / 2\varepsilon$, one pair of
#   evaluations per input element;
# * the **analytical** one, from the backward you wrote: row $i$ is the vector-Jacobian product
#   with the one-hot $e_i$ as `grad_outputs`, one `torch.autograd.grad` call per output element
#   (pass `retain_graph=True`; an input the output does not depend on gets a zero row).
#
# They agree when `|analytical - numerical| <= atol + rtol * |numerical|` holds everywhere
# (`torch.allclose(analytical, numerical, rtol, atol)`), with PyTorch's defaults
# `eps=1e-6, atol=1e-5, rtol=1e-3`.
#
# Write the three functions below for real-valued float64 inputs and an `fn` that returns one
# tensor. `inputs` is a tuple; only its tensors with `requires_grad=True` are checked, in order
# (other items, such as Python floats or tensors that do not require grad, are passed to `fn`
# unchanged). Jacobians have shape `(output.numel(), input.numel())` and the element order of
# `reshape(-1)` (also for a non-contiguous, 0-d or empty input). For the numerical one, perturb a
# detached copy of the input, never the caller's tensor, and evaluate `fn` under
# `torch.no_grad()`. For the analytical one, call `fn(*inputs)` once on the caller's own inputs;
# an output that does not require grad (it does not depend on the inputs) gives zero Jacobians.
# `my_gradcheck` returns `True` or `False` (it does not raise) and leaves no `.grad` on the inputs.
#
# **Yours is not PyTorch's.** `my_gradcheck` checks the Jacobians and nothing else; the graders
# run it on correct and deliberately wrong Functions and expect the verdict of the rules above,
# which is `torch.autograd.gradcheck`'s on most of them but not all:
#
# * torch's gradcheck also rejects a backward that is not exactly linear in `grad_output`
#   (a tiny constant added to the gradient) or not reentrant (two runs differ in the last bits),
#   even when the Jacobians agree within `atol`: yours says `True` there;
# * torch perturbs the caller's tensors in place, so an `fn` that reads a tensor it captured
#   (not its argument) moves with them; you perturb copies, so for such an `fn` the numerical
#   column is zero while the analytical one is not: yours says `False`;
# * the same tensor passed twice (`fn = lambda a, b: a * b` on `(x, x)`): torch's in-place
#   perturbation moves both arguments at once, yours moves one copy, so your numerical column is
#   half the analytical one: yours says `False`, torch's `True`;
# * an output that does not require grad but still depends on the input, like
#   `(x * 1e-8).detach()`: torch insists that its numerical Jacobian be exactly zero (`False`);
#   yours compares it with the zero analytical one within `atol`: `True`;
# * an input with no elements has an empty Jacobian: it agrees.
#
# So `my_gradcheck` must not call `torch.autograd.gradcheck`, its helpers or
# `torch.autograd.functional`: they answer those cases differently.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "gradcheck-solution", "locked": false, "schema_version": 3, "solution": true}
def numerical_jacobian(fn, inputs, eps=1e-6):
    """One (out.numel(), inp.numel()) Jacobian per input that requires grad, by central differences."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 gradcheck-solution
    inputs = tuple(inputs)
    jacobians = []
    with torch.no_grad():
        for i, inp in enumerate(inputs):
            if not (torch.is_tensor(inp) and inp.requires_grad):
                continue
            args = [a.detach() if torch.is_tensor(a) else a for a in inputs]
            moved = inp.detach().clone(memory_format=torch.contiguous_format)
            args[i] = moved
            flat = moved.view(-1)
            columns = []
            for j in range(flat.numel()):
                original = flat[j].item()
                flat[j] = original + eps
                plus = fn(*args).reshape(-1).clone()
                flat[j] = original - eps
                minus = fn(*args).reshape(-1).clone()
                flat[j] = original
                columns.append((plus - minus) / (2 * eps))
            n_out = fn(*args).numel()
            jacobians.append(torch.stack(columns, dim=1) if columns else torch.zeros(n_out, 0, dtype=moved.dtype))
    return jacobians
    ### END SOLUTION


def analytical_jacobian(fn, inputs):
    """One (out.numel(), inp.numel()) Jacobian per input that requires grad, row by row with autograd.grad."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 gradcheck-solution
    diff = [a for a in inputs if torch.is_tensor(a) and a.requires_grad]
    out = fn(*inputs)
    flat_out = out.reshape(-1)
    rows = [[] for _ in diff]
    if not out.requires_grad:  # the output does not depend on any input: zero Jacobians
        return [torch.zeros(flat_out.numel(), a.numel(), dtype=out.dtype) for a in diff]
    for k in range(flat_out.numel()):
        one_hot = torch.zeros_like(flat_out)
        one_hot[k] = 1
        grads = torch.autograd.grad(out, diff, one_hot.view_as(out), retain_graph=True, allow_unused=True)
        for row, g, a in zip(rows, grads, diff):
            row.append(torch.zeros(a.numel(), dtype=out.dtype) if g is None else g.reshape(-1))
    return [torch.stack(row) if row else torch.zeros(0, a.numel(), dtype=out.dtype) for row, a in zip(rows, diff)]
    ### END SOLUTION


def my_gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """True when the analytical and numerical Jacobians agree for every input that requires grad."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 gradcheck-solution
    numerical = numerical_jacobian(fn, inputs, eps)
    analytical = analytical_jacobian(fn, inputs)
    return all(a.shape == n.shape and torch.allclose(a, n.to(a.dtype), rtol=rtol, atol=atol)
               for a, n in zip(analytical, numerical))
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "gradcheck-explore", "locked": false, "schema_version": 3, "solution": false}
class BadSquare(torch.autograd.Function):
    """x ** 2 with a backward that forgot the factor 2."""

    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * x


x = torch.randn(5, dtype=torch.double, requires_grad=True)
print("mine on LinearTanh:", my_gradcheck(linear_tanh, (torch.randn(3, 2, dtype=torch.double, requires_grad=True),
                                                           torch.randn(4, 2, dtype=torch.double, requires_grad=True))))
print("mine on BadSquare:", my_gradcheck(BadSquare.apply, (x,)),
      " torch:", torch.autograd.gradcheck(BadSquare.apply, (x,), raise_exception=False))

# %% nbgrader={"grade": true, "grade_id": "my_gradcheck", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Your own gradcheck"
check("my_gradcheck")

# %% [markdown] nbgrader={"grade": false, "grade_id": "fwd-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Forward-mode AD and Hessian-vector products (15 points)
#
# Reverse mode gives a vector-Jacobian product $v^\top J$ per backward pass; **forward mode**
# gives a Jacobian-vector product $J v$ in the same pass as the forward. PyTorch implements it
# with *dual tensors*: a primal value with a tangent attached, each op pushing the tangent
# through its own derivative formula (a custom Function gets it from its `jvp` staticmethod).
#
# ```python
# with fwAD.dual_level():                         # from torch.autograd import forward_ad as fwAD
#     dual = fwAD.make_dual(x, v)                 # x + v·ε
#     out = f(dual)
#     primal, tangent = fwAD.unpack_dual(out)     # f(x), J v  (tangent is None if out ignores x)
# ```
#
# **`jvp(f, primals, tangents)`** returns `(f(*primals), J v)` for a function of several tensors
# that returns one tensor. Use dual tensors, not `torch.autograd.functional.jvp` (that one is
# computed with two reverse passes, and the graders include a Function that has a `jvp` but no
# backward) nor `torch.func.jvp` (the graders also include an old-style Function,
# `forward(ctx, x)` with a `jvp`, which dual tensors handle and `torch.func` transforms refuse).
# Return plain tensors (call `unpack_dual` inside the level), and a zero tangent when the output
# does not depend on the inputs. Inputs may be 0-d or empty.
#
# **`hvp(f, x, v)`**: the Hessian-vector product $H v$ of a scalar function, **reverse over
# forward**: inside a dual level, $\nabla f(x) \cdot v$ is the tangent of `f(make_dual(x, v))`;
# when `x` requires grad that tangent is differentiable, and its gradient with respect to `x` is
# $H v$. One forward pass, one backward pass, and no Hessian is ever built. (`torch.func` spells
# the same idea `grad(lambda x: jvp(f, (x,), (v,))[1])(x)`, but it refuses old-style Functions,
# and reverse over reverse needs a backward that the graders' forward-only Functions do not have.)
# Return a tensor without history, and leave the caller's `x` as it is (it may require grad).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "fwd-solution", "locked": false, "schema_version": 3, "solution": true}
def jvp(f, primals, tangents):
    """(f(*primals), J @ tangents) by forward-mode AD with dual tensors."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 fwd-solution
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = f(*duals)
        primal, tangent = fwAD.unpack_dual(out)
        if tangent is None:
            tangent = torch.zeros_like(primal)
    return primal, tangent
    ### END SOLUTION


def hvp(f, x, v):
    """The Hessian of the scalar function f at x, times v: reverse-mode over forward-mode."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 fwd-solution
    x = x.detach().requires_grad_(True)
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, v))
        directional = fwAD.unpack_dual(out).tangent
    if directional is None or not directional.requires_grad:
        return torch.zeros_like(x)
    (hv,) = torch.autograd.grad(directional, x, allow_unused=True)
    return torch.zeros_like(x) if hv is None else hv.detach()
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "fwd-explore", "locked": false, "schema_version": 3, "solution": false}
def rosenbrock(x):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


x = torch.randn(5, dtype=torch.double)
v = torch.randn(5, dtype=torch.double)
print("jvp:", jvp(torch.sin, (x,), (v,))[1], "\n  cos(x)·v:", torch.cos(x) * v)
print("hvp:", hvp(rosenbrock, x, v))
print("H @ v:", torch.autograd.functional.hessian(rosenbrock, x) @ v)

# %% nbgrader={"grade": true, "grade_id": "forward_ad", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Forward-mode AD and Hessian-vector products"
check("forward_ad")

# %% [markdown] nbgrader={"grade": false, "grade_id": "psg-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Per-sample gradients with `torch.func` (15 points)
#
# `loss.backward()` gives the gradient of the batch loss: per-sample gradients are summed away.
# Differential privacy, influence functions and gradient-noise studies need each sample's own
# gradient. The loop is easy and slow. `torch.func` does it in one vectorized call, by composing
# function transforms:
#
# * `functional_call(model, params, args)` runs `model` with the tensors in the dict `params`
#   in place of its own parameters: the model becomes a function of its parameters;
# * `grad(f)` is a function returning $\nabla f$ with respect to its first argument (a dict of
#   tensors gives a dict of gradients);
# * `vmap(g, in_dims=(None, 0, 0))` maps `g` over dim 0 of the 2nd and 3rd arguments while
#   sharing the first: the batch dimension disappears inside `g`, which sees one sample.
#
# **`per_sample_grads(model, loss_fn, x, y)`** returns a dict `{name: tensor of shape (B,
# *param.shape)}` for every parameter of `model` that requires grad (frozen parameters, with
# `requires_grad=False`, are left out of the dict; parameters of nested modules are in it under
# their dotted names), where entry `b` is the gradient of
# `loss_fn(model(x[b:b+1]), y[b:b+1])`. Use `vmap(grad(...))` (inside `grad`, add the batch dim
# back with `unsqueeze(0)`), detach the parameters, and leave the model untouched: no `.grad` is
# set. **`per_sample_grads_loop`** computes the same with a Python loop over the samples (use
# `torch.autograd.grad`, not `.backward()`, so that the model stays clean). The graders check the
# values of both; they also time the two, for information only (the speed-up is recorded, not
# graded).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "psg-solution", "locked": false, "schema_version": 3, "solution": true}
def per_sample_grads(model, loss_fn, x, y):
    """{name: (B, *shape)} per-sample gradients, with vmap(grad(...))."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 psg-solution
    params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}

    def sample_loss(params, xb, yb):
        out = functional_call(model, params, (xb.unsqueeze(0),))
        return loss_fn(out, yb.unsqueeze(0))

    return vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
    ### END SOLUTION


def per_sample_grads_loop(model, loss_fn, x, y):
    """The same, one sample at a time."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 psg-solution
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    per_sample = {name: [] for name in names}
    for b in range(x.shape[0]):
        loss = loss_fn(model(x[b:b + 1]), y[b:b + 1])
        for name, g in zip(names, torch.autograd.grad(loss, params)):
            per_sample[name].append(g)
    return {name: torch.stack(gs) for name, gs in per_sample.items()}
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "psg-explore", "locked": false, "schema_version": 3, "solution": false}
import time

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 5))
x, y = torch.randn(128, 20), torch.randint(0, 5, (128,))
per_sample_grads(model, F.cross_entropy, x, y)  # the first vmap call pays a one-time set-up
for fn in (per_sample_grads, per_sample_grads_loop):
    start = time.perf_counter()
    grads = fn(model, F.cross_entropy, x, y)
    print(f"{fn.__name__:24s} {1e3 * (time.perf_counter() - start):7.1f} ms", {k: tuple(v.shape) for k, v in grads.items()})

# %% nbgrader={"grade": true, "grade_id": "per_sample_grads", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Per-sample gradients with torch.func"
check("per_sample_grads")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ens-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — Model ensembling (10 points)
#
# Same trick, other axis: $M$ models with the same architecture and different weights can run
# as one vectorized model. `stack_module_state(models)` returns two dicts, `params` and
# `buffers`, whose tensors have a new leading dim of size $M$. A *stateless* copy of one model
# on the `meta` device (shapes only, no memory) serves as the function:
# `functional_call(base, (params, buffers), (x,))`, and `vmap` over dim 0 of the stacked
# state runs all models at once.
#
# **`ensemble_predict(models, x, same_input=True)`** returns a tensor of shape `(M, B, out)`.
# With `same_input=True` every model sees the same `x` of shape `(B, in)`
# (`in_dims=(0, 0, None)`); with `same_input=False`, `x` has shape `(M, B, in)` and model `m`
# sees `x[m]`. Do not move or change the caller's models: make the meta copy with
# `copy.deepcopy(models[0]).to("meta")`. Models may have buffers (a batch norm in eval mode: its
# running statistics differ between models, so stack them too), and an ensemble may hold one model.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ens-solution", "locked": false, "schema_version": 3, "solution": true}
def ensemble_predict(models, x, same_input=True):
    """Outputs of every model, stacked: (M, B, out), in one vmap call."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab03 ens-solution
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def run(p, b, xb):
        return functional_call(base, (p, b), (xb,))

    return vmap(run, in_dims=(0, 0, None if same_input else 0))(params, buffers, x)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ens-explore", "locked": false, "schema_version": 3, "solution": false}
models = [nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3)) for _ in range(4)]
x = torch.randn(8, 20)
out = ensemble_predict(models, x)
print(out.shape, torch.allclose(out[2], models[2](x), atol=1e-6))

# %% nbgrader={"grade": true, "grade_id": "ensembling", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Model ensembling"
check("ensembling")

# %% [markdown] nbgrader={"grade": false, "grade_id": "hooks-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — Saved-tensor hooks and checkpointing (15 points)
#
# Between forward and backward, autograd keeps the tensors each node saved: activations,
# weights, outputs. That is where training memory goes. Two ways to spend less:
#
# **Offloading.** `torch.autograd.graph.saved_tensors_hooks(pack, unpack)` is a context
# manager: while it is active, every tensor that autograd saves goes through `pack(tensor)`, and
# autograd keeps whatever `pack` returns. At backward time it calls `unpack(that)` and uses the
# tensor you give back, which must hold the same values. Moving saved tensors to cheaper memory
# (CPU RAM when training on a GPU, or disk) is one pack/unpack pair.
#
# Write **`NumpyOffload`**: `pack` copies the tensor into a numpy array that owns its memory
# (detach it first; `.numpy()` alone shares memory with the tensor, so copy it, with
# `order="K"`: a saved tensor may be a transposed view, and a copy in another layout sends the
# backward matmul down another kernel, whose rounding differs in the last bits), keeps it in
# `self.store` under a new integer key and returns the key; `unpack(key)` returns
# `torch.from_numpy(...)` of the stored array. Used as `with NumpyOffload() as store:`, it installs
# its hooks for the block.
#
# **Checkpointing** trades compute for memory: run a block under `torch.no_grad()` so that
# nothing inside it is saved, keep only its inputs, and run the block again, with grad, during
# backward. Write it as an autograd Function, **`Checkpoint`**, with `apply(run_fn, rng_state,
# *args)`:
#
# * forward: `run_fn(*args)` (a Function's forward already runs without grad); save `args`;
# * backward: detach the saved args (keeping their `requires_grad`), recompute
#   `run_fn(*args)` under `torch.enable_grad()`, call `torch.autograd.backward(outputs,
#   grad_out)`, which also accumulates into the block's parameters' `.grad`, and return
#   `None, None` followed by each arg's `.grad`.
#
# Randomness must replay: a dropout inside the block has to draw the same mask twice.
# `checkpoint(run_fn, *args)` (given) passes `torch.get_rng_state()` in; your backward recomputes
# inside `torch.random.fork_rng(devices=[])` after `torch.set_rng_state(rng_state)`, so the
# caller's random stream is not disturbed. Replay the `rng_state` you were given, whatever the
# state is when `apply` runs (the graders pass one from another seed). This is the design of
# `torch.utils.checkpoint` with `use_reentrant=True`, which is still what `checkpoint` does when
# `use_reentrant` is not passed in PyTorch 2.13 (with a warning asking you to pass it);
# `use_reentrant=False`, the recommended variant, is built on saved-tensor hooks.
# It works with `loss.backward()`, not with `torch.autograd.grad`, and only when at least one of
# `args` requires grad (otherwise the output has no `grad_fn` and the block's parameters get no
# gradient: the classic pitfall of this design). Do not call `torch.utils.checkpoint` here.
#
# The graders expect the gradients to be **bit-identical** to a run without hooks or
# checkpoints, and check the behaviour that sets offloading and checkpointing apart from a plain
# run: after the forward, `store` holds every saved tensor (as numpy arrays, under integer keys
# that increase in the order autograd packed them); parameters changed in place after the forward
# do not change an offloaded backward (the store holds copies), while a change to the arrays in
# `store` does (unpack reads the store); and a checkpointed block's backward sees weights changed
# after the forward (it recomputes), a block whose input does not require grad gives its
# parameters no gradient, and the `rng_state` given to `Checkpoint.apply` is the one replayed.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "hooks-solution", "locked": false, "schema_version": 3, "solution": true}
class NumpyOffload:
    """Saved tensors live in self.store (numpy arrays) between forward and backward."""

    def __init__(self):
        self.store = {}
        self._hooks = None

    def pack(self, tensor):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 hooks-solution
        key = len(self.store)
        self.store[key] = tensor.detach().numpy().copy(order="K")
        return key
        ### END SOLUTION

    def unpack(self, key):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 hooks-solution
        return torch.from_numpy(self.store[key])
        ### END SOLUTION

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)


class Checkpoint(torch.autograd.Function):
    """Keep only the inputs of run_fn; recompute it during backward."""

    @staticmethod
    def forward(run_fn, rng_state, *args):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 hooks-solution
        return run_fn(*args)
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 hooks-solution
        run_fn, rng_state, *args = inputs
        ctx.run_fn = run_fn
        ctx.rng_state = rng_state
        ctx.save_for_backward(*args)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, *grad_outs):
        ### BEGIN SOLUTION
        # IPT-CANARY lab03 hooks-solution
        args = [a.detach().requires_grad_(a.requires_grad) for a in ctx.saved_tensors]
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng_state)
            with torch.enable_grad():
                outputs = ctx.run_fn(*args)
        if torch.is_tensor(outputs):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grad_outs) if o.requires_grad]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, *[a.grad if a.requires_grad else None for a in args])
        ### END SOLUTION


def checkpoint(run_fn, *args):
    return Checkpoint.apply(run_fn, torch.get_rng_state(), *args)


# %% nbgrader={"grade": false, "grade_id": "hooks-explore", "locked": false, "schema_version": 3, "solution": false}
def saved_bytes(run):
    """Bytes of the tensors autograd saves while `run()` builds its graph (outer hooks that keep them)."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    return loss, sum(seen.values())


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Dropout(0.2), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 10))
xb = torch.randn(32, 64, requires_grad=True)  # see the note above: an input must require grad
for name, run in [("plain", lambda: net(xb).square().mean()),
                  ("checkpointed", lambda: net[5](checkpoint(net[:5], xb)).square().mean())]:
    torch.manual_seed(1)
    loss, nbytes = saved_bytes(run)
    net.zero_grad()
    loss.backward()
    print(f"{name:13s} saved {nbytes / 1024:7.1f} KiB  grad[0] sum {net[0].weight.grad.sum().item():+.6f}")

# %% nbgrader={"grade": true, "grade_id": "saved_tensor_hooks", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Saved-tensor hooks and checkpointing"
check("saved_tensor_hooks")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have plugged into autograd at each of its extension points: nodes with your own backward
# (and double backward), a checker for them, the forward-mode engine, the function transforms of
# `torch.func`, and the saved-tensor machinery that decides training memory. Save the notebook
# and submit it (`make submit LAB=lab03`).
