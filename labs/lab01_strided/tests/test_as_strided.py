"""Public tests of part `as_strided` (run them with check("as_strided"))."""
import numpy as np
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=12):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


def layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def test_sliding_windows(lab):
    x, xt = make(lab, (8,), (1,))
    mine, theirs = x.as_strided((6, 3), (1, 1)), xt.as_strided((6, 3), (1, 1))
    assert layout(mine) == layout(theirs), f"as_strided((6, 3), (1, 1)): torch gives {layout(theirs)}, yours {layout(mine)}"
    np.testing.assert_array_equal(mine.to_numpy(), theirs.numpy())


def test_offsets(lab):
    x, xt = make(lab, (10,), (1,), offset=2)
    assert x.as_strided((2, 2), (1, 2)).storage_offset() == xt.as_strided((2, 2), (1, 2)).storage_offset(), \
        "with no storage_offset, as_strided keeps x's own offset"
    assert x.as_strided((2, 2), (1, 2), 0).storage_offset() == 0, \
        "storage_offset is a position in the storage, not relative to x's offset"


def test_errors(lab):
    x, _ = make(lab, (12,), (1,))
    with raises(RuntimeError, "x.as_strided((2, 2), (-1, 2)) (a negative stride)"):
        x.as_strided((2, 2), (-1, 2))   # negative stride
    with raises(RuntimeError, "x.as_strided((2, 2), (1,)) (sizes and strides of different lengths)"):
        x.as_strided((2, 2), (1,))      # lengths differ


def test_contiguous_copies_a_transpose(lab):
    x, xt = make(lab, (4, 3), (1, 4))
    c = x.contiguous()
    assert layout(c) == layout(xt.contiguous()), f"x.contiguous() of a transpose: torch gives {layout(xt.contiguous())}, yours {layout(c)}"
    assert c.storage is not x.storage, "a non-contiguous tensor must be copied"
    np.testing.assert_array_equal(c.to_numpy(), xt.numpy(), err_msg="contiguous() copied the wrong values")


def test_contiguous_returns_self(lab):
    x, _ = make(lab, (3, 4), (4, 1))
    assert x.contiguous() is x, "contiguous() of a contiguous tensor returns the tensor itself"


def test_bounds(lab):
    x, xt = make(lab, (2, 6), (6, 1))
    y = x.as_strided((0, 2), (100, 1), 50)
    assert layout(y) == layout(xt.as_strided((0, 2), (100, 1), 50)), \
        "a tensor with no elements needs no storage: as_strided((0, 2), (100, 1), 50) is allowed"
    assert layout(x.as_strided((2, 6), (6, 1), 0)) == ((2, 6), (6, 1), 0), "as_strided((2, 6), (6, 1), 0) fits exactly"
    with raises(RuntimeError, "x.as_strided((2, 6), (6, 1), 1) (one element past the end of a storage of 12)"):
        x.as_strided((2, 6), (6, 1), 1)
