# IPT-CANARY lab10 expect.py: hidden grading text, never shown to learners
"""P0's single-process oracle of each lab10 world, in float64: what every rank must end with, and what
P0's referee rank must receive from the others (in its order of arrival).

Each function takes the world's spec and per-rank arrays exactly as play() hands them out and returns a
dict of numpy values. They use torch in P0 on P0's own inputs; nothing here runs learner code.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from autograder.labs.lab10 import oracle, scenarios


def _d(a) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a, dtype=np.float64).copy())


def ddp(spec: dict, arrays: list[dict]) -> dict:
    """Params start as rank 0's; each step averages the ranks' accumulated micro-batch gradients."""
    world = len(arrays)
    net = scenarios.build_net(spec, arrays[0], probe=False).double()
    trainable = [p for p in net.parameters() if p.requires_grad]
    plan = oracle.plan_buckets([p.numel() * 4 for p in trainable], spec["cap"], spec["first_cap"])
    sums, grads = [], None
    for s, micro in enumerate(spec["steps"]):
        rows = sum(micro)
        local = []
        for r in range(world):
            for p in trainable:
                p.grad = None
            for b in range(len(micro)):
                x, y = _d(arrays[r][f"x{s}_{b}"]), _d(arrays[r][f"y{s}_{b}"])
                ((net(x) - y) ** 2).sum().div(rows).backward()
            local.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in trainable])
        total = [sum(local[r][i] for r in range(world)) for i in range(len(trainable))]
        for bucket in plan:
            sums.append(torch.cat([total[i].flatten() for i in bucket]).numpy())
        grads = [t / world for t in total]
        with torch.no_grad():
            for p, g in zip(trainable, grads, strict=True):
                p -= spec["lr"] * g
    return {"buckets": plan, "sums": sums, "grads": [g.numpy() for g in grads],
            "params": [p.detach().numpy() for p in net.parameters()], "scale": net.scale.numpy()}


def zero(spec: dict, arrays: list[dict]) -> dict:
    """torch.optim.AdamW on the average of the ranks' gradients (a missing gradient counts as zeros)."""
    world = len(arrays)
    params = [_d(arrays[0][f"init{i}"]).requires_grad_(True) for i in range(len(spec["shapes"]))]
    opt = torch.optim.AdamW(params, lr=spec["lr"], betas=tuple(spec["betas"]), eps=spec["eps"], weight_decay=spec["wd"])
    missing = {tuple(x) for x in spec["none"]}
    gathered = []
    for s in range(spec["steps"]):
        for i, p in enumerate(params):
            p.grad = sum(torch.zeros_like(p) if (s, i) in missing else _d(arrays[r][f"g{s}_{i}"]) for r in range(world)) / world
        opt.step()
        gathered.append(torch.cat([p.detach().flatten() for p in params]).numpy().copy())
    n = sum(p.numel() for p in params)
    bounds = oracle.shard_bounds(n, world)
    m = torch.cat([opt.state[p]["exp_avg"].flatten() for p in params]).numpy()
    v = torch.cat([opt.state[p]["exp_avg_sq"].flatten() for p in params]).numpy()
    return {"params": [p.detach().numpy() for p in params], "bounds": bounds, "gathered": gathered,
            "state": [[m[bounds[r]:bounds[r + 1]], v[bounds[r]:bounds[r + 1]]] for r in range(world)]}


class _Shifted(torch.autograd.Function):
    """x @ w.T + b whose input gradient uses `w_back` (the layer as gathered in backward)."""

    @staticmethod
    def forward(ctx, x, w, b, w_back):
        ctx.save_for_backward(x, w_back)
        return F.linear(x, w, b)

    @staticmethod
    def backward(ctx, grad):
        x, w_back = ctx.saved_tensors
        g2, x2 = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
        return grad @ w_back, g2.T @ x2, g2.sum(0), None


def fsdp(spec: dict, arrays: list[dict], seat: int | None = None) -> dict:
    """SGD on the average of the members' gradients of their own mean-squared losses. With a referee at
    group rank `seat`, its shard carries `shift{k}` in every backward all-gather: each input gradient is
    computed with that layer. Returns each member's shards (init and final, padded), its losses, and what
    the referee receives: per step the gathered layers (forward order), then per layer from the last
    the backward gather and its reduce-scattered slice (a SUM, not yet divided)."""
    world, layers = len(arrays), spec["layers"]
    flats = [torch.cat([_d(arrays[0][f"w{k}"]).flatten(), *([_d(arrays[0][f"b{k}"])] if b else [])])
             for k, (i, o, b) in enumerate(layers)]
    sizes = [f.numel() for f in flats]
    chunks = [-(-n // world) for n in sizes]
    shifts = []
    for k, n in enumerate(sizes):
        delta = torch.zeros(chunks[k] * world, dtype=torch.float64)
        if seat is not None:
            delta[seat * chunks[k]:(seat + 1) * chunks[k]] = _d(arrays[seat][f"shift{k}"])
        shifts.append(delta[:n])

    def shards(k):
        padded = F.pad(flats[k], (0, chunks[k] * world - sizes[k]))
        return [padded[r * chunks[k]:(r + 1) * chunks[k]].numpy().copy() for r in range(world)]

    init = [shards(k) for k in range(len(layers))]
    losses, seen = [[] for _ in range(world)], []
    for t in range(spec["steps"]):
        seen += [f.numpy().copy() for f in flats]
        params = [f.clone().requires_grad_(True) for f in flats]
        total = [torch.zeros_like(f) for f in flats]
        for r in range(world):
            h = _d(arrays[r][f"x{t}"])
            for k, (i, o, b) in enumerate(layers):
                w = params[k][:o * i].reshape(o, i)
                bias = params[k][o * i:] if b else torch.zeros(o, dtype=torch.float64)
                w_back = (flats[k] + shifts[k])[:o * i].reshape(o, i)
                h = _Shifted.apply(h, w, bias, w_back)
                if k < len(layers) - 1:
                    h = torch.tanh(h)
            loss = ((h - _d(arrays[r][f"y{t}"])) ** 2).mean()
            grads = torch.autograd.grad(loss, params)
            total = [a + g for a, g in zip(total, grads, strict=True)]
            losses[r].append(float(loss))
        for k in range(len(layers) - 1, -1, -1):
            seen.append((flats[k] + shifts[k]).numpy().copy())
            padded = F.pad(total[k], (0, chunks[k] * world - sizes[k]))
            if seat is not None:
                seen.append(padded[seat * chunks[k]:(seat + 1) * chunks[k]].numpy().copy())
        flats = [f - spec["lr"] * g / world for f, g in zip(flats, total, strict=True)]
    final = [shards(k) for k in range(len(layers))]
    return {"init": [[init[k][r] for k in range(len(layers))] for r in range(world)],
            "shards": [[final[k][r] for k in range(len(layers))] for r in range(world)],
            "losses": losses, "seen": seen, "chunks": chunks, "sizes": sizes}


def tp(spec: dict, arrays: list[dict]) -> dict:
    """f and g on their own, then the dense MLP block; the slices of each rank."""
    world = len(arrays)
    a_sum = sum(_d(arrays[r]["a"]) for r in range(world))
    cb_sum = sum(_d(arrays[r]["cb"]) for r in range(world))
    w1, b1, w2, b2 = (_d(arrays[0][k]).requires_grad_(True) for k in ("w1", "b1", "w2", "b2"))
    x = _d(arrays[0]["x"]).requires_grad_(True)
    pre = F.linear(F.gelu(F.linear(x, w1, b1)), w2)
    y = pre + b2
    (y * _d(arrays[0]["gy"])).sum().backward()
    o, i = w1.shape[0] // world, w2.shape[1] // world
    per_rank = []
    for r in range(world):
        per_rank.append({
            "g": a_sum.numpy(), "a": arrays[r]["a"], "a_grad": arrays[r]["ca"], "f": arrays[r]["b"], "b_grad": cb_sum.numpy(),
            "y": y.detach().numpy(), "x_grad": x.grad.numpy(),
            "up_w": w1.detach()[r * o:(r + 1) * o].numpy(), "up_b": b1.detach()[r * o:(r + 1) * o].numpy(),
            "up_w_grad": w1.grad[r * o:(r + 1) * o].numpy(), "up_b_grad": b1.grad[r * o:(r + 1) * o].numpy(),
            "down_w": w2.detach()[:, r * i:(r + 1) * i].numpy(), "down_b": b2.detach().numpy(),
            "down_w_grad": w2.grad[:, r * i:(r + 1) * i].numpy(), "down_b_grad": b2.grad.numpy(),
            "w1_after": arrays[r]["w1"], "w2_after": arrays[r]["w2"], "b2_after": arrays[r]["b2"]})
    seen = [a_sum.numpy(), cb_sum.numpy(), pre.detach().numpy(), x.grad.numpy()]
    return {"ranks": per_rank, "seen": seen}


def pipeline(spec: dict, arrays: list[dict]) -> dict:
    """The stages composed in one process, one micro-batch at a time; the tensors at every boundary."""
    p, m = len(spec["stages"]), spec["m"]
    stages = [scenarios.build_stage(spec, arrays[s], s).double() for s in range(p)]
    x = torch.from_numpy(arrays[0]["x"].copy()) if spec.get("vocab") else _d(arrays[0]["x"])   # token ids stay integers
    xs, ys = x.chunk(m), _d(arrays[p - 1]["y"]).chunk(m)
    acts = [[None] * m for _ in range(p)]     # acts[s][i]: stage s's input for micro-batch i
    outgrads = [[None] * m for _ in range(p)]  # outgrads[s][i]: gradient of stage s's output
    losses = []
    for i in range(m):
        h = xs[i]
        for s in range(p):
            if s > 0:
                h.retain_grad()   # stage s's input is stage s - 1's output: one graph through every stage
            acts[s][i] = h
            h = stages[s](h)
        loss = F.mse_loss(h, ys[i]) / m
        losses.append(float(loss))
        loss.backward()
        for s in range(p - 1):   # the gradient stage s + 1 sends back is its input's
            outgrads[s][i] = acts[s + 1][i].grad.detach().numpy().copy()
    ranks = []
    for s in range(p):
        seen = []
        for kind, i in spec["schedule"][s]:
            if kind == "F" and s > 0:
                seen.append(acts[s][i].detach().numpy())
            if kind == "B" and s < p - 1:
                seen.append(outgrads[s][i])
        ranks.append({"grads": [q.grad.numpy() for q in stages[s].parameters()], "seen": seen,
                      "losses": losses if s == p - 1 else []})
    return {"ranks": ranks}
