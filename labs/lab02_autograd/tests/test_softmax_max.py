"""Public tests of part `softmax_max` (run them with check("softmax_max"))."""
import numpy as np
import pytest
import torch

X = np.array([[1.0, 3.0, -2.0], [0.5, -0.5, 4.0]])
W = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])


def test_stable(lab):
    big = np.array([[1000.0, 0.0, -1000.0]])
    np.testing.assert_allclose(lab.softmax_forward(big, 1), [[1.0, 0.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(lab.log_softmax_forward(big, 1), [[0.0, -1000.0, -2000.0]])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax(lab, name, dim):
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    (getattr(x, name)(dim) * lab.tensor(W)).sum().backward()
    (getattr(xt, name)(dim) * torch.tensor(W)).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg=f"{name}({dim}): gradient")


def test_max(lab):
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    v, i = x.max(1)
    vt, it = xt.max(1)
    np.testing.assert_allclose(v.data, vt.detach().numpy())
    np.testing.assert_array_equal(np.asarray(i.data), it.numpy())
    (v * lab.tensor([1.0, 2.0])).sum().backward()
    (vt * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg="max(1): gradient goes to the argmax")


def test_max_ties_and_zero_d(lab):
    """Rule: on ties the first maximum is the index and alone gets the gradient; a 0-d tensor is its own maximum."""
    t = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    x, xt = lab.tensor(t, requires_grad=True), torch.tensor(t, requires_grad=True)
    v, i = x.max(1)
    vt, it = xt.max(1)
    np.testing.assert_array_equal(np.asarray(i.data), it.numpy(), err_msg="max(1) with ties: the first maximum")
    v.sum().backward()
    vt.sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg="max(1) with ties: only the first maximum gets the gradient")
    s = lab.tensor(1.5, requires_grad=True)
    value, index = s.max(0)
    assert np.shape(value.data) == () and int(np.asarray(index.data)) == 0, "a 0-d tensor's max(0) is itself, index 0"
