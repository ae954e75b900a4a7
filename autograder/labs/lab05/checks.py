# IPT-CANARY lab05 checks.py: hidden grading text, never shown to learners
"""P0 checks for lab05: every reply of scenarios.py is validated with autograder.engine.replies, normalised,
and compared with the oracle's own run of the same trace. Nothing P1 says is believed unless it equals what
PyTorch's rules (the oracle) give for P0's inputs.

`reveal` decides whether a message may print the expected value: True only for fixed cases like the public
ones; generated cases name the event, what the learner's code gave and the rule, not the answer."""
from __future__ import annotations

from autograder.engine import replies

from . import oracle


def _hex(a):
    return "None" if a is None else hex(a)


def _opt_int(value, what):
    return None if value is None else replies.integer(value, what)


def snapshot(value, what):
    """Validate and normalise a scenarios.snapshot reply."""
    snap = replies.dict_of(value, {"device", "blocks", "active", "pool_keys", "stats"}, what)
    device = []
    for j, seg in enumerate(replies.list_of(snap["device"], f"{what}: device segments")):
        a, s = replies.int_list(seg, f"{what}: device segment {j}", length=2)
        device.append((a, s))
    blocks_in = snap["blocks"]
    if not isinstance(blocks_in, dict):
        replies.fail(f"{what}: blocks", "a dict", blocks_in)
    blocks = {}
    for key, rows in blocks_in.items():
        try:
            seg = int(key)
        except (TypeError, ValueError):
            raise AssertionError(f"{what}: a block's `segment` should be an int address, got {key!r}") from None
        out = []
        for r in replies.list_of(rows, f"{what}: blocks of segment {seg:#x}"):
            row = replies.list_of(r, f"{what}: a block of segment {seg:#x}", length=6)
            out.append((replies.integer(row[0], "Block.addr"), replies.integer(row[1], "Block.size"),
                        replies.boolean(row[2], "Block.allocated"), replies.string(row[3], "Block.pool"),
                        _opt_int(row[4], "Block.prev.addr"), _opt_int(row[5], "Block.next.addr")))
        blocks[seg] = sorted(out)
    active = replies.int_list(snap["active"], f"{what}: active addresses")
    keys_in = replies.dict_of(snap["pool_keys"], {"small", "large"}, f"{what}: pools")
    pool_keys = {}
    for name in ("small", "large"):
        pool_keys[name] = [tuple(replies.int_list(k, f"{what}: a key of the {name} pool", length=2))
                           for k in replies.list_of(keys_in[name], f"{what}: the {name} pool's keys")]
    stats_in = replies.dict_of(snap["stats"], oracle.STAT_NAMES, f"{what}: self.stats")
    stats = {}
    for name in oracle.STAT_NAMES:
        cur, peak = replies.list_of(stats_in[name], f"{what}: self.stats[{name!r}]", length=2)
        stats[name] = (replies.integer(cur, f"self.stats[{name!r}]['current']"),
                       replies.integer(peak, f"self.stats[{name!r}]['peak']"))
    return {"device": sorted(device), "blocks": blocks, "active": sorted(active), "pool_keys": pool_keys,
            "stats": stats}


def invariants(snap, where=""):
    """Invariants of one normalised allocator state; None or a learner-readable problem."""
    device = dict(snap["device"])
    blocks = snap["blocks"]
    for seg in blocks:
        if seg not in device:
            return f"{where}blocks claim segment {seg:#x}, which the device does not hold (a released segment still has blocks?)"
    for seg, size in device.items():
        bl = blocks.get(seg, [])
        if not bl:
            return (f"{where}segment {seg:#x} ({size} bytes) has no block in `active` or in a pool: "
                    "its bytes are lost (a free block that never went back into its pool?)")
        pos = seg
        for addr, bsize, allocated, pool, prev, nxt in bl:
            if addr % 512 or bsize % 512 or bsize <= 0:
                return f"{where}block {addr:#x} of {bsize} bytes is not a positive multiple of 512 bytes at a 512-aligned address"
            if addr < pos:
                return f"{where}blocks overlap in segment {seg:#x}: a block at {addr:#x} starts before the previous one ends at {pos:#x}"
            if addr > pos:
                return f"{where}bytes {pos:#x}..{addr:#x} of segment {seg:#x} belong to no block (lost when splitting or merging?)"
            pos = addr + bsize
        if pos != seg + size:
            return f"{where}the blocks of segment {seg:#x} cover {pos - seg} bytes, the segment has {size}"
        pools = {b[3] for b in bl}
        if len(pools) != 1:
            return f"{where}segment {seg:#x} has blocks of both pools: {sorted(pools)}"
        for j, b in enumerate(bl):
            want_prev = bl[j - 1][0] if j > 0 else None
            want_next = bl[j + 1][0] if j + 1 < len(bl) else None
            if b[4] != want_prev or b[5] != want_next:
                return (f"{where}block {b[0]:#x}: prev/next should be the neighbouring blocks of its segment "
                        f"({_hex(want_prev)}, {_hex(want_next)}), got ({_hex(b[4])}, {_hex(b[5])})")
            if j > 0 and not b[2] and not bl[j - 1][2]:
                return f"{where}neighbouring free blocks {bl[j - 1][0]:#x} and {b[0]:#x} were not coalesced"
    free_keys = {"small": [], "large": []}
    for bl in blocks.values():
        for addr, bsize, allocated, pool, _, _ in bl:
            if not allocated:
                if pool not in free_keys:
                    return f"{where}block {addr:#x} has pool {pool!r}; pools are 'small' and 'large'"
                free_keys[pool].append((bsize, addr))
    for pool in ("small", "large"):
        want = sorted(free_keys[pool])
        got = snap["pool_keys"][pool]
        if got != want:
            return f"{where}the {pool} pool's keys {got[:4]}... do not match its free blocks {want[:4]}..."
    live = sorted(b[0] for bl in blocks.values() for b in bl if b[2])
    if live != snap["active"]:
        return f"{where}`active` holds {len(snap['active'])} address(es) but {len(live)} block(s) are marked allocated"
    return None


def compare_snapshot(got, want, where="", reveal=False):
    """The learner's normalised state must be exactly the oracle's: same segments, blocks, pools and stats."""
    problem = invariants(got, where)
    assert problem is None, problem
    if got["device"] != want["device"]:
        g = [(hex(a), s) for a, s in got["device"]]
        w = [(hex(a), s) for a, s in want["device"]]
        assert False, (f"{where}the device holds segments (address, bytes) {g[:6]}"
                       + (f", PyTorch's rules hold {w[:6]}" if reveal else
                          f": {len(g)} segment(s) of {sum(s for _, s in got['device'])} bytes, PyTorch's rules give "
                          f"{len(w)} segment(s) of {sum(s for _, s in want['device'])} bytes"))
    for seg, rows in want["blocks"].items():
        g = [(hex(r[0]), r[1], "allocated" if r[2] else "free") for r in got["blocks"].get(seg, [])]
        w = [(hex(r[0]), r[1], "allocated" if r[2] else "free") for r in rows]
        assert g == w, (f"{where}segment {seg:#x} is cut into blocks {g[:6]}" + (f"; it should be {w[:6]}" if reveal else
                        " (address, bytes, state); PyTorch's rules cut it differently"))
    if got["active"] != want["active"]:
        assert False, f"{where}`active` holds {[hex(a) for a in got['active'][:6]]}, not the live blocks"
    for name in oracle.STAT_NAMES:
        g, w = got["stats"][name], want["stats"][name]
        assert g == w, (f"{where}self.stats[{name!r}] is {{'current': {g[0]}, 'peak': {g[1]}}}"
                        + (f", should be {{'current': {w[0]}, 'peak': {w[1]}}}" if reveal else
                           ", which does not match the blocks allocated and segments reserved"))


def addresses(value, n, what):
    return [_opt_int(a, f"{what}[{i}]") for i, a in enumerate(replies.list_of(value, what, length=n))]


def errors(value, what):
    out = []
    for j, e in enumerate(replies.list_of(value, what)):
        i, kind, message = replies.list_of(e, f"{what}[{j}]", length=3)
        out.append((replies.integer(i, f"{what}[{j}] event"), None if kind is None else replies.string(kind, f"{what}[{j}] type"),
                    replies.string(message, f"{what}[{j}] message")))
    return out


def _before(events, i, k=4):
    return f"(events before: {events[max(0, i - k):i]})"


def compare_trace(events, got, ref, label, reveal=False, check_snapshot=True):
    """Addresses, errors (OutOfMemoryError, ValueError on bad frees) and the final state of one trace."""
    got = replies.dict_of(got, {"addresses", "errors", "snapshot"}, f"{label}: the trace run")
    addrs = addresses(got["addresses"], len(events), f"{label}: addresses")
    errs = errors(got["errors"], f"{label}: errors")
    by_event = {}
    for i, kind, message in errs:
        by_event.setdefault(i, (kind, message))
    want_err = {e[0]: e for e in ref["errors"]}
    for i, (e, g, w) in enumerate(zip(events, addrs, ref["addresses"], strict=True)):
        if i in want_err:
            _, kind, prefix, free = want_err[i]
            gk, gm = by_event.get(i, (None, ""))
            if kind == "OutOfMemoryError":
                assert gk == "OutOfMemoryError", (f"{label}, event {i} {e}: the device is full even after releasing the "
                                                  f"cache, so malloc should raise OutOfMemoryError, but it "
                                                  + ("returned an address" if g is not None else f"raised {gk}") + f" {_before(events, i)}")
                assert gm.startswith(prefix), (f"{label}, event {i} {e}: the OutOfMemoryError message should start "
                                               f"{prefix!r} (format_size of the segment it asked the device for), got {gm[:80]!r}")
                assert free in gm, (f"{label}, event {i} {e}: the OutOfMemoryError message should say how much the device "
                                    f"has free after the cache was released ({free!r}), got {gm[:160]!r}")
            else:
                assert gk == "ValueError", (f"{label}, event {i} {e}: free() of an address that is not a live block should "
                                            f"raise ValueError, " + ("it returned normally" if gk is None else f"it raised {gk}")
                                            + f" {_before(events, i)}")
            continue
        assert i not in by_event, (f"{label}, event {i} {e}: raised {by_event[i][0]}: {by_event[i][1][:120]!r}, "
                                   f"but PyTorch's rules serve this request {_before(events, i)}")
        if g != w:
            if reveal:
                assert False, f"{label}, event {i} {e}: want address {_hex(w)}, got {_hex(g)} {_before(events, i)}"
            assert False, (f"{label}, event {i} {e}: got address {_hex(g)}, which is not the block PyTorch's rules pick "
                           f"(best fit in the request's pool, split rule, merged neighbours, segment sizes) {_before(events, i)}")
    if check_snapshot:
        compare_snapshot(snapshot(got["snapshot"], f"{label}: the final state"), ref["snapshot"],
                         f"{label}, at the end of the trace: ", reveal)
    return got
