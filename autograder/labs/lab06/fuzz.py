"""Differential fuzzing of lab06's reference (solutions/lab06_fx.py) against torch.fx and eager PyTorch.

Runs in P0 with real torch; imports the reference from the solution source. `run(examples)` checks
`examples` random cases per family and returns how many it checked; a disagreement raises AssertionError.
Families: generated straight-line programs (every operator the tracer records, reflected and keyword
forms) traced by the reference vs torch.fx with the lab's rules (oracle.LabTracer) and vs torch.fx's own
Proxy; the reference's generated code vs eager (float32/float64 inputs, size-1 and size-0 batches);
Conv2d + BatchNorm2d folding over groups/stride/dilation/bias/affine/eps/track_running_stats vs eager;
CSE/DCE vs the lab's rules on real fx; run_graph vs eager on make_fx graphs.
"""
# IPT-CANARY lab06 fuzz.py: hidden grading text, never shown to learners
from __future__ import annotations

import functools
import pathlib
import random
import types

import numpy as np
import torch
import torch.fx
from torch import nn

from autograder.labs.lab06 import oracle
from autograder.labs.lab06 import scenarios as sc

SOLUTION = pathlib.Path(__file__).resolve().parents[3] / "solutions" / "lab06_fx.py"


@functools.lru_cache(maxsize=1)
def reference():
    from autograder.authoring.generate import solution_notebook
    nb = solution_notebook(SOLUTION.read_text())
    code = "\n\n".join(c.source for c in nb.cells if c.cell_type == "code" and "export" in c.metadata.get("tags", []))
    mod = types.ModuleType("lab06_reference")
    exec(compile(code, "lab06_reference", "exec"), mod.__dict__)
    return mod


def _program(rng, n):
    return [[rng.choice(sc.PROGRAM_OPS), rng.randrange(20), rng.randrange(20), rng.choice([0.5, 2.0, -3.0, 1, 1e-7, 0.1234567891234])]
            for _ in range(n)]


def _programs(ref, rng):
    program = _program(rng, rng.randint(1, 10))
    oracle.compare_graphs(sc.trace_model(ref, "program", 0, program)["graph"], oracle.fx_graph("program", 0, program), f"trace {program}")
    probe = [s for s in program if s[0] in sc.PROBE_OPS] or [["add", 0, 1, 1]]
    oracle.compare_graphs(sc.probe(ref, probe), oracle.fx_probe(probe), f"probe {probe}")
    model, _ = sc.build("program", 0, program)
    rows = rng.choice([4])                       # the program's ops assume 4 rows of 6
    dtype = rng.choice([torch.float32, torch.float64])
    x, y = torch.randn(rows, 6, dtype=dtype), torch.randn(rows, 6, dtype=dtype)
    model = model.to(dtype)
    mini = ref.MiniGraphModule(model, ref.from_fx(torch.fx.symbolic_trace(model)))
    src, _ = ref.python_code(mini.graph)
    oracle.check_source(src, [n.name for n in mini.graph.nodes], [n.op for n in mini.graph.nodes], "source",
                        oracle.graph_floats("program", program))
    with torch.no_grad():
        want = sc._flat(model(x, y))
        got = sc._flat(mini(x, y))
    oracle.close(got, want, f"codegen {program} ({dtype})", rtol=1e-5, atol=1e-6)
    return 3


def _fold(ref, rng):
    groups = rng.choice([1, 2])
    cin, cout = groups * rng.randint(1, 3), groups * rng.randint(1, 3)
    conv = nn.Conv2d(cin, cout, rng.choice([1, 3]), stride=rng.choice([1, 2]), padding=rng.choice([0, 1, 2]),
                     dilation=rng.choice([1, 2]), groups=groups, bias=rng.random() < 0.5)
    bn = nn.BatchNorm2d(cout, affine=rng.random() < 0.7, eps=rng.choice([1e-5, 1e-3, 0.1]),
                        track_running_stats=rng.random() < 0.85)
    shared = rng.random() < 0.2

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = conv, bn

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + (y if shared else 0)

    model = sc._randomize_bn(M(), rng.randrange(100)).eval()
    x = torch.randn(rng.choice([1, 2]), cin, rng.choice([5, 6]), rng.choice([5, 7]))
    with torch.no_grad():
        want = model(x)
        gm = ref.fold_conv_bn(torch.fx.symbolic_trace(model))
        got = gm(x)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), f"fold: {conv} {bn}: max diff {(got - want).abs().max()}"
    bns = sc._count_modules(gm, nn.BatchNorm2d)
    assert bns == (1 if shared or not bn.track_running_stats else 0), f"fold: {conv} {bn} shared={shared}: {bns} BN left"
    model.train()
    try:
        ref.fold_conv_bn(torch.fx.symbolic_trace(model))
    except ValueError:
        pass
    else:
        raise AssertionError("fold: training mode must raise ValueError")
    return 1


def _clean(ref, rng):
    name = rng.choice(list(sc.CLEAN_MODELS))
    which = rng.choice([["dce"], ["cse"], ["cse", "dce"], ["dce", "cse"], ["cse", "cse"]])
    got, want = sc.clean(ref, name, which), oracle.clean_expect(name, which)
    assert got["removed"] == want["removed"] and got["nodes"] == want["nodes"], f"clean {name} {which}"
    oracle.close(got["outs"], want["outs"], f"clean {name} {which}")
    return 1


_UNARY = [torch.tanh, torch.sigmoid, torch.relu, torch.exp, torch.nn.functional.gelu, torch.nn.functional.silu,
          lambda t: t.clamp(min=-0.5), lambda t: t.sum(dim=0, keepdim=True) - t, lambda t: t.softmax(-1),
          lambda t: t.var(dim=-1, correction=0, keepdim=True) + t, lambda t: t.transpose(0, 1).contiguous().transpose(0, 1)]


def _run_graph(ref, rng):
    fs = [rng.choice(_UNARY) for _ in range(rng.randint(1, 4))]

    def fn(x):
        for f in fs:
            x = f(x)
        return x

    x = torch.randn(rng.choice([1, 3]), rng.choice([1, 4]))
    gm = ref.to_core_aten(fn, x)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert n.target is __import__("operator").getitem or torch.Tag.core in n.target.tags, f"not core: {n.target}"
    with torch.no_grad():
        assert torch.allclose(ref.run_graph(gm, x), fn(x), atol=1e-5), "run_graph differs from eager"
    return 1


def run(examples: int = 50) -> int:
    ref, rng, checked = reference(), random.Random(20261123), 0
    torch.manual_seed(0)
    for _ in range(max(1, examples // 2)):
        checked += _programs(ref, rng)
        checked += _fold(ref, rng)
    for _ in range(max(1, examples // 10)):
        checked += _clean(ref, rng)
        checked += _run_graph(ref, rng)
    return checked


if __name__ == "__main__":
    import sys
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 50), "cases agree")
