"""Part `rounding_pools`: round_size, get_pool, allocation_size."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.engine import replies
from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import MiB

EDGES = [0, 1, 4, 511, 512, 513, 1000, 1023, 1024, 1025, 4096, 100_000, MiB - 513, MiB - 512, MiB - 511, MiB - 1, MiB,
         MiB + 1, MiB + 511, MiB + 512, MiB + 513, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 3 * MiB + 7, 10 * MiB - 513,
         10 * MiB - 512, 10 * MiB - 511, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 10 * MiB + 512, 12 * MiB - 1, 12 * MiB,
         12 * MiB + 1, 20 * MiB, 20 * MiB + 512, 64 * MiB + 4, 257 * MiB, 1024 * MiB + 1, 5 * 1024 * MiB + 3]


def _check(student, sizes, reveal):
    got = replies.dict_of(student.run("lab05.scenarios:rounding", sizes), {"round", "pool", "segment"}, "rounding")
    rounds = replies.list_of(got["round"], "round_size results", len(sizes))
    pools = replies.list_of(got["pool"], "get_pool results", len(sizes))
    segs = replies.list_of(got["segment"], "allocation_size results", len(sizes))
    for n, r, p, s in zip(sizes, rounds, pools, segs, strict=True):
        want = oracle.round_size(n)
        r = replies.integer(r, f"round_size({n})")
        assert r == want, f"round_size({n}) should be {want}" + f", got {r}" if reveal else f"round_size({n}) returned {r}: blocks are the request rounded up to a multiple of 512, at least 512"
        assert p == oracle.pool_of(want), f"get_pool({want}) should be {oracle.pool_of(want)!r}, got {p!r}"
        s = replies.integer(s, f"allocation_size({want})")
        assert s == oracle.segment_size(want), (f"allocation_size({want}) should be {oracle.segment_size(want)}, got {s}"
                                                if reveal else f"allocation_size({want}) returned {s}, not PyTorch's segment size")


@pytest.mark.weight(3)
def test_edges(student):
    _check(student, EDGES, reveal=True)


@pytest.mark.weight(2)
def test_pool_and_segment_on_rounded_sizes(student):
    """get_pool / allocation_size called directly, at the 1 MiB and 10 MiB boundaries and on 2 MiB multiples."""
    rounded = [512, MiB - 512, MiB, MiB + 512, 2 * MiB, 2 * MiB + 512, 10 * MiB - 512, 10 * MiB, 10 * MiB + 512,
               12 * MiB, 12 * MiB + 512, 14 * MiB - 512, 100 * MiB + 512]
    got = replies.dict_of(student.run("lab05.scenarios:pool_functions", rounded), {"pool", "segment"}, "pool_functions")
    for n, p, s in zip(rounded, replies.list_of(got["pool"], "get_pool results", len(rounded)),
                       replies.list_of(got["segment"], "allocation_size results", len(rounded)), strict=True):
        assert p == oracle.pool_of(n), f"get_pool({n}) should be {oracle.pool_of(n)!r}, got {p!r}"
        s = replies.integer(s, f"allocation_size({n})")
        assert s == oracle.segment_size(n), f"allocation_size({n}) should be {oracle.segment_size(n)}, got {s}"


@settings(max_examples=15)
@given(st.lists(st.one_of(st.integers(0, 300 * MiB), oracle.BOUNDARY), min_size=1, max_size=30))
def test_random_sizes(student, sizes):
    _check(student, sizes, reveal=False)

# IPT-CANARY lab05 test_rounding_pools.py: hidden grading text, never shown to learners
