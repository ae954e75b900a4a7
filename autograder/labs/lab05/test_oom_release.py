"""Part `oom_release`: release_cached_blocks, malloc_retry, OutOfMemoryError on a small device."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity):
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    ref = oracle.run(events, capacity)
    got_ooms = [i for i, _ in got["ooms"]]
    assert got_ooms == ref["ooms"], (f"on a {capacity // MiB} MiB device, OutOfMemoryError should be raised at events "
                                     f"{ref['ooms']}, got {got_ooms} (trace start: {events[:6]})")
    for i, (e, g, w) in enumerate(zip(events, got["addresses"], ref["addresses"])):
        assert g == w, f"event {i} {e} on a {capacity // MiB} MiB device: want {w and hex(w)}, got {g and hex(g)}"
    for i, msg in got["ooms"]:
        want = f"Tried to allocate {oracle.round_size(events[i][2]) / MiB:.2f} MiB" if oracle.round_size(events[i][2]) > MiB else "Tried to allocate"
        assert msg.startswith(want), f"the OutOfMemoryError message should start {want!r}, got {msg!r}"
    problem = oracle.check_snapshot(got["snapshot"], "after the trace: ")
    assert problem is None, problem


FIXED = {
    "release-then-retry": ([["alloc", 0, 30 * MiB], ["free", 0, 0], ["alloc", 1, 40 * MiB]], 48 * MiB),
    "small-cache-released-for-large": ([["alloc", i, 600 * KiB] for i in range(12)] + [["free", i, 0] for i in range(12)]
                                       + [["alloc", 20, 20 * MiB]], 24 * MiB),
    "split-segment-pinned": ([["alloc", 0, 3 * MiB], ["alloc", 1, 2 * MiB], ["free", 0, 0], ["alloc", 2, 16 * MiB]], 30 * MiB),
    "oom-then-recover": ([["alloc", 0, 20 * MiB], ["alloc", 1, 20 * MiB], ["free", 0, 0], ["alloc", 2, 20 * MiB]], 32 * MiB),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    _check(student, *FIXED[name])


@pytest.mark.weight(2)
def test_empty_cache(student):
    events = ([["alloc", i, 300 * KiB] for i in range(20)] + [["alloc", 30, 3 * MiB], ["alloc", 31, 12 * MiB]]
              + [["free", i, 0] for i in range(0, 20)] + [["alloc", 40, 100], ["free", 31, 0]])
    got = student.run("lab05.scenarios:empty_cache", events, 1 << 30)
    after = got["after"]
    problem = oracle.check_snapshot(after, "after release_cached_blocks(): ")
    assert problem is None, problem
    for seg, blocks in after["blocks"].items():
        assert not (len(blocks) == 1 and not blocks[0][2]), f"segment {int(seg):#x} is whole and free: release_cached_blocks() should return it"
    assert len(after["device"]) == 2, f"two segments hold live tensors and must stay; the device still has {len(after['device'])}"
    assert got["device_frees"] == len(got["before"]["device"]) - 2, "each released segment is one device.free"


@settings(max_examples=20)
@given(oracle.traces(sizes=st.one_of(st.integers(1, MiB), st.integers(MiB, 30 * MiB))), st.sampled_from([24, 40, 64, 100]))
def test_generated_small_device(student, events, cap_mib):
    _check(student, events, cap_mib * MiB)

# IPT-CANARY lab05 test_oom_release.py: hidden grading text, never shown to learners
