"""Part `saved_tensor_hooks`: NumpyOffload and Checkpoint.

Trust: values only; no byte counts, hook counts or call counts reported by P1. Offloading is graded
by what the store holds (every tensor autograd saved, in order, as numpy arrays: compared with what
P0 sees autograd save), by gradients bit-identical to a run without hooks even when the parameters
change in place after the forward (the store holds copies), and by gradients that follow the store
when the caller changes it (unpack reads the store). Checkpointing is graded by behaviour a plain
run or torch's own checkpoints lack: weights changed after the forward are seen by the recompute
(a plain run raises), a block whose input does not require grad gives its parameters no gradient
(use_reentrant=False would), the rng state given to Checkpoint.apply is the one replayed (torch's
checkpoint replays the state at forward time), and the caller's random stream is left alone.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.engine.plugin import case_seed
from autograder.labs.lab03 import oracle

D, H, C, B = 16, 48, 4, 8


def inputs(seed, sizes=(D, H, C, B)):
    d, h, c, b = sizes
    params = oracle.hooks_params(seed, d, h, c)
    (x,) = oracle.arrays(seed + 1, (b, d), dtype=np.float32)
    return params, x


def same_as_p0(got, params, x, seed, what):
    want = oracle.hooks_grads(params, x, seed, 0.25)
    oracle.grads_close(got["baseline_grads"], want, f"{what}: the reference gradients")


def run_offload(student, seed, sizes=(D, H, C, B), mutate=None, gated=True):
    if gated:
        oracle.gate(student, "offload", lambda: offload_gate(student), "NumpyOffload (copies in a store that unpack reads)")
    params, x = inputs(seed, sizes)
    got = student.run("offload", params, x, seed, mutate=mutate)
    got = oracle.reply(got, {"baseline_grads", "grads", "keys", "stored"}, "the offload run")
    same_as_p0(got, params, x, seed, "offload")
    return got, params, x


@pytest.mark.weight(2)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_offload_gradients_bit_identical(student, seed):
    got, _, _ = run_offload(student, seed)
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with NumpyOffload's hooks")


def test_offload_keeps_the_layout(student):
    # a net whose input gradient depends on the saved transposed weight keeping its strides
    got, _, _ = run_offload(student, 0, sizes=(8, 16, 3, 4))
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with NumpyOffload's hooks on a (8, 16, 3) net")


@pytest.mark.weight(2)
def test_offload_store_holds_every_saved_tensor(student):
    got, params, x = run_offload(student, 1)
    want, _ = oracle.offload(params, x, 1)
    what = "NumpyOffload.store after the forward"
    keys = replies.list_of(got["keys"], f"{what}: its keys", length=len(want))
    assert all(replies.is_int(k) for k in keys) and len(set(keys)) == len(keys), (
        f"{what}: keys should be distinct integers, got {keys[:6]}")
    for i, (mine, ref) in enumerate(replies.pairs(got["stored"], want, f"{what}: its arrays")):
        assert mine is not None, f"{what}: the entry for the {i}-th saved tensor is not a numpy array"
        mine = replies.array(mine, f"{what}: the {i}-th saved tensor", shape=ref.shape)
        assert np.array_equal(mine, ref), f"{what}: the {i}-th saved tensor (in the order autograd packs) has other values"


@pytest.mark.weight(2)
def test_offload_holds_copies(student):
    got, _, _ = run_offload(student, 2, mutate="params")
    oracle.bit_identical(got["grads"], got["baseline_grads"],
                         "with NumpyOffload, when the parameters change in place after the forward "
                         "(the store must hold copies, so backward still sees the forward's values)")


@pytest.mark.weight(2)
def test_offload_unpacks_from_the_store(student):
    got, params, x = run_offload(student, 3, mutate="store")
    _, want = oracle.offload(params, x, 3, double=True)
    oracle.grads_close(got["grads"], want,
                       "with NumpyOffload, when every array in its store is doubled before backward "
                       "(unpack must return what the store holds)", rtol=1e-4, atol=1e-6)


@pytest.mark.weight(2)
def test_offload_backward_twice(student):
    got, _, _ = run_offload(student, 4, mutate="twice")
    oracle.bit_identical(got["grads"], got["baseline_grads"],
                         "with NumpyOffload, a second backward on a graph kept with retain_graph=True "
                         "(unpack must leave the array in the store: it can be unpacked again)")


def offload_gate(student):
    got, _, _ = run_offload(student, 45, mutate="params", gated=False)
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with NumpyOffload, parameters changed after the forward")
    got, params, x = run_offload(student, 46, mutate="store", gated=False)
    _, want = oracle.offload(params, x, 46, double=True)
    oracle.grads_close(got["grads"], want, "with NumpyOffload, its store doubled before backward", rtol=1e-4, atol=1e-6)


def checkpoint_gate(student):
    got, want = run_checkpoint(student, 47, mode="mutate", gated=False)
    oracle.grads_close(got["grads"], want, "with checkpoints, weights changed after the forward")
    got, want = run_checkpoint(student, 48, mode="no_input_grad", gated=False)
    oracle.grads_close(got["grads"], want, "with a checkpointed block whose input does not require grad")
    got, want = run_checkpoint(student, 49, mode="given_rng", rng_seed=777, gated=False)
    oracle.grads_close(got["grads"], want, "with Checkpoint.apply given another rng state")


def run_checkpoint(student, seed, mode="plain", rng_seed=None, gated=True):
    if gated:
        oracle.gate(student, "checkpoint", lambda: checkpoint_gate(student), "Checkpoint (recompute with the given rng state)")
    params, x = inputs(seed)
    got = student.run("checkpointed", params, x, seed, mode=mode, rng_seed=rng_seed)
    got = oracle.reply(got, {"baseline_grads", "grads", "rng_draws"}, "the checkpoint run")
    same_as_p0(got, params, x, seed, "checkpoint")
    want_grads, want_draws = oracle.checkpointed(params, x, seed, mode=mode, rng_seed=rng_seed)
    for i, (draw, want) in enumerate(replies.pairs(got["rng_draws"], want_draws, "the caller's random draws")):
        label = ("forward", "backward")[i]
        draw = replies.array(draw, f"the caller's random draw after the {label}", shape=want.shape)
        assert np.array_equal(draw, want), (
            f"after the {label}, torch's random stream is not where it would be without checkpoints: "
            "recompute inside torch.random.fork_rng(devices=[])")
    return got, want_grads


@pytest.mark.weight(3)
@settings(max_examples=3)
@given(seed=st.integers(0, 2**16))
def test_checkpoint_gradients_bit_identical(student, seed):
    got, _ = run_checkpoint(student, seed)
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with two checkpointed blocks (dropout inside)")


@pytest.mark.weight(2)
def test_checkpoint_recomputes_in_backward(student):
    got, want = run_checkpoint(student, 2, mode="mutate")
    oracle.grads_close(got["grads"], want,
                       "with checkpoints, when the first block's weights change in place after the forward "
                       "(backward recomputes the block, so it sees the new weights)")


@pytest.mark.weight(2)
def test_checkpoint_input_without_grad(student):
    got, want = run_checkpoint(student, 3, mode="no_input_grad")
    oracle.grads_close(got["grads"], want,
                       "with a checkpointed first block whose input does not require grad (the Function has no "
                       "input that requires grad, so its output has no grad_fn and the block gets no gradient)")


@pytest.mark.weight(2)
def test_checkpoint_replays_the_given_rng_state(student):
    got, want = run_checkpoint(student, 4, mode="given_rng", rng_seed=12345)
    oracle.grads_close(got["grads"], want,
                       "with Checkpoint.apply(run_fn, rng_state, x) given another rng state than the current one "
                       "(backward must replay the rng_state it was given)")


@pytest.mark.weight(2)
def test_checkpoint_with_index_and_constant_args(student):
    """Arguments that need no gradient keep their flag in the recompute: an int64 index cannot require grad."""
    got, want = run_checkpoint(student, case_seed(31) % (1 << 16), mode="extra_args")
    oracle.grads_close(got["grads"], want,
                       "with a checkpointed block given an int64 index tensor and a float tensor that needs no grad "
                       "besides its input (checkpoint(lambda h, idx, scale: block(h * scale)[:, idx], h, idx, scale))")


def test_checkpoint_leaves_random_stream_alone(student):
    got, _ = run_checkpoint(student, 5)
    oracle.bit_identical(got["grads"], got["baseline_grads"], "with two checkpointed blocks (dropout inside)")

# IPT-CANARY lab03 test_saved_tensor_hooks.py: hidden grading text, never shown to learners
