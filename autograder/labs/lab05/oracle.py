"""P0 reference for lab05: an independent caching allocator with PyTorch's default rules, the invariant
checks, the no-cache baseline, the committed real traces, and a hypothesis strategy of malloc/free traces."""
import json
from pathlib import Path

from hypothesis import strategies as st

KiB, MiB = 1024, 1024 * 1024
TRACES = Path(__file__).resolve().parent / "traces"
BASE = 1 << 32


def round_size(n):
    return 512 if n < 512 else -(-n // 512) * 512


def pool_of(n):
    return "small" if n <= MiB else "large"


def segment_size(n):
    if n <= MiB:
        return 2 * MiB
    if n < 10 * MiB:
        return 20 * MiB
    return -(-n // (2 * MiB)) * (2 * MiB)


class OutOfMemory(Exception):
    pass


class RefAllocator:
    """Blocks are dicts in per-segment address-sorted lists; free blocks are found by a linear best-fit scan."""

    def __init__(self, capacity):
        self.capacity, self.used, self.next_addr = capacity, 0, BASE
        self.segments = {}        # seg addr -> {"size", "pool", "blocks": [[addr, size, allocated, requested]]}
        self.live = {}            # addr -> seg addr
        self.cur = dict.fromkeys(("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment",
                                  "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"), 0)
        self.peak = dict(self.cur)

    def bump(self, k, d):
        self.cur[k] += d
        self.peak[k] = max(self.peak[k], self.cur[k])

    def _cuda_malloc(self, pool, n):
        if self.used + n > self.capacity:
            return None
        addr = self.next_addr
        self.next_addr += -(-n // (2 * MiB)) * (2 * MiB)
        self.used += n
        self.segments[addr] = {"size": n, "pool": pool, "blocks": [[addr, n, False, 0]]}
        self.bump("reserved_bytes", n); self.bump("segment", 1); self.bump("num_device_alloc", 1)
        return addr

    def _release_all(self):
        for addr in sorted(self.segments):
            seg = self.segments[addr]
            if len(seg["blocks"]) == 1 and not seg["blocks"][0][2]:
                del self.segments[addr]
                self.used -= seg["size"]
                self.bump("reserved_bytes", -seg["size"]); self.bump("segment", -1); self.bump("num_device_free", 1)

    def malloc(self, nbytes):
        size = round_size(nbytes)
        pool = pool_of(size)
        best = None
        for seg_addr, seg in self.segments.items():
            if seg["pool"] != pool:
                continue
            for i, b in enumerate(seg["blocks"]):
                if not b[2] and b[1] >= size and (best is None or (b[1], b[0]) < best[0]):
                    best = ((b[1], b[0]), seg_addr, i)
        if best is None:
            seg_addr = self._cuda_malloc(pool, segment_size(size))
            if seg_addr is None:
                self._release_all()
                self.bump("num_alloc_retries", 1)
                seg_addr = self._cuda_malloc(pool, segment_size(size))
                if seg_addr is None:
                    self.bump("num_ooms", 1)
                    raise OutOfMemory(size)
            best = (None, seg_addr, 0)
        _, seg_addr, i = best
        blocks = self.segments[seg_addr]["blocks"]
        b = blocks[i]
        rest = b[1] - size
        if (pool == "small" and rest >= 512) or (pool == "large" and rest > MiB):
            blocks.insert(i + 1, [b[0] + size, rest, False, 0])
            b[1] = size
        b[2], b[3] = True, nbytes
        self.live[b[0]] = seg_addr
        self.bump("allocated_bytes", b[1]); self.bump("requested_bytes", nbytes); self.bump("active", 1)
        return b[0]

    def free(self, addr):
        seg_addr = self.live.pop(addr)
        blocks = self.segments[seg_addr]["blocks"]
        i = next(j for j, b in enumerate(blocks) if b[0] == addr)
        b = blocks[i]
        self.bump("allocated_bytes", -b[1]); self.bump("requested_bytes", -b[3]); self.bump("active", -1)
        b[2], b[3] = False, 0
        if i + 1 < len(blocks) and not blocks[i + 1][2]:
            b[1] += blocks.pop(i + 1)[1]
        if i > 0 and not blocks[i - 1][2]:
            blocks[i - 1][1] += blocks.pop(i)[1]

    def stats(self):
        out = {}
        for k in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment"):
            out[f"{k}.all.current"], out[f"{k}.all.peak"] = self.cur[k], self.peak[k]
        for k in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
            out[k] = self.cur[k]
        free = [(b[1], len(s["blocks"]) > 1) for s in self.segments.values() for b in s["blocks"] if not b[2]]
        out["inactive_split.all.current"] = sum(1 for _, split in free if split)
        out["inactive_split_bytes.all.current"] = sum(n for n, split in free if split)
        largest = max((n for n, _ in free), default=0)
        cached = self.cur["reserved_bytes"] - self.cur["allocated_bytes"]
        out["largest_free_block"] = largest
        out["fragmentation"] = 1.0 - largest / cached if cached > 0 else 0.0
        return out


def run(events, capacity, stats=False):
    """The reference run of a trace, in the shape of scenarios.run_trace's answer."""
    a = RefAllocator(capacity)
    live, addresses, ooms, rows, timeline = {}, [], [], [], [(0, 0)]
    for i, (kind, ident, nbytes) in enumerate(events):
        if kind == "alloc":
            try:
                live[ident] = a.malloc(nbytes)
                addresses.append(live[ident])
            except OutOfMemory:
                ooms.append(i)
                addresses.append(None)
        elif ident in live:
            addr = live.pop(ident)
            a.free(addr)
            addresses.append(addr)
        else:
            addresses.append(None)
        if stats:
            rows.append(a.stats())
        timeline.append((a.cur["allocated_bytes"], a.cur["reserved_bytes"]))
    return {"addresses": addresses, "ooms": ooms, "stats": rows, "final": a.stats(), "timeline": timeline}


def load_trace(name):
    return json.loads((TRACES / f"{name}.json").read_text())["events"]


REAL_TRACES = ("mlp_sgd", "convnet_adam", "mlp_wide")


def no_cache_device_mallocs(events):
    return sum(1 for e in events if e[0] == "alloc")


def check_snapshot(snap, where=""):
    """Invariants of one allocator state (a scenarios.snapshot). Returns None or a learner-readable problem."""
    device = {a: s for a, s in snap["device"]}
    blocks = {int(k): v for k, v in snap["blocks"].items()}
    for seg in blocks:
        if seg not in device:
            return f"{where}blocks claim segment {seg:#x}, which the device does not hold (a released segment still has blocks?)"
    for seg, size in device.items():
        bl = sorted(blocks.get(seg, []))
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
                        f"({want_prev and hex(want_prev)}, {want_next and hex(want_next)}), got "
                        f"({b[4] and hex(b[4])}, {b[5] and hex(b[5])})")
            if j > 0 and not b[2] and not bl[j - 1][2]:
                return f"{where}neighbouring free blocks {bl[j - 1][0]:#x} and {b[0]:#x} were not coalesced"
    free_keys = {}
    for bl in blocks.values():
        for addr, bsize, allocated, pool, _, _ in bl:
            if not allocated:
                free_keys.setdefault(pool, []).append([bsize, addr])
    for pool in ("small", "large"):
        want = sorted(free_keys.get(pool, []))
        got = snap["pool_keys"].get(pool, [])
        if got != want:
            return f"{where}the {pool} pool's keys {got[:4]}... do not match its free blocks {want[:4]}..."
    return None


def check_live_no_overlap(events, addresses):
    """No two live allocations (by rounded request size) overlap at any time."""
    import bisect
    live_by_id, starts, ends = {}, [], {}
    for i, ((kind, ident, nbytes), addr) in enumerate(zip(events, addresses)):
        if kind == "alloc":
            if addr is None:
                continue
            if not isinstance(addr, int):
                return f"event {i}: malloc returned {addr!r}, not an int address"
            size = round_size(nbytes)
            k = bisect.bisect_left(starts, addr)
            if k < len(starts) and starts[k] < addr + size:
                return f"event {i}: the block at {addr:#x} for {nbytes} bytes overlaps a live tensor at {starts[k]:#x}"
            if k > 0 and starts[k - 1] + ends[starts[k - 1]] > addr:
                return f"event {i}: the block at {addr:#x} overlaps the live tensor at {starts[k - 1]:#x}"
            starts.insert(k, addr)
            ends[addr] = size
            live_by_id[ident] = addr
        elif ident in live_by_id:
            a = live_by_id.pop(ident)
            starts.remove(a)
            del ends[a]
    return None


SIZES = st.one_of(st.integers(1, 4096), st.integers(4097, MiB), st.integers(MiB + 1, 12 * MiB),
                  st.integers(12 * MiB, 40 * MiB), st.sampled_from([512, 1024, MiB, MiB + 1, 10 * MiB, 2 * MiB]))


@st.composite
def traces(draw, min_size=4, max_size=60, sizes=SIZES):
    """A malloc/free trace: each step allocates, or frees a live tensor chosen by the drawn index."""
    steps = draw(st.lists(st.tuples(st.integers(0, 2), sizes, st.integers(0, 10 ** 6)),
                          min_size=min_size, max_size=max_size))
    events, live, next_id = [], [], 0
    for op, size, pick in steps:
        if op == 0 and live:
            ident, n = live.pop(pick % len(live))
            events.append(["free", ident, n])
        else:
            events.append(["alloc", next_id, size])
            live.append((next_id, size))
            next_id += 1
    # free a random half of what is left, so traces end with holes and coalescing
    for ident, n in live[::2]:
        events.append(["free", ident, n])
    return events

# IPT-CANARY lab05 oracle.py: hidden grading text, never shown to learners
