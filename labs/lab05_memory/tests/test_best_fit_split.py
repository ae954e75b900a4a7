"""Public tests of part `best_fit_split` (run them with check("best_fit_split"))."""
MiB = 1024 * 1024


def test_best_fit(lab):
    pool = lab.BlockPool("small")
    for addr, size in [(0x1000000, 4096), (0x2000000, 2048), (0x3000000, 2048), (0x4000000, 8192)]:
        pool.insert(lab.Block(addr, size, "small", addr))
    assert lab.find_free_block(pool, 1024).addr == 0x2000000, "smallest block that fits, lowest address on a tie"
    assert lab.find_free_block(pool, 2560).addr == 0x1000000, "2560 bytes: the 4096-byte block at 0x1000000 is the smallest that fits"
    assert lab.find_free_block(pool, 8704) is None, "no block is big enough"
    assert len(pool) == 4, "find_free_block does not remove the block"


def test_should_split(lab):
    assert lab.should_split(lab.Block(0, 2 * MiB, "small", 0), 2 * MiB - 512), "small: a 512-byte remainder is kept"
    assert not lab.should_split(lab.Block(0, 20 * MiB, "large", 0), 19 * MiB), "large: a 1 MiB remainder is not"
    assert lab.should_split(lab.Block(0, 20 * MiB, "large", 0), 3 * MiB), "large: a 17 MiB remainder (over 1 MiB) is split off"


def test_malloc_packs_a_segment(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    a, b, c = alloc.malloc(1000), alloc.malloc(4), alloc.malloc(3 * MiB)
    assert b == a + 1024, "1000 bytes round to 1024; the next block starts right after"
    assert alloc.device.num_mallocs == 2, "one small and one large segment"
    assert [blk.size for blk in alloc.pools["small"]] == [2 * MiB - 1536], "the rest of the small segment is cached"
    got = alloc.stats["allocated_bytes"]["current"]
    assert got == 1536 + 3 * MiB, f"allocated_bytes counts rounded sizes: 1024 + 512 + 3 MiB = {1536 + 3 * MiB}, got {got}"


def test_zero_bytes_and_large_slack(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    alloc.malloc(0)
    assert alloc.stats["allocated_bytes"]["current"] == 512, "malloc(0) takes a 512-byte block in this lab"
    assert alloc.stats["requested_bytes"]["current"] == 0, "requested_bytes counts what the tensor asked for"
    alloc.malloc(19 * MiB)
    assert alloc.stats["allocated_bytes"]["current"] == 512 + 20 * MiB, (
        "a 1 MiB remainder of a large block is not split off: the whole 20 MiB block counts as allocated")
