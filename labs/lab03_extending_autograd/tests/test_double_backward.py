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


def test_zero_dim_and_empty_x(lab):
    beta = torch.tensor(0.7, dtype=torch.double, requires_grad=True)
    for x in (torch.tensor(1.3, dtype=torch.double, requires_grad=True), torch.zeros(0, 2, dtype=torch.double, requires_grad=True)):
        gx, gb = torch.autograd.grad(lab.scaled_swish(x, beta).sum(), (x, beta))
        ref_x = x.detach().requires_grad_()
        ref_b = beta.detach().requires_grad_()
        want = torch.autograd.grad((ref_x * torch.sigmoid(ref_b * ref_x)).sum(), (ref_x, ref_b))
        assert gx.shape == x.shape and gb.shape == (), f"for x of shape {tuple(x.shape)}: gradient shapes should be {tuple(x.shape)} and ()"
        assert torch.allclose(gx, want[0]) and torch.allclose(gb, want[1]), f"wrong gradients for x of shape {tuple(x.shape)}"


def test_backward_uses_the_saved_inputs(lab):
    """The rule 'compute from ctx.saved_tensors': autograd hands backward another x."""
    x = torch.tensor([0.5, -1.0], dtype=torch.double, requires_grad=True)
    beta = torch.tensor(1.5, dtype=torch.double, requires_grad=True)
    other_x = torch.tensor([2.0, 0.0], dtype=torch.double)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: other_x if t.data_ptr() == x.data_ptr() else t):
        y = lab.scaled_swish(x, beta)
    gx, _ = torch.autograd.grad(y.sum(), (x, beta))
    s = torch.sigmoid(beta.detach() * other_x)
    want = s + beta.detach() * other_x * s * (1 - s)
    assert torch.allclose(gx, want), "with the saved x replaced, grad of x should follow the formula on the saved x"
