"""`make bench LAB=lab07`: the reference fusing backend against eager PyTorch and Inductor.

Two sets: memory-bound pointwise chains on 4M float32 (autograder/labs/lab07/scenarios.py:CHAINS), and five
real blocks (an MLP with GELU, a small ConvNet, LayerNorm + GELU, softmax attention, RMSNorm + SwiGLU), each
timed for inference and for one training step (forward + backward). Every contender runs with OMP_NUM_THREADS=1
and torch.set_num_threads(1) (Inductor's C++ kernels then run single-threaded too); compiled functions are
warmed up first (compilation excluded); rounds interleave eager, the reference backend and Inductor, and each
figure is a ratio of medians of the process's CPU time per call (time.process_time: on a loaded machine, time
spent waiting for a core is not the contender's). The summary lines are geometric means.

Each block's line also says what the reference backend did with it: the fused kernels of its forward and backward
graphs, or "eager" when its cost model kept the graph in eager PyTorch; and, where Inductor runs, "floor": eager
over torch.compile(backend="eager"), the share of Dynamo's own per-call work (guards, frame handling) that any
backend pays, fused or not.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ["OMP_NUM_THREADS"] = "1"


def reference_module():
    """The exported cells of solutions/lab07_compile.py, executed as a module."""
    from autograder.engine.variants import reference_module as load
    return load("lab07")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks lab07", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per chain (default 15)")
    parser.add_argument("--n", type=int, default=1 << 22, help="elements per tensor (default 4M)")
    parser.add_argument("--no-inductor", action="store_true", help="skip Inductor")
    parser.add_argument("--no-blocks", action="store_true", help="skip the five real blocks")
    parser.add_argument("--no-block-inductor", action="store_true", help="skip Inductor on the real blocks only")
    parser.add_argument("--block-rounds", type=int, default=None, help="interleaved rounds per block (default: --rounds)")
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
                start = time.process_time()
                f(x, y)
                times[k].append(time.process_time() - start)
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
    if not args.no_blocks:
        blocks(ref, args.block_rounds or args.rounds, not (args.no_inductor or args.no_block_inductor))
    return 0


def real_blocks():
    """Five blocks a model is made of: name -> (module factory, input factory)."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, dim=256, heads=4):
            super().__init__()
            self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            return self.out((att @ v).transpose(1, 2).reshape(b, t, d))

    class RMSNormSwiGLU(nn.Module):
        def __init__(self, dim=512, hidden=1024):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.w1, self.w3, self.w2 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False), nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
            return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))

    return {
        "MLP + GELU": (lambda: nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)), lambda: torch.randn(64, 512)),
        "ConvNet": (lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)), lambda: torch.randn(16, 3, 32, 32)),
        "LayerNorm + GELU": (lambda: nn.Sequential(nn.LayerNorm(1024), nn.GELU()), lambda: torch.randn(256, 1024)),
        "attention": (Attention, lambda: torch.randn(4, 128, 256)),
        "RMSNorm + SwiGLU": (RMSNormSwiGLU, lambda: torch.randn(64, 512)),
    }


def blocks(ref, rounds: int, with_inductor: bool) -> None:
    """Per-block inference and training-step ratios against eager (and Inductor)."""
    import torch
    import torch._dynamo

    from autograder.labs.lab07.oracle import geomean, median
    print(f"real blocks: inference and one training step (forward + backward), 1 thread, {rounds} interleaved rounds, medians")
    ratios = {"eager": [], "inductor": [], "floor": []}
    for label, (make, make_input) in real_blocks().items():
        torch.manual_seed(0)
        model, x = make(), make_input()
        for mode in ("inference", "training"):
            torch._dynamo.reset()
            ref.COMPILED_KERNELS.clear()
            contenders = {"eager": model, "ours": torch.compile(model, backend=ref.fusing_backend, dynamic=False)}
            if with_inductor:
                contenders["inductor"] = torch.compile(model, backend="inductor", dynamic=False)
                contenders["floor"] = torch.compile(model, backend="eager", dynamic=False)

            def step(f):
                if mode == "inference":
                    with torch.no_grad():
                        return f(x)
                model.zero_grad(set_to_none=True)
                out = f(x)
                out.pow(2).mean().backward()
                return out

            want = step(model).detach()
            for name, f in contenders.items():
                got = step(f).detach()  # warm-up, compile excluded from timing
                assert torch.allclose(got, want, rtol=1e-3, atol=1e-3), f"{label} ({mode}): {name} gives a wrong result"
                if name == "ours":
                    done = "eager" if not ref.COMPILED_KERNELS else "kernels " + "/".join(map(str, ref.COMPILED_KERNELS))
            times = {k: [] for k in contenders}
            for _ in range(rounds):
                for k, f in contenders.items():
                    start = time.process_time()
                    step(f)
                    times[k].append(time.process_time() - start)
            med = {k: median(v) for k, v in times.items()}
            line = (f"  {label:18s} {mode:9s} {done:11s} eager {1e3 * med['eager']:7.2f} ms   ours {1e3 * med['ours']:7.2f} ms"
                    f"   vs eager: {med['eager'] / med['ours']:.2f}")
            ratios["eager"].append(med["eager"] / med["ours"])
            if "inductor" in med:
                ratios["inductor"].append(med["inductor"] / med["ours"])
                ratios["floor"].append(med["eager"] / med["floor"])
                line += (f"   inductor {1e3 * med['inductor']:7.2f} ms   vs inductor: {med['inductor'] / med['ours']:.2f}"
                         f"   floor: {med['eager'] / med['floor']:.2f}")
            print(line, flush=True)
    torch._dynamo.reset()
    print(f"real blocks, speedup vs eager: {geomean(ratios['eager']):.2f} (lowest {min(ratios['eager']):.2f})")
    if ratios["inductor"]:
        print(f"real blocks, speed vs inductor: {geomean(ratios['inductor']):.2f}")
        print(f"real blocks, Dynamo's floor (eager over torch.compile(backend='eager')): {geomean(ratios['floor']):.2f} "
              f"(lowest {min(ratios['floor']):.2f})")
