"""Part `rounding_pools`: round_size, get_pool, allocation_size."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import MiB

EDGES = [0, 1, 4, 511, 512, 513, 1000, 1024, 4096, 100_000, MiB - 1, MiB, MiB + 1, MiB + 511, MiB + 512,
         2 * MiB, 3 * MiB + 7, 10 * MiB - 512, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 20 * MiB, 64 * MiB + 4, 257 * MiB]


def _check(student, sizes):
    got = student.run("lab05.scenarios:rounding", sizes)
    for i, n in enumerate(sizes):
        r = oracle.round_size(n)
        assert got["round"][i] == r, f"round_size({n}) should be {r}, got {got['round'][i]}"
        assert got["pool"][i] == oracle.pool_of(r), f"get_pool({r}) should be {oracle.pool_of(r)!r}, got {got['pool'][i]!r}"
        s = oracle.segment_size(r)
        assert got["segment"][i] == s, f"allocation_size({r}) should be {s}, got {got['segment'][i]}"


@pytest.mark.weight(3)
def test_edges(student):
    _check(student, EDGES)


@settings(max_examples=15)
@given(st.lists(st.integers(0, 300 * MiB), min_size=1, max_size=30))
def test_random_sizes(student, sizes):
    _check(student, sizes)

# IPT-CANARY lab05 test_rounding_pools.py: hidden grading text, never shown to learners
