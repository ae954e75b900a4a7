"""Part `best_fit_split`: find_free_block, should_split, malloc (traces without frees)."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import KiB, MiB

B = 1 << 32


@pytest.mark.weight(2)
def test_best_fit_smallest_then_lowest_address(student):
    blocks = [[B + 10 * MiB, 4096], [B, 8192], [B + 4 * MiB, 4096], [B + 6 * MiB, 1024], [B + 8 * MiB, 65536]]
    requests = [512, 1024, 1536, 4096, 5000, 8192, 8704, 65536, 65537]
    want = [B + 6 * MiB, B + 6 * MiB, B + 4 * MiB, B + 4 * MiB, B, B, B + 8 * MiB, B + 8 * MiB, None]
    got = student.run("lab05.scenarios:best_fit", "small", blocks, requests)
    for n, w, g in zip(requests, want, got):
        assert g == w, (f"best fit for {n} bytes among free blocks (addr, size) {[(hex(a), s) for a, s in blocks]}: "
                        f"want {w and hex(w)}, got {g and hex(g)}")


@settings(max_examples=10)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 64)), min_size=1, max_size=25, unique_by=lambda t: t[0]),
       st.lists(st.integers(1, 70), min_size=1, max_size=10))
def test_best_fit_random(student, raw, reqs):
    blocks = [[B + a * 64 * KiB, s * 512] for a, s in raw]
    requests = [r * 512 for r in reqs]
    got = student.run("lab05.scenarios:best_fit", "large", blocks, requests)
    for n, g in zip(requests, got):
        fits = sorted((s, a) for a, s in blocks if s >= n)
        w = fits[0][1] if fits else None
        assert g == w, f"best fit for {n} bytes: want {w and hex(w)} (smallest size, then lowest address), got {g and hex(g)}"


@pytest.mark.weight(2)
def test_split_rule(student):
    cases = [["small", 2 * MiB, 512], ["small", 1024, 512], ["small", 1024, 1024], ["small", 1536, 1024],
             ["small", 1023 * 512, 1022 * 512], ["large", 20 * MiB, 3 * MiB], ["large", 20 * MiB, 19 * MiB],
             ["large", 20 * MiB, 19 * MiB - 512], ["large", 4 * MiB, 3 * MiB], ["large", 4 * MiB, 3 * MiB - 512],
             ["large", 12 * MiB, 12 * MiB]]
    got = student.run("lab05.scenarios:should_split", cases)
    for (pool, size, n), g in zip(cases, got):
        rest = size - n
        w = rest >= 512 if pool == "small" else rest > MiB
        assert g == w, f"should_split: a {pool} block of {size} bytes holding {n} bytes (remainder {rest}) -> {w}, got {g}"


def _compare(student, events, capacity=8 << 30):
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    ref = oracle.run(events, capacity)
    for i, (e, g, w) in enumerate(zip(events, got["addresses"], ref["addresses"])):
        assert g == w, f"event {i} {e}: malloc should return {w and hex(w)}, got {g and hex(g)} (events before: {events[:i][-4:]})"
    problem = oracle.check_snapshot(got["snapshot"], "after the trace: ")
    assert problem is None, problem


ALLOC_ONLY = {
    "small-packing": [["alloc", i, n] for i, n in enumerate([4, 1000, 512, 513, 4096, 70000, MiB, 300 * KiB, 8])],
    "large-sharing": [["alloc", i, n] for i, n in enumerate([3 * MiB, 5 * MiB, MiB + 1, 9 * MiB, 6 * MiB, 2 * MiB])],
    "large-no-split-slack": [["alloc", 0, 19 * MiB + 100], ["alloc", 1, 512 * KiB + 1], ["alloc", 2, 2 * MiB]],
    "huge-own-segment": [["alloc", 0, 10 * MiB], ["alloc", 1, 33 * MiB], ["alloc", 2, 3], ["alloc", 3, 5 * MiB]],
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(ALLOC_ONLY))
def test_malloc_fixed(student, name):
    _compare(student, ALLOC_ONLY[name])


@settings(max_examples=12)
@given(st.lists(oracle.SIZES, min_size=1, max_size=40))
def test_malloc_random(student, sizes):
    _compare(student, [["alloc", i, n] for i, n in enumerate(sizes)])

# IPT-CANARY lab05 test_best_fit_split.py: hidden grading text, never shown to learners
