"""Public tests of part `reductions_broadcast` (run them with check("reductions_broadcast"))."""
import numpy as np
import pytest
import torch

X = np.arange(24.0).reshape(2, 3, 4) / 10
G = np.random.default_rng(0).normal(size=(3,))

CASES = {
    "sum-dim": lambda t: t.sum(1).sum(),
    "sum-keepdim": lambda t: (t.sum(-1, keepdim=True) * t).sum(),
    "mean-dims": lambda t: (t.mean((0, 2)) ** 2.0).sum(),
    "reshape": lambda t: (t.reshape(6, 4) * t.reshape(6, 4)).sum(),
    "transpose": lambda t: (t.transpose(0, 2).exp()).sum(),
    "matmul": lambda t: (t @ t.transpose(1, 2)).tanh().sum(),
    "sum_to_size": lambda t: (t.sum_to_size(3, 1) ** 2.0).sum(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(lab, name):
    fn = CASES[name]
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    out, outt = fn(x), fn(xt)
    np.testing.assert_allclose(out.data, outt.detach().numpy(), err_msg=f"{name}: value")
    out.backward()
    outt.backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg=f"{name}: gradient")


def test_dims_like_pytorch(lab):
    """Rule: dims follow PyTorch: 0-d accepts 0 / -1, () means every dim, a dim twice or out of range raises."""
    s, st = lab.tensor(2.0, requires_grad=True), torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    for fn, text in [(lambda t: t.sum(0) * t.mean(-1), "s.sum(0) * s.mean(-1)"),
                     (lambda t: t.sum(-1, keepdim=True) + t.transpose(0, -1), "s.sum(-1, keepdim=True) + s.transpose(0, -1)")]:
        out, outt = fn(s), fn(st)
        assert np.shape(out.data) == (), f"{text} on a 0-d s should be 0-d, got shape {np.shape(out.data)}"
        out.backward()
        outt.backward()
    np.testing.assert_allclose(s.grad.data, st.grad.numpy(), err_msg="gradients of 0-d reductions (nothing reduced)")
    x, xt = lab.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    (x.sum(()) * x.mean((-1, 0), keepdim=True)).sum().backward()
    (xt.sum(()) * xt.mean((-1, 0), keepdim=True)).sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), err_msg="x.sum(()) (every dim) * x.mean((-1, 0), keepdim=True)")
    with pytest.raises(RuntimeError):
        x.sum((0, -3))
    with pytest.raises(IndexError):
        x.mean(3)
    with pytest.raises(RuntimeError):
        x.reshape(5, 5)
    assert x.reshape(-1, 4).shape == (6, 4), "reshape(-1, 4) of 24 elements should have shape (6, 4)"
