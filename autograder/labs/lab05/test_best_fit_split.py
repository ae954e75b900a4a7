"""Part `best_fit_split`: find_free_block, should_split, malloc (traces without frees)."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.engine import replies
from autograder.labs.lab05 import checks, oracle
from autograder.labs.lab05.oracle import KiB, MiB

B = 1 << 32


def _best_fit(student, pool, blocks, requests, reveal):
    got = replies.dict_of(student.run("lab05.scenarios:best_fit", pool, blocks, requests), {"found", "keys_after"}, "best_fit")
    found = replies.list_of(got["found"], "find_free_block results", len(requests))
    for n, g in zip(requests, found, strict=True):
        fits = sorted((s, a) for a, s in blocks if s >= n)
        w = fits[0][1] if fits else None
        g = None if g is None else replies.integer(g, f"find_free_block(pool, {n}).addr")
        if reveal:
            assert g == w, (f"best fit for {n} bytes among free blocks (addr, size) {[(hex(a), s) for a, s in blocks]}: "
                            f"want {checks._hex(w)}, got {checks._hex(g)}")
        else:
            assert g == w, (f"find_free_block(pool, {n}) among {len(blocks)} free blocks gave {checks._hex(g)}, not the "
                            "smallest block with size >= nbytes (lowest address among equal sizes), or None if none fits")
    keys = replies.list_of(got["keys_after"], "the pool's keys after find_free_block")
    assert sorted(map(tuple, keys)) == sorted((s, a) for a, s in blocks) and len(keys) == len(blocks), \
        "find_free_block must not change the pool (do not remove the block there)"


@pytest.mark.weight(2)
def test_best_fit_smallest_then_lowest_address(student):
    blocks = [[B + 10 * MiB, 4096], [B, 8192], [B + 4 * MiB, 4096], [B + 6 * MiB, 1024], [B + 8 * MiB, 65536],
              [B + 2 * MiB, 1024], [B + 12 * MiB, 512]]
    requests = [1, 512, 513, 1024, 1536, 4096, 5000, 8192, 8704, 65536, 65537]
    _best_fit(student, "small", blocks, requests, reveal=True)
    # a device whose addresses start at 0 (Device(capacity, base=0)): an exact fit at address 0
    _best_fit(student, "small", [[2 * MiB, 4096], [4096, 1024], [0, 4096], [8192, 512]], [4096, 1024, 1025, 512, 513], reveal=True)


@settings(max_examples=10)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from((1, 2, 3, 4, 8, 16, 64, 2048, 2049, 4096))),
                min_size=0, max_size=25, unique_by=lambda t: t[0]),
       st.lists(st.integers(1, 4100), min_size=1, max_size=10))
def test_best_fit_random(student, raw, reqs):
    blocks = [[B + a * 4 * MiB, s * 512] for a, s in raw]
    requests = [r * 512 for r in reqs]
    _best_fit(student, "large", blocks, requests, reveal=False)


def _split_cases():
    cases = []
    for size in (1024, 1536, 2 * MiB, 1023 * 512):
        for n in (size - 1024, size - 512, size):
            if n > 0:
                cases.append(["small", size, n])
    for size in (4 * MiB, 12 * MiB, 20 * MiB):
        for n in (size - MiB - 1024, size - MiB - 512, size - MiB, size - MiB + 512, size - 512, size, 3 * MiB):
            cases.append(["large", size, n])
    return cases


@pytest.mark.weight(2)
def test_split_rule(student):
    cases = [[p, s, n, B + 2 * MiB * i] for i, (p, s, n) in enumerate(_split_cases())]
    got = replies.list_of(student.run("lab05.scenarios:should_split", cases), "should_split results", len(cases))
    for (pool, size, n, _), g in zip(cases, got, strict=True):
        rest = size - n
        w = rest >= 512 if pool == "small" else rest > MiB
        g = replies.boolean(g, f"should_split(a {pool} block of {size} bytes, {n})")
        assert g == w, f"should_split: a {pool} block of {size} bytes holding {n} bytes (remainder {rest}) -> {w}, got {g}"


def _compare(student, events, capacity=8 << 30, reveal=False, label="a trace"):
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    checks.compare_trace(events, got, oracle.run(events, capacity), label, reveal)


ALLOC_ONLY = {
    "small-packing": [["alloc", i, n] for i, n in enumerate([4, 1000, 512, 513, 4096, 70000, MiB, 300 * KiB, 8, 0])],
    "small-segment-full": [["alloc", i, n] for i, n in enumerate([MiB, MiB - 512, 511, 1, 2])],
    "large-sharing": [["alloc", i, n] for i, n in enumerate([3 * MiB, 5 * MiB, MiB + 1, 9 * MiB, 6 * MiB, 2 * MiB])],
    "large-no-split-slack": [["alloc", 0, 19 * MiB + 100], ["alloc", 1, 512 * KiB + 1], ["alloc", 2, 2 * MiB]],
    "large-split-at-boundary": [["alloc", 0, 19 * MiB - 512], ["alloc", 1, MiB + 512], ["alloc", 2, 19 * MiB - 511],
                                ["alloc", 3, MiB + 1]],
    "huge-own-segment": [["alloc", 0, 10 * MiB], ["alloc", 1, 33 * MiB], ["alloc", 2, 3], ["alloc", 3, 5 * MiB],
                         ["alloc", 4, 10 * MiB - 1], ["alloc", 5, 12 * MiB + 1]],
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(ALLOC_ONLY))
def test_malloc_fixed(student, name):
    _compare(student, ALLOC_ONLY[name], reveal=True, label=f"trace {name}")


@settings(max_examples=12)
@given(st.lists(oracle.SIZES, min_size=1, max_size=40))
def test_malloc_random(student, sizes):
    _compare(student, [["alloc", i, n] for i, n in enumerate(sizes)])


@pytest.mark.weight(2)
def test_two_allocators_do_not_share_state(student):
    """A second CachingAllocator in the same process starts empty (no class-level pools or module globals)."""
    first = [["alloc", 0, 3 * MiB], ["alloc", 1, 1000], ["free", 0, 0]]
    second = [["alloc", 0, 2 * MiB], ["alloc", 1, 600 * KiB], ["alloc", 2, 600 * KiB]]
    got = replies.dict_of(student.run("lab05.scenarios:run_twice", first, second, 1 << 30), {"first", "second"}, "run_twice")
    checks.compare_trace(first, got["first"], oracle.run(first, 1 << 30), "the first allocator", reveal=True)
    checks.compare_trace(second, got["second"], oracle.run(second, 1 << 30), "a second, fresh allocator", reveal=True)

# IPT-CANARY lab05 test_best_fit_split.py: hidden grading text, never shown to learners
