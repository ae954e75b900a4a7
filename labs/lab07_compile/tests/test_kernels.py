"""Public tests of part `kernels` (run them with check("kernels"))."""
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
    assert torch.allclose(out, a * torch.sigmoid(a) + b, atol=1e-6), "a * sigmoid(a) + b with b broadcast over rows"


def test_row_reduction(lab):
    a = torch.randn(5, 7)
    kernel = kernel_for(lab, lambda a: (a.exp() - 1).sum(-1, keepdim=True), a, name="public_sum")
    outs = lab.run_kernel(kernel, [a])
    assert torch.allclose(outs[-1], (a.exp() - 1).sum(-1, keepdim=True), atol=1e-5), "the row sums"


def test_cache(lab):
    a = torch.randn(10)
    kernel = kernel_for(lab, lambda a: a.cos() * 2, a, name="public_cache")
    before = lab.build_count()
    lab.build(kernel.source)
    lab.build(kernel.source)
    assert lab.build_count() == before + 1, f"building a new source twice should run cc once, build_count went from {before} to {lab.build_count()}"
    assert torch.allclose(lab.run_kernel(kernel, [a])[0], a.cos() * 2, atol=1e-6)
