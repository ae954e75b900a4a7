"""lab05 scenarios: run on the student side (P1) against the learner's module `sub` (numpy only; torch is denied).

A trace is a list of events ["alloc", id, nbytes] / ["free", id, nbytes]. `snapshot` reads the allocator's
state through the scaffold's structures (device segments, `active`, the pools), not through the learner's
statistics, so that the invariant checks in P0 do not depend on part 5.
"""


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


def rounding(sub, sizes):
    out = {"round": [], "pool": [], "segment": []}
    for n in sizes:
        r = int(sub.round_size(n))
        out["round"].append(r)
        out["pool"].append(str(sub.get_pool(r)))
        out["segment"].append(int(sub.allocation_size(r)))
    return out


def best_fit(sub, pool_name, blocks, requests):
    """Free blocks [[addr, size], ...] in one pool; the best fit's address (or None) for each request."""
    pool = sub.BlockPool(pool_name)
    for addr, size in blocks:
        pool.insert(sub.Block(addr, size, pool_name, addr))
    out = []
    for n in requests:
        b = sub.find_free_block(pool, n)
        out.append(None if b is None else int(b.addr))
    if sorted(pool.keys) != sorted((s, a) for a, s in blocks):
        raise AssertionError("find_free_block must not change the pool")
    return out


def should_split(sub, cases):
    return [bool(sub.should_split(sub.Block(1 << 32, size, pool, 1 << 32), n)) for pool, size, n in cases]


def snapshot(alloc):
    blocks = [b for b in alloc.active.values()]
    for pool in alloc.pools.values():
        blocks.extend(pool.blocks.values())
    segs = {}
    for b in blocks:
        segs.setdefault(int(b.segment), []).append(
            [int(b.addr), int(b.size), bool(b.allocated), str(b.pool),
             None if b.prev is None else int(b.prev.addr), None if b.next is None else int(b.next.addr)])
    return {"device": sorted([int(a), int(s)] for a, s in alloc.device.segments.items()),
            "blocks": {str(k): sorted(v) for k, v in segs.items()},
            "active": sorted(int(a) for a in alloc.active),
            "pool_keys": {name: [[int(s), int(a)] for s, a in pool.keys] for name, pool in alloc.pools.items()}}


def run_trace(sub, events, capacity, stats=False, snapshots=False, use_replay=False):
    """Run events on CachingAllocator(Device(capacity)). An OutOfMemoryError is recorded and the
    trace goes on (that tensor's later free is skipped); any other error propagates."""
    alloc = sub.CachingAllocator(sub.Device(capacity))
    if use_replay:
        addresses = sub.replay(alloc, [list(e) for e in events])
        out = {"addresses": [int(a) for a in addresses], "snapshot": snapshot(alloc)}
        if stats:
            out["stats"] = _stats(alloc.memory_stats())
        return out
    live, addresses, ooms, snaps, stat_rows = {}, [], [], [], []
    for i, (kind, ident, nbytes) in enumerate(events):
        if kind == "alloc":
            try:
                live[ident] = alloc.malloc(nbytes)
                addresses.append(int(live[ident]))
            except sub.OutOfMemoryError as e:
                ooms.append([i, str(e)[:300]])
                addresses.append(None)
        elif ident in live:
            addr = live.pop(ident)
            alloc.free(addr)
            addresses.append(int(addr))
        else:
            addresses.append(None)
        if snapshots:
            snaps.append(snapshot(alloc))
        if stats:
            stat_rows.append(_stats(alloc.memory_stats()))
    out = {"addresses": addresses, "ooms": ooms, "snapshot": snapshot(alloc)}
    if snapshots:
        out["snapshots"] = snaps
    if stats:
        out["stats"] = stat_rows
    return out


def _stats(d):
    return {str(k): (float(v) if k == "fragmentation" else int(v)) for k, v in d.items()}


def double_free(sub):
    alloc = sub.CachingAllocator(sub.Device(1 << 30))
    a = alloc.malloc(1000)
    alloc.free(a)
    try:
        alloc.free(a)
    except Exception as e:  # noqa: BLE001
        return _error(e)
    return {"error": None}


def empty_cache(sub, events, capacity):
    """Run a trace (no OOM expected), then release_cached_blocks(); the snapshot after."""
    alloc = sub.CachingAllocator(sub.Device(capacity))
    live = {}
    for kind, ident, nbytes in events:
        if kind == "alloc":
            live[ident] = alloc.malloc(nbytes)
        else:
            alloc.free(live.pop(ident))
    before = snapshot(alloc)
    alloc.release_cached_blocks()
    return {"before": before, "after": snapshot(alloc), "device_frees": int(alloc.device.num_frees)}


def timeline(sub, events, capacity):
    t, allocated, reserved = sub.memory_timeline([list(e) for e in events], capacity)
    import numpy as np
    return {"time": np.asarray(t), "allocated": np.asarray(allocated), "reserved": np.asarray(reserved),
            "dtypes": [str(np.asarray(x).dtype) for x in (t, allocated, reserved)]}

# IPT-CANARY lab05 scenarios: hidden grading text, never shown to learners
