"""Part `ensembling`: stack_module_state + functional_call + vmap, against a loop over the models.

Trust: values only (the old P1-side count of forward calls is gone). Models include batch-norm
models in eval mode, whose buffers must be stacked too, ensembles of one model and empty batches.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle


def check(student, seed, models, batch, d, h, c, same_input, kind="mlp"):
    params = [oracle.model_params(seed + m, d, h, c, kind) for m in range(models)]
    (x,) = oracle.arrays(seed + 99, (batch, d) if same_input else (models, batch, d), dtype=np.float32)
    got = student.run("ensemble", params, x, same_input=same_input, kind=kind)
    got = oracle.reply(got, {"out", "models_intact"}, "ensemble_predict's result")
    what = f"ensemble_predict of {models} {kind} model(s) on a batch of {batch} (same_input={same_input})"
    oracle.close(got["out"], oracle.ensemble(params, x, same_input, kind), f"{what}: the outputs", rtol=1e-5, atol=1e-6)
    assert got["models_intact"] is True, (
        f"{what}: the caller's models were changed or moved (make the meta copy with deepcopy)")


def test_small(student):
    check(student, 0, 3, 4, 5, 6, 2, True)


def test_different_inputs(student):
    check(student, 1, 3, 2, 4, 3, 2, False)


@pytest.mark.weight(2)
@pytest.mark.parametrize("same_input", [True, False])
def test_models_with_buffers(student, same_input):
    check(student, 2, 3, 4, 3, 5, 2, same_input, kind="batchnorm")


def test_one_model_and_empty_batch(student):
    check(student, 3, 1, 3, 4, 3, 2, True)
    check(student, 4, 2, 0, 4, 3, 2, True)


@pytest.mark.weight(4)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**16), models=st.integers(1, 4), batch=st.integers(1, 5), d=st.integers(1, 5),
       h=st.integers(1, 6), c=st.integers(1, 3), same_input=st.booleans(),
       kind=st.sampled_from(("mlp", "mlp", "nested", "batchnorm")))
def test_generated(student, seed, models, batch, d, h, c, same_input, kind):
    check(student, seed, models, batch, d, h, c, same_input, kind)

# IPT-CANARY lab03 test_ensembling.py: hidden grading text, never shown to learners
