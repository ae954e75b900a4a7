"""Public tests of part `engine` (run them with check("engine"))."""
import numpy as np
import pytest
import torch


def test_diamond(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    a, b = lab.given_mul(x, 2.0), lab.given_mul(x, 3.0)
    y = lab.given_sum(lab.given_mul(a, b))
    y.backward()
    np.testing.assert_allclose(x.grad.data, [12.0, 24.0], err_msg="y = sum(6 x^2): dy/dx = 12 x")


def test_accumulates_and_retain_graph(lab):
    x = lab.tensor([1.0, -1.0], requires_grad=True)
    y = lab.given_sum(lab.given_mul(x, x))
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.data, [4.0, -4.0], err_msg="two backwards accumulate 2x twice")
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_errors(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        lab.given_mul(x, 2.0).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        lab.given_sum(lab.tensor([1.0])).backward()


def test_deep_chain(lab):
    x = lab.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(5000):
        y = lab.given_mul(y, 1.0)
    y.backward()
    np.testing.assert_allclose(x.grad.data, [1.0], err_msg="a 5,000-node chain (no recursion!)")


def test_matches_torch(lab):
    xv = np.array([0.5, -1.0, 2.0])
    x = lab.tensor(xv, requires_grad=True)
    a = lab.given_mul(x, x)
    y = lab.given_sum(lab.given_mul(lab.given_add(a, x), a))
    y.backward()
    xt = torch.tensor(xv, requires_grad=True)
    at = xt * xt
    ((at + xt) * at).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg="(x*x + x) * (x*x)")


def test_leaf_root_and_one_element_root(lab):
    """Rule: the root of a leaf is its AccumulateGrad; backward() without a gradient needs one element (any shape)."""
    x = lab.tensor([[3.0]], requires_grad=True)
    lab.given_mul(x, x).backward()
    np.testing.assert_allclose(x.grad.data, [[6.0]], err_msg="(x * x).backward() for x of shape (1, 1)")
    x.backward(np.array([[1.0]]))
    np.testing.assert_allclose(x.grad.data, [[7.0]], err_msg="x.backward(...) on a leaf accumulates into x.grad")
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        lab.given_sum(x).backward(np.ones(1))
