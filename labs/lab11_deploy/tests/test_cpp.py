"""Public tests of part `cpp` (run them with check("cpp")): your C++ operator lab11_cpp::safe_div and its Python parts.

The first run builds your CPP_SOURCE (about 15 s; cached after that)."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode


@pytest.fixture
def op(lab):
    lab.build_extension(lab.CPP_SOURCE)
    lab.register_python_parts(lab.fresh_library())
    return torch.ops.lab11_cpp.safe_div


def test_values_and_zero_denominators(op):
    a = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, float("nan")]])
    b = torch.tensor([2.0, 0.0, -0.0])
    got = op(a, b, fill=7.0)
    want = torch.tensor([[0.5, 7.0, 7.0], [2.0, 7.0, 7.0]])
    assert got.shape == (2, 3) and got.dtype == torch.float32, f"safe_div should give a float32 (2, 3) result, got {got.dtype} {tuple(got.shape)}"
    assert torch.equal(got, want), f"safe_div(a, b, fill=7.0) should be {want.tolist()}, got {got.tolist()}"
    assert torch.equal(op(a[:, :2], b[:2]), torch.tensor([[0.5, 0.0], [2.0, 0.0]])), "the default fill should be 0.0"


def test_result_is_new_and_contiguous(op):
    a = torch.arange(1.0, 13.0).reshape(3, 4).t()
    b = torch.tensor([1.0, 2.0, 0.0])
    got = op(a, b)
    assert got.is_contiguous(), f"the result should be contiguous, got strides {got.stride()} for a transposed a"
    assert torch.equal(got, torch.where(b == 0, 0.0, a / b)), "safe_div of a transposed a has wrong values"
    x = torch.ones(2, 3)
    y = op(x, torch.ones(3))
    y.fill_(5.0)
    assert torch.equal(x, torch.ones(2, 3)), "writing into the result changed a: the result must be a new tensor"


def test_schema_and_errors(op):
    a, b = torch.ones(3), torch.ones(3)
    assert torch.equal(op(b=b, a=a, fill=1.0), torch.ones(3)), "safe_div(a=..., b=..., fill=...) should work"
    for what, call in [("a positional fill", lambda: op(a, b, 1.0)),
                       ("float32 with float64", lambda: op(a, b.double())),
                       ("int64 tensors", lambda: op(a.long(), b.long())),
                       ("shapes (3,) and (4,)", lambda: op(a, torch.ones(4)))]:
        with pytest.raises(Exception) as info:
            call()
        assert not isinstance(info.value, NotImplementedError), f"{what}: raised NotImplementedError"


def test_gradients_at_zero(op):
    a = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.0, 2.0, -4.0], dtype=torch.float64, requires_grad=True)
    op(a.expand(2, 3), b).sum().backward()
    assert torch.equal(a.grad, torch.tensor([[0.0, 1.0, -0.5]], dtype=torch.float64)), f"gradient of a: got {a.grad.tolist()}"
    assert torch.allclose(b.grad, torch.tensor([0.0, -1.0, -0.375], dtype=torch.float64)), f"gradient of b: got {b.grad.tolist()}"
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = (torch.rand(4, dtype=torch.float64) + 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p, q: op(p, q, fill=1.0), (x, y)), "gradcheck failed away from zero"


def test_fake_kernel(op):
    with FakeTensorMode() as mode:
        a = mode.from_tensor(torch.randn(4, 3)).t()
        out = op(a, mode.from_tensor(torch.randn(1, 4, dtype=torch.float32)))
        assert tuple(out.shape) == (3, 4) and out.stride() == (4, 1), f"fake result: shape (3, 4), strides (4, 1) expected, got {tuple(out.shape)}, {out.stride()}"
    meta = op(torch.empty(2, 1, device="meta", dtype=torch.float64), torch.empty(5, device="meta", dtype=torch.float64))
    assert meta.device.type == "meta" and meta.dtype == torch.float64 and tuple(meta.shape) == (2, 5), f"on meta tensors: got {meta}"


def test_opcheck_and_compile(op):
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1.0, 0.0, 2.0, -1.0], dtype=torch.float64, requires_grad=True)
    report = torch.library.opcheck(op, (x, y), {"fill": 2.0})
    assert all(v == "SUCCESS" for v in report.values()), f"opcheck: {report}"
    f = torch.compile(lambda p, q: op(p.sin(), q, fill=1.0).sum(), fullgraph=True, backend="aot_eager")
    want = torch.where(y == 0, 1.0, x.sin() / torch.where(y == 0, 1.0, y)).sum()
    assert torch.allclose(f(x, y), want), "torch.compile(fullgraph=True) of a function calling safe_div gives a wrong value"
