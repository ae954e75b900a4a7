"""Public tests of part `broadcast` (run them with check("broadcast"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=24):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


def layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


@pytest.mark.parametrize("shape,stride,sizes", [
    ((3,), (1,), (2, 3)),
    ((3, 1), (1, 1), (-1, 4)),
    ((3, 1), (1, 1), (2, 3, 5)),
])
def test_expand(lab, shape, stride, sizes):
    x, xt = make(lab, shape, stride)
    mine, theirs = x.expand(*sizes), xt.expand(*sizes)
    assert layout(mine) == layout(theirs), (
        f"expand{sizes} of shape {shape}: torch gives shape, strides, offset {layout(theirs)}, yours {layout(mine)}")
    np.testing.assert_array_equal(mine.to_numpy(), theirs.numpy())
    assert mine.storage is x.storage, "expand must not copy"


def test_expand_errors(lab):
    x, _ = make(lab, (3,), (1,))
    with raises(RuntimeError, "x.expand(4) of shape (3,)"):
        x.expand(4)      # 3 cannot become 4
    with raises(RuntimeError, "x.expand(-1, 3) of shape (3,) (-1 in a new leading dim)"):
        x.expand(-1, 3)  # -1 in a new leading dim


@pytest.mark.parametrize("shapes", [[(2, 1), (3,), (1, 1, 1)], [(4, 3), (3,)], [(5, 1, 4), (3, 1)], [(0,), (1,)]])
def test_broadcast_shapes(lab, shapes):
    want = tuple(torch.broadcast_shapes(*shapes))
    got = tuple(lab.broadcast_shapes(*shapes))
    assert got == want, f"broadcast_shapes{tuple(shapes)} should be {want} like torch, got {got}"


def test_broadcast_shapes_mismatch(lab):
    with raises(RuntimeError, "broadcast_shapes((3,), (4,))"):
        lab.broadcast_shapes((3,), (4,))


def test_broadcast_to(lab):
    x, xt = make(lab, (1, 3), (3, 1))
    mine, theirs = lab.broadcast_to(x, (2, 2, 3)), torch.broadcast_to(xt, (2, 2, 3))
    assert layout(mine) == layout(theirs), f"broadcast_to(x, (2, 2, 3)): torch gives {layout(theirs)}, yours {layout(mine)}"


@pytest.mark.parametrize("shape,stride,sizes", [
    ((3,), (1,), (1, 3)),          # a new leading dim of size 1: stride size * stride of the dim to its right
    ((3, 1), (1, 7), (2, 3, 1)),   # a size-1 dim that stays 1 keeps its stride
    ((1,), (1,), (0,)),            # a size-1 dim may grow to 0
])
def test_expand_stride_rules(lab, shape, stride, sizes):
    x, xt = make(lab, shape, stride)
    mine, theirs = x.expand(*sizes), xt.expand(*sizes)
    assert layout(mine) == layout(theirs), (
        f"expand{sizes} of shape {shape}, strides {stride}: torch gives shape, strides, offset {layout(theirs)}, "
        f"yours {layout(mine)}")


def test_broadcast_shapes_negative(lab):
    assert tuple(lab.broadcast_shapes((2, 1), (3,))) == (2, 3), "broadcast_shapes((2, 1), (3,)) should be (2, 3)"
    with raises(ValueError, "broadcast_shapes((-1,), (1,)) (a negative size raises ValueError)"):
        lab.broadcast_shapes((-1,), (1,))
