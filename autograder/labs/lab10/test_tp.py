# IPT-CANARY lab10 test_tp.py: hidden grading text, never shown to learners
"""Part `tp`: copy_to_tp (f) and reduce_from_tp (g) on their own, ValueError on splits that do not
divide, and the column-then-row parallel MLP block forward and backward.

Trust: values only. Every rank gets the same full weights and input, so a rank could compute the dense
block alone: the referee, running P0's implementation at a drawn seat, makes the lab's all-reduces (g
forward, f backward) and records their sums; a rank that skips them stalls the world, one that joins
with other values changes the sums. P0 compares everything with the dense block in float64.
"""
from autograder.engine.plugin import case_rng
from autograder.labs.lab10 import draws, expect
from autograder.labs.lab10.world import expect_close, play, referee  # noqa: F401 - referee is a fixture

NAMES = {"g": "reduce_from_tp's result", "a": "reduce_from_tp's input after the call", "a_grad": "the gradient through reduce_from_tp",
         "f": "copy_to_tp's result", "b_grad": "the gradient through copy_to_tp", "y": "the block's output",
         "x_grad": "the input's gradient", "up_w": "ColumnParallelLinear's weight slice", "up_b": "ColumnParallelLinear's bias slice",
         "up_w_grad": "the column slice's weight gradient", "up_b_grad": "the column slice's bias gradient",
         "down_w": "RowParallelLinear's weight slice", "down_b": "RowParallelLinear's bias",
         "down_w_grad": "the row slice's weight gradient", "down_b_grad": "RowParallelLinear's bias gradient",
         "w1_after": "the full first weight after training the slice", "w2_after": "the full second weight after training the slice",
         "b2_after": "the full second bias after training the slice"}
SEEN = ["reduce_from_tp's forward sum", "copy_to_tp's backward sum", "the row-parallel forward sum", "the input gradient's sum"]


def check(student, referee, what, world, seat, spec, arrays, group=None):
    members = list(range(world)) if group is None else list(group)
    want = expect.tp(spec, [arrays[r] for r in members])
    outcome = play(student, referee, "tp", world, seat, spec, arrays, what, group=group)
    size = len(members)
    bad = "ValueError" if arrays[0]["bad_w"].shape[0] % size else "returned"
    for r in outcome.learner_ranks():
        if r not in members:
            continue
        got = outcome.rank(r)
        g = members.index(r)
        assert got.get("copied_is_input") is False, f"{what}: rank {g}'s copy_to_tp returned its input itself, not a new tensor"
        for name in ("bad_column", "bad_row"):
            cls = "ColumnParallelLinear" if name == "bad_column" else "RowParallelLinear"
            assert got.get(name) == bad, (f"{what}: {cls} with a split of {arrays[0]['bad_w'].shape[0]} features on {size} ranks "
                                          + ("should raise ValueError" if bad == "ValueError" else "should work") + f", it {got.get(name)}")
        for name, value in want["ranks"][g].items():
            expect_close(got.get(name), value, f"{what}: rank {g}'s {NAMES[name]}", atol=5e-5)
    if seat is not None and seat in members:
        outcome.need_referee()
        seen = outcome.seen
        assert len(seen) == len(SEEN), f"{what}: the graders' rank met {len(seen)} all-reduces, the lab's functions make {len(SEEN)}"
        for label, have, value in zip(SEEN, seen, want["seen"], strict=True):
            expect_close(have, value, f"{what}: {label} (at the graders' rank)", atol=5e-5)


def test_two_and_four_ranks(student, referee):
    rng = case_rng(1200)
    spec, arrays = draws.tp(rng, 2)
    check(student, referee, "a tensor-parallel MLP on 2 ranks", 2, draws.seat(rng, 2), spec, arrays)
    spec, arrays = draws.tp(rng, 4, three_d=True)
    check(student, referee, "a tensor-parallel MLP on 4 ranks, a 3-d input", 4, draws.seat(rng, 4), spec, arrays)


def test_noncontiguous_input_subgroup_and_one_rank(student, referee):
    rng = case_rng(1210)
    spec, arrays = draws.tp(rng, 3, transposed=True)
    check(student, referee, "a tensor-parallel MLP on 3 ranks, a non-contiguous input", 3, draws.seat(rng, 3), spec, arrays)
    group = draws.subgroup(rng, 3, 2)
    spec, arrays = draws.tp(rng, 3, three_d=True, size=2)
    check(student, referee, f"a tensor-parallel MLP on the group {group} of 3 ranks", 3, group[int(rng.integers(2))], spec, arrays, group)
    spec, arrays = draws.tp(rng, 1)
    check(student, referee, "a tensor-parallel MLP on 1 rank", 1, None, spec, arrays)
