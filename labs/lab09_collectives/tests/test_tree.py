"""Public tests of part `tree` (run them with check("tree")). Each world is a few forked ranks."""
import numpy as np
import torch
import torch.distributed as dist
from labkit.world import run_world


def test_binomial_tree_examples(lab):
    assert lab.binomial_parent(0) is None, f"the root has no parent, got {lab.binomial_parent(0)!r}"
    for v, want in ((6, 4), (4, 0), (5, 4), (1, 0)):
        assert lab.binomial_parent(v) == want, f"binomial_parent({v}) should be {want}, got {lab.binomial_parent(v)!r}"
    for (v, world), want in (((0, 8), [1, 2, 4]), ((4, 8), [5, 6]), ((4, 6), [5]), ((3, 8), []), ((0, 5), [1, 2, 4])):
        got = lab.binomial_children(v, world)
        assert list(got) == want, f"binomial_children({v}, {world}) should be {want}, got {got!r}"


def test_broadcast_from_rank_1(lab):
    def program(x):
        lab.tree_broadcast(x, 1)
        return x

    xs = [np.full(5, 10.0 * r, dtype=np.float32) for r in range(3)]
    for rank, (got,) in enumerate(run_world(program, 3, [[x] for x in xs])):
        assert np.array_equal(got, xs[1]), f"after tree_broadcast(x, src=1) rank {rank} holds {got.tolist()}, expected {xs[1].tolist()}"


def test_reduce_sum_leaves_other_ranks_alone(lab):
    def program(x):
        lab.tree_reduce(x, 2)
        return x

    xs = [np.arange(4, dtype=np.int64) + 100 * r for r in range(4)]
    results = run_world(program, 4, [[x] for x in xs])
    want = sum(xs)
    assert np.array_equal(results[2][0], want), f"tree_reduce(x, dst=2) should leave the sum {want.tolist()} on rank 2, got {results[2][0].tolist()}"
    for rank in (0, 1, 3):
        assert np.array_equal(results[rank][0], xs[rank]), \
            f"tree_reduce(x, dst=2) changed rank {rank}'s tensor to {results[rank][0].tolist()}; it should keep {xs[rank].tolist()}"


def test_reduce_order_is_the_trees(lab):
    """With 4 ranks and dst 0 the sum is (x0 + x1) + (x2 + x3), bit for bit."""
    def program(x):
        lab.tree_reduce(x, 0)
        return x

    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal(64) * 10.0 ** rng.integers(-6, 6, 64)).astype(np.float32) for _ in range(4)]
    got = run_world(program, 4, [[x] for x in xs])[0][0]
    want = (xs[0] + xs[1]) + (xs[2] + xs[3])
    differ = int(np.count_nonzero(got != want))
    assert differ == 0, f"{differ} of 64 sums differ from (x0 + x1) + (x2 + x3) in the last bits: combine in the tree's order"


def test_max_matches_torch_distributed(lab):
    def program(x):
        mine, theirs = x.clone(), x.clone()
        lab.tree_reduce(mine, 1, dist.ReduceOp.MAX)
        dist.reduce(theirs, 1, dist.ReduceOp.MAX)
        return mine, theirs

    xs = [np.array([r, -r, 3 - r], dtype=np.float32) for r in range(3)]
    mine, theirs = run_world(program, 3, [[x] for x in xs])[1]
    assert np.array_equal(mine, theirs), f"tree_reduce(MAX) gave {mine.tolist()}, dist.reduce gives {theirs.tolist()}"
