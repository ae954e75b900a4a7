"""Public tests of part `stats` (run them with check("stats"))."""
KiB, MiB = 1024, 1024 * 1024


def test_stats(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    xs = [alloc.malloc(64 * KiB) for _ in range(4)]
    alloc.free(xs[0])
    alloc.free(xs[2])
    s = alloc.memory_stats()
    assert (s["allocated_bytes.all.current"], s["allocated_bytes.all.peak"]) == (128 * KiB, 256 * KiB), (
        f"two of four 64 KiB tensors live: allocated current 128 KiB, peak 256 KiB; got "
        f"{s['allocated_bytes.all.current']} and {s['allocated_bytes.all.peak']}")
    assert (s["reserved_bytes.all.current"], s["segment.all.current"]) == (2 * MiB, 1), (
        f"one 2 MiB small segment reserved; got {s['reserved_bytes.all.current']} bytes in {s['segment.all.current']} segment(s)")
    assert (s["active.all.current"], s["num_device_alloc"]) == (2, 1), (
        f"2 active blocks and 1 device malloc; got {s['active.all.current']} and {s['num_device_alloc']}")
    assert s["inactive_split.all.current"] == 3, "three free blocks in a split segment"
    assert s["inactive_split_bytes.all.current"] == 2 * MiB - 128 * KiB, (
        f"the free bytes of the split segment: 2 MiB - 128 KiB, got {s['inactive_split_bytes.all.current']}")
    assert s["largest_free_block"] == 2 * MiB - 256 * KiB, (
        f"the largest free block is the tail after the fourth tensor: 2 MiB - 256 KiB, got {s['largest_free_block']}")
    want = 1 - (2 * MiB - 256 * KiB) / (2 * MiB - 128 * KiB)
    assert abs(s["fragmentation"] - want) < 1e-12, (
        f"fragmentation = 1 - largest_free_block / inactive_split_bytes = {want:.6f}, got {s['fragmentation']}")


def test_fragmentation_without_cache(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    s = alloc.memory_stats()
    assert s["fragmentation"] == 0.0 and s["largest_free_block"] == 0, "nothing cached: fragmentation 0.0"
    alloc.malloc(MiB)
    alloc.malloc(MiB)
    s = alloc.memory_stats()
    assert s["fragmentation"] == 0.0 and s["inactive_split.all.current"] == 0, "two 1 MiB tensors fill a 2 MiB segment: nothing cached"
