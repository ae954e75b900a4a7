"""Public tests of part `forward_ad` (run them with check("forward_ad"))."""
import torch


def test_jvp(lab):
    x, y = torch.randn(3, dtype=torch.double), torch.randn(3, dtype=torch.double)
    vx, vy = torch.randn(3, dtype=torch.double), torch.randn(3, dtype=torch.double)
    out, tangent = lab.jvp(lambda a, b: a * torch.exp(b), (x, y), (vx, vy))
    assert torch.allclose(out, x * torch.exp(y)), "wrong output"
    assert torch.allclose(tangent, vx * torch.exp(y) + x * torch.exp(y) * vy), "wrong tangent"


def test_jvp_of_constant(lab):
    x = torch.randn(3, dtype=torch.double)
    out, tangent = lab.jvp(lambda a: torch.ones(2, dtype=a.dtype), (x,), (torch.ones(3, dtype=torch.double),))
    assert torch.equal(tangent, torch.zeros(2, dtype=torch.double)), "a function that ignores its input has a zero tangent"


def test_hvp(lab):
    f = lambda x: (x ** 3).sum() + x[0] * x[1]  # noqa: E731
    x, v = torch.randn(4, dtype=torch.double), torch.randn(4, dtype=torch.double)
    want = torch.autograd.functional.hessian(f, x) @ v
    assert torch.allclose(lab.hvp(f, x, v), want), "hvp differs from hessian(f, x) @ v"


class OldCube(torch.autograd.Function):
    """An old-style Function with a jvp and no backward: dual tensors handle it, torch.func refuses it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x ** 3

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * x_t

    @staticmethod
    def backward(ctx, grad_out):
        raise RuntimeError("forward-mode only")


def test_old_style_function_and_hvp(lab):
    x, v = torch.randn(4, dtype=torch.double), torch.randn(4, dtype=torch.double)
    out, tangent = lab.jvp(OldCube.apply, (x,), (v,))
    assert torch.allclose(tangent, 3 * x ** 2 * v), "jvp through a Function's own jvp: 3 x^2 v (use dual tensors)"
    hv = lab.hvp(lambda t: OldCube.apply(t).sum(), x, v)
    assert torch.allclose(hv, 6 * x * v), "hvp of sum(x^3) through a forward-only Function: 6 x v (reverse over forward)"
    assert not hv.requires_grad, "hvp returns a tensor without history"
