# IPT-CANARY lab08 scenarios.py: hidden grading text, never shown to learners
"""lab08 scenarios: run on the student side (P1), against the learner's module `sub`.

Inputs arrive as numpy arrays (bfloat16 inputs as float32 plus a flag: numpy has no bfloat16);
results leave as numpy arrays with the tensor's dtype name beside them. Every scenario takes a
list of cases and answers one reply per case, so a test costs one round trip. An exception in one
case becomes {"error": type name} for that case and does not stop the others.

Trust: these functions only build inputs, call the learner's code and return the values it
produced. P0 compares the values with its own oracle (torchao, torch's fake-quant kernels and
torch._int_mm, imported in P0 only); nothing here reports how a value was computed.
"""
import numpy as np
import torch


def _t(a, bf16=False):
    t = torch.from_numpy(np.array(a, copy=True))
    return t.to(torch.bfloat16) if bf16 else t


def _out(t):
    """A learner tensor as (numpy values, dtype name); bfloat16 crosses exactly as float32."""
    if not torch.is_tensor(t):
        return {"value": t if isinstance(t, (int, float, bool, type(None))) else repr(type(t).__name__)}
    t = t.detach()
    dtype = str(t.dtype).replace("torch.", "")
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return {"values": t.numpy(force=True).copy(), "dtype": dtype}


def _error(exc):
    """The reply for a case where the learner's code raised: the type, and the start of the message."""
    return {"error": type(exc).__name__, "message": str(exc)[:200]}


def _each(cases, fn):
    results = []
    for case in cases:
        try:
            results.append(fn(**case))
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            results.append(_error(exc))
    return results


def _dtype(name):
    return getattr(torch, name)


# -- part qparams ------------------------------------------------------------------------------
def qrange(sub, cases):
    def one(bits, signed):
        got = sub.qrange(bits, signed)
        return {"value": [int(v) for v in got] if isinstance(got, (tuple, list)) else repr(got)}
    return _each(cases, one)


def from_minmax(sub, cases):
    def one(min_val, max_val, qmin, qmax, symmetric, eps):
        scale, zp = sub.qparams_from_minmax(_t(min_val), _t(max_val), qmin, qmax, symmetric, eps)
        return {"scale": _out(scale), "zero_point": _out(zp)}
    return _each(cases, one)


def choose(sub, cases):
    def one(x, block_size, qmin, qmax, symmetric, eps=None, bf16=False):
        kwargs = {} if eps is None else {"eps": eps}
        scale, zp = sub.choose_qparams(_t(x, bf16), tuple(block_size), qmin, qmax, symmetric, **kwargs)
        return {"scale": _out(scale), "zero_point": _out(zp)}
    return _each(cases, one)


# -- part quantize -----------------------------------------------------------------------------
def quantize(sub, cases):
    def one(x, block_size, scale, zero_point, qmin, qmax, dtype, bf16=False):
        q = sub.quantize(_t(x, bf16), tuple(block_size), _t(scale, bf16), _t(zero_point), qmin, qmax, _dtype(dtype))
        return {"q": _out(q)}
    return _each(cases, one)


def dequantize(sub, cases):
    def one(q, block_size, scale, zero_point, bf16=False):
        return {"x": _out(sub.dequantize(_t(q), tuple(block_size), _t(scale, bf16), _t(zero_point)))}
    return _each(cases, one)


# -- part observers ----------------------------------------------------------------------------
def observe(sub, config, batches, qparams_before=False):
    """Feeds the batches to one observer; the range after each batch, then its qparams."""
    obs = sub.MinMaxObserver(**config)
    result = {"steps": []}
    if qparams_before:
        try:
            obs.calculate_qparams()
            result["before"] = {"value": "no error"}
        except Exception as exc:  # noqa: BLE001
            result["before"] = {"error": type(exc).__name__}
    for batch in batches:
        x = _t(batch)
        try:
            out = obs(x)
        except Exception as exc:  # noqa: BLE001
            result["steps"].append({"error": type(exc).__name__})
            continue
        result["steps"].append({"same": out is x and bool(torch.equal(x, _t(batch))),
                                "min_val": _out(obs.min_val), "max_val": _out(obs.max_val)})
    try:
        scale, zp = obs.calculate_qparams()
        result["qparams"] = {"scale": _out(scale), "zero_point": _out(zp)}
    except Exception as exc:  # noqa: BLE001
        result["qparams"] = {"error": type(exc).__name__}
    return result


def observe_histogram(sub, config, batches, before=False):
    """Feeds the batches to one HistogramObserver: its bins after each batch, then range() and qparams."""
    try:
        obs = sub.HistogramObserver(**config)
    except Exception as exc:  # noqa: BLE001
        return {"init": _error(exc)}
    result = {"init": {"value": "constructed"}, "steps": []}
    if before:
        for name in ("range", "calculate_qparams"):
            try:
                getattr(obs, name)()
                result[name + "_before"] = {"value": "no error"}
            except Exception as exc:  # noqa: BLE001
                result[name + "_before"] = {"error": type(exc).__name__}
    for batch in batches:
        x = _t(batch)
        try:
            out = obs(x)
            result["steps"].append({"same": out is x and bool(torch.equal(x, _t(batch))),
                                    "bins": [[int(k), int(n)] for k, n in dict(obs.bins).items()]})
        except Exception as exc:  # noqa: BLE001
            result["steps"].append(_error(exc))
    try:
        lo, hi = obs.range()
        result["range"] = {"min_val": _out(lo), "max_val": _out(hi)}
    except Exception as exc:  # noqa: BLE001
        result["range"] = _error(exc)
    try:
        scale, zp = obs.calculate_qparams()
        result["qparams"] = {"scale": _out(scale), "zero_point": _out(zp)}
    except Exception as exc:  # noqa: BLE001
        result["qparams"] = _error(exc)
    return result


# -- part fake_quant ---------------------------------------------------------------------------
def fake_quant(sub, cases):
    def one(x, block_size, scale, zero_point, qmin, qmax, gout):
        xt = _t(x).requires_grad_(True)
        y = sub.fake_quantize(xt, tuple(block_size), _t(scale), _t(zero_point), qmin, qmax)
        out = _out(y)
        y.backward(_t(gout))
        return {"out": out, "grad": _out(xt.grad)}
    return _each(cases, one)


def fake_quant_step(sub, x, w, scale, zero_point, qmin, qmax, target, lr, steps):
    """A few SGD steps on a weight seen through fake_quantize (QAT in miniature): the weights after."""
    wt = _t(w).requires_grad_(True)
    xt, tt = _t(x), _t(target)
    block = (1, wt.shape[1])
    for _ in range(steps):
        y = xt @ sub.fake_quantize(wt, block, _t(scale), _t(zero_point), qmin, qmax).T
        loss = ((y - tt) ** 2).mean()
        grad, = torch.autograd.grad(loss, wt)
        with torch.no_grad():
            wt -= lr * grad
    return _out(wt)


# -- part int8_linear --------------------------------------------------------------------------
def int_matmul(sub, cases):
    def one(a, b):
        return {"out": _out(sub.int_matmul(_t(a), _t(b)))}
    return _each(cases, one)


def int8_linear(sub, cases):
    def one(xq, x_scale, x_zp, wq, w_scale, bias, out_scale, out_zp):
        out = sub.int8_linear(_t(xq), _t(x_scale), x_zp, _t(wq), _t(w_scale), None if bias is None else _t(bias),
                              _t(out_scale), out_zp)
        return {"out": _out(out)}
    return _each(cases, one)


# -- part int4 ---------------------------------------------------------------------------------
def pack(sub, cases):
    return _each(cases, lambda q: {"out": _out(sub.pack_int4(_t(q)))})


def unpack(sub, cases):
    return _each(cases, lambda p: {"out": _out(sub.unpack_int4(_t(p)))})


def int4_linear(sub, cases):
    def one(x, packed, scale, zero_point, group_size, bias=None):
        out = sub.int4_linear(_t(x), _t(packed), _t(scale), _t(zero_point), group_size,
                              None if bias is None else _t(bias))
        return {"out": _out(out)}
    return _each(cases, one)


# -- part ptq ------------------------------------------------------------------------------------
# The models are defined here so that P0 (oracle.py) builds exactly the same ones.
class Residual(torch.nn.Module):
    def __init__(self, k, h, out):
        super().__init__()
        self.l1, self.l2, self.l3 = torch.nn.Linear(k, h), torch.nn.Linear(h, h), torch.nn.Linear(h, out, bias=False)

    def forward(self, x):
        h = torch.relu(self.l1(x))
        h = h + torch.relu(self.l2(h))
        return self.l3(h)


class Shared(torch.nn.Module):
    """One Linear called twice (each call has its own input range), then a head."""

    def __init__(self, k, out):
        super().__init__()
        self.inner, self.head = torch.nn.Linear(k, k), torch.nn.Linear(k, out)

    def forward(self, x):
        h = torch.relu(self.inner(x))
        h = torch.relu(self.inner(h * 3.0))
        return self.head(h)


class TwoReaders(torch.nn.Module):
    """Two Linears read the same tensor; their outputs meet."""

    def __init__(self, k, h, out):
        super().__init__()
        self.a, self.b, self.head = torch.nn.Linear(k, h), torch.nn.Linear(k, h), torch.nn.Linear(h, out)

    def forward(self, x):
        return self.head(torch.relu(self.a(x)) * torch.sigmoid(self.b(x)))


def build_model(arch):
    kind, dims = arch["kind"], arch["dims"]
    if kind == "chain":
        layers = []
        for i in range(len(dims) - 1):
            layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)
    return {"residual": Residual, "shared": Shared, "two_readers": TwoReaders}[kind](*dims)


def _observer_calls(sub, gm):
    """How many call_module nodes call one of the learner's observers (a reply that can only cost points:
    the spec asks for one per Linear call after prepare and none after convert)."""
    modules = dict(gm.named_modules())
    return sum(1 for node in gm.graph.nodes
               if node.op == "call_module" and isinstance(modules.get(node.target), sub.MinMaxObserver))


def ptq(sub, arch, state, calibration, test):
    """Trace, prepare, calibrate and convert with the learner's passes; the values that come out."""
    model = build_model(arch)
    model.load_state_dict({k: _t(v) for k, v in state.items()})
    model.eval()
    gm = torch.fx.symbolic_trace(model)
    result = {}
    with torch.no_grad():
        gm = sub.prepare_ptq(gm)
        result["observers_after_prepare"] = _observer_calls(sub, gm)
        # calibration; the first batch's output is kept: a prepared model computes what the float model does
        for i, batch in enumerate(calibration):
            out = gm(_t(batch))
            if i == 0:
                result["prepared"] = _out(out)
        gm = sub.convert_ptq(gm)
        result["observers_after_convert"] = _observer_calls(sub, gm)
        result["converted"] = _out(gm(_t(test)))
        modules = dict(gm.named_modules())
        layers = []
        for node in gm.graph.nodes:
            mod = modules.get(node.target) if node.op == "call_module" else None
            if mod is not None and hasattr(mod, "weight_q"):
                layers.append({key: _out(getattr(mod, key, None))
                               for key in ("weight_q", "weight_scale", "x_scale", "x_zero_point")})
        result["layers"] = layers
    return result
