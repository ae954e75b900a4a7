# IPT-CANARY lab03 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab03 (extending autograd), run against the reference solution in P0.

The cases are our own, written as data and small functions. They are *modelled on* the public
test suites of PyTorch, whose behaviour is the oracle here (no code or prose of those suites is
copied; each group names the tests that gave the idea):

* `test/test_autograd.py`, the custom-Function tests (`test_function`, `test_accumulate_grad`,
  `test_custom_function_non_tensor_inputs_outputs`, `test_invalid_gradients`, ...): LinearTanh and
  ScaledSwish against composite torch ops, torch's own `gradcheck`/`gradgradcheck` on them;
* `test/test_autograd.py`, the `test_gradcheck_*` tests and `torch/autograd/gradcheck.py`
  semantics: `my_gradcheck` must give torch.autograd.gradcheck's verdict (passes / raises
  GradcheckError / raises another error) wherever the lab's spec agrees with torch. Where the
  notebook states that the spec differs (torch's extra reentrancy, grad_output-linearity and
  undefined-grad checks; copies instead of in-place perturbation), the case says which torch
  option isolates the Jacobian comparison (`nondet_tol`, `check_undefined_grad=False`) or gives
  the spec's verdict literally, and asserts torch's own different verdict as a fact of 2.13;
* `test/test_autograd.py`, forward-mode AD (`TestAutogradForwardMode`: dual packing/unpacking,
  in-place and view ops on duals, custom Functions with `jvp`, non-tensor arguments before
  tensors): `jvp` and `hvp` against `torch.autograd.functional.jvp/hvp` and `torch.func`;
* `test/functorch/test_eager_transforms.py` (`test_resnet18_per_sample_grads`,
  `test_ensemble_regression`, the grad-transform tests) and `test/functorch/test_vmap.py`
  (in_dims None vs 0): per-sample gradients against a loop of `torch.autograd.grad`, ensembles
  against each model run on its own;
* `test/test_autograd.py` saved-tensor-hook tests and `test/test_utils.py` checkpoint tests
  (rng replay, partial grad, several outputs): NumpyOffload against a run without hooks (bit
  for bit), Checkpoint against `torch.utils.checkpoint.checkpoint(use_reentrant=True)`.

    run()   # -> number of cases; raises AssertionError listing every disagreement
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function
from torch.autograd.gradcheck import GradcheckError, _get_numerical_jacobian

from autograder.engine.peer_suite import Suite

D = torch.float64
SUITE = Suite("lab03")
CASES, case, reference = SUITE.cases, SUITE.case, SUITE.reference  # check(ref) raises on a disagreement


def _rand(seed, *shape, scale=1.0, shift=0.0, dtype=D):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=g, dtype=dtype) * scale + shift


def _same(got, want, what, rtol=1e-7, atol=1e-9):
    assert (got is None) == (want is None), f"{what}: one side is None ({got is None} vs {want is None})"
    if got is None:
        return
    got, want = torch.as_tensor(got).detach(), torch.as_tensor(want).detach()
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} vs torch {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs torch {want.dtype}"
    assert torch.allclose(got, want, rtol=rtol, atol=atol), f"{what}: values differ by {(got - want).abs().max():.3g}"


def _bitwise(got, want, what):
    assert (got is None) == (want is None), f"{what}: one side is None"
    if got is not None:
        assert got.dtype == want.dtype and torch.equal(got, want), f"{what}: not bit-identical to torch"


def _fn_class(forward, backward, setup=None, jvp=None, name="Fn"):
    """A setup_context-style Function from plain functions (ctx passed to setup/backward/jvp)."""
    body = {"forward": staticmethod(forward),
            "setup_context": staticmethod(setup or (lambda ctx, inputs, output: ctx.save_for_backward(*[
                i for i in inputs if torch.is_tensor(i)]))),
            "backward": staticmethod(backward)}
    if jvp is not None:
        body["jvp"] = staticmethod(jvp)
    return type(name, (Function,), body)


# =================================================================================================
# Part custom_function: LinearTanh. Modelled on test_autograd.py custom-Function tests
# (test_function: gradients of a Function vs the composite; test_accumulate_grad: backward twice
# with retain_graph accumulates; needs_input_grad / inputs without grad; and gradcheck of the
# Function as the suites do for every custom Function).
# =================================================================================================
LINEAR_TANH = [  # (batch, n_in, n_out, bias, requires (x, w, b), dtype, backward passes)
    (3, 2, 4, True, (True, True, True), D, 1),
    (1, 3, 1, True, (True, True, True), D, 1),
    (0, 2, 3, True, (True, True, True), D, 1),
    (4, 2, 2, False, (True, True, False), D, 1),
    (2, 3, 2, True, (False, True, True), D, 1),
    (2, 3, 2, True, (True, False, False), D, 1),
    (2, 2, 3, True, (False, False, True), D, 1),
    (3, 2, 2, True, (True, True, True), D, 2),
    (5, 4, 3, True, (True, True, True), torch.float32, 1),
]

for _i, (_b, _n_in, _n_out, _bias, _req, _dt, _times) in enumerate(LINEAR_TANH):
    @case("custom_function", f"linear_tanh grads vs tanh(F.linear) #{_i} (B={_b}, bias={_bias}, req={_req}, {_dt}, x{_times})")
    def _check(ref, b=_b, n_in=_n_in, n_out=_n_out, bias=_bias, req=_req, dt=_dt, times=_times, seed=_i):
        raw = [_rand(seed, b, n_in, dtype=dt), _rand(seed + 50, n_out, n_in, dtype=dt), _rand(seed + 99, n_out, dtype=dt)]
        g = _rand(seed + 7, b, n_out, dtype=dt)
        tol = dict(rtol=1e-5, atol=1e-6) if dt == torch.float32 else {}
        sides = []
        for fn in (ref.linear_tanh, lambda x, w, bb: torch.tanh(F.linear(x, w, bb))):
            ts = [t.clone().requires_grad_(r) for t, r in zip(raw, req, strict=True)]
            if not bias:
                ts[2] = None
            y = fn(*ts)
            for _ in range(times):
                y.backward(g, retain_graph=True)
            sides.append((y, [None if t is None else t.grad for t in ts]))
        _same(sides[0][0], sides[1][0], "output", **tol)
        for k in range(3):
            _same(sides[0][1][k], sides[1][1][k], f"grad of input {k}", **tol)


for _i, (_b, _bias) in enumerate([(3, True), (1, False), (2, True)]):
    @case("custom_function", f"torch.autograd.gradcheck passes on LinearTanh #{_i} (B={_b}, bias={_bias})")
    def _check(ref, b=_b, bias=_bias, seed=_i):
        args = (_rand(seed, b, 3).requires_grad_(), _rand(seed + 1, 2, 3).requires_grad_(),
                _rand(seed + 2, 2).requires_grad_() if bias else None)
        assert torch.autograd.gradcheck(ref.linear_tanh, args), "torch's gradcheck rejects LinearTanh"


@case("custom_function", "LinearTanh inside a larger graph (its input a non-leaf, its output used twice)")
def _check(ref):
    raw = [_rand(3, 4, 3), _rand(4, 2, 3), _rand(5, 2)]
    results = []
    for fn in (ref.linear_tanh, lambda x, w, b: torch.tanh(F.linear(x, w, b))):
        ts = [t.clone().requires_grad_() for t in raw]
        h = fn(ts[0].sin(), ts[1], ts[2])
        (h * h.exp()).sum().backward()
        results.append([t.grad for t in ts])
    for k, (a, b) in enumerate(zip(*results, strict=True)):
        _same(a, b, f"grad of input {k}")


# =================================================================================================
# Part double_backward: ScaledSwish. Modelled on test_autograd.py's gradgradcheck use on custom
# Functions (test_gradcheck_single_input runs gradcheck and gradgradcheck; the double-backward
# tests of Functions whose backward is made of differentiable ops).
# =================================================================================================
SWISH = [((), 1.5), ((0,), 0.7), ((4,), -0.8), ((2, 3), 2.0), ((1, 1, 3), 0.0), ((5,), 1e-3)]

for _i, (_shape, _beta) in enumerate(SWISH):
    @case("double_backward", f"gradcheck + gradgradcheck on ScaledSwish, shape {_shape}, beta {_beta}")
    def _check(ref, shape=_shape, beta=_beta, seed=_i):
        x = _rand(seed, *shape).requires_grad_()
        bt = torch.tensor(beta, dtype=D, requires_grad=True)
        assert torch.autograd.gradcheck(ref.scaled_swish, (x, bt)), "gradcheck fails"
        assert torch.autograd.gradgradcheck(ref.scaled_swish, (x, bt)), "gradgradcheck fails"

    @case("double_backward", f"ScaledSwish first and second derivatives vs autograd on the formula, shape {_shape}")
    def _check(ref, shape=_shape, beta=_beta, seed=_i):
        x0, g, vx = _rand(seed, *shape), _rand(seed + 1, *shape), _rand(seed + 2, *shape)
        vb = 0.3
        results = []
        for fn in (ref.scaled_swish, lambda x, b: x * torch.sigmoid(b * x)):
            x, b = x0.clone().requires_grad_(), torch.tensor(beta, dtype=D, requires_grad=True)
            gx, gb = torch.autograd.grad(fn(x, b), (x, b), g, create_graph=True)
            hx, hb = torch.autograd.grad((gx * vx).sum() + gb * vb, (x, b), allow_unused=True)
            results.append((gx, gb, torch.zeros_like(x) if hx is None else hx, torch.zeros_like(b) if hb is None else hb))
        for what, a, w in zip(("dx", "dbeta", "Hx", "Hbeta"), *results, strict=True):
            _same(a, w, what)


@case("double_backward", "gradcheck + gradgradcheck on ScaledSwish with a beta that does not require grad")
def _check(ref):
    x, beta = _rand(60, 2, 3).requires_grad_(), torch.tensor(0.9, dtype=D)
    assert torch.autograd.gradcheck(ref.scaled_swish, (x, beta)), "gradcheck fails"
    assert torch.autograd.gradgradcheck(ref.scaled_swish, (x, beta)), "gradgradcheck fails"


# =================================================================================================
# Part my_gradcheck. Modelled on test_autograd.py's test_gradcheck_* tests; the oracle is
# torch.autograd.gradcheck (slow mode, its default) on the same function and inputs.
# =================================================================================================
def _verdict(call):
    try:
        return bool(call())
    except GradcheckError:  # a subclass of RuntimeError: check it first
        return False
    except Exception as e:  # noqa: BLE001 - any other error is part of the verdict
        return f"raises {type(e).__name__}"


def _torch_gc(make, kw, torch_kw=None):
    fn, inputs = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _verdict(lambda: torch.autograd.gradcheck(fn, inputs, **kw, **(torch_kw or {})))


def _ref_gc(ref, make, kw):
    fn, inputs = make()
    before = [t.detach().clone() if torch.is_tensor(t) else t for t in inputs]
    got = _verdict(lambda: ref.my_gradcheck(fn, inputs, **kw))
    if not isinstance(got, str):  # it returned: the lab's rules on the result and the caller's inputs
        res = ref.my_gradcheck(fn, inputs, **kw)
        assert isinstance(res, bool), f"my_gradcheck returned a {type(res).__name__}"
        for k, (t, b) in enumerate(zip(inputs, before, strict=True)):
            if torch.is_tensor(t):
                assert torch.equal(t.detach(), b), f"my_gradcheck changed input {k}"
                assert t.grad is None, f"my_gradcheck left a .grad on input {k}"
    return got


def gc_case(name, make, kw=None, torch_kw=None, spec=None, torch_says=None):
    """spec=None: the expected verdict is torch's (with torch_kw added, an option that only switches
    off a check the notebook says the lab's gradcheck does not make). spec=True/False: the verdict
    of the lab's rules, where torch differs; torch_says is torch's own verdict, asserted as a fact."""
    kw = kw or {}

    @case("my_gradcheck", name)
    def _check(ref):
        want = _torch_gc(make, kw, torch_kw) if spec is None else spec
        if torch_says is not None:
            actual = _torch_gc(make, kw)
            assert actual == torch_says, f"torch 2.13's gradcheck says {actual!r} here, the case expects {torch_says!r}"
        got = _ref_gc(ref, make, kw)
        assert got == want, f"my_gradcheck says {got!r}, expected {want!r} ({'torch' if spec is None else 'spec'})"


def _leaf(seed, *shape, **kw):
    return _rand(seed, *shape, **kw).requires_grad_()


# -- Functions of the gradcheck zoo (ours; the ideas are named next to each group) ---------------
class _ScaleBy(Function):
    """y = c * x with a backward that uses c + delta (delta = 0: correct)."""

    @staticmethod
    def forward(x, c, delta):
        return c * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1] + inputs[2]

    @staticmethod
    def backward(ctx, g):
        return ctx.k * g, None, None


class _Jitter(Function):
    """Identity whose backward multiplies by 1 + U(0, jitter): not reentrant when jitter > 0."""

    @staticmethod
    def forward(x, jitter):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.jitter = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * (1 + torch.rand_like(g) * ctx.jitter), None


class _AddConst(Function):
    """x * 2 with a backward that adds a constant: not linear in grad_output."""

    @staticmethod
    def forward(x, const):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.const = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return 2 * g + ctx.const, None


def _no_materialize(safe):
    """x * 3 whose backward sees None for an undefined grad (set_materialize_grads(False))."""
    def setup(ctx, inputs, output):
        ctx.set_materialize_grads(False)

    def backward(ctx, g):
        if safe and g is None:
            return None
        return 3 * g
    return _fn_class(lambda x: x * 3, backward, setup=setup)


_Cube = _fn_class(lambda x: x ** 3, lambda ctx, g: 3 * g * ctx.saved_tensors[0] ** 2)
_TwoInputs = _fn_class(  # t1 + scale * t2 * t3 (+ t1 * t2): a Python number and a tensor without grad among the inputs
    lambda t1, scale, t2, t3: t1 + scale * t2 * t3 + t1 * t2,
    lambda ctx, g: (g * (1 + ctx.saved_tensors[1]), None,
                    g * (ctx.scale * ctx.saved_tensors[2] + ctx.saved_tensors[0]), None),
    setup=lambda ctx, inputs, output: (setattr(ctx, "scale", inputs[1]), ctx.save_for_backward(inputs[0], inputs[2], inputs[3])))
_TwoInputsGarbage = _fn_class(  # the same, returning nonsense for t3 (which does not require grad)
    lambda t1, scale, t2, t3: t1 + scale * t2 * t3 + t1 * t2,
    lambda ctx, g: (g * (1 + ctx.saved_tensors[1]), None,
                    g * (ctx.scale * ctx.saved_tensors[2] + ctx.saved_tensors[0]), g * 100.0),
    setup=lambda ctx, inputs, output: (setattr(ctx, "scale", inputs[1]), ctx.save_for_backward(inputs[0], inputs[2], inputs[3])))
_MatMulWrongB = _fn_class(lambda a, b: a @ b, lambda ctx, g: (g @ ctx.saved_tensors[1].T, ctx.saved_tensors[0].T @ g * 1.01))
_BadShape = _fn_class(lambda x: x * 2, lambda ctx, g: torch.ones(7, dtype=g.dtype))
_SumToScalar = _fn_class(lambda x: (x * x).sum(), lambda ctx, g: 2 * g * ctx.saved_tensors[0])
_SumToScalarHalf = _fn_class(lambda x: (x * x).sum(), lambda ctx, g: g * ctx.saved_tensors[0])

# test_gradcheck_single_input: a plain op with one input (gradcheck on inp.mul(5))
gc_case("mul by 5, one input", lambda: (lambda x: x.mul(5), (_leaf(1, 6),)))
gc_case("composite op chain, two inputs (test_gradcheck_* multiple inputs)",
        lambda: (lambda a, b: torch.tanh(a @ b).exp(), (_leaf(2, 2, 3), _leaf(3, 3, 2))))
gc_case("0-d input", lambda: (lambda x: x.sin() * x, (_leaf(4),)))
gc_case("empty contiguous input: empty Jacobian agrees", lambda: (lambda x: (x * x).sum(), (_leaf(5, 0, 2),)))
gc_case("transposed (non-contiguous) input", lambda: (lambda a, b: a @ b, (_leaf(6, 2, 3), _rand(7, 3, 3).T.requires_grad_())))
gc_case("custom Function with a 0-d output", lambda: (_SumToScalar.apply, (_leaf(8, 4),)))
gc_case("custom Function with a 0-d output, wrong factor", lambda: (_SumToScalarHalf.apply, (_leaf(8, 4),)))
gc_case("cube with its correct backward", lambda: (_Cube.apply, (_leaf(9, 5),)))

# test_gradcheck_jacobian_mismatch / test_gradcheck_custom_error: a wrong backward is detected
gc_case("backward off by 1% on one of two inputs (Jacobian mismatch for input 1)",
        lambda: (_MatMulWrongB.apply, (_leaf(10, 2, 3), _leaf(11, 3, 2))))
gc_case("backward off by 1% on one of two inputs, rtol=2e-2 accepts it",
        lambda: (_MatMulWrongB.apply, (_leaf(10, 2, 3), _leaf(11, 3, 2))), kw=dict(rtol=2e-2))
gc_case("correct matmul backward", lambda: (lambda a, b: a @ b, (_leaf(10, 2, 3), _leaf(11, 3, 2))))

# atol / rtol behaviour (gradcheck's allclose rule |a - n| <= atol + rtol |n|): y = 2x, backward 2 + 1e-4
_x_lin = [0.5, -1.25, 2.0]
for _kw, _tag in [({}, "defaults accept it"), (dict(rtol=0.0, atol=1e-5), "atol 1e-5, rtol 0 reject it"),
                  (dict(rtol=0.0, atol=2e-4), "atol 2e-4, rtol 0 accept it"), (dict(rtol=1e-5, atol=0.0), "rtol 1e-5, atol 0 reject it"),
                  (dict(rtol=1e-4, atol=0.0), "rtol 1e-4 (2e-4 on 2), atol 0 accept it")]:
    gc_case(f"backward off by 1e-4: {_tag}",
            lambda: (lambda x: _ScaleBy.apply(x, 2.0, 1e-4), (torch.tensor(_x_lin, dtype=D, requires_grad=True),)), kw=_kw)

# eps behaviour: central differences of x**3 carry eps**2; a large eps with tight tolerances fails
for _kw, _tag in [(dict(eps=1e-2), "eps 1e-2, default tolerances"), (dict(eps=1e-2, atol=1e-5, rtol=0.0), "eps 1e-2, rtol 0"),
                  (dict(eps=1e-1), "eps 1e-1"), (dict(eps=1e-1, rtol=2e-2), "eps 1e-1, rtol 2e-2")]:
    gc_case(f"x**3 with a correct backward: {_tag}",
            lambda: (_Cube.apply, (torch.tensor([0.5, 1.0, -1.5], dtype=D, requires_grad=True),)), kw=_kw)

# test_gradcheck_nondeterministic: a backward that is not reentrant. torch fails it unless
# nondet_tol covers the jitter; the lab's gradcheck compares Jacobians only (stated).
def _jitter_case(jitter, seed):
    def make():
        torch.manual_seed(seed)
        return (lambda x: _Jitter.apply(x, jitter)), (_leaf(12, 3, 2),)
    return make


gc_case("jitter 0: reentrant", _jitter_case(0.0, 0))
gc_case("jitter 1e-12: torch says not reentrant; Jacobians agree", _jitter_case(1e-12, 1), torch_kw=dict(nondet_tol=1e-5), torch_says=False)
gc_case("jitter 1e-6: torch says not reentrant; Jacobians agree", _jitter_case(1e-6, 2), torch_kw=dict(nondet_tol=1e-5), torch_says=False)
gc_case("jitter 1e-9, rtol 1e-7: still within the Jacobian tolerance", _jitter_case(1e-9, 3), kw=dict(rtol=1e-7),
        torch_kw=dict(nondet_tol=1e-5), torch_says=False)
gc_case("jitter 0.05: Jacobians disagree (beyond rtol) even with a large nondet_tol", _jitter_case(0.05, 4), torch_kw=dict(nondet_tol=10.0))

# test_gradcheck_backward_mul_by_grad_output: a backward not multiplied by grad_output.
gc_case("backward adds 1e-2, default atol: Jacobian mismatch",
        lambda: ((lambda x: _AddConst.apply(x, 1e-2)), (_leaf(13, 2, 2),)))
gc_case("backward adds 1e-2, atol 1e-1: torch rejects (not multiplied by grad_output); Jacobians agree (stated)",
        lambda: ((lambda x: _AddConst.apply(x, 1e-2)), (_leaf(13, 2, 2),)), kw=dict(atol=1e-1), spec=True, torch_says=False)
gc_case("backward adds 1e-8: torch rejects; Jacobians agree within atol (stated)",
        lambda: ((lambda x: _AddConst.apply(x, 1e-8)), (_leaf(14, 4),)), spec=True, torch_says=False)

# test_gradcheck_undefined_grad: a backward that cannot take an undefined grad_output. torch runs
# it with undefined grads (check_undefined_grad=True by default); the lab checks Jacobians only.
gc_case("backward handles an undefined grad (returns None)", lambda: (_no_materialize(True).apply, (_leaf(15, 3),)))
gc_case("backward crashes on an undefined grad: Jacobians agree (torch: check_undefined_grad=False)",
        lambda: (_no_materialize(False).apply, (_leaf(15, 3),)), torch_kw=dict(check_undefined_grad=False),
        torch_says="raises TypeError")

# test_gradcheck_check_no_differentiable_outputs: an output that does not require grad.
gc_case("output independent of the input (constant): zero Jacobians agree",
        lambda: ((lambda x: torch.ones(3, dtype=D) * 2.0), (_leaf(16, 2),)))
gc_case("detached output that depends on the input: numerical Jacobian is not zero",
        lambda: ((lambda x: x.detach() * 2), (_leaf(17, 3),)))
gc_case("input the output ignores (second argument unused): zero columns agree",
        lambda: ((lambda x, y: x.sin()), (_leaf(18, 3), _leaf(19, 2))))

# test_function / test_custom_function_non_tensor_inputs_outputs: a Python number and a tensor
# without grad among the inputs; only tensors that require grad are checked.
gc_case("Python number and a tensor without grad among the inputs",
        lambda: (_TwoInputs.apply, (_leaf(20, 4), 3, _leaf(21, 4), _rand(22, 4))))
gc_case("wrong gradient for the input that does not require grad is not checked",
        lambda: (_TwoInputsGarbage.apply, (_leaf(20, 4), 3, _leaf(21, 4), _rand(22, 4))))
gc_case("same Function, the tensor without grad now requires it: its wrong gradient is caught",
        lambda: (_TwoInputsGarbage.apply, (_leaf(20, 4), 3, _leaf(21, 4), _leaf(22, 4))))

# test_gradcheck_custom_error: errors that are not a failed check propagate (torch re-raises them
# even with raise_exception=False); test_invalid_gradients: a gradient of the wrong shape.
def _boom(x):
    raise ValueError("not a gradcheck failure")


gc_case("fn raises a ValueError", lambda: (_boom, (_leaf(23, 2),)))
gc_case("backward returns a gradient of the wrong shape", lambda: (_BadShape.apply, (_leaf(24, 3),)))

# test_gradcheck_nondeterministic's twin in the lab's own terms: torch perturbs the caller's tensors
# in place, so a function reading a captured tensor moves with them; the lab perturbs copies (stated).
def _captured():
    a, b = _leaf(25, 3), _leaf(26, 3)
    return (lambda x, y: x * b), (a, b)


gc_case("fn reads its second input from a closure (stated: copies are perturbed)", _captured, spec=False, torch_says=True)
# The same rule, met through aliasing: one tensor passed twice. torch's in-place perturbation moves
# both arguments (numerical 2x = analytical 2x); a perturbed copy moves one (numerical x). Not in
# the notebook's list of differences, but it follows from "perturb a detached copy".
gc_case("one tensor passed as both inputs of a * b (follows from perturbing copies)",
        lambda: ((lambda a, b: a * b), (lambda t: (t, t))(_leaf(27, 3))), spec=False, torch_says=True)
# test_gradcheck_check_no_differentiable_outputs asks for an *exactly* zero numerical Jacobian when
# no output requires grad; the lab compares the zero analytical Jacobian with allclose (its stated
# rule), so a tiny detached dependence within atol passes. Not in the notebook's list.
gc_case("detached output with a slope of 1e-8 (within atol): zero Jacobian agrees by the lab's rule",
        lambda: ((lambda x: (x * 1e-8).detach() + 1.0), (_leaf(28, 3),)), spec=True, torch_says=False)
# inputs that are not leaves, outputs that are not contiguous
gc_case("input that is not a leaf (an expression of a leaf)", lambda: ((lambda a: a.exp()), (_leaf(29, 3) * 2,)))
gc_case("non-contiguous output (a transposed slice)", lambda: ((lambda a: (a.T @ a).T[:, :2]), (_leaf(30, 2, 3),)))


# numerical_jacobian / analytical_jacobian against torch's numerical Jacobian (the slow-mode
# helper gradcheck itself uses) and torch.autograd.functional.jacobian (one vjp per output row).
JACOBIAN_FNS = [
    ("tanh(a @ b)", lambda a, b: torch.tanh(a @ b), lambda: (_leaf(30, 2, 3), _leaf(31, 3, 2))),
    ("x * sin(x), 0-d", lambda x: x * x.sin(), lambda: (_leaf(32),)),
    ("transposed input", lambda a, b: (a @ b).exp(), lambda: (_leaf(33, 2, 3), _rand(34, 3, 3).T.requires_grad_())),
    ("broadcast add, 0-d output", lambda x, b: ((x + b) ** 2).sum(), lambda: (_leaf(35, 3, 2), _leaf(36, 2))),
    ("number and no-grad tensor among inputs", lambda t1, s, t2, t3: t1 * s + t2 * t3 * t1,
     lambda: (_leaf(37, 3), 2.5, _leaf(38, 3), _rand(39, 3))),
    ("custom Function with a wrong backward", _MatMulWrongB.apply, lambda: (_leaf(40, 2, 2), _leaf(41, 2, 3))),
    ("non-contiguous output", lambda a: (a.T @ a).T[:, :2], lambda: (_leaf(42, 2, 3),)),
    ("empty input", lambda x, y: (x.sum() + 1) * y, lambda: (_leaf(43, 0, 2), _leaf(44, 3))),
]

for _name, _fn, _make in JACOBIAN_FNS:
    @case("my_gradcheck", f"numerical_jacobian vs torch's central differences: {_name}")
    def _check(ref, fn=_fn, make=_make):
        got = ref.numerical_jacobian(fn, make(), 1e-6)
        inputs = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = [js[0].T for js in _get_numerical_jacobian(fn, inputs, eps=1e-6)]  # (in, out) -> (out, in)
        assert len(got) == len(want), f"{len(got)} Jacobians, torch has {len(want)}"
        for k, (a, w) in enumerate(zip(got, want, strict=True)):
            _same(a, w, f"Jacobian of input {k}", rtol=1e-6, atol=1e-7)

    @case("my_gradcheck", f"analytical_jacobian vs torch.autograd.functional.jacobian: {_name}")
    def _check(ref, fn=_fn, make=_make):
        got = ref.analytical_jacobian(fn, make())
        inputs = make()
        idx = [k for k, t in enumerate(inputs) if torch.is_tensor(t) and t.requires_grad]

        def of_diff(*diff):
            args = list(inputs)
            for k, t in zip(idx, diff, strict=True):
                args[k] = t
            return fn(*args)

        jac = torch.autograd.functional.jacobian(of_diff, tuple(inputs[k].detach() for k in idx))
        out_numel = fn(*inputs).numel()
        want = [j.reshape(out_numel, inputs[k].numel()) for j, k in zip(jac, idx, strict=True)]
        assert len(got) == len(want), f"{len(got)} Jacobians, torch has {len(want)}"
        for k, (a, w) in enumerate(zip(got, want, strict=True)):
            _same(a, w, f"Jacobian of input {k}")


# =================================================================================================
# Part forward_ad: jvp with dual tensors, hvp reverse-over-forward. Modelled on test_autograd.py's
# TestAutogradForwardMode (dual packing/unpacking, in-place ops and views on duals, tensors that
# get a tangent by an in-place copy, custom Functions with jvp incl. non-tensor args before
# tensors) and on test_autograd.py's Hessian-vector test; oracles: torch.autograd.functional.jvp /
# hvp (reverse-mode double-vjp) and torch.func.jvp.
# =================================================================================================
class _ScaledProd(Function):
    """c * x * y with a non-tensor argument first and a jvp (no backward needed by jvp)."""

    @staticmethod
    def forward(c, x, y):
        return c * x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.c = inputs[0]
        ctx.save_for_forward(inputs[1], inputs[2])
        ctx.save_for_backward(inputs[1], inputs[2])

    @staticmethod
    def jvp(ctx, c_t, x_t, y_t):
        x, y = ctx.saved_tensors
        return ctx.c * (x_t * y + x * y_t)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return None, ctx.c * g * y, ctx.c * g * x


def _inplace_on_clone(x, y):
    z = x.clone()
    z.mul_(y)
    return z.exp()


def _inplace_on_view(x):
    z = x.clone()
    z[1:].mul_(3.0)  # an in-place op on a view of a dual
    return z * z


def _copy_into_plain(x):
    buf = torch.zeros(x.shape, dtype=x.dtype)
    buf.copy_(x)  # a plain tensor gets a tangent through an in-place copy
    return buf.sin()


JVP = [  # (name, f, shapes of primals)
    ("sin", torch.sin, [(4,)]),
    ("x * exp(y)", lambda x, y: x * torch.exp(y), [(3,), (3,)]),
    ("matmul then tanh", lambda a, b: torch.tanh(a @ b), [(2, 3), (3, 2)]),
    ("reduction to 0-d", lambda x: (x * x).sum(), [(5,)]),
    ("0-d primal", lambda x: x.exp() * x, [()]),
    ("empty primal", lambda x: x.cos(), [(0,)]),
    ("view: transpose and reshape", lambda x: x.t().reshape(-1) * 2, [(2, 3)]),
    ("in-place op on a clone", _inplace_on_clone, [(3,), (3,)]),
    ("in-place op on a view of a dual", _inplace_on_view, [(4,)]),
    ("plain tensor gets a tangent by copy_", _copy_into_plain, [(3,)]),
    ("broadcast of two inputs", lambda x, b: x / (1 + b.exp()), [(2, 3), (3,)]),
    ("custom Function, number before tensors", lambda x, y: _ScaledProd.apply(2.5, x, y), [(3,), (3,)]),
    ("softmax", lambda x: torch.softmax(x, dim=-1), [(2, 4)]),
]

for _i, (_name, _f, _shapes) in enumerate(JVP):
    @case("forward_ad", f"jvp vs torch.autograd.functional.jvp and torch.func.jvp: {_name}")
    def _check(ref, f=_f, shapes=_shapes, seed=_i):
        ps = tuple(_rand(seed + k, *s) for k, s in enumerate(shapes))
        ts = tuple(_rand(seed + 20 + k, *s) for k, s in enumerate(shapes))
        out, tangent = ref.jvp(f, ps, ts)
        want_out, want_t = torch.autograd.functional.jvp(f, ps, ts)
        _same(out, want_out, "output")
        _same(tangent, want_t, "tangent (vs autograd.functional.jvp)")
        _, func_t = torch.func.jvp(f, ps, ts)
        _same(tangent, func_t, "tangent (vs torch.func.jvp)")


@case("forward_ad", "jvp of an output that ignores the inputs: zero tangent")
def _check(ref):
    x, v = _rand(1, 3), _rand(2, 3)
    out, tangent = ref.jvp(lambda t: torch.full((2,), 7.0, dtype=D), (x,), (v,))
    _same(out, torch.full((2,), 7.0, dtype=D), "output")
    _same(tangent, torch.zeros(2, dtype=D), "tangent")


@case("forward_ad", "jvp is linear in the tangent (2v gives twice the tangent) and leaves no dual level open")
def _check(ref):
    f = lambda x, y: torch.tanh(x * y) + x  # noqa: E731
    ps, ts = (_rand(3, 4), _rand(4, 4)), (_rand(5, 4), _rand(6, 4))
    _, t1 = ref.jvp(f, ps, ts)
    _, t2 = ref.jvp(f, ps, tuple(2 * t for t in ts))
    _same(t2, 2 * t1, "tangent of 2v")
    assert not fwAD_is_open(), "a dual level is still open after jvp"


def fwAD_is_open():
    from torch.autograd import forward_ad
    return forward_ad._current_level >= 0


HVP = [  # (name, f, shape of x, x requires grad)
    ("quadratic form x^T A x (H = A + A^T)", lambda x: x @ _rand(90, 4, 4) @ x, (4,), False),
    ("product and squares (test_hessian_vector style)", lambda x: (x ** 2).sum() + x.prod(), (3,), False),
    # (torch.logsumexp itself is left out: in 2.13 its forward-AD formula works in place, so reverse
    # over forward through it raises in torch as well; the composite form below is fine)
    ("log-sum-exp, composite", lambda x: torch.log(torch.exp(x).sum()), (5,), True),
    ("matrix input", lambda x: (x ** 3).sum() + (x[0] * x[1]).sum(), (2, 3), False),
    ("0-d input", lambda x: x.sin() * x.exp(), (), True),
    ("linear: H = 0", lambda x: (3.0 * x).sum(), (3,), False),
    ("tanh of a dot product", lambda x: torch.tanh(x @ torch.arange(1.0, 4.0, dtype=D)), (3,), True),
]

for _i, (_name, _f, _shape, _rg) in enumerate(HVP):
    @case("forward_ad", f"hvp vs torch.autograd.functional.hvp and torch.func forward-over-reverse: {_name}")
    def _check(ref, f=_f, shape=_shape, rg=_rg, seed=_i):
        x0, v = _rand(seed, *shape, scale=0.7), _rand(seed + 40, *shape)
        x = x0.clone().requires_grad_(rg)
        hv = ref.hvp(f, x, v)
        assert torch.equal(x.detach(), x0) and x.grad is None and x.requires_grad == rg, "hvp changed the caller's x"
        assert not hv.requires_grad, "hvp returned a tensor with history"
        _same(hv, torch.autograd.functional.hvp(f, x0, v)[1], "H v (vs autograd.functional.hvp)")
        _same(hv, torch.func.jvp(torch.func.grad(f), (x0,), (v,))[1], "H v (vs torch.func)")


@case("forward_ad", "hvp of a function that ignores x: zeros")
def _check(ref):
    hv = ref.hvp(lambda x: torch.tensor(3.0, dtype=D), _rand(1, 3), _rand(2, 3))
    _same(hv, torch.zeros(3, dtype=D), "H v")


# =================================================================================================
# Part per_sample_grads. Modelled on test/functorch/test_eager_transforms.py
# (test_resnet18_per_sample_grads: vmap(grad(loss of one sample)) with in_dims=(None, 0, 0) vs a loop
# of torch.autograd.grad, a norm layer that does not mix samples; the grad-transform tests of
# cross_entropy) with other losses, layer kinds and frozen parameters.
# =================================================================================================
class _Inner(nn.Module):
    def __init__(self, h, c):
        super().__init__()
        self.proj = nn.Linear(h, c)
        self.gain = nn.Parameter(torch.linspace(0.5, 1.5, c))

    def forward(self, x):
        return self.proj(x) * self.gain


def _model(kind, seed):
    torch.manual_seed(seed)
    if kind == "linear":
        return nn.Linear(3, 2)
    if kind == "mlp_layernorm":
        return nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.Tanh(), nn.Linear(5, 3))
    if kind == "groupnorm":
        return nn.Sequential(nn.Linear(3, 4), nn.GroupNorm(2, 4), nn.ReLU(), nn.Linear(4, 3))
    if kind == "conv1d":
        return nn.Sequential(nn.Conv1d(2, 3, 3), nn.Tanh(), nn.Flatten(), nn.Linear(3 * 4, 3))
    if kind == "nested":
        return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), _Inner(4, 3))
    if kind == "batchnorm_eval":
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 3))
        with torch.no_grad():
            m[1].running_mean.uniform_(-0.5, 0.5)
            m[1].running_var.uniform_(0.5, 1.5)
        return m.eval()
    raise ValueError(kind)


def _loop_oracle(model, loss_fn, x, y):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    rows = [torch.autograd.grad(loss_fn(model(x[b:b + 1]), y[b:b + 1]), [p for _, p in named]) for b in range(x.shape[0])]
    return {n: torch.stack([r[k] for r in rows]) for k, (n, _) in enumerate(named)}


PER_SAMPLE = [  # (model kind, loss, batch, x shape tail, target kind, frozen, dtype)
    ("linear", "mse", 4, (3,), "reg2", (), torch.float32),
    ("mlp_layernorm", "ce", 3, (3,), "cls3", (), torch.float32),
    ("mlp_layernorm", "ce_sum", 5, (3,), "cls3", ("1.weight", "1.bias"), torch.float32),
    ("groupnorm", "nll", 3, (3,), "cls3", (), torch.float64),
    ("conv1d", "ce", 2, (2, 6), "cls3", (), torch.float32),
    ("nested", "ce", 3, (3,), "cls3", ("2.proj.bias",), torch.float32),
    ("batchnorm_eval", "ce", 4, (3,), "cls3", (), torch.float32),
    ("linear", "mse", 1, (3,), "reg2", ("bias",), torch.float64),
]
LOSSES = {"mse": F.mse_loss, "ce": F.cross_entropy, "ce_sum": functools.partial(F.cross_entropy, reduction="sum"),
          "nll": lambda out, y: F.nll_loss(F.log_softmax(out, -1), y)}

for _i, (_kind, _loss, _b, _tail, _target, _frozen, _dt) in enumerate(PER_SAMPLE):
    for _impl in ("per_sample_grads", "per_sample_grads_loop"):
        @case("per_sample_grads", f"{_impl} vs a torch.autograd.grad loop: {_kind}, {_loss}, B={_b}, frozen {_frozen}, {_dt}")
        def _check(ref, kind=_kind, loss=_loss, b=_b, tail=_tail, target=_target, frozen=_frozen, dt=_dt, impl=_impl, seed=_i):
            model = _model(kind, seed).to(dt)
            for n, p in model.named_parameters():
                p.requires_grad_(n not in frozen)
            x = _rand(seed, b, *tail, dtype=dt)
            g = torch.Generator().manual_seed(seed)
            y = _rand(seed + 1, b, 2, dtype=dt) if target == "reg2" else torch.randint(0, 3, (b,), generator=g)
            state = {k: v.clone() for k, v in model.state_dict().items()}
            got = getattr(ref, impl)(model, LOSSES[loss], x, y)
            want = _loop_oracle(model, LOSSES[loss], x, y)
            assert sorted(got) == sorted(want), f"names {sorted(got)} vs {sorted(want)}"
            tol = dict(rtol=1e-4, atol=1e-6) if dt == torch.float32 else {}
            for n in want:
                _same(got[n], want[n], f"per-sample gradient of {n}", **tol)
            assert all(p.grad is None for p in model.parameters()), "a .grad was set on the model"
            assert all(torch.equal(state[k], v) for k, v in model.state_dict().items()), "the model's state changed"


# =================================================================================================
# Part ensembling. Modelled on test/functorch/test_eager_transforms.py (test_ensemble_regression:
# stack_module_state + vmap vs each model on its own) and test/functorch/test_vmap.py (in_dims None
# vs 0 for a shared or per-model input), with buffers, norm layers and one-model ensembles.
# =================================================================================================
ENSEMBLE = [  # (model kind, number of models, batch, same_input, dtype)
    ("linear", 3, 4, True, torch.float32),
    ("linear", 3, 4, False, torch.float32),
    ("mlp_layernorm", 1, 2, True, torch.float32),
    ("batchnorm_eval", 2, 3, True, torch.float32),
    ("batchnorm_eval", 3, 2, False, torch.float32),
    ("conv1d", 2, 2, False, torch.float32),
    ("nested", 2, 3, True, torch.float64),
    ("groupnorm", 2, 0, True, torch.float32),
]

for _i, (_kind, _m, _b, _same_in, _dt) in enumerate(ENSEMBLE):
    @case("ensembling", f"ensemble_predict vs each model: {_kind}, M={_m}, B={_b}, same_input={_same_in}, {_dt}")
    def _check(ref, kind=_kind, m=_m, b=_b, same_in=_same_in, dt=_dt, seed=_i):
        models = [_model(kind, 100 * seed + k).to(dt) for k in range(m)]
        tail = (2, 6) if kind == "conv1d" else (3,)
        x = _rand(seed, *((b,) if same_in else (m, b)), *tail, dtype=dt)
        state = [{k: v.clone() for k, v in mod.state_dict().items()} for mod in models]
        got = ref.ensemble_predict(models, x, same_input=same_in)
        with torch.no_grad():
            want = torch.stack([mod(x if same_in else x[k]) for k, mod in enumerate(models)])
        _same(got.detach(), want, "stacked outputs", **(dict(rtol=1e-5, atol=1e-6) if dt == torch.float32 else {}))
        for mod, st in zip(models, state, strict=True):
            assert all(t.device.type == "cpu" and torch.equal(st[k], t) for k, t in mod.state_dict().items()), \
                "a model was moved or changed"


# =================================================================================================
# Part saved_tensor_hooks. Offloading: modelled on test_autograd.py's saved-tensor hook tests (pack
# and unpack around ops that save inputs, outputs and transposed views; double backward through
# hooked saved tensors; the hooks see exactly what autograd saves). Checkpointing: modelled on
# test/test_utils.py's checkpoint tests (test_checkpoint_rng_cpu, test_checkpoint_partial_grad,
# several outputs, sequential blocks) with torch.utils.checkpoint(use_reentrant=True) as oracle.
# =================================================================================================
OFFLOAD = [  # (name, function of (x, w) -> scalar)
    ("exp saves its output", lambda x, w: (x.exp() * w.sum()).sum()),
    ("matmul saves a transposed view", lambda x, w: (x @ w.T).pow(2).sum()),
    ("sigmoid and softmax", lambda x, w: (torch.softmax(x @ w.T, -1) * torch.sigmoid(x).sum()).sum()),
    ("pow and division", lambda x, w: ((x ** 3) / (1 + w.abs().sum(0))).sum()),
    ("F.linear + tanh (the lab's LinearTanh semantics, plain ops)", lambda x, w: torch.tanh(F.linear(x, w)).sum()),
]


def _plain_and_offloaded(ref, loss_of, x0, w0):
    grads = []
    for offload in (False, True):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        if offload:
            with ref.NumpyOffload() as store:
                loss = loss_of(x, w)
        else:
            loss = loss_of(x, w)
            store = None
        loss.backward()
        grads.append((x.grad, w.grad, store))
    return grads


for _i, (_name, _loss_of) in enumerate(OFFLOAD):
    @case("saved_tensor_hooks", f"NumpyOffload gradients bit-identical to a run without hooks: {_name}")
    def _check(ref, loss_of=_loss_of, seed=_i):
        x0, w0 = _rand(seed, 3, 4, dtype=torch.float32), _rand(seed + 1, 2, 4, dtype=torch.float32)
        (gx, gw, _), (ox, ow, store) = _plain_and_offloaded(ref, loss_of, x0, w0)
        _bitwise(ox, gx, "grad of x")
        _bitwise(ow, gw, "grad of w")
        counted = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: counted.append(1) or t, lambda t: t):
            loss_of(x0.clone().requires_grad_(), w0.clone().requires_grad_())
        assert len(store.store) == len(counted), f"the store holds {len(store.store)} arrays, autograd saved {len(counted)} tensors"


@case("saved_tensor_hooks", "NumpyOffload: the reference's own LinearTanh under offload matches a plain run")
def _check(ref):
    x0, w0, b0 = _rand(1, 4, 3), _rand(2, 2, 3), _rand(3, 2)
    grads = []
    for offload in (False, True):
        ts = [t.clone().requires_grad_() for t in (x0, w0, b0)]
        if offload:
            with ref.NumpyOffload():
                y = ref.linear_tanh(*ts)
        else:
            y = ref.linear_tanh(*ts)
        (y * y).sum().backward()
        grads.append([t.grad for t in ts])
    for k, (a, b) in enumerate(zip(*grads, strict=True)):
        _bitwise(a, b, f"grad of input {k}")


@case("saved_tensor_hooks", "NumpyOffload: double backward through offloaded saved tensors (x**3: H = 6x)")
def _check(ref):
    x = _rand(4, 5).requires_grad_()
    with ref.NumpyOffload():
        y = (x ** 3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    _same(g, 3 * x.detach() ** 2, "first derivative")
    _same(h, 6 * x.detach(), "second derivative")


def _two_block_net(seed, p_drop):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Dropout(p_drop), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 2)).train()


def _ck_grads(ck, seed, mode):
    net = _two_block_net(seed, 0.3)
    a = _rand(seed, 3, 4, dtype=torch.float32).requires_grad_(mode != "no_grad_input")
    b = _rand(seed + 1, 3, 6, dtype=torch.float32).requires_grad_(mode == "two_inputs")

    def block(t, extra=None):
        h = net[2](net[1](net[0](t)))
        return h if extra is None else h * extra.sigmoid()

    def pair(t):
        h = net[1](net[0](t))
        return h, net[2](h).exp()

    torch.manual_seed(seed + 5)
    if mode == "two_inputs":
        hidden = ck(block, a, b)
    elif mode == "tuple_output":
        h1, h2 = ck(pair, a)
        hidden = h1 + 0.5 * h2
    elif mode == "sequential_blocks":
        hidden = ck(lambda t: net[4](net[3](t)), ck(block, a))
    else:
        hidden = ck(block, a)
    loss = net[5](net[4](net[3](hidden)) if mode != "sequential_blocks" else hidden).pow(2).mean()
    after = torch.rand(2)  # the caller's random stream goes on after the forward
    loss.backward()
    return [a.grad, b.grad] + [p.grad for p in net.parameters()] + [after, torch.rand(2)]


for _mode in ("plain", "two_inputs", "no_grad_input", "tuple_output", "sequential_blocks"):
    @case("saved_tensor_hooks", f"checkpoint vs torch.utils.checkpoint(use_reentrant=True): {_mode} (dropout replayed)")
    def _check(ref, mode=_mode):
        got = _ck_grads(lambda fn, *args: ref.checkpoint(fn, *args), 11, mode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _ck_grads(lambda fn, *args: torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=True), 11, mode)
        assert len(got) == len(want)
        for k, (a, w) in enumerate(zip(got, want, strict=True)):
            _same(a, w, f"gradient / random draw {k}", rtol=1e-6, atol=1e-7)


# =================================================================================================
def run() -> int:
    """Every case against the reference; raises AssertionError listing every disagreement."""
    return SUITE.run()


if __name__ == "__main__":
    print(run(), "peer cases agree")
