# IPT-CANARY lab10 test_pipeline.py: hidden grading text, never shown to learners
"""Part `pipeline`: gpipe and one_f_one_b action lists, and run_stage over point-to-point messages.

Trust: values only. The schedules are compared with P0's. run_stage is given P0's action lists (so it is
graded on its own): the referee runs one stage with P0's run_stage at a drawn seat and records every
activation and gradient it receives; P0 compares them, the learner stages' gradients and the last
stage's losses with the whole model in one process, in float64.
"""
from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab10 import draws, expect, oracle
from autograder.labs.lab10.world import expect_close, play, referee  # noqa: F401 - referee is a fixture


def _names(schedule):
    return [" ".join(f"{k}{i}" for k, i in stage) for stage in schedule]


def test_schedules(student):
    rng = case_rng(1300)
    mp = [(1, 1), (4, 1), (1, 4), (2, 5), (3, 3), (8, 4), (4, 3)]
    mp += [(int(rng.integers(1, 12)), int(rng.integers(1, 8))) for _ in range(10)]
    cases = [(kind, m, p) for m, p in mp for kind in ("gpipe", "1f1b")]
    bad = [("gpipe", 0, int(rng.integers(1, 5))), ("1f1b", int(rng.integers(1, 5)), 0), ("1f1b", -int(rng.integers(1, 4)), 2)]
    got = replies.list_of(student.run("lab10.scenarios:schedules", cases + bad), "schedule results", len(cases) + len(bad))
    fixed = 2 * 7   # the first seven (m, p) are fixed and small: their schedules may be shown, drawn ones not
    for k, ((kind, m, p), reply) in enumerate(zip(cases, got[:len(cases)], strict=True)):
        want = (oracle.gpipe if kind == "gpipe" else oracle.one_f_one_b)(m, p)
        call = f"{'gpipe' if kind == 'gpipe' else 'one_f_one_b'}({m}, {p})"
        if isinstance(reply, dict) and "error" in reply:
            raise AssertionError(f"{call} raised {reply['error']}: {reply.get('message', '')}")
        value = reply.get("value") if isinstance(reply, dict) else None
        ok = isinstance(value, list) and len(value) == p and all(isinstance(s, list) for s in value)
        expected = f"should be {_names(want)}" if k < fixed else "does not follow the statement's schedule"
        assert ok and [[tuple(a) if isinstance(a, list) else a for a in s] for s in value] == want, (
            f"{call} {expected}, got " + (repr(_names(value)) if ok and all(
                isinstance(a, list) and len(a) == 2 for s in value for a in s) else repr(value)[:300]))
    for (kind, m, p), reply in zip(bad, got[len(cases):], strict=True):
        call = f"{'gpipe' if kind == 'gpipe' else 'one_f_one_b'}({m}, {p})"
        assert isinstance(reply, dict) and reply.get("error") == "ValueError", f"{call} should raise ValueError"


def check(student, referee, what, seat, spec, arrays, group=None, world=None):
    """arrays: per stage. group: the stages' global ranks in a world of `world` (seat is a global rank)."""
    p = len(spec["stages"])
    group = list(range(p)) if group is None else list(group)
    world = p if world is None else world
    want = expect.pipeline(spec, arrays)
    outcome = play(student, referee, "pipeline", world, seat, spec, draws.in_group(arrays, group, world), what,
                   group=None if group == list(range(world)) else group)
    for r in outcome.learner_ranks():
        if r not in group:
            continue
        got = outcome.rank(r)
        s = group.index(r)
        mine = want["ranks"][s]
        grads = replies.list_of(got.get("grads"), f"{what}: stage {s}'s gradients", len(mine["grads"]))
        for k, (have, value) in enumerate(zip(grads, mine["grads"], strict=True)):
            expect_close(have, value, f"{what}: stage {s}'s gradient of parameter {k}")
        losses = got.get("losses")
        if s == p - 1:
            assert isinstance(losses, list) and len(losses) == spec["m"] and all(isinstance(v, float) for v in losses), \
                f"{what}: the last stage should return {spec['m']} losses (floats), got {str(losses)[:120]}"
            expect_close(__import__("numpy").array(losses), mine["losses"], f"{what}: the last stage's losses")
        else:
            assert losses == [], f"{what}: stage {s} is not the last and should return [], got {str(losses)[:120]}"
    if seat is not None and seat in group:
        outcome.need_referee()
        stage = group.index(seat)
        seen, mine = outcome.seen, want["ranks"][stage]["seen"]
        assert len(seen) == len(mine), f"{what}: the graders' stage {stage} received {len(seen)} tensors, expected {len(mine)}"
        for k, (have, value) in enumerate(zip(seen, mine, strict=True)):
            expect_close(have, value, f"{what}: tensor {k + 1} the graders' stage {stage} received")


def test_gpipe_stages(student, referee):
    """Three stages; backwards in reverse order; a first stage that embeds integer token ids, on a group of
    three of four ranks whose group ranks are not the global ones."""
    rng = case_rng(1310)
    spec, arrays = draws.pipeline(rng, 3, int(rng.integers(2, 5)), "gpipe")
    check(student, referee, f"GPipe over 3 stages, {spec['m']} micro-batches", draws.seat(rng, 3), spec, arrays)
    spec, arrays = draws.pipeline(rng, 3, int(rng.integers(2, 4)), "reversed")
    check(student, referee, f"GPipe with backwards in reverse order, 3 stages, {spec['m']} micro-batches", draws.seat(rng, 3), spec, arrays)
    group = draws.subgroup(rng, 4, 3)
    spec, arrays = draws.pipeline(rng, 3, int(rng.integers(2, 4)), ["gpipe", "1f1b"][int(rng.integers(2))], vocab=int(rng.integers(5, 20)))
    check(student, referee, f"3 stages on the group {group} of 4 ranks, {spec['m']} micro-batches, stage 0 embedding token ids",
          group[1 + int(rng.integers(2))], spec, arrays, group, 4)   # stage 0 (the embedding) is the learner's


def test_one_f_one_b_stages(student, referee):
    """Four stages with m >= 3 (two neighbour pairs whose blocking sends would wait on each other: the
    referee can sit in only one), four with m < p - 1, three whose actions take the micro-batches in a drawn
    order (a stage that runs its own order instead of `actions` sends and expects other tensors), two
    stages of the learner's alone, and one stage."""
    rng = case_rng(1320)
    spec, arrays = draws.pipeline(rng, 4, int(rng.integers(3, 6)), "1f1b")
    check(student, referee, f"1F1B over 4 stages, {spec['m']} micro-batches", draws.seat(rng, 4), spec, arrays)
    spec, arrays = draws.pipeline(rng, 4, int(rng.integers(1, 3)), "1f1b")
    check(student, referee, f"1F1B over 4 stages, {spec['m']} micro-batches", draws.seat(rng, 4), spec, arrays)
    spec, arrays = draws.pipeline(rng, 3, int(rng.integers(3, 6)), "1f1b-permuted")
    check(student, referee, f"1F1B over 3 stages, {spec['m']} micro-batches taken in another order than 0, 1, 2, ...",
          draws.seat(rng, 3), spec, arrays)
    spec, arrays = draws.pipeline(rng, 2, int(rng.integers(3, 7)), "1f1b")
    check(student, referee, f"1F1B over 2 stages, {spec['m']} micro-batches", None, spec, arrays)
    spec, arrays = draws.pipeline(rng, 1, int(rng.integers(1, 4)), "1f1b")
    check(student, referee, f"one stage, {spec['m']} micro-batches", None, spec, arrays)
