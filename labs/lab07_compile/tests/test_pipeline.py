"""Public tests of part `pipeline` (run them with check("pipeline"))."""
import torch
import torch.nn.functional as F


def test_gelu_mlp_forward_and_gradients(lab):
    torch._dynamo.reset()
    lab.COMPILED_KERNELS.clear()

    def mlp(x, w1, b1, w2):
        return F.gelu(x @ w1 + b1) @ w2

    torch.manual_seed(0)
    args = [torch.randn(6, 8, requires_grad=True), torch.randn(8, 16, requires_grad=True),
            torch.randn(16, requires_grad=True), torch.randn(16, 3, requires_grad=True)]
    out = torch.compile(mlp, backend=lab.fusing_backend)(*args)
    assert torch.allclose(out, mlp(*args), atol=1e-5), "the forward should equal eager"
    grads = torch.autograd.grad(out.sum(), args)
    want = torch.autograd.grad(mlp(*args).sum(), args)
    for g, w in zip(grads, want):
        assert torch.allclose(g, w, atol=1e-4), "the gradients should equal eager"
    assert lab.COMPILED_KERNELS == [1, 1], f"the forward and the backward each fuse into one kernel, got {lab.COMPILED_KERNELS}"
    torch._dynamo.reset()


def test_softmax_kernels(lab):
    torch._dynamo.reset()
    lab.COMPILED_KERNELS.clear()
    x = torch.randn(5, 9)
    out = torch.compile(lambda t: torch.softmax(t, -1), backend=lab.fusing_backend)(x)
    assert torch.allclose(out, torch.softmax(x, -1), atol=1e-6)
    assert lab.COMPILED_KERNELS == [3], f"softmax plans 3 kernels, got {lab.COMPILED_KERNELS}"
    torch._dynamo.reset()
