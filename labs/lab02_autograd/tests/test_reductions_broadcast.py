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
