# IPT-CANARY lab05 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab05's reference solution (P0).

PyTorch's CUDA caching allocator cannot run without a GPU, so the comparison has two levels:

1. always: the reference solution (assembled from solutions/lab05_memory.py as grading assembles a
   submission) against `oracle.RefAllocator`, an independent re-implementation of the rules of
   c10/cuda/CUDACachingAllocator.cpp in PyTorch 2.13's default configuration (round_size, get_pool,
   get_allocation_size, get_free_block's best fit, should_split, free_block's merges,
   release_cached_blocks + alloc_block(isRetry) and the OOM message's alloc_size), over the edge domain of
   catalogue.toml: sizes at every boundary, out-of-order frees, double and interior frees, empty_cache,
   full devices; addresses, errors, the whole block state and memory_stats() after every event;
2. when torch.cuda is available (`make fuzz` on a GPU machine): the same traces through
   torch.cuda.caching_allocator_alloc / caching_allocator_delete on a fresh process-wide allocator, comparing
   allocated/reserved/requested bytes, segment counts, inactive splits and each segment's block layout
   (torch.cuda.memory_snapshot) with the reference's, event by event.

    run(examples) -> number of cases checked; raises AssertionError on the first disagreement.
"""
from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.labs.lab05 import checks, oracle, scenarios
from autograder.labs.lab05.oracle import KiB, MiB


@functools.lru_cache(maxsize=1)
def reference():
    """The reference solution as a module (its exported cells, as grading runs them)."""
    from autograder.engine.variants import reference_module
    return reference_module("lab05")


KEYS = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "requested_bytes.all.current",
        "requested_bytes.all.peak", "reserved_bytes.all.current", "reserved_bytes.all.peak", "active.all.current",
        "active.all.peak", "segment.all.current", "segment.all.peak", "num_alloc_retries", "num_ooms",
        "num_device_alloc", "num_device_free", "inactive_split.all.current", "inactive_split_bytes.all.current",
        "largest_free_block", "fragmentation"]


def compare(events, capacity, every_event=True) -> None:
    ref = reference()
    got = scenarios.run_trace(ref, events, capacity, stats=every_event, snapshots=every_event)
    want = oracle.run(events, capacity, stats=every_event, snapshots=every_event)
    checks.compare_trace(events, got, want, f"fuzz trace on {capacity} bytes", reveal=True)
    if not every_event:
        return
    for i, (snap, w) in enumerate(zip(got["snapshots"], want["snapshots"], strict=True)):
        checks.compare_snapshot(checks.snapshot(snap, "fuzz"), w, f"after event {i} {events[i]}: ", reveal=True)
    for i, (g, w) in enumerate(zip(got["stats"], want["stats"], strict=True)):
        for key in KEYS:
            assert abs(g[key] - w[key]) <= 1e-12, f"after event {i} {events[i]}: memory_stats()[{key!r}] {g[key]} != {w[key]}"


def compare_sizes(sizes) -> None:
    ref = reference()
    for n in sizes:
        r = ref.round_size(n)
        assert r == oracle.round_size(n), f"round_size({n}): {r} != {oracle.round_size(n)}"
        assert ref.get_pool(r) == oracle.pool_of(r), f"get_pool({r})"
        assert ref.allocation_size(r) == oracle.segment_size(r), f"allocation_size({r})"
        assert ref.format_size(n) == oracle.format_size(n), f"format_size({n})"


def compare_torch(events) -> int:
    """Level 2 (GPU only): the reference against torch.cuda's own caching allocator."""
    import torch

    if not torch.cuda.is_available():
        return 0
    torch.cuda.empty_cache()
    if torch.cuda.memory_allocated() or torch.cuda.memory_reserved():
        return 0        # someone else's tensors share the allocator: no clean comparison possible
    torch.cuda.reset_peak_memory_stats()
    ref = reference()
    alloc = ref.CachingAllocator(ref.Device(1 << 40))
    mine, theirs = {}, {}
    try:
        for i, (kind, ident, nbytes) in enumerate(events):
            if kind == "alloc":
                if nbytes == 0:
                    continue            # the lab's stated difference: PyTorch's allocate(0) never reaches malloc
                mine[ident] = alloc.malloc(nbytes)
                theirs[ident] = torch.cuda.caching_allocator_alloc(nbytes)
            elif kind == "free" and ident in mine:
                alloc.free(mine.pop(ident))
                torch.cuda.caching_allocator_delete(theirs.pop(ident))
            elif kind == "empty_cache":
                alloc.release_cached_blocks()
                torch.cuda.empty_cache()
            else:
                continue
            g, t = alloc.memory_stats(), torch.cuda.memory_stats()
            for key in ("allocated_bytes.all.current", "reserved_bytes.all.current", "requested_bytes.all.current",
                        "segment.all.current", "active.all.current", "inactive_split.all.current",
                        "inactive_split_bytes.all.current"):
                assert g[key] == t.get(key, 0), f"event {i} {events[i]}: {key} lab {g[key]} vs torch {t.get(key, 0)}"
            layout = sorted((s["total_size"], tuple((b["size"], b["state"] == "active_allocated") for b in s["blocks"]))
                            for s in torch.cuda.memory_snapshot())
            lab = sorted((seg_size, tuple((b[1], b[2]) for b in sorted(alloc_blocks)))
                         for seg_size, alloc_blocks in _segments(alloc))
            assert layout == lab, f"event {i} {events[i]}: segment layouts differ: lab {lab[:3]} vs torch {layout[:3]}"
    finally:
        for ptr in theirs.values():
            torch.cuda.caching_allocator_delete(ptr)
        torch.cuda.empty_cache()
    return 1


def _segments(alloc):
    snap = scenarios.snapshot(alloc)
    sizes = dict((a, s) for a, s in snap["device"])
    return [(sizes[int(seg)], rows) for seg, rows in snap["blocks"].items()]


def run(examples: int) -> int:
    count = [0]
    fixed = [0, 1, 511, 512, 513, MiB - 1, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 12 * MiB + 1, 1 << 31]
    compare_sizes(fixed)
    count[0] += len(fixed)

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(oracle.traces(max_size=40, bad_frees=True, empty_cache=True),
           st.sampled_from((24 * MiB, 40 * MiB, 100 * MiB, 1 << 32)),
           st.lists(st.one_of(st.integers(0, 1 << 31), oracle.BOUNDARY), max_size=20))
    def one(events, capacity, sizes):
        compare_sizes(sizes)
        compare(events, capacity)
        compare_torch([e for e in events if e[0] != "bad_free"])
        count[0] += 1

    one()
    for name in oracle.REAL_TRACES:
        compare(oracle.load_trace(name), 8 << 30, every_event=False)
        count[0] += 1
    return count[0]


if __name__ == "__main__":
    import sys
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
