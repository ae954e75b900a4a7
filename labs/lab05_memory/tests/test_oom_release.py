"""Public tests of part `oom_release` (run them with check("oom_release"))."""
import pytest

MiB = 1024 * 1024


def test_release_and_retry(lab):
    alloc = lab.CachingAllocator(lab.Device(48 * MiB))
    alloc.free(alloc.malloc(30 * MiB))
    alloc.malloc(40 * MiB)
    assert alloc.stats["num_alloc_retries"]["current"] == 1, "one retry after releasing the cache"
    assert alloc.stats["reserved_bytes"]["current"] == 40 * MiB, "the cached 30 MiB segment went back to the device"


def test_out_of_memory(lab):
    alloc = lab.CachingAllocator(lab.Device(48 * MiB))
    alloc.malloc(40 * MiB)
    with pytest.raises(lab.OutOfMemoryError, match="Tried to allocate 20.00 MiB"):
        alloc.malloc(20 * MiB)
    assert alloc.stats["num_ooms"]["current"] == 1


def test_empty_cache_keeps_split_segments(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a, b = alloc.malloc(1000), alloc.malloc(3 * MiB)
    alloc.free(b)
    alloc.release_cached_blocks()
    assert list(alloc.device.segments) == [a], "the free large segment is released; the small one holds a tensor"
