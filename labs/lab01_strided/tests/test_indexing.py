"""Public tests of part `indexing` (run them with check("indexing"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=24):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


def layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def same_view(mine, theirs, what):
    assert layout(mine) == layout(theirs), f"{what}: torch gives shape, strides, offset {layout(theirs)}, yours {layout(mine)}"
    np.testing.assert_array_equal(mine.to_numpy(), theirs.numpy(), err_msg=f"{what}: wrong values")


def test_transpose(lab):
    x, xt = make(lab, (2, 3, 4), (12, 4, 1))
    same_view(x.transpose(0, 2), xt.transpose(0, 2), "x.transpose(0, 2)")
    same_view(x.transpose(-1, 1), xt.transpose(-1, 1), "x.transpose(-1, 1)")


def test_permute(lab):
    x, xt = make(lab, (2, 3, 4), (12, 4, 1))
    same_view(x.permute(0, 2, 1), xt.permute(0, 2, 1), "x.permute(0, 2, 1)")
    with raises(RuntimeError, "x.permute(0, 1) of a 3-d tensor"):
        x.permute(0, 1)  # wrong number of dims


def test_select(lab):
    x, xt = make(lab, (3, 4), (4, 1))
    same_view(x.select(1, -1), xt.select(1, -1), "x.select(1, -1)")
    with raises(IndexError, "x.select(0, 3) of shape (3, 4)"):
        x.select(0, 3)


@pytest.mark.parametrize("index", [1, -1, (1, 2), slice(1, None), (slice(None), slice(None, None, 2)), (slice(1, None), -1)],
                         ids=["1", "-1", "1,2", "1:", ":,::2", "1:,-1"])
def test_getitem(lab, index):
    x, xt = make(lab, (3, 4), (4, 1))
    same_view(x[index], xt[index], f"x[{index}]")


def test_getitem_errors(lab):
    x, _ = make(lab, (3, 4), (4, 1))
    with raises(IndexError, "x[3] of shape (3, 4)"):
        x[3]
    with raises(ValueError, "x[::-1]"):
        x[::-1]  # PyTorch has no negative strides


def test_transpose_of_0d(lab):
    x, xt = make(lab, (), (), 3)
    same_view(x.transpose(0, -1), xt.transpose(0, -1), "x.transpose(0, -1) of a 0-d tensor (dims 0 and -1 are allowed)")
    with raises(IndexError, "x.transpose(0, 1) of a 0-d tensor"):
        x.transpose(0, 1)


def test_empty_slice_still_moves_the_offset(lab):
    x, xt = make(lab, (3, 4), (4, 1))
    same_view(x[5:], xt[5:], "x[5:] of shape (3, 4) (the start is clamped to 3 and the offset moves there)")


def test_permute_duplicate_in_another_spelling(lab):
    x, xt = make(lab, (2, 3, 4), (12, 4, 1))
    same_view(x.permute(-1, 0, 1), xt.permute(-1, 0, 1), "x.permute(-1, 0, 1)")
    with raises(RuntimeError, "x.permute(0, -1, 2) of a 3-d tensor (-1 and 2 are the same dim)"):
        x.permute(0, -1, 2)
