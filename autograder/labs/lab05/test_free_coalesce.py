"""Part `free_coalesce`: free, coalescing, invariants after every event of generated traces."""
import pytest
from hypothesis import given, settings

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity=8 << 30):
    got = student.run("lab05.scenarios:run_trace", events, capacity, snapshots=True)
    for i, snap in enumerate(got["snapshots"]):
        problem = oracle.check_snapshot(snap, f"after event {i} {events[i]} (of {len(events)}): ")
        assert problem is None, problem
    problem = oracle.check_live_no_overlap(events, got["addresses"])
    assert problem is None, problem
    ref = oracle.run(events, capacity)
    for i, (e, g, w) in enumerate(zip(events, got["addresses"], ref["addresses"])):
        assert g == w, (f"event {i} {e}: want address {w and hex(w)}, got {g and hex(g)}; after frees, the best fit "
                        f"must see the merged blocks (events before: {events[:i][-5:]})")


FIXED = {
    "merge-with-next": [["alloc", 0, 100 * KiB], ["alloc", 1, 100 * KiB], ["free", 0, 0], ["alloc", 2, 150 * KiB]],
    "merge-both-sides": [["alloc", i, 100 * KiB] for i in range(5)] + [["free", 1, 0], ["free", 3, 0], ["free", 2, 0],
                                                                        ["alloc", 9, 300 * KiB], ["alloc", 10, 200 * KiB]],
    "whole-segment-again": [["alloc", i, 512 * KiB] for i in range(3)] + [["free", 2, 0], ["free", 0, 0], ["free", 1, 0],
                                                                           ["alloc", 5, MiB], ["alloc", 6, MiB]],
    "large-pool": [["alloc", 0, 3 * MiB], ["alloc", 1, 4 * MiB], ["alloc", 2, 5 * MiB], ["free", 1, 0], ["free", 0, 0],
                   ["alloc", 3, 7 * MiB], ["free", 2, 0], ["alloc", 4, 15 * MiB]],
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    _check(student, FIXED[name])


@pytest.mark.weight(2)
def test_double_free_raises(student):
    got = student.run("lab05.scenarios:double_free")
    assert got["error"] == "ValueError", f"a second free of the same address should raise ValueError, got {got['error']}"


@pytest.mark.weight(3)
@settings(max_examples=25)
@given(oracle.traces())
def test_generated_traces(student, events):
    _check(student, events)

# IPT-CANARY lab05 test_free_coalesce.py: hidden grading text, never shown to learners
