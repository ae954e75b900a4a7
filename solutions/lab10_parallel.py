# ---
# jupyter:
#   inside_pytorch:
#     lab: lab10
#     title: Parallel training
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
# # Lab 10 — Parallel training
#
# In lab 9 you built the collectives. Here you put `torch.distributed`'s own collectives to work in
# the ways large models are trained on many processes:
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `ddp` | data parallelism: gradient buckets planned like DDP's Reducer, all-reduced from gradient hooks while backward runs, and `no_sync` for gradient accumulation | 25 | 3 |
# | `zero` | ZeRO-1: AdamW whose state lives in shards, one per rank; gradients reduce-scattered, parameters all-gathered | 15 | 2 |
# | `fsdp` | FSDP-style sharding: each rank stores a shard of every layer, gathers the layer to compute with it (forward and again in backward), reduce-scatters its gradient | 20 | 2 |
# | `tp` | Megatron tensor parallelism: the conjugate functions *f* and *g*, column- and row-parallel linears | 20 | 2 |
# | `pipeline` | pipeline parallelism: GPipe and 1F1B schedules as action lists, and a stage that runs one over point-to-point messages | 20 | 3 |
#
# The hours are a rough guide for a learner who has worked through lectures 8.2 and 8.3: about 12 in all.
#
# Everything runs on your CPU: `run_world(fn, W, inputs)` (from lab 9) starts $W$ gloo ranks, runs
# `fn(*inputs[r])` on rank $r$ and returns what each rank returned as numpy arrays. Your code never
# starts processes: it takes a `group` (`None`: all ranks) and runs on every rank of it, so it works
# unchanged under `torchrun`, across machines.
#
# **How the graders see your code.** They compare what your ranks return with a single-process run of
# the same model on the same data. And they take part: one rank of every graded world is theirs,
# running the lab's own implementation of the same part. It makes exactly the collective calls the
# rules below describe, in the order they describe, with the sizes they describe. A rank of yours that
# makes another call (one all-reduce per parameter instead of per bucket, say) waits for a peer that
# never comes, and the case fails on its timeout (a few seconds). So each rule about *which*
# collective, *when* and *how big* is graded, exactly as written.
#
# Ground rules for all parts: collectives of `torch.distributed` only (`broadcast`, `all_reduce`,
# `reduce_scatter_single`, `all_gather_single`, `isend`, `recv`), always with `group=group`; no
# object collectives, no store, no new groups. Ranks and peers are **group ranks**
# (`dist.get_rank(group)`, `group_src=` / `group_dst=` / `group_src=` in `broadcast`).

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
import time

import numpy as np

from labkit import check
from labkit.world import run_world

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import contextlib
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

# %% [markdown] nbgrader={"grade": false, "grade_id": "ddp-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — DDP: buckets, hooks and `no_sync` (25 points)
#
# Each rank holds a full copy of the model and its own slice of the batch. After `backward`, every
# gradient must become the **average** over the ranks, so that every copy takes the same step. One
# all-reduce per parameter would pay the latency α hundreds of times; one all-reduce for everything
# would wait for the whole backward. `DistributedDataParallel`'s Reducer does neither: it packs
# gradients into **buckets** of about 25 MiB and all-reduces a bucket as soon as its last gradient is
# ready, *while backward is still computing the earlier layers' gradients*.
#
# **`plan_buckets(sizes, cap, first_cap=None)`**. `sizes[i]` is the size in bytes of trainable
# parameter `i`, in registration order (`module.parameters()`). Backward produces gradients roughly
# in reverse registration order, so buckets are filled that way:
#
# 1. walk the indices from last to first, appending each to the open bucket;
# 2. after appending, close the bucket if its total reaches its cap (`>=`); the **first** bucket's cap
#    is `first_cap` (`None`: `cap`), every later bucket's is `cap` (DDP's first bucket is small, 1 MiB,
#    so that the first all-reduce starts early);
# 3. at the end a non-empty open bucket is the last one.
#
# Return the buckets in the order they were closed, each a list of indices in the order appended. A
# parameter larger than the cap gets a bucket of its own. `ValueError` if `cap` or `first_cap` is not
# positive or a size is negative. For sizes `[4, 4, 4, 4]` and cap 8: `[[3, 2], [1, 0]]`.
#
# **`BucketedDDP(module, group=None, bucket_cap=25 * 2**20, first_bucket_cap=None)`** wraps a module:
#
# 1. **Construction.** Make every rank start from group rank 0's state: `dist.broadcast` every
#    parameter (frozen ones too) in `module.parameters()` order, then every buffer in
#    `module.buffers()` order, one call each, from group rank 0 (in place, under `torch.no_grad()`).
#    Then plan the buckets over the *trainable* parameters (`requires_grad`), with their sizes in
#    bytes (`numel * element_size`); keep the plan as `self.buckets` (lists of indices into
#    `[p for p in module.parameters() if p.requires_grad]`). All trainable parameters share one dtype
#    (`ValueError` otherwise: a bucket is one flat tensor). Register a
#    `register_post_accumulate_grad_hook` on each trainable parameter: it fires when the parameter's
#    `.grad` has been accumulated.
# 2. **`forward(*args, **kwargs)`** calls the module.
# 3. **The hook** (outside `no_sync`): the parameter is ready. At the first hook of a backward,
#    queue `finish` to run when the backward ends:
#    `torch.autograd.Variable._execution_engine.queue_callback(self._finish)`. Then launch every bucket
#    whose parameters are all ready, **strictly in bucket order**: bucket $k$ never goes before bucket
#    $k-1$, even if its gradients are ready first (every rank must make the same calls in the same
#    order). Launching bucket $k$: one flat tensor, the `.grad`s of its parameters flattened and
#    concatenated in the bucket's order, and `dist.all_reduce(flat, group=group, async_op=True)`.
# 4. **`_finish`** (end of backward): launch, in order, the buckets not launched yet (a parameter whose
#    hook did not fire — it took no part in this forward — contributes zeros); wait for every bucket;
#    divide each bucket's sum by the group size and write the averages back into the parameters'
#    `.grad` (creating a `.grad` where there was none). Then forget this backward's state.
# 5. **`no_sync()`**, a context manager: backward inside it communicates nothing, and gradients
#    simply accumulate in `.grad`. The first backward after it all-reduces the accumulated gradients
#    (gradient accumulation over several micro-batches costs one all-reduce). It nests: communication
#    resumes when the outermost `no_sync` exits.
#
# Nothing is communicated in a backward where no hook fires. The graders compare your parameters
# after a few optimizer steps with one process training on the whole batch, and their rank checks
# that every all-reduce has the bucket it expects, in the order it expects. They can also tell *when*
# you launch: one of their models has a layer whose backward makes a collective of its own (as a
# tensor-parallel layer inside DDP would), so a bucket that is ready before that layer's backward
# must already be on its way; a DDP that waits for `_finish` calls the two in the other order.
# Launching from the hooks is what lets communication overlap the rest of backward, which the cell
# below lets you watch.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ddp-solution", "locked": false, "schema_version": 3, "solution": true}
def plan_buckets(sizes, cap, first_cap=None):
    """Bucket indices of parameters (sizes in bytes, registration order), filled in reverse order."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab10 ddp-solution
    first_cap = cap if first_cap is None else first_cap
    if cap <= 0 or first_cap <= 0:
        raise ValueError(f"bucket caps must be positive, got cap={cap!r}, first_cap={first_cap!r}")
    if any(size < 0 for size in sizes):
        raise ValueError("parameter sizes cannot be negative")
    buckets, current, total = [], [], 0
    for index in reversed(range(len(sizes))):
        current.append(index)
        total += sizes[index]
        if total >= (first_cap if not buckets else cap):
            buckets.append(current)
            current, total = [], 0
    if current:
        buckets.append(current)
    return buckets
    ### END SOLUTION


class BucketedDDP(nn.Module):
    """Data parallelism with DDP's buckets: gradients averaged over the group during backward."""

    def __init__(self, module, group=None, bucket_cap=25 * 2**20, first_bucket_cap=None):
        super().__init__()
        self.module, self.group = module, group
        ### BEGIN SOLUTION
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor, group=group, group_src=0)
        self.params = [p for p in module.parameters() if p.requires_grad]
        if len({p.dtype for p in self.params}) > 1:
            raise ValueError("all trainable parameters must share one dtype")
        sizes = [p.numel() * p.element_size() for p in self.params]
        self.buckets = plan_buckets(sizes, bucket_cap, first_bucket_cap)
        self._sync_depth = 0
        self._reset()
        for index, param in enumerate(self.params):
            param.register_post_accumulate_grad_hook(lambda p, i=index: self._hook(i))
        ### END SOLUTION

    ### BEGIN SOLUTION
    def _reset(self):
        self._ready = set()
        self._works = []          # (flat, work) per launched bucket, in bucket order
        self._queued = False

    def _hook(self, index):
        if self._sync_depth:
            return
        if not self._queued:
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
        self._ready.add(index)
        while len(self._works) < len(self.buckets) and all(i in self._ready for i in self.buckets[len(self._works)]):
            self._launch(len(self._works))

    def _launch(self, k):
        grads = [self.params[i].grad if self.params[i].grad is not None else torch.zeros_like(self.params[i])
                 for i in self.buckets[k]]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self._works.append((flat, dist.all_reduce(flat, group=self.group, async_op=True)))

    def _finish(self):
        while len(self._works) < len(self.buckets):
            self._launch(len(self._works))
        world = dist.get_world_size(self.group)
        for k, (flat, work) in enumerate(self._works):
            work.wait()
            flat /= world
            offset = 0
            for i in self.buckets[k]:
                param = self.params[i]
                value = flat[offset:offset + param.numel()].view_as(param)
                offset += param.numel()
                if param.grad is None:
                    param.grad = value.clone()
                else:
                    param.grad.copy_(value)
        self._reset()
    ### END SOLUTION

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside communicates nothing; gradients accumulate locally."""
        ### BEGIN SOLUTION
        self._sync_depth += 1
        try:
            yield
        finally:
            self._sync_depth -= 1
        ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "ddp-explore-md", "locked": true, "schema_version": 3, "solution": false}
# Predict first: a model with layers of 4 KiB, 64 KiB, 4 KiB and 1 MiB of parameters (in that
# order), a cap of 64 KiB and a first cap of 8 KiB. How many buckets, and which parameters go first?
# Then check, and watch the graded property: two ranks with different halves of a batch end with the
# same gradients as one process with the whole batch.

# %% nbgrader={"grade": false, "grade_id": "ddp-explore", "locked": false, "schema_version": 3, "solution": false}
print(plan_buckets([4096, 65536, 4096, 2**20], 65536, 8192))


def ddp_vs_one(x, y):
    torch.manual_seed(0)
    model = BucketedDDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), bucket_cap=64)
    F.mse_loss(model(x), y).backward()
    return [p.grad for p in model.parameters()]


data = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)
halves = [[data[:4, :4], data[:4, 4:]], [data[4:, :4], data[4:, 4:]]]
ranks = run_world(ddp_vs_one, 2, halves)
torch.manual_seed(0)
one = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
F.mse_loss(one(torch.from_numpy(data[:, :4])), torch.from_numpy(data[:, 4:])).backward()
print("largest difference to one process:",
      max(float(np.abs(g - p.grad.numpy()).max()) for g, p in zip(ranks[0], one.parameters())))

# %% [markdown] nbgrader={"grade": false, "grade_id": "ddp-overlap-md", "locked": true, "schema_version": 3, "solution": false}
# **Overlap.** Predict first: in a stack of eight 256×256 linears with buckets of two layers each,
# how long before `backward()` returns does the first bucket's all-reduce start? The cell logs when
# each `dist.all_reduce` call is made, in milliseconds after the forward began.

# %% nbgrader={"grade": false, "grade_id": "ddp-overlap", "locked": false, "schema_version": 3, "solution": false}
def watch_overlap(x):
    torch.manual_seed(0)
    model = BucketedDDP(nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]), bucket_cap=2 * (256 * 256 + 256) * 4)
    launched, real = [], dist.all_reduce

    def logged(tensor, *args, **kwargs):
        launched.append(time.perf_counter())
        return real(tensor, *args, **kwargs)

    dist.all_reduce = logged
    try:
        start = time.perf_counter()
        model(x).square().sum().backward()
        end = time.perf_counter()
    finally:
        dist.all_reduce = real
    return [torch.tensor([(t - start) * 1e3 for t in launched]), torch.tensor((end - start) * 1e3)]


batch = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
(launches, total), _ = run_world(watch_overlap, 2, [[batch], [batch]])
print("all-reduces launched at (ms):", np.round(launches, 1), " backward returned at:", round(float(total), 1))

# %% nbgrader={"grade": true, "grade_id": "ddp", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="DDP: buckets, hooks and no_sync"
check("ddp")

# %% [markdown] nbgrader={"grade": false, "grade_id": "zero-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — ZeRO-1: sharded AdamW (15 points)
#
# AdamW keeps two tensors per parameter (`exp_avg`, `exp_avg_sq`): in fp32 that is twice the model
# again, on every rank. ZeRO stage 1 keeps each rank's share only. Think of all trainable parameters
# as one flat vector of $n$ elements (`module.parameters()` order, each flattened); rank $r$ owns
# the slice `bounds[r]:bounds[r + 1]`.
#
# **`shard_bounds(n, world)`**: every shard has $c = \lceil n / W \rceil$ elements, except that shards
# stop at $n$: `[min(r * c, n) for r in range(world + 1)]`. (Equal shards let the collectives work on
# a flat tensor padded to $W \cdot c$ elements.) `ValueError` unless `world >= 1` and `n >= 0`.
#
# **`ZeroAdamW(params, group=None, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)`**
# (`params`: a list of tensors, one dtype) with:
#
# * `zero_grad()`: every `.grad` to `None`.
# * `step()`: the gradients are still each rank's own (no DDP around it). (1) Flatten them (`None`
#   counts as zeros) into one tensor padded with zeros to $W \cdot c$ elements; (2)
#   `dist.reduce_scatter_single(shard, flat, group=group)` (SUM) gives this rank its $c$ elements of
#   the sum; divide by $W$: the average gradient of your slice; (3) one AdamW step on your slice of the
#   parameters, exactly as `torch.optim.AdamW` computes it (below); (4) pad your updated slice to $c$
#   elements and `dist.all_gather_single(full, slice, group=group)`; the first $n$ elements of `full`
#   are the new parameters: write them into `params` in place.
# * `state_shard()`: `(exp_avg, exp_avg_sq)` of your slice, each `bounds[r + 1] - bounds[r]` elements
#   (zeros before the first step).
#
# AdamW at step $t$ (counting from 1) for parameter slice $p$, gradient $g$:
# $p \leftarrow p\,(1 - \text{lr}\cdot\text{wd})$; $m \leftarrow \beta_1 m + (1-\beta_1) g$;
# $v \leftarrow \beta_2 v + (1-\beta_2) g^2$; $p \leftarrow p - \frac{\text{lr}}{1-\beta_1^t}\cdot
# \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}$.
#
# The graders train with your optimizer and compare the parameters and your state shard with
# `torch.optim.AdamW` on the averaged gradients in one process. (One thing they cannot see: how much
# state you *keep*. gloo even implements reduce-scatter as an all-reduce of the whole tensor, so a
# rank that all-reduces the same padded flat tensor, runs a full AdamW and all-gathers its slice
# looks the same on the wire. Keeping only your slice is the whole point of ZeRO: with NCCL a
# reduce-scatter moves half the bytes of an all-reduce, and the state is $1/W$ of the memory.)

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "zero-solution", "locked": false, "schema_version": 3, "solution": true}
def shard_bounds(n, world):
    """Offsets of the W shards of a flat vector of n elements: ceil(n / W) each, cut at n."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab10 zero-solution
    if world < 1 or n < 0:
        raise ValueError(f"need world >= 1 and n >= 0, got n={n!r}, world={world!r}")
    chunk = -(-n // world)
    return [min(r * chunk, n) for r in range(world + 1)]
    ### END SOLUTION


class ZeroAdamW:
    """AdamW with its state sharded over the group (ZeRO stage 1)."""

    def __init__(self, params, group=None, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        self.params, self.group = list(params), group
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        ### BEGIN SOLUTION
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        self.n = sum(p.numel() for p in self.params)
        self.bounds = shard_bounds(self.n, self.world)
        self.chunk = self.bounds[1] - self.bounds[0] if self.world else 0
        mine = self.bounds[self.rank + 1] - self.bounds[self.rank]
        dtype = self.params[0].dtype if self.params else torch.float32
        self.exp_avg = torch.zeros(mine, dtype=dtype)
        self.exp_avg_sq = torch.zeros(mine, dtype=dtype)
        self.t = 0
        ### END SOLUTION

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        ### BEGIN SOLUTION
        size = self.chunk * self.world
        dtype = self.exp_avg.dtype
        flat = torch.zeros(size, dtype=dtype)
        offset = 0
        for p in self.params:
            if p.grad is not None:
                flat[offset:offset + p.numel()] = p.grad.reshape(-1)
            offset += p.numel()
        shard = torch.empty(self.chunk, dtype=dtype)
        dist.reduce_scatter_single(shard, flat, group=self.group)
        lo, hi = self.bounds[self.rank], self.bounds[self.rank + 1]
        grad = shard[:hi - lo] / self.world
        param = torch.cat([p.reshape(-1) for p in self.params])[lo:hi] if self.params else torch.zeros(0, dtype=dtype)
        self.t += 1
        beta1, beta2 = self.betas
        param.mul_(1 - self.lr * self.weight_decay)
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = self.lr / (1 - beta1 ** self.t)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** self.t)).add_(self.eps)
        param.addcdiv_(self.exp_avg, denom, value=-step_size)
        mine = torch.zeros(self.chunk, dtype=dtype)
        mine[:hi - lo] = param
        full = torch.empty(size, dtype=dtype)
        dist.all_gather_single(full, mine, group=self.group)
        offset = 0
        for p in self.params:
            p.copy_(full[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        ### END SOLUTION

    def state_shard(self):
        """(exp_avg, exp_avg_sq) of this rank's slice."""
        ### BEGIN SOLUTION
        return self.exp_avg, self.exp_avg_sq
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "zero-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: 10 elements on 4 ranks. How many elements does each rank own, and how much padding
# do the collectives carry? And how many bytes of AdamW state does each rank keep for a 7B model in
# fp32 on 64 ranks, against 56 GB unsharded?
print(shard_bounds(10, 4))

# %% nbgrader={"grade": true, "grade_id": "zero", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="ZeRO-1: sharded AdamW"
check("zero")

# %% [markdown] nbgrader={"grade": false, "grade_id": "fsdp-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — FSDP-style sharding: parameters in shards (20 points)
#
# ZeRO-1 shards the optimizer's state; the parameters themselves stay whole on every rank. Fully
# sharded data parallelism (ZeRO-3; PyTorch's FSDP, today `fully_shard`) shards them too: each rank
# *stores* $1/W$ of every layer and gathers the whole layer only for the moment it computes with it.
#
# **`ShardedLinear(weight, bias, group=None)`**: `weight` `(o, i)` and `bias` `(o,)` or `None` are
# the full tensors (every rank gets the same). Flatten them into one vector (the weight row by row,
# then the bias: $n$ elements); with `bounds = shard_bounds(n, W)` and $c = \lceil n / W \rceil$, rank
# $r$ keeps elements `bounds[r]:bounds[r + 1]`, padded with zeros to $c$ elements, as its only
# parameter `self.shard` (an `nn.Parameter`, a copy: training it must not touch `weight`). Keep no
# full copy of the layer.
#
# `forward(x)` (`x` of shape `(..., i)`) runs one `torch.autograd.Function` of yours:
#
# * **forward**: `dist.all_gather_single(full, shard, group=group)` into a tensor of $W \cdot c$
#   elements; its first $n$ elements are the weight and bias; return `x @ weight.T + bias` (what
#   `F.linear` computes).
#   Save `x` and the shard for backward, **not** the gathered layer: it is freed when forward returns.
# * **backward**: gather the layer **again** (the same call), then the input's gradient
#   `grad @ weight`, the weight's `grad.T @ x` and the bias's `grad` summed over every leading
#   dimension. Gathering twice is FSDP2's `reshard_after_forward=True` (its default for every module
#   but the root): the layer's memory is free between forward and backward, for the price of a second
#   all-gather. Here the rule holds even where the input needs no gradient: always gather again. Flatten the weight's and
#   bias's gradients as in the constructor, pad to $W \cdot c$ elements and
#   `dist.reduce_scatter_single(out, flat, group=group)` (SUM) into $c$ elements; divided by $W$ they
#   are the shard's gradient: the average over the ranks, as in DDP.
#
# Per layer and step that is: forward one all-gather; backward one all-gather, then one
# reduce-scatter. An optimizer then updates `shard` on each rank without any communication.
#
# The graders train a small network of your layers for a few steps (plain SGD on each rank's shards)
# and compare every rank's shards with one process training the whole network on the averaged
# gradients. Their own rank plays by these rules too, and it checks that your backward computes with
# the layer it gathers *in backward* (a layer kept from forward gives other gradients). What nobody
# sees from outside is your memory (measure it below), and, as in Part 2, gloo's reduce-scatter is an
# all-reduce on the wire: use `reduce_scatter_single` all the same, which moves half the bytes with NCCL.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "fsdp-solution", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# IPT-CANARY lab10 fsdp-solution
def _gather_layer(module):
    full = torch.empty(module.chunk * module.world, dtype=module.shard.dtype)
    dist.all_gather_single(full, module.shard.detach(), group=module.group)
    cut = module.out_features * module.in_features
    weight = full[:cut].view(module.out_features, module.in_features)
    bias = full[cut:module.numel] if module.has_bias else None
    return weight, bias


class _GatheredLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shard, module):
        weight, bias = _gather_layer(module)
        ctx.save_for_backward(x)
        ctx.module = module
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        module = ctx.module
        weight, _ = _gather_layer(module)
        grad_x = grad @ weight
        rows, xs = grad.reshape(-1, module.out_features), x.reshape(-1, module.in_features)
        parts = [(rows.T @ xs).reshape(-1)]
        if module.has_bias:
            parts.append(rows.sum(0))
        flat = torch.zeros(module.chunk * module.world, dtype=grad.dtype)
        flat[:module.numel] = torch.cat(parts)
        out = torch.empty(module.chunk, dtype=grad.dtype)
        dist.reduce_scatter_single(out, flat, group=module.group)
        return grad_x, out / module.world, None
### END SOLUTION


class ShardedLinear(nn.Module):
    """A Linear layer stored as one shard per rank, gathered whole only while it computes."""

    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group = group
        self.out_features, self.in_features = weight.shape
        self.has_bias = bias is not None
        ### BEGIN SOLUTION
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        flat = torch.cat([weight.detach().reshape(-1)] + ([bias.detach().reshape(-1)] if self.has_bias else []))
        self.numel = flat.numel()
        bounds = shard_bounds(self.numel, self.world)
        self.chunk = bounds[1] - bounds[0]
        lo, hi = bounds[self.rank], bounds[self.rank + 1]
        shard = torch.zeros(self.chunk, dtype=flat.dtype)
        shard[:hi - lo] = flat[lo:hi]
        self.shard = nn.Parameter(shard)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return _GatheredLinear.apply(x, self.shard, self)
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "fsdp-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: a layer of 1000 x 1000 weights and a bias, on 4 ranks. How many elements does each
# rank store, and how many does it hold at most while a forward runs? Then measure it: the bytes of
# parameters each rank stores, against a plain nn.Linear.
def stored_bytes(world):
    def program(w, b):
        layer = ShardedLinear(torch.from_numpy(w), torch.from_numpy(b))
        return np.array([sum(p.numel() * p.element_size() for p in layer.parameters())])
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((1000, 1000)).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    return [int(r[0]) for r in run_world(program, world, [[w, b]] * world)]

print("nn.Linear stores", (1000 * 1000 + 1000) * 4, "bytes; ShardedLinear on 4 ranks:", stored_bytes(4))

# %% nbgrader={"grade": true, "grade_id": "fsdp", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="FSDP-style sharding: gather, compute, reduce-scatter"
check("fsdp")

# %% [markdown] nbgrader={"grade": false, "grade_id": "tp-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Tensor parallelism (20 points)
#
# Megatron splits each MLP of a transformer over $W$ ranks. The first linear is **column-parallel**:
# rank $r$ keeps rows `r*o/W:(r+1)*o/W` of its weight `(o, i)` (output features; its bias slice too)
# and computes its slice of the hidden activations from the full input. The activation (GELU) is
# element-wise, so it runs on the slices. The second linear is **row-parallel**: rank $r$ keeps
# columns `r*i/W:(r+1)*i/W` of its weight (input features) and multiplies its hidden slice; the
# partial outputs are **summed** over the ranks, then the bias (kept whole on every rank) is added.
#
# Two autograd functions make the backward right (Megatron's *f* and *g*, each the other's conjugate):
#
# * **`copy_to_tp(x, group=None)`** (*f*): forward returns `x`'s values unchanged (a new tensor, e.g.
#   `x.view_as(x)`; never `x` itself, never modified); backward **all-reduces** the incoming gradient
#   (every rank's slice contributes to the input's gradient). It stands before the column-parallel
#   linear.
# * **`reduce_from_tp(x, group=None)`** (*g*): forward returns the **all-reduced** sum of `x` (without
#   changing `x`); backward passes the gradient through unchanged. It ends the row-parallel linear.
#
# Both as `torch.autograd.Function`s, one `dist.all_reduce` (SUM) each where stated, none elsewhere.
#
# * **`ColumnParallelLinear(weight, bias, group=None)`**: `weight` `(o, i)` and `bias` `(o,)` are the
#   full tensors (every rank gets the same); keep your slices as `nn.Parameter`s `self.weight`,
#   `self.bias` (copies: training them must not touch the full tensors). `forward(x)` =
#   `F.linear(copy_to_tp(x), self.weight, self.bias)`.
# * **`RowParallelLinear(weight, bias, group=None)`**: keep the column slice `self.weight` `(o, i/W)`
#   and the whole bias `self.bias`; `forward(x)` = `reduce_from_tp(F.linear(x, self.weight)) + self.bias`.
#
# `ValueError` if the split dimension is not divisible by the group size. The graders check the
# forward output, the input's gradient and every parameter slice's gradient against the dense block.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "tp-solution", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# IPT-CANARY lab10 tp-solution
class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _split(size, world, what):
    if size % world:
        raise ValueError(f"{what} ({size}) is not divisible by the group size ({world})")
    return size // world
### END SOLUTION


def copy_to_tp(x, group=None):
    """f: identity forward, all-reduce of the gradient backward."""
    ### BEGIN SOLUTION
    return _CopyToTP.apply(x, group)
    ### END SOLUTION


def reduce_from_tp(x, group=None):
    """g: all-reduce forward, identity backward."""
    ### BEGIN SOLUTION
    return _ReduceFromTP.apply(x, group)
    ### END SOLUTION


class ColumnParallelLinear(nn.Module):
    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group = group
        ### BEGIN SOLUTION
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        rows = _split(weight.shape[0], world, "the output features")
        self.weight = nn.Parameter(weight.detach()[rank * rows:(rank + 1) * rows].clone())
        self.bias = nn.Parameter(bias.detach()[rank * rows:(rank + 1) * rows].clone())
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return F.linear(copy_to_tp(x, self.group), self.weight, self.bias)
        ### END SOLUTION


class RowParallelLinear(nn.Module):
    def __init__(self, weight, bias, group=None):
        super().__init__()
        self.group = group
        ### BEGIN SOLUTION
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        cols = _split(weight.shape[1], world, "the input features")
        self.weight = nn.Parameter(weight.detach()[:, rank * cols:(rank + 1) * cols].clone())
        self.bias = nn.Parameter(bias.detach().clone())
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return reduce_from_tp(F.linear(x, self.weight), self.group) + self.bias
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "tp-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: in one forward and backward of the tensor-parallel MLP, how many all-reduces run,
# and of which shapes? Which would you lose if f's backward forgot to all-reduce, and what would go
# wrong: the weights' gradients, the input's, or both?
def tp_mlp(x, w1, b1, w2, b2):
    x.requires_grad_(True)
    up, down = ColumnParallelLinear(w1, b1), RowParallelLinear(w2, b2)
    out = down(F.gelu(up(x)))
    out.square().sum().backward()
    return out, x.grad


rng = np.random.default_rng(0)
tensors = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (8, 4), (8,), (4, 8), (4,))]
(out, grad), _ = run_world(tp_mlp, 2, [tensors, tensors])
x, w1, b1, w2, b2 = (torch.from_numpy(t) for t in tensors)
x.requires_grad_(True)
dense = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
dense.square().sum().backward()
print("forward:", float(np.abs(out - dense.detach().numpy()).max()), " input grad:", float(np.abs(grad - x.grad.numpy()).max()))

# %% nbgrader={"grade": true, "grade_id": "tp", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Tensor parallelism: f, g, column and row"
check("tp")

# %% [markdown] nbgrader={"grade": false, "grade_id": "pipeline-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Pipeline parallelism (20 points)
#
# A model cut into $p$ consecutive **stages**, one per rank; a batch cut into $m$ **micro-batches**.
# A schedule says, for each stage, the order of its actions: `("F", i)`, the forward of micro-batch
# $i$, and `("B", i)`, its backward.
#
# * **`gpipe(m, p)`**: every stage runs `F 0 … F m-1`, then `B 0 … B m-1`.
# * **`one_f_one_b(m, p)`**: stage $s$ first runs $w = \min(p - s - 1, m)$ forwards (warm-up), then
#   alternates one forward and one backward, `F w, B 0, F w+1, B 1, …`, until the forwards are done,
#   then runs the remaining backwards in order (cool-down). It keeps at most $w + 1$ micro-batches'
#   activations alive where GPipe keeps $m$.
#
# Both return a list of $p$ lists of `(kind, i)` tuples (`ValueError` unless $m \ge 1$, $p \ge 1$).
#
# **`run_stage(stage, actions, inputs, targets, loss_fn, in_shape, group=None)`** runs stage
# $s$ = `dist.get_rank(group)` of $p$ = the group size through `actions`:
#
# * `("F", i)`: the input is `inputs[i]` on stage 0, else a `dist.recv` of a float32 tensor of shape
#   `in_shape` from stage $s-1$ (make it `requires_grad`). Run `out = stage(x)`. On the last stage,
#   the loss is `loss_fn(out, targets[i]) / m` (so that the micro-batches' gradients add up to the
#   whole batch's mean), else `dist.isend` `out` to stage $s+1$.
# * `("B", i)`: on the last stage, backward from micro-batch $i$'s loss; on the others, `dist.recv` the
#   gradient of `out` (its shape) from stage $s+1$ and `out.backward(grad)`. Then, except on stage 0,
#   `dist.isend` the gradient of `x` to stage $s-1$.
#
# Sends are `isend`s: a blocking send waits until the peer posts its `recv`, and with blocking sends
# in both directions two 1F1B neighbours can each wait for the other forever. Wait for all of them
# before returning. Run the actions in their order: the graders give schedules that take the
# micro-batches in other orders than 0, 1, 2, ... (they see the order of the tensors you send each
# neighbour; only memory would show how you interleave forwards and backwards). Only stage 0 uses `inputs` and only
# the last stage `targets` and `loss_fn` (others may get `None`); $m$ is the number of `("F", i)`
# actions. Return the list of the $m$ losses (floats, as computed, divided by $m$) on the last stage,
# `[]` elsewhere. The parameters' `.grad` then hold the whole batch's gradients.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "pipeline-solution", "locked": false, "schema_version": 3, "solution": true}
def gpipe(m, p):
    """GPipe: all forwards, then all backwards, on every stage."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab10 pipeline-solution
    _check_mp(m, p)
    return [[("F", i) for i in range(m)] + [("B", i) for i in range(m)] for _ in range(p)]
    ### END SOLUTION


def one_f_one_b(m, p):
    """1F1B: warm-up forwards, one forward / one backward, cool-down backwards."""
    ### BEGIN SOLUTION
    _check_mp(m, p)
    schedules = []
    for s in range(p):
        warm = min(p - s - 1, m)
        actions = [("F", i) for i in range(warm)]
        for i in range(m - warm):
            actions += [("F", warm + i), ("B", i)]
        actions += [("B", i) for i in range(m - warm, m)]
        schedules.append(actions)
    return schedules
    ### END SOLUTION


### BEGIN SOLUTION
def _check_mp(m, p):
    if m < 1 or p < 1:
        raise ValueError(f"need m >= 1 micro-batches and p >= 1 stages, got m={m!r}, p={p!r}")
### END SOLUTION


def run_stage(stage, actions, inputs, targets, loss_fn, in_shape, group=None):
    """Run this rank's stage through `actions`; the last stage returns the micro-batches' losses."""
    ### BEGIN SOLUTION
    s, p = dist.get_rank(group), dist.get_world_size(group)
    m = sum(1 for kind, _ in actions if kind == "F")
    saved, losses, sends = {}, {}, []
    for kind, i in actions:
        if kind == "F":
            if s == 0:
                x = inputs[i]
            else:
                x = torch.empty(in_shape, dtype=torch.float32)
                dist.recv(x, group=group, group_src=s - 1)
                x.requires_grad_(True)
            out = stage(x)
            if s == p - 1:
                out = loss_fn(out, targets[i]) / m
                losses[i] = float(out.detach())
            else:
                sends.append(dist.isend(out.detach().contiguous(), group=group, group_dst=s + 1))
            saved[i] = (x, out)
        elif kind == "B":
            x, out = saved.pop(i)
            if s == p - 1:
                out.backward()
            else:
                grad = torch.empty_like(out)
                dist.recv(grad, group=group, group_src=s + 1)
                out.backward(grad)
            if s > 0:
                sends.append(dist.isend(x.grad.contiguous(), group=group, group_dst=s - 1))
        else:
            raise ValueError(f"unknown action {kind!r}")
    for work in sends:
        work.wait()
    return [losses[i] for i in sorted(losses)] if s == p - 1 else []
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "pipeline-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: with p = 4 stages and m = 8 micro-batches, what fraction of the time does each stage
# sit idle (the bubble), for GPipe and for 1F1B? Draw the timeline, then print the schedules.
for s, actions in enumerate(one_f_one_b(8, 4)):
    print(s, " ".join(f"{k}{i}" for k, i in actions))
print("bubble fraction (p - 1) / (m + p - 1):", 3 / 11)

# %% nbgrader={"grade": true, "grade_id": "pipeline", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Pipeline schedules and stages"
check("pipeline")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# Data parallelism for throughput, ZeRO and FSDP for the memory of the optimizer and of the model itself,
# tensor parallelism for layers too big for one device, pipelines for models too deep for one: real
# systems combine them (3-D parallelism: Megatron-LM, DeepSpeed, TorchTitan, where FSDP2's
# `fully_shard` is the data-parallel dimension). Under `torchrun`, each of your classes runs
# unchanged across machines (`torchrun --nnodes 2 --nproc-per-node 4 ...`, as in lab 9). Save the
# notebook and submit it (`make submit LAB=lab10`).
