"""Part `pipeline`: the learner's fusing_backend through AOTAutograd on functions and small models the notebook
does not show: outputs and gradients equal to eager, the kernel counts of the reference plan, kernels built."""
import functools

import pytest

from autograder.labs.lab07 import oracle

CASES = [("chain", 1), ("bias_gelu", 2), ("log_softmax", 4), ("layernormish", 5), ("full_sum", 7), ("masked", 9),
         ("mm_cycle", 10), ("relu_clamp", 11), ("tiny_block", 14), ("tanh_net", 15)]
_got = {}


def learner(student, case, seed):
    if (case, seed) not in _got:
        _got[case, seed] = student.run("backend_case", case, seed)
    return _got[case, seed]


@functools.lru_cache(maxsize=None)
def expected_kernels(case):
    return oracle.expected_kernels(case)


@pytest.mark.weight(2)
@pytest.mark.parametrize("case,seed", CASES)
def test_values_and_gradients(student, case, seed):
    got = learner(student, case, seed)
    assert "error" not in got, f"torch.compile({case}, backend=fusing_backend) failed: {got.get('error')}: {got.get('message')}"
    want = oracle.eager_case(case, seed)
    oracle.close(got["out"], want["out"], f"{case} compiled with your backend: the output", rtol=2e-4, atol=2e-5)
    oracle.close(got["again"], want["out"], f"{case}: the output of a second call of the compiled function", rtol=2e-4, atol=2e-5)
    for name, grad in want["grads"].items():
        assert (got["grads"].get(name) is None) == (grad is None), f"{case}: the gradient of {name} is missing"
        if grad is not None:
            oracle.close(got["grads"][name], grad, f"{case}: the gradient of {name} through your backend", rtol=5e-4, atol=5e-5)


@pytest.mark.parametrize("case,seed", CASES)
def test_kernel_counts(student, case, seed):
    got = learner(student, case, seed)
    assert "error" not in got, f"torch.compile({case}, backend=fusing_backend) failed: {got.get('error')}: {got.get('message')}"
    want = expected_kernels(case)
    assert got["kernels"] == want, (
        f"{case}: the forward and backward graphs should run {want} fused kernels (COMPILED_KERNELS), yours reported {got['kernels']}")
    assert got["built"] > 0 or sum(want) == 0, f"{case}: your backend reported kernels but build_count() did not grow"


@pytest.mark.weight(2)
def test_new_shape_recompiles(student):
    import numpy as np
    import torch
    got = student.run("backend_recompile")
    assert "error" not in got, f"calling a compiled function with a second shape failed: {got.get('error')}: {got.get('message')}"
    for n, out in zip((6, 11), got["outs"]):
        x = torch.linspace(-2, 2, n)
        oracle.close(out, (torch.tanh(x) * 2 + x.exp()).numpy(), f"tanh(x) * 2 + exp(x) on a second shape ({n} elements)")
    assert np.asarray(got["outs"][1]).shape == (11,)

# IPT-CANARY lab07 test_pipeline.py: hidden grading text, never shown to learners
