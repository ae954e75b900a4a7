"""Public tests of part `ring` (run them with check("ring")). Each world is a few forked ranks."""
import numpy as np
import torch.distributed as dist
from labkit.testing import raises
from labkit.world import run_world


def test_chunk_bounds_examples(lab):
    for (n, world), want in (((10, 4), [0, 3, 6, 8, 10]), ((2, 4), [0, 1, 2, 2, 2]), ((6, 3), [0, 2, 4, 6]), ((0, 2), [0, 0, 0])):
        got = lab.chunk_bounds(n, world)
        assert list(got) == want, f"chunk_bounds({n}, {world}) should be {want}, got {got!r}"
    with raises(ValueError, "chunk_bounds(5, 0)"):
        lab.chunk_bounds(5, 0)


def ring_order(xs):
    """The lab's order: chunk c is ((x[c+1] + x[c+2]) + ...) + x[c], rank indices modulo W."""
    world, n = len(xs), xs[0].size
    base, extra = divmod(n, world)
    bounds = [c * base + min(c, extra) for c in range(world + 1)]
    out = np.empty_like(xs[0])
    for c in range(world):
        lo, hi = bounds[c], bounds[c + 1]
        acc = xs[(c + 1) % world][lo:hi].copy()
        for k in range(2, world + 1):
            acc = acc + xs[(c + k) % world][lo:hi]
        out[lo:hi] = acc
    return out


def test_all_reduce_integers_match_torch(lab):
    def program(x):
        mine, theirs = x.clone(), x.clone()
        lab.ring_all_reduce(mine)
        dist.all_reduce(theirs)
        return mine, theirs

    xs = [np.arange(10, dtype=np.int64) * (r + 1) for r in range(3)]
    for rank, (mine, theirs) in enumerate(run_world(program, 3, [[x] for x in xs])):
        assert np.array_equal(mine, theirs), f"rank {rank}: ring_all_reduce gave {mine.tolist()}, dist.all_reduce gives {theirs.tolist()}"


def test_all_reduce_order_is_the_rings(lab):
    def program(x):
        return lab.ring_all_reduce(x)

    rng = np.random.default_rng(1)
    xs = [(rng.standard_normal(1001) * 10.0 ** rng.integers(-6, 6, 1001)).astype(np.float32) for _ in range(4)]
    want = ring_order(xs)
    for rank, (got,) in enumerate(run_world(program, 4, [[x] for x in xs])):
        differ = int(np.count_nonzero(got != want))
        assert differ == 0, f"rank {rank}: {differ} of 1001 sums differ from the ring's order in the last bits"


def test_reduce_scatter_and_all_gather(lab):
    def program(x):
        chunk = lab.ring_reduce_scatter(x)
        sizes = [4, 3, 3]
        return chunk, lab.ring_all_gather(chunk, sizes)

    xs = [np.arange(10, dtype=np.float64) + r for r in range(3)]
    total = sum(xs)
    bounds = [0, 4, 7, 10]
    for rank, (chunk, gathered) in enumerate(run_world(program, 3, [[x] for x in xs])):
        want = total[bounds[rank]:bounds[rank + 1]]
        assert np.array_equal(chunk, want), f"rank {rank}'s reduce-scatter chunk is {chunk.tolist()}, expected {want.tolist()}"
        assert np.array_equal(gathered, total), f"rank {rank} gathered {gathered.tolist()}, expected {total.tolist()}"
