"""Part `custom_op`: ipt::scaled_softplus with torch.library: CPU kernel, fake kernel, autograd formula.

Every verdict rests on values the learner's op returned for inputs P0 chose (eager, through torch.ops,
under FakeTensorMode / meta, compiled), compared with F.softplus computed here. opcheck's own verdicts
come back too, but a test passes only when the values it carries are right.
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab04 import oracle


def arrays(seed, shape, dtype=np.float64, scale=3.0):
    """x, the output gradient and a vector for the second derivative; scale > 3: x spreads evenly over
    [-scale, scale] (both ends included, shuffled), so the largest |beta * x| is always reached. The numbers
    come from this submission's grading seed and the case number `seed`."""
    rng = case_rng(seed)
    out = [np.asarray(rng.standard_normal(shape) * 3).astype(dtype) for _ in range(3)]
    if scale > 3.0:
        out[0] = rng.permutation(np.linspace(-scale, scale, int(np.prod(shape)))).reshape(shape).astype(dtype)
    return out


def eager(student, seed, shape, beta, dtype=np.float64, scale=3.0, **kw):
    x, g, v = arrays(seed, shape, dtype, scale)
    kw.setdefault("through_ops", True)      # the registered operator, not only the Python object
    got = replies.dict_of(student.run("softplus_eager", x, beta, g, v, **kw), {"out", "grad"}, "scaled_softplus")
    reference = oracle.softplus if scale <= 3.0 else oracle.softplus_stable
    want = reference(x.astype(np.float64), beta, g.astype(np.float64), v.astype(np.float64))
    tol = (1e-7, 1e-9) if dtype == np.float64 else (1e-5, 1e-6)
    what = f"scaled_softplus(x of shape {list(shape)}, {np.dtype(dtype).name}, beta={beta})"
    if scale > 3.0:
        what += f" with large |beta * x| (up to about {np.abs(beta * x).max():.0f}; log(1 + e^z) must not overflow)"
    oracle.close(got["out"], want["out"], f"{what}: the output", *tol, dtype=dtype)
    oracle.close(got["grad"], want["grad"], f"{what}: the gradient", *tol, dtype=dtype)
    return got, want, what


@pytest.mark.parametrize("seed,shape,beta", [(0, (4, 5), 1.0), (1, (7,), 2.5), (2, (2, 3, 4), 0.5), (3, (3, 3), 10.0),
                                             (11, (5,), -0.75)])
def test_values_and_gradients(student, seed, shape, beta):
    got, want, what = eager(student, seed, shape, beta)
    assert "hvp_error" not in got, f"{what}: differentiating the gradient again failed ({got.get('hvp_error')}): write the backward with torch ops"
    oracle.close(got.get("hvp"), want["hvp"], f"{what}: the second derivative (backward of your backward)")


@pytest.mark.weight(2)
def test_edge_shapes_and_layouts(student):
    eager(student, 12, (), 1.5)                               # 0-d
    eager(student, 13, (0, 3), 2.0)                           # size 0
    eager(student, 14, (1, 1), 0.25)                          # size 1
    eager(student, 15, (3, 4), 1.5, layout="transposed")      # column-major input


@pytest.mark.weight(2)
def test_large_arguments(student):
    # |beta * x| in the hundreds: e^(beta * x) overflows float64 past 709 and float32 past 88, the softplus does not
    eager(student, 23, (6,), 2.0, scale=400.0)               # beta * x up to 800
    eager(student, 24, (2, 3), -1.5, scale=500.0)            # a negative beta: beta * x up to 750 where x = -500
    eager(student, 25, (5,), 4.0, np.float32, scale=60.0)    # float32: beta * x up to 240


def require_registered(student, seed, beta):
    """The op must exist as torch.ops.ipt.scaled_softplus.default and compute the right values on P0's input."""
    eager(student, seed, (2, 3), beta, through_ops=True)


def test_registered_as_an_op(student):
    require_registered(student, 20, 1.25)
    # called through the Python object custom_op returned, and checked for aliasing its input
    got, _, what = eager(student, 4, (3,), 1.0, through_ops=False)
    x = arrays(4, (3,))[0]
    oracle.close(got.get("out_after_input_changed"), oracle.softplus(x, 1.0, x, x)["out"],
                 f"{what}: the output after the input was changed in place (scaled_softplus must return a new tensor, "
                 "not its input or a view of it)")


@pytest.mark.weight(2)
def test_float32_dtype(student):
    eager(student, 5, (4,), 1.5, np.float32)
    eager(student, 16, (2, 2), -2.0, np.float32, through_ops=False)


@pytest.mark.weight(2)
def test_fake_kernel(student):
    require_registered(student, 21, 0.5)
    for shape, dtype in [([2, 3], "float32"), ([5], "float64"), ([1, 4, 2], "float32"), ([], "float64"), ([0, 2], "float32")]:
        got = student.run("softplus_fake", shape, dtype, 2.0)
        err = replies.error_reply(got, "scaled_softplus on a FakeTensor")
        assert err is None, f"scaled_softplus on a FakeTensor / meta tensor of shape {shape} failed: {err and err['error']}: {err and err['message']}"
        got = replies.dict_of(got, {"shape", "dtype", "meta_shape", "meta_dtype", "meta_device"}, "the fake kernel's output")
        want = {"shape": shape, "dtype": f"torch.{dtype}", "meta_shape": shape, "meta_dtype": f"torch.{dtype}", "meta_device": "meta"}
        assert got == want, f"the fake kernel on shape {shape}, {dtype} (FakeTensor and meta) should give {want}, got {got}"


def opcheck(student, x, beta, requires_grad, what):
    got = replies.dict_of(student.run("softplus_opcheck", x, beta, requires_grad), {"out"}, "opcheck")
    err = replies.error_reply(got, "opcheck")
    assert err is None, f"torch.library.opcheck(scaled_softplus, {what}) failed: {err and err['error']}: {err and err['message']}"
    results = replies.dict_of(got.get("results"), {"test_schema", "test_faketensor"}, "opcheck's results")
    bad = {k: v for k, v in results.items() if v != "SUCCESS"}
    assert not bad, f"opcheck on {what} reports failures: {bad}"
    want = oracle.softplus(x.astype(np.float64), beta, x.astype(np.float64) * 0 + 1, x.astype(np.float64))
    tol = (1e-7, 1e-9) if x.dtype == np.float64 else (1e-5, 1e-6)
    oracle.close(got["out"], want["out"], f"torch.ops.ipt.scaled_softplus.default on {what}", *tol, dtype=x.dtype)
    if requires_grad:
        oracle.close(got.get("grad"), want["grad"], f"the gradient of torch.ops.ipt.scaled_softplus.default on {what}", *tol, dtype=x.dtype)


@pytest.mark.weight(4)
def test_opcheck(student):
    x, _, _ = arrays(6, (3, 4))
    for requires_grad in (True, False):
        opcheck(student, x, 1.5, requires_grad, f"(x of shape [3, 4], requires_grad={requires_grad}, beta=1.5)")
    opcheck(student, arrays(17, (2, 5), np.float32)[0], 0.5, True, "(x of shape [2, 5], float32, beta=0.5)")
    opcheck(student, arrays(18, (), np.float64)[0], 3.0, True, "(a 0-d x, beta=3.0)")


def compiled(student, x, beta, **kw):
    got = student.run("softplus_compile", x, beta, **kw)
    err = replies.error_reply(got, "torch.compile")
    assert err is None, (f"torch.compile(f, fullgraph=True) of f(t) = scaled_softplus(t * 2, beta).sin() + t failed: "
                         f"{err and err['error']}: {err and err['message']}")
    return replies.dict_of(got, {"out"}, "the compiled function's reply")


@pytest.mark.weight(4)
def test_compile_fullgraph(student, measurement):
    import time
    x, _, _ = arrays(7, (6,))
    start = time.perf_counter()
    got = compiled(student, x, 1.5)
    measurement("torch.compile(fullgraph=True) of a function around the op (first call)", time.perf_counter() - start, "s")
    want, _ = oracle.softplus_compiled(x, 1.5)
    oracle.close(got["out"], want, "the compiled function's output")
    # opacity, checked from a value: the backend swaps every ipt.scaled_softplus node of the graph for t * 3.0;
    # the output changes accordingly only where the op is one opaque node of the graph
    x2, _, _ = arrays(19, (5,))
    got = compiled(student, x2, 0.8, swap=3.0)
    want, _ = oracle.softplus_compiled(x2, 0.8, swap=3.0)
    oracle.close(got["out"], want, "the compiled graph should call ipt.scaled_softplus as one opaque node (replacing that node "
                 "in the graph did not change the result as it should)")


@pytest.mark.weight(3)
def test_compile_with_backward(student):
    require_registered(student, 22, 0.7)
    x, _, _ = arrays(8, (2, 3))
    got = compiled(student, x, 0.7, with_backward=True)
    want, want_grad = oracle.softplus_compiled(x, 0.7)
    oracle.close(got["out"], want, "the compiled function's output")
    oracle.close(got.get("grad"), want_grad, "the gradient through the compiled function")

# IPT-CANARY lab04 test_custom_op.py: hidden grading text, never shown to learners
