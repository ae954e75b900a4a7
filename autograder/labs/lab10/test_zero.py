# IPT-CANARY lab10 test_zero.py: hidden grading text, never shown to learners
"""Part `zero`: shard_bounds and ZeroAdamW (reduce-scatter of the padded flat gradients, AdamW on the
rank's slice, all-gather of the parameters; state of the slice only).

Trust: values only. The referee runs P0's ZeroAdamW at a drawn seat with its own gradients: a learner
rank that all-reduces instead, skips the all-gather or pads differently stalls the world or hands the
referee other parameters. P0 compares every rank's parameters, its state shard (shape and values) and
what the referee gathered with torch.optim.AdamW on the average gradients, in float64.
"""
import numpy as np

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab10 import draws, expect, oracle
from autograder.labs.lab10.world import expect_close, play, referee  # noqa: F401 - referee is a fixture


FIXED = 7   # the first cases of test_shard_bounds are fixed and small: their answers may be shown


def test_shard_bounds(student):
    rng = case_rng(1100)
    good = [(10, 4), (2, 4), (0, 3), (7, 1), (12, 3), (5, 5), (1, 6)]
    assert len(good) == FIXED
    good += [(int(rng.integers(0, 3000)), int(rng.integers(1, 17))) for _ in range(12)]
    bad = [(5, 0), (-1, 2), (-int(rng.integers(1, 9)), 3), (int(rng.integers(1, 50)), -int(rng.integers(1, 4)))]
    got = replies.list_of(student.run("lab10.scenarios:bounds", good + bad), "shard_bounds results", len(good) + len(bad))
    for k, ((n, world), reply) in enumerate(zip(good, got[:len(good)], strict=True)):
        want = oracle.shard_bounds(n, world)
        value = reply.get("value") if isinstance(reply, dict) else None
        expected = f"should be {want}" if k < FIXED else "does not follow the statement's rule (shards of ceil(n / W), cut at n)"
        assert value == want, f"shard_bounds({n}, {world}) {expected}, got " + (
            f"{reply['error']}: {reply.get('message', '')}" if isinstance(reply, dict) and "error" in reply else f"{value!r}")
    for (n, world), reply in zip(bad, got[len(good):], strict=True):
        assert isinstance(reply, dict) and reply.get("error") == "ValueError", \
            f"shard_bounds({n}, {world}) should raise ValueError, got {reply.get('value', reply.get('error'))!r}"


def check(student, referee, what, world, seat, spec, arrays, group=None):
    members = list(range(world)) if group is None else list(group)
    want = expect.zero(spec, [arrays[r] for r in members])
    outcome = play(student, referee, "zero", world, seat, spec, arrays, what, group=group)
    steps = spec["steps"]
    for r in outcome.learner_ranks():
        if r not in members:
            continue
        got = outcome.rank(r)
        g = members.index(r)
        params = replies.list_of(got.get("params"), f"{what}: rank {g}'s parameters", len(want["params"]))
        for k, (have, value) in enumerate(zip(params, want["params"], strict=True)):
            expect_close(have, value, f"{what}: rank {g}'s parameter {k} after {steps} steps")
        state = replies.list_of(got.get("state"), f"{what}: rank {g}'s state_shard()", 2)
        lo, hi = want["bounds"][g], want["bounds"][g + 1]
        for name, have, value in zip(("exp_avg", "exp_avg_sq"), state, want["state"][g], strict=True):
            assert isinstance(have, np.ndarray) and have.shape == (hi - lo,), (
                f"{what}: rank {g} should keep {name} for its slice only, {hi - lo} elements "
                f"(elements {lo}:{hi} of {want['bounds'][-1]}), got " + (f"shape {have.shape}" if isinstance(have, np.ndarray)
                                                                       else type(have).__name__))
            expect_close(have, value, f"{what}: rank {g}'s {name}", atol=1e-6)
            dtype = spec.get("dtype", "float32")
            assert have.dtype == np.dtype(dtype), (
                f"{what}: rank {g}'s {name} should be {dtype}, the parameters' dtype, got {have.dtype}")
        assert got.get("cleared") is True, f"{what}: rank {g}'s zero_grad() should set every .grad to None"
    if seat is not None and seat in members:
        outcome.need_referee()
        seen = outcome.seen
        assert len(seen) == steps, f"{what}: the graders' rank gathered parameters {len(seen)} times in {steps} steps"
        for s, (have, value) in enumerate(zip(seen, want["gathered"], strict=True)):
            expect_close(have, value, f"{what}: the parameters all-gathered in step {s + 1} (at the graders' rank)")


def test_sharded_adamw(student, referee):
    """Three or four ranks, a flat size the world does not divide, a missing gradient in one step."""
    rng = case_rng(1110)
    for world in (3, 4):
        spec, arrays = draws.zero(rng, world)
        check(student, referee, f"ZeroAdamW on {world} ranks, parameters of shapes {spec['shapes']}", world,
              draws.seat(rng, world), spec, arrays)


def test_one_float64_parameter(student, referee):
    """A single float64 parameter (a size the world does not divide): the state keeps the parameters' dtype."""
    rng = case_rng(1130)
    spec, arrays = draws.zero(rng, 3, dtype="float64", single=True)
    check(student, referee, f"ZeroAdamW on 3 ranks, one float64 parameter of shape {tuple(spec['shapes'][0])}", 3,
          draws.seat(rng, 3), spec, arrays)


def test_fewer_elements_than_ranks_and_subgroups(student, referee):
    """Fewer elements than ranks (some shards are empty), a subgroup, and a world of one."""
    rng = case_rng(1120)
    spec, arrays = draws.zero(rng, 4, n_small=True)
    check(student, referee, f"ZeroAdamW on 4 ranks, parameters of shapes {spec['shapes']} (fewer elements than ranks)", 4,
          draws.seat(rng, 4), spec, arrays)
    group = draws.subgroup(rng, 4, 3)
    spec, arrays = draws.zero(rng, 4)
    check(student, referee, f"ZeroAdamW on the group {group} of 4 ranks", 4, group[int(rng.integers(3))], spec, arrays, group)
    spec, arrays = draws.zero(rng, 1)
    check(student, referee, "ZeroAdamW on 1 rank", 1, None, spec, arrays)
