# IPT-CANARY lab05 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab05 (the caching allocator), run against the reference solution in P0.

There is no GPU here, so the oracle is the *source* of PyTorch's native CUDA caching allocator
(`c10/cuda/CUDACachingAllocator.cpp`, default configuration: no expandable segments, max_split_size
= SIZE_MAX, no garbage-collection threshold, one stream). Every expected value below is a literal
computed by hand from its rules, with a comment deriving it:

    kMinBlockSize 512     round_size: < 512 -> 512, else up to a multiple of 512
    kSmallSize 1 MiB      get_pool: size <= kSmallSize -> small pool, else large pool
    kSmallBuffer 2 MiB    get_allocation_size: small -> 2 MiB,
    kMinLargeAlloc 10 MiB                       size < 10 MiB -> kLargeBuffer (20 MiB),
    kLargeBuffer 20 MiB                         else size rounded up to kRoundLarge (2 MiB)
    kRoundLarge 2 MiB
    should_split: small pool -> remaining >= kMinBlockSize; large -> remaining > kSmallSize
    get_free_block: pool.blocks.lower_bound(key): smallest (size, ptr) >= (size, -)
    alloc_found_block: the allocated block keeps the LOW addresses, the remainder goes above it
    free_block / try_merge_blocks: merge with free prev and next of the same segment only
    malloc on a failed cudaMalloc: release_cached_blocks (every unsplit cached block, both pools),
        num_alloc_retries += 1, one more cudaMalloc; else num_ooms += 1 and OutOfMemoryError
        "Tried to allocate <format_size(alloc_size)>" where alloc_size is the *segment* size
    set_fraction: total_allocated_memory + size > allowed_memory_maximum fails (equality fits)

The cases are our own (no code or prose copied); each group names the public tests that gave the idea:

* rounding_pools -- the constants above, and the sizes used by test/test_cuda.py (`test_memory_stats`:
  randn(256) has 1024 active bytes; `test_memory_snapshot`: rand(311, 411) and 512-byte tensors;
  `test_memory_allocation`: caching_allocator_alloc(1); `test_out_of_memory`: 800000000 GiB;
  `test_caching_allocator_record_stream_oom`: 40 Mi floats).
* best_fit_split -- get_free_block / should_split / alloc_found_block, and test_cuda.py's
  `test_record_stream` / `test_caching_pinned_memory` ("allocation not re-used" after a free of the same
  size), plus the separation of the small and large pools.
* free_coalesce -- free_block / try_merge_blocks; `test_memory_snapshot` (1000 tensors of 512 bytes tiled
  into one segment, deleted in random order, merging back), and the fact that blocks of two different
  cudaMalloc segments never merge even when their addresses touch.
* oom_release -- malloc's release-and-retry path and `release_cached_blocks`; test_cuda.py's
  `test_out_of_memory` (message "Tried to allocate ..."; the allocator works after an OOM),
  `test_out_of_memory_retry` (OOM, free the first tensor, the same request then succeeds),
  `test_set_per_process_memory_fraction` (a hard limit; the Device capacity plays the allowed maximum),
  `test_caching_allocator_record_stream_oom` (fill the device until OOM, then empty_cache).
* stats -- test_cuda.py's `test_memory_stats` generator (allocated grows on every alloc and shrinks on every
  free, peaks never fall, empty_cache never raises the peak, allocated returns to its baseline) and
  `_check_memory_stat_consistency` (every statistic recomputed from a walk of the segments, as
  `torch.cuda.memory_snapshot()` gives them: segment, reserved, allocated, active, inactive_split[_bytes]),
  on its own allocation program and on seeded random programs.
* real_traces -- a trace recorded with torch 2.13's profiler (CPU, small MLP + SGD, two steps, the
  notebook's `record_trace`), stored literally: addresses of the first events by hand, and the
  steady-state property the caching allocator exists for (step 2 reuses step 1's addresses, no new
  cudaMalloc); a hand-written large-pool training-step trace with every address derived by hand.
* timeline -- the same traces sampled as torch.cuda.memory_allocated()/memory_reserved() would be.

Where the lab deliberately simplifies PyTorch, the case follows the statement and says so: malloc(0) takes
a 512-byte block (torch's allocate(0) returns nullptr before the allocator); a double free raises
ValueError (torch: "invalid device pointer", a RuntimeError); one stream, so a freed block is reusable at
once (no record_stream delay); the OOM message's wording after its first sentence is the lab's.

    run()   # -> number of cases; raises AssertionError listing every disagreement
"""
from __future__ import annotations

import itertools
import random

import numpy as np

from autograder.engine.peer_suite import Suite

SUITE = Suite("lab05")
CASES, case, reference = SUITE.cases, SUITE.case, SUITE.reference  # check(ref) raises on a disagreement

KiB, MiB, GiB = 1024, 1024 * 1024, 1024 ** 3
B = 1 << 32          # the scaffold Device's first address; it then advances by each segment rounded to 2 MiB
BIG = 64 * GiB       # a device that never fills in these cases


# -- helpers ----------------------------------------------------------------------------------------
def _eq(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"


def _new(ref, capacity=BIG):
    return ref.CachingAllocator(ref.Device(capacity))


def _keys(alloc, pool):
    return list(alloc.pools[pool].keys)


def _stat(alloc, name):
    return alloc.memory_stats()[name]


def _raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)}{args} should raise {exc.__name__}")


def _walk(alloc):
    """The segments as torch.cuda.memory_snapshot() lists them: address -> blocks in address order.
    Checks the structure on the way (contiguity, links, pool membership, device agreement)."""
    live = list(alloc.active.values())
    cached = [b for pool in alloc.pools.values() for b in pool]
    blocks = live + cached
    ids = {id(b) for b in blocks}
    assert len(ids) == len(blocks), "a block is both live and cached (or cached twice)"
    for b in live:
        assert b.allocated and alloc.active.get(b.addr) is b, f"live block {b} misfiled"
    for name, pool in alloc.pools.items():
        for b in pool:
            assert not b.allocated and b.pool == name and pool.blocks.get(b.addr) is b, f"cached {b} misfiled"
    segs = {}
    for head in (b for b in blocks if b.prev is None):
        assert head.addr == head.segment, f"{head} has no prev but does not start its segment"
        chain, b = [], head
        while b is not None:
            assert id(b) in ids, f"{b} is linked in a segment but neither live nor cached"
            if chain:
                assert b.prev is chain[-1] and chain[-1].addr + chain[-1].size == b.addr, f"{b} not contiguous"
                assert chain[-1].allocated or b.allocated, f"two neighbouring free blocks {chain[-1]} {b}"
            assert b.segment == head.segment and b.pool == head.pool, f"{b} belongs to another segment/pool"
            chain.append(b)
            b = b.next
        segs[head.segment] = chain
    assert sum(len(c) for c in segs.values()) == len(blocks), "a block is unreachable from its segment head"
    sizes = {a: sum(b.size for b in c) for a, c in segs.items()}
    assert sizes == alloc.device.segments, f"segments {sizes} vs device {alloc.device.segments}"
    for a, c in segs.items():   # pool <-> segment kind: small segments are exactly kSmallBuffer
        assert (c[0].pool == "small") == (sizes[a] == 2 * MiB), f"segment {a:#x} of {sizes[a]} in pool {c[0].pool}"
    return segs


def _check_consistent(alloc):
    """test_cuda.py's _check_memory_stat_consistency, on the lab's memory_stats()."""
    segs = _walk(alloc)
    free_blocks = [b for c in segs.values() for b in c if not b.allocated]
    split_free = [b for c in segs.values() if len(c) > 1 for b in c if not b.allocated]
    reserved = sum(b.size for c in segs.values() for b in c)
    allocated = sum(b.size for c in segs.values() for b in c if b.allocated)
    cached = reserved - allocated
    largest = max((b.size for b in free_blocks), default=0)
    want = {
        "segment.all.current": len(segs),
        "reserved_bytes.all.current": reserved,
        "allocated_bytes.all.current": allocated,
        "requested_bytes.all.current": sum(b.requested for c in segs.values() for b in c if b.allocated),
        "active.all.current": sum(b.allocated for c in segs.values() for b in c),
        "inactive_split.all.current": len(split_free),
        "inactive_split_bytes.all.current": sum(b.size for b in split_free),
        "largest_free_block": largest,
        "num_device_alloc": alloc.device.num_mallocs,
        "num_device_free": alloc.device.num_frees,
    }
    got = alloc.memory_stats()
    for k, v in want.items():
        _eq(got[k], v, f"memory_stats()[{k!r}] vs the walk of the segments")
    frag = 1.0 - largest / cached if cached > 0 else 0.0
    assert abs(got["fragmentation"] - frag) < 1e-12, f"fragmentation {got['fragmentation']} vs {frag}"
    for name in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment"):
        assert got[f"{name}.all.peak"] >= got[f"{name}.all.current"], f"{name} peak below current"
    return segs


# =================================================================================================
# Part rounding_pools: round_size / get_pool / get_allocation_size of CUDACachingAllocator.cpp.
# =================================================================================================
ROUNDING = [  # (request bytes, block size, pool, segment size, why)
    (0, 512, "small", 2 * MiB, "0 < kMinBlockSize -> 512 (lab rule; torch's allocate(0) is nullptr)"),
    (1, 512, "small", 2 * MiB, "test_memory_allocation: caching_allocator_alloc(1)"),
    (4, 512, "small", 2 * MiB, "a float32 loss scalar"),
    (511, 512, "small", 2 * MiB, "just below kMinBlockSize"),
    (512, 512, "small", 2 * MiB, "exactly kMinBlockSize"),
    (513, 1024, "small", 2 * MiB, "512 * ceil(513 / 512) = 1024"),
    (1000, 1024, "small", 2 * MiB, "512 * ceil(1000 / 512) = 1024"),
    (1024, 1024, "small", 2 * MiB, "test_memory_stats: randn(256) fp32 is 1024 active bytes"),
    (311 * 411 * 4, 511488, "small", 2 * MiB, "test_memory_snapshot rand(311, 411): 511284 -> 999 * 512"),
    (10 ** 6, 1000448, "small", 2 * MiB, "ceil(1e6 / 512) = 1954 -> 1000448"),
    (MiB - 1, MiB, "small", 2 * MiB, "rounds up onto kSmallSize, still small"),
    (MiB, MiB, "small", 2 * MiB, "size <= kSmallSize is small (inclusive)"),
    (MiB + 1, MiB + 512, "large", 20 * MiB, "first large size; < kMinLargeAlloc -> kLargeBuffer"),
    (3 * MiB, 3 * MiB, "large", 20 * MiB, "a 3 MiB activation shares a 20 MiB segment"),
    (10 * MiB - 512, 10 * MiB - 512, "large", 20 * MiB, "largest size < kMinLargeAlloc"),
    (10 * MiB - 1, 10 * MiB, "large", 10 * MiB, "rounds up to kMinLargeAlloc: own segment of 10 MiB"),
    (10 * MiB, 10 * MiB, "large", 10 * MiB, "size == kMinLargeAlloc is not < it: 2 MiB multiple"),
    (10 * MiB + 1, 10 * MiB + 512, "large", 12 * MiB, "kRoundLarge * ceil((10 MiB + 512) / 2 MiB) = 12 MiB"),
    (12 * MiB + 1, 12 * MiB + 512, "large", 14 * MiB, "kRoundLarge * ceil -> 14 MiB"),
    (19 * MiB + 512, 19 * MiB + 512, "large", 20 * MiB, "kRoundLarge * ceil -> 20 MiB"),
    (64 * MiB, 64 * MiB, "large", 64 * MiB, "exact 2 MiB multiple keeps its size"),
    (64 * MiB + 4, 64 * MiB + 512, "large", 66 * MiB, "the notebook's 64 MiB + 4 gradient"),
    (200 * 300 * 2000 * 4, 480000000, "large", 229 * 2 * MiB, "test_memory_stats alloc(200, 300, 2000): 480000000/2MiB -> 229"),
    (40 * MiB * 4, 160 * MiB, "large", 160 * MiB, "test_caching_allocator_record_stream_oom: 40 Mi floats"),
    (GiB * 800000000, GiB * 800000000, "large", GiB * 800000000, "test_out_of_memory: 800000000 GiB"),
]

for _n, _r, _p, _s, _why in ROUNDING:
    @case("rounding_pools", f"round/pool/segment of {_n} bytes ({_why})")
    def _check(ref, n=_n, r=_r, p=_p, s=_s):
        _eq(ref.round_size(n), r, f"round_size({n})")
        _eq(ref.get_pool(r), p, f"get_pool({r})")
        _eq(ref.allocation_size(r), s, f"allocation_size({r})")


@case("rounding_pools", "round_size is a 512-multiple ceiling, idempotent and monotone over 0..5000 and near 1/10 MiB")
def _check(ref):
    sizes = list(range(0, 5001)) + [MiB + d for d in range(-600, 600)] + [10 * MiB + d for d in range(-600, 600)]
    for n in sizes:
        r = ref.round_size(n)
        assert r % 512 == 0 and r >= max(n, 512) and (n < 512 or r < n + 512), f"round_size({n}) = {r}"
        assert ref.round_size(r) == r, f"round_size not idempotent at {n}"
    ordered = sorted(set(sizes))
    for x, y in zip(ordered[:-1], ordered[1:], strict=True):
        assert ref.round_size(x) <= ref.round_size(y), f"round_size not monotone between {x} and {y}"


@case("rounding_pools", "malloc asks the device for the segment sizes of get_allocation_size (2, 20, 66, 10 MiB)")
def _check(ref):
    for n, seg in [(4, 2 * MiB), (3 * MiB, 20 * MiB), (64 * MiB + 4, 66 * MiB), (10 * MiB - 1, 10 * MiB)]:
        a = _new(ref)                     # a fresh allocator each: no cached block may serve the request
        a.malloc(n)
        _eq(a.device.segments, {B: seg}, f"device segments after malloc({n})")
    a = _new(ref)
    for n in (4, 3 * MiB, 64 * MiB + 4, 12 * MiB):
        a.malloc(n)
    # 12 MiB fits the cached 17 MiB tail of the 20 MiB segment (best fit before cudaMalloc): no 4th
    # segment; device addresses advance by each segment rounded to 2 MiB: B, B+2M, B+22M
    _eq(a.device.segments, {B: 2 * MiB, B + 2 * MiB: 20 * MiB, B + 22 * MiB: 66 * MiB}, "device segments")


@case("rounding_pools", "1 MiB requests pack two per 2 MiB small segment; 1 MiB + 1 opens a 20 MiB large one")
def _check(ref):
    a = _new(ref)
    got = [a.malloc(MiB), a.malloc(MiB), a.malloc(MiB + 1)]
    # small seg @B holds both 1 MiB blocks (remaining 1 MiB >= 512 -> split); 1 MiB+512 is large -> 20 MiB @B+2M
    _eq(got, [B, B + MiB, B + 2 * MiB], "addresses")
    _eq(sorted(a.device.segments.values()), [2 * MiB, 20 * MiB], "segment sizes")
    _eq(_keys(a, "large"), [(19 * MiB - 512, B + 3 * MiB + 512)], "large pool after the split")


# =================================================================================================
# Part best_fit_split: get_free_block (lower_bound on (size, ptr)), should_split, alloc_found_block.
# =================================================================================================
def _hand_pool(ref, entries, name="small"):
    pool = ref.BlockPool(name)
    for size, addr in entries:
        pool.insert(ref.Block(addr, size, name, addr))
    return pool


@case("best_fit_split", "find_free_block: exact size, lowest address among equal sizes")
def _check(ref):
    pool = _hand_pool(ref, [(1024, 0x3000), (4096, 0x0), (1024, 0x1000), (2048, 0x2000)])
    blk = ref.find_free_block(pool, 1024)
    _eq((blk.size, blk.addr), (1024, 0x1000), "best fit for 1024")      # (1024, 0x1000) < (1024, 0x3000)
    _eq(len(pool), 4, "find_free_block must not remove the block")


@case("best_fit_split", "find_free_block: the smallest sufficient block, not the first by address")
def _check(ref):
    pool = _hand_pool(ref, [(1024, 0x3000), (4096, 0x0), (1024, 0x1000), (2048, 0x2000)])
    got = [(b.size, b.addr) for b in (ref.find_free_block(pool, n) for n in (512, 1536, 2048, 2560, 4096))]
    _eq(got, [(1024, 0x1000), (2048, 0x2000), (2048, 0x2000), (4096, 0x0), (4096, 0x0)], "best fits")


@case("best_fit_split", "find_free_block: None when nothing fits, and on an empty pool")
def _check(ref):
    pool = _hand_pool(ref, [(1024, 0x3000), (4096, 0x0)])
    _eq(ref.find_free_block(pool, 4608), None, "request above the largest block")
    _eq(ref.find_free_block(ref.BlockPool("large"), 512), None, "empty pool")
    _eq(ref.find_free_block(pool, 4096).addr, 0x0, "and the fitting one is still found")


@case("best_fit_split", "should_split, small pool: remaining >= kMinBlockSize (512 splits, 0 does not)")
def _check(ref):
    for size, n, want in [(2 * MiB, 2 * MiB - 512, True), (2 * MiB, 2 * MiB, False), (1024, 512, True),
                          (1024, 1024, False), (2 * MiB, 512, True)]:
        _eq(ref.should_split(ref.Block(B, size, "small", B), n), want, f"should_split(small {size}, {n})")


@case("best_fit_split", "should_split, large pool: remaining > kSmallSize (exactly 1 MiB of slack stays)")
def _check(ref):
    for size, n, want in [(20 * MiB, 19 * MiB, False),          # remaining 1 MiB, not > 1 MiB
                          (20 * MiB, 19 * MiB - 512, True),     # remaining 1 MiB + 512
                          (20 * MiB, 3 * MiB, True), (4 * MiB, 3 * MiB, False),
                          (14 * MiB, 12 * MiB + 512, True),     # remaining 2 MiB - 512
                          (64 * MiB, 64 * MiB, False)]:
        _eq(ref.should_split(ref.Block(B, size, "large", B), n), want, f"should_split(large {size}, {n})")


@case("best_fit_split", "notebook example: 1000 B and 4 B share a segment 1024 B apart, 3 MiB opens a 20 MiB one")
def _check(ref):
    a = _new(ref)
    got = [a.malloc(1000), a.malloc(4), a.malloc(3 * MiB)]
    _eq(got, [B, B + 1024, B + 2 * MiB], "addresses")
    # small: 2 MiB - 1024 - 512 left at B+1536; large: 20 - 3 = 17 MiB left at B+2M+3M
    _eq(_keys(a, "small"), [(2 * MiB - 1536, B + 1536)], "small pool")
    _eq(_keys(a, "large"), [(17 * MiB, B + 5 * MiB)], "large pool")


@case("best_fit_split", "split links: the remainder sits right after the block, same segment, in the pool")
def _check(ref):
    a = _new(ref)
    x = a.malloc(3 * MiB)
    blk = a.active[x]
    rest = blk.next
    assert rest is not None and rest.prev is blk and rest.next is None, "remainder not linked after the block"
    _eq((rest.addr, rest.size, rest.segment, rest.pool, rest.allocated), (B + 3 * MiB, 17 * MiB, B, "large", False),
        "remainder")
    _eq((blk.size, blk.requested, blk.prev), (3 * MiB, 3 * MiB, None), "block")
    assert a.pools["large"].blocks.get(B + 3 * MiB) is rest, "remainder not in the large pool"


@case("best_fit_split", "large slack: 19 MiB + 512 in a 20 MiB segment is not split and counts 20 MiB allocated")
def _check(ref):
    a = _new(ref)
    x = a.malloc(19 * MiB + 512)
    # segment 2 MiB * ceil(19 MiB+512 / 2 MiB) = 20 MiB; remaining 1 MiB - 512 <= kSmallSize -> no split
    _eq((a.active[x].size, a.active[x].next), (20 * MiB, None), "block")
    _eq(len(a.pools["large"]), 0, "large pool")
    _eq((_stat(a, "allocated_bytes.all.current"), _stat(a, "requested_bytes.all.current")),
        (20 * MiB, 19 * MiB + 512), "allocated / requested")


@case("best_fit_split", "9 MiB splits a 20 MiB segment; 10 MiB then takes the 11 MiB rest whole (1 MiB slack)")
def _check(ref):
    a = _new(ref)
    got = [a.malloc(9 * MiB), a.malloc(10 * MiB)]
    _eq(got, [B, B + 9 * MiB], "addresses")
    _eq((a.active[got[1]].size, a.device.num_mallocs, _stat(a, "allocated_bytes.all.current")),
        (11 * MiB, 1, 20 * MiB), "second block, cudaMalloc calls, allocated")


@case("best_fit_split", "12 MiB + 1 gets a 14 MiB segment whose 2 MiB - 512 rest serves a 1.5 MiB request")
def _check(ref):
    a = _new(ref)
    x = a.malloc(12 * MiB + 1)                 # block 12 MiB + 512, segment 14 MiB, rest 2 MiB - 512 > 1 MiB: split
    _eq(_keys(a, "large"), [(2 * MiB - 512, B + 12 * MiB + 512)], "rest after the first request")
    y = a.malloc(3 * MiB // 2)                 # large (> 1 MiB): best fit = that rest; remaining 0.5 MiB - 512: no split
    _eq((x, y, a.active[y].size), (B, B + 12 * MiB + 512, 2 * MiB - 512), "addresses / second block size")
    _eq((a.device.num_mallocs, _stat(a, "allocated_bytes.all.current")), (1, 14 * MiB), "cudaMalloc calls / allocated")


@case("best_fit_split", "best fit picks the 4 KiB hole over a 16 KiB hole at a lower address")
def _check(ref):
    a = _new(ref)
    a0, a1, a2, a3 = (a.malloc(n) for n in (16 * KiB, KiB, 4 * KiB, KiB))
    _eq([a0, a1, a2, a3], [B, B + 16 * KiB, B + 17 * KiB, B + 21 * KiB], "layout")
    a.free(a0)
    a.free(a2)                                  # holes: 16 KiB @B, 4 KiB @B+17K, tail @B+22K
    got = [a.malloc(3 * KiB), a.malloc(KiB), a.malloc(8 * KiB)]
    # 3K -> 4K hole (rest 1K @B+20K); 1K -> that 1K rest; 8K -> 16K hole @B
    _eq(got, [B + 17 * KiB, B + 20 * KiB, B], "best-fit addresses")


@case("best_fit_split", "equal-size holes: the lower address wins whatever the free order")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(n) for n in (4 * KiB, 512, 4 * KiB, 512)]   # B, B+4096, B+4608, B+8704
    a.free(xs[2])
    a.free(xs[0])
    _eq([a.malloc(4 * KiB), a.malloc(4 * KiB)], [B, B + 4608], "addresses")


@case("best_fit_split", "the pools are separate: a cached large block never serves a small request, nor vice versa")
def _check(ref):
    a = _new(ref)
    a.free(a.malloc(3 * MiB))                   # 20 MiB cached in the large pool
    s = a.malloc(4)                             # small request -> new 2 MiB segment @B+20M
    a.free(s)                                   # 2 MiB cached in the small pool
    big = a.malloc(3 * MiB // 2)                # large request -> the cached 20 MiB block @B, not the small one
    _eq((s, big, a.device.num_mallocs), (B + 20 * MiB, B, 2), "addresses / cudaMalloc calls")
    b = _new(ref)
    b.free(b.malloc(4))                         # small cached only
    _eq(b.malloc(3 * MiB // 2), B + 2 * MiB, "1.5 MiB after a cached small segment opens a new 20 MiB one")


@case("best_fit_split", "a freed block is handed to the next request of the same size (test_record_stream reuse)")
def _check(ref):
    a = _new(ref)
    x = a.malloc(1024)
    a.free(x)
    y = a.malloc(1024)
    g = a.malloc(64 * MiB)
    a.free(g)
    h = a.malloc(64 * MiB)
    _eq((y, h, a.device.num_mallocs), (x, g, 2), "reused addresses / cudaMalloc calls")


@case("best_fit_split", "small remainder of exactly 512 bytes is split off and reused")
def _check(ref):
    a = _new(ref)
    got = [a.malloc(MiB), a.malloc(MiB - 512), a.malloc(4)]
    # 1 MiB @B (rest 1 MiB); 1 MiB - 512 @B+1M leaves 512 >= kMinBlockSize -> split; 4 B takes it
    _eq(got, [B, B + MiB, B + 2 * MiB - 512], "addresses")
    _eq((a.device.num_mallocs, len(a.pools["small"])), (1, 0), "cudaMalloc calls / cached blocks")


@case("best_fit_split", "splitting an inner hole links the remainder between the block and its old next")
def _check(ref):
    a = _new(ref)
    xa, xb, xc = (a.malloc(4 * KiB) for _ in range(3))
    a.free(xb)
    d = a.malloc(KiB)                           # best fit: the 4 KiB hole @B+4K, not the tail
    blk, c = a.active[d], a.active[xc]
    rest = blk.next
    _eq((d, rest.addr, rest.size), (B + 4 * KiB, B + 5 * KiB, 3 * KiB), "block / remainder")
    assert rest.prev is blk and rest.next is c and c.prev is rest and a.active[xa].next is blk, "broken links"
    _walk(a)


@case("best_fit_split", "no max_split_size by default: a cached 64 MiB block serves and splits for 3 MiB")
def _check(ref):
    a = _new(ref)
    a.free(a.malloc(64 * MiB))
    x = a.malloc(3 * MiB)
    _eq((x, _keys(a, "large"), a.device.num_mallocs), (B, [(61 * MiB, B + 3 * MiB)], 1), "reuse + split")


@case("best_fit_split", "malloc bumps allocated (block sizes), requested (asked bytes) and active")
def _check(ref):
    a = _new(ref)
    for n in (1000, 4, 3 * MiB):
        a.malloc(n)
    st = a.memory_stats()
    _eq((st["allocated_bytes.all.current"], st["requested_bytes.all.current"], st["active.all.current"]),
        (1024 + 512 + 3 * MiB, 1000 + 4 + 3 * MiB, 3), "allocated / requested / active")


# =================================================================================================
# Part free_coalesce: free_block + try_merge_blocks (merge with free prev and next of the same segment).
# =================================================================================================
@case("free_coalesce", "notebook example: two middle frees make one 200 KiB hole, all four make the whole segment")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(100 * KiB) for _ in range(4)]
    a.free(xs[1])
    a.free(xs[2])
    _eq(_keys(a, "small"), [(200 * KiB, B + 100 * KiB), (2 * MiB - 400 * KiB, B + 400 * KiB)], "after 1, 2")
    a.free(xs[0])
    a.free(xs[3])
    _eq(_keys(a, "small"), [(2 * MiB, B)], "after all")
    blk = a.pools["small"].blocks[B]
    _eq((blk.prev, blk.next), (None, None), "whole segment has no neighbours")


for _perm in itertools.permutations(range(3)):
    @case("free_coalesce", f"three blocks freed in order {_perm} merge back into one 2 MiB block")
    def _check(ref, perm=_perm):
        a = _new(ref)
        xs = [a.malloc(n) for n in (KiB, 2 * KiB, 3 * KiB)]
        for i in perm:
            a.free(xs[i])
            _walk(a)
        _eq(_keys(a, "small"), [(2 * MiB, B)], "pool")


@case("free_coalesce", "merge with the previous block only (the next one is live)")
def _check(ref):
    a = _new(ref)
    xa, xb, xc = (a.malloc(n) for n in (KiB, 2 * KiB, 3 * KiB))   # B, B+1K, B+3K; tail at B+6K
    a.free(xa)
    a.free(xb)
    _eq(_keys(a, "small"), [(3 * KiB, B), (2 * MiB - 6 * KiB, B + 6 * KiB)], "pool")
    merged = a.pools["small"].blocks[B]
    assert merged.next is a.active[xc] and a.active[xc].prev is merged and merged.prev is None, "links"


@case("free_coalesce", "merge with the next block only (the free tail of the segment)")
def _check(ref):
    a = _new(ref)
    xa, xb, xc = (a.malloc(n) for n in (KiB, 2 * KiB, 3 * KiB))
    a.free(xc)
    _eq(_keys(a, "small"), [(2 * MiB - 3 * KiB, B + 3 * KiB)], "pool")
    assert a.active[xb].next is a.pools["small"].blocks[B + 3 * KiB], "links"


@case("free_coalesce", "double free, unknown address and interior address raise ValueError and change nothing")
def _check(ref):
    # lab rule (statement): ValueError; torch raises "invalid device pointer" (RuntimeError)
    a = _new(ref)
    x, y = a.malloc(KiB), a.malloc(KiB)
    a.free(x)
    before = a.memory_stats()
    _raises(ValueError, a.free, x)
    _raises(ValueError, a.free, B + 123 * MiB)
    _raises(ValueError, a.free, y + 512)
    _eq(a.memory_stats(), before, "stats after the bad frees")
    a.free(y)
    _eq(_keys(a, "small"), [(2 * MiB, B)], "the good free still works")


@case("free_coalesce", "free caches: reserved, device usage and cudaFree count do not move")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(n) for n in (4, 3 * MiB, 64 * MiB)]
    for x in xs:
        a.free(x)
    _eq((_stat(a, "reserved_bytes.all.current"), a.device.used, a.device.num_frees), (86 * MiB, 86 * MiB, 0),
        "reserved / device used / cudaFree calls")


@case("free_coalesce", "blocks of two different segments never merge, even when their addresses touch")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(MiB) for _ in range(4)]       # segment @B ends at B+2M where segment @B+2M starts
    _eq(xs, [B, B + MiB, B + 2 * MiB, B + 3 * MiB], "layout")
    for x in xs:
        a.free(x)
    _eq(_keys(a, "small"), [(2 * MiB, B), (2 * MiB, B + 2 * MiB)], "two whole segments")
    for blk in a.pools["small"]:
        _eq((blk.prev, blk.next), (None, None), "segment heads")


@case("free_coalesce", "large pool: 3 MiB and 4 MiB freed in a 20 MiB segment merge with the tail into 20 MiB")
def _check(ref):
    a = _new(ref)
    x, y = a.malloc(3 * MiB), a.malloc(4 * MiB)
    a.free(x)
    _eq(_keys(a, "large"), [(3 * MiB, B), (13 * MiB, B + 7 * MiB)], "after the first free")
    a.free(y)
    _eq(_keys(a, "large"), [(20 * MiB, B)], "after both")


@case("free_coalesce", "an unsplit slack block goes back whole (20 MiB for a 19 MiB + 512 request)")
def _check(ref):
    a = _new(ref)
    a.free(a.malloc(19 * MiB + 512))
    _eq(_keys(a, "large"), [(20 * MiB, B)], "pool")


@case("free_coalesce", "a merged hole serves a request of its exact size, the whole segment a 1 MiB one")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(100 * KiB) for _ in range(4)]
    a.free(xs[1])
    a.free(xs[2])
    _eq(a.malloc(200 * KiB), B + 100 * KiB, "200 KiB into the merged hole")
    b = _new(ref)
    ys = [b.malloc(100 * KiB) for _ in range(4)]
    for y in ys:
        b.free(y)
    _eq((b.malloc(MiB), b.device.num_mallocs), (B, 1), "1 MiB into the coalesced segment")


@case("free_coalesce", "test_memory_snapshot: 1000 tensors of 512 B deleted in random order merge back")
def _check(ref):
    a = _new(ref)
    x = a.malloc(311 * 411 * 4)                       # 511488-byte block @B
    ts = [a.malloc(128 * 4) for _ in range(1000)]     # tile the same segment: B + 511488 + 512 k
    _eq((ts[0], ts[-1], a.device.num_mallocs), (B + 511488, B + 511488 + 999 * 512, 1), "tiling")
    order = list(range(1000))
    random.Random(5).shuffle(order)
    for k, i in enumerate(order):
        a.free(ts[i])
        if k % 97 == 0:
            _walk(a)
    _eq(_keys(a, "small"), [(2 * MiB - 511488, B + 511488)], "pool after all deletes")
    _eq(a.malloc(128 * 5 * 4), B + 511488, "rand(128 * 5) afterwards")
    _eq(a.active[x].size, 511488, "x untouched")


@case("free_coalesce", "free undoes malloc's bumps; peaks stay")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(n) for n in (1000, 3 * MiB)]
    for x in xs:
        a.free(x)
    st = a.memory_stats()
    _eq([st[k] for k in ("allocated_bytes.all.current", "requested_bytes.all.current", "active.all.current")],
        [0, 0, 0], "currents")
    _eq([st[k] for k in ("allocated_bytes.all.peak", "requested_bytes.all.peak", "active.all.peak")],
        [1024 + 3 * MiB, 1000 + 3 * MiB, 2], "peaks")


# =================================================================================================
# Part oom_release: release_cached_blocks and malloc's release-and-retry.
# =================================================================================================
@case("oom_release", "empty_cache returns every whole cached segment of both pools")
def _check(ref):
    a = _new(ref)
    for n in (4, 3 * MiB):
        a.free(a.malloc(n))
    a.release_cached_blocks()
    _eq((_stat(a, "reserved_bytes.all.current"), a.device.used, a.device.num_frees, _stat(a, "num_device_free")),
        (0, 0, 2, 2), "reserved / used / cudaFree / num_device_free")
    _eq((len(a.pools["small"]), len(a.pools["large"])), (0, 0), "pools")


@case("oom_release", "empty_cache keeps split segments: one live 4 B tensor pins its 2 MiB segment")
def _check(ref):
    a = _new(ref)
    a.malloc(4)
    a.free(a.malloc(3 * MiB))
    a.release_cached_blocks()
    _eq((_stat(a, "reserved_bytes.all.current"), _keys(a, "small"), len(a.pools["large"])),
        (2 * MiB, [(2 * MiB - 512, B + 512)], 0), "reserved / small pool / large pool")


@case("oom_release", "notebook 48 MiB device: 40 MiB after a cached 30 MiB releases it and retries")
def _check(ref):
    a = _new(ref, 48 * MiB)
    a.free(a.malloc(30 * MiB))
    again = a.malloc(40 * MiB)          # 30 + 40 > 48: release the 30 MiB, retry -> next device address B+30M
    st = a.memory_stats()
    _eq((again, st["reserved_bytes.all.current"], st["num_alloc_retries"], st["num_ooms"], st["num_device_free"]),
        (B + 30 * MiB, 40 * MiB, 1, 0, 1), "address / reserved / retries / ooms / cudaFree")
    e = _raises(ref.OutOfMemoryError, a.malloc, 20 * MiB)     # 40 + 20 > 48, nothing cached
    msg = str(e)
    assert msg.startswith("Tried to allocate 20.00 MiB."), f"message {msg!r}"
    assert "8.00 MiB" in msg, f"message should say 8.00 MiB is free: {msg!r}"
    _eq((_stat(a, "num_alloc_retries"), _stat(a, "num_ooms")), (2, 1), "retries / ooms")


@case("oom_release", "a 3 MiB tensor that does not fit says 'Tried to allocate 20.00 MiB' (the segment)")
def _check(ref):
    a = _new(ref, 10 * MiB)
    e = _raises(ref.OutOfMemoryError, a.malloc, 3 * MiB)
    assert str(e).startswith("Tried to allocate 20.00 MiB."), f"message {str(e)!r}"
    assert isinstance(e, RuntimeError), "torch.OutOfMemoryError is a RuntimeError"
    assert "10.00 MiB" in str(e), f"the whole device is free: {str(e)!r}"


@case("oom_release", "a small request that does not fit says 'Tried to allocate 2.00 MiB'")
def _check(ref):
    a = _new(ref, MiB)
    e = _raises(ref.OutOfMemoryError, a.malloc, 4)
    assert str(e).startswith("Tried to allocate 2.00 MiB."), f"message {str(e)!r}"
    assert "1024.00 KiB" in str(e), f"free memory as format_size(1 MiB): {str(e)!r}"


@case("oom_release", "test_out_of_memory: 800000000 GiB, then the allocator keeps working")
def _check(ref):
    a = _new(ref, 16 * GiB)
    t = a.malloc(4096)
    e = _raises(RuntimeError, a.malloc, GiB * 800000000)
    assert str(e).startswith("Tried to allocate 800000000.00 GiB."), f"message {str(e)!r}"
    _eq((a.active[t].size, a.malloc(4096)), (4096, B + 4096), "old tensor intact / next request")
    _check_consistent(a)


@case("oom_release", "test_out_of_memory_retry: OOM, free the first tensor, the request then fits")
def _check(ref):
    a = _new(ref, 100 * MiB)
    x = a.malloc(60 * MiB)
    _raises(ref.OutOfMemoryError, a.malloc, 61 * MiB)          # 60 + 62 > 100, x is live: nothing to release
    a.free(x)
    y = a.malloc(61 * MiB)      # 60 MiB cached is too small; cudaMalloc fails; release it; retry -> B+60M
    st = a.memory_stats()
    _eq((y, st["reserved_bytes.all.current"], st["num_alloc_retries"], st["num_ooms"], st["num_device_free"]),
        (B + 60 * MiB, 62 * MiB, 2, 1, 1), "address / reserved / retries / ooms / cudaFree")


@case("oom_release", "allowed maximum: a segment that exactly fills the device fits, 512 bytes less does not")
def _check(ref):
    a = _new(ref, 20 * MiB)
    _eq((a.malloc(3 * MiB), _stat(a, "num_alloc_retries")), (B, 0), "exact fit")
    b = _new(ref, 20 * MiB - 512)
    _raises(ref.OutOfMemoryError, b.malloc, 3 * MiB)
    _eq((_stat(b, "num_alloc_retries"), _stat(b, "num_ooms"), b.device.used), (1, 1, 0), "after the OOM")


@case("oom_release", "the retry also releases cached segments of the other pool")
def _check(ref):
    a = _new(ref, 21 * MiB)
    a.free(a.malloc(4))                   # 2 MiB small segment cached
    x = a.malloc(3 * MiB)                 # 2 + 20 > 21 -> release the small one -> 20 <= 21
    _eq((x, a.device.num_frees, _stat(a, "num_alloc_retries"), _stat(a, "reserved_bytes.all.current"),
         len(a.pools["small"])), (B + 2 * MiB, 1, 1, 20 * MiB, 0), "address / cudaFree / retries / reserved / small")


@case("oom_release", "the retry releases whole segments only: a split one stays with its cached tail")
def _check(ref):
    a = _new(ref, 40 * MiB)
    a.malloc(3 * MiB)                     # 20 MiB segment @B, 17 MiB tail cached
    a.free(a.malloc(4))                   # 2 MiB @B+20M cached whole
    c = a.malloc(19 * MiB)                # needs 20 MiB: 22 + 20 > 40 -> release the 2 MiB -> 40 <= 40
    _eq((c, _keys(a, "large"), a.device.num_frees, _stat(a, "reserved_bytes.all.current")),
        (B + 22 * MiB, [(17 * MiB, B + 3 * MiB)], 1, 40 * MiB), "address / large pool / cudaFree / reserved")
    _eq(a.active[c].size, 20 * MiB, "19 MiB in its 20 MiB segment keeps 1 MiB slack unsplit")


@case("oom_release", "test_set_per_process_memory_fraction: 0.499 of the limit fits, the whole limit does not")
def _check(ref):
    a = _new(ref, 50 * MiB)
    t = a.malloc(1024 * 4)
    m = a.malloc(int(50 * MiB * 0.499))   # 26161971 -> block 26162176 -> segment 13 * 2 MiB = 26 MiB
    _eq(_stat(a, "reserved_bytes.all.current"), 28 * MiB, "reserved")
    a.free(m)
    a.release_cached_blocks()
    e = _raises(ref.OutOfMemoryError, a.malloc, 50 * MiB)   # 2 + 50 > 50; the small segment is pinned by t
    assert str(e).startswith("Tried to allocate 50.00 MiB."), f"message {str(e)!r}"
    _eq((a.active[t].size, _stat(a, "reserved_bytes.all.current")), (4096, 2 * MiB), "t intact / reserved")


@case("oom_release", "the message gives the device's free memory after the release")
def _check(ref):
    a = _new(ref, 30 * MiB)
    x = a.malloc(9 * MiB)                 # 20 MiB segment, pinned; its 11 MiB tail is too small for 12 MiB
    a.free(a.malloc(4))                   # 2 MiB cached
    e = _raises(ref.OutOfMemoryError, a.malloc, 12 * MiB)   # 22+12 > 30; release 2 -> 20+12 > 30
    assert str(e).startswith("Tried to allocate 12.00 MiB."), f"message {str(e)!r}"
    assert "10.00 MiB" in str(e), f"30 - 20 MiB is free after the release: {str(e)!r}"
    _eq((a.device.num_frees, _stat(a, "reserved_bytes.all.current")), (1, 20 * MiB), "cudaFree / reserved")
    a.free(x)                             # 9 + 11 merge: a whole 20 MiB block
    # after the OOM the cache is searched first: the 20 MiB block serves 12 MiB (split, rest 8 MiB)
    _eq((a.malloc(12 * MiB), _keys(a, "large"), _stat(a, "num_alloc_retries")),
        (B, [(8 * MiB, B + 12 * MiB)], 1), "address / pool / retries")
    _check_consistent(a)


@case("oom_release", "malloc_retry on a device with room returns a fresh segment block and counts one retry")
def _check(ref):
    a = _new(ref)
    blk = a.malloc_retry("small", 512)
    _eq((blk.addr, blk.size, blk.pool, blk.allocated, _stat(a, "num_alloc_retries"), _stat(a, "num_ooms")),
        (B, 2 * MiB, "small", False, 1, 0), "block / retries / ooms")
    blk = a.malloc_retry("large", 12 * MiB + 512)
    _eq((blk.addr, blk.size, blk.pool), (B + 2 * MiB, 14 * MiB, "large"), "large block")


@case("oom_release", "record_stream_oom, one stream: 100 alloc/free rounds of 160 MiB reuse one segment")
def _check(ref):
    # the lab has no streams: a freed block is reusable at once, so nothing piles up (torch's
    # record_stream delays reuse until an OOM forces the release of the piled-up blocks)
    a = _new(ref, GiB)
    a.malloc(40 * MiB * 4)
    xs = set()
    for _ in range(100):
        x = a.malloc(40 * MiB * 4)
        xs.add(x)
        a.free(x)
    _eq((xs, a.device.num_mallocs, _stat(a, "num_alloc_retries")), ({B + 160 * MiB}, 2, 0), "reuse")


@case("oom_release", "record_stream_oom without reuse: live 160 MiB tensors until OOM, then empty_cache")
def _check(ref):
    a = _new(ref, GiB)
    a.malloc(160 * MiB)
    xs = []
    while True:
        try:
            xs.append(a.malloc(160 * MiB))
        except ref.OutOfMemoryError:
            break
    _eq(len(xs), 5, "extra tensors that fit (6 * 160 <= 1024 < 7 * 160)")
    for x in xs:
        a.free(x)
    a.release_cached_blocks()
    _eq((_stat(a, "reserved_bytes.all.current"), a.device.num_frees, _stat(a, "num_ooms")), (160 * MiB, 5, 1),
        "reserved / cudaFree / ooms")


# =================================================================================================
# Part stats: memory_stats() against literals and against test_memory_stats' consistency walk.
# =================================================================================================
STAT_KEYS = [f"{s}.all.{k}" for s in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment")
             for k in ("current", "peak")] + ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
                                              "inactive_split.all.current", "inactive_split_bytes.all.current",
                                              "largest_free_block", "fragmentation"]


@case("stats", "a fresh allocator: every statistic is zero, fragmentation 0.0")
def _check(ref):
    st = _new(ref).memory_stats()
    missing = [k for k in STAT_KEYS if k not in st]
    assert not missing, f"missing keys {missing}"
    _eq({k: st[k] for k in STAT_KEYS}, {k: 0 for k in STAT_KEYS}, "stats")


@case("stats", "1000 B + 4 B + 3 MiB: literal stats (two split segments, 17 MiB largest hole)")
def _check(ref):
    a = _new(ref)
    for n in (1000, 4, 3 * MiB):
        a.malloc(n)
    st = a.memory_stats()
    alloc_b = 1024 + 512 + 3 * MiB                            # 3147264
    want = {"allocated_bytes.all.current": alloc_b, "requested_bytes.all.current": 1004 + 3 * MiB,
            "reserved_bytes.all.current": 22 * MiB, "active.all.current": 3, "segment.all.current": 2,
            "num_device_alloc": 2, "inactive_split.all.current": 2,
            "inactive_split_bytes.all.current": (2 * MiB - 1536) + 17 * MiB, "largest_free_block": 17 * MiB}
    _eq({k: st[k] for k in want}, want, "stats")
    assert abs(st["fragmentation"] - (1 - 17 * MiB / (22 * MiB - alloc_b))) < 1e-12, f"fragmentation {st['fragmentation']}"


@case("stats", "after freeing them: whole segments cached, no inactive split, fragmentation 1 - 20/22")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(n) for n in (1000, 4, 3 * MiB)]
    for x in xs:
        a.free(x)
    st = a.memory_stats()
    _eq((st["allocated_bytes.all.current"], st["allocated_bytes.all.peak"], st["inactive_split.all.current"],
         st["inactive_split_bytes.all.current"], st["largest_free_block"]),
        (0, 1024 + 512 + 3 * MiB, 0, 0, 20 * MiB), "stats")
    assert abs(st["fragmentation"] - 1 / 11) < 1e-12, f"fragmentation {st['fragmentation']}"


@case("stats", "after empty_cache: reserved 0 with peak 22 MiB, segments 0 with peak 2, fragmentation 0.0")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(n) for n in (1000, 4, 3 * MiB)]
    for x in xs:
        a.free(x)
    a.release_cached_blocks()
    st = a.memory_stats()
    _eq((st["reserved_bytes.all.current"], st["reserved_bytes.all.peak"], st["segment.all.current"],
         st["segment.all.peak"], st["num_device_alloc"], st["num_device_free"], st["largest_free_block"],
         st["fragmentation"]), (0, 22 * MiB, 0, 2, 2, 2, 0, 0.0), "stats")


@case("stats", "notebook example: 30 x 64 KiB, every other one freed: 16 inactive split blocks, frag 15/17")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(64 * KiB) for _ in range(30)]
    for x in xs[::2]:
        a.free(x)
    st = a.memory_stats()
    # 15 holes of 64 KiB (their neighbours are live) + the 128 KiB tail = 1088 KiB, largest 128 KiB
    _eq((st["inactive_split.all.current"], st["inactive_split_bytes.all.current"], st["largest_free_block"],
         st["allocated_bytes.all.current"]), (16, 1088 * KiB, 128 * KiB, 15 * 64 * KiB), "stats")
    assert abs(st["fragmentation"] - 15 / 17) < 1e-12, f"fragmentation {st['fragmentation']}"


@case("stats", "notebook 4 x 100 KiB with the middle two freed: 2 split holes, literal fragmentation")
def _check(ref):
    a = _new(ref)
    xs = [a.malloc(100 * KiB) for _ in range(4)]
    a.free(xs[1])
    a.free(xs[2])
    st = a.memory_stats()
    cached = 2 * MiB - 200 * KiB
    _eq((st["inactive_split.all.current"], st["inactive_split_bytes.all.current"], st["largest_free_block"]),
        (2, cached, 2 * MiB - 400 * KiB), "stats")
    assert abs(st["fragmentation"] - 200 * KiB / cached) < 1e-12, f"fragmentation {st['fragmentation']}"


@case("stats", "a whole cached 64 MiB segment is not inactive_split (is_split() is false)")
def _check(ref):
    a = _new(ref)
    a.free(a.malloc(64 * MiB))
    st = a.memory_stats()
    _eq((st["inactive_split.all.current"], st["inactive_split_bytes.all.current"], st["largest_free_block"],
         st["fragmentation"]), (0, 0, 64 * MiB, 0.0), "stats")


@case("stats", "peaks: 5 MiB then 2 MiB in the same cached segment")
def _check(ref):
    a = _new(ref)
    a.free(a.malloc(5 * MiB))
    a.malloc(2 * MiB)
    st = a.memory_stats()
    _eq((st["allocated_bytes.all.current"], st["allocated_bytes.all.peak"], st["reserved_bytes.all.peak"],
         st["active.all.peak"], st["segment.all.peak"]), (2 * MiB, 5 * MiB, 20 * MiB, 1, 1), "stats")


@case("stats", "release-and-retry: reserved peaks at 40 MiB, never 70; retries and ooms counted")
def _check(ref):
    a = _new(ref, 48 * MiB)
    a.free(a.malloc(30 * MiB))
    a.malloc(40 * MiB)
    _raises(ref.OutOfMemoryError, a.malloc, 20 * MiB)
    st = a.memory_stats()
    _eq((st["reserved_bytes.all.peak"], st["segment.all.peak"], st["num_device_alloc"], st["num_device_free"],
         st["num_alloc_retries"], st["num_ooms"]), (40 * MiB, 1, 2, 1, 2, 1), "stats")


def _memory_stats_program(ref):
    """test_cuda.py's _test_memory_stats_generator on the lab allocator: yields (label, allocator) after
    each step and checks its assert_change rules on the way (N = 35, float32 tensors)."""
    a = _new(ref, 16 * GiB)
    last = {"m": 0, "max_m": 0, "r": 0, "max_r": 0}

    def alloc(*size):
        return a.malloc(4 * int(np.prod(size)))

    def change(comp, what):
        st = a.memory_stats()
        m, max_m = st["allocated_bytes.all.current"], st["allocated_bytes.all.peak"]
        r, max_r = st["reserved_bytes.all.current"], st["reserved_bytes.all.peak"]
        if comp > 0:
            assert m > last["m"], f"{what}: allocated should grow ({last['m']} -> {m})"
        elif comp < 0:
            assert m < last["m"], f"{what}: allocated should shrink ({last['m']} -> {m})"
        else:
            assert m == last["m"], f"{what}: allocated should not move ({last['m']} -> {m})"
        assert m <= max_m and max_m >= last["max_m"] and r <= max_r and max_r >= last["max_r"], f"{what}: peaks"
        last.update(m=m, max_m=max_m, r=r, max_r=max_r)

    tensors1 = [alloc(1), alloc(10, 20), alloc(200, 300, 2000)]
    change(1, "tensors1")
    m1 = last["m"]
    yield "tensors1", a
    tensors2 = []
    for i in range(1, 18):
        tensors2.append(alloc(i, i * 4))
        change(1, f"small {i}")
        yield f"small {i}", a
    for i in range(5, 22):
        tensors2.append(alloc(i, i * 7, i * 9, i * 11))
        change(1, f"large {i}")
        yield f"large {i}", a
    tensors2.append(alloc(0, 0, 0))
    change(1, "alloc(0, 0, 0)")     # lab rule: 0 bytes take a 512-byte block (torch: no change)
    yield "empty", a
    order = list(range(len(tensors2)))
    random.Random(35).shuffle(order)
    tensors2 = [tensors2[i] for i in order]
    for i in range(17):             # the suite's `del tensors2[i]` on a shrinking list
        a.free(tensors2.pop(i))
        change(-1, f"del {i}")
        yield f"del {i}", a
    for i in range(2, 25):
        tensors2.append(alloc(i, i * 3, i * 8))
        change(1, f"mixed {i}")
        yield f"mixed {i}", a
    for x in tensors2:
        a.free(x)
    change(-1, "del tensors2")
    _eq(last["m"], m1, "allocated back to m1 after del tensors2")
    yield "del tensors2", a
    for x in tensors1:
        a.free(x)
    change(-1, "del tensors1")
    _eq(last["m"], 0, "allocated back to m0 after del tensors1")
    yield "del tensors1", a
    peak = a.memory_stats()["reserved_bytes.all.peak"]
    a.release_cached_blocks()
    st = a.memory_stats()
    _eq((st["reserved_bytes.all.current"], st["reserved_bytes.all.peak"]), (0, peak), "empty_cache at the end")
    _eq((st["num_alloc_retries"], st["num_ooms"], st["num_device_free"]), (0, 0, st["num_device_alloc"]), "counters")
    yield "empty_cache", a


@case("stats", "test_memory_stats: allocated/reserved/peak change rules over the whole program")
def _check(ref):
    steps = sum(1 for _ in _memory_stats_program(ref))
    _eq(steps, 1 + 17 + 17 + 1 + 17 + 23 + 3, "steps")


@case("stats", "test_memory_stats: _check_memory_stat_consistency after every step")
def _check(ref):
    for label, a in _memory_stats_program(ref):
        try:
            _check_consistent(a)
        except AssertionError as e:
            raise AssertionError(f"after {label}: {e}") from None


def _random_program(ref, seed, capacity, steps):
    rng = random.Random(seed)
    edges = [0, 1, 511, 512, 513, MiB - 1, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 2 * MiB - 512]
    a = _new(ref, capacity)
    live, ooms = [], 0
    for step in range(steps):
        if live and rng.random() < 0.45:
            a.free(live.pop(rng.randrange(len(live))))
        else:
            kind = rng.random()
            n = (rng.choice(edges) if kind < 0.2 else rng.randint(1, MiB) if kind < 0.75
                 else rng.randint(MiB + 1, 24 * MiB))
            try:
                live.append(a.malloc(n))
            except ref.OutOfMemoryError:
                ooms += 1
        try:
            _check_consistent(a)
        except AssertionError as e:
            raise AssertionError(f"seed {seed} step {step}: {e}") from None
    _eq(_stat(a, "num_ooms"), ooms, "num_ooms vs OutOfMemoryErrors raised")
    return ooms


for _seed, _cap in [(1, 8 * GiB), (2, 96 * MiB), (3, 64 * MiB)]:
    @case("stats", f"consistency walk after every event of a random program (seed {_seed}, device {_cap // MiB} MiB)")
    def _check(ref, seed=_seed, cap=_cap):
        ooms = _random_program(ref, seed, cap, 300)
        if cap < GiB:
            assert ooms > 0, "the tight device should have run out of memory at least once"


# =================================================================================================
# Part real_traces: replay.
# =================================================================================================
# Recorded once with the notebook's record_trace (torch 2.13.0+cpu profiler, profile_memory=True) on
# nn.Sequential(Linear(64, 128), ReLU(), Linear(128, 10)) + SGD, batch 32, two steps: "a<id>:<bytes>"
# is an alloc, "f<id>:<bytes>" a free.
MLP_TRACE_TEXT = (
    "a0:16384 a1:16384 f0:16384 a2:1280 a3:1280 a4:4 a5:4 f2:1280 a6:4 a7:1280 f5:4 a8:1280 f7:1280 f3:1280 "
    "a9:16384 a10:5120 a11:40 f8:1280 a12:16384 f9:16384 f1:16384 a13:32768 a14:512 f12:16384 f6:4 f4:4 "
    "f13:32768 f14:512 f10:5120 f11:40 a15:16384 a16:16384 f15:16384 a17:1280 a18:1280 a19:4 a20:4 f17:1280 "
    "a21:4 a22:1280 f20:4 a23:1280 f22:1280 f18:1280 a24:16384 a25:5120 a26:40 f23:1280 a27:16384 f24:16384 "
    "f16:16384 a28:32768 a29:512 f27:16384 f21:4 f19:4")
MLP_TRACE = [["alloc" if tok[0] == "a" else "free", int(tok[1:].split(":")[0]), int(tok.split(":")[1])]
             for tok in MLP_TRACE_TEXT.split()]
STEP1 = 30            # events of step 1 (ids 0..14, all freed by its end)

# Hand-written large-pool training step (2 MiB activations, 4 MiB weight grads, a 12 MiB buffer).
LARGE_TRACE = [
    ["alloc", 0, 2 * MiB], ["alloc", 1, 2 * MiB], ["alloc", 2, 20480], ["alloc", 3, 4], ["alloc", 4, 20480],
    ["alloc", 5, 4 * MiB], ["free", 1, 2 * MiB], ["alloc", 6, 2 * MiB], ["free", 0, 2 * MiB],
    ["alloc", 7, 4 * MiB], ["free", 6, 2 * MiB], ["alloc", 8, 3 * MiB + 1000], ["alloc", 9, 12 * MiB],
    ["free", 4, 20480], ["free", 2, 20480], ["free", 3, 4], ["free", 5, 4 * MiB], ["free", 7, 4 * MiB],
    ["free", 8, 3 * MiB + 1000], ["free", 9, 12 * MiB],
]
LARGE_ADDRS = [
    B,                       # a0 2 MiB: large, < 10 MiB -> 20 MiB segment S1 @B; rest 18 MiB @B+2M
    B + 2 * MiB,             # a1: best fit 18 MiB @B+2M; rest 16 MiB @B+4M
    B + 20 * MiB,            # a2 20480: small -> new 2 MiB segment S2 @B+20M
    B + 20 * MiB + 20480,    # a3 4 -> 512
    B + 20 * MiB + 20992,    # a4 20480
    B + 4 * MiB,             # a5 4 MiB: best fit 16 MiB @B+4M; rest 12 MiB @B+8M
    B + 2 * MiB,             # f1 -> hole 2 MiB @B+2M (neighbours a0, a5 live)
    B + 2 * MiB,             # a6 2 MiB: exact hole @B+2M (not the 12 MiB), no split
    B,                       # f0 -> hole 2 MiB @B
    B + 8 * MiB,             # a7 4 MiB: 2 MiB holes too small; 12 MiB @B+8M; rest 8 MiB @B+12M
    B + 2 * MiB,             # f6 -> merges with the hole @B: 4 MiB @B
    B,                       # a8 3 MiB+1024: best fit 4 MiB @B; remaining 1 MiB - 1024: no split
    B + 22 * MiB,            # a9 12 MiB: no cached block >= 12 MiB -> own 12 MiB segment S3 @B+22M
    B + 20 * MiB + 20992, B + 20 * MiB, B + 20 * MiB + 20480,     # small frees: S2 whole again
    B + 4 * MiB, B + 8 * MiB, B, B + 22 * MiB,                    # large frees: S1 20 MiB whole, S3 12 MiB whole
]


def _addresses_by_event(events, addrs):
    first = {}
    for (kind, ident, _), addr in zip(events, addrs, strict=True):
        if kind == "alloc":
            first[ident] = addr
        else:
            assert first.get(ident) == addr, f"free of id {ident} returned {addr}, its alloc got {first.get(ident)}"


@case("real_traces", "a six-event trace: addresses by hand (the freed 512-byte hole is reused)")
def _check(ref):
    ev = [["alloc", 0, 4], ["alloc", 1, 1000], ["free", 0, 4], ["alloc", 2, 4], ["free", 1, 1000], ["free", 2, 4]]
    _eq(list(ref.replay(_new(ref), ev)), [B, B + 512, B, B, B + 512, B], "addresses")


@case("real_traces", "replay drives only the given allocator: malloc(raw bytes) and free(address), in order")
def _check(ref):
    class Logger:
        def __init__(self):
            self.log = []

        def malloc(self, n):
            self.log.append(("malloc", n))
            return 7000 + 10 * len(self.log)

        def free(self, addr):
            self.log.append(("free", addr))

    lg = Logger()
    ev = [["alloc", 5, 3], ["alloc", 9, 70000], ["free", 5, 3], ["alloc", 2, 0], ["free", 2, 0], ["free", 9, 70000]]
    got = ref.replay(lg, ev)
    _eq(lg.log, [("malloc", 3), ("malloc", 70000), ("free", 7010), ("malloc", 0), ("free", 7040), ("free", 7020)], "calls")
    _eq(list(got), [7010, 7020, 7010, 7040, 7040, 7020], "addresses")


@case("real_traces", "an id may come back after its free (a new storage with the same id)")
def _check(ref):
    ev = [["alloc", 1, 2048], ["alloc", 2, 512], ["free", 1, 2048], ["alloc", 1, 1024], ["free", 1, 1024],
          ["free", 2, 512]]
    # 2048 @B, 512 @B+2048; free -> hole 2048 @B; 1024 -> B (split, rest 1024 @B+1024)
    _eq(list(ref.replay(_new(ref), ev)), [B, B + 2048, B, B, B, B + 2048], "addresses")


@case("real_traces", "recorded MLP + SGD trace: the first 17 addresses by hand")
def _check(ref):
    got = list(ref.replay(_new(ref), MLP_TRACE))[:17]
    want = [B,             # a0 16384 -> new 2 MiB segment
            B + 16384,     # a1
            B,             # f0 -> hole 16384 @B
            B,             # a2 1280 -> 1536: best fit hole @B (rest 14848 @B+1536)
            B + 1536,      # a3 1536 -> rest @B+1536 (rest 13312 @B+3072)
            B + 3072,      # a4 512 (rest 12800 @B+3584)
            B + 3584,      # a5 512 (rest 12288 @B+4096)
            B,             # f2 -> hole 1536 @B (a3 live after it)
            B,             # a6 512 -> best fit 1536 @B (rest 1024 @B+512)
            B + 4096,      # a7 1536 -> 12288 @B+4096 (1024 too small; rest 10752 @B+5632)
            B + 3584,      # f5 -> hole 512 @B+3584
            B + 5632,      # a8 1536 -> 10752 @B+5632 (rest 9216 @B+7168)
            B + 4096,      # f7 -> merges with the 512 hole: 2048 @B+3584
            B + 1536,      # f3 -> merges with 1024 @B+512: 2560 @B+512
            B + 32768,     # a9 16384 -> holes 2560, 2048, 9216 too small: the tail @B+32768
            B + 7168,      # a10 5120 -> 9216 @B+7168
            B + 3584]      # a11 40 -> 512: best fit 2048 @B+3584
    _eq(got, want, "addresses")


@case("real_traces", "recorded MLP + SGD trace: step 2 reuses step 1's addresses, one cudaMalloc in all")
def _check(ref):
    a = _new(ref)
    got = list(ref.replay(a, MLP_TRACE))
    step2 = got[STEP1:]
    _eq(step2, got[:len(step2)], "step 2 addresses vs the same events of step 1")
    _eq((a.device.num_mallocs, _stat(a, "reserved_bytes.all.peak")), (1, 2 * MiB), "cudaMalloc / reserved peak")


@case("real_traces", "recorded MLP + SGD trace: whole segment after step 1, four live grads at the end")
def _check(ref):
    a = _new(ref)
    ref.replay(a, MLP_TRACE[:STEP1])
    _eq((_keys(a, "small"), _stat(a, "inactive_split.all.current")), ([(2 * MiB, B)], 0), "after step 1")
    b = _new(ref)
    ref.replay(b, MLP_TRACE)
    # live ids 25 (5120), 26 (40 -> 512), 28 (32768), 29 (512)
    _eq((_stat(b, "allocated_bytes.all.current"), _stat(b, "requested_bytes.all.current"), _stat(b, "active.all.current")),
        (5120 + 512 + 32768 + 512, 5120 + 40 + 32768 + 512, 4), "allocated / requested / active")


@case("real_traces", "recorded MLP + SGD trace: each free returns its alloc's address; consistency after each event")
def _check(ref):
    a = _new(ref)

    class Checked:
        def malloc(self, n):
            addr = a.malloc(n)
            _check_consistent(a)
            return addr

        def free(self, addr):
            a.free(addr)
            _check_consistent(a)

    _addresses_by_event(MLP_TRACE, list(ref.replay(Checked(), MLP_TRACE)))


@case("real_traces", "large-pool training step: every address by hand")
def _check(ref):
    _eq(list(ref.replay(_new(ref), LARGE_TRACE)), LARGE_ADDRS, "addresses")


@case("real_traces", "large-pool training step: final pools, reserved 34 MiB, peaks")
def _check(ref):
    a = _new(ref)
    ref.replay(a, LARGE_TRACE)
    _eq((_keys(a, "large"), _keys(a, "small")), ([(12 * MiB, B + 22 * MiB), (20 * MiB, B)], [(2 * MiB, B + 20 * MiB)]),
        "pools")
    st = a.memory_stats()
    # peak allocated right after a9: 20480 + 512 + 20480 + 4M (a5) + 4M (a7) + 4M (a8 whole) + 12M (a9)
    _eq((st["reserved_bytes.all.current"], st["allocated_bytes.all.peak"], st["requested_bytes.all.peak"],
         st["segment.all.current"], st["inactive_split.all.current"]),
        (34 * MiB, 24 * MiB + 41472, 23 * MiB + 20480 + 4 + 20480 + 1000, 3, 0), "stats")


@case("real_traces", "large-pool training step on a 30 MiB device: OOM at the 12 MiB buffer; 34 MiB fits")
def _check(ref):
    a = _new(ref, 30 * MiB)
    # at a9 reserved is 22 MiB and both segments hold live blocks: nothing to release; 22 + 12 > 30
    e = _raises(ref.OutOfMemoryError, ref.replay, a, LARGE_TRACE)
    assert str(e).startswith("Tried to allocate 12.00 MiB."), f"message {str(e)!r}"
    _eq((_stat(a, "num_alloc_retries"), _stat(a, "num_ooms"), a.device.num_frees), (1, 1, 0), "retries / ooms / frees")
    b = _new(ref, 34 * MiB)
    _eq((list(ref.replay(b, LARGE_TRACE)), _stat(b, "num_alloc_retries")), (LARGE_ADDRS, 0), "exact fit")


# =================================================================================================
# Part timeline: memory_timeline (torch.cuda.memory_allocated / memory_reserved after every event).
# =================================================================================================
def _arrays(ref, events, capacity):
    out = ref.memory_timeline(events, capacity)
    assert len(out) == 3, f"memory_timeline returns {len(out)} arrays"
    for arr, name in zip(out, ("time", "allocated", "reserved"), strict=True):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.int64 and arr.shape == (len(events) + 1,), \
            f"{name}: {type(arr).__name__} {getattr(arr, 'dtype', None)} {getattr(arr, 'shape', None)}"
    return [a.tolist() for a in out]


@case("timeline", "six-event trace: time, allocated and reserved by hand")
def _check(ref):
    ev = [["alloc", 0, 4], ["alloc", 1, 1000], ["free", 0, 4], ["alloc", 2, 4], ["free", 1, 1000], ["free", 2, 4]]
    t, al, rs = _arrays(ref, ev, GiB)
    _eq(t, [0, 1, 2, 3, 4, 5, 6], "time")
    _eq(al, [0, 512, 1536, 1024, 1536, 512, 0], "allocated")
    _eq(rs, [0] + [2 * MiB] * 6, "reserved")


@case("timeline", "no events: one sample of the empty allocator")
def _check(ref):
    _eq(_arrays(ref, [], GiB), [[0], [0], [0]], "timeline")


@case("timeline", "large-pool training step: allocated and reserved by hand")
def _check(ref):
    _, al, rs = _arrays(ref, LARGE_TRACE, GiB)
    s = 41472                                           # 20480 + 512 + 20480 of small blocks
    want_al = [0, 2 * MiB, 4 * MiB, 4 * MiB + 20480, 4 * MiB + 20992, 4 * MiB + s, 8 * MiB + s, 6 * MiB + s,
               8 * MiB + s, 6 * MiB + s, 10 * MiB + s, 8 * MiB + s,
               12 * MiB + s,                            # a8 counts its whole 4 MiB block
               24 * MiB + s, 24 * MiB + 20992, 24 * MiB + 512, 24 * MiB, 20 * MiB, 16 * MiB, 12 * MiB, 0]
    _eq(al, want_al, "allocated")
    _eq(rs, [0, 20 * MiB, 20 * MiB] + [22 * MiB] * 10 + [34 * MiB] * 8, "reserved")


@case("timeline", "release-and-retry inside a trace: reserved drops from 30 to 0 and rises to 40 MiB")
def _check(ref):
    ev = [["alloc", 0, 30 * MiB], ["free", 0, 30 * MiB], ["alloc", 1, 40 * MiB]]
    _, al, rs = _arrays(ref, ev, 48 * MiB)
    _eq((al, rs), ([0, 30 * MiB, 0, 40 * MiB], [0, 30 * MiB, 30 * MiB, 40 * MiB]), "allocated / reserved")


@case("timeline", "slack counts: 19 MiB + 512 is 20 MiB allocated")
def _check(ref):
    _, al, rs = _arrays(ref, [["alloc", 0, 19 * MiB + 512], ["free", 0, 19 * MiB + 512]], GiB)
    _eq((al, rs), ([0, 20 * MiB, 0], [0, 20 * MiB, 20 * MiB]), "allocated / reserved")


@case("timeline", "recorded MLP trace (small pool): allocated is the running sum of 512-rounded sizes")
def _check(ref):
    # in the small pool a block is always exactly round_size (remainders of >= 512 are split), so
    # allocated = sum of 512 * ceil(n / 512) over live tensors; one segment throughout
    want, cur = [0], 0
    for kind, _, n in MLP_TRACE:
        cur += (1 if kind == "alloc" else -1) * max(512, -(-n // 512) * 512)
        want.append(cur)
    _, al, rs = _arrays(ref, MLP_TRACE, GiB)
    _eq(al, want, "allocated")
    _eq(rs, [0] + [2 * MiB] * len(MLP_TRACE), "reserved")


@case("timeline", "without OOM the reserved line never comes down; allocated <= reserved throughout")
def _check(ref):
    rng = random.Random(11)
    ev, live, nid = [], [], 0
    for _ in range(200):
        if live and rng.random() < 0.45:
            ident, n = live.pop(rng.randrange(len(live)))
            ev.append(["free", ident, n])
        else:
            n = rng.choice([rng.randint(1, MiB), rng.randint(MiB + 1, 30 * MiB)])
            ev.append(["alloc", nid, n])
            live.append((nid, n))
            nid += 1
    _, al, rs = _arrays(ref, ev, 64 * GiB)
    assert all(x <= y for x, y in zip(rs[:-1], rs[1:], strict=True)), "reserved came down"
    assert all(x <= y for x, y in zip(al, rs, strict=True)), "allocated above reserved"


@case("timeline", "each call starts from a fresh allocator (same answer twice, capacity independent)")
def _check(ref):
    first = _arrays(ref, LARGE_TRACE, GiB)
    _eq(_arrays(ref, LARGE_TRACE, GiB), first, "second call")
    _eq(_arrays(ref, LARGE_TRACE, 34 * MiB), first, "on a 34 MiB device (fits exactly)")


# =================================================================================================
def run() -> int:
    """Every case against the reference; raises AssertionError listing every disagreement."""
    return SUITE.run()


if __name__ == "__main__":
    print(run(), "peer cases agree")
