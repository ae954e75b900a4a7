"""Public tests of part `views` (run them with check("views"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=24):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


def layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def same_view(mine, theirs, what):
    assert layout(mine) == layout(theirs), (
        f"{what}: torch gives shape, strides, offset {layout(theirs)}, yours {layout(mine)}")
    np.testing.assert_array_equal(mine.to_numpy(), theirs.numpy(), err_msg=f"{what}: wrong values")


@pytest.mark.parametrize("new_shape", [(6, 4), (4, 6), (24,), (2, 12, 1), (-1, 4), (2, -1, 3)])
def test_view_of_contiguous(lab, new_shape):
    x, xt = make(lab, (2, 3, 4), (12, 4, 1))
    y = x.view(*new_shape)
    same_view(y, xt.view(*new_shape), f"x.view{new_shape} of a contiguous (2, 3, 4) tensor")
    assert y.storage is x.storage, "view must share the storage of x (never copy)"


def test_view_of_transposed(lab):
    # arange(24).view(2, 3, 4).transpose(0, 1): shape (3, 2, 4), strides (4, 12, 1)
    x, xt = make(lab, (3, 2, 4), (4, 12, 1))
    same_view(x.view(3, 2, 2, 2), xt.view(3, 2, 2, 2), "x.view(3, 2, 2, 2) of the transposed tensor")
    with raises(RuntimeError, "x.view(6, 4) of the transposed tensor"):
        x.view(6, 4)  # 6 would span two chunks: torch raises RuntimeError


@pytest.mark.parametrize("bad", [(-1, -1), (-2, 6), (5, 2), (5, -1)])
def test_view_shape_errors(lab, bad):
    x, _ = make(lab, (4, 3), (3, 1))
    with raises(RuntimeError, f"x.view{bad} of shape (4, 3)"):
        x.view(*bad)


def test_reshape_views_when_it_can(lab):
    x, xt = make(lab, (4, 3), (3, 1), offset=2)
    y = x.reshape(2, 6)
    same_view(y, xt.reshape(2, 6), "x.reshape(2, 6) of a contiguous tensor")
    assert y.storage is x.storage, "reshape should return a view (same storage) when a view exists"


def test_reshape_copies_when_it_must(lab):
    x, xt = make(lab, (4, 3), (1, 4))  # a transpose: no (12,) view exists
    y = x.reshape(12)
    assert y.storage is not x.storage, "reshape(12) of a transposed tensor must copy (a new storage)"
    assert tuple(y.stride()) == (1,), f"the copy should be contiguous, strides (1,), got {y.stride()}"
    np.testing.assert_array_equal(y.to_numpy(), xt.reshape(12).numpy(), err_msg="reshape copied the values in the wrong order")


@pytest.mark.parametrize("shape,stride,new_shape", [
    ((2, 1), (1, 3), (2, 1, 1)),     # new size-1 dims take the stride the walk has reached
    ((1, 4), (3, 4), (1, 4)),        # a size-1 dim's old stride is not kept
    ((3, 0, 2), (1, 3, 3), (3, 0, 2)),  # no elements, same shape: the strides stay
])
def test_view_size1_and_empty_rules(lab, shape, stride, new_shape):
    x, xt = make(lab, shape, stride)
    same_view(x.view(*new_shape), xt.view(*new_shape), f"x.view{new_shape} of shape {shape}, strides {stride}")
