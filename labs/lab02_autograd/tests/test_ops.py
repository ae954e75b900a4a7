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


def test_relu_selects(lab):
    """Rule: relu's backward selects; an infinite gradient times 0 would be nan (PyTorch gives 0)."""
    v = np.array([-1.0, 0.0, 4.0])
    x, xt = lab.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    (x.relu() ** 0.5).sum().backward()
    (xt.relu() ** 0.5).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(),
                               err_msg="(x.relu() ** 0.5).sum() at x = [-1, 0, 4]: use np.where(result > 0, grad, 0), not grad * mask")


def test_zero_d_and_size_0_broadcasting(lab):
    """Rule: 0-d and size-0 tensors broadcast as in PyTorch; a size-1 dim against a size-0 one gets a gradient of 0."""
    s, st = lab.tensor(1.5, requires_grad=True), torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    (s * x / s - s).tanh().sum().backward()
    (st * xt / st - st).tanh().sum().backward()
    np.testing.assert_allclose(s.grad.data, st.grad.numpy(), err_msg="gradient of a 0-d s in (s * x / s - s).tanh()")
    assert np.shape(s.grad.data) == (), f"the gradient of a 0-d tensor is 0-d, got shape {np.shape(s.grad.data)}"
    e, r = lab.tensor(np.zeros((0, 3)), requires_grad=True), lab.tensor(np.ones((1, 3)), requires_grad=True)
    (e * r).backward(np.zeros((0, 3)))
    assert e.grad.data.shape == (0, 3), f"e of shape (0, 3): its gradient should have shape (0, 3), got {e.grad.data.shape}"
    np.testing.assert_array_equal(r.grad.data, np.zeros((1, 3)), err_msg="r (1, 3) broadcast against (0, 3): gradient 0")


def test_reflected_operands_and_negative_bases(lab):
    """Rule: a number on either side is a constant; pow works on negative bases for whole exponents."""
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    ((2.0 / (x * x + 1.0)) - (1.0 - x) + x ** 3.0 + x ** -1.0).sum().backward()
    ((2.0 / (xt * xt + 1.0)) - (1.0 - xt) + xt ** 3.0 + xt ** -1.0).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg="2 / (x*x + 1) - (1 - x) + x**3 + x**-1")
