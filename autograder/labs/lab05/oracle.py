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


STAT_NAMES = ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment",
              "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


def format_size(nbytes):
    if nbytes <= 1024:
        return f"{nbytes} bytes"
    if nbytes <= MiB:
        return f"{nbytes / KiB:.2f} KiB"
    if nbytes <= 1024 * MiB:
        return f"{nbytes / MiB:.2f} MiB"
    return f"{nbytes / (1024 * MiB):.2f} GiB"


class OutOfMemory(Exception):
    pass


class RefAllocator:
    """Blocks are dicts in per-segment address-sorted lists; free blocks are found by a linear best-fit scan."""

    def __init__(self, capacity):
        self.capacity, self.used, self.next_addr = capacity, 0, BASE
        self.segments = {}        # seg addr -> {"size", "pool", "blocks": [[addr, size, allocated, requested]]}
        self.live = {}            # addr -> seg addr
        self.cur = dict.fromkeys(STAT_NAMES, 0)
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

    def release_all(self):
        """release_cached_blocks() / empty_cache()."""
        self._release_all()

    def snapshot(self):
        """The allocator state in the shape of scenarios.snapshot's answer (after checks.snapshot)."""
        blocks, pool_keys = {}, {"small": [], "large": []}
        for seg_addr, seg in self.segments.items():
            bl = seg["blocks"]
            rows = []
            for j, b in enumerate(bl):
                rows.append((b[0], b[1], b[2], seg["pool"], bl[j - 1][0] if j > 0 else None,
                             bl[j + 1][0] if j + 1 < len(bl) else None))
                if not b[2]:
                    pool_keys[seg["pool"]].append((b[1], b[0]))
            blocks[seg_addr] = sorted(rows)
        return {"device": sorted((a, s["size"]) for a, s in self.segments.items()),
                "blocks": blocks, "active": sorted(self.live),
                "pool_keys": {k: sorted(v) for k, v in pool_keys.items()},
                "stats": {k: (self.cur[k], self.peak[k]) for k in STAT_NAMES}}

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


def run(events, capacity, stats=False, snapshots=False):
    """The reference run of a trace, in the shape of scenarios.run_trace's answer.

    Events: ["alloc", id, nbytes]; ["free", id, _] (skipped when that alloc failed);
    ["bad_free", id, delta]: free(address of tensor id + delta), or free(delta) when id < 0, which must
    raise ValueError and change nothing; ["empty_cache", 0, 0]: release_cached_blocks()."""
    a = RefAllocator(capacity)
    live, last, addresses, errors, rows, snaps, timeline = {}, {}, [], [], [], [], [(0, 0)]
    for i, (kind, ident, nbytes) in enumerate(events):
        addr = None
        if kind == "alloc":
            try:
                addr = live[ident] = last[ident] = a.malloc(nbytes)
            except OutOfMemory as e:
                size = e.args[0]
                errors.append([i, "OutOfMemoryError", f"Tried to allocate {format_size(segment_size(size))}.",
                               format_size(a.capacity - a.used)])
        elif kind == "free":
            if ident in live:
                addr = live.pop(ident)
                a.free(addr)
        elif kind == "bad_free":
            if ident >= 0 and ident not in last:
                addresses.append(None)      # that allocation failed: nothing to free
                timeline.append(timeline[-1])
                if stats:
                    rows.append(a.stats())
                if snapshots:
                    snaps.append(a.snapshot())
                continue
            target = nbytes if ident < 0 else last[ident] + nbytes
            assert target not in a.live, "a bad_free event must name an address that is not live"
            errors.append([i, "ValueError", None, None])
        elif kind == "empty_cache":
            a.release_all()
        else:
            raise ValueError(kind)
        addresses.append(addr)
        if stats:
            rows.append(a.stats())
        if snapshots:
            snaps.append(a.snapshot())
        timeline.append((a.cur["allocated_bytes"], a.cur["reserved_bytes"]))
    return {"addresses": addresses, "errors": errors, "ooms": [e[0] for e in errors if e[1] == "OutOfMemoryError"],
            "stats": rows, "snapshots": snaps, "final": a.stats(), "snapshot": a.snapshot(), "timeline": timeline}


def load_trace(name):
    return json.loads((TRACES / f"{name}.json").read_text())["events"]


REAL_TRACES = ("mlp_sgd", "convnet_adam", "mlp_wide")


def no_cache_device_mallocs(events):
    return sum(1 for e in events if e[0] == "alloc")


# sizes right at the rounding, pool, segment-size and split boundaries: base +- a few bytes
EDGE_BASES = (512, 1024, 4096, 64 * KiB, 512 * KiB, MiB - 512, MiB, 2 * MiB, 3 * MiB, 9 * MiB, 10 * MiB,
              12 * MiB, 19 * MiB, 20 * MiB, 21 * MiB)
EDGE_DELTAS = (-512, -511, -1, 0, 1, 511, 512)
BOUNDARY = st.builds(lambda b, d: max(0, b + d), st.sampled_from(EDGE_BASES), st.sampled_from(EDGE_DELTAS))
SIZES = st.one_of(st.integers(0, 4096), st.integers(4097, MiB), st.integers(MiB + 1, 12 * MiB),
                  st.integers(12 * MiB, 40 * MiB), BOUNDARY, BOUNDARY)


@st.composite
def traces(draw, min_size=4, max_size=60, sizes=SIZES, bad_frees=False, empty_cache=False):
    """A malloc/free trace: each step allocates, or frees a live tensor chosen by the drawn index (so frees
    come out of order). With bad_frees, some frees are followed by a double free of the same address and some
    allocations by a free of an address inside the block; with empty_cache, some steps release the cache."""
    steps = draw(st.lists(st.tuples(st.integers(0, 5), sizes, st.integers(0, 10 ** 6)),
                          min_size=min_size, max_size=max_size))
    events, live, next_id = [], [], 0
    for op, size, pick in steps:
        if op in (0, 1) and live:
            ident, n = live.pop(pick % len(live))
            events.append(["free", ident, n])
            if bad_frees and op == 1 and pick % 3 == 0:
                events.append(["bad_free", ident, 0])
        elif op == 2 and empty_cache:
            events.append(["empty_cache", 0, 0])
        else:
            events.append(["alloc", next_id, size])
            live.append((next_id, size))
            if bad_frees and op == 3 and round_size(size) >= 1024 and pick % 2 == 0:
                events.append(["bad_free", next_id, 512 * (1 + pick % (round_size(size) // 512 - 1))])
            next_id += 1
    # free a random half of what is left, so traces end with holes and coalescing
    for ident, n in live[::2]:
        events.append(["free", ident, n])
    return events


# IPT-CANARY lab05 oracle.py: hidden grading text, never shown to learners
