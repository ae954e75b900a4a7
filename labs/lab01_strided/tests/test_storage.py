"""Public tests of part `storage` (run them with check("storage"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=24):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (4, 1, 3), (1, 1)])
def test_contiguous_strides(lab, shape):
    want = torch.empty(shape).stride()
    got = tuple(lab.contiguous_strides(shape))
    assert got == want, f"contiguous_strides({shape}) should be {want} (like torch.empty({shape}).stride()), got {got}"


@pytest.mark.parametrize("shape", [(2, 3, 4), (7,), ()])
def test_numel(lab, shape):
    t = make(lab, shape, torch.empty(shape).stride())
    assert t.numel() == torch.empty(shape).numel(), f"numel() of shape {shape} should be {torch.empty(shape).numel()}, got {t.numel()}"


CASES = [  # shape, stride, offset, index
    ((3, 4), (4, 1), 0, (1, 2)),
    ((4, 3), (1, 4), 0, (2, 1)),      # a transpose
    ((3, 2), (4, 2), 1, (2, 1)),      # x[:, 1::2] of a (3, 4) tensor
    ((3, 4), (4, 1), 0, (-1, -2)),    # negative indices count from the end
    ((), (), 5, ()),                  # a 0-d tensor
]


@pytest.mark.parametrize("shape,stride,offset,idx", CASES)
def test_storage_index(lab, shape, stride, offset, idx):
    t = make(lab, shape, stride, offset)
    want = torch.arange(24).as_strided(shape, stride, offset)[idx].storage_offset()
    got = t.storage_index(idx)
    assert got == want, (f"for shape {shape}, strides {stride}, offset {offset}: storage_index({idx}) should be "
                         f"{want} (offset + sum of index * stride), got {got}")


def test_storage_index_out_of_range(lab):
    t = make(lab, (3, 4), (4, 1))
    with raises(IndexError, "storage_index((3, 0)) of shape (3, 4)"):
        t.storage_index((3, 0))


def test_to_numpy_reads_through_strides(lab):
    t = make(lab, (4, 3), (1, 4))
    want = torch.arange(24).as_strided((4, 3), (1, 4)).numpy()
    np.testing.assert_array_equal(t.to_numpy(), want, err_msg="to_numpy() of the transposed layout reads the wrong elements: check storage_index")


FLAGS = [
    ((3, 4), (4, 1), "a fresh (3, 4) tensor"),
    ((4, 3), (1, 4), "a transpose"),
    ((3, 2), (4, 2), "a strided slice"),
    ((2, 1, 3), (3, 7, 1), "a size-1 dim with an unusual stride"),
    ((3, 4), (0, 1), "an expanded tensor (stride 0)"),
]


@pytest.mark.parametrize("shape,stride,what", FLAGS)
def test_is_contiguous(lab, shape, stride, what):
    want = torch.arange(24).as_strided(shape, stride).is_contiguous()
    got = make(lab, shape, stride).is_contiguous()
    assert got == want, f"is_contiguous() of {what} (shape {shape}, strides {stride}) should be {want} like torch, got {got}"


@pytest.mark.parametrize("shape", [(2, 0, 3), (0,), (3, 0), (0, 2, 1)])
def test_contiguous_strides_zero_size_rule(lab, shape):
    # the zero-size stride rule: a size of 0 counts as 1 when the strides are computed
    want = torch.empty(shape).stride()
    got = tuple(lab.contiguous_strides(shape))
    assert got == want, (f"contiguous_strides({shape}) should be {want} like torch.empty({shape}).stride(): "
                         f"a size of 0 counts as 1 when you multiply the sizes; got {got}")


def test_empty_tensor_is_contiguous(lab):
    t = make(lab, (0, 3), (1, 5))
    assert bool(t.is_contiguous()) is True, (
        "a tensor with no elements is always contiguous (shape (0, 3), strides (1, 5)): is_contiguous() should be True")
    assert bool(make(lab, (3, 2), (1, 3)).is_contiguous()) is False, (
        "shape (3, 2) with strides (1, 3) (a transpose) is not contiguous: is_contiguous() should be False")
