# IPT-CANARY lab10 test_ddp.py: hidden grading text, never shown to learners
"""Part `ddp`: plan_buckets, BucketedDDP (broadcast from group rank 0, buckets all-reduced in order from
gradient hooks, the average written back, no_sync accumulation).

Trust: values only. Every world but the one-rank one has P0's referee at a seat drawn from the grading
seed, running P0's BucketedDDP: it broadcasts, then all-reduces one flat bucket per bucket of the plan,
in order, per step. A learner rank that all-reduces per parameter, skips a bucket, launches out of order
or communicates inside no_sync stalls the world or hands the referee other sums; P0 compares the
referee's bucket sums and every learner rank's parameters and gradients with one process in float64.
"""
from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab10 import draws, expect, oracle
from autograder.labs.lab10.world import expect_close, play, referee  # noqa: F401 - referee is a fixture


def test_plan_buckets(student):
    rng = case_rng(1000)
    fixed = [([4, 4, 4, 4], 8, None), ([4, 4, 4, 4], 8, 4), ([100, 1, 1], 10, None), ([1, 100, 1], 10, None), ([], 10, None),
             ([0, 0, 0], 1, None), ([5], 5, None), ([3, 3, 3], 3, 100), ([8, 8], 4, 1), ([5, 4, 3, 8], 8, None)]
    drawn = []
    for _ in range(12):
        sizes = [int(s) for s in rng.integers(0, 64, int(rng.integers(1, 12)))]
        drawn.append((sizes, int(rng.integers(1, 160)), None if rng.integers(2) else int(rng.integers(1, 80))))
    bad = [([4, 4], 0, None), ([4, 4], -int(rng.integers(1, 9)), None), ([4, 4], 8, 0), ([4, 4], 0, 4), ([4, -1, 4], 8, None),
           ([4, -1 - int(rng.integers(5)), 4], 8, None)]
    cases = fixed + drawn + bad
    got = replies.list_of(student.run("lab10.scenarios:buckets", cases), "plan_buckets results", len(cases))
    for k, ((sizes, cap, first), reply) in enumerate(zip(cases[:len(fixed) + len(drawn)], got[:len(fixed) + len(drawn)], strict=True)):
        want = oracle.plan_buckets(sizes, cap, first)
        value = reply.get("value") if isinstance(reply, dict) else None
        shown = f"{reply['error']}: {reply.get('message', '')}" if isinstance(reply, dict) and "error" in reply else repr(value)
        # the expected plan is shown for the small fixed cases only: a drawn case's answer could be harvested
        expected = f"should be {want}" if k < len(fixed) else "does not follow the statement's rule"
        assert value == want, f"plan_buckets({sizes}, {cap}, {first}) {expected}, got {shown}"
    for (sizes, cap, first), reply in zip(bad, got[len(fixed) + len(drawn):], strict=True):
        assert isinstance(reply, dict) and reply.get("error") == "ValueError", \
            f"plan_buckets({sizes}, {cap}, {first}) should raise ValueError, got {reply.get('value', reply.get('error'))!r}"


def check(student, referee, what, world, seat, spec, arrays, group=None):
    members = list(range(world)) if group is None else list(group)
    want = expect.ddp(spec, [arrays[r] for r in members])
    outcome = play(student, referee, "ddp", world, seat, spec, arrays, what, group=group)
    for r in outcome.learner_ranks():
        if r not in members:
            continue
        got = outcome.rank(r)
        g = members.index(r)
        plan = got.get("buckets")
        assert plan == want["buckets"], f"{what}: rank {g}'s bucket plan should be {want['buckets']}, got {plan!r}"
        params = replies.list_of(got.get("params"), f"{what}: rank {g}'s parameters", len(want["params"]))
        for k, (have, value) in enumerate(zip(params, want["params"], strict=True)):
            expect_close(have, value, f"{what}: rank {g}'s parameter {k} after {len(spec['steps'])} steps")
        grads = replies.list_of(got.get("grads"), f"{what}: rank {g}'s gradients", len(want["grads"]))
        for k, (have, value) in enumerate(zip(grads, want["grads"], strict=True)):
            expect_close(have, value, f"{what}: rank {g}'s gradient of trainable parameter {k} in the last step")
        expect_close(got.get("scale"), want["scale"], f"{what}: rank {g}'s buffer")
    if seat is not None and seat in members:
        outcome.need_referee()
        seen = outcome.seen
        assert len(seen) == len(want["sums"]), (f"{what}: the graders' rank met {len(seen)} bucket all-reduces, the plan makes "
                                               f"{len(want['sums'])}")
        for k, (have, value) in enumerate(zip(seen, want["sums"], strict=True)):
            step, bucket = divmod(k, len(want["buckets"]))
            expect_close(have, value, f"{what}: the sum of bucket {bucket} in step {step} (at the graders' rank)")


def test_chained_model_with_accumulation(student, referee):
    """Three ranks, chained blocks, a frozen parameter, micro-batches under no_sync, a small first bucket;
    then a model with a layer whose backward makes a collective of its own: the first bucket is ready before
    it, and must be launched before it (a DDP that launches only when backward ends calls them in another order)."""
    rng = case_rng(1010)
    spec, arrays = draws.ddp(rng, 3)
    check(student, referee, "a DDP world of 3 ranks (chained layers, one frozen parameter)", 3, draws.seat(rng, 3), spec, arrays)
    spec, arrays = draws.ddp(rng, 3, probe=True)
    check(student, referee, "a DDP world of 3 ranks whose model has a layer making a collective in its backward (launch each "
          "bucket from the hooks, as soon as it and the buckets before it are ready)", 3, draws.seat(rng, 3), spec, arrays)


def test_backward_order_differs_from_registration(student, referee):
    """Four ranks, square blocks run in a shuffled order, an unused parameter registered first or last."""
    rng = case_rng(1020)
    spare = ["first", "last"][int(rng.integers(2))]
    spec, arrays = draws.ddp(rng, 4, shuffled=True, spare=spare, frozen=False)
    check(student, referee, f"a DDP world of 4 ranks (blocks used in another order than registered, an unused layer "
          f"registered {spare})", 4, draws.seat(rng, 4), spec, arrays)
    spec, arrays = draws.ddp(rng, 3, shuffled=True, spare="first", probe=True)
    check(student, referee, "a DDP world of 3 ranks (blocks used in another order than registered, a layer making a "
          "collective in its backward: launch each bucket from the hooks, as soon as it and the buckets before it are ready)",
          3, draws.seat(rng, 3), spec, arrays)
    spec, arrays = draws.ddp(rng, 1, shuffled=True, spare="last")
    check(student, referee, "a DDP world of 1 rank", 1, None, spec, arrays)
    what = "BucketedDDP on 1 rank over a model with float32 and float64 parameters"
    got = play(student, referee, "ddp_dtypes", 1, None, {}, [{}], what).rank(0)
    assert got.get("mixed") == "ValueError", f"{what}, all trainable: should raise ValueError (a bucket is one flat tensor), got {got.get('mixed')!r}"
    assert got.get("frozen_other") == "accepted", (
        f"{what}, the float64 ones frozen: only trainable parameters must share a dtype, got {got.get('frozen_other')!r}")


def test_subgroup_broadcasts_from_its_first_rank(student, referee):
    """A group of three of four ranks whose rank 0 is not global rank 0; the fourth rank takes no part; the
    model has a layer whose backward makes a collective on the group."""
    rng = case_rng(1030)
    group = draws.subgroup(rng, 4, 3)
    spec, arrays = draws.ddp(rng, 4, spare=["first", None][int(rng.integers(2))], probe=True)
    check(student, referee, f"a DDP group of ranks {group} in a world of 4 (a layer making a collective in its backward)", 4,
          group[int(rng.integers(3))], spec, arrays, group)
