"""Public tests of part `elementwise` (run them with check("elementwise"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=24):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


def test_add_broadcast_transposed(lab):
    a, at = make(lab, (3, 2), (1, 3))     # a transpose
    b, bt = make(lab, (2,), (1,), 10)     # broadcast along dim 0
    out = lab.add(a, b)
    want = (at + bt).numpy()
    assert tuple(out.shape) == want.shape, f"add: shape should be {want.shape}, got {out.shape}"
    np.testing.assert_array_equal(out.to_numpy(), want, err_msg="add of a transpose and a row: wrong values")
    assert out.is_contiguous() and out.storage is not a.storage, "the result is a fresh contiguous tensor"


def test_mul_and_operators(lab):
    a, at = make(lab, (3, 1), (1, 1))
    b, bt = make(lab, (1, 4), (4, 1), 2)
    np.testing.assert_array_equal((a * b).to_numpy(), (at * bt).numpy(), err_msg="a * b of shapes (3, 1) and (1, 4)")
    np.testing.assert_array_equal((a + 1).to_numpy(), (at + 1).numpy(), err_msg="a + 1")


def test_mismatch_raises(lab):
    a, _ = make(lab, (3,), (1,))
    b, _ = make(lab, (4,), (1,))
    with raises(RuntimeError, "add of shapes (3,) and (4,)"):
        lab.add(a, b)


@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, False), (-1, True)])
def test_sum(lab, dim, keepdim):
    x, xt = make(lab, (3, 4), (1, 3))
    out, want = x.sum(dim, keepdim=keepdim), xt.sum(dim, keepdim=keepdim)
    assert tuple(out.shape) == tuple(want.shape), f"sum({dim}, keepdim={keepdim}): shape should be {tuple(want.shape)}, got {out.shape}"
    np.testing.assert_array_equal(out.to_numpy(), want.numpy(), err_msg=f"sum({dim}, keepdim={keepdim}): wrong values")


@pytest.mark.parametrize("dim,keepdim", [(0, True), (-1, False)])
def test_sum_of_0d(lab, dim, keepdim):
    x, xt = make(lab, (), (), 5)
    out, want = x.sum(dim, keepdim=keepdim), xt.sum(dim, keepdim=keepdim)
    assert tuple(out.shape) == tuple(want.shape), (
        f"sum({dim}, keepdim={keepdim}) of a 0-d tensor: shape should be {tuple(want.shape)} like torch, got {out.shape}")
    assert out.item() == want.item(), f"sum({dim}, keepdim={keepdim}) of a 0-d tensor holding 5 should be 5, got {out.item()}"


def test_mixed_dtypes(lab):
    a = lab.tensor([1, 2, 3])
    b = lab.tensor([0.5, 0.25, 0.125])
    out = lab.add(a, b)
    assert out.dtype == np.float64, f"int64 + float64 should give float64 (np.result_type), got {out.dtype}"
    np.testing.assert_array_equal(out.to_numpy(), [1.5, 2.25, 3.125], err_msg="int64 + float64 values")
