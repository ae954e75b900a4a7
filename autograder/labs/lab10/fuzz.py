# IPT-CANARY lab10 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab10's reference against PyTorch and against theory, in P0.

* plan_buckets == the C++ Reducer's own `dist._compute_bucket_assignment_by_size` fed the parameters in
  reverse registration order with limits [first_cap, cap] (DDP's rebuilt buckets when gradients arrive
  in that order), on drawn sizes: zeros, one larger than the cap, first caps below and above the cap.
* shard_bounds == the offsets of `torch.chunk(flat, W)` (ceil(n / W) elements per chunk, the same rule
  FSDP2 shards with), padded with n for the chunks torch.chunk does not return.
* gpipe and one_f_one_b, run by a discrete-time simulator (a stage does one action per tick; F i needs
  F i of the stage before, B i needs F i here and B i of the stage after): no deadlock, both finish in
  2(m + p - 1) ticks (the bubble is (p - 1) / (m + p - 1) of the run), and 1F1B keeps at most
  min(p - s, m) micro-batches in flight on stage s where GPipe keeps m.
* worlds of 1 to 4 gloo ranks: BucketedDDP's gradients and parameters after SGD steps (with no_sync
  accumulation) == torch's DistributedDataParallel's; ZeroAdamW's parameters == torch.optim.AdamW's on the
  averaged gradients; a chain of ShardedLinears trained with SGD == the slices of nn.Linears trained on
  the whole batch, and those nn.Linears == the same layers under torch's FSDP2 (`fully_shard` on a CPU
  mesh) trained on each rank's own batch; the tensor-parallel MLP == the dense block, forward and
  backward; run_stage's gradients == the whole model's.

    run(40)    # CI: a few seconds          run(400)   # make fuzz
"""
from __future__ import annotations

import copy
import functools

import numpy as np


@functools.lru_cache(maxsize=1)
def reference():
    from autograder.engine.variants import reference_module
    return reference_module("lab10")


# ---------------------------------------------------------------- pure functions
def _plan_vs_torch(rng) -> None:
    import torch
    import torch.distributed as dist
    ref = reference()
    n = int(rng.integers(0, 10))
    numels = [int(x) for x in rng.choice([0, 1, 2, 3, 5, 8, 40], n)]
    cap = int(rng.integers(1, 80))
    first = [None, int(rng.integers(1, 20)), int(rng.integers(cap, cap + 60))][int(rng.integers(3))]
    sizes = [k * 4 for k in numels]
    got = [list(b) for b in ref.plan_buckets(sizes, cap, first)]
    if not n:
        assert got == [], f"plan_buckets([], ...) gave {got}"
        return
    tensors = [torch.zeros(numels[i]) for i in reversed(range(n))]
    theirs, _ = dist._compute_bucket_assignment_by_size(tensors, [cap if first is None else first, cap], [False] * n)
    want = [[n - 1 - j for j in bucket] for bucket in theirs]
    assert got == want, f"plan_buckets({sizes}, {cap}, {first}) gave {got}, torch's Reducer {want}"


def _bounds_vs_chunk(rng) -> None:
    import torch
    ref = reference()
    n, world = int(rng.integers(0, 100)), int(rng.integers(1, 12))
    pieces = [len(c) for c in torch.arange(n).chunk(world)] if n else []
    want = [0]
    for size in pieces:
        want.append(want[-1] + size)
    want += [n] * (world + 1 - len(want))
    got = list(ref.shard_bounds(n, world))
    assert got == want, f"shard_bounds({n}, {world}) gave {got}, torch.chunk's offsets are {want}"


def simulate(schedule: list, m: int) -> tuple[int, list[int]]:
    """(ticks until every stage is done, peak micro-batches in flight per stage); AssertionError on a deadlock."""
    p = len(schedule)
    done_f, done_b = [set() for _ in range(p)], [set() for _ in range(p)]
    at, peak, tick = [0] * p, [0] * p, 0
    while any(at[s] < len(schedule[s]) for s in range(p)):
        moves = []
        for s in range(p):
            if at[s] == len(schedule[s]):
                continue
            kind, i = schedule[s][at[s]]
            if kind == "F" and (s == 0 or i in done_f[s - 1]):
                moves.append((s, kind, i))
            if kind == "B" and i in done_f[s] and (s == p - 1 or i in done_b[s + 1]):
                moves.append((s, kind, i))
        assert moves, f"the schedule deadlocks at tick {tick}"
        for s, kind, i in moves:
            (done_f if kind == "F" else done_b)[s].add(i)
            at[s] += 1
            peak[s] = max(peak[s], len(done_f[s]) - len(done_b[s]))
        tick += 1
    assert all(len(done_f[s]) == len(done_b[s]) == m for s in range(p)), "not every micro-batch ran forward and backward"
    return tick, peak


def _schedules_by_simulation(rng) -> None:
    ref = reference()
    m, p = int(rng.integers(1, 10)), int(rng.integers(1, 7))
    for name in ("gpipe", "one_f_one_b"):
        schedule = [[tuple(a) for a in stage] for stage in getattr(ref, name)(m, p)]
        ticks, peak = simulate(schedule, m)
        assert ticks == 2 * (m + p - 1), f"{name}({m}, {p}) takes {ticks} ticks, theory says {2 * (m + p - 1)}"
        bound = [m] * p if name == "gpipe" else [min(p - s, m) for s in range(p)]
        assert peak == bound, f"{name}({m}, {p}) keeps {peak} micro-batches in flight per stage, theory says {bound}"


# ---------------------------------------------------------------- worlds
def _world_program(specs):
    def program(_):
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch import nn
        import warnings

        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        warnings.filterwarnings("ignore", message=".*returned a view tensor")   # an nn.Linear of a 3-d input
        ref = reference()
        rank, world = dist.get_rank(), dist.get_world_size()
        mesh = init_device_mesh("cpu", (world,))
        out = []
        for spec in specs:
            rng = np.random.default_rng(spec["seed"])
            if spec["kind"] == "ddp":
                widths = spec["widths"]

                def make():
                    torch.manual_seed(spec["seed"])
                    return nn.Sequential(*[m for k in range(len(widths) - 1)
                                           for m in (nn.Linear(widths[k], widths[k + 1]), nn.Tanh())][:-1])
                mine = ref.BucketedDDP(make(), bucket_cap=spec["cap"], first_bucket_cap=spec["first"])
                theirs = nn.parallel.DistributedDataParallel(make(), bucket_cap_mb=spec["cap"] / 2**20)
                for model in (mine, theirs):
                    opt = torch.optim.SGD(model.parameters(), lr=0.1)
                    data = np.random.default_rng(spec["seed"] + rank)
                    for _ in range(2):
                        opt.zero_grad()
                        x = torch.from_numpy(data.standard_normal((3, widths[0])).astype(np.float32))
                        with model.no_sync():
                            model(x).square().sum().backward()
                        x = torch.from_numpy(data.standard_normal((2, widths[0])).astype(np.float32))
                        model(x).square().sum().backward()
                        opt.step()
                    out += [torch.cat([p.detach().reshape(-1) for p in model.parameters()])]
            elif spec["kind"] == "zero":
                shapes = spec["shapes"]
                init = [torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in shapes]
                grads = [[torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in shapes] for _ in range(world * 2)]
                mine = [t.clone() for t in init]
                opt = ref.ZeroAdamW(mine, lr=0.05, weight_decay=0.1)
                theirs = [t.clone().requires_grad_(True) for t in init]
                ref_opt = torch.optim.AdamW(theirs, lr=0.05, weight_decay=0.1)
                for step in range(2):
                    for i, p in enumerate(mine):
                        p.grad = grads[step * world + rank][i].clone()
                    opt.step()
                    for i, p in enumerate(theirs):
                        p.grad = sum(grads[step * world + r][i] for r in range(world)) / world
                    ref_opt.step()
                out += [torch.cat([p.reshape(-1) for p in mine]), torch.cat([p.detach().reshape(-1) for p in theirs])]
            elif spec["kind"] == "fsdp":
                widths = spec["widths"]
                weights = [(torch.from_numpy(rng.standard_normal((widths[k + 1], widths[k])).astype(np.float32)),
                            torch.from_numpy(rng.standard_normal(widths[k + 1]).astype(np.float32)) if spec["bias"][k] else None)
                           for k in range(len(widths) - 1)]
                mine = [ref.ShardedLinear(w, b) for w, b in weights]
                dense = [nn.Linear(widths[k], widths[k + 1], bias=b is not None) for k, (w, b) in enumerate(weights)]
                with torch.no_grad():
                    for layer, (w, b) in zip(dense, weights, strict=True):
                        layer.weight.copy_(w)
                        if b is not None:
                            layer.bias.copy_(b)
                opt = torch.optim.SGD([layer.shard for layer in mine], lr=0.1)
                ref_opt = torch.optim.SGD([q for layer in dense for q in layer.parameters()], lr=0.1)
                # torch's FSDP2 on the same layers: the dense oracle must agree with it too
                fsdp2 = nn.Sequential(*[m for d in dense for m in (copy.deepcopy(d), nn.Tanh())][:-1])
                for layer in fsdp2:
                    if isinstance(layer, nn.Linear):
                        fully_shard(layer, mesh=mesh)
                fully_shard(fsdp2, mesh=mesh)
                fsdp2_opt = torch.optim.SGD(fsdp2.parameters(), lr=0.1)
                for step in range(2):
                    xs = [torch.from_numpy(rng.standard_normal((2, 3, widths[0])).astype(np.float32)) for _ in range(world)]
                    for layers, optimizer, batches in ((mine, opt, [xs[rank]]), (dense, ref_opt, xs)):
                        optimizer.zero_grad()
                        for x in batches:
                            h = x
                            for k, layer in enumerate(layers):
                                h = layer(h)
                                h = torch.tanh(h) if k < len(layers) - 1 else h
                            (h.square().mean() / len(batches)).backward()
                        optimizer.step()
                    fsdp2_opt.zero_grad()
                    fsdp2(xs[rank]).square().mean().backward()     # FSDP2 averages the gradients over ranks
                    fsdp2_opt.step()
                full = [q.full_tensor().detach().reshape(-1) for q in fsdp2.parameters()]
                out += [torch.cat(full), torch.cat([q.detach().reshape(-1) for d in dense for q in d.parameters()])]
                for layer, d in zip(mine, dense, strict=True):
                    flat = torch.cat([q.detach().reshape(-1) for q in d.parameters()])
                    c = layer.shard.numel()
                    want = torch.zeros(c * world)
                    want[:flat.numel()] = flat
                    out += [layer.shard.detach().clone(), want[rank * c:(rank + 1) * c]]
            elif spec["kind"] == "tp":
                i, hidden = spec["i"], spec["hidden"] * world
                x = torch.from_numpy(rng.standard_normal((3, i)).astype(np.float32))
                w1, b1 = (torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((hidden, i), (hidden,)))
                w2, b2 = (torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((i, hidden), (i,)))
                xs = x.clone().requires_grad_(True)
                y = ref.RowParallelLinear(w2, b2)(F.gelu(ref.ColumnParallelLinear(w1, b1)(xs)))
                y.square().sum().backward()
                xd = x.clone().requires_grad_(True)
                dense = F.linear(F.gelu(F.linear(xd, w1, b1)), w2, b2)
                dense.square().sum().backward()
                out += [y.detach(), dense.detach(), xs.grad, xd.grad]
        return out
    return program


def _check_world(specs, world, results) -> None:
    for rank in range(world):
        got = list(results[rank])
        for spec in specs:
            what = f"{spec['kind']} on {world} ranks (rank {rank}, seed {spec['seed']})"
            if spec["kind"] == "ddp":
                mine, theirs = got.pop(0), got.pop(0)
                assert np.allclose(mine, theirs, rtol=1e-5, atol=1e-6), f"{what}: BucketedDDP differs from torch's DDP"
            elif spec["kind"] == "zero":
                mine, theirs = got.pop(0), got.pop(0)
                assert np.allclose(mine, theirs, rtol=1e-5, atol=1e-6), f"{what}: ZeroAdamW differs from torch.optim.AdamW"
            elif spec["kind"] == "fsdp":
                fsdp2, dense = got.pop(0), got.pop(0)
                assert np.allclose(fsdp2, dense, rtol=1e-5, atol=1e-5), \
                    f"{what}: torch's FSDP2 (fully_shard) trained on each rank's batch differs from nn.Linear trained on the whole batch"
                for k in range(len(spec["widths"]) - 1):
                    mine, theirs = got.pop(0), got.pop(0)
                    assert np.allclose(mine, theirs, rtol=1e-5, atol=1e-5), \
                        f"{what}: ShardedLinear {k}'s shard differs from the slice of nn.Linear trained on the whole batch"
            else:
                y, dense, gx, gd = (got.pop(0) for _ in range(4))
                assert np.allclose(y, dense, rtol=1e-5, atol=1e-5) and np.allclose(gx, gd, rtol=1e-5, atol=1e-5), \
                    f"{what}: the tensor-parallel MLP differs from the dense block"


def _pipeline_world(rng) -> int:
    """run_stage over p ranks with both schedules against the whole model in one process."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from labkit.world import run_world
    p, m, rows = int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
    widths = [int(w) for w in rng.integers(2, 6, p + 1)]
    seed = int(rng.integers(1 << 30))
    x = rng.standard_normal((m * rows, widths[0])).astype(np.float32)
    y = rng.standard_normal((m * rows, widths[-1])).astype(np.float32)

    def stages():
        torch.manual_seed(seed)
        return [nn.Sequential(nn.Linear(widths[s], widths[s + 1]), *([nn.Tanh()] if s < p - 1 else [])) for s in range(p)]

    whole = nn.Sequential(*stages())
    F.mse_loss(whole(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    ref = reference()
    for name in ("gpipe", "one_f_one_b"):
        def program(_, name=name):
            import torch.distributed as dist
            s = dist.get_rank()
            stage = stages()[s]
            actions = getattr(ref, name)(m, p)[s]
            ref.run_stage(stage, actions, list(torch.from_numpy(x).chunk(m)), list(torch.from_numpy(y).chunk(m)),
                          F.mse_loss, (rows, widths[s]))
            return [q.grad for q in stage.parameters()]
        results = run_world(program, p, [[np.zeros(1)] for _ in range(p)], timeout=60)
        for s in range(p):
            for got, q in zip(results[s], whole[s].parameters(), strict=True):
                assert np.allclose(got, q.grad.numpy(), rtol=1e-5, atol=1e-6), \
                    f"run_stage with {name}({m}, {p}): stage {s}'s gradients differ from the whole model's"
    return 2


def run(examples: int) -> int:
    from labkit.world import run_world
    rng = np.random.default_rng(2026)
    reference()  # loaded before any fork, once
    done = 0
    for _ in range(examples):
        _plan_vs_torch(rng)
        _bounds_vs_chunk(rng)
        _schedules_by_simulation(rng)
        done += 3
    for _ in range(max(1, examples // 40)):   # CI (40): one world of each size drawn; make fuzz (400): ten
        world = int(rng.integers(1, 5))
        specs = []
        for kind in ("ddp", "zero", "fsdp", "tp"):
            spec = {"kind": kind, "seed": int(rng.integers(1 << 30))}
            if kind == "ddp":
                spec.update(widths=[int(w) for w in rng.integers(2, 7, int(rng.integers(2, 5)))],
                            cap=int(rng.integers(16, 200)), first=None)
            elif kind == "fsdp":
                widths = [int(w) for w in rng.integers(1, 6, int(rng.integers(2, 4)))]
                spec.update(widths=widths, bias=[bool(b) for b in rng.integers(0, 2, len(widths) - 1)])
            elif kind == "zero":
                spec.update(shapes=[[int(d) for d in rng.integers(1, 5, int(rng.integers(0, 3)))] for _ in range(int(rng.integers(1, 4)))])
            else:
                spec.update(i=int(rng.integers(2, 6)), hidden=int(rng.integers(1, 4)))
            specs.append(spec)
        results = run_world(_world_program(specs), world, [[np.zeros(1)] for _ in range(world)], timeout=60)
        _check_world(specs, world, results)
        done += len(specs) * world
        done += _pipeline_world(rng)
    return done


if __name__ == "__main__":
    import sys

    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 40), "cases agree")
