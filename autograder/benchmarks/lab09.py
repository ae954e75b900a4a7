"""`make bench LAB=lab09`: bus bandwidth of the reference ring all-reduce against gloo's all_reduce.

One world per repeat (forked gloo ranks, labkit.world, one thread each). Every round times both on fresh
copies of the same float32 tensor, in alternating order, each call after a barrier, as the slowest rank's
wall time; the reference's result is checked against gloo's (within the reordering bound) before any
timing. Bus bandwidth, as nccl-tests define it for all-reduce: busbw = bytes / t * 2(W - 1) / W, so the
ratio ours / gloo is t_gloo / t_ours on the medians. Ranks beyond the machine's cores take turns: such
worlds measure the scheduler as much as the algorithm (the output says so).
"""
from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

os.environ["OMP_NUM_THREADS"] = "1"


def _program(nelem: int, rounds: int):
    def program(_):
        import time

        import torch
        import torch.distributed as dist

        from autograder.engine.variants import reference_module
        ref = reference_module("lab09")
        x = torch.randn(nelem, generator=torch.Generator().manual_seed(dist.get_rank()))
        mine, theirs = x.clone(), x.clone()
        ref.ring_all_reduce(mine)
        dist.all_reduce(theirs)
        world = dist.get_world_size()
        bound = 2 * (world - 1) * torch.finfo(torch.float32).eps * world * x.abs().max() + 1e-30
        if not torch.allclose(mine, theirs, rtol=0, atol=float(bound) * 10):
            raise AssertionError("the reference's all-reduce differs from gloo's beyond the reordering bound")
        ours, gloo = [], []
        for i in range(rounds):
            for which in (("ours", "gloo") if i % 2 == 0 else ("gloo", "ours")):
                y = x.clone()
                dist.barrier()
                start = time.perf_counter()
                ref.ring_all_reduce(y) if which == "ours" else dist.all_reduce(y)
                elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                (ours if which == "ours" else gloo).append(float(elapsed))
        return torch.tensor(ours, dtype=torch.float64), torch.tensor(gloo, dtype=torch.float64)
    return program


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks lab09", description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=16, help="tensor size in MiB (default 16)")
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4], help="world sizes (default 2 4)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per world (default 9)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh worlds per world size (default 3)")
    args = parser.parse_args(argv)
    import sys

    from autograder.paths import REPO
    sys.path.insert(0, str(REPO / "labs"))
    from labkit.world import run_world

    nelem = max(1, int(args.mib * 2 ** 20) // 4)
    nbytes = nelem * 4
    cores = os.cpu_count() or 1
    print(f"{cores} CPU cores; {nbytes / 2**20:g} MiB float32 all-reduce, {args.rounds} interleaved rounds per world, "
          f"medians; one thread per rank")
    print(f"{'W':>2} {'world':>5} {'ours ms':>8} {'gloo ms':>8} {'ours busbw GB/s':>15} {'gloo busbw GB/s':>15} {'ratio':>6}")
    for world in args.worlds:
        ratios = []
        for rep in range(args.repeats):
            ours, gloo = run_world(_program(nelem, args.rounds), world, [[np.zeros(1)] for _ in range(world)], timeout=600)[0]
            mo, mg = float(np.median(ours)), float(np.median(gloo))
            ratios.append(mg / mo)
            bus = 2 * (world - 1) / world
            print(f"{world:>2} {rep:>5} {mo * 1e3:8.1f} {mg * 1e3:8.1f} {nbytes / mo * bus / 1e9:15.2f} "
                  f"{nbytes / mg * bus / 1e9:15.2f} {ratios[-1]:6.2f}", flush=True)
        print(f"W={world}: bus-bandwidth ratio ours/gloo: median {statistics.median(ratios):.2f} "
              f"(worlds: {', '.join(f'{r:.2f}' for r in ratios)})" + (
                  f"; {world} ranks on {cores} cores take turns" if world > cores else ""))
    return 0
