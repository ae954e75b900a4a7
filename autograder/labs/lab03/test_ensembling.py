"""Part `ensembling`: stack_module_state + functional_call + vmap, against a loop over the models."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle


def check(student, seed, models, batch, d, h, c, same_input):
    params = [oracle.mlp_params(seed + m, d, h, c) for m in range(models)]
    (x,) = oracle.arrays(seed + 99, (batch, d) if same_input else (models, batch, d), dtype=np.float32)
    got = student.run("ensemble", params, x, same_input=same_input)
    what = f"ensemble_predict of {models} models on a batch of {batch} (same_input={same_input})"
    oracle.close(got["out"], oracle.ensemble(params, x, same_input), f"{what}: the outputs", rtol=1e-5, atol=1e-6)
    assert got["models_intact"], f"{what}: the caller's models were changed or moved (make the meta copy with deepcopy)"
    assert got["forward_calls"] < models, (
        f"{what}: the models ran {got['forward_calls']} times; run the stacked state through one vmap call")


def test_small(student):
    check(student, 0, 3, 4, 5, 6, 2, True)


def test_different_inputs(student):
    check(student, 1, 3, 2, 4, 3, 2, False)


@pytest.mark.weight(4)
@settings(max_examples=10)
@given(seed=st.integers(0, 2**16), models=st.integers(2, 4), batch=st.integers(1, 5), d=st.integers(1, 5),
       h=st.integers(1, 6), c=st.integers(1, 3), same_input=st.booleans())
def test_generated(student, seed, models, batch, d, h, c, same_input):
    check(student, seed, models, batch, d, h, c, same_input)

# IPT-CANARY lab03 test_ensembling.py: hidden grading text, never shown to learners
