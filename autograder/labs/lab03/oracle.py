# IPT-CANARY lab03 oracle.py: hidden grading text, never shown to learners
"""Trusted-side (P0) oracles of lab03: real PyTorch and the lab's spec, computed here, never in P1.

Shared definitions (the gradcheck battery, the forward-AD test functions, the model builders) come
from the lab's scenario module, which is trusted code: P0 imports it, P1 receives it as text.

Where the lab's spec and torch's own implementation differ (a gradcheck that checks only the
Jacobians and perturbs copies; a backward that must use what it saved; a checkpoint that replays
the rng state it is given), the oracle here computes the spec, written independently of the
reference solution; fuzz.py checks it against torch wherever the two agree.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import forward_ad as fwAD

from autograder.engine import replies
from autograder.labs.lab03 import scenarios as shared

TOL = dict(rtol=1e-9, atol=1e-10)  # float64 comparisons of analytic results


def arrays(seed: int, *shapes, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(s)).astype(dtype) for s in shapes]


def close(got, want, what: str, rtol=1e-7, atol=1e-9) -> None:
    """`got` (a reply) is an array of want's shape, a float dtype, and values close to want's."""
    want = np.asarray(want)
    if got is None:
        raise AssertionError(f"{what}: got nothing (None)")
    if isinstance(got, (int, float)) and not isinstance(got, bool) and want.shape == ():
        got = np.asarray(got, dtype=np.float64)
    got = replies.array(got, what)
    if want.shape == () and got.shape == (1,):
        got = got.reshape(())  # 0-d arrays may cross the boundary as shape (1,)
    assert got.shape == want.shape, f"{what}: expected shape {list(want.shape)}, got {list(got.shape)}"
    assert got.dtype.kind in "fc" or got.size == 0, f"{what}: expected floating-point values, got dtype {got.dtype}"
    if got.size and not np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol):
        worst = float(np.nanmax(np.abs(got.astype(np.float64) - want))) if np.isfinite(got).all() else float("nan")
        raise AssertionError(f"{what}: values differ from the expected ones by up to {worst:.3g}")


def reply(result, keys, what: str) -> dict:
    return replies.dict_of(result, keys, what)


# -- custom_function / double_backward --------------------------------------------------------
def linear_tanh(x, w, b, gout, requires=(True, True, True), swap_y=None, twice=False):
    """Output and gradients (None where no gradient is due). With swap_y: the spec's formulas
    evaluated on the y that autograd hands back (g = gout * (1 - y'^2))."""
    xt = torch.tensor(x, requires_grad=requires[0])
    wt = torch.tensor(w, requires_grad=requires[1])
    bt = None if b is None else torch.tensor(b, requires_grad=requires[2])
    y = torch.tanh(F.linear(xt, wt, bt))
    times = 2 if twice else 1
    if swap_y is None:
        for _ in range(times):
            y.backward(torch.tensor(gout), retain_graph=True)
        return y.detach().numpy(), [None if t is None or t.grad is None else t.grad.numpy() for t in (xt, wt, bt)]
    ys, g_out, xs, ws = (torch.tensor(a, dtype=torch.float64) for a in (swap_y, gout, x, w))
    g = g_out * (1 - ys * ys)
    grads = [g @ ws if requires[0] else None, g.T @ xs if requires[1] else None,
             None if b is None or not requires[2] else g.sum(0)]
    return y.detach().numpy(), [None if t is None else (times * t).numpy() for t in grads]


def swish_grads(x, beta, gout):
    """The spec's first derivatives at (x, beta), from the formulas (float64)."""
    x, g = np.asarray(x, dtype=np.float64), np.asarray(gout, dtype=np.float64)
    s = 1 / (1 + np.exp(-beta * x))
    ds = s * (1 - s)
    return g * (s + beta * x * ds), np.asarray((g * x * x * ds).sum())


def scaled_swish(x, beta, gout, vx, vb):
    xt, bt = torch.tensor(x, requires_grad=True), torch.tensor(beta, dtype=torch.float64, requires_grad=True)
    y = xt * torch.sigmoid(bt * xt)
    gx, gb = torch.autograd.grad(y, (xt, bt), torch.tensor(gout), create_graph=True)
    hx, hb = torch.autograd.grad((gx * torch.tensor(vx)).sum() + gb * torch.tensor(vb, dtype=torch.float64), (xt, bt),
                                 allow_unused=True)
    hx = torch.zeros_like(xt) if hx is None else hx
    hb = torch.zeros_like(bt) if hb is None else hb
    return {"out": y.detach().numpy(), "gx": gx.detach().numpy(), "gb": gb.detach().numpy(),
            "hx": hx.detach().numpy(), "hb": hb.detach().numpy()}


# -- my_gradcheck: the lab's spec, written here -----------------------------------------------------
def _diff(inputs):
    return [i for i, t in enumerate(inputs) if torch.is_tensor(t) and t.requires_grad]


def spec_numerical(name, seed, n, eps=1e-6):
    """Central differences on detached copies (the caller's tensors never move), under no_grad."""
    inputs = shared.battery_inputs(name, seed, n)
    fn = shared.battery_fn(name, inputs)
    result = []
    with torch.no_grad():
        base = [t.detach().clone() if torch.is_tensor(t) else t for t in inputs]
        n_out = fn(*base).numel()
        for i in _diff(inputs):
            args = list(base)
            flat = inputs[i].detach().reshape(-1).clone()
            jac = np.zeros((n_out, flat.numel()))
            for j in range(flat.numel()):
                cols = []
                for sign in (1, -1):
                    moved = flat.clone()
                    moved[j] += sign * eps
                    args[i] = moved.reshape(inputs[i].shape)
                    cols.append(fn(*args).reshape(-1).to(torch.float64))
                jac[:, j] = ((cols[0] - cols[1]) / (2 * eps)).numpy()
            result.append(jac)
    return result


def spec_analytical(name, seed, n):
    """One vector-Jacobian product per output element, fn called on the caller's tensors."""
    inputs = shared.battery_inputs(name, seed, n)
    fn = shared.battery_fn(name, inputs)
    diff = [inputs[i] for i in _diff(inputs)]
    out = fn(*inputs)
    jacs = [np.zeros((out.numel(), t.numel())) for t in diff]
    if not out.requires_grad:
        return jacs
    for k in range(out.numel()):
        e = torch.zeros(out.numel(), dtype=out.dtype)
        e[k] = 1
        grads = torch.autograd.grad(out, diff, e.view_as(out), retain_graph=True, allow_unused=True)
        for jac, g in zip(jacs, grads, strict=True):
            if g is not None:
                jac[k] = g.reshape(-1).detach().numpy()
    return jacs


def spec_verdict(name, seed, n, tolerances=None) -> bool:
    tol = dict(eps=1e-6, atol=1e-5, rtol=1e-3)
    tol.update(tolerances or {})
    numerical = spec_numerical(name, seed, n, tol["eps"])
    analytical = spec_analytical(name, seed, n)
    return all(np.all(np.abs(a - m) <= tol["atol"] + tol["rtol"] * np.abs(m)) for a, m in zip(analytical, numerical, strict=True))


def torch_verdict(name, seed, n, tolerances=None) -> bool:
    """torch.autograd.gradcheck's verdict (used by fuzz.py: where it differs from the spec's, the
    difference is one the notebook states)."""
    inputs = shared.battery_inputs(name, seed, n)
    try:
        return bool(torch.autograd.gradcheck(shared.battery_fn(name, inputs), inputs, raise_exception=False,
                                             **(tolerances or {})))
    except Exception:  # noqa: BLE001 - e.g. a Python float among the inputs
        return False


# -- forward_ad -------------------------------------------------------------------------------------
def jvp(name, primals, tangents):
    """torch.func.jvp where torch.func accepts the function; dual tensors for an old-style Function."""
    nargs, f = shared.JVP_FUNCS[name]
    ps = tuple(torch.tensor(p) for p in primals[:nargs])
    ts = tuple(torch.tensor(t) for t in tangents[:nargs])
    if name == "old_style_cube":
        return ps[0].numpy() ** 3 - 2 * ps[0].numpy(), (3 * ps[0] ** 2 * ts[0] - 2 * ts[0]).numpy()
    if name == "second_ignored":
        return torch.cos(ps[0]).numpy(), (-torch.sin(ps[0]) * ts[0]).numpy()
    out, tangent = torch.func.jvp(f, ps, ts)
    return out.detach().numpy(), tangent.detach().numpy()


_HVP_PLAIN = {  # the same functions without the forward-only Functions, for torch's hessian
    "old_style_cube": lambda x: (x * x * x).sum() + (x * x).sum(),
    "forward_only_cube": lambda x: (x * x * x).sum() + torch.sin(x).sum(),
}


def hvp(name, x, v):
    f = _HVP_PLAIN.get(name, shared.HVP_FUNCS[name])
    hessian = torch.autograd.functional.hessian(f, torch.tensor(x))
    return (hessian.reshape(len(x), len(x)) @ torch.tensor(v)).numpy()


# -- per_sample_grads / ensembling ---------------------------------------------------------------
def model_params(seed, d, h, c, kind="mlp", scale=0.5):
    """A state dict (arrays) for scenarios.build_model(kind, d, h, c): random parameters and buffers."""
    model = shared.build_model(kind, d, h, c)
    rng = np.random.default_rng(seed)
    state = {}
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        values = rng.standard_normal(tuple(t.shape)).astype(np.float32) * scale
        if name.endswith("running_var"):
            values = np.abs(values) + 0.5
        if name.endswith("scale"):
            values = values + 1
        state[name] = values
    return state


def mlp_params(seed, d, h, c, scale=0.5):
    return model_params(seed, d, h, c, "mlp", scale)


def per_sample_grads(params, x, y, kind="mlp", frozen=(), loss="cross_entropy"):
    model = shared.mlp(params, kind, frozen)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    xt, yt = torch.tensor(x), torch.tensor(y)
    loss_fn = {"cross_entropy": F.cross_entropy, "mse": F.mse_loss}[loss]
    per = {n: [] for n, _ in named}
    for b in range(len(x)):
        value = loss_fn(model(xt[b:b + 1]), yt[b:b + 1])
        for (n, _), g in zip(named, torch.autograd.grad(value, [p for _, p in named]), strict=True):
            per[n].append(g)
    return {n: torch.stack(g).numpy() for n, g in per.items()}


def ensemble(params_list, x, same_input=True, kind="mlp"):
    xt = torch.tensor(x)
    with torch.no_grad():
        return np.stack([shared.mlp(p, kind)(xt if same_input else xt[m]).numpy() for m, p in enumerate(params_list)])


# -- saved_tensor_hooks ----------------------------------------------------------------------------
def hooks_params(seed, d, h, c):
    w0, b0, w3, b3, w5, b5 = arrays(seed, (h, d), (h,), (h, h), (h,), (c, h), (c,), dtype=np.float32)
    s0, s3 = 1 / np.sqrt(d), 1 / np.sqrt(h)
    return {"0.weight": w0 * s0, "0.bias": b0 * s0, "3.weight": w3 * s3, "3.bias": b3 * s3,
            "5.weight": w5 * s3, "5.bias": b5 * s3}


def _loss(out):
    return (out * out).mean()


def hooks_grads(params, x, seed, p_drop):
    net = shared.hooks_net(params, p_drop)
    xt = torch.tensor(x, requires_grad=True)
    torch.manual_seed(seed)
    _loss(net(xt)).backward()
    return [xt.grad.numpy()] + [p.grad.numpy() for p in net.parameters()]


def offload(params, x, seed, p_drop=0.25, double=False):
    """What autograd saves (in pack order) and the gradients when every saved tensor is handed back
    doubled (double=True): the spec's offload with a store the caller changed."""
    net = shared.hooks_net(params, p_drop)
    xt = torch.tensor(x, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.detach().numpy().copy(order="K"))
        return len(saved) - 1

    def unpack(k):
        return torch.from_numpy(saved[k] * 2 if double else saved[k])

    torch.manual_seed(seed)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = _loss(net(xt))
    stored = [a.copy() for a in saved]
    loss.backward()
    return stored, [xt.grad.numpy()] + [p.grad.numpy() for p in net.parameters()]


class SpecCheckpoint(torch.autograd.Function):
    """The spec of the lab's Checkpoint, written here for P0 (apply(run_fn, rng_state, *args))."""

    @staticmethod
    def forward(ctx, run_fn, rng_state, *args):
        ctx.run_fn, ctx.rng_state = run_fn, rng_state
        ctx.save_for_backward(*args)
        return run_fn(*args)

    @staticmethod
    def backward(ctx, grad_out):
        args = [a.detach().requires_grad_(a.requires_grad) for a in ctx.saved_tensors]
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(ctx.rng_state)
            with torch.enable_grad():
                out = ctx.run_fn(*args)
        torch.autograd.backward(out, grad_out)
        return (None, None, *[a.grad for a in args])


def checkpointed(params, x, seed, p_drop=0.25, mode="plain", rng_seed=None):
    """Gradients (None where the spec gives none) and the caller's two random draws."""
    net = shared.hooks_net(params, p_drop)
    xt = torch.tensor(x, requires_grad=mode != "no_input_grad")

    def block1(inp):
        return net[2](net[1](net[0](inp)))

    def block2(inp):
        return net[4](net[3](inp))

    def block2x(inp, idx, scale):
        return block2(inp * scale)[:, idx]

    def ckpt(fn, inp, state=None, extra=()):
        return SpecCheckpoint.apply(fn, torch.get_rng_state() if state is None else state, inp, *extra)

    torch.manual_seed(seed)
    if mode == "given_rng":
        state = torch.get_rng_state()
        torch.manual_seed(rng_seed)
        given = torch.get_rng_state()
        torch.set_rng_state(state)
        hidden = ckpt(block2, ckpt(block1, xt, given))
    elif mode == "no_input_grad":
        hidden = block2(ckpt(block1, xt))
    elif mode == "extra_args":
        hidden = ckpt(block2x, ckpt(block1, xt), extra=shared.extra_args(seed, net[3].out_features))
    else:
        hidden = ckpt(block2, ckpt(block1, xt))
    loss = _loss(net[5](hidden))
    draws = [torch.randn(3).numpy().copy()]
    if mode == "mutate":
        with torch.no_grad():
            net[0].weight.mul_(0.5)
            net[0].bias.add_(0.25)
    loss.backward()
    draws.append(torch.randn(3).numpy().copy())
    grads = [None if xt.grad is None else xt.grad.numpy()] + [None if p.grad is None else p.grad.numpy()
                                                               for p in net.parameters()]
    return grads, draws


GRAD_NAMES = ["x", "0.weight", "0.bias", "3.weight", "3.bias", "5.weight", "5.bias"]


def bit_identical(got, want, what):
    for i, (g, w) in enumerate(replies.pairs(got, want, f"{what}: the list of gradients (x, then each parameter)")):
        name = GRAD_NAMES[i]
        assert g is not None, f"{what}: the gradient of {name} is missing (None)"
        g = replies.array(g, f"{what}: the gradient of {name}", shape=np.shape(w))
        if not np.array_equal(g, w):
            worst = float(np.max(np.abs(g.astype(np.float64) - w))) if g.size else 0.0
            raise AssertionError(f"{what}: the gradient of {name} is not bit-identical to the run without hooks "
                                 f"(differs by up to {worst:.3g})")


def grads_close(got, want, what, rtol=1e-5, atol=1e-7):
    """Gradients in GRAD_NAMES order; None expected where want is None."""
    for i, (g, w) in enumerate(replies.pairs(got, want, f"{what}: the list of gradients")):
        name = GRAD_NAMES[i]
        if w is None:
            assert g is None, f"{what}: {name} should get no gradient (None) here, got one"
        else:
            close(g, w, f"{what}: the gradient of {name}", rtol, atol)


# -- gates: the behaviour a delegation lacks, required by every test of a part ----------------------
_GATES: dict = {}


def gate(student, key: str, check, what: str) -> None:
    """Run `check()` once per student process and fail every test that calls this when it failed:
    a part (or function) that the lab forbids delegating is worth nothing unless it shows, on a
    case where torch's own tool answers differently, that it follows the lab's rules."""
    from autograder.engine.student import StudentError

    cached = _GATES.get(key)
    if cached is None or cached[0] is not student:
        try:
            check()
            problem = None
        except (AssertionError, StudentError) as exc:
            problem = str(exc)
        cached = _GATES[key] = (student, problem)
    if cached[1] is not None:
        raise AssertionError(f"{what} fails a required check, so this test does not count: {cached[1][:400]}")
