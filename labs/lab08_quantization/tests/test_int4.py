"""Public tests of part `int4` (run them with check("int4"))."""
import torch
from labkit.testing import raises


def test_pack_low_nibble_first(lab):
    p = lab.pack_int4(torch.tensor([-1, 2, 7, -8], dtype=torch.int8))
    assert p.dtype == torch.uint8 and p.tolist() == [0x2F, 0x87], f"(-1, 2), (7, -8) should pack to bytes [0x2f, 0x87], got {p.dtype} {[hex(v) for v in p.tolist()]}"
    with raises(ValueError, "pack_int4 of a value 8"):
        lab.pack_int4(torch.tensor([8, 0], dtype=torch.int8))


def test_roundtrip(lab):
    torch.manual_seed(0)
    q = torch.randint(-8, 8, (3, 10), dtype=torch.int8)
    back = lab.unpack_int4(lab.pack_int4(q))
    assert back.dtype == torch.int8 and torch.equal(back, q), "unpack_int4(pack_int4(q)) should give q back"


def test_linear_close_to_float(lab):
    torch.manual_seed(0)
    q = torch.randint(-8, 8, (4, 64), dtype=torch.int8)
    scale, zp = torch.rand(4, 2) * 0.1 + 0.01, torch.randint(-2, 3, (4, 2), dtype=torch.int32)
    x = torch.randn(2, 64)
    w = (q.float().reshape(4, 2, 32) - zp.float().unsqueeze(-1)) * scale.unsqueeze(-1)
    out = lab.int4_linear(x, lab.pack_int4(q), scale, zp, 32)
    assert torch.allclose(out, x @ w.reshape(4, 64).T, rtol=1e-5, atol=1e-5), "int4_linear differs from F.linear with the dequantized weight"
