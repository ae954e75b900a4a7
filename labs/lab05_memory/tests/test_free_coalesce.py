"""Public tests of part `free_coalesce` (run them with check("free_coalesce"))."""
import pytest

KiB, MiB = 1024, 1024 * 1024


def test_free_merges_neighbours(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    xs = [alloc.malloc(100 * KiB) for _ in range(4)]
    alloc.free(xs[1])
    alloc.free(xs[2])
    sizes = sorted(b.size for b in alloc.pools["small"])
    assert 200 * KiB in sizes, f"two freed neighbours become one 200 KiB block, pool has {sizes}"
    alloc.free(xs[0])
    alloc.free(xs[3])
    assert [b.size for b in alloc.pools["small"]] == [2 * MiB], "everything freed: one block, the whole segment"
    assert alloc.stats["allocated_bytes"]["current"] == 0, f"everything freed: allocated_bytes should be 0, got {alloc.stats['allocated_bytes']['current']}"


def test_reuse_after_free(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a = alloc.malloc(5 * MiB)
    alloc.free(a)
    assert alloc.malloc(4 * MiB) == a, "the cached block is reused"
    assert alloc.device.num_mallocs == 1, f"the reuse needs no new device malloc: 1 in all, got {alloc.device.num_mallocs}"


def test_double_free(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a = alloc.malloc(10)
    alloc.free(a)
    with pytest.raises(ValueError):
        alloc.free(a)


def test_bad_free_changes_nothing(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a = alloc.malloc(4096)
    with pytest.raises(ValueError):
        alloc.free(a + 512)                 # inside a block, not its start
    assert alloc.stats["allocated_bytes"]["current"] == 4096, "a free that raises must not change the allocator"
    alloc.free(a)
    assert [b.size for b in alloc.pools["small"]] == [2 * MiB], "the real free still works after the error"
