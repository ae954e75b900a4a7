"""Part `stats`: memory_stats() after every event, against the reference allocator."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity):
    got = student.run("lab05.scenarios:run_trace", events, capacity, stats=True)
    ref = oracle.run(events, capacity, stats=True)
    for i, (g, w) in enumerate(zip(got["stats"], ref["stats"])):
        for key, want in w.items():
            assert key in g, f"memory_stats() has no key {key!r}"
            ok = abs(g[key] - want) <= 1e-9 if key == "fragmentation" else g[key] == want
            assert ok, (f"after event {i} {events[i]} on a {capacity // MiB} MiB device: memory_stats()[{key!r}] "
                        f"should be {want}, got {g[key]}")


FIXED = {
    "holes": ([["alloc", i, 64 * KiB] for i in range(30)] + [["free", i, 0] for i in range(0, 30, 2)], 1 << 30),
    "large-slack": ([["alloc", 0, 19 * MiB + 100], ["alloc", 1, 3 * MiB], ["free", 1, 0], ["free", 0, 0]], 1 << 30),
    "retry-and-oom": ([["alloc", 0, 30 * MiB], ["free", 0, 0], ["alloc", 1, 40 * MiB], ["alloc", 2, 20 * MiB],
                       ["alloc", 3, 1000]], 48 * MiB),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    _check(student, *FIXED[name])


@settings(max_examples=15)
@given(oracle.traces(max_size=40), st.sampled_from([32, 64, 4096]))
def test_generated(student, events, cap_mib):
    _check(student, events, cap_mib * MiB)

# IPT-CANARY lab05 test_stats.py: hidden grading text, never shown to learners
