"""Public tests of part `my_gradcheck` (run them with check("my_gradcheck"))."""
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, factor):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.factor = inputs[1]

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * ctx.factor * x ** 2, None


def test_numerical_jacobian(lab):
    x = torch.randn(4, dtype=torch.double, requires_grad=True)
    (jac,) = lab.numerical_jacobian(lambda t: t ** 3, (x,))
    assert jac.shape == (4, 4), f"the Jacobian of a (4,) -> (4,) function has shape (4, 4), got {tuple(jac.shape)}"
    assert torch.allclose(jac, torch.diag(3 * x.detach() ** 2), atol=1e-6), "wrong numerical Jacobian of x ** 3"


def test_analytical_jacobian(lab):
    x = torch.randn(2, 3, dtype=torch.double, requires_grad=True)
    (jac,) = lab.analytical_jacobian(lambda t: Cube.apply(t, 2.0), (x,))
    assert jac.shape == (6, 6), f"expected shape (6, 6), got {tuple(jac.shape)}"
    assert torch.allclose(jac, torch.diag(2 * x.detach().reshape(-1) ** 2)), "wrong analytical Jacobian (factor 2 backward)"


def test_verdicts(lab):
    x = torch.randn(5, dtype=torch.double, requires_grad=True)
    assert lab.my_gradcheck(lambda t: Cube.apply(t, 3.0), (x,)) is True, "a correct backward should pass"
    assert lab.my_gradcheck(lambda t: Cube.apply(t, 2.0), (x,)) is False, "a backward wrong by a factor should fail"
