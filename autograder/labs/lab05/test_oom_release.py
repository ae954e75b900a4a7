"""Part `oom_release`: release_cached_blocks, malloc_retry, OutOfMemoryError on a small device."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.labs.lab05 import checks, oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity, reveal=False, label=None):
    label = label or f"a generated trace on a {capacity // MiB} MiB device"
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    checks.compare_trace(events, got, oracle.run(events, capacity), label, reveal)


FIXED = {
    "release-then-retry": ([["alloc", 0, 30 * MiB], ["free", 0, 0], ["alloc", 1, 40 * MiB], ["alloc", 2, 5 * MiB]], 62 * MiB),
    "small-cache-released-for-large": ([["alloc", i, 600 * KiB] for i in range(12)] + [["free", i, 0] for i in range(12)]
                                       + [["alloc", 20, 20 * MiB], ["alloc", 21, 100]], 24 * MiB),
    "split-segment-pinned": ([["alloc", 0, 3 * MiB], ["alloc", 1, 2 * MiB], ["free", 0, 0], ["alloc", 2, 16 * MiB],
                              ["free", 1, 0], ["alloc", 3, 16 * MiB]], 30 * MiB),
    "oom-then-recover": ([["alloc", 0, 20 * MiB], ["alloc", 1, 20 * MiB], ["free", 0, 0], ["alloc", 2, 20 * MiB],
                          ["alloc", 3, 10 * MiB], ["free", 2, 0], ["alloc", 4, 12 * MiB - 1]], 32 * MiB),
    "oom-small-request": ([["alloc", 0, 23 * MiB], ["alloc", 1, 100], ["alloc", 2, 3 * MiB], ["free", 0, 0],
                           ["alloc", 3, 3 * MiB]], 24 * MiB),
    "oom-twice-then-fit": ([["alloc", 0, 14 * MiB], ["alloc", 1, 3 * MiB + 1], ["alloc", 2, 11 * MiB], ["free", 0, 0],
                            ["alloc", 3, 3 * MiB], ["alloc", 4, 3 * MiB]], 25 * MiB),
    "device-filled-exactly": ([["alloc", 0, 3 * MiB], ["alloc", 1, 100], ["alloc", 2, 100], ["free", 0, 0],
                               ["alloc", 3, MiB + 1], ["alloc", 4, 2 * MiB], ["free", 3, 0], ["free", 4, 0],
                               ["alloc", 5, 21 * MiB]], 22 * MiB),
    "empty-cache-mid-trace": ([["alloc", i, 300 * KiB] for i in range(8)] + [["alloc", 10, 3 * MiB], ["alloc", 11, 12 * MiB]]
                              + [["free", i, 0] for i in range(0, 8)] + [["alloc", 12, 100], ["free", 11, 0],
                                                                         ["empty_cache", 0, 0], ["alloc", 13, 12 * MiB],
                                                                         ["free", 12, 0], ["empty_cache", 0, 0], ["empty_cache", 0, 0]],
                              1 << 30),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    events, capacity = FIXED[name]
    _check(student, events, capacity, reveal=True, label=f"trace {name} on a {capacity // MiB} MiB device")


@settings(max_examples=20)
@given(oracle.traces(sizes=st.one_of(st.integers(1, MiB), st.integers(MiB, 30 * MiB), oracle.BOUNDARY), empty_cache=True),
       st.sampled_from((24, 26, 40, 64, 100)))
def test_generated_small_device(student, events, cap_mib):
    _check(student, events, cap_mib * MiB)

@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["convnet_adam", "mlp_wide"])
def test_real_trace_tight_device(student, name):
    """A device smaller than the cache wants: cached segments are released and retried, some requests fail."""
    events = oracle.load_trace(name)
    peak = oracle.run(events, 8 << 30)["final"]["reserved_bytes.all.peak"]
    capacity = int(peak * 0.8) // (2 * MiB) * (2 * MiB)
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    checks.compare_trace(events, got, oracle.run(events, capacity), f"trace {name} on a {capacity // MiB} MiB device")

# IPT-CANARY lab05 test_oom_release.py: hidden grading text, never shown to learners
