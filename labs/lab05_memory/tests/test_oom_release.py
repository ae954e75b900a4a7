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
    assert alloc.stats["num_ooms"]["current"] == 1, f"an OutOfMemoryError counts in num_ooms: 1, got {alloc.stats['num_ooms']['current']}"


def test_empty_cache_keeps_split_segments(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a, b = alloc.malloc(1000), alloc.malloc(3 * MiB)
    alloc.free(b)
    alloc.release_cached_blocks()
    assert list(alloc.device.segments) == [a], "the free large segment is released; the small one holds a tensor"


def test_out_of_memory_message_and_recovery(lab):
    alloc = lab.CachingAllocator(lab.Device(30 * MiB))
    big = alloc.malloc(20 * MiB)
    with pytest.raises(lab.OutOfMemoryError) as info:
        alloc.malloc(3 * MiB)               # needs a 20 MiB segment; 10 MiB are free
    message = str(info.value)
    assert message.startswith("Tried to allocate 20.00 MiB."), (
        f"the message names the segment asked for (allocation_size), as PyTorch does; got {message[:60]!r}")
    assert "10.00 MiB" in message, f"the message says how much the device has free, as format_size(...); got {message!r}"
    alloc.free(big)
    assert alloc.malloc(3 * MiB) == big, "after an OutOfMemoryError the allocator keeps working"
