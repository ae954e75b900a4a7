"""Part `forward_ad`: jvp with dual tensors, and the reverse-over-forward Hessian-vector product."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle
from autograder.labs.lab03.scenarios import HVP_FUNCS, JVP_FUNCS


def jvp_shapes(name, n):
    return {"matmul_tanh": [(2, n), (n, 3)], "norm_mix": [(n,), (n,)], "mul_exp": [(n, 2), (n, 2)]}.get(name, [(n,)])


def check_jvp(student, name, seed, n):
    shapes = jvp_shapes(name, n)
    primals = oracle.arrays(seed, *shapes)
    tangents = oracle.arrays(seed + 7, *shapes)
    got = student.run("forward_jvp", name, primals, tangents)
    what = f"jvp of {name} with inputs of shapes {[list(s) for s in shapes]}"
    assert not got["forbidden"], f"{what}: use dual tensors (torch.autograd.forward_ad), not torch.autograd.functional"
    want_out, want_tangent = oracle.jvp(name, primals, tangents)
    oracle.close(got["out"], want_out, f"{what}: the output")
    oracle.close(got["tangent"], want_tangent, f"{what}: the tangent J·v")
    assert got["engine_calls"] == 0, (
        f"{what}: your jvp ran the reverse-mode engine {got['engine_calls']} times; forward mode needs no backward pass")


@pytest.mark.parametrize("name", list(JVP_FUNCS))
def test_jvp(student, name):
    check_jvp(student, name, 1, 3)


@pytest.mark.weight(3)
@settings(max_examples=12)
@given(name=st.sampled_from(sorted(JVP_FUNCS)), seed=st.integers(0, 2**16), n=st.integers(1, 5))
def test_jvp_generated(student, name, seed, n):
    check_jvp(student, name, seed, n)


def check_hvp(student, name, seed, n):
    x, v = oracle.arrays(seed, (n,), (n,))
    x = x * 0.5
    got = student.run("forward_hvp", name, x, v)
    what = f"hvp of {name} at a point of size {n}"
    assert not got["forbidden"], f"{what}: build it from forward-mode AD, not torch.autograd.functional"
    oracle.close(got["hv"], oracle.hvp(name, x, v), f"{what}: H·v", rtol=1e-6, atol=1e-8)
    assert not got["requires_grad"], f"{what}: return a tensor without history (detach it)"
    assert got["engine_calls"] <= 1, (
        f"{what}: your hvp ran the reverse-mode engine {got['engine_calls']} times; reverse over forward needs one "
        "backward pass (two means reverse over reverse)")
    assert got["x_untouched"], f"{what}: the caller's x was changed or got a .grad"


@pytest.mark.parametrize("name", list(HVP_FUNCS))
def test_hvp(student, name):
    check_hvp(student, name, 2, 4)


@pytest.mark.weight(3)
@settings(max_examples=10)
@given(name=st.sampled_from(sorted(HVP_FUNCS)), seed=st.integers(0, 2**16), n=st.integers(2, 6))
def test_hvp_generated(student, name, seed, n):
    check_hvp(student, name, seed, n)

# IPT-CANARY lab03 test_forward_ad.py: hidden grading text, never shown to learners
