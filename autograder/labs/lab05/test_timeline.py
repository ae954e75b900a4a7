"""Part `timeline`: memory_timeline(events, capacity) against the reference."""
import numpy as np
import pytest
from hypothesis import given, settings

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import MiB


def _check(student, events, capacity, label):
    got = student.run("lab05.scenarios:timeline", events, capacity)
    n = len(events) + 1
    for key in ("time", "allocated", "reserved"):
        assert got[key].shape == (n,), f"{label}: {key} should have len(events) + 1 = {n} samples, got shape {got[key].shape}"
    assert all(d == "int64" for d in got["dtypes"]), f"{label}: the arrays should be int64, got {got['dtypes']}"
    assert np.array_equal(got["time"], np.arange(n)), f"{label}: time should be 0, 1, ..., len(events)"
    ref = np.array(oracle.run(events, capacity)["timeline"])
    for j, key in enumerate(("allocated", "reserved")):
        bad = np.nonzero(got[key] != ref[:, j])[0]
        assert bad.size == 0, (f"{label}: {key} at sample {bad[0] if bad.size else 0} should be {ref[bad[0], j] if bad.size else 0}, "
                               f"got {got[key][bad[0]] if bad.size else 0} (sample 0 is before any event)")


@pytest.mark.weight(3)
@pytest.mark.parametrize("name", ["mlp_sgd", "convnet_adam"])
def test_real_trace_timeline(student, name):
    _check(student, oracle.load_trace(name), 8 << 30, f"trace {name}")


@pytest.mark.weight(2)
def test_cache_released_on_small_device(student):
    """Reserved memory comes down when a full device makes the allocator release its cache."""
    events = [["alloc", 0, 30 * MiB], ["free", 0, 30 * MiB]] + [["alloc", i, MiB] for i in range(1, 12)]
    _check(student, events, 40 * MiB, "a 40 MiB device whose cached 30 MiB block is released")


@settings(max_examples=8)
@given(oracle.traces(max_size=30))
def test_generated(student, events):
    _check(student, events, 4096 * MiB, "a generated trace")

# IPT-CANARY lab05 test_timeline.py: hidden grading text, never shown to learners
