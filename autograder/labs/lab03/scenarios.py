# IPT-CANARY lab03 scenarios.py: hidden grading text, never shown to learners
"""lab03 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed in this lab. Inputs arrive as numpy arrays and results leave as numpy arrays
(`t.detach().numpy()` copies); no tensor or object crosses. This module is also imported by the
trusted side (P0) for the definitions both sides share (the gradcheck battery, the test
functions of forward-mode AD, the model builders), so it has no side effects at import.

Trust: these functions only build inputs, call the learner's code and return the *values* it
produced. Nothing here reports how a value was computed (no call counters, engine counters,
profilers or byte counts): P0 judges values only, on cases where a delegation to torch's own
implementation (gradcheck, torch.autograd.functional, torch.func, torch.utils.checkpoint,
autograd inside a backward) gives a different answer from the lab's spec. A few replies
(`inputs_untouched`, `models_intact`, ...) can only cost the learner points, never earn them.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


# -- helpers -----------------------------------------------------------------------------------
def _t(a, requires_grad=False):
    t = torch.from_numpy(np.array(a, copy=True))
    return t.requires_grad_(requires_grad) if requires_grad else t


def _np(t):
    if t is None:
        return None
    if not torch.is_tensor(t):
        t = torch.as_tensor(t)
    return t.detach().numpy(force=True).copy()  # force: ZeroTensors too


def _same_storage(a, b):
    return (torch.is_tensor(a) and torch.is_tensor(b) and a.shape == b.shape
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


class _Swap:
    """Saved-tensor hooks that hand backward `replacement` where autograd saved `target()`."""

    def __init__(self, target, replacement):
        self.target, self.replacement, self.hits = target, replacement, 0

    def pack(self, t):
        return t

    def unpack(self, t):
        if _same_storage(t, self.target()):
            self.hits += 1
            return self.replacement
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


# -- part custom_function ----------------------------------------------------------------------
def linear_tanh(sub, x, w, b, gout, requires=(True, True, True), swap_y=None, twice=False):
    """Forward and backward of the learner's LinearTanh. With `swap_y`, autograd hands backward
    those values where it saved the output y (a backward that uses its saved y must use them)."""
    xt, wt = _t(x, requires[0]), _t(w, requires[1])
    bt = None if b is None else _t(b, requires[2])
    holder = {}
    if swap_y is None:
        y = sub.linear_tanh(xt, wt, bt)
    else:
        swap = _Swap(lambda: holder.get("y"), _t(swap_y))
        with swap.hooks():
            y = sub.linear_tanh(xt, wt, bt)
    holder["y"] = y
    result = {"out": _np(y), "grad_fn": type(y.grad_fn).__name__ if y.grad_fn is not None else None}
    y.backward(_t(gout), retain_graph=twice)
    if twice:
        y.backward(_t(gout))
    result["grads"] = [_np(t.grad) if t is not None else None for t in (xt, wt, bt)]
    return result


# -- part double_backward ----------------------------------------------------------------------
def scaled_swish(sub, x, beta, gout, vx, vb, swap_x=None):
    """First and second derivatives of the learner's ScaledSwish. With `swap_x`, autograd hands
    backward those values (without history) where it saved the input x: first derivatives only."""
    xt, bt = _t(x, True), _t(beta, True)
    if swap_x is not None:
        swap = _Swap(lambda: xt, _t(swap_x))
        with swap.hooks():
            y = sub.scaled_swish(xt, bt)
        gx, gb = torch.autograd.grad(y, (xt, bt), _t(gout))
        return {"out": _np(y), "gx": _np(gx), "gb": _np(gb), "gb_shape": list(gb.shape)}
    y = sub.scaled_swish(xt, bt)
    result = {"out": _np(y), "grad_fn": type(y.grad_fn).__name__ if y.grad_fn is not None else None}
    gx, gb = torch.autograd.grad(y, (xt, bt), _t(gout))
    result.update(gx=_np(gx), gb=_np(gb), gb_shape=list(gb.shape))
    y = sub.scaled_swish(xt, bt)
    gx, gb = torch.autograd.grad(y, (xt, bt), _t(gout), create_graph=True)
    result["second_order_graph"] = bool(gx.requires_grad and gb.requires_grad)
    if result["second_order_graph"]:
        scalar = (gx * _t(vx)).sum() + gb * _t(vb)
        hx, hb = torch.autograd.grad(scalar, (xt, bt), allow_unused=True)
        result.update(hx=_np(hx), hb=_np(hb))
    return result


# -- part my_gradcheck: a battery of correct and wrong Functions --------------------------------
def _function(forward, backward, saves=lambda inputs, output: inputs):
    """A setup_context-style Function from a forward and a backward(saved, grad_out).
    Every battery Function has the same neutral name: a verdict cannot be looked up by name."""

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*saves(inputs, output))

    def bwd(ctx, grad_out):
        return backward(ctx.saved_tensors, grad_out)

    return type("Fn", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                    "setup_context": staticmethod(setup_context),
                                                    "backward": staticmethod(bwd)})


def _tanh_linear_bwd(bias_term=True):
    def backward(saved, g_out):
        x, w, y = saved
        g = g_out * (1 - y * y) if bias_term else g_out
        return g @ w, g.T @ x, g.sum(0)
    return backward


class _Noise:
    """A backward that is off by a different tiny amount at every call (deterministic per process)."""
    calls = 0

    @classmethod
    def next(cls):
        cls.calls += 1
        return 1e-9 * (cls.calls % 7)


_LinTanh = _function(lambda x, w, b: torch.tanh(x @ w.T + b), _tanh_linear_bwd(), saves=lambda i, o: (i[0], i[1], o))
_LinTanhNoChain = _function(lambda x, w, b: torch.tanh(x @ w.T + b), _tanh_linear_bwd(bias_term=False),
                            saves=lambda i, o: (i[0], i[1], o))
_Square = _function(lambda x: x * x, lambda s, g: (2 * g * s[0],))
_SquareHalf = _function(lambda x: x * x, lambda s, g: (g * s[0],))
_SquareSlightlyOff = _function(lambda x: x * x, lambda s, g: (2.0005 * g * s[0],))
_SquareOff = _function(lambda x: x * x, lambda s, g: (2.006 * g * s[0],))
_SquareAtRtolEdge = _function(lambda x: x * x, lambda s, g: (2.0020005 * g * s[0],))  # |a-n| = 1.00025e-3 |n|
_SquareOffset = _function(lambda x: x * x, lambda s, g: (2 * g * s[0] + 1e-8,))
_SquareNoisy = _function(lambda x: x * x, lambda s, g: (2 * g * s[0] + _Noise.next() * g,))
_SquareCubicError = _function(lambda x: x * x, lambda s, g: (2 * g * s[0] + 2e-4 * g * s[0] ** 3,))
_XSin = _function(lambda x: x * torch.sin(x), lambda s, g: (g * (torch.sin(s[0]) + s[0] * torch.cos(s[0])),))
_XSinMissing = _function(lambda x: x * torch.sin(x), lambda s, g: (g * s[0] * torch.cos(s[0]),))
_MatMul = _function(lambda a, b: a @ b, lambda s, g: (g @ s[1].T, s[0].T @ g))
_MatMulT = _function(lambda a, b: a @ b, lambda s, g: (g @ s[1], s[0].T @ g))
_Mul = _function(lambda a, b: a * b, lambda s, g: (g * s[1], g * s[0]))
_MulWrongSecond = _function(lambda a, b: a * b, lambda s, g: (g * s[1], g * s[1]))
_MulGarbageNoGrad = _function(lambda a, b: a * b, lambda s, g: (g * s[1], 7 * g))
_AddBroadcast = _function(lambda x, b: x + b, lambda s, g: (g, g.sum(0)), saves=lambda i, o: ())
_AddBroadcastNoSum = _function(lambda x, b: x + b, lambda s, g: (g, g.mean(0)), saves=lambda i, o: ())
_Exp = _function(lambda x: torch.exp(x), lambda s, g: (g * s[0],), saves=lambda i, o: (o,))
_SumSq = _function(lambda x: (x * x).sum(), lambda s, g: (2 * g * s[0],))


class _ScaleMulGlue(torch.autograd.Function):
    """c * x * w with a Python float c in the middle of the inputs (backward returns None for it)."""

    @staticmethod
    def forward(x, c, w):
        return c * x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.c = inputs[1]
        ctx.save_for_backward(inputs[0], inputs[2])

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * ctx.c * w, None, g * ctx.c * x


_ScaleMulGlue.__name__ = "Fn"


def _inputs_lin(rng, n):
    return [(rng.standard_normal((n, 3)), True), (rng.standard_normal((2, 3)), True), (rng.standard_normal(2), True)]


def _inputs_vec(rng, n):
    return [(rng.standard_normal(n) + 0.5, True)]


def _inputs_wide(rng, n):
    return [(rng.standard_normal(n + 1) * 2.5, True)]


def _inputs_scalar(rng, n):
    return [(np.array(rng.standard_normal() + 0.5), True)]


def _inputs_empty(rng, n):
    return [(np.zeros((0, n)), True)]


def _inputs_mat(rng, n):
    return [(rng.standard_normal((2, n)), True), (rng.standard_normal((n, n)), True)]


def _inputs_mat_transposed(rng, n):
    return [(rng.standard_normal((2, n)), True), ("T", rng.standard_normal((n, n)), True)]


def _inputs_pair(rng, n, second=True):
    return [(rng.standard_normal((n, 2)), True), (rng.standard_normal((n, 2)), second)]


def _inputs_bcast(rng, n):
    return [(rng.standard_normal((n, 3)), True), (rng.standard_normal(3), True)]


def _inputs_scale(rng, n):
    return [(rng.standard_normal(n), True), ("float", 1.5 + rng.random()), (rng.standard_normal(n), True)]


def _inputs_scale_nograd(rng, n):
    return [(rng.standard_normal(n), True), ("float", 1.5 + rng.random()), (rng.standard_normal(n), False)]


# name -> (Function, input maker, indices of inputs that fn reads from the caller's tensors
#          (captured in a closure) instead of its arguments, or None)
BATTERY = {
    "linear_tanh_ok": (_LinTanh, _inputs_lin, None),
    "linear_tanh_missing_chain": (_LinTanhNoChain, _inputs_lin, None),
    "square_ok": (_Square, _inputs_vec, None),
    "square_scalar": (_Square, _inputs_scalar, None),
    "square_factor": (_SquareHalf, _inputs_vec, None),
    "square_slightly_off_within_rtol": (_SquareSlightlyOff, _inputs_vec, None),
    "square_off_beyond_rtol": (_SquareOff, _inputs_vec, None),
    "square_offset_within_atol": (_SquareOffset, _inputs_vec, None),
    "square_noisy_within_atol": (_SquareNoisy, _inputs_vec, None),
    "square_error_grows": (_SquareCubicError, _inputs_wide, None),
    "xsin_ok": (_XSin, _inputs_vec, None),
    "xsin_missing_term": (_XSinMissing, _inputs_vec, None),
    "matmul_ok": (_MatMul, _inputs_mat, None),
    "matmul_transposed": (_MatMulT, _inputs_mat, None),
    "matmul_noncontiguous_input": (_MatMul, _inputs_mat_transposed, None),
    "matmul_wrong_noncontiguous": (_MatMulT, _inputs_mat_transposed, None),
    "mul_ok": (_Mul, _inputs_pair, None),
    "mul_wrong_second_input": (_MulWrongSecond, _inputs_pair, None),
    "mul_garbage_for_input_without_grad": (_MulGarbageNoGrad, lambda rng, n: _inputs_pair(rng, n, second=False), None),
    "mul_second_captured": (_Mul, _inputs_pair, (1,)),
    "mul_same_tensor_twice": (_Mul, lambda rng, n: [(rng.standard_normal((n, 2)), True), ("same", 0)], None),
    "add_broadcast_ok": (_AddBroadcast, _inputs_bcast, None),
    "add_broadcast_mean": (_AddBroadcastNoSum, _inputs_bcast, None),
    "add_bias_captured": (_AddBroadcast, _inputs_bcast, (1,)),
    "exp_ok": (_Exp, _inputs_vec, None),
    "sum_squares_ok": (_SumSq, _inputs_vec, None),
    "sum_squares_empty": (_SumSq, _inputs_empty, None),
    "scale_with_float_arg": (_ScaleMulGlue, _inputs_scale, None),
    "scale_float_arg_nograd": (_ScaleMulGlue, _inputs_scale_nograd, None),
    "constant_output": ("constant", _inputs_vec, None),
    "square_ignores_second_input": ("ignore_second", _inputs_pair, None),
    "mul_empty": (_Mul, lambda rng, n: _inputs_pair(rng, 0), None),
    # rtol scales |numerical| (allclose(analytical, numerical)): with atol=0 this is False, True the other way round
    "square_at_rtol_edge": (_SquareAtRtolEdge, _inputs_vec, None),
    # fn returns a view of its (perturbed) input: f(x + eps e_j) must be kept as a copy
    "first_row_view": ("first_row", lambda rng, n: [(rng.standard_normal((2, n)), True)], None),
}


def battery_inputs(name, seed, n):
    """The inputs (float64 tensors, and Python floats) for battery entry `name`; the same on both sides."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in BATTERY[name][1](rng, n):
        if isinstance(spec[0], str) and spec[0] == "float":
            out.append(float(spec[1]))
        elif isinstance(spec[0], str) and spec[0] == "same":
            out.append(out[spec[1]])  # the very same tensor object again
        elif isinstance(spec[0], str) and spec[0] == "T":
            base = torch.tensor(spec[1], dtype=torch.float64)
            out.append(base.T.requires_grad_(spec[2]))  # a non-contiguous leaf
        else:
            out.append(torch.tensor(spec[0], dtype=torch.float64, requires_grad=spec[1]))
    return tuple(out)


def battery_fn(name, inputs):
    """The function the checkers receive: fn(*args). A captured entry reads the caller's tensor
    (from `inputs`) in place of its argument, so only an in-place perturbation would move it."""
    fn_class, _, captured = BATTERY[name]
    if fn_class == "constant":
        return lambda x: torch.ones(3, dtype=torch.float64) * 2.0
    if fn_class == "ignore_second":
        return lambda x, y: _Square.apply(x)
    if fn_class == "first_row":
        return lambda x: x[0]
    captured = captured or ()

    def fn(*args):
        args = [inputs[i] if i in captured else a for i, a in enumerate(args)]
        return fn_class.apply(*args)

    return fn


def _inputs_back(inputs):
    return [_np(t) if torch.is_tensor(t) else t for t in inputs]


def gradcheck_verdict(sub, name, seed, n, tolerances=None):
    """The learner's verdict on battery entry `name`, and the inputs as they are after the call."""
    inputs = battery_inputs(name, seed, n)
    verdict = sub.my_gradcheck(battery_fn(name, inputs), inputs, **(tolerances or {}))
    is_bool = isinstance(verdict, (bool, np.bool_)) or (torch.is_tensor(verdict) and verdict.numel() == 1
                                                          and verdict.dtype == torch.bool)
    return {"verdict": bool(verdict) if is_bool else None, "is_bool": bool(is_bool),
            "type": type(verdict).__name__, "inputs_after": _inputs_back(inputs),
            "grads_after": [None if not torch.is_tensor(t) or t.grad is None else _np(t.grad) for t in inputs]}


def gradcheck_jacobians(sub, name, seed, n, which, eps=1e-6):
    """The learner's numerical or analytical Jacobians of battery entry `name`, as arrays."""
    inputs = battery_inputs(name, seed, n)
    fn = battery_fn(name, inputs)
    if which == "numerical":
        jacobians = sub.numerical_jacobian(fn, inputs, eps)
    else:
        jacobians = sub.analytical_jacobian(fn, inputs)
    return {"jacobians": [np.asarray(_np(torch.as_tensor(j)), dtype=np.float64) for j in list(jacobians)],
            "inputs_after": _inputs_back(inputs)}


# -- part forward_ad -----------------------------------------------------------------------------
class _CubeFwdOnly(torch.autograd.Function):
    """x ** 3 with a jvp and no usable backward: only forward-mode AD can differentiate it."""

    @staticmethod
    def forward(x):
        return x * x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return 3 * x * x * x_t

    @staticmethod
    def backward(ctx, grad_out):
        raise RuntimeError("this Function only supports forward-mode AD")


class _OldStyleCube(torch.autograd.Function):
    """The same in the old style (forward(ctx, ...)): dual tensors handle it, torch.func transforms
    refuse it (they need setup_context), and reverse mode cannot (no backward)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x * x * x

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return 3 * x * x * x_t

    @staticmethod
    def backward(ctx, grad_out):
        raise RuntimeError("this Function only supports forward-mode AD")


# functions of several tensors returning one tensor (jvp), and scalar functions of one (hvp)
JVP_FUNCS = {
    "sin": (1, lambda x: torch.sin(x)),
    "identity": (1, lambda x: x),
    "mul_exp": (2, lambda x, y: x * torch.exp(y)),
    "matmul_tanh": (2, lambda a, b: torch.tanh(a @ b)),
    "softmax_sum": (1, lambda x: torch.softmax(x, dim=-1) * x),
    "cube_forward_only": (1, lambda x: _CubeFwdOnly.apply(x) + x),
    "old_style_cube": (1, lambda x: _OldStyleCube.apply(x) - 2 * x),
    "constant": (1, lambda x: torch.ones(3, dtype=x.dtype) * 2.0),
    "second_ignored": (2, lambda x, y: torch.cos(x) + 0 * y.detach().sum()),
    "norm_mix": (2, lambda x, y: (x * y).sum() / (1 + (x * x).sum())),
}

HVP_FUNCS = {
    "rosenbrock": lambda x: ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum(),
    "tanh_mix": lambda x: (torch.tanh(x) * x.flip(0)).sum(),
    "gaussian": lambda x: torch.exp(-(x * x).sum()),
    "quadratic": lambda x: 0.5 * (x * torch.arange(1.0, x.numel() + 1, dtype=x.dtype) * x).sum(),
    "sin_prod": lambda x: torch.sin(x).prod() + (x ** 4).sum(),
    "linear": lambda x: (3.0 * x).sum(),
    "plain_sum": lambda x: x.sum(),  # its tangent v.sum() has no history at all: H·v is zeros
    "old_style_cube": lambda x: _OldStyleCube.apply(x).sum() + (x * x).sum(),
    "forward_only_cube": lambda x: _CubeFwdOnly.apply(x).sum() + torch.sin(x).sum(),
}


def forward_jvp(sub, name, primals, tangents, twice=False):
    nargs, f = JVP_FUNCS[name]
    ps = [_t(p) for p in primals[:nargs]]
    ts = [_t(t) for t in tangents[:nargs]]
    out, tangent = sub.jvp(f, tuple(ps), tuple(ts))
    result = {"out": _np(out), "tangent": _np(tangent)}
    if twice:
        out2, tangent2 = sub.jvp(f, tuple(ps), tuple(ts))
        result.update(out2=_np(out2), tangent2=_np(tangent2))
    return result


def forward_hvp(sub, name, x, v, x_requires_grad=False, twice=False):
    f = HVP_FUNCS[name]
    xt, vt = _t(x, x_requires_grad), _t(v)
    hv = sub.hvp(f, xt, vt)
    result = {"hv": _np(hv), "requires_grad": bool(torch.is_tensor(hv) and hv.requires_grad),
              "x_untouched": bool(torch.equal(xt.detach(), _t(x))) and xt.grad is None
              and xt.requires_grad == bool(x_requires_grad)}
    if twice:
        result["hv2"] = _np(sub.hvp(f, xt, vt))
    return result


# -- parts per_sample_grads and ensembling -------------------------------------------------------
class _Scaled(nn.Module):
    """A child module with a parameter of its own and a child of its own."""

    def __init__(self, h, c):
        super().__init__()
        self.lin = nn.Linear(h, c)
        self.scale = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return self.lin(x) * self.scale


def build_model(kind, d, h, c):
    if kind == "nested":
        return nn.Sequential(nn.Linear(d, h), nn.Tanh(), _Scaled(h, c))
    if kind == "batchnorm":
        return nn.Sequential(nn.Linear(d, h), nn.BatchNorm1d(h), nn.Tanh(), nn.Linear(h, c))
    if kind == "flatten":  # needs the batch dim: nn.Flatten() refuses a 1-d sample
        return nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c), nn.Flatten())
    return nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c))


def mlp(params, kind="mlp", frozen=()):
    """A model of `kind` with the given state (a dict of arrays: parameters and buffers).
    Parameters named in `frozen` do not require grad. Batch-norm models are in eval mode."""
    h, d = np.shape(params["0.weight"])
    last = [k for k in params if k.endswith("weight")][-1]
    c = np.shape(params[last])[0]
    model = build_model(kind, d, h, c)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name in params:
                t.copy_(_t(params[name]))
    for name, p in model.named_parameters():
        if name in frozen:
            p.requires_grad_(False)
    return model.eval() if kind == "batchnorm" else model


LOSSES = {"cross_entropy": F.cross_entropy, "mse": F.mse_loss}  # class indices; targets shaped like the output


def per_sample(sub, params, x, y, impl="vmap", kind="mlp", frozen=(), twice=False, loss="cross_entropy"):
    model = mlp(params, kind, frozen)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fn = sub.per_sample_grads if impl == "vmap" else sub.per_sample_grads_loop
    loss_fn = LOSSES[loss]
    grads = fn(model, loss_fn, _t(x), _t(y))
    result = {"grads": {str(k): _np(v) for k, v in dict(grads).items()}}
    if twice:
        result["grads2"] = {str(k): _np(v) for k, v in dict(fn(model, loss_fn, _t(x), _t(y))).items()}
    result["grad_set"] = any(p.grad is not None for p in model.parameters())
    result["model_unchanged"] = all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    return result


def _reference_loop(model, x, y):
    params = tuple(model.parameters())
    return [torch.autograd.grad(F.cross_entropy(model(x[b:b + 1]), y[b:b + 1]), params) for b in range(x.shape[0])]


def per_sample_timed(sub, params, x, y, impl, repeat=3):
    """Run one implementation `repeat` times (the trusted side times the call, informational only)."""
    model, xt, yt = mlp(params), _t(x), _t(y)
    for _ in range(repeat):
        if impl == "student":
            sub.per_sample_grads(model, F.cross_entropy, xt, yt)
        else:
            _reference_loop(model, xt, yt)
    return True


def ensemble(sub, params_list, x, same_input=True, kind="mlp"):
    models = [mlp(p, kind) for p in params_list]
    out = sub.ensemble_predict(models, _t(x), same_input=same_input)
    intact = all(t.device.type == "cpu" and np.array_equal(_np(t), np.asarray(ps[name]))
                 for m, ps in zip(models, params_list) for name, t in m.state_dict().items() if name in ps)
    return {"out": _np(out), "models_intact": intact}


# -- part saved_tensor_hooks --------------------------------------------------------------------
def hooks_net(params, p_drop):
    """Linear -> Tanh -> Dropout -> Linear -> Tanh -> Linear with the given weights."""
    h, d = np.shape(params["0.weight"])
    c = np.shape(params["5.weight"])[0]
    net = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Dropout(p_drop), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, c))
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.copy_(_t(params[name]))
    return net.train()


def _loss(out):
    return (out * out).mean()


def _grads(xt, net):
    return [_np(xt.grad)] + [_np(p.grad) for p in net.parameters()]


def _baseline(net, x, seed):
    xt = _t(x, True)
    torch.manual_seed(seed)
    loss = _loss(net(xt))
    net.zero_grad()
    loss.backward()
    return _grads(xt, net)


def offload(sub, params, x, seed, p_drop=0.25, mutate=None):
    """Forward under `with NumpyOffload() as off`, then (optionally) change something before backward:
    mutate="params": the net's parameters in place (the offloaded copies must not see it);
    mutate="store": every array in off.store doubled (backward must use what the store holds);
    mutate="twice": backward(retain_graph=True) first, then the graded backward (unpack runs twice)."""
    net = hooks_net(params, p_drop)
    base_grads = _baseline(net, x, seed)
    xt = _t(x, True)
    torch.manual_seed(seed)
    with sub.NumpyOffload() as off:
        loss = _loss(net(xt))
    store = getattr(off, "store", None)
    keys = sorted(store) if isinstance(store, dict) else []
    stored = [np.array(store[k], copy=True) if isinstance(store[k], np.ndarray) else None for k in keys]
    if mutate == "params":
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.5)
    elif mutate == "store":
        for k in keys:
            store[k] *= 2
    if mutate == "twice":  # a first backward that keeps the graph: the second must unpack again
        loss.backward(retain_graph=True)
        xt.grad = None
    net.zero_grad()
    loss.backward()
    return {"baseline_grads": base_grads, "grads": _grads(xt, net),
            "keys": [k if isinstance(k, int) and not isinstance(k, bool) else repr(k)[:40] for k in keys],
            "stored": stored}


def extra_args(seed, h):
    """A column permutation (int64: it cannot require grad) and a float scale that does not."""
    idx = torch.randperm(h, generator=torch.Generator().manual_seed(seed))
    return idx, 0.5 + torch.arange(h, dtype=torch.float32) / h


def checkpointed(sub, params, x, seed, p_drop=0.25, mode="plain", rng_seed=None):
    """Two checkpointed blocks (dropout inside the first) and a plain last layer.
    mode="plain": as is; "mutate": block 1's weights change in place after the forward;
    "no_input_grad": x does not require grad (only block 1 is checkpointed);
    "given_rng": block 1 gets the rng state of torch.manual_seed(rng_seed), not the current one;
    "extra_args": block 2 also takes an int64 column permutation and a float scale that needs no grad."""
    net = hooks_net(params, p_drop)
    base_grads = _baseline(net, x, seed)

    def block1(inp):
        return net[2](net[1](net[0](inp)))

    def block2(inp):
        return net[4](net[3](inp))

    def block2x(inp, idx, scale):
        return block2(inp * scale)[:, idx]

    xt = _t(x, mode != "no_input_grad")
    torch.manual_seed(seed)
    if mode == "given_rng":
        state = torch.get_rng_state()
        torch.manual_seed(rng_seed)
        given = torch.get_rng_state()
        torch.set_rng_state(state)
        hidden = sub.checkpoint(block2, sub.Checkpoint.apply(block1, given, xt))
    elif mode == "no_input_grad":
        hidden = block2(sub.checkpoint(block1, xt))
    elif mode == "extra_args":
        idx, scale = extra_args(seed, net[3].out_features)
        hidden = sub.checkpoint(block2x, sub.checkpoint(block1, xt), idx, scale)
    else:
        hidden = sub.checkpoint(block2, sub.checkpoint(block1, xt))
    loss = _loss(net[5](hidden))
    after_forward = torch.randn(3).numpy().copy()  # the caller's random stream goes on
    if mode == "mutate":
        with torch.no_grad():
            net[0].weight.mul_(0.5)
            net[0].bias.add_(0.25)
    net.zero_grad()
    loss.backward()
    after_backward = torch.randn(3).numpy().copy()
    return {"baseline_grads": base_grads, "grads": _grads(xt, net) if mode != "no_input_grad"
            else [None] + [_np(p.grad) for p in net.parameters()],
            "rng_draws": [after_forward, after_backward]}
