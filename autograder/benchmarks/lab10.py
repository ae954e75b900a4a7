"""`make bench LAB=lab10`: a training step of the reference BucketedDDP against torch's DistributedDataParallel.

One world per repeat (forked gloo ranks, labkit.world, one thread each). Both wrap the same MLP (`--layers`
Linear layers of `--width` features with tanh between), with the same bucket cap; each rank draws its own
batch. Before any timing, one step of each must give the same gradients (within float32 reordering).
Then every round times forward + backward + SGD step of both on fresh batches, in alternating order, each
after a barrier, as the slowest rank's wall time. The ratio is ours / torch on the medians (lower is
faster; the lab's target is at most 1.2). torch's DDP runs its first iteration with one bucket and then
rebuilds its buckets from the order gradients arrived; the warm-up rounds let it do so.

Then the parameter memory of FSDP-style sharding (part 3), per rank, over one forward and backward of the
reference's ShardedLinear chain of the same layers: the bytes its shards take, and their peak with the
gathered layers alive at the same time (the reference's gather is wrapped to count each gathered buffer
until its weight and bias views are freed), against the bytes of the nn.Linear chain. Expected: every
shard, plus one whole layer at a time.
"""
from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

os.environ["OMP_NUM_THREADS"] = "1"


def _program(width: int, layers: int, batch: int, cap: int, rounds: int, warmup: int):
    def program(_):
        import time

        import torch
        import torch.distributed as dist
        from torch import nn

        from autograder.engine.variants import reference_module
        ref = reference_module("lab10")
        rank = dist.get_rank()

        def mlp():
            torch.manual_seed(0)
            parts = []
            for k in range(layers):
                parts += [nn.Linear(width, width)] + ([nn.Tanh()] if k < layers - 1 else [])
            return nn.Sequential(*parts)

        ours = ref.BucketedDDP(mlp(), bucket_cap=cap)
        theirs = nn.parallel.DistributedDataParallel(mlp(), bucket_cap_mb=cap / 2**20)
        models = {"ours": ours, "torch": theirs}
        optims = {name: torch.optim.SGD(m.parameters(), lr=1e-3) for name, m in models.items()}
        data = torch.Generator().manual_seed(1000 + rank)

        def step(name):
            x = torch.randn(batch, width, generator=data)
            optims[name].zero_grad()
            models[name](x).square().mean().backward()
            optims[name].step()

        # the same batch through both: the averaged gradients must agree before anything is timed
        x = torch.randn(batch, width, generator=data)
        for model in models.values():
            model(x).square().mean().backward()
        for a, b in zip(ours.module.parameters(), theirs.module.parameters(), strict=True):
            if not torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6):
                raise AssertionError("the reference's averaged gradients differ from torch DDP's")
        for _ in range(warmup):
            for name in models:
                step(name)
        times = {"ours": [], "torch": []}
        for i in range(rounds):
            for name in (("ours", "torch") if i % 2 == 0 else ("torch", "ours")):
                dist.barrier()
                start = time.perf_counter()
                step(name)
                elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                times[name].append(float(elapsed))
        return torch.tensor(times["ours"], dtype=torch.float64), torch.tensor(times["torch"], dtype=torch.float64)
    return program


def _memory_program(width: int, layers: int, batch: int):
    """Per rank: bytes of parameters stored, their peak (stored shards + gathered layers alive at once) over a
    training step of the reference's ShardedLinear chain, and the bytes of the same chain as nn.Linear."""
    def program(_):
        import weakref

        import torch
        import torch.distributed as dist
        from torch import nn

        from autograder.engine.variants import reference_module
        ref = reference_module("lab10")
        torch.manual_seed(0)
        dense = [nn.Linear(width, width) for _ in range(layers)]
        chain = nn.Sequential(*[ref.ShardedLinear(layer.weight, layer.bias) for layer in dense])
        stored = sum(p.numel() * p.element_size() for p in chain.parameters())
        live, peak, gather = [0], [stored], ref._gather_layer

        def tracked(module):
            """The reference's gather, counted: its flat buffer is alive while its weight or bias view is."""
            weight, bias = gather(module)
            nbytes, views = weight.untyped_storage().nbytes(), [v for v in (weight, bias) if v is not None]
            left = [len(views)]

            def dropped():
                left[0] -= 1
                if left[0] == 0:
                    live[0] -= nbytes

            for view in views:
                weakref.finalize(view, dropped)
            live[0] += nbytes
            peak[0] = max(peak[0], stored + live[0])
            return weight, bias

        ref._gather_layer = tracked
        x = torch.randn(batch, width, generator=torch.Generator().manual_seed(dist.get_rank()))
        chain(x).square().mean().backward()
        if live[0] != 0:
            raise AssertionError(f"{live[0]} bytes of gathered parameters still alive after the step")
        full = sum(p.numel() * p.element_size() for layer in dense for p in layer.parameters())
        return torch.tensor([stored, peak[0], full], dtype=torch.float64)
    return program


def memory(width: int, layers: int, batch: int, worlds: list[int]) -> None:
    """Peak parameter memory per rank of FSDP-style sharding (lab10 part 3), measured on the reference."""
    from labkit.world import run_world
    layer = (width * width + width) * 4
    print(f"\nFSDP-style sharding, {layers} x ShardedLinear({width}, {width}), one forward and backward: parameter bytes per "
          f"rank, stored and at their peak (stored shards + gathered layers alive at once)")
    print(f"{'W':>2} {'stored KiB':>10} {'peak KiB':>10} {'nn.Linear KiB':>13} {'peak/dense':>10} {'expect KiB':>10}")
    for world in worlds:
        rows = [r[0] for r in run_world(_memory_program(width, layers, batch), world,
                                        [[np.zeros(1)] for _ in range(world)], timeout=600)]
        stored, peak, full = (max(float(r[k]) for r in rows) for k in range(3))
        chunk = -(-(width * width + width) // world) * 4   # a layer's shard, padded to W equal chunks
        expected = layers * chunk + chunk * world          # every shard, and one whole (padded) layer
        print(f"{world:>2} {stored / 1024:10.1f} {peak / 1024:10.1f} {full / 1024:13.1f} {peak / full:10.2f} "
              f"{expected / 1024:10.1f}")
        if peak > expected:
            print(f"   more than one layer was alive at once: {(peak - stored) / layer:.2f} layers' worth")
    print(f"peak parameter memory per rank: at W={worlds[-1]}, {peak / full:.2f} of a dense replica")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks lab10", description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=512, help="features per layer (default 512)")
    parser.add_argument("--layers", type=int, default=8, help="Linear layers (default 8)")
    parser.add_argument("--batch", type=int, default=64, help="rows per rank (default 64)")
    parser.add_argument("--cap-mib", type=float, default=2.0, help="bucket cap in MiB, both DDPs (default 2)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[2], help="world sizes (default 2)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per world (default 15)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh worlds per world size (default 3)")
    parser.add_argument("--memory-worlds", type=int, nargs="+", default=[2, 4],
                        help="world sizes of the FSDP parameter-memory measurement (default 2 4)")
    args = parser.parse_args(argv)
    import sys

    from autograder.paths import REPO
    sys.path.insert(0, str(REPO / "labs"))
    from labkit.world import run_world

    cap = max(1, int(args.cap_mib * 2 ** 20))
    params = args.layers * (args.width * args.width + args.width)
    print(f"{os.cpu_count() or 1} CPU cores; MLP of {args.layers} x Linear({args.width}, {args.width}), {params * 4 / 2**20:.1f} MiB "
          f"of parameters, batch {args.batch} per rank, buckets of {cap / 2**20:g} MiB; {args.rounds} interleaved rounds per "
          f"world, medians; one thread per rank")
    print(f"{'W':>2} {'world':>5} {'ours ms':>8} {'torch ms':>8} {'ours/torch':>10}")
    for world in args.worlds:
        ratios = []
        for rep in range(args.repeats):
            ours, theirs = run_world(_program(args.width, args.layers, args.batch, cap, args.rounds, 3), world,
                                     [[np.zeros(1)] for _ in range(world)], timeout=600)[0]
            mo, mt = float(np.median(ours)), float(np.median(theirs))
            ratios.append(mo / mt)
            print(f"{world:>2} {rep:>5} {mo * 1e3:8.1f} {mt * 1e3:8.1f} {ratios[-1]:10.2f}", flush=True)
        print(f"W={world}: DDP step time ours/torch: median {statistics.median(ratios):.2f} "
              f"(lowest {min(ratios):.2f}, highest {max(ratios):.2f}; target <= 1.2)")
    if args.memory_worlds:
        memory(args.width, args.layers, args.batch, args.memory_worlds)
    return 0
