# IPT-CANARY lab09 test_ring.py: hidden grading text, never shown to learners
"""Part `ring`: chunk_bounds, ring_reduce_scatter, ring_all_gather, ring_all_reduce.

Trust: values only. Every world has P0's referee at a seat drawn from the grading seed; it speaks the
lab's schedule and records what it receives. A rank that delegates to gloo's collectives waits for a
referee that never joins them; a rank that gathers and folds in another way sends the referee other
messages. Floats are compared bit for bit with P0's model of the stated order (model.py).
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab09 import draws, model
from autograder.labs.lab09.world import Case, play, referee  # noqa: F401 - referee is a fixture


def bounds_cases(rng):
    fixed = [(10, 4), (2, 4), (0, 3), (7, 1), (12, 3), (5, 5)]
    drawn = [(int(rng.integers(0, 2000)), int(rng.integers(1, 12))) for _ in range(12)]
    return fixed + drawn


def test_chunk_bounds(student):
    rng = case_rng(900)
    good = bounds_cases(rng)
    bad = [(-1, 3), (int(rng.integers(1, 50)), 0), (3, -int(rng.integers(1, 5)))]
    got = replies.list_of(student.run("lab09.scenarios:bounds", good + bad), "chunk_bounds results", len(good) + len(bad))
    for (n, world), reply in zip(good, got[:len(good)], strict=True):
        want = model.chunk_bounds(n, world)
        value = reply.get("value") if isinstance(reply, dict) else None
        assert value == want, f"chunk_bounds({n}, {world}) should be {want}, got " + (
            f"{reply['error']}: {reply.get('message', '')}" if isinstance(reply, dict) and "error" in reply else f"{value!r}")
    for (n, world), reply in zip(bad, got[len(good):], strict=True):
        assert isinstance(reply, dict) and reply.get("error") == "ValueError", \
            f"chunk_bounds({n}, {world}) should raise ValueError, got {reply.get('value', reply.get('error'))!r}"


def _seat(k, world):
    return draws.seat(case_rng(k), world)


def test_all_reduce_sum_four_ranks(student, referee):
    """Bit for bit in the ring's order: wide float32 values, sizes that do not divide by 4, a size-1 tensor."""
    rng = case_rng(910)
    cases = [Case("all_reduce", draws.per_rank(rng, 4, (draws.odd_size(rng, 4),), "float32"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (int(rng.integers(1000, 3000)),), "float32"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (3, 7), "float64"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (1,), "float32"), op="sum")]
    play(student, referee, 4, _seat(911, 4), cases, case_seed(912)).check()


def test_all_reduce_three_ranks_and_two(student, referee):
    """Three, two and one rank (a world of one sends nothing: the results are the rank's own values)."""
    rng = case_rng(920)
    cases3 = [Case("all_reduce", draws.per_rank(rng, 3, (draws.odd_size(rng, 3),), "float32"), op="sum"),
              Case("all_reduce", draws.per_rank(rng, 3, (5, 4), "int64"), op="sum")]
    play(student, referee, 3, _seat(921, 3), cases3, case_seed(922)).check()
    cases2 = [Case("all_reduce", draws.per_rank(rng, 2, (int(rng.integers(3, 200)),), "float32"), op="sum")]
    play(student, referee, 2, _seat(923, 2), cases2, case_seed(924)).check()
    cases1 = [Case("all_reduce", draws.per_rank(rng, 1, (5,), "float32"), op="sum"),
              Case("reduce_scatter", draws.per_rank(rng, 1, (4,), "float32"), op="sum"),
              Case("all_gather", [draws.wide(rng, (3,))])]
    play(student, None, 1, None, cases1, case_seed(981)).check()


def test_all_reduce_ops_and_dtypes(student, referee):
    """PRODUCT, MIN and MAX (a NaN on a rank other than 0 must propagate), int64 and float64."""
    rng = case_rng(930)
    n = draws.odd_size(rng, 4)
    cases = [Case("all_reduce", draws.per_rank(rng, 4, (n,), "float32", "product"), op="product"),
             Case("all_reduce", draws.with_nan(rng, draws.per_rank(rng, 4, (n,), "float32")), op="max"),
             Case("all_reduce", draws.with_nan(rng, draws.per_rank(rng, 4, (n,), "float64")), op="min"),
             Case("all_reduce", draws.per_rank(rng, 4, (n,), "int64"), op="max"),
             Case("all_reduce", draws.per_rank(rng, 4, (n,), "int64", "product"), op="product")]
    play(student, referee, 4, _seat(931, 4), cases, case_seed(932)).check()


def test_all_reduce_shapes_and_layouts(student, referee):
    """A 0-d tensor, a size-0 one, fewer elements than ranks (empty chunks), and a non-contiguous
    (transposed) tensor that must still be updated in place."""
    rng = case_rng(940)
    cases = [Case("all_reduce", draws.per_rank(rng, 4, (), "float32"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (0, 3), "float32"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (2,), "float32"), op="sum"),
             Case("all_reduce", draws.per_rank(rng, 4, (int(rng.integers(3, 9)), int(rng.integers(3, 9))), "float32"),
                  op="sum", layout="t")]
    play(student, referee, 4, _seat(941, 4), cases, case_seed(942)).check()


def test_all_reduce_bad_op(student, referee):
    """AVG is not one of the lab's ops: ValueError on every rank before anything is sent; then a good call."""
    rng = case_rng(950)
    xs = draws.per_rank(rng, 3, (7,), "float32")
    cases = [Case("all_reduce", xs, op="avg", expect_error=True),
             Case("all_reduce", draws.per_rank(rng, 3, (draws.odd_size(rng, 3),), "float32"), op="sum")]
    play(student, referee, 3, _seat(951, 3), cases, case_seed(952)).check()


def test_reduce_scatter(student, referee):
    """Rank r's chunk of the flattened tensor; the input is not modified."""
    rng = case_rng(960)
    cases = [Case("reduce_scatter", draws.per_rank(rng, 4, (draws.odd_size(rng, 4),), "float32"), op="sum"),
             Case("reduce_scatter", draws.per_rank(rng, 4, (3, 5), "float64"), op="sum"),
             Case("reduce_scatter", draws.per_rank(rng, 4, (3,), "float32"), op="max"),
             Case("reduce_scatter", draws.per_rank(rng, 4, (int(rng.integers(5, 40)),), "int64", "product"), op="product")]
    play(student, referee, 4, _seat(961, 4), cases, case_seed(962)).check()
    cases3 = [Case("reduce_scatter", draws.per_rank(rng, 3, (draws.odd_size(rng, 3),), "float32"), op="sum")]
    play(student, referee, 3, _seat(963, 3), cases3, case_seed(964)).check()


def test_all_gather(student, referee):
    """Uneven sizes, an empty chunk, chunks of any shape; the result is 1-D in rank order."""
    rng = case_rng(970)
    shapes = [(int(rng.integers(1, 6)),), (0,), (2, int(rng.integers(1, 4))), ()]
    order = rng.permutation(4)
    chunks = [draws.wide(rng, shapes[i]) for i in order]
    ints = [rng.integers(-100, 100, int(rng.integers(0, 9))).astype("int64") for _ in range(4)]
    cases = [Case("all_gather", chunks), Case("all_gather", ints)]
    play(student, referee, 4, _seat(971, 4), cases, case_seed(972)).check()
    cases3 = [Case("all_gather", [draws.wide(rng, (int(rng.integers(0, 50)),), "float64") for _ in range(3)])]
    play(student, referee, 3, _seat(973, 3), cases3, case_seed(974)).check()


def test_large_all_reduce(student, referee):
    """A quarter of a million float32 elements per rank, not divisible by 4."""
    rng = case_rng(990)
    n = 2**18 + int(rng.integers(1, 4))
    play(student, referee, 4, _seat(991, 4), [Case("all_reduce", draws.per_rank(rng, 4, (n,), "float32"), op="sum")],
         case_seed(992)).check()


@pytest.mark.parametrize("world", [3])
def test_error_needs_every_rank(student, referee, world):
    """ring_all_gather with a sizes list of the wrong length, or a negative size in another rank's entry:
    ValueError on every rank; then a good call."""
    rng = case_rng(995)
    chunks = [draws.wide(rng, (2,)) for _ in range(world)]
    bad = Case("all_gather", chunks, expect_error=True, sizes=[2] * (world + 1))
    seat = _seat(996, world)
    negative = [2] * world
    negative[seat] = -1          # the referee's entry: the learner's ranks must refuse it before sending
    also_bad = Case("all_gather", chunks, expect_error=True, sizes=negative)
    good = Case("all_gather", [draws.wide(rng, (int(rng.integers(1, 5)),)) for _ in range(world)])
    play(student, referee, world, seat, [bad, also_bad, good], case_seed(997)).check()


def test_subgroup(student, referee):
    """A group of three of the four ranks: ranks and peers are group ranks (dist.get_rank(group), group_dst=,
    group_src=); the rank outside the group takes no part."""
    rng = case_rng(1000)
    group = draws.subgroup(rng, 4, 3)
    seat = group[int(rng.integers(3))]
    cases = [Case("all_reduce", draws.per_rank(rng, 3, (draws.odd_size(rng, 3),), "float32"), op="sum"),
             Case("reduce_scatter", draws.per_rank(rng, 3, (int(rng.integers(4, 30)),), "float32"), op="sum"),
             Case("all_gather", [draws.wide(rng, (int(rng.integers(0, 6)),)) for _ in range(3)])]
    play(student, referee, 4, seat, cases, case_seed(1001), group=group).check()
