"""`make bench LAB=lab07`: the reference fusing backend against eager PyTorch and Inductor.

Memory-bound pointwise chains on 4M float32 (autograder/labs/lab07/scenarios.py:CHAINS). Every contender runs with
OMP_NUM_THREADS=1 and torch.set_num_threads(1) (Inductor's C++ kernels then run single-threaded too); the
compiled functions are warmed up first (Inductor's compile excluded); then rounds interleave eager, the reference
backend and Inductor, and each chain's figure is the ratio of medians. The summary lines are geometric means.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ["OMP_NUM_THREADS"] = "1"


def reference_module():
    """The exported cells of solutions/lab07_compile.py, executed as a module."""
    import jupytext
    from labkit.notebook import assemble, load_module

    from autograder.paths import lab_paths
    nb = jupytext.read(lab_paths("lab07").solution, fmt="py:percent")
    module, errors = load_module(assemble(nb, nb).cells, name="lab07_reference")
    if errors:
        raise RuntimeError("the reference solution does not load: " + "; ".join(errors))
    return module


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks lab07", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per chain (default 15)")
    parser.add_argument("--n", type=int, default=1 << 22, help="elements per tensor (default 4M)")
    parser.add_argument("--no-inductor", action="store_true", help="skip Inductor")
    args = parser.parse_args(argv)

    import torch
    import torch._dynamo

    from autograder.labs.lab07.oracle import geomean, median
    from autograder.labs.lab07.scenarios import CHAINS, chain_inputs
    torch.set_num_threads(1)
    ref = reference_module()
    x, y = chain_inputs(0, args.n)
    rows = []
    print(f"lab07 benchmark: {len(CHAINS)} chains on {args.n} float32, 1 thread, {args.rounds} interleaved rounds, medians")
    for label, fn in CHAINS.items():
        torch._dynamo.reset()
        ours = torch.compile(fn, backend=ref.fusing_backend, dynamic=False)
        want = fn(x, y)
        assert torch.allclose(ours(x, y), want, rtol=1e-4, atol=1e-4 * max(1.0, float(want.abs().max()))), f"{label}: wrong result"
        contenders = {"eager": fn, "ours": ours}
        if not args.no_inductor:
            inductor = torch.compile(fn, backend="inductor", dynamic=False)
            inductor(x, y)  # warm-up: compilation excluded
            contenders["inductor"] = inductor
        for f in contenders.values():
            f(x, y)
        times = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for k, f in contenders.items():
                start = time.perf_counter()
                f(x, y)
                times[k].append(time.perf_counter() - start)
        med = {k: median(v) for k, v in times.items()}
        row = {"chain": label, "eager_ms": 1e3 * med["eager"], "ours_ms": 1e3 * med["ours"], "vs_eager": med["eager"] / med["ours"]}
        line = f"  {label:24s} eager {row['eager_ms']:7.2f} ms   ours {row['ours_ms']:7.2f} ms   speedup vs eager: {row['vs_eager']:.2f}"
        if "inductor" in med:
            row["vs_inductor"] = med["inductor"] / med["ours"]
            line += f"   inductor {1e3 * med['inductor']:7.2f} ms   speed vs inductor: {row['vs_inductor']:.2f}"
        print(line, flush=True)
        rows.append(row)
    torch._dynamo.reset()
    print(f"speedup vs eager: {geomean([r['vs_eager'] for r in rows]):.2f}")
    if not args.no_inductor:
        print(f"speed vs inductor: {geomean([r['vs_inductor'] for r in rows]):.2f}")
    return 0
