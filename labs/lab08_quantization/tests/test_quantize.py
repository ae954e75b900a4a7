"""Public tests of part `quantize` (run them with check("quantize"))."""
import torch
from labkit.testing import quant_primitives, raises
from labkit.testing import torchao_qparams as ao_qparams

ao = quant_primitives()  # torchao is the oracle here (your own code may not import it)
EPS = torch.finfo(torch.float32).eps


def test_ties_round_half_to_even(lab):
    x = torch.tensor([[0.25, 0.75, 1.25, -0.25]])
    s, z = torch.tensor([[0.5]]), torch.tensor([[0]], dtype=torch.int32)
    q = lab.quantize(x, (1, 4), s, z, -128, 127, torch.int8)
    assert q.dtype == torch.int8, f"quantize(..., torch.int8) should return int8, got {q.dtype}"
    assert q.tolist() == [[0, 2, 2, 0]], f"0.25, 0.75, 1.25, -0.25 at scale 0.5 should quantize to [0, 2, 2, 0] (half to even), got {q.tolist()}"


def test_groups_match_torchao(lab):
    torch.manual_seed(0)
    w = torch.randn(4, 16) * 3
    for qmin, qmax, dtype, symmetric in [(-128, 127, torch.int8, True), (0, 255, torch.uint8, False), (-8, 7, torch.int8, False)]:
        s, z = ao_qparams(w, (1, 8), qmin, qmax, symmetric)
        q = lab.quantize(w, (1, 8), s, z, qmin, qmax, dtype)
        want = ao.quantize_affine(w, (1, 8), s, z, torch.int32, qmin, qmax).to(dtype)
        assert torch.equal(q, want), f"groups of 8 in [{qmin}, {qmax}]: {int((q != want).sum())} of {q.numel()} values differ from torchao's"
        back = lab.dequantize(q, (1, 8), s, z)
        want_back = ao.dequantize_affine(want.to(torch.int32), (1, 8), s, z, torch.int32, output_dtype=torch.float32)
        assert back.dtype == torch.float32 and torch.equal(back, want_back), f"dequantize in [{qmin}, {qmax}] differs from torchao's"


def test_saturates(lab):
    x = torch.tensor([[100.0, -100.0, float("inf"), 0.0]])
    s, z = torch.tensor([[0.1]]), torch.tensor([[0]], dtype=torch.int32)
    q = lab.quantize(x, (1, 4), s, z, -8, 7, torch.int8)
    assert q.tolist() == [[7, -8, 7, 0]], f"int4 range [-8, 7] should clamp [100, -100, inf, 0] to [7, -8, 7, 0], got {q.tolist()}"
    with raises(ValueError, "quantize of a NaN"):
        lab.quantize(torch.tensor([[float("nan")]]), (1, 1), s, z, -8, 7, torch.int8)
