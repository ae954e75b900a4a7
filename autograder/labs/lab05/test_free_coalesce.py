"""Part `free_coalesce`: free, coalescing, errors on bad frees, the exact state after every event."""
import pytest
from hypothesis import given, settings

from autograder.engine import replies
from autograder.labs.lab05 import checks, oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity=8 << 30, reveal=False, label="a generated trace"):
    got = student.run("lab05.scenarios:run_trace", events, capacity, snapshots=True)
    ref = oracle.run(events, capacity, snapshots=True)
    got = checks.compare_trace(events, got, ref, label, reveal, check_snapshot=False)
    snaps = replies.list_of(got.get("snapshots"), f"{label}: states", len(events))
    for i, (snap, want) in enumerate(zip(snaps, ref["snapshots"], strict=True)):
        checks.compare_snapshot(checks.snapshot(snap, f"{label}, after event {i}"), want,
                                f"{label}, after event {i} {events[i]} {checks._before(events, i, 3)}: ", reveal)


FIXED = {
    "merge-with-next": [["alloc", 0, 100 * KiB], ["alloc", 1, 100 * KiB], ["free", 0, 0], ["alloc", 2, 150 * KiB]],
    "merge-both-sides": [["alloc", i, 100 * KiB] for i in range(5)] + [["free", 1, 0], ["free", 3, 0], ["free", 2, 0],
                                                                        ["alloc", 9, 300 * KiB], ["alloc", 10, 200 * KiB]],
    "whole-segment-again": [["alloc", i, 512 * KiB] for i in range(3)] + [["free", 2, 0], ["free", 0, 0], ["free", 1, 0],
                                                                           ["alloc", 5, MiB], ["alloc", 6, MiB]],
    "free-in-reverse": [["alloc", i, n] for i, n in enumerate([1000, 2000, 3000, 4000])]
                       + [["free", i, 0] for i in (3, 2, 1, 0)] + [["alloc", 7, 2 * MiB - 512]],
    "merge-prev-only": [["alloc", i, 64 * KiB] for i in range(4)] + [["free", 1, 0], ["free", 2, 0], ["alloc", 5, 128 * KiB]],
    "large-pool": [["alloc", 0, 3 * MiB], ["alloc", 1, 4 * MiB], ["alloc", 2, 5 * MiB], ["free", 1, 0], ["free", 0, 0],
                   ["alloc", 3, 7 * MiB], ["free", 2, 0], ["alloc", 4, 15 * MiB]],
    "large-slack-freed": [["alloc", 0, 19 * MiB], ["alloc", 1, 19 * MiB - 512], ["free", 0, 0], ["alloc", 2, 18 * MiB],
                          ["free", 1, 0], ["alloc", 3, 19 * MiB + 512]],
    "bad-frees": [["alloc", 0, 1000], ["alloc", 1, 3000], ["free", 0, 0], ["bad_free", 0, 0], ["bad_free", 1, 512],
                  ["bad_free", -1, 12345 * 512], ["free", 1, 0], ["alloc", 2, 4000], ["bad_free", 2, 1024],
                  ["free", 2, 0], ["bad_free", 2, 0], ["alloc", 3, 100]],
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    _check(student, FIXED[name], reveal=True, label=f"trace {name}")


@pytest.mark.weight(3)
@settings(max_examples=25)
@given(oracle.traces(bad_frees=True))
def test_generated_traces(student, events):
    _check(student, events)

# IPT-CANARY lab05 test_free_coalesce.py: hidden grading text, never shown to learners
