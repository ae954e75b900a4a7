"""Public tests of part `ops` (run them with check("ops"))."""
import numpy as np
import pytest
import torch


def test_sum_to_size(lab):
    g = np.arange(24.0).reshape(2, 4, 3)
    for shape in [(4, 3), (3,), (4, 1), (1, 1)]:
        np.testing.assert_allclose(lab.sum_to_size(g, shape), torch.from_numpy(g).sum_to_size(shape).numpy(),
                                   err_msg=f"sum_to_size to {shape}")


X = np.array([[0.5, -1.5, 0.25], [2.0, 0.75, -0.5]])
R = np.array([0.5, 1.5, 2.5])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_broadcast(lab, name):
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}[name]
    x, r = lab.tensor(X, requires_grad=True), lab.tensor(R, requires_grad=True)
    fn(x, r).sum().backward()
    xt, rt = torch.tensor(X, requires_grad=True), torch.tensor(R, requires_grad=True)
    fn(xt, rt).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg=f"{name}: gradient of x (2, 3)")
    np.testing.assert_allclose(r.grad.data, rt.grad.numpy(), err_msg=f"{name}: gradient of r (3,), broadcast")


@pytest.mark.parametrize("name", ["neg", "pow", "exp", "log", "tanh", "sigmoid", "relu"])
def test_unary(lab, name):
    fn = {"neg": lambda t: -t, "pow": lambda t: t ** 3.0, "exp": lambda t: t.exp(), "log": lambda t: t.log(),
          "tanh": lambda t: t.tanh(), "sigmoid": lambda t: t.sigmoid(), "relu": lambda t: t.relu()}[name]
    v = np.abs(X) if name == "log" else X
    x, xt = lab.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    fn(x).sum().backward()
    fn(xt).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg=f"{name}: gradient")
