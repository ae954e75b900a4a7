# IPT-CANARY lab09 test_tree.py: hidden grading text, never shown to learners
"""Part `tree`: binomial_parent / binomial_children, tree_broadcast and tree_reduce from any root.

Trust: values only. Every world has P0's referee at a seat drawn from the grading seed, so it is by turns
the root, a leaf and an inner node; it speaks the lab's tree schedule and records what it receives.
tree_reduce's SUM of wide floats is compared bit for bit with the tree's order (model.py), and every
rank but dst must keep its own values (gloo's dist.reduce leaves partial sums there).
"""
import numpy as np

from autograder.engine import replies
from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab09 import draws, model
from autograder.labs.lab09.world import Case, play, referee  # noqa: F401 - referee is a fixture


def test_tree_shape(student):
    rng = case_rng(800)
    worlds = [1, 2, 3, 4, 5, 8] + [int(w) for w in rng.integers(6, 40, 4)]
    cases = [(v, w) for w in worlds for v in range(w)]
    got = replies.list_of(student.run("lab09.scenarios:tree_shape", cases), "binomial tree results", len(cases))
    for (v, world), reply in zip(cases, got, strict=True):
        want = [model.parent(v), model.children(v, world)]
        value = reply.get("value") if isinstance(reply, dict) else None
        assert value == want, (f"relative rank {v} of a world of {world}: binomial_parent should be {want[0]} and "
                               f"binomial_children {want[1]}, got " + (f"{reply['error']}: {reply.get('message', '')}"
                               if isinstance(reply, dict) and "error" in reply else
                               f"{value[0]!r} and {value[1]!r}" if isinstance(value, list) and len(value) == 2 else repr(value)))


def _seat(k, world):
    return draws.seat(case_rng(k), world)


def test_broadcast_every_root(student, referee):
    """Four ranks, each root in turn, float32 / int64 / float64, a 0-d and a size-0 tensor."""
    rng = case_rng(810)
    roots = [int(r) for r in rng.permutation(4)]
    specs = [((int(rng.integers(1, 60)),), "float32"), ((3, 4), "int64"), ((), "float64"), ((0,), "float32")]
    cases = [Case("broadcast", draws.per_rank(rng, 4, shape, dtype), root=root) for root, (shape, dtype) in zip(roots, specs, strict=True)]
    play(student, referee, 4, _seat(811, 4), cases, case_seed(812)).check()


def test_broadcast_other_worlds(student, referee):
    """Three, two, six and one rank (a world of one sends nothing; a bad root fails there too), and a
    non-contiguous (transposed) tensor updated in place. In the world of six the referee sits below an
    inner node, where a flat broadcast (the root sending to everyone) differs from the tree."""
    rng = case_rng(820)
    cases3 = [Case("broadcast", draws.per_rank(rng, 3, (4, 6), "float32"), root=int(rng.integers(3)), layout="t"),
              Case("broadcast", draws.per_rank(rng, 3, (5,), "int64"), root=int(rng.integers(3)))]
    play(student, referee, 3, _seat(821, 3), cases3, case_seed(822)).check()
    cases2 = [Case("broadcast", draws.per_rank(rng, 2, (7,), "float32"), root=int(rng.integers(2)))]
    play(student, referee, 2, _seat(823, 2), cases2, case_seed(824)).check()
    seat6 = _seat(825, 6)
    cases6 = [Case("broadcast", draws.per_rank(rng, 6, (int(rng.integers(1, 30)),), "float32"), root=draws.deep_root(rng, 6, seat6))
              for _ in range(2)]
    play(student, referee, 6, seat6, cases6, case_seed(826)).check()
    cases1 = [Case("broadcast", draws.per_rank(rng, 1, (3,), "float32"), root=1, expect_error=True),
              Case("broadcast", draws.per_rank(rng, 1, (3,), "float32"), root=0),
              Case("reduce", draws.per_rank(rng, 1, (3,), "float32"), op="sum", root=0)]
    play(student, None, 1, None, cases1, case_seed(861)).check()


def test_reduce_sum_every_root(student, referee):
    """SUM of wide float32 values in the tree's order, to each root; the other ranks keep their values."""
    rng = case_rng(830)
    roots = [int(r) for r in rng.permutation(4)]
    cases = [Case("reduce", draws.per_rank(rng, 4, (int(rng.integers(200, 600)),), "float32"), op="sum", root=root)
             for root in roots]
    play(student, referee, 4, _seat(831, 4), cases, case_seed(832)).check()


def test_reduce_ops_and_worlds(student, referee):
    """PRODUCT, MIN and MAX with a NaN that must propagate, int64; three and two ranks; a transposed tensor."""
    rng = case_rng(840)
    seat = _seat(841, 4)
    cases = [Case("reduce", draws.per_rank(rng, 4, (50,), "float32", "product"), op="product", root=draws.deep_root(rng, 4, seat)),
             Case("reduce", draws.with_nan(rng, draws.per_rank(rng, 4, (40,), "float32")), op="max", root=int(rng.integers(4))),
             Case("reduce", draws.with_nan(rng, draws.per_rank(rng, 4, (40,), "float64")), op="min", root=int(rng.integers(4))),
             Case("reduce", draws.per_rank(rng, 4, (3, 5), "int64"), op="sum", layout="t",
                  root=int(rng.choice([r for r in range(4) if r != seat])))]  # a learner rank is the root
    play(student, referee, 4, seat, cases, case_seed(842)).check()
    cases3 = [Case("reduce", draws.per_rank(rng, 3, (int(rng.integers(100, 300)),), "float32"), op="sum", root=int(rng.integers(3))),
              Case("reduce", draws.per_rank(rng, 3, (), "float32"), op="sum", root=int(rng.integers(3)))]
    play(student, referee, 3, _seat(843, 3), cases3, case_seed(844)).check()
    seat2 = _seat(845, 2)   # a world of two, the learner's rank the root: it must receive the referee's values
    cases2 = [Case("reduce", draws.per_rank(rng, 2, (int(rng.integers(5, 40)),), "float32"), op="sum", root=1 - seat2)]
    play(student, referee, 2, seat2, cases2, case_seed(846)).check()


def test_bad_root_and_op(student, referee):
    """A root outside the group, a bool root and AVG: ValueError on every rank, nothing sent; then good calls."""
    rng = case_rng(850)
    seat = _seat(851, 4)
    x = draws.per_rank(rng, 4, (4,), "float32")
    bad_root = [4, -1, True][int(rng.integers(3))]
    cases = [Case("broadcast", x, root=bad_root, expect_error=True),
             Case("reduce", x, op="sum", root=4 + int(rng.integers(0, 3)), expect_error=True),
             Case("reduce", x, op="avg", root=0, expect_error=True),
             Case("broadcast", draws.per_rank(rng, 4, (6,), "float32"), root=draws.deep_root(rng, 4, seat)),
             Case("reduce", draws.per_rank(rng, 4, (int(rng.integers(20, 90)),), "float32"), op="sum", root=draws.deep_root(rng, 4, seat))]
    play(student, referee, 4, seat, cases, case_seed(852)).check()


def test_subgroup(student, referee):
    """A group of four of the five ranks: src and dst are group ranks; the rank outside takes no part."""
    rng = case_rng(870)
    group = draws.subgroup(rng, 5, 4)
    seat = group[int(rng.integers(4))]
    member = group.index(seat)
    cases = [Case("broadcast", draws.per_rank(rng, 4, (5,), "float32"), root=draws.deep_root(rng, 4, member)),
             Case("reduce", draws.per_rank(rng, 4, (int(rng.integers(20, 80)),), "float32"), op="sum",
                  root=draws.deep_root(rng, 4, member))]
    play(student, referee, 5, seat, cases, case_seed(871), group=group).check()
