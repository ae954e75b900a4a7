"""Public tests of part `int8_linear` (run them with check("int8_linear"))."""
import torch
from labkit.testing import raises


def test_int_matmul_exact(lab):
    a = torch.full((1, 2048), 127, dtype=torch.int8)
    b = torch.full((2048, 2), 127, dtype=torch.int8)
    out = lab.int_matmul(a, b)
    assert out.dtype == torch.int32, f"int_matmul should return int32, got {out.dtype}"
    assert out.tolist() == [[2048 * 127 * 127] * 2], f"2048 products of 127 * 127 should sum to {2048 * 127 * 127}, got {out.tolist()}"
    with raises(ValueError, "int_matmul of (2, 3) by (4, 2)"):
        lab.int_matmul(torch.zeros(2, 3, dtype=torch.int8), torch.zeros(4, 2, dtype=torch.int8))


def test_layer_small(lab):
    xq = torch.tensor([[10, 20, 30]], dtype=torch.uint8)
    wq = torch.tensor([[1, -1, 2], [0, 3, -4]], dtype=torch.int8)
    out = lab.int8_linear(xq, torch.tensor(0.5), 10, wq, torch.tensor([0.25, 0.125]), torch.tensor([1.0, -1.0]),
                          torch.tensor(0.5), 3)
    # acc = [0*1 + 10*-1 + 20*2, 10*3 + 20*-4] = [30, -50]; bias steps [1/0.125, -1/0.0625] = [8, -16]
    # out = round([38 * 0.25, -66 * 0.125]) + 3 = [10 + 3, -8 + 3]
    assert out.dtype == torch.int8 and out.tolist() == [[13, -5]], f"expected int8 [[13, -5]], got {out.dtype} {out.tolist()}"
