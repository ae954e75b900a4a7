# IPT-CANARY lab10 oracle.py: hidden grading text, never shown to learners
"""P0's own implementation of lab10's rules, written from the statement.

Two uses. (1) P0 computes the expected plans, bounds and schedules with the pure functions here.
(2) The referee rank (roles.py) runs the rank programs of scenarios.py with this module as the
implementation, so that it makes exactly the collective calls the statement describes, in its order
and sizes; the classes note what arrived from the other ranks (bucket sums, gathered
parameters, activations and gradients received) in the module's `SEEN` list, which the referee records
for P0.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

SEEN: list = []   # the referee's record: what arrived from the other ranks, in order of arrival


# ---------------------------------------------------------------- ddp
def plan_buckets(sizes, cap, first_cap=None):
    limit_first = cap if first_cap is None else first_cap
    if not (cap > 0 and limit_first > 0) or min(sizes, default=0) < 0:
        raise ValueError("bad caps or sizes")
    plan, open_bucket, filled = [], [], 0
    for index in range(len(sizes) - 1, -1, -1):
        open_bucket, filled = open_bucket + [index], filled + sizes[index]
        if filled >= (cap if plan else limit_first):
            plan, open_bucket, filled = plan + [open_bucket], [], 0
    return plan + ([open_bucket] if open_bucket else [])


class BucketedDDP(nn.Module):
    def __init__(self, module, group=None, bucket_cap=25 * 2**20, first_bucket_cap=None):
        super().__init__()
        self.module, self.group = module, group
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t, group=group, group_src=0)
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.buckets = plan_buckets([p.numel() * p.element_size() for p in self.params], bucket_cap, first_bucket_cap)
        self.depth, self.ready, self.launched, self.pending = 0, set(), [], False
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(self._hook_for(i))

    def _hook_for(self, i):
        def hook(_):
            if self.depth:
                return
            if not self.pending:
                self.pending = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end)
            self.ready.add(i)
            while len(self.launched) < len(self.buckets) and set(self.buckets[len(self.launched)]) <= self.ready:
                self._go()
        return hook

    def _go(self):
        parts = [(self.params[i].grad if self.params[i].grad is not None else torch.zeros_like(self.params[i])).flatten()
                 for i in self.buckets[len(self.launched)]]
        flat = torch.cat(parts)
        self.launched.append((flat, dist.all_reduce(flat, group=self.group, async_op=True)))

    def _end(self):
        while len(self.launched) < len(self.buckets):
            self._go()
        size = dist.get_world_size(self.group)
        for bucket, (flat, work) in zip(self.buckets, self.launched, strict=True):
            work.wait()
            SEEN.append(flat.clone())
            flat = flat / size
            at = 0
            for i in bucket:
                p = self.params[i]
                piece = flat[at:at + p.numel()].reshape(p.shape)
                at += p.numel()
                if p.grad is None:
                    p.grad = piece.clone()
                else:
                    p.grad.copy_(piece)
        self.ready, self.launched, self.pending = set(), [], False

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


# ---------------------------------------------------------------- zero
def shard_bounds(n, world):
    if world < 1 or n < 0:
        raise ValueError("bad n or world")
    c = math.ceil(n / world) if n else 0
    return [min(n, r * c) for r in range(world + 1)]


class ZeroAdamW:
    def __init__(self, params, group=None, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params, self.group = list(params), group
        self.lr, self.betas, self.eps, self.wd = lr, betas, eps, weight_decay
        self.r, self.w = dist.get_rank(group), dist.get_world_size(group)
        self.n = sum(p.numel() for p in self.params)
        self.edges = shard_bounds(self.n, self.w)
        self.c = self.edges[1]
        own = self.edges[self.r + 1] - self.edges[self.r]
        self.m = torch.zeros(own, dtype=self.params[0].dtype)
        self.v = torch.zeros(own, dtype=self.params[0].dtype)
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        dtype = self.m.dtype
        grads = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in self.params])
        padded = F.pad(grads, (0, self.c * self.w - self.n))
        mine = torch.empty(self.c, dtype=dtype)
        dist.reduce_scatter_single(mine, padded, group=self.group)
        lo, hi = self.edges[self.r], self.edges[self.r + 1]
        g = mine[:hi - lo] / self.w
        p = torch.cat([q.flatten() for q in self.params])[lo:hi].clone()
        self.t += 1
        b1, b2 = self.betas
        p.mul_(1 - self.lr * self.wd)
        self.m.lerp_(g, 1 - b1)
        self.v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (self.v.sqrt() / math.sqrt(1 - b2 ** self.t)).add_(self.eps)
        p.addcdiv_(self.m, denom, value=-self.lr / (1 - b1 ** self.t))
        full = torch.empty(self.c * self.w, dtype=dtype)
        dist.all_gather_single(full, F.pad(p, (0, self.c - (hi - lo))), group=self.group)
        SEEN.append(full[:self.n].clone())
        at = 0
        for q in self.params:
            q.copy_(full[at:at + q.numel()].reshape(q.shape))
            at += q.numel()

    def state_shard(self):
        return self.m, self.v


# ---------------------------------------------------------------- fsdp
SHIFTS: list = []   # the referee's backward shifts, one per ShardedLinear in construction order (roles.py sets them)


class ShardedLinear(nn.Module):
    """The statement's layer. At the referee, `shift` (an array of c elements, or None) is added to this rank's
    shard in the *backward* all-gather only: every rank then computes its input gradient with a layer that
    differs from forward's, which tells a backward that gathers again from one that reuses forward's layer."""

    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group, (self.o, self.i), self.has_bias = group, weight.shape, bias is not None
        self.r, self.w = dist.get_rank(group), dist.get_world_size(group)
        flat = torch.cat([weight.detach().flatten(), *([bias.detach().flatten()] if bias is not None else [])])
        self.n = flat.numel()
        edges = shard_bounds(self.n, self.w)
        self.c = edges[1]
        self.shard = nn.Parameter(F.pad(flat[edges[self.r]:edges[self.r + 1]], (0, self.c - (edges[self.r + 1] - edges[self.r]))))
        shift = SHIFTS.pop(0) if SHIFTS else None
        self.shift = None if shift is None else torch.as_tensor(shift, dtype=flat.dtype)

    def gather(self, backward):
        mine = self.shard.detach()
        if backward and self.shift is not None:
            mine = mine + self.shift
        full = torch.empty(self.c * self.w, dtype=mine.dtype)
        dist.all_gather_single(full, mine, group=self.group)
        SEEN.append(full[:self.n].clone())
        weight = full[:self.o * self.i].reshape(self.o, self.i)
        return weight, (full[self.o * self.i:self.n] if self.has_bias else None)

    def forward(self, x):
        return _Gathered.apply(x, self.shard, self)


class _Gathered(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, layer):
        weight, bias = layer.gather(backward=False)
        ctx.layer = layer
        ctx.save_for_backward(x)
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        layer, (x,) = ctx.layer, ctx.saved_tensors
        weight, _ = layer.gather(backward=True)
        g2, x2 = grad.reshape(-1, layer.o), x.reshape(-1, layer.i)
        flat = torch.cat([(g2.T @ x2).flatten(), *([g2.sum(0)] if layer.has_bias else [])])
        mine = torch.empty(layer.c, dtype=flat.dtype)
        dist.reduce_scatter_single(mine, F.pad(flat, (0, layer.c * layer.w - layer.n)), group=layer.group)
        SEEN.append(mine.clone())
        return grad @ weight, mine / layer.w, None


# ---------------------------------------------------------------- tp
class _F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        dist.all_reduce(g, group=ctx.group)
        SEEN.append(g.clone())
        return g, None


class _G(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        y = x.contiguous().clone()
        dist.all_reduce(y, group=group)
        SEEN.append(y.clone())
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None


def copy_to_tp(x, group=None):
    return _F.apply(x, group)


def reduce_from_tp(x, group=None):
    return _G.apply(x, group)


def _piece(size, world):
    if size % world:
        raise ValueError("not divisible")
    return size // world


class ColumnParallelLinear(nn.Module):
    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group = group
        k = _piece(weight.shape[0], dist.get_world_size(group))
        r = dist.get_rank(group)
        self.weight = nn.Parameter(weight.detach()[r * k:(r + 1) * k].clone())
        self.bias = nn.Parameter(bias.detach()[r * k:(r + 1) * k].clone())

    def forward(self, x):
        return F.linear(copy_to_tp(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group = group
        k = _piece(weight.shape[1], dist.get_world_size(group))
        r = dist.get_rank(group)
        self.weight = nn.Parameter(weight.detach()[:, r * k:(r + 1) * k].clone())
        self.bias = nn.Parameter(bias.detach().clone())

    def forward(self, x):
        return reduce_from_tp(F.linear(x, self.weight), self.group) + self.bias


# ---------------------------------------------------------------- pipeline
def gpipe(m, p):
    if m < 1 or p < 1:
        raise ValueError("bad m or p")
    one = [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    return [list(one) for _ in range(p)]


def one_f_one_b(m, p):
    if m < 1 or p < 1:
        raise ValueError("bad m or p")
    out = []
    for s in range(p):
        w = min(p - s - 1, m)
        order, f, b = [], 0, 0
        while f < w:
            order.append(("F", f))
            f += 1
        while f < m:
            order += [("F", f), ("B", b)]
            f, b = f + 1, b + 1
        while b < m:
            order.append(("B", b))
            b += 1
        out.append(order)
    return out


def run_stage(stage, actions, inputs, targets, loss_fn, in_shape, group=None):
    s, p = dist.get_rank(group), dist.get_world_size(group)
    m = len([a for a in actions if a[0] == "F"])
    live, losses, works = {}, {}, []
    for kind, i in actions:
        if kind == "F":
            if s:
                x = torch.empty(tuple(in_shape))
                dist.recv(x, group=group, group_src=s - 1)
                SEEN.append(x.clone())
                x.requires_grad_()
            else:
                x = inputs[i]
            y = stage(x)
            if s == p - 1:
                y = loss_fn(y, targets[i]) / m
                losses[i] = y.item()
            else:
                works.append(dist.isend(y.detach().contiguous(), group=group, group_dst=s + 1))
            live[i] = (x, y)
        else:
            x, y = live.pop(i)
            if s == p - 1:
                y.backward()
            else:
                g = torch.empty_like(y)
                dist.recv(g, group=group, group_src=s + 1)
                SEEN.append(g.clone())
                y.backward(g)
            if s:
                works.append(dist.isend(x.grad.contiguous(), group=group, group_dst=s - 1))
    for w in works:
        w.wait()
    return [losses[i] for i in sorted(losses)] if s == p - 1 else []
