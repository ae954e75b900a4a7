"""Public tests of part `kernels` (run them with check("kernels"))."""
import re

import torch
from torch.fx.experimental.proxy_tensor import make_fx


def kernel_for(lab, fn, *args, name="public"):
    gm = make_fx(fn, decomposition_table=lab.DECOMPOSITIONS)(*args)
    group = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    return lab.generate_kernel(gm, group, name)


def test_broadcast_chain(lab):
    a, b = torch.randn(4, 8), torch.randn(8)
    kernel = kernel_for(lab, lambda a, b: a * torch.sigmoid(a) + b, a, b)
    (out,) = lab.run_kernel(kernel, [a, b])
    assert torch.allclose(out, a * torch.sigmoid(a) + b, atol=1e-6), "a * sigmoid(a) + b with b [8] broadcast over the rows of a [4, 8]"


def test_row_reduction(lab):
    a = torch.randn(5, 7)
    kernel = kernel_for(lab, lambda a: (a.exp() - 1).sum(-1, keepdim=True), a, name="public_sum")
    outs = lab.run_kernel(kernel, [a])
    assert torch.allclose(outs[-1], (a.exp() - 1).sum(-1, keepdim=True), atol=1e-5), "(exp(a) - 1).sum(-1, keepdim=True): the row sums"


def test_all_dims_reduction(lab):
    a = torch.randn(3, 4)
    kernel = kernel_for(lab, lambda a: (a * 2).sum(dim=(0, 1)), a, name="public_all")
    outs = lab.run_kernel(kernel, [a])
    assert outs[-1].numel() == 1 and torch.allclose(outs[-1].reshape(()), (a * 2).sum(), atol=1e-5), (
        f"(a * 2).sum(dim=(0, 1)) reduces everything to one value {float((a * 2).sum()):.4f}, got {outs[-1]}")


def test_source_stands_alone(lab):
    a = torch.randn(6)
    kernel = kernel_for(lab, lambda a: a.cos() * 2, a, name="public_alone")
    includes = re.findall(r"^\s*#\s*include\s*<([^>]*)>", kernel.source, flags=re.M)
    allowed = {"math.h", "stdint.h", "stddef.h", "stdbool.h", "float.h"}
    assert set(includes) <= allowed, f"the graders compile your source alone: it may include only {sorted(allowed)}, it includes {includes}"
    assert re.search(r"\bvoid\s+public_alone\s*\(", kernel.source), "the source should define `void public_alone(...)`, the name given"
    assert "#pragma" not in kernel.source and "asm" not in kernel.source, "kernel sources may not use pragmas or asm"
    assert kernel.inputs == ["a_1"] and kernel.outputs == ["mul"], (
        f"the kernel should read the graph input a_1 and write mul (the graph's output), got inputs {kernel.inputs}, outputs {kernel.outputs}")


def test_cache(lab):
    a = torch.randn(10)
    kernel = kernel_for(lab, lambda a: a.cos() * 2, a, name="public_cache")
    before = lab.build_count()
    lab.build(kernel.source)
    lab.build(kernel.source)
    assert lab.build_count() == before + 1, f"building a new source twice should run cc once, build_count went from {before} to {lab.build_count()}"
    assert torch.allclose(lab.run_kernel(kernel, [a])[0], a.cos() * 2, atol=1e-6), "the built kernel of cos(a) * 2 gives wrong values"
