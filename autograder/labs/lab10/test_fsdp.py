# IPT-CANARY lab10 test_fsdp.py: hidden grading text, never shown to learners
"""Part `fsdp`: ShardedLinear (each rank stores its padded shard of the flat weight and bias; forward
all-gathers the layer, backward all-gathers it again and reduce-scatters the flat gradient, divided by W).

Trust: values only. The referee runs P0's ShardedLinear at a drawn seat: a learner rank that all-reduces
instead, skips the backward gather or pads differently stalls the world or hands the referee other
values. In backward the referee contributes its shard plus a drawn shift, so every rank's input gradient
is computed with a layer unlike forward's: a backward that computes with a layer kept from forward ends
with other shards. P0 compares every rank's shards (after construction and after training), its losses
and what the referee received with a float64 single-process run of the same rules.
"""
import numpy as np

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab10 import draws, expect
from autograder.labs.lab10.world import expect_close, play, referee  # noqa: F401 - referee is a fixture


def describe(spec, world):
    shapes = ", ".join(f"({o}, {i})" + (" with a bias" if b else "") for i, o, b in spec["layers"])
    return f"ShardedLinear layers {shapes} on {world} ranks, {spec['steps']} SGD steps"


def check(student, referee, world, seat, spec, arrays, group=None):
    members = list(range(world)) if group is None else list(group)
    what = describe(spec, len(members)) + (f" (the group {group} of {world} ranks)" if group else "")
    member_seat = members.index(seat) if seat is not None and seat in members else None
    want = expect.fsdp(spec, [arrays[r] for r in members], member_seat)
    outcome = play(student, referee, "fsdp", world, seat, spec, arrays, what, group=group)
    layers = len(spec["layers"])
    for r in outcome.learner_ranks():
        if r not in members:
            continue
        got, g = outcome.rank(r), members.index(r)
        for key, when in (("init", "after construction"), ("shards", f"after {spec['steps']} steps")):
            shards = replies.list_of(got.get(key), f"{what}: rank {g}'s shards {when}", layers)
            for k, (have, value) in enumerate(zip(shards, want[key][g], strict=True)):
                assert isinstance(have, np.ndarray) and have.shape == value.shape, (
                    f"{what}: rank {g}'s shard of layer {k} should have ceil({want['sizes'][k]} / {len(members)}) = "
                    f"{value.shape[0]} elements (its slice, padded with zeros), got "
                    + (f"shape {have.shape}" if isinstance(have, np.ndarray) else type(have).__name__))
                hint = "" if key == "init" else (
                    " (an input gradient computed with the layer gathered in backward, the gradient reduce-scattered "
                    "and divided by the number of ranks)")
                expect_close(have, value, f"{what}: rank {g}'s shard of layer {k} {when}{hint}", atol=1e-5)
        given = replies.list_of(got.get("given"), f"{what}: rank {g}'s weights and biases after training", layers)
        for k, ((i, o, b), pair) in enumerate(zip(spec["layers"], given, strict=True)):
            pair = replies.list_of(pair, f"{what}: layer {k}'s weight and bias", 2)
            unchanged = np.array_equal(pair[0], arrays[r][f"w{k}"]) and (not b or np.array_equal(pair[1], arrays[r][f"b{k}"]))
            assert unchanged, (f"{what}: rank {g}: training the shards changed the weight or bias tensor passed to "
                               f"ShardedLinear (layer {k}); the shard must be a copy")
        losses = replies.list_of(got.get("losses"), f"{what}: rank {g}'s losses", spec["steps"])
        for t, (have, value) in enumerate(zip(losses, want["losses"][g], strict=True)):
            assert isinstance(have, float) and abs(have - value) <= 1e-4 * max(1.0, abs(value)), (
                f"{what}: rank {g}'s loss in step {t + 1} differs from the single-process network's (the forward "
                f"of the gathered layers)")
    if member_seat is not None:
        outcome.need_referee()
        seen = outcome.seen
        assert len(seen) == len(want["seen"]), (
            f"{what}: the graders' rank received {len(seen)} gathered layers and gradient slices, the rules make "
            f"{len(want['seen'])}")
        for s, (have, value) in enumerate(zip(seen, want["seen"], strict=True)):
            expect_close(have, value, f"{what}: collective {s + 1} of the graders' rank (a gathered layer or its "
                                      f"reduce-scattered gradient slice)", atol=1e-5)


def test_train_a_sharded_network(student, referee):
    """Three or four ranks, flat sizes the world does not divide, inputs of two or three dimensions."""
    rng = case_rng(1210)
    for world, three_d in ((3, False), (4, True)):
        seat = draws.seat(rng, world)
        spec, arrays = draws.fsdp(rng, world, seat=seat, three_d=three_d)
        check(student, referee, world, seat, spec, arrays)


def test_fewer_elements_than_ranks_and_subgroups(student, referee):
    """A layer with fewer elements than ranks (some shards hold only padding), a subgroup, a world of one."""
    rng = case_rng(1220)
    seat = draws.seat(rng, 4)
    spec, arrays = draws.fsdp(rng, 4, n_small=True, seat=seat)
    check(student, referee, 4, seat, spec, arrays)
    group = draws.subgroup(rng, 4, 3)
    g_seat = int(rng.integers(3))
    spec, members = draws.fsdp(rng, 3, seat=g_seat)
    check(student, referee, 4, group[g_seat], spec, draws.in_group(members, group, 4), group)
    spec, arrays = draws.fsdp(rng, 1)
    check(student, referee, 1, None, spec, arrays)
