"""Public tests of part `custom_op` (run them with check("custom_op"))."""
import torch
import torch.nn.functional as F


def test_values_and_opcheck(lab):
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.double, requires_grad=True)
    y = lab.scaled_softplus(x, 1.5)
    assert torch.allclose(y, F.softplus(x, 1.5, threshold=100)), "scaled_softplus should match F.softplus"
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.allclose(g, torch.sigmoid(1.5 * x)), "the gradient should be sigmoid(beta * x)"
    results = torch.library.opcheck(lab.scaled_softplus, (x, 1.5))
    assert all(v == "SUCCESS" for v in results.values()), f"opcheck: {results}"


def test_compiles(lab):
    f = torch.compile(lambda t: lab.scaled_softplus(t, 2.0) * 2, fullgraph=True, backend="eager")
    x = torch.randn(5)
    assert torch.allclose(f(x), 2 * F.softplus(x, 2.0, threshold=100), atol=1e-6)
