"""lab03 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed in this lab. Inputs arrive as numpy arrays and results leave as numpy arrays
(`t.detach().numpy()` copies); no tensor or object crosses. This module is also imported by the
trusted side (P0) for the definitions both sides share (the gradcheck battery, the test
functions of forward-mode AD, the model builders), so it has no side effects at import.

Structural checks done here, and reported as data for P0 to judge:
- `engine_calls`: how many times autograd's engine ran during one backward (a hand-written
  backward runs inside the outer call: 1; a backward that calls autograd again: 2 or more);
- `forbidden`: Python functions of torch modules the learner must not use for a part (seen by a
  profile hook while their code runs);
- `fn_calls` / `forward_calls`: how often the learner's code evaluated a function or a model.
"""
import copy
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.variable import Variable


# -- helpers -----------------------------------------------------------------------------------
def _t(a, requires_grad=False):
    t = torch.from_numpy(np.array(a, copy=True))
    return t.requires_grad_(requires_grad) if requires_grad else t


def _np(t):
    return None if t is None else t.detach().numpy(force=True).copy()  # force: ZeroTensors too


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


class _EngineCounter:
    """Counts runs of autograd's engine (every torch.autograd.grad / backward goes through it)."""

    def __init__(self):
        self.calls = 0
        self._engine = None

    def run_backward(self, *args, **kwargs):
        self.calls += 1
        return self._engine.run_backward(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def __enter__(self):
        self._engine = Variable._execution_engine
        Variable._execution_engine = self
        return self

    def __exit__(self, *exc):
        Variable._execution_engine = self._engine


class _Profile:
    """Records calls into Python functions whose file path contains one of `forbidden`."""

    def __init__(self, forbidden):
        self.forbidden, self.seen, self.previous = tuple(forbidden), [], None

    def _hook(self, frame, event, arg):
        if event == "call":
            path = frame.f_code.co_filename.replace("\\", "/")
            for bad in self.forbidden:
                if bad in path and len(self.seen) < 20:
                    self.seen.append(f"{bad}:{frame.f_code.co_name}")

    def __enter__(self):
        self.previous = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        if sys.getprofile() != self._hook:
            self.seen.append("the profiler was switched off")
        sys.setprofile(self.previous)


def _named_grads(model):
    return {name: _np(p.grad) for name, p in model.named_parameters()}


# -- part custom_function ----------------------------------------------------------------------
def linear_tanh(sub, x, w, b, gout, requires=(True, True, True), run_gradcheck=False):
    """Forward, backward and structure of the learner's LinearTanh."""
    xt, wt = _t(x, requires[0]), _t(w, requires[1])
    bt = None if b is None else _t(b, requires[2])
    y = sub.linear_tanh(xt, wt, bt)
    result = {"out": _np(y), "grad_fn": type(y.grad_fn).__name__ if y.grad_fn is not None else None}
    with _EngineCounter() as engine:
        y.backward(_t(gout))
    result["engine_calls"] = engine.calls
    result["grads"] = [_np(t.grad) if t is not None else None for t in (xt, wt, bt)]
    if run_gradcheck:
        inputs = tuple(t.detach().requires_grad_(t.requires_grad) if t is not None else None for t in (xt, wt, bt))
        try:
            result["gradcheck"] = bool(torch.autograd.gradcheck(sub.linear_tanh, inputs, raise_exception=False))
        except Exception as exc:  # noqa: BLE001 - a Function that breaks gradcheck fails it
            result["gradcheck"] = False
            result["gradcheck_error"] = _error(exc)
    return result


# -- part double_backward ----------------------------------------------------------------------
def scaled_swish(sub, x, beta, gout, vx, vb, run_gradgradcheck=False):
    """First and second derivatives of the learner's ScaledSwish."""
    xt, bt = _t(x, True), _t(beta, True)
    y = sub.scaled_swish(xt, bt)
    result = {"out": _np(y), "grad_fn": type(y.grad_fn).__name__ if y.grad_fn is not None else None}
    with _EngineCounter() as engine:
        gx, gb = torch.autograd.grad(y, (xt, bt), _t(gout))
    result.update(engine_calls=engine.calls, gx=_np(gx), gb=_np(gb), gb_shape=list(gb.shape))
    y = sub.scaled_swish(xt, bt)
    gx, gb = torch.autograd.grad(y, (xt, bt), _t(gout), create_graph=True)
    result["second_order_graph"] = bool(gx.requires_grad and gb.requires_grad)
    if result["second_order_graph"]:
        scalar = (gx * _t(vx)).sum() + gb * _t(vb)
        hx, hb = torch.autograd.grad(scalar, (xt, bt), allow_unused=True)
        result.update(hx=_np(hx), hb=_np(hb))
    if run_gradgradcheck:
        inputs = (xt.detach().requires_grad_(), bt.detach().requires_grad_())
        try:
            result["gradgradcheck"] = bool(torch.autograd.gradgradcheck(sub.scaled_swish, inputs, raise_exception=False))
        except Exception as exc:  # noqa: BLE001
            result["gradgradcheck"] = False
            result["gradgradcheck_error"] = _error(exc)
    return result


# -- part my_gradcheck: a battery of correct and wrong Functions --------------------------------
def _function(name, forward, backward, saves=lambda inputs, output: inputs):
    """A setup_context-style Function from a forward and a backward(saved, grad_out)."""

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*saves(inputs, output))

    def bwd(ctx, grad_out):
        return backward(ctx.saved_tensors, grad_out)

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                    "setup_context": staticmethod(setup_context),
                                                    "backward": staticmethod(bwd)})


def _tanh_linear_bwd(factor=1.0, transposed=False, bias_term=True):
    def backward(saved, g_out):
        x, w, y = saved
        g = g_out * (1 - y * y) if bias_term else g_out
        return g @ (w.T if transposed else w) * factor, g.T @ x, g.sum(0)
    return backward


_LinTanh = _function("LinTanhOK", lambda x, w, b: torch.tanh(x @ w.T + b), _tanh_linear_bwd(),
                     saves=lambda i, o: (i[0], i[1], o))
_LinTanhNoChain = _function("LinTanhNoChain", lambda x, w, b: torch.tanh(x @ w.T + b),
                            _tanh_linear_bwd(bias_term=False), saves=lambda i, o: (i[0], i[1], o))
_Square = _function("SquareOK", lambda x: x * x, lambda s, g: (2 * g * s[0],))
_SquareHalf = _function("SquareFactor", lambda x: x * x, lambda s, g: (g * s[0],))
_SquareSlightlyOff = _function("SquareSlightlyOff", lambda x: x * x, lambda s, g: (2.0005 * g * s[0],))
_SquareOff = _function("SquareOff", lambda x: x * x, lambda s, g: (2.006 * g * s[0],))
_XSin = _function("XSinOK", lambda x: x * torch.sin(x), lambda s, g: (g * (torch.sin(s[0]) + s[0] * torch.cos(s[0])),))
_XSinMissing = _function("XSinMissingTerm", lambda x: x * torch.sin(x), lambda s, g: (g * s[0] * torch.cos(s[0]),))
_MatMul = _function("MatMulOK", lambda a, b: a @ b, lambda s, g: (g @ s[1].T, s[0].T @ g))
_MatMulT = _function("MatMulTransposed", lambda a, b: a @ b, lambda s, g: (g @ s[1], s[0].T @ g))
_Mul = _function("MulOK", lambda a, b: a * b, lambda s, g: (g * s[1], g * s[0]))
_MulWrongSecond = _function("MulWrongSecond", lambda a, b: a * b, lambda s, g: (g * s[1], g * s[1]))
_MulGarbageNoGrad = _function("MulGarbageForConst", lambda a, b: a * b, lambda s, g: (g * s[1], 7 * g))
_AddBroadcast = _function("AddBroadcastOK", lambda x, b: x + b, lambda s, g: (g, g.sum(0)), saves=lambda i, o: ())
_AddBroadcastNoSum = _function("AddBroadcastMean", lambda x, b: x + b, lambda s, g: (g, g.mean(0)), saves=lambda i, o: ())
_Exp = _function("ExpOK", lambda x: torch.exp(x), lambda s, g: (g * s[0],), saves=lambda i, o: (o,))
_SumSq = _function("SumSquaresOK", lambda x: (x * x).sum(), lambda s, g: (2 * g * s[0],))


def _inputs_lin(rng, n):
    return [(rng.standard_normal((n, 3)), True), (rng.standard_normal((2, 3)), True), (rng.standard_normal(2), True)]


def _inputs_vec(rng, n):
    return [(rng.standard_normal(n) + 0.5, True)]


def _inputs_mat(rng, n):
    return [(rng.standard_normal((2, n)), True), (rng.standard_normal((n, n)), True)]


def _inputs_pair(rng, n, second=True):
    return [(rng.standard_normal((n, 2)), True), (rng.standard_normal((n, 2)), second)]


def _inputs_bcast(rng, n):
    return [(rng.standard_normal((n, 3)), True), (rng.standard_normal(3), True)]


# name -> (Function, input maker, torch's verdict is computed in P0 from these same definitions)
BATTERY = {
    "linear_tanh_ok": (_LinTanh, _inputs_lin),
    "linear_tanh_missing_chain": (_LinTanhNoChain, _inputs_lin),
    "square_ok": (_Square, _inputs_vec),
    "square_factor": (_SquareHalf, _inputs_vec),
    "square_slightly_off_within_rtol": (_SquareSlightlyOff, _inputs_vec),
    "square_off_beyond_rtol": (_SquareOff, _inputs_vec),
    "xsin_ok": (_XSin, _inputs_vec),
    "xsin_missing_term": (_XSinMissing, _inputs_vec),
    "matmul_ok": (_MatMul, _inputs_mat),
    "matmul_transposed": (_MatMulT, _inputs_mat),
    "mul_ok": (_Mul, _inputs_pair),
    "mul_wrong_second_input": (_MulWrongSecond, _inputs_pair),
    "mul_garbage_for_input_without_grad": (_MulGarbageNoGrad, lambda rng, n: _inputs_pair(rng, n, second=False)),
    "add_broadcast_ok": (_AddBroadcast, _inputs_bcast),
    "add_broadcast_mean": (_AddBroadcastNoSum, _inputs_bcast),
    "exp_ok": (_Exp, _inputs_vec),
    "sum_squares_ok": (_SumSq, _inputs_vec),
}


def battery_inputs(name, seed, n):
    """The tensors (float64) for battery entry `name`; the same on both sides."""
    rng = np.random.default_rng(seed)
    return tuple(torch.tensor(a, dtype=torch.float64, requires_grad=req) for a, req in BATTERY[name][1](rng, n))


_GRADCHECK_FORBIDDEN = ("torch/autograd/gradcheck.py", "torch/autograd/functional.py")


def gradcheck_verdict(sub, name, seed, n, tolerances=None):
    """The learner's verdict on battery entry `name`, with what it called on the way."""
    fn_class = BATTERY[name][0]
    inputs = battery_inputs(name, seed, n)
    calls = [0]

    def fn(*args):
        calls[0] += 1
        return fn_class.apply(*args)

    before = [t.detach().clone() for t in inputs]
    with _Profile(_GRADCHECK_FORBIDDEN) as prof:
        verdict = sub.my_gradcheck(fn, inputs, **(tolerances or {}))
    untouched = all(torch.equal(a, b) for a, b in zip(before, inputs))
    diff_numel = sum(t.numel() for t in inputs if t.requires_grad)
    return {"verdict": verdict if isinstance(verdict, bool) else repr(verdict)[:100],
            "is_bool": isinstance(verdict, (bool, np.bool_)) or (torch.is_tensor(verdict) and verdict.numel() == 1),
            "truthy": bool(verdict), "fn_calls": calls[0], "diff_numel": diff_numel,
            "forbidden": prof.seen, "inputs_untouched": untouched}


def gradcheck_jacobians(sub, name, seed, n, which, eps=1e-6):
    """The learner's numerical or analytical Jacobians of battery entry `name`, as arrays."""
    fn_class = BATTERY[name][0]
    inputs = battery_inputs(name, seed, n)
    with _Profile(_GRADCHECK_FORBIDDEN) as prof:
        if which == "numerical":
            jacobians = sub.numerical_jacobian(fn_class.apply, inputs, eps)
        else:
            jacobians = sub.analytical_jacobian(fn_class.apply, inputs)
    return {"jacobians": [np.asarray(_np(torch.as_tensor(j)), dtype=np.float64) for j in jacobians], "forbidden": prof.seen}


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


# functions of several tensors returning one tensor (jvp), and scalar functions of one (hvp)
JVP_FUNCS = {
    "sin": (1, lambda x: torch.sin(x)),
    "mul_exp": (2, lambda x, y: x * torch.exp(y)),
    "matmul_tanh": (2, lambda a, b: torch.tanh(a @ b)),
    "softmax_sum": (1, lambda x: torch.softmax(x, dim=-1) * x),
    "cube_forward_only": (1, lambda x: _CubeFwdOnly.apply(x) + x),
    "constant": (1, lambda x: torch.ones(3, dtype=x.dtype) * 2.0),
    "norm_mix": (2, lambda x, y: (x * y).sum() / (1 + (x * x).sum())),
}

HVP_FUNCS = {
    "rosenbrock": lambda x: ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum(),
    "tanh_mix": lambda x: (torch.tanh(x) * x.flip(0)).sum(),
    "gaussian": lambda x: torch.exp(-(x * x).sum()),
    "quadratic": lambda x: 0.5 * (x * torch.arange(1.0, x.numel() + 1, dtype=x.dtype) * x).sum(),
    "sin_prod": lambda x: torch.sin(x).prod() + (x ** 4).sum(),
    "linear": lambda x: (3.0 * x).sum(),
}


def forward_jvp(sub, name, primals, tangents):
    nargs, f = JVP_FUNCS[name]
    ps = [_t(p) for p in primals[:nargs]]
    ts = [_t(t) for t in tangents[:nargs]]
    with _EngineCounter() as engine, _Profile(("torch/autograd/functional.py",)) as prof:
        out, tangent = sub.jvp(f, tuple(ps), tuple(ts))
    return {"out": _np(out), "tangent": _np(tangent), "engine_calls": engine.calls, "forbidden": prof.seen}


def forward_hvp(sub, name, x, v):
    f = HVP_FUNCS[name]
    xt, vt = _t(x), _t(v)
    with _EngineCounter() as engine, _Profile(("torch/autograd/functional.py",)) as prof:
        hv = sub.hvp(f, xt, vt)
    return {"hv": _np(hv), "requires_grad": bool(hv.requires_grad), "engine_calls": engine.calls,
            "forbidden": prof.seen, "x_untouched": bool(torch.equal(xt, _t(x))) and xt.grad is None}


# -- parts per_sample_grads and ensembling -------------------------------------------------------
def mlp(params):
    """Linear(d, h) -> Tanh -> Linear(h, c) with the given weights (a dict of arrays)."""
    h, d = np.shape(params["0.weight"])
    c = np.shape(params["2.weight"])[0]
    model = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, c))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(_t(params[name]))
    return model


def _count_forwards(model):
    calls = [0]
    model.register_forward_pre_hook(lambda *args: calls.__setitem__(0, calls[0] + 1))
    return calls


def per_sample(sub, params, x, y, impl="vmap"):
    model = mlp(params)
    calls = _count_forwards(model)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    fn = sub.per_sample_grads if impl == "vmap" else sub.per_sample_grads_loop
    grads = fn(model, F.cross_entropy, _t(x), _t(y))
    unchanged = all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    return {"grads": {str(k): _np(v) for k, v in dict(grads).items()}, "forward_calls": calls[0],
            "grad_set": any(p.grad is not None for p in model.parameters()), "model_unchanged": unchanged}


def _reference_loop(model, x, y):
    params = tuple(model.parameters())
    return [torch.autograd.grad(F.cross_entropy(model(x[b:b + 1]), y[b:b + 1]), params) for b in range(x.shape[0])]


def per_sample_timed(sub, params, x, y, impl, repeat=3):
    """Run one implementation `repeat` times (the trusted side times the call); returns nothing useful."""
    model, xt, yt = mlp(params), _t(x), _t(y)
    for _ in range(repeat):
        if impl == "student":
            sub.per_sample_grads(model, F.cross_entropy, xt, yt)
        else:
            _reference_loop(model, xt, yt)
    return True


def ensemble(sub, params_list, x, same_input=True):
    models = [mlp(p) for p in params_list]
    counters = [_count_forwards(m) for m in models]
    out = sub.ensemble_predict(models, _t(x), same_input=same_input)
    intact = all(p.device.type == "cpu" and np.array_equal(_np(p), np.asarray(ps[name]))
                 for m, ps in zip(models, params_list) for name, p in m.named_parameters())
    return {"out": _np(out), "forward_calls": sum(c[0] for c in counters), "models_intact": intact}


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


def _storages(obj, found, depth=0):
    """Torch storages an object keeps alive: tensors, numpy arrays viewing torch memory, containers."""
    if depth > 6:
        return
    if torch.is_tensor(obj):
        storage = obj.untyped_storage()
        found[storage.data_ptr()] = storage.nbytes()
    elif isinstance(obj, np.ndarray):
        base = obj.base
        while base is not None:
            if torch.is_tensor(base):
                _storages(base, found, depth + 1)
                return
            base = getattr(base, "base", None)
    elif isinstance(obj, (list, tuple, set)):
        for item in obj:
            _storages(item, found, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _storages(item, found, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for item in vars(obj).values():
            _storages(item, found, depth + 1)


class _Meter:
    """Outer saved-tensor hooks that keep the tensors and count their storage bytes (during forward)."""

    def __init__(self):
        self.found, self.counting = {}, True

    def pack(self, t):
        if self.counting:
            _storages(t, self.found)
        return t

    @property
    def nbytes(self):
        return int(sum(self.found.values()))


def _loss(out):
    return (out * out).mean()


def _baseline(net, x, seed):
    """Grads of a plain run, and the bytes autograd saved for it."""
    xt = _t(x, True)
    meter = _Meter()
    torch.manual_seed(seed)
    with torch.autograd.graph.saved_tensors_hooks(meter.pack, lambda t: t):
        loss = _loss(net(xt))
    meter.counting = False
    net.zero_grad()
    loss.backward()
    return meter.nbytes, [_np(xt.grad)] + [_np(p.grad) for p in net.parameters()]


def offload(sub, params, x, seed, p_drop=0.25):
    net = hooks_net(params, p_drop)
    base_bytes, base_grads = _baseline(net, x, seed)
    off = sub.NumpyOffload()
    packed, unpacked = [], [0]

    def pack(t):
        obj = off.pack(t)
        packed.append(obj)
        return obj

    def unpack(obj):
        unpacked[0] += 1
        return off.unpack(obj)

    xt = _t(x, True)
    torch.manual_seed(seed)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = _loss(net(xt))
    found = {}
    _storages(packed, found)
    _storages(getattr(off, "store", None), found)
    store = getattr(off, "store", {})
    numpy_bytes = int(sum(a.nbytes for a in (store.values() if isinstance(store, dict) else [])
                          if isinstance(a, np.ndarray)))
    net.zero_grad()
    loss.backward()
    grads = [_np(xt.grad)] + [_np(p.grad) for p in net.parameters()]
    return {"baseline_bytes": base_bytes, "torch_bytes": int(sum(found.values())), "numpy_bytes": numpy_bytes,
            "packed": len(packed), "unpacked": unpacked[0], "baseline_grads": base_grads, "grads": grads}


def checkpointed(sub, params, x, seed, p_drop=0.25, use_loss_twice=False):
    net = hooks_net(params, p_drop)
    base_bytes, base_grads = _baseline(net, x, seed)
    calls = [0, 0]

    def block1(inp):
        calls[0] += 1
        return net[2](net[1](net[0](inp)))

    def block2(inp):
        calls[1] += 1
        return net[4](net[3](inp))

    entered = [0]
    original_enter = torch.autograd.graph.saved_tensors_hooks.__enter__

    def spy_enter(self):
        entered[0] += 1
        return original_enter(self)

    xt = _t(x, True)
    meter = _Meter()
    torch.manual_seed(seed)
    torch.autograd.graph.saved_tensors_hooks.__enter__ = spy_enter
    try:
        with torch.autograd.graph.saved_tensors_hooks(meter.pack, lambda t: t):
            entered[0] = 0
            with _Profile(("torch/utils/checkpoint.py",)) as prof:
                hidden = sub.checkpoint(block2, sub.checkpoint(block1, xt))
            loss = _loss(net[5](hidden))
        meter.counting = False
        after_forward = torch.randn(3).numpy().copy()  # the caller's random stream goes on
        net.zero_grad()
        loss.backward()
        after_backward = torch.randn(3).numpy().copy()
    finally:
        torch.autograd.graph.saved_tensors_hooks.__enter__ = original_enter
    torch.manual_seed(seed)
    with torch.no_grad():
        _loss(net(_t(x)))  # the forward's draws (dropout), then the caller's: where the stream should be
    expected = [torch.randn(3).numpy().copy(), torch.randn(3).numpy().copy()]
    grads = [_np(xt.grad)] + [_np(p.grad) for p in net.parameters()]
    return {"baseline_bytes": base_bytes, "bytes": meter.nbytes, "fn_calls": calls, "inner_hooks": entered[0],
            "forbidden": prof.seen, "baseline_grads": base_grads, "grads": grads,
            "rng_draws": [after_forward, after_backward], "rng_expected": expected}

# IPT-CANARY lab03 lab03.py: hidden grading text, never shown to learners
