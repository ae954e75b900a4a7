"""Public tests of part `custom_function` (run them with check("custom_function"))."""
import torch
import torch.nn.functional as F


def inputs(bias=True):
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.double, requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.double, requires_grad=True)
    b = torch.randn(5, dtype=torch.double, requires_grad=True) if bias else None
    return x, w, b


def test_forward_matches_torch(lab):
    x, w, b = inputs()
    y = lab.linear_tanh(x, w, b)
    assert torch.allclose(y, torch.tanh(F.linear(x, w, b))), "linear_tanh(x, w, b) should equal tanh(F.linear(x, w, b))"
    assert type(y.grad_fn).__name__ == "LinearTanhBackward", f"the output's grad_fn should be LinearTanhBackward, got {y.grad_fn}"


def test_gradients_match_torch(lab):
    x, w, b = inputs()
    g = torch.randn(4, 5, dtype=torch.double)
    mine = torch.autograd.grad(lab.linear_tanh(x, w, b), (x, w, b), g)
    want = torch.autograd.grad(torch.tanh(F.linear(x, w, b)), (x, w, b), g)
    for name, m, t in zip(("x", "weight", "bias"), mine, want):
        assert torch.allclose(m, t), f"the gradient of {name} differs from torch's"


def test_gradcheck(lab):
    assert torch.autograd.gradcheck(lab.linear_tanh, inputs(), raise_exception=False), "gradcheck fails on linear_tanh"
    assert torch.autograd.gradcheck(lab.linear_tanh, inputs(bias=False), raise_exception=False), "gradcheck fails with bias=None"
