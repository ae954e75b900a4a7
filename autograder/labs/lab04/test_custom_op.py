"""Part `custom_op`: ipt::scaled_softplus with torch.library: CPU kernel, fake kernel, autograd formula."""
import numpy as np
import pytest

from autograder.labs.lab04 import oracle


def arrays(seed, shape, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * 3).astype(dtype) for _ in range(3)]


@pytest.mark.parametrize("seed,shape,beta", [(0, (4, 5), 1.0), (1, (7,), 2.5), (2, (2, 3, 4), 0.5), (3, (3, 3), 10.0)])
def test_values_and_gradients(student, seed, shape, beta):
    x, g, v = arrays(seed, shape)
    got, want = student.run("softplus_eager", x, beta, g, v), oracle.softplus(x, beta, g, v)
    what = f"scaled_softplus(x of shape {list(shape)}, beta={beta})"
    oracle.close(got["out"], want["out"], f"{what}: the output")
    oracle.close(got["grad"], want["grad"], f"{what}: the gradient")
    assert "hvp_error" not in got, f"{what}: differentiating the gradient again failed ({got.get('hvp_error')}): write the backward with torch ops"
    oracle.close(got["hvp"], want["hvp"], f"{what}: the second derivative (backward of your backward)")


def test_registered_as_an_op(student):
    x, g, v = arrays(4, (3,))
    got = student.run("softplus_eager", x, 1.0, g, v)
    assert got["op"] == "ipt.scaled_softplus.default", f"torch.ops.ipt.scaled_softplus.default should exist, got {got['op']}"
    assert got["aliases_input"] is False, "scaled_softplus must return a new tensor, not its input or a view of it"
    assert got["dtype"] == "torch.float64", f"a float64 input should give a float64 output, got {got['dtype']}"


def test_float32_dtype(student):
    x, g, v = arrays(5, (4,), np.float32)
    got = student.run("softplus_eager", x, 1.5, g, v)
    assert got["dtype"] == "torch.float32", f"a float32 input should give a float32 output, got {got['dtype']}"
    oracle.close(got["out"], oracle.softplus(x, 1.5, g, v)["out"], "scaled_softplus on float32", rtol=1e-5, atol=1e-6)


@pytest.mark.weight(2)
def test_fake_kernel(student):
    for shape, dtype in [([2, 3], "float32"), ([5], "float64"), ([1, 4, 2], "float32")]:
        got = student.run("softplus_fake", shape, dtype, 2.0)
        assert "error" not in got, f"scaled_softplus on a FakeTensor / meta tensor of shape {shape} failed: {got.get('error')}: {got.get('message')}"
        assert got["shape"] == shape and got["dtype"] == f"torch.{dtype}" and got["meta_shape"] == shape, (
            f"the fake kernel on shape {shape}, {dtype} should give the same shape and dtype, got {got}")


@pytest.mark.weight(4)
def test_opcheck(student):
    x, _, _ = arrays(6, (3, 4))
    for requires_grad in (True, False):
        got = student.run("softplus_opcheck", x, 1.5, requires_grad)
        assert "error" not in got, f"torch.library.opcheck(scaled_softplus, (x, 1.5)) failed: {got.get('error')}: {got.get('message')}"
        bad = {k: v for k, v in got["results"].items() if v != "SUCCESS"}
        assert not bad, f"opcheck reports failures: {bad}"


@pytest.mark.weight(4)
def test_compile_fullgraph(student, measurement):
    import time
    x, _, _ = arrays(7, (6,))
    start = time.perf_counter()
    got = student.run("softplus_compile", x, 1.5)
    measurement("torch.compile(fullgraph=True) of a function around the op (first call)", time.perf_counter() - start, "s")
    assert "error" not in got, f"torch.compile(f, fullgraph=True) of f(t) = scaled_softplus(t * 2, beta).sin() + t failed: {got.get('error')}: {got.get('message')}"
    assert got["graphs"] == 1, f"the compiled function should be one graph, got {got['graphs']}"
    assert "ipt.scaled_softplus.default" in got["targets"], (
        f"the compiled graph should call ipt.scaled_softplus as one opaque op, its calls were {got['targets']}")
    want, _ = oracle.softplus_compiled(x, 1.5)
    oracle.close(got["out"], want, "the compiled function's output")


@pytest.mark.weight(3)
def test_compile_with_backward(student):
    x, _, _ = arrays(8, (2, 3))
    got = student.run("softplus_compile", x, 0.7, True)
    assert "error" not in got, f"compiling with AOTAutograd and running backward failed: {got.get('error')}: {got.get('message')}"
    want, want_grad = oracle.softplus_compiled(x, 0.7)
    oracle.close(got["out"], want, "the compiled function's output")
    oracle.close(got["grad"], want_grad, "the gradient through the compiled function")
    assert "ipt.scaled_softplus.default" in got["targets"], f"the forward graph should call ipt.scaled_softplus, got {got['targets']}"

# IPT-CANARY lab04 test_custom_op.py: hidden grading text, never shown to learners
