"""Public tests of part `double_backward` (run them with check("double_backward"))."""
import torch


def test_first_derivatives(lab):
    x = torch.linspace(-2, 2, 7, dtype=torch.double, requires_grad=True)
    beta = torch.tensor(1.3, dtype=torch.double, requires_grad=True)
    mine = torch.autograd.grad(lab.scaled_swish(x, beta).sum(), (x, beta))
    want = torch.autograd.grad((x * torch.sigmoid(beta * x)).sum(), (x, beta))
    assert torch.allclose(mine[0], want[0]), "the gradient of x differs from torch's"
    assert mine[1].shape == () and torch.allclose(mine[1], want[1]), "the gradient of beta should be a 0-d sum, as torch's"


def test_gradgradcheck(lab):
    x = torch.randn(5, dtype=torch.double, requires_grad=True)
    beta = torch.tensor(0.7, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(lab.scaled_swish, (x, beta), raise_exception=False), "gradcheck fails"
    assert torch.autograd.gradgradcheck(lab.scaled_swish, (x, beta), raise_exception=False), "gradgradcheck fails"
