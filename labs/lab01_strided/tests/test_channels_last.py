"""Public tests of part `channels_last` (run them with check("channels_last"))."""
import numpy as np
import pytest
import torch
from labkit.testing import raises


def make(lab, shape, stride, offset=0, size=120):
    return lab.Tensor(lab.Storage(np.arange(size)), shape, stride, offset), torch.arange(size).as_strided(shape, stride, offset)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 2, 2)])
def test_channels_last_strides(lab, shape):
    want = torch.empty(shape, memory_format=torch.channels_last).stride()
    got = tuple(lab.channels_last_strides(shape))
    assert got == want, f"channels_last_strides({shape}) should be {want}, got {got}"


def test_channels_last_needs_4d(lab):
    with raises(RuntimeError, "channels_last_strides((2, 3, 4))"):
        lab.channels_last_strides((2, 3, 4))


@pytest.mark.parametrize("stride", [(60, 1, 15, 3), (60, 20, 5, 1)])
def test_is_contiguous_channels_last(lab, stride):
    x, xt = make(lab, (2, 3, 4, 5), stride)
    want = xt.is_contiguous(memory_format=torch.channels_last)
    assert x.is_contiguous("channels_last") == want, (
        f"is_contiguous(channels_last) of shape (2, 3, 4, 5), strides {stride} should be {want}")


def test_contiguous_channels_last(lab):
    x, xt = make(lab, (2, 3, 4, 5), (60, 20, 5, 1))
    y, yt = x.contiguous("channels_last"), xt.contiguous(memory_format=torch.channels_last)
    assert tuple(y.stride()) == yt.stride(), f"contiguous(channels_last): strides should be {yt.stride()}, got {y.stride()}"
    np.testing.assert_array_equal(y.to_numpy(), yt.numpy(), err_msg="contiguous(channels_last) changed the values")


def test_size1_channel_surprise(lab):
    x, xt = make(lab, (2, 1, 3, 3), (9, 9, 3, 1))
    y, yt = x.contiguous("channels_last"), xt.contiguous(memory_format=torch.channels_last)
    assert tuple(y.stride()) == yt.stride(), (
        f"a contiguous (2, 1, 3, 3) tensor is already channels-last contiguous: torch returns it unchanged "
        f"with strides {yt.stride()}, yours has {y.stride()}")


def test_channels_last_zero_size(lab):
    shape = (2, 0, 3, 3)
    want = torch.empty(shape, memory_format=torch.channels_last).stride()
    got = tuple(lab.channels_last_strides(shape))
    assert got == want, (f"channels_last_strides({shape}) should be {want}: here sizes are multiplied as they "
                         f"are, a 0 is not counted as 1; got {got}")
    x, xt = make(lab, (2, 0, 3, 3), (9, 9, 3, 1))
    assert x.is_contiguous("channels_last") == xt.is_contiguous(memory_format=torch.channels_last), (
        "an empty (2, 0, 3, 3) tensor with strides (9, 9, 3, 1) is not channels-last contiguous "
        "(no shortcut for empty tensors in this format)")
