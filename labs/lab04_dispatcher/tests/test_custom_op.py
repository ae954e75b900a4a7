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
    assert torch.allclose(f(x), 2 * F.softplus(x, 2.0, threshold=100), atol=1e-6), "the compiled function should give 2 * softplus(x, 2.0)"


def test_edge_shapes_and_fake(lab):
    from torch._subclasses.fake_tensor import FakeTensorMode
    for x in (torch.tensor(0.5, dtype=torch.double), torch.zeros(0, 3), torch.randn(2, 3, dtype=torch.float32)):
        y = torch.ops.ipt.scaled_softplus.default(x, 2.0)
        assert y.shape == x.shape and y.dtype == x.dtype, f"shape {tuple(x.shape)} {x.dtype}: got {tuple(y.shape)} {y.dtype}"
        assert torch.allclose(y.double(), F.softplus(x.double(), 2.0, threshold=100), atol=1e-6), f"values for shape {tuple(x.shape)}"
    with FakeTensorMode():
        fake = torch.ops.ipt.scaled_softplus.default(torch.empty(4, 2), 1.0)
    assert fake.shape == (4, 2), "the fake kernel should give the input's shape"
