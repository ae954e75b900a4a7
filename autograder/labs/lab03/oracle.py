"""Trusted-side (P0) oracles of lab03: real PyTorch, computed here, never in the student process.

Shared definitions (the gradcheck battery, the forward-AD test functions, the model builders) come
from the lab's scenario module, which is trusted code: P0 imports it, P1 receives it as text.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from autograder.labs.lab03 import scenarios as shared

TOL = dict(rtol=1e-9, atol=1e-10)  # float64 comparisons of analytic results


def arrays(seed: int, *shapes, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def close(got, want, what: str, rtol=1e-7, atol=1e-9) -> None:
    assert got is not None, f"{what}: got nothing (None)"
    got, want = np.asarray(got), np.asarray(want)
    if want.shape == () and got.shape == (1,):
        got = got.reshape(())  # 0-d arrays cross the boundary as shape (1,)
    assert got.shape == want.shape, f"{what}: expected shape {list(want.shape)}, got {list(got.shape)}"
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        worst = float(np.max(np.abs(got - want)))
        raise AssertionError(f"{what}: values differ from PyTorch's by up to {worst:.3g}")


def no_error(result, what: str) -> dict:
    assert isinstance(result, dict) and "error" not in result, f"{what} raised {result.get('error')}: {result.get('message')}"
    return result


# -- custom_function / double_backward --------------------------------------------------------
def linear_tanh(x, w, b, gout, requires=(True, True, True)):
    xt = torch.tensor(x, requires_grad=requires[0])
    wt = torch.tensor(w, requires_grad=requires[1])
    bt = None if b is None else torch.tensor(b, requires_grad=requires[2])
    y = torch.tanh(F.linear(xt, wt, bt))
    y.backward(torch.tensor(gout))
    return y.detach().numpy(), [None if t is None or t.grad is None else t.grad.numpy() for t in (xt, wt, bt)]


def scaled_swish(x, beta, gout, vx, vb):
    xt, bt = torch.tensor(x, requires_grad=True), torch.tensor(beta, dtype=torch.float64, requires_grad=True)
    y = xt * torch.sigmoid(bt * xt)
    gx, gb = torch.autograd.grad(y, (xt, bt), torch.tensor(gout), create_graph=True)
    hx, hb = torch.autograd.grad((gx * torch.tensor(vx)).sum() + gb * torch.tensor(vb, dtype=torch.float64), (xt, bt))
    return {"out": y.detach().numpy(), "gx": gx.detach().numpy(), "gb": gb.detach().numpy(),
            "hx": hx.numpy(), "hb": hb.numpy()}


# -- my_gradcheck ---------------------------------------------------------------------------------
def torch_verdict(name, seed, n, tolerances=None) -> bool:
    fn_class = shared.BATTERY[name][0]
    inputs = shared.battery_inputs(name, seed, n)
    return bool(torch.autograd.gradcheck(fn_class.apply, inputs, raise_exception=False, **(tolerances or {})))


def true_jacobians(name, seed, n):
    """The exact Jacobians of the battery entry's forward formula (plain torch ops, no Function)."""
    fn_class = shared.BATTERY[name][0]
    inputs = shared.battery_inputs(name, seed, n)
    diff = [i for i, t in enumerate(inputs) if t.requires_grad]
    out_numel = fn_class.forward(*inputs).numel()
    full = torch.autograd.functional.jacobian(lambda *a: fn_class.forward(*a), tuple(t.detach() for t in inputs))
    return [full[i].reshape(out_numel, inputs[i].numel()).numpy() for i in diff]


def backward_jacobians(name, seed, n):
    """The Jacobians that the battery Function's own backward implies (right or wrong), row by row."""
    fn_class = shared.BATTERY[name][0]
    inputs = shared.battery_inputs(name, seed, n)
    diff = [t for t in inputs if t.requires_grad]
    out = fn_class.apply(*inputs)
    rows = [[] for _ in diff]
    for k in range(out.numel()):
        e = torch.zeros(out.numel(), dtype=out.dtype)
        e[k] = 1
        grads = torch.autograd.grad(out, diff, e.view_as(out), retain_graph=True, allow_unused=True)
        for row, g, t in zip(rows, grads, diff):
            row.append(torch.zeros(t.numel(), dtype=out.dtype) if g is None else g.reshape(-1))
    return [torch.stack(r).numpy() for r in rows]


# -- forward_ad -------------------------------------------------------------------------------------
def jvp(name, primals, tangents):
    nargs, f = shared.JVP_FUNCS[name]
    ps = tuple(torch.tensor(p) for p in primals[:nargs])
    ts = tuple(torch.tensor(t) for t in tangents[:nargs])
    out, tangent = torch.func.jvp(f, ps, ts)
    return out.numpy(), tangent.numpy()


def hvp(name, x, v):
    f = shared.HVP_FUNCS[name]
    hessian = torch.autograd.functional.hessian(f, torch.tensor(x))
    return (hessian.reshape(len(x), len(x)) @ torch.tensor(v)).numpy()


# -- per_sample_grads / ensembling ---------------------------------------------------------------
def mlp_params(seed, d, h, c, scale=0.5):
    w0, b0, w2, b2 = arrays(seed, (h, d), (h,), (c, h), (c,), dtype=np.float32)
    return {"0.weight": w0 * scale, "0.bias": b0 * scale, "2.weight": w2 * scale, "2.bias": b2 * scale}


def per_sample_grads(params, x, y):
    model = shared.mlp(params)
    names = [n for n, _ in model.named_parameters()]
    xt, yt = torch.tensor(x), torch.tensor(y)
    per = {n: [] for n in names}
    for b in range(len(x)):
        loss = F.cross_entropy(model(xt[b:b + 1]), yt[b:b + 1])
        for n, g in zip(names, torch.autograd.grad(loss, tuple(model.parameters()))):
            per[n].append(g)
    return {n: torch.stack(g).numpy() for n, g in per.items()}


def ensemble(params_list, x, same_input=True):
    xt = torch.tensor(x)
    with torch.no_grad():
        return np.stack([shared.mlp(p)(xt if same_input else xt[m]).numpy() for m, p in enumerate(params_list)])


# -- saved_tensor_hooks ----------------------------------------------------------------------------
def hooks_params(seed, d, h, c):
    w0, b0, w3, b3, w5, b5 = arrays(seed, (h, d), (h,), (h, h), (h,), (c, h), (c,), dtype=np.float32)
    s0, s3 = 1 / np.sqrt(d), 1 / np.sqrt(h)
    return {"0.weight": w0 * s0, "0.bias": b0 * s0, "3.weight": w3 * s3, "3.bias": b3 * s3,
            "5.weight": w5 * s3, "5.bias": b5 * s3}


def hooks_grads(params, x, seed, p_drop):
    net = shared.hooks_net(params, p_drop)
    xt = torch.tensor(x, requires_grad=True)
    torch.manual_seed(seed)
    out = net(xt)
    (out * out).mean().backward()
    return [xt.grad.numpy()] + [p.grad.numpy() for p in net.parameters()]


GRAD_NAMES = ["x", "0.weight", "0.bias", "3.weight", "3.bias", "5.weight", "5.bias"]


def bit_identical(got, want, what):
    assert isinstance(got, list) and len(got) == len(want), f"{what}: expected {len(want)} gradients, got {got!r:.100}"
    for name, g, w in zip(GRAD_NAMES, got, want):
        assert g is not None, f"{what}: the gradient of {name} is missing (None)"
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what}: the gradient of {name} has shape {list(g.shape)}, expected {list(w.shape)}"
        if not np.array_equal(g, w):
            worst = float(np.max(np.abs(g - w)))
            raise AssertionError(f"{what}: the gradient of {name} is not bit-identical to the run without hooks "
                                 f"(differs by up to {worst:.3g})")

# IPT-CANARY lab03 oracle.py: hidden grading text, never shown to learners
