# IPT-CANARY lab09 model.py: hidden grading text, never shown to learners
"""P0's model of lab09's collectives: every rank's final values and every message, in numpy.

The lab fixes each algorithm's schedule and reduction order, so a world of W ranks is a pure function
of the ranks' inputs. `simulate(kind, inputs, **args)` runs all W ranks in lockstep and returns a
`World`: `values[r]` (what rank r's call must leave: returned tensor, in-place tensor) and `events[r]`,
rank r's messages in the order it posts them: ("send", peer, array) or ("recv", peer, array). The
referee rank replays one rank's events (`script`) and P0 compares what it received with the model.

Numpy computes in the tensors' own dtype (float32 adds are IEEE adds, int64 products wrap), so SUM and
PRODUCT are compared bit for bit. Messages of zero elements are never sent (the lab's rule).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OPS = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}


def chunk_bounds(n: int, world: int) -> list[int]:
    base, extra = divmod(n, world)
    return [c * base + min(c, extra) for c in range(world + 1)]


def parent(v: int) -> int | None:
    return None if v == 0 else v & (v - 1)


def children(v: int, world: int) -> list[int]:
    """v + 1, v + 2, v + 4, ... below v's lowest set bit (every power of two for the root), inside the world."""
    out, step = [], 1
    while (v == 0 or step < (v & -v)) and v + step < world:
        out.append(v + step)
        step <<= 1
    return out


@dataclass
class World:
    values: list = field(default_factory=list)   # per rank: dict of named numpy arrays
    events: list = field(default_factory=list)   # per rank: [(kind, peer, array)]


def _new(world: int) -> World:
    return World([{} for _ in range(world)], [[] for _ in range(world)])


def _message(w: World, src: int, dst: int, array: np.ndarray) -> None:
    array = np.ascontiguousarray(array).reshape(-1).copy()
    if array.size:
        w.events[src].append(("send", dst, array))
        w.events[dst].append(("recv", src, array))


def broadcast(inputs: list[np.ndarray], src: int) -> World:
    world = len(inputs)
    w = _new(world)
    data = inputs[src]
    # a rank receives from its parent, then sends to its children farthest first; a child's receive is
    # posted when its parent's send is, so the event order per rank is what matters, not the interleaving
    order = sorted(range(world), key=lambda v: (bin(v).count("1"), v))  # parents before children
    for v in order:
        rank = (v + src) % world
        for child in reversed(children(v, world)):
            _message(w, rank, (child + src) % world, data)
    for r in range(world):
        w.values[r]["tensor"] = data.copy()
    # per-rank order: the receive from the parent comes first, then the sends
    for r in range(world):
        w.events[r].sort(key=lambda e: e[0] != "recv")
    return w


def reduce(inputs: list[np.ndarray], dst: int, op: str) -> World:
    world = len(inputs)
    w = _new(world)
    fn = OPS[op]
    acc = {}
    for v in sorted(range(world), key=lambda v: -v):          # children (larger v) are done first
        rank = (v + dst) % world
        a = inputs[rank].reshape(-1).copy()
        for child in children(v, world):
            a = fn(a, acc[child])
        acc[v] = a
    # events in each rank's own order: receive from each child nearest first, then send to the parent
    for v in range(world):
        rank = (v + dst) % world
        for child in children(v, world):
            if acc[child].size:
                w.events[rank].append(("recv", (child + dst) % world, acc[child].copy()))
        p = parent(v)
        if p is not None and acc[v].size:
            w.events[rank].append(("send", (p + dst) % world, acc[v].copy()))
    for r in range(world):
        w.values[r]["tensor"] = acc[0].reshape(inputs[r].shape) if r == dst else inputs[r].copy()
    return w


def _ring_pass(flats, bounds, w, shift: int, fold=None):
    """W - 1 ring steps on every rank's flat copy: at step s rank r sends chunk (r - shift - s) to r + 1 and
    receives chunk (r - shift - 1 - s) from r - 1, which it folds into its own as fold(received, own) (the
    reduce-scatter: shift 1) or copies (the all-gather: shift 0, fold None)."""
    world = len(flats)
    for step in range(world - 1):
        outgoing = []
        for r in range(world):
            c = (r - shift - step) % world
            outgoing.append(flats[r][bounds[c]:bounds[c + 1]].copy())
        for r in range(world):
            right, left = (r + 1) % world, (r - 1) % world
            if outgoing[r].size:
                w.events[r].append(("send", right, outgoing[r]))
            if outgoing[left].size:
                w.events[r].append(("recv", left, outgoing[left]))
            c = (r - shift - 1 - step) % world
            own = flats[r][bounds[c]:bounds[c + 1]]
            flats[r][bounds[c]:bounds[c + 1]] = outgoing[left] if fold is None else fold(outgoing[left], own)


def reduce_scatter(inputs: list[np.ndarray], op: str) -> World:
    world = len(inputs)
    w = _new(world)
    flats = [x.reshape(-1).copy() for x in inputs]
    bounds = chunk_bounds(flats[0].size, world)
    _ring_pass(flats, bounds, w, 1, OPS[op])
    for r in range(world):
        w.values[r]["result"] = flats[r][bounds[r]:bounds[r + 1]].copy()
        w.values[r]["tensor"] = inputs[r].copy()
    return w


def all_gather(chunks: list[np.ndarray]) -> World:
    world = len(chunks)
    w = _new(world)
    sizes = [c.size for c in chunks]
    bounds = [0] + list(np.cumsum(sizes, dtype=np.int64))
    flats = []
    for r in range(world):
        flat = np.zeros(bounds[-1], dtype=chunks[r].dtype)
        flat[bounds[r]:bounds[r + 1]] = chunks[r].reshape(-1)
        flats.append(flat)
    _ring_pass(flats, [int(b) for b in bounds], w, 0)
    for r in range(world):
        w.values[r]["result"] = flats[r]
    return w


def all_reduce(inputs: list[np.ndarray], op: str) -> World:
    world = len(inputs)
    w = _new(world)
    flats = [x.reshape(-1).copy() for x in inputs]
    bounds = chunk_bounds(flats[0].size, world)
    if world > 1:
        _ring_pass(flats, bounds, w, 1, OPS[op])
        _ring_pass(flats, bounds, w, 0)
    for r in range(world):
        w.values[r]["tensor"] = flats[r].reshape(inputs[r].shape)
    return w


def all_to_all(chunks: list[list[np.ndarray]]) -> World:
    """chunks[i][j]: rank i's message for rank j. Rank j returns [chunks[0][j], ..., chunks[W-1][j]]."""
    world = len(chunks)
    w = _new(world)
    for r in range(world):
        for step in range(1, world):
            to, frm = (r + step) % world, (r - step) % world
            for src, dst in ((r, to), (frm, r)):
                kind, peer = ("send", dst) if src == r else ("recv", src)
                out = chunks[src][dst]
                for message in (np.array([out.ndim], dtype=np.int64), np.array(out.shape, dtype=np.int64),
                                np.ascontiguousarray(out).reshape(-1)):
                    if message.size:
                        w.events[r].append((kind, peer, message.copy()))
        w.values[r]["results"] = [chunks[i][r].copy() for i in range(world)]
    return w


def simulate(kind: str, inputs, **args) -> World:
    return {"broadcast": broadcast, "reduce": reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather,
            "all_reduce": all_reduce, "all_to_all": all_to_all}[kind](inputs, **args)


def same(got: np.ndarray, want: np.ndarray, op: str | None = None) -> bool:
    """Equal as the lab compares: bit for bit (NaN payloads aside) for data and SUM/PRODUCT; MIN/MAX with
    == (the sign of a zero is not specified) and NaN where NaN is due."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    nan = np.isnan(want)
    if not np.array_equal(np.isnan(got), nan):
        return False
    if op in ("min", "max"):
        return bool(np.array_equal(got[~nan], want[~nan]))
    bits = np.dtype(f"u{want.dtype.itemsize}")
    return bool(np.array_equal(got[~nan].view(bits), want[~nan].view(bits)))
