"""Part `saved_tensor_hooks`: NumpyOffload and Checkpoint.

Bytes are measured in the scenario: for offloading, the torch storages that the objects the
learner's pack returns (and their store) keep alive; for checkpointing, the storages that outer
saved-tensor hooks see while the forward builds the graph. Gradients must be bit-identical to a
run without hooks, and close to an independent computation done here.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab03 import oracle

D, H, C, B = 16, 48, 4, 8


def inputs(seed, sizes=(D, H, C, B)):
    d, h, c, b = sizes
    params = oracle.hooks_params(seed, d, h, c)
    (x,) = oracle.arrays(seed + 1, (b, d), dtype=np.float32)
    return params, x


def same_as_p0(got, params, x, seed, what):
    want = oracle.hooks_grads(params, x, seed, 0.25)
    for name, g, w in zip(oracle.GRAD_NAMES, got["baseline_grads"], want):
        oracle.close(g, w, f"{what}: the reference gradient of {name}", rtol=1e-5, atol=1e-7)


def run_offload(student, seed, sizes=(D, H, C, B)):
    params, x = inputs(seed, sizes)
    got = student.run("offload", params, x, seed)
    same_as_p0(got, params, x, seed, "offload")
    return got


@pytest.mark.weight(2)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_offload_gradients_bit_identical(student, seed):
    got = run_offload(student, seed)
    assert got["packed"] > 0 and got["unpacked"] > 0, "NumpyOffload.pack / unpack were never used by autograd"
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with NumpyOffload's hooks")


def test_offload_keeps_the_layout(student):
    # a net whose input gradient depends on the saved transposed weight keeping its strides
    got = run_offload(student, 0, sizes=(8, 16, 3, 4))
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with NumpyOffload's hooks on a (8, 16, 3) net")


@pytest.mark.weight(2)
def test_offload_keeps_fewer_torch_bytes(student):
    got = run_offload(student, 1)
    assert got["torch_bytes"] < got["baseline_bytes"], (
        f"with NumpyOffload, autograd still keeps {got['torch_bytes']} bytes of torch memory "
        f"(without hooks: {got['baseline_bytes']}); copy each saved tensor into a numpy array that owns its memory")
    assert got["numpy_bytes"] > 0, "NumpyOffload.store holds no numpy arrays after the forward"


def run_checkpoint(student, seed):
    params, x = inputs(seed)
    got = student.run("checkpointed", params, x, seed)
    same_as_p0(got, params, x, seed, "checkpoint")
    assert not got["forbidden"], "write Checkpoint yourself: do not call torch.utils.checkpoint"
    return got


@pytest.mark.weight(3)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_checkpoint_gradients_bit_identical(student, seed):
    got = run_checkpoint(student, seed)
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with two checkpointed blocks (dropout inside)")


@pytest.mark.weight(2)
def test_checkpoint_saves_fewer_bytes(student):
    got = run_checkpoint(student, 2)
    assert got["inner_hooks"] == 0, (
        "Checkpoint installed saved-tensor hooks of its own; this part asks for the recompute-in-backward "
        "Function (keep the inputs, recompute under enable_grad)")
    assert got["bytes"] < got["baseline_bytes"], (
        f"with checkpoints, autograd saved {got['bytes']} bytes during the forward, not fewer than without "
        f"({got['baseline_bytes']}); run the block under no_grad and save only its inputs")


def test_checkpoint_recomputes_once(student):
    got = run_checkpoint(student, 3)
    assert got["fn_calls"] == [2, 2], (
        f"each checkpointed block should run twice (forward, then once more in backward); they ran {got['fn_calls']} times")


def test_checkpoint_leaves_random_stream_alone(student):
    got = run_checkpoint(student, 4)
    for label, draw, want in zip(("forward", "backward"), got["rng_draws"], got["rng_expected"]):
        assert np.array_equal(draw, want), (
            f"after the {label}, torch's random stream is not where it would be without checkpoints: "
            "recompute inside torch.random.fork_rng(devices=[])")

# IPT-CANARY lab03 test_saved_tensor_hooks.py: hidden grading text, never shown to learners
