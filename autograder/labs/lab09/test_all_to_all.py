# IPT-CANARY lab09 test_all_to_all.py: hidden grading text, never shown to learners
"""Part `all_to_all`: every rank sends a different tensor of any shape to every other rank.

Trust: values only. P0's referee takes a seat drawn from the grading seed and speaks the lab's header
protocol (ndim, shape, values; step s sends to r + s and receives from r - s); what every learner rank
returns is compared with the transposed chunks, in shape and dtype first.
"""
import numpy as np

from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab09 import draws
from autograder.labs.lab09.world import Case, play, referee  # noqa: F401 - referee is a fixture


def _shape(rng):
    kind = int(rng.integers(5))
    if kind == 0:
        return ()
    if kind == 1:
        return (0,) if rng.integers(2) else (2, 0)
    return tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))


def chunks(rng, world, dtype):
    return [[draws.values(rng, _shape(rng), dtype) for _ in range(world)] for _ in range(world)]


def _seat(k, world):
    return draws.seat(case_rng(k), world)


def test_four_ranks(student, referee):
    """Shapes drawn per pair: 0-d, empty, 1-d to 3-d; float32 and int64."""
    rng = case_rng(700)
    cases = [Case("all_to_all", chunks(rng, 4, "float32")), Case("all_to_all", chunks(rng, 4, "int64"))]
    play(student, referee, 4, _seat(701, 4), cases, case_seed(702)).check()


def test_three_and_two_ranks(student, referee):
    """Three, two and one rank."""
    rng = case_rng(710)
    play(student, referee, 3, _seat(711, 3), [Case("all_to_all", chunks(rng, 3, "float64"))], case_seed(712)).check()
    play(student, referee, 2, _seat(713, 2), [Case("all_to_all", chunks(rng, 2, "float32"))], case_seed(714)).check()
    play(student, None, 1, None, [Case("all_to_all", chunks(rng, 1, "float32"))], case_seed(741)).check()


def test_large_chunks(student, referee):
    rng = case_rng(720)
    rows = [[draws.wide(rng, (int(rng.integers(20000, 70000)),)) for _ in range(4)] for _ in range(4)]
    play(student, referee, 4, _seat(721, 4), [Case("all_to_all", rows)], case_seed(722)).check()


def test_bad_arguments(student, referee):
    """Too few chunks, or chunks of two dtypes: ValueError on every rank, nothing sent; then a good call."""
    rng = case_rng(730)
    short = [[draws.wide(rng, (2,)) for _ in range(2)] for _ in range(3)]
    mixed = [[draws.wide(rng, (2,)), np.arange(2), draws.wide(rng, (2,))] for _ in range(3)]
    cases = [Case("all_to_all", short, expect_error=True), Case("all_to_all", mixed, expect_error=True),
             Case("all_to_all", chunks(rng, 3, "float32"))]
    play(student, referee, 3, _seat(731, 3), cases, case_seed(732)).check()


def test_subgroup(student, referee):
    """A group of two of the three ranks: peers are group ranks."""
    rng = case_rng(750)
    group = draws.subgroup(rng, 3, 2)
    seat = group[int(rng.integers(2))]
    play(student, referee, 3, seat, [Case("all_to_all", chunks(rng, 2, "float32"))], case_seed(751), group=group).check()
