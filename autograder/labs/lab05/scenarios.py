"""lab05 scenarios: run on the student side (P1) against the learner's module `sub` (numpy only; torch is denied).

Thin on purpose: build the learner's objects from P0's inputs, call their code, return plain values. Nothing
here is believed by P0 except as values to compare with its own oracle (a learner can rewrite this module).

A trace is a list of events ["alloc", id, nbytes] / ["free", id, nbytes] / ["bad_free", id, delta] /
["empty_cache", 0, 0] (see oracle.run). `snapshot` reads the allocator's state through the scaffold's
structures (device segments, `active`, the pools, `stats`), not through `memory_stats()`.
"""


def _plain(value):
    """A learner's return value as wire data, without coercion (P0 checks the type)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        import numpy as np
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        if isinstance(value, np.bool_):
            return bool(value)
    except Exception:  # noqa: BLE001
        pass
    return f"<{type(value).__name__}>"


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


def rounding(sub, sizes):
    out = {"round": [], "pool": [], "segment": []}
    for n in sizes:
        r = sub.round_size(n)
        out["round"].append(_plain(r))
        out["pool"].append(_plain(sub.get_pool(r)))
        out["segment"].append(_plain(sub.allocation_size(r)))
    return out


def pool_functions(sub, rounded):
    """get_pool and allocation_size called directly on P0's rounded sizes (not through round_size)."""
    return {"pool": [_plain(sub.get_pool(n)) for n in rounded],
            "segment": [_plain(sub.allocation_size(n)) for n in rounded]}


def best_fit(sub, pool_name, blocks, requests):
    """Free blocks [[addr, size], ...] in one pool; the best fit's address (or None) for each request."""
    pool = sub.BlockPool(pool_name)
    for addr, size in blocks:
        pool.insert(sub.Block(addr, size, pool_name, addr))
    out = []
    for n in requests:
        b = sub.find_free_block(pool, n)
        out.append(None if b is None else _plain(getattr(b, "addr", b)))
    return {"found": out, "keys_after": [[int(s), int(a)] for s, a in pool.keys]}


def should_split(sub, cases):
    return [_plain(sub.should_split(sub.Block(addr, size, pool, addr), n)) for pool, size, n, addr in cases]


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
            "pool_keys": {str(name): [[int(s), int(a)] for s, a in pool.keys] for name, pool in alloc.pools.items()},
            "stats": {str(k): [_plain(v.get("current")), _plain(v.get("peak"))] for k, v in alloc.stats.items()}}


def run_trace(sub, events, capacity, stats=False, snapshots=False, use_replay=False):
    """Run events on CachingAllocator(Device(capacity)). An OutOfMemoryError is recorded and the trace goes
    on (that tensor's later free is skipped); a bad_free's exception is recorded; other errors propagate."""
    alloc = sub.CachingAllocator(sub.Device(capacity))
    if use_replay:
        addresses = sub.replay(alloc, [list(e) for e in events])
        out = {"addresses": [_plain(a) for a in addresses], "snapshot": snapshot(alloc)}
        if stats:
            out["stats"] = _stats(alloc.memory_stats())
        return out
    live, last, addresses, errors, snaps, stat_rows = {}, {}, [], [], [], []
    for i, (kind, ident, nbytes) in enumerate(events):
        addr = None
        if kind == "alloc":
            try:
                addr = live[ident] = last[ident] = alloc.malloc(nbytes)
            except sub.OutOfMemoryError as e:
                errors.append([i, type(e).__name__, str(e)[:400]])
        elif kind == "free":
            if ident in live:
                addr = live.pop(ident)
                alloc.free(addr)
        elif kind == "bad_free":
            if ident < 0 or ident in last:
                try:
                    alloc.free(nbytes if ident < 0 else last[ident] + nbytes)
                    errors.append([i, None, ""])
                except Exception as e:  # noqa: BLE001
                    errors.append([i, type(e).__name__, str(e)[:400]])
        elif kind == "empty_cache":
            alloc.release_cached_blocks()
        addresses.append(_plain(addr))
        if snapshots:
            snaps.append(snapshot(alloc))
        if stats:
            stat_rows.append(_stats(alloc.memory_stats()))
    out = {"addresses": addresses, "errors": errors, "snapshot": snapshot(alloc)}
    if snapshots:
        out["snapshots"] = snaps
    if stats:
        out["stats"] = stat_rows
    return out


def run_twice(sub, first, second, capacity):
    """Two allocators in one process, one after the other: state must not leak between instances (class
    attributes, module globals)."""
    a = run_trace(sub, first, capacity)
    b = run_trace(sub, second, capacity)
    return {"first": a, "second": b}


def _stats(d):
    if not isinstance(d, dict):
        return f"<{type(d).__name__}>"
    return {str(k): _plain(v) for k, v in d.items()}


def stats_of_state(sub, capacity, segments, stats):
    """memory_stats() of an allocator whose state P0 sets directly: segments [[seg, pool, [[addr, size,
    allocated], ...]], ...] and stats {name: [current, peak]}. Needs no learner malloc/free."""
    alloc = sub.CachingAllocator(sub.Device(capacity))
    for seg, pool_name, rows in segments:
        size = sum(r[1] for r in rows)
        alloc.device.segments[seg] = size
        alloc.device.used += size
        prev = None
        for addr, bsize, allocated in rows:
            b = sub.Block(addr, bsize, pool_name, seg)
            b.prev = prev
            if prev is not None:
                prev.next = b
            prev = b
            if allocated:
                b.allocated, b.requested = True, bsize
                alloc.active[addr] = b
            else:
                alloc.pools[pool_name].insert(b)
    for name, (cur, peak) in stats.items():
        alloc.stats[name]["current"], alloc.stats[name]["peak"] = cur, peak
    return _stats(alloc.memory_stats())


def replay_fake(sub, events, base):
    """replay() on a stand-in allocator (a size-keyed LIFO cache at P0's base address), so that the replay part
    does not depend on the learner's malloc/free."""

    class StandIn:
        def __init__(self):
            self.live, self.cache, self.next = {}, {}, base

        def malloc(self, nbytes):
            stack = self.cache.get(nbytes)
            if stack:
                addr = stack.pop()
            else:
                addr, self.next = self.next, self.next + 4096 * (1 + nbytes // 4096)
            self.live[addr] = nbytes
            return addr

        def free(self, addr):
            if addr not in self.live:
                raise ValueError(f"free({addr!r}): not a live address of this allocator")
            self.cache.setdefault(self.live.pop(addr), []).append(addr)

    stand_in = StandIn()
    addresses = sub.replay(stand_in, [list(e) for e in events])
    return {"addresses": [_plain(a) for a in addresses] if isinstance(addresses, (list, tuple)) else _plain(addresses),
            "live": sorted(int(a) for a in stand_in.live)}


def timeline(sub, events, capacity):
    import numpy as np
    result = sub.memory_timeline([list(e) for e in events], capacity)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return {"shape": _plain(result) if not isinstance(result, (tuple, list)) else f"<{len(result)} items>"}
    out = {}
    for j, key in enumerate(("time", "allocated", "reserved")):
        value = result[j]
        out[key] = value if isinstance(value, np.ndarray) else f"<{type(value).__name__}>"
    return out

# IPT-CANARY lab05 scenarios: hidden grading text, never shown to learners
