"""Public tests of part `timeline` (run them with check("timeline"))."""
import numpy as np

MiB = 1024 * 1024


def test_timeline(lab):
    events = [["alloc", 0, 3 * MiB], ["alloc", 1, 100], ["free", 0, 3 * MiB], ["free", 1, 100]]
    t, allocated, reserved = lab.memory_timeline(events, 1024 * MiB)
    assert list(t) == [0, 1, 2, 3, 4], "len(events) + 1 samples"
    assert list(allocated) == [0, 3 * MiB, 3 * MiB + 512, 512, 0], (
        f"allocated bytes after each event (rounded sizes: 100 -> 512); got {list(allocated)}")
    assert list(reserved) == [0, 20 * MiB, 22 * MiB, 22 * MiB, 22 * MiB], "the cache keeps both segments"
    assert np.asarray(allocated).dtype == np.int64, f"byte counts are int64, got {np.asarray(allocated).dtype}"
