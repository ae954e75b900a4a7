"""Public tests of part `fake_quant` (run them with check("fake_quant"))."""
import torch


def test_matches_torch_per_channel(lab):
    torch.manual_seed(0)
    x = (torch.randn(3, 8) * 2).requires_grad_(True)
    scale = torch.tensor([0.05, 0.1, 0.02])
    zp = torch.tensor([0, 3, -2], dtype=torch.int32)
    y = lab.fake_quantize(x, (1, 8), scale.reshape(3, 1), zp.reshape(3, 1), -8, 7)
    x2 = x.detach().clone().requires_grad_(True)
    want = torch.fake_quantize_per_channel_affine(x2, scale, zp, 0, -8, 7)
    assert torch.equal(y, want), "the forward differs from torch.fake_quantize_per_channel_affine"
    g = torch.randn(3, 8)
    y.backward(g)
    want.backward(g)
    assert torch.equal(x.grad, x2.grad), f"the straight-through gradient differs from torch's: {x.grad.tolist()} vs {x2.grad.tolist()}"


def test_mask_ends_are_inclusive(lab):
    x = torch.tensor([[-9.0, -8.0, 7.0, 7.6]], requires_grad=True)
    y = lab.fake_quantize(x, (1, 4), torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.int32), -8, 7)
    y.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 1.0, 0.0]], f"int4 at scale 1: -9 and 7.6 are clamped (no gradient), -8 and 7 are not; got {x.grad.tolist()}"
