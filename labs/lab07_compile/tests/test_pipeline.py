"""Public tests of part `pipeline` (run them with check("pipeline"))."""
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx


def test_gelu_mlp_forward_and_gradients(lab):
    torch._dynamo.reset()
    lab.COMPILED_KERNELS.clear()

    def mlp(x, w1, b1, w2):
        return F.gelu(x @ w1 + b1) @ w2

    torch.manual_seed(0)
    args = [torch.randn(6, 8, requires_grad=True), torch.randn(8, 16, requires_grad=True),
            torch.randn(16, requires_grad=True), torch.randn(16, 3, requires_grad=True)]
    out = torch.compile(mlp, backend=lab.fusing_backend)(*args)
    assert torch.allclose(out, mlp(*args), atol=1e-5), "the forward of gelu(x @ w1 + b1) @ w2 should equal eager"
    grads = torch.autograd.grad(out.sum(), args)
    want = torch.autograd.grad(mlp(*args).sum(), args)
    for name, g, w in zip(["x", "w1", "b1", "w2"], grads, want):
        assert torch.allclose(g, w, atol=1e-4), f"the gradient of {name} should equal eager"
    assert lab.COMPILED_KERNELS == [1, 1], f"the forward and the backward each fuse into one kernel, got {lab.COMPILED_KERNELS}"
    torch._dynamo.reset()


def test_softmax_kernels(lab):
    torch._dynamo.reset()
    lab.COMPILED_KERNELS.clear()
    x = torch.randn(5, 9)
    out = torch.compile(lambda t: torch.softmax(t, -1), backend=lab.fusing_backend)(x)
    assert torch.allclose(out, torch.softmax(x, -1), atol=1e-6), "softmax(x, -1) compiled with your backend should equal eager"
    assert lab.COMPILED_KERNELS == [], (
        "softmax is one ATen call (one pass) in eager; decomposed, only sub, exp, sum_1 is worth a kernel, and amax, "
        "the kernel and div make 3 passes: the graph stays in eager and compile_graph is never called, got "
        f"{lab.COMPILED_KERNELS}")
    torch._dynamo.reset()


def test_worth_fusing_needs_two_nodes(lab):
    gm = make_fx(lambda t: torch.softmax(t, -1), decomposition_table=lab.DECOMPOSITIONS)(torch.randn(4, 8))
    got = [lab.worth_fusing(gm, g) for g in lab.plan_fusion(gm)]
    assert got == [False, True, False], f"softmax's groups amax; sub, exp, sum_1; div: only the middle one is worth a kernel, got {got}"


def test_count_passes_skips_views(lab):
    gm = make_fx(lambda x, w: (x @ w).t().exp() * 2, decomposition_table=lab.DECOMPOSITIONS)(torch.randn(3, 4), torch.randn(4, 5))
    names = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    assert names == ["mm", "permute", "exp", "mul"], f"unexpected graph {names}"
    assert lab.count_passes(gm, []) == 3, "mm, exp and mul are one pass each; permute is a view (no pass)"
    assert lab.count_passes(gm, [["exp", "mul"]]) == 2, "with exp, mul as one kernel: mm and the kernel"


def test_fuse_graph_fuses_only_the_groups_given(lab):
    gm = make_fx(lambda t: torch.softmax(t, -1), decomposition_table=lab.DECOMPOSITIONS)(torch.randn(4, 8))
    fused, kernels = lab.fuse_graph(gm, [["sub", "exp", "sum_1"]])
    assert len(kernels) == 1, f"fuse_graph(gm, [[sub, exp, sum_1]]) makes one kernel, got {len(kernels)}"
    x = torch.randn(4, 8)
    assert torch.allclose(fused(x), torch.softmax(x, -1), atol=1e-6), "the fused softmax should equal eager's"


def test_a_graph_fusion_cannot_speed_up_stays_in_eager(lab):
    torch._dynamo.reset()
    lab.COMPILED_KERNELS.clear()
    x = torch.randn(4, 8)
    out = torch.compile(lambda t: torch.sigmoid(t) @ t.t(), backend=lab.fusing_backend)(x)
    assert torch.allclose(out, torch.sigmoid(x) @ x.t(), atol=1e-5), "sigmoid(x) @ x.t() should equal eager"
    assert lab.COMPILED_KERNELS == [], ("sigmoid alone is a group of one node: fusing saves no pass, so the graph stays in "
                                        f"eager and compile_graph is never called, got {lab.COMPILED_KERNELS}")
    torch._dynamo.reset()


def test_fuse_graph_returns_one_kernel_per_group(lab):
    gm = make_fx(lambda x, w: torch.tanh(x @ w) * 2 + (x @ w).sum(-1, keepdim=True), decomposition_table=lab.DECOMPOSITIONS)(
        torch.randn(3, 4), torch.randn(4, 5))
    fused, kernels = lab.fuse_graph(gm)
    assert len(kernels) == len(lab.plan_fusion(gm)), f"fuse_graph should return one Kernel per group of plan_fusion, got {len(kernels)}"
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    assert torch.allclose(fused(x, w), torch.tanh(x @ w) * 2 + (x @ w).sum(-1, keepdim=True), atol=1e-5), (
        "the GraphModule fuse_graph returns should compute what the graph computes")


def test_all_dims_sum_through_the_backend(lab):
    torch._dynamo.reset()
    x = torch.randn(4, 5)
    out = torch.compile(lambda t: (t * 2).sum(dim=(0, 1)), backend=lab.fusing_backend)(x)
    assert torch.allclose(out, (x * 2).sum(dim=(0, 1)), atol=1e-5), f"(x * 2).sum(dim=(0, 1)) should be {float((x * 2).sum()):.4f}, got {out}"
    torch._dynamo.reset()
