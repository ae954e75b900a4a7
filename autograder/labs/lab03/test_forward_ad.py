"""Part `forward_ad`: jvp with dual tensors, and the reverse-over-forward Hessian-vector product.

Trust: values only. Delegation is graded by behaviour, not by P1-side profiling or engine counts:
the functions include a Function with a jvp and no backward (torch.autograd.functional.jvp/hvp and
reverse over reverse fail on it) and an old-style Function (forward(ctx, ...)), which torch.func
transforms refuse while dual tensors handle it.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle
from autograder.labs.lab03.scenarios import HVP_FUNCS, JVP_FUNCS

ELEMENTWISE = {"sin", "identity", "cube_forward_only", "old_style_cube", "softmax_sum"}


def jvp_shapes(name, n, zero_dim=False):
    if zero_dim and name in ELEMENTWISE - {"softmax_sum"}:
        return [()]
    return {"matmul_tanh": [(2, n), (n, 3)], "norm_mix": [(n,), (n,)], "mul_exp": [(n, 2), (n, 2)],
            "second_ignored": [(n,), (2,)]}.get(name, [(n,)])


def check_jvp(student, name, seed, n, zero_dim=False, twice=False, gated=True):
    if gated:
        oracle.gate(student, "jvp", lambda: check_jvp(student, "old_style_cube", 43, 3, gated=False),
                    "jvp (on an old-style Function that has a jvp and no backward)")
    shapes = jvp_shapes(name, n, zero_dim)
    primals = oracle.arrays(seed, *shapes)
    tangents = oracle.arrays(seed + 7, *shapes)
    got = student.run("forward_jvp", name, primals, tangents, twice=twice)
    got = oracle.reply(got, {"out", "tangent"}, "jvp's result")
    what = f"jvp of {name.replace('_', ' ')} with inputs of shapes {[list(s) for s in shapes]}"
    want_out, want_tangent = oracle.jvp(name, primals, tangents)
    oracle.close(got["out"], want_out, f"{what}: the output")
    oracle.close(got["tangent"], want_tangent, f"{what}: the tangent J·v (use dual tensors)")
    tangent_dtype = np.asarray(got["tangent"]).dtype
    assert tangent_dtype == np.asarray(want_out).dtype, (
        f"{what}: the tangent has dtype {tangent_dtype}, the output {np.asarray(want_out).dtype}: "
        "a zero tangent must have the output's dtype (torch.zeros_like(primal))")
    if twice:
        oracle.close(got.get("out2"), want_out, f"{what}, called a second time: the output")
        oracle.close(got.get("tangent2"), want_tangent, f"{what}, called a second time: the tangent")


@pytest.mark.parametrize("name", list(JVP_FUNCS))
def test_jvp(student, name):
    check_jvp(student, name, 1, 3)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["old_style_cube", "cube_forward_only"])
def test_jvp_functions_only_dual_tensors_handle(student, name):
    check_jvp(student, name, 4, 4, twice=True)
    check_jvp(student, name, 5, 2, zero_dim=True)


def test_jvp_edge_shapes(student):
    check_jvp(student, "sin", 2, 1, zero_dim=True)
    check_jvp(student, "matmul_tanh", 3, 0)
    check_jvp(student, "constant", 6, 2, twice=True)


@pytest.mark.weight(3)
@settings(max_examples=12)
@given(name=st.sampled_from(sorted(JVP_FUNCS)), seed=st.integers(0, 2**16), n=st.integers(0, 5),
       zero_dim=st.booleans())
def test_jvp_generated(student, name, seed, n, zero_dim):
    check_jvp(student, name, seed, n, zero_dim)


def check_hvp(student, name, seed, n, x_requires_grad=False, twice=False, gated=True):
    if gated:
        oracle.gate(student, "hvp", lambda: check_hvp(student, "old_style_cube", 44, 3, gated=False),
                    "hvp (on an old-style Function that has a jvp and no backward)")
    x, v = oracle.arrays(seed, (n,), (n,))
    x = x * 0.5
    got = student.run("forward_hvp", name, x, v, x_requires_grad=x_requires_grad, twice=twice)
    got = oracle.reply(got, {"hv", "requires_grad", "x_untouched"}, "hvp's result")
    what = f"hvp of {name.replace('_', ' ')} at a point of size {n}" + (" that requires grad" if x_requires_grad else "")
    want = oracle.hvp(name, x, v)
    oracle.close(got["hv"], want, f"{what}: H·v (reverse over forward)", rtol=1e-6, atol=1e-8)
    assert got["requires_grad"] is False, f"{what}: return a tensor without history (detach it)"
    assert got["x_untouched"] is True, f"{what}: the caller's x was changed, got a .grad or had its requires_grad changed (work on x.detach())"
    if twice:
        oracle.close(got.get("hv2"), want, f"{what}, called a second time: H·v", rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", list(HVP_FUNCS))
def test_hvp(student, name):
    check_hvp(student, name, 2, 4)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["old_style_cube", "forward_only_cube"])
def test_hvp_functions_only_reverse_over_forward_handles(student, name):
    check_hvp(student, name, 3, 5, twice=True)
    check_hvp(student, name, 4, 3, x_requires_grad=True)


@pytest.mark.weight(3)
@settings(max_examples=10)
@given(name=st.sampled_from(sorted(HVP_FUNCS)), seed=st.integers(0, 2**16), n=st.integers(2, 6),
       x_requires_grad=st.booleans())
def test_hvp_generated(student, name, seed, n, x_requires_grad):
    check_hvp(student, name, seed, n, x_requires_grad)

# IPT-CANARY lab03 test_forward_ad.py: hidden grading text, never shown to learners
