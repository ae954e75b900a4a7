"""Public tests of part `qparams` (run them with check("qparams"))."""
import torch
from labkit.testing import raises
from labkit.testing import torchao_qparams as ao_qparams  # torchao is the oracle (your code may not import it)

EPS = torch.finfo(torch.float32).eps


W = torch.tensor([[-1.0, 0.5, 3.0, 0.25], [0.1, 0.2, 0.3, 0.4], [-2.0, -1.0, -0.5, -0.25]])


def test_qrange(lab):
    assert lab.qrange(8, True) == (-128, 127), f"qrange(8, True) should be (-128, 127), got {lab.qrange(8, True)}"
    assert lab.qrange(8, False) == (0, 255), f"qrange(8, False) should be (0, 255), got {lab.qrange(8, False)}"
    assert lab.qrange(4, True) == (-8, 7), f"qrange(4, True) should be (-8, 7), got {lab.qrange(4, True)}"
    with raises(ValueError, "qrange(0, True)"):
        lab.qrange(0, True)


def test_per_channel_int8(lab):
    for symmetric in (True, False):
        scale, zp = lab.choose_qparams(W, (1, 4), -128, 127, symmetric)
        want_s, want_z = ao_qparams(W, (1, 4), -128, 127, symmetric)
        kind = "symmetric" if symmetric else "asymmetric"
        assert scale.shape == (3, 1) and zp.shape == (3, 1), f"{kind}: per-channel qparams of a (3, 4) weight should have shape (3, 1), got {tuple(scale.shape)} and {tuple(zp.shape)}"
        assert zp.dtype == torch.int32, f"{kind}: the zero point should be int32, got {zp.dtype}"
        assert torch.equal(scale, want_s), f"{kind}: scale {scale.flatten().tolist()} should be {want_s.flatten().tolist()}"
        assert torch.equal(zp, want_z), f"{kind}: zero point {zp.flatten().tolist()} should be {want_z.flatten().tolist()}"


def test_groups_and_uint8(lab):
    scale, zp = lab.choose_qparams(W, (1, 2), 0, 255, False)
    want_s, want_z = ao_qparams(W, (1, 2), 0, 255, False)
    assert torch.equal(scale, want_s) and torch.equal(zp, want_z), f"groups of 2, uint8: got scale {scale.tolist()}, zero point {zp.tolist()}; expected {want_s.tolist()}, {want_z.tolist()}"


def test_all_zero_row_uses_eps(lab):
    x = torch.zeros(2, 4)
    x[1] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    scale, zp = lab.choose_qparams(x, (1, 4), -128, 127, True)
    assert scale[0, 0].item() == EPS, f"an all-zero row should get scale eps = {EPS}, got {scale[0, 0].item()}"


def test_bad_block_size(lab):
    with raises(ValueError, "choose_qparams with block_size (1, 3) on a (3, 4) tensor"):
        lab.choose_qparams(W, (1, 3), -128, 127, True)
