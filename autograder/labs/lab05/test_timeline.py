"""Part `timeline`: memory_timeline(events, capacity) against the reference."""
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from autograder.engine import replies
from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import KiB, MiB


def _check(student, events, capacity, label, reveal=False):
    got = replies.dict_of(student.run("lab05.scenarios:timeline", events, capacity), {"time", "allocated", "reserved"},
                          f"{label}: memory_timeline should return (time, allocated, reserved);")
    n = len(events) + 1
    arrays = {key: replies.array(got[key], f"{label}: {key}", shape=(n,), dtype=np.int64)
              for key in ("time", "allocated", "reserved")}
    assert np.array_equal(arrays["time"], np.arange(n)), f"{label}: time should be 0, 1, ..., len(events)"
    ref = np.array(oracle.run(events, capacity)["timeline"], dtype=np.int64)
    for j, key in enumerate(("allocated", "reserved")):
        bad = np.nonzero(arrays[key] != ref[:, j])[0]
        if bad.size:
            i = int(bad[0])
            what = f"{label}: {key} at sample {i} (after event {i - 1} {events[i - 1]})" if i else f"{label}: {key} at sample 0 (before any event)"
            assert False, (f"{what} should be {ref[i, j]}, got {arrays[key][i]}" if reveal else
                           f"{what} is {arrays[key][i]}, not the {key}_bytes PyTorch's rules give")


@pytest.mark.weight(3)
@pytest.mark.parametrize("name", ["mlp_sgd", "convnet_adam"])
def test_real_trace_timeline(student, name):
    _check(student, oracle.load_trace(name), 8 << 30, f"trace {name}")


FIXED = {
    "cache-released-on-small-device": ([["alloc", 0, 30 * MiB], ["free", 0, 30 * MiB]] + [["alloc", i, MiB] for i in range(1, 12)], 40 * MiB),
    "large-slack": ([["alloc", 0, 19 * MiB], ["alloc", 1, 19 * MiB - 512], ["free", 0, 0], ["alloc", 2, 1000],
                     ["free", 1, 0], ["free", 2, 0]], 1 << 30),
    "after-an-empty-trace": ([], 1 << 30),
    "boundaries": ([["alloc", i, n] for i, n in enumerate([0, 511, 513, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB + 1])]
                   + [["free", i, 0] for i in (6, 0, 4, 2)], 1 << 30),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    if name == "after-an-empty-trace":     # an empty trace alone is answered by constants: pair it with a real one
        _check(student, [], 1 << 30, "an empty trace", reveal=True)
        events, capacity = FIXED["large-slack"][0][:3], 64 * MiB
    else:
        events, capacity = FIXED[name]
    _check(student, events, capacity, f"trace {name} on a {capacity // MiB} MiB device", reveal=True)


@settings(max_examples=8)
@given(oracle.traces(max_size=30))
def test_generated(student, events):
    _check(student, events, 4096 * MiB, "a generated trace")


@settings(max_examples=6)
@given(oracle.traces(max_size=30, sizes=st.one_of(st.integers(1, 2 * MiB), st.integers(2 * MiB, 16 * MiB))),
       st.sampled_from((40, 64)))
def test_generated_small_device(student, events, cap_mib):
    assume(not oracle.run(events, cap_mib * MiB)["ooms"])
    _check(student, events, cap_mib * MiB, f"a generated trace on a {cap_mib} MiB device")

# IPT-CANARY lab05 test_timeline.py: hidden grading text, never shown to learners
