"""Public tests of part `stats` (run them with check("stats"))."""
KiB, MiB = 1024, 1024 * 1024


def test_stats(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    xs = [alloc.malloc(64 * KiB) for _ in range(4)]
    alloc.free(xs[0])
    alloc.free(xs[2])
    s = alloc.memory_stats()
    assert s["allocated_bytes.all.current"] == 128 * KiB and s["allocated_bytes.all.peak"] == 256 * KiB
    assert s["reserved_bytes.all.current"] == 2 * MiB and s["segment.all.current"] == 1
    assert s["active.all.current"] == 2 and s["num_device_alloc"] == 1
    assert s["inactive_split.all.current"] == 3, "three free blocks in a split segment"
    assert s["inactive_split_bytes.all.current"] == 2 * MiB - 128 * KiB
    assert s["largest_free_block"] == 2 * MiB - 256 * KiB
    assert abs(s["fragmentation"] - (1 - (2 * MiB - 256 * KiB) / (2 * MiB - 128 * KiB))) < 1e-12


def test_fragmentation_without_cache(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    s = alloc.memory_stats()
    assert s["fragmentation"] == 0.0 and s["largest_free_block"] == 0, "nothing cached: fragmentation 0.0"
    alloc.malloc(MiB)
    alloc.malloc(MiB)
    s = alloc.memory_stats()
    assert s["fragmentation"] == 0.0 and s["inactive_split.all.current"] == 0, "two 1 MiB tensors fill a 2 MiB segment: nothing cached"
