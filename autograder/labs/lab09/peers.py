# IPT-CANARY lab09 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab09 (collectives from send and recv), checked against the reference solution.

Where the lab's rule is gloo's (data movement, integer reductions, MIN/MAX without NaN, float sums up
to reordering), the oracle is `torch.distributed` itself, run on the same forked gloo world next to the
code under test. Where the statement decides on purpose otherwise (bit-for-bit reduction order, NaN
propagation under MIN/MAX, non-dst ranks left unchanged by a reduce, ValueError for AVG and bad roots,
no zero-element messages, the all-to-all header protocol), the oracle is the statement, and the case
name says so. Ideas, per group of cases (no code or prose copied from any of them):

* tree (binomial tree, broadcast, reduce): PyTorch's test/distributed/test_c10d_gloo.py
  (ProcessGroupGlooTest: test_broadcast_basics, test_broadcast_stress, test_empty_tensors,
  test_reduce_basics, test_reduce_stress and its simple_reduce_tests table: SUM/PRODUCT/MIN/MAX of
  rank + 1, every rank the root once; test_gather_noncontiguous_input for non-contiguous tensors) and
  torch/testing/_internal/distributed/distributed_test.py (test_broadcast / test_reduce_sum /
  _product / _min / _max and their _group / _full_group variants built with dist.new_group, the
  per-dtype broadcast helper on cubes of side src + 1); the binomial-tree structure checks come from
  the MPI / gloo binomial broadcast schedule; NaN, non-dst and protocol cases from the lab statement.
* ring (chunk_bounds, reduce-scatter, all-gather, all-reduce): test_c10d_gloo.py (test_allreduce_basics,
  including its float16 numerical check, test_allreduce_stress, test_allgather_basics,
  test_allgather_noncontiguous_input, test_allgather_stress, test_reduce_scatter (variable sizes),
  test_reduce_scatter_tensor) and distributed_test.py (test_all_reduce_* with dtypes, groups and full
  groups, test_all_reduce_sum_twice, test_all_gather and its uneven "all_gather_v" variant,
  test_reduce_scatter); chunk sizes checked against torch.tensor_split; ring order, hand-written
  protocol peers and message-level checks from the lab statement.
* all_to_all: distributed_test.py (test_all_to_all with in_splits = i + 1 per destination and its
  per-dtype loop, test_all_to_all_single_equal_split / _unequal_split, test_all_to_all_empty, the
  _group / _full_group variants), test_c10d_gloo.py (test_send_recv_all_to_all); the header protocol
  (ndim, shape, values; empty messages skipped) and its hand-written peer from the lab statement.
* alpha_beta: the lab statement's relative-error least-squares problem, solved independently with
  numpy.linalg.lstsq (objective compared to within 1e-9), plus invariances (order, scale) and the
  ValueError list of the statement.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from autograder.engine.peer_suite import Suite

SUITE = Suite("lab09")
case, CASES, reference = SUITE.case, SUITE.cases, SUITE.reference

TIMEOUT = 15.0   # seconds per world: the reference needs well under one; a hanging variant costs this much

_OPS = {"SUM": ReduceOp.SUM, "PRODUCT": ReduceOp.PRODUCT, "MIN": ReduceOp.MIN, "MAX": ReduceOp.MAX}
_FNS = {"SUM": torch.add, "PRODUCT": torch.mul, "MIN": torch.minimum, "MAX": torch.maximum}
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INTS = (torch.int8, torch.uint8, torch.int32, torch.int64)
_EPS = {torch.float32: 2.0 ** -23, torch.float64: 2.0 ** -52, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}


# ----------------------------------------------------------------------------------------------------
# plumbing: worlds, packing results, comparing
# ----------------------------------------------------------------------------------------------------
def _world(fn, world):
    """Run fn() on `world` forked gloo ranks; each rank returns _pack(dict); returns a list of dicts."""
    try:
        from labkit.world import run_world
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "labs"))
        from labkit.world import run_world
    results = run_world(fn, world, timeout=TIMEOUT)
    return [{str(k): v for k, v in zip(items[0::2], items[1::2], strict=True)} for items in results]


def _pack(d):
    out = []
    for key, value in d.items():
        out.append(np.array(str(key)))
        if isinstance(value, torch.Tensor):
            value = value.detach()
            value = (value.float() if value.dtype == torch.bfloat16 else value).clone()
        elif isinstance(value, str):
            value = np.array(value)
        elif isinstance(value, bool):
            value = int(value)
        out.append(value)
    return out


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.contiguous().numpy().copy()
    return np.asarray(x)


def _fail(message):
    raise AssertionError(message)


def _elem_equal(got, want, how):
    g, w = got.reshape(-1), want.reshape(-1)
    if how == "bits":
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[g.dtype.itemsize]
        return g.view(width) == w.view(width)
    if g.dtype.kind == "f":
        return (g == w) | (np.isnan(g) & np.isnan(w))
    return g == w


def _same(got, want, what, how="bits"):
    """got (numpy) equals want (tensor or array): same shape and dtype, then bit for bit ("bits") or by
    value with NaN == NaN and -0.0 == +0.0 ("value")."""
    got, want = np.asarray(got), _np(want)
    if got.shape != want.shape:
        _fail(f"{what}: shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        _fail(f"{what}: dtype {got.dtype}, expected {want.dtype}")
    eq = _elem_equal(np.ascontiguousarray(got), np.ascontiguousarray(want), how)
    if not eq.all():
        bad = np.flatnonzero(~eq)
        shown = ", ".join(f"[{i}] got {got.reshape(-1)[i]!r} expected {want.reshape(-1)[i]!r}" for i in bad[:3])
        kind = "in some bit" if how == "bits" else "in value"
        _fail(f"{what}: {bad.size} of {eq.size} elements differ {kind}: {shown}")


def _near_sum(got, theirs, inputs, what):
    """A float sum agrees with another order's within the summation bound 2 W eps sum|x_i|."""
    got, theirs = np.asarray(got, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    mags = sum(np.abs(_np(x).astype(np.float64).reshape(got.shape)) for x in inputs)
    eps = _EPS[inputs[0].dtype]
    bad = np.abs(got - theirs) > 2 * len(inputs) * eps * mags + 1e-300
    if bad.any():
        i = np.flatnonzero(bad.reshape(-1))[0]
        _fail(f"{what}: {bad.sum()} sums differ from torch.distributed's by more than reordering allows; "
              f"[{i}] got {got.reshape(-1)[i]!r}, torch.distributed {theirs.reshape(-1)[i]!r}")


def _no_problems(results, what=""):
    for r, got in enumerate(results):
        text = str(got.get("problems", ""))
        if text:
            _fail(f"{what}rank {r}: {text}")


def _rand(rng, shape, dtype, spread=4):
    """Random values of a dtype: floats over several decades (both signs), integers over their range."""
    if dtype.is_floating_point:
        spread = 2 if dtype == torch.float16 else spread
        a = rng.standard_normal(shape) * 10.0 ** rng.integers(-spread, spread + 1, shape)
        return torch.from_numpy(np.asarray(a, dtype=np.float64)).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -(2 ** 40)), min(info.max, 2 ** 40)
    return torch.from_numpy(np.asarray(rng.integers(lo, hi, shape, endpoint=True), dtype=np.int64)).to(dtype)


def _near_one(rng, shape, dtype=torch.float64):
    return torch.from_numpy(np.asarray(1.0 + 0.25 * rng.standard_normal(shape))).to(dtype)


# ----------------------------------------------------------------------------------------------------
# oracles written from the statement
# ----------------------------------------------------------------------------------------------------
def _lowbit(v):
    return v & -v


def _kids(v, world):
    """Children of relative rank v: v + 2^k for 2^k below lowbit(v) (any for the root), v + 2^k < world."""
    out, step = [], 1
    while v + step < world and (v == 0 or step < _lowbit(v)):
        out.append(v + step)
        step *= 2
    return out


def _tree_fold(xs, dst, name):
    """dst's result of tree_reduce: each subtree's own value, then its children's results, nearest first."""
    world, fn = len(xs), _FNS[name]

    def subtree(v):
        acc = xs[(v + dst) % world].reshape(-1).clone()
        for c in _kids(v, world):
            acc = fn(acc, subtree(c))
        return acc
    return subtree(0).view(xs[dst].shape)


def _bounds(n, world):
    sizes = [len(p) for p in torch.tensor_split(torch.empty(n), world)]
    return [sum(sizes[:c]) for c in range(world + 1)]


def _ring_fold(xs, name):
    """Flattened ring result: chunk c = ((x[c+1] op x[c+2]) op ...) op x[c], received partial on the left."""
    world, fn = len(xs), _FNS[name]
    flat = [x.reshape(-1) for x in xs]
    b = _bounds(flat[0].numel(), world)
    out = torch.empty_like(flat[0])
    for c in range(world):
        acc = flat[(c + 1) % world][b[c]:b[c + 1]].clone()
        for k in range(2, world + 1):
            acc = fn(acc, flat[(c + k) % world][b[c]:b[c + 1]])
        out[b[c]:b[c + 1]] = acc
    return out


def _fold(xs, name):
    """Order-free reductions (integers, MIN/MAX): plain left fold."""
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = _FNS[name](acc, x)
    return acc


# ----------------------------------------------------------------------------------------------------
# inside a rank: a spy on torch.distributed, and peers written by hand from the statement
# ----------------------------------------------------------------------------------------------------
_P2P = ("send", "recv", "isend", "irecv")
_COLLECTIVES = ("broadcast", "all_reduce", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier",
                "batch_isend_irecv", "new_group", "new_subgroups", "gather", "scatter", "broadcast_object_list",
                "all_gather_object", "gather_object", "scatter_object_list", "send_object_list",
                "recv_object_list", "all_reduce_coalesced", "all_gather_coalesced")


class _Work:
    def __init__(self, work, record):
        self._work, self._record = work, record

    def wait(self, *args, **kwargs):
        result = self._work.wait(*args, **kwargs)
        self._record["waited"] = True
        return result

    def is_completed(self):
        done = self._work.is_completed()
        if done:
            self._record["waited"] = True
        return done

    def __getattr__(self, name):
        return getattr(self._work, name)


class _Spy:
    """Records every message the code under test starts (peer as a global rank, size, dtype, small
    values) and every collective it calls (which still runs, so the world does not hang)."""

    def __enter__(self):
        self.messages, self.collectives = [], []
        self._saved = {n: getattr(dist, n) for n in _P2P + _COLLECTIVES if hasattr(dist, n)}
        for name in _P2P:
            setattr(dist, name, self._p2p(name, self._saved[name]))
        for name in _COLLECTIVES:
            if name in self._saved:
                setattr(dist, name, self._collective(name, self._saved[name]))
        return self

    def __exit__(self, *exc):
        for name, fn in self._saved.items():
            setattr(dist, name, fn)
        return False

    def _collective(self, name, real):
        def call(*args, **kwargs):
            self.collectives.append(name)
            return real(*args, **kwargs)
        return call

    def _p2p(self, name, real):
        sending = name in ("send", "isend")
        key = "dst" if sending else "src"

        def call(tensor, *args, **kwargs):
            group = kwargs.get("group", args[1] if len(args) > 1 else None)
            local = kwargs.get("group_" + key)
            peer = kwargs.get(key, args[0] if args else None)
            if local is not None:
                peer = dist.get_global_rank(group, local) if group is not None else local
            record = {"kind": "send" if sending else "recv", "peer": peer, "numel": tensor.numel(),
                      "dtype": tensor.dtype,
                      "values": tensor.detach().reshape(-1).tolist() if sending and tensor.numel() <= 8 else None}
            self.messages.append(record)
            work = real(tensor, *args, **kwargs)
            if name in ("isend", "irecv"):
                record["waited"] = False
                return _Work(work, record)
            return work
        return call

    def problems(self, what):
        out = []
        if self.collectives:
            out.append(f"{what} called dist.{self.collectives[0]} (only send/recv/isend/irecv are allowed)")
        empty = [m for m in self.messages if m["numel"] == 0]
        if empty:
            out.append(f"{what} started {len(empty)} message(s) of zero elements (they are never sent)")
        pending = [m for m in self.messages if m.get("waited") is False]
        if pending:
            out.append(f"{what} returned with {len(pending)} isend/irecv never waited for")
        return out

    def count(self, kind):
        return sum(1 for m in self.messages if m["kind"] == kind)


def _hand_broadcast(x, src):
    """The statement's tree broadcast, written by hand on one rank (world group, contiguous x)."""
    r, world = dist.get_rank(), dist.get_world_size()
    if x.numel() == 0:
        return x
    flat, v = x.view(-1), (r - src) % world
    if v:
        dist.recv(flat, (v - _lowbit(v) + src) % world)
    works = [dist.isend(flat, (c + src) % world) for c in reversed(_kids(v, world))]
    for w in works:
        w.wait()
    return x


def _hand_reduce(x, dst, name):
    r, world = dist.get_rank(), dist.get_world_size()
    if x.numel() == 0:
        return x
    v = (r - dst) % world
    acc, buf = x.reshape(-1).clone(), torch.empty(x.numel(), dtype=x.dtype)
    for c in _kids(v, world):
        dist.recv(buf, (c + dst) % world)
        acc = _FNS[name](acc, buf)
    if v:
        dist.isend(acc, (v - _lowbit(v) + dst) % world).wait()
    else:
        x.copy_(acc.view(x.shape))
    return x


def _hand_ring(flat, bounds, name, reduce_scatter=True, all_gather=True):
    """The statement's ring on a flat tensor, one blocking step at a time."""
    r, world = dist.get_rank(), dist.get_world_size()
    right, left = (r + 1) % world, (r - 1) % world

    def step(out_c, in_c, combine):
        out = flat[bounds[out_c]:bounds[out_c + 1]].clone()
        work = dist.isend(out, right) if out.numel() else None
        buf = torch.empty(bounds[in_c + 1] - bounds[in_c], dtype=flat.dtype)
        if buf.numel():
            dist.recv(buf, left)
        own = flat[bounds[in_c]:bounds[in_c + 1]]
        own.copy_(_FNS[name](buf, own) if combine else buf)
        if work is not None:
            work.wait()
    if reduce_scatter:
        for s in range(world - 1):
            step((r - 1 - s) % world, (r - 2 - s) % world, True)
    if all_gather:
        for s in range(world - 1):
            step((r - s) % world, (r - 1 - s) % world, False)
    return flat


def _hand_all_to_all(chunks):
    r, world = dist.get_rank(), dist.get_world_size()
    result = [None] * world
    result[r] = chunks[r].clone()
    for s in range(1, world):
        to, frm = (r + s) % world, (r - s) % world
        out = chunks[to].contiguous()
        works = [dist.isend(torch.tensor([out.dim()], dtype=torch.int64), to)]
        if out.dim():
            works.append(dist.isend(torch.tensor(list(out.shape), dtype=torch.int64), to))
        if out.numel():
            works.append(dist.isend(out.view(-1), to))
        ndim = torch.empty(1, dtype=torch.int64)
        dist.recv(ndim, frm)
        shape = torch.empty(int(ndim), dtype=torch.int64)
        if shape.numel():
            dist.recv(shape, frm)
        incoming = torch.empty(tuple(shape.tolist()), dtype=chunks[r].dtype)
        if incoming.numel():
            dist.recv(incoming.view(-1), frm)
        result[frm] = incoming
        for w in works:
            w.wait()
    return result


def _raises_value_error(call):
    try:
        call()
    except ValueError:
        return 1
    except Exception:  # noqa: BLE001 - another exception type is a disagreement
        return 2
    return 0


# ====================================================================================================
# tree
# ====================================================================================================
@case("tree", "binomial_parent clears the lowest set bit and is None at the root (statement), v = 0..4096")
def _(ref):
    if ref.binomial_parent(0) is not None:
        _fail(f"binomial_parent(0) should be None, got {ref.binomial_parent(0)!r}")
    for v in range(1, 4097):
        got = ref.binomial_parent(v)
        if got != v - _lowbit(v):
            _fail(f"binomial_parent({v}) should be {v - _lowbit(v)}, got {got!r}")


@case("tree", "binomial_children: v + 2^k below lowbit(v) and below W, nearest first (statement), W = 1..40")
def _(ref):
    for world in range(1, 41):
        for v in range(world):
            got = ref.binomial_children(v, world)
            if list(got) != _kids(v, world):
                _fail(f"binomial_children({v}, {world}) should be {_kids(v, world)}, got {got!r}")


@case("tree", "binomial tree spans every W = 1..70: each rank has one parent, subtrees are the blocks "
              "[v, v + lowbit(v)) (binomial broadcast schedule)")
def _(ref):
    for world in range(1, 71):
        seen = {}
        for v in range(world):
            for c in ref.binomial_children(v, world):
                if c in seen:
                    _fail(f"W={world}: rank {c} is a child of both {seen[c]} and {v}")
                seen[c] = v
        if sorted(seen) != list(range(1, world)):
            _fail(f"W={world}: the children lists cover {sorted(seen)}, expected 1..{world - 1}")
        for c, p in seen.items():
            if ref.binomial_parent(c) != p:
                _fail(f"W={world}: {c} is listed under {p} but binomial_parent({c}) = {ref.binomial_parent(c)!r}")

        def descendants(v):
            out = {v}
            for c in ref.binomial_children(v, world):
                out |= descendants(c)
            return out
        for v in range(world):
            want = set(range(v, min(world, v + _lowbit(v)) if v else world))
            if descendants(v) != want:
                _fail(f"W={world}: the subtree of {v} is {sorted(descendants(v))}, expected {sorted(want)}")


@case("tree", "tree_broadcast from every root at W = 2 and 4 of [rank] (int64) and two float32 inputs "
              "(gloo broadcast basics; vs dist.broadcast)")
def _(ref):
    for world in (2, 4):
        def rank():
            r, out = dist.get_rank(), {}
            for root in range(world):
                x, y = torch.tensor([r]), torch.tensor([r])
                ret = ref.tree_broadcast(x, root)
                dist.broadcast(y, root)
                out[f"i{root}"], out[f"d{root}"], out[f"s{root}"] = x, y, ret is x
                for j in range(2):
                    pair = [torch.tensor([r * 2.0]), torch.tensor([r * 2.0 + 1])]
                    ref.tree_broadcast(pair[j], root)
                    out[f"f{root}{j}"] = pair[j]
            return _pack(out)
        for r, got in enumerate(_world(rank, world)):
            for root in range(world):
                what = f"W={world}, rank {r}, root {root}"
                _same(got[f"i{root}"], got[f"d{root}"], f"{what}: tree_broadcast vs dist.broadcast")
                _same(got[f"i{root}"], torch.tensor([root]), f"{what}: tree_broadcast of [rank]")
                if int(got[f"s{root}"]) != 1:
                    _fail(f"{what}: tree_broadcast should return the tensor it was given")
                for j in range(2):
                    _same(got[f"f{root}{j}"], torch.tensor([root * 2.0 + j]), f"{what}: float input {j}")


@case("tree", "tree_broadcast of cubes of side src + 1 in eight dtypes from every root, W = 3 "
              "(distributed_test broadcast helper; vs dist.broadcast)")
def _(ref):
    world, rng = 3, np.random.default_rng(91)
    dtypes = _FLOATS + _INTS
    data = {(d, s, r): _rand(rng, (s + 1,) * 3, d) for d in dtypes for s in range(world) for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(dtypes):
            for s in range(world):
                x, y = data[d, s, r].clone(), data[d, s, r].clone()
                ref.tree_broadcast(x, s)
                dist.broadcast(y, s)
                out[f"x{i}{s}"], out[f"y{i}{s}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(dtypes):
            for s in range(world):
                what = f"rank {r}, {d}, src {s}"
                _same(got[f"x{i}{s}"], got[f"y{i}{s}"], f"{what}: tree_broadcast vs dist.broadcast")
                _same(got[f"x{i}{s}"], data[d, s, s], f"{what}: tree_broadcast")


@case("tree", "tree_broadcast at W = 5 (not a power of two) from every root, float64 and int32 (vs src's values)")
def _(ref):
    world, rng = 5, np.random.default_rng(92)
    xs = [_rand(rng, (33,), torch.float64) for _ in range(world)]
    ys = [_rand(rng, (3, 5), torch.int32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for s in range(world):
            x, y = xs[r].clone(), ys[r].clone()
            ref.tree_broadcast(x, s)
            ref.tree_broadcast(y, s)
            out[f"x{s}"], out[f"y{s}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for s in range(world):
            _same(got[f"x{s}"], xs[s], f"rank {r}, src {s}: float64 tree_broadcast")
            _same(got[f"y{s}"], ys[s], f"rank {r}, src {s}: int32 tree_broadcast")


@case("tree", "tree_broadcast of 0-d and empty tensors from every root, W = 3 (gloo test_empty_tensors; "
              "vs dist.broadcast for 0-d)")
def _(ref):
    world = 3

    def rank():
        r, out = dist.get_rank(), {}
        for s in range(world):
            x, y = torch.tensor(1.5 * r + 0.25), torch.tensor(1.5 * r + 0.25)
            ret = ref.tree_broadcast(x, s)
            dist.broadcast(y, s)
            out[f"z{s}"], out[f"dz{s}"], out[f"rz{s}"] = x, y, ret is x
            for i, shape in enumerate([(0,), (2, 0, 3)]):
                e = torch.zeros(shape, dtype=torch.int64)
                ret = ref.tree_broadcast(e, s)
                out[f"e{i}{s}"], out[f"re{i}{s}"] = e, ret is e
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for s in range(world):
            _same(got[f"z{s}"], got[f"dz{s}"], f"rank {r}, src {s}: 0-d tree_broadcast vs dist.broadcast")
            _same(got[f"z{s}"], torch.tensor(1.5 * s + 0.25), f"rank {r}, src {s}: 0-d tree_broadcast")
            for i, shape in enumerate([(0,), (2, 0, 3)]):
                _same(got[f"e{i}{s}"], torch.zeros(shape, dtype=torch.int64), f"rank {r}: empty {shape}")
            if not all(int(got[k]) == 1 for k in (f"rz{s}", f"re0{s}", f"re1{s}")):
                _fail(f"rank {r}, src {s}: tree_broadcast should return the tensor it was given")


@case("tree", "tree_broadcast of non-contiguous views updates them in place and nothing else, W = 3 "
              "(gloo noncontiguous-input tests)")
def _(ref):
    world, rng = 3, np.random.default_rng(93)
    bases = [_rand(rng, (4, 6), torch.float32) for _ in range(world)]
    mats = [_rand(rng, (5, 3), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for s in range(world):
            base, mat = bases[r].clone(), mats[r].clone()
            view = base[:, ::2]
            ret = ref.tree_broadcast(view, s)
            ref.tree_broadcast(mat.t(), s)
            col = torch.tensor([10 * r + 1]).expand(2, 2).contiguous()[:, 0]
            ref.tree_broadcast(col, s)
            out[f"b{s}"], out[f"m{s}"], out[f"c{s}"], out[f"r{s}"] = base, mat, col, ret is view
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for s in range(world):
            want = bases[r].clone()
            want[:, ::2] = bases[s][:, ::2]
            _same(got[f"b{s}"], want, f"rank {r}, src {s}: base after tree_broadcast(base[:, ::2])")
            _same(got[f"m{s}"], mats[s], f"rank {r}, src {s}: tree_broadcast(mat.t())")
            _same(got[f"c{s}"], torch.tensor([10 * s + 1, 10 * s + 1]), f"rank {r}, src {s}: strided column")
            if int(got[f"r{s}"]) != 1:
                _fail(f"rank {r}, src {s}: tree_broadcast should return the view it was given")


@case("tree", "tree_broadcast 120 times in a row, root i % W, W = 3 (gloo test_broadcast_stress)")
def _(ref):
    world, count = 3, 120

    def rank():
        r = dist.get_rank()
        outs = []
        for i in range(count):
            x = torch.tensor([i * world + r])
            ref.tree_broadcast(x, i % world)
            outs.append(x)
        return _pack({"all": torch.cat(outs)})
    want = torch.tensor([i * world + i % world for i in range(count)])
    for r, got in enumerate(_world(rank, world)):
        _same(got["all"], want, f"rank {r}: results of 120 broadcasts")


@case("tree", "tree_broadcast on dist.new_group([1, 2]) and on a full new_group of W = 4, every group root "
              "(distributed_test _group / _full_group; vs dist.broadcast(group_src=))")
def _(ref):
    world, rng = 4, np.random.default_rng(94)
    xs = [_rand(rng, (7,), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g12, gall = dist.new_group([1, 2]), dist.new_group(list(range(world)))
        if r in (1, 2):
            for s in range(2):
                a, b = xs[r].clone(), xs[r].clone()
                ref.tree_broadcast(a, s, group=g12)
                dist.broadcast(b, group=g12, group_src=s)
                out[f"g{s}"], out[f"dg{s}"] = a, b
        for s in range(world):
            a = xs[r].clone()
            ref.tree_broadcast(a, s, group=gall)
            out[f"f{s}"] = a
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        if r in (1, 2):
            for s in range(2):
                _same(got[f"g{s}"], got[f"dg{s}"], f"rank {r}, group [1, 2], src {s}: vs dist.broadcast")
                _same(got[f"g{s}"], xs[[1, 2][s]], f"rank {r}, group [1, 2], group src {s}")
        for s in range(world):
            _same(got[f"f{s}"], xs[s], f"rank {r}, full group, src {s}")


@case("tree", "tree_broadcast on new_group([0, 2, 3]) (group ranks differ from global ranks) and on two "
              "disjoint groups [0, 3], [1, 2] at once, W = 4")
def _(ref):
    world, rng = 4, np.random.default_rng(95)
    xs = [_rand(rng, (2, 5), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g = dist.new_group([0, 2, 3])
        ga, gb = dist.new_group([0, 3]), dist.new_group([1, 2])
        x = xs[r].clone()
        if r != 1:
            for s in range(3):
                a = xs[r].clone()
                ref.tree_broadcast(a, s, group=g)
                out[f"g{s}"] = a
        mine = ga if r in (0, 3) else gb
        ref.tree_broadcast(x, 1, group=mine)
        out["pair"] = x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        if r != 1:
            for s in range(3):
                _same(got[f"g{s}"], xs[[0, 2, 3][s]], f"rank {r}, group [0, 2, 3], group src {s} (global {[0, 2, 3][s]})")
        src = 3 if r in (0, 3) else 2
        _same(got["pair"], xs[src], f"rank {r}, disjoint groups broadcasting at once from group rank 1")


@case("tree", "tree_broadcast / tree_reduce at W = 1: nothing changes, the tensor is returned, "
              "bad roots and AVG still raise ValueError (statement)")
def _(ref):
    def rank():
        out = {}
        x = torch.arange(6.0).reshape(2, 3)
        out["b"], out["rb"] = x, ref.tree_broadcast(x, 0) is x
        for name, op in _OPS.items():
            y = torch.arange(6).reshape(3, 2) - 2
            out[f"r{name}"], out[f"rr{name}"] = y, ref.tree_reduce(y, 0, op) is y
        z = torch.tensor(3.5)
        ref.tree_reduce(z, 0)
        out["z"] = z
        out["e1"] = _raises_value_error(lambda: ref.tree_broadcast(x, 1))
        out["e2"] = _raises_value_error(lambda: ref.tree_reduce(x, 0, ReduceOp.AVG))
        out["e3"] = _raises_value_error(lambda: ref.tree_reduce(x, -1))
        return _pack(out)
    got = _world(rank, 1)[0]
    _same(got["b"], torch.arange(6.0).reshape(2, 3), "tree_broadcast at W=1")
    for name in _OPS:
        _same(got[f"r{name}"], torch.arange(6).reshape(3, 2) - 2, f"tree_reduce {name} at W=1")
    _same(got["z"], torch.tensor(3.5), "0-d tree_reduce at W=1")
    if not all(int(got[k]) == 1 for k in ["rb"] + [f"rr{n}" for n in _OPS]):
        _fail("at W=1 the tree collectives should return the tensor they were given")
    for k, what in (("e1", "tree_broadcast(x, src=1)"), ("e2", "tree_reduce(op=AVG)"), ("e3", "tree_reduce(dst=-1)")):
        if int(got[k]) != 1:
            _fail(f"at W=1, {what} should raise ValueError ({'raised another exception' if int(got[k]) == 2 else 'did not raise'})")


@case("tree", "tree_broadcast of 2^18 float32 from root 3 and a (1000, 3) int64 from root 1, W = 4 "
              "(vs dist.broadcast)")
def _(ref):
    world, rng = 4, np.random.default_rng(96)
    xs = [_rand(rng, (2 ** 18,), torch.float32) for _ in range(world)]
    ys = [_rand(rng, (1000, 3), torch.int64) for _ in range(world)]

    def rank():
        r = dist.get_rank()
        x, y, z = xs[r].clone(), ys[r].clone(), ys[r].clone()
        ref.tree_broadcast(x, 3)
        ref.tree_broadcast(y, 1)
        dist.broadcast(z, 1)
        return _pack({"x": x.eq(xs[3]).all(), "y": y, "z": z})
    for r, got in enumerate(_world(rank, world)):
        if not bool(got["x"]):
            _fail(f"rank {r}: the 2^18-element tree_broadcast from root 3 does not reproduce root 3's tensor")
        _same(got["y"], got["z"], f"rank {r}: (1000, 3) int64 tree_broadcast vs dist.broadcast")
        _same(got["y"], ys[1], f"rank {r}: (1000, 3) int64 tree_broadcast from root 1")


@case("tree", "tree_reduce of rank + 1 with SUM / PRODUCT / MIN / MAX at every root, W = 3 and 4 "
              "(gloo simple_reduce_tests; vs dist.reduce at dst)")
def _(ref):
    for world in (3, 4):
        def rank():
            r, out = dist.get_rank(), {}
            for name, op in _OPS.items():
                for root in range(world):
                    x, y = torch.tensor([r + 1.0]), torch.tensor([r + 1.0])
                    ret = ref.tree_reduce(x, root, op)
                    dist.reduce(y, root, op)
                    out[f"x{name}{root}"], out[f"y{name}{root}"], out[f"r{name}{root}"] = x, y, ret is x
            return _pack(out)
        expected = {"SUM": world * (world + 1) / 2, "PRODUCT": float(math.factorial(world)), "MIN": 1.0,
                    "MAX": float(world)}
        for r, got in enumerate(_world(rank, world)):
            for name in _OPS:
                for root in range(world):
                    if int(got[f"r{name}{root}"]) != 1:
                        _fail(f"W={world}: tree_reduce should return the tensor it was given")
                    if r == root:
                        what = f"W={world}, dst {root}, {name} of rank + 1"
                        _same(got[f"x{name}{root}"], got[f"y{name}{root}"], f"{what}: vs dist.reduce")
                        _same(got[f"x{name}{root}"], torch.tensor([expected[name]]), what)


@case("tree", "tree_reduce leaves every non-dst tensor unchanged, W = 5, every dst, SUM float32 and MAX int64 "
              "(statement; gloo's dist.reduce leaves partial results there)")
def _(ref):
    world, rng = 5, np.random.default_rng(97)
    xs = [_rand(rng, (9,), torch.float32) for _ in range(world)]
    ys = [_rand(rng, (2, 3), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in range(world):
            x, y = xs[r].clone(), ys[r].clone()
            ref.tree_reduce(x, d)
            ref.tree_reduce(y, d, ReduceOp.MAX)
            out[f"x{d}"], out[f"y{d}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for d in range(world):
            if r != d:
                _same(got[f"x{d}"], xs[r], f"rank {r} (not dst {d}): float32 SUM tree_reduce changed its tensor")
                _same(got[f"y{d}"], ys[r], f"rank {r} (not dst {d}): int64 MAX tree_reduce changed its tensor")
            else:
                _same(got[f"x{d}"], _tree_fold(xs, d, "SUM"), f"dst {d}: SUM in the tree's order")
                _same(got[f"y{d}"], _fold(ys, "MAX"), f"dst {d}: MAX")


@case("tree", "tree_reduce float32 SUM at W = 4, every dst: bit for bit in the tree's order (statement) "
              "and within reordering tolerance of dist.reduce (gloo)")
def _(ref):
    world, rng = 4, np.random.default_rng(98)
    xs = [_rand(rng, (200,), torch.float32, spread=6) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in range(world):
            x, y = xs[r].clone(), xs[r].clone()
            ref.tree_reduce(x, d)
            dist.reduce(y, d)
            out[f"x{d}"], out[f"y{d}"] = x, y
        return _pack(out)
    results = _world(rank, world)
    for d in range(world):
        got = results[d]
        _same(got[f"x{d}"], _tree_fold(xs, d, "SUM"), f"dst {d}: SUM not in the tree's order "
              f"((x_d + x_d+1) + (x_d+2 + x_d+3), ranks relative to dst)")
        _near_sum(got[f"x{d}"], got[f"y{d}"], xs, f"dst {d}: tree_reduce SUM vs dist.reduce")


@case("tree", "tree_reduce bit for bit in the tree's order at W = 3 and 5, every dst: float64 SUM and "
              "float32 PRODUCT (statement)")
def _(ref):
    rng = np.random.default_rng(99)
    for world in (3, 5):
        xs = [_rand(rng, (64,), torch.float64, spread=8) for _ in range(world)]
        ps = [_near_one(rng, (64,), torch.float32) for _ in range(world)]

        def rank():
            r, out = dist.get_rank(), {}
            for d in range(world):
                x, p = xs[r].clone(), ps[r].clone()
                ref.tree_reduce(x, d, ReduceOp.SUM)
                ref.tree_reduce(p, d, ReduceOp.PRODUCT)
                out[f"x{d}"], out[f"p{d}"] = x, p
            return _pack(out)
        results = _world(rank, world)
        for d in range(world):
            _same(results[d][f"x{d}"], _tree_fold(xs, d, "SUM"), f"W={world}, dst {d}: float64 SUM order")
            _same(results[d][f"p{d}"], _tree_fold(ps, d, "PRODUCT"), f"W={world}, dst {d}: float32 PRODUCT order")


@case("tree", "tree_reduce of int8 / uint8 / int32 / int64 with SUM / PRODUCT / MIN / MAX at every root, "
              "W = 3, overflow wraps (vs dist.reduce)")
def _(ref):
    world, rng = 3, np.random.default_rng(100)
    data = {(d, r): _rand(rng, (11,), d) for d in _INTS for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(_INTS):
            for name, op in _OPS.items():
                for root in range(world):
                    x, y = data[d, r].clone(), data[d, r].clone()
                    ref.tree_reduce(x, root, op)
                    dist.reduce(y, root, op)
                    if r == root:
                        out[f"x{i}{name}"], out[f"y{i}{name}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(_INTS):
            for name in _OPS:
                what = f"dst {r}, {d} {name}"
                _same(got[f"x{i}{name}"], got[f"y{i}{name}"], f"{what}: tree_reduce vs dist.reduce")
                _same(got[f"x{i}{name}"], _fold([data[d, k] for k in range(world)], name), what)


@case("tree", "tree_reduce MIN / MAX of float32 and float64 with +-inf and +-0.0 (no NaN) at every root, "
              "W = 4 (vs dist.reduce)")
def _(ref):
    world, rng = 4, np.random.default_rng(101)
    specials = np.array([np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e30])
    data = {}
    for d in (torch.float32, torch.float64):
        for r in range(world):
            x = _rand(rng, (40,), d, spread=8)
            idx = rng.choice(40, 12, replace=False)
            x[idx] = torch.from_numpy(rng.choice(specials, 12)).to(d)
            data[d, r] = x

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate((torch.float32, torch.float64)):
            for name in ("MIN", "MAX"):
                for root in range(world):
                    x, y = data[d, r].clone(), data[d, r].clone()
                    ref.tree_reduce(x, root, _OPS[name])
                    dist.reduce(y, root, _OPS[name])
                    if r == root:
                        out[f"x{i}{name}"], out[f"y{i}{name}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate((torch.float32, torch.float64)):
            for name in ("MIN", "MAX"):
                _same(got[f"x{i}{name}"], got[f"y{i}{name}"], f"dst {r}, {d} {name}: vs dist.reduce", how="value")


@case("tree", "tree_reduce MAX / MIN propagate NaN like torch.maximum / minimum at every root, float32 and "
              "float16, W = 4 (statement; gloo drops NaN)")
def _(ref):
    world, rng = 4, np.random.default_rng(102)
    data = {}
    for d in (torch.float32, torch.float16):
        for r in range(world):
            x = _rand(rng, (16,), d)
            if r != 2:                      # rank 2 holds no NaN
                x[[r, 4 + r, 8 + (r % 2), 15]] = float("nan")
            data[d, r] = x

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate((torch.float32, torch.float16)):
            for name in ("MIN", "MAX"):
                for root in range(world):
                    x = data[d, r].clone()
                    ref.tree_reduce(x, root, _OPS[name])
                    if r == root:
                        out[f"x{i}{name}"] = x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate((torch.float32, torch.float16)):
            for name in ("MIN", "MAX"):
                want = _fold([data[d, k] for k in range(world)], name)
                _same(got[f"x{i}{name}"], want, f"dst {r}, {d} {name} with NaN inputs", how="value")


@case("tree", "tree_broadcast / tree_reduce with a root outside 0..W-1 or an op other than SUM / PRODUCT / "
              "MIN / MAX (AVG, BAND, BOR, BXOR) raise ValueError on every rank before sending anything, "
              "and the world still works after (statement)")
def _(ref):
    world = 3

    def rank():
        r, out = dist.get_rank(), {}
        x = torch.arange(5.0) + r
        bad = {"bcast -1": lambda: ref.tree_broadcast(x, -1), "bcast W": lambda: ref.tree_broadcast(x, world),
               "bcast W+5": lambda: ref.tree_broadcast(x, world + 5), "reduce -1": lambda: ref.tree_reduce(x, -1),
               "reduce W": lambda: ref.tree_reduce(x, world)}
        for op in ("AVG", "BAND", "BOR", "BXOR"):
            bad[f"reduce {op}"] = (lambda o: lambda: ref.tree_reduce(x, 0, getattr(ReduceOp, o)))(op)
        problems = []
        with _Spy() as spy:
            for what, call in bad.items():
                flag = _raises_value_error(call)
                if flag != 1:
                    problems.append(f"{what}: {'raised another exception' if flag == 2 else 'did not raise'} (ValueError expected)")
        if spy.messages or spy.collectives:
            problems.append(f"the failing calls started {len(spy.messages)} message(s) / {len(spy.collectives)} collective(s)")
        if not torch.equal(x, torch.arange(5.0) + r):
            problems.append("a failing call changed the tensor")
        y = torch.arange(5.0) + r
        ref.tree_reduce(y, 1)
        z = torch.tensor([r])
        ref.tree_broadcast(z, 2)
        out["problems"], out["y"], out["z"] = "; ".join(problems), y, z
        return _pack(out)
    results = _world(rank, world)
    _no_problems(results)
    _same(results[1]["y"], torch.arange(5.0) * 3 + 3, "tree_reduce to dst 1 after the failing calls")
    for r in range(world):
        _same(results[r]["z"], torch.tensor([2]), f"rank {r}: tree_broadcast from 2 after the failing calls")


@case("tree", "tree_reduce of 0-d and empty tensors with SUM and MAX at every root, float64 and int32, W = 3 "
              "(gloo empty-tensor test; vs dist.reduce for 0-d)")
def _(ref):
    world = 3
    shapes = [(), (0,), (3, 0)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in (torch.float64, torch.int32):
            for k, shape in enumerate(shapes):
                for name in ("SUM", "MAX"):
                    for root in range(world):
                        x = torch.full(shape, 2 * r + 1, dtype=d)
                        ret = ref.tree_reduce(x, root, _OPS[name])
                        out[f"{d}{k}{name}{root}"], out[f"r{d}{k}{name}{root}"] = x, ret is x
                        if not shape:
                            y = torch.full(shape, 2 * r + 1, dtype=d)
                            dist.reduce(y, root, _OPS[name])
                            out[f"d{d}{k}{name}{root}"] = y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for d in (torch.float64, torch.int32):
            for k, shape in enumerate(shapes):
                for name in ("SUM", "MAX"):
                    for root in range(world):
                        key = f"{d}{k}{name}{root}"
                        if int(got["r" + key]) != 1:
                            _fail("tree_reduce should return the tensor it was given")
                        mine = torch.full(shape, 2 * r + 1, dtype=d)
                        want = _fold([torch.full(shape, 2 * q + 1, dtype=d) for q in range(world)], name) if r == root else mine
                        _same(got[key], want, f"rank {r}, dst {root}, {d} {name} of shape {shape}")
                        if not shape and r == root:
                            _same(got[key], got["d" + key], f"dst {root}, 0-d {d} {name}: vs dist.reduce")


@case("tree", "tree_reduce into non-contiguous views (strided slice, transpose) at every dst: dst's view "
              "gets the tree-order sum in place, the rest of its buffer and every other rank stay unchanged, W = 3")
def _(ref):
    world, rng = 3, np.random.default_rng(103)
    bases = [_rand(rng, (6, 5), torch.float64) for _ in range(world)]
    mats = [_rand(rng, (4, 3), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in range(world):
            base, mat = bases[r].clone(), mats[r].clone()
            view = base[::2, 1:]
            ret = ref.tree_reduce(view, d)
            ref.tree_reduce(mat.t(), d, ReduceOp.PRODUCT)
            out[f"b{d}"], out[f"m{d}"], out[f"r{d}"] = base, mat, ret is view
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for d in range(world):
            if int(got[f"r{d}"]) != 1:
                _fail("tree_reduce should return the view it was given")
            want, wmat = bases[r].clone(), mats[r].clone()
            if r == d:
                want[::2, 1:] = _tree_fold([b[::2, 1:] for b in bases], d, "SUM")
                wmat.t().copy_(_tree_fold([m.t() for m in mats], d, "PRODUCT"))
            _same(got[f"b{d}"], want, f"rank {r}, dst {d}: buffer after tree_reduce(base[::2, 1:])")
            _same(got[f"m{d}"], wmat, f"rank {r}, dst {d}: buffer after tree_reduce(mat.t(), PRODUCT)")


@case("tree", "tree_reduce on new_group([1, 2, 3]), a full new_group, and disjoint groups [0, 3] / [1, 2] "
              "at once, W = 4: tree order over group ranks, int64 vs dist.reduce(group_dst=)")
def _(ref):
    world, rng = 4, np.random.default_rng(104)
    xs = [_rand(rng, (30,), torch.float32) for _ in range(world)]
    ns = [_rand(rng, (5,), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g, gall = dist.new_group([1, 2, 3]), dist.new_group(list(range(world)))
        ga, gb = dist.new_group([0, 3]), dist.new_group([1, 2])
        if r:
            for d in range(3):
                x, n, m = xs[r].clone(), ns[r].clone(), ns[r].clone()
                ref.tree_reduce(x, d, group=g)
                ref.tree_reduce(n, d, group=g)
                dist.reduce(m, group=g, group_dst=d)
                out[f"g{d}"], out[f"n{d}"], out[f"m{d}"] = x, n, m
        for d in range(world):
            x = xs[r].clone()
            ref.tree_reduce(x, d, group=gall)
            out[f"f{d}"] = x
        x = xs[r].clone()
        ref.tree_reduce(x, 0, ReduceOp.MAX, group=ga if r in (0, 3) else gb)
        out["pair"] = x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        if r:
            for d in range(3):
                members = [xs[1], xs[2], xs[3]]
                if r - 1 == d:
                    _same(got[f"g{d}"], _tree_fold(members, d, "SUM"), f"group [1, 2, 3], group dst {d}: SUM order")
                    _same(got[f"n{d}"], got[f"m{d}"], f"group [1, 2, 3], group dst {d}: int64 vs dist.reduce")
                else:
                    _same(got[f"g{d}"], xs[r], f"rank {r}, group dst {d}: a non-dst member changed")
        for d in range(world):
            want = _tree_fold(xs, d, "SUM") if r == d else xs[r]
            _same(got[f"f{d}"], want, f"rank {r}, full group, dst {d}")
        pair = [0, 3] if r in (0, 3) else [1, 2]
        want = torch.maximum(xs[pair[0]], xs[pair[1]]) if r == pair[0] else xs[r]
        _same(got["pair"], want, f"rank {r}: MAX on disjoint groups at once, group dst 0", how="value")


@case("tree", "tree_reduce 90 times in a row, dst i % W, W = 3 (gloo test_reduce_stress)")
def _(ref):
    world, count = 3, 90

    def rank():
        r, outs = dist.get_rank(), []
        for i in range(count):
            x = torch.tensor([i + r])
            ref.tree_reduce(x, i % world)
            outs.append(x)
        return _pack({"all": torch.cat(outs)})
    for r, got in enumerate(_world(rank, world)):
        want = torch.tensor([i * world + world * (world - 1) // 2 if i % world == r else i + r for i in range(count)])
        _same(got["all"], want, f"rank {r}: results of 90 reduces (dst's sum, others unchanged)")


@case("tree", "tree_reduce with rank 2 speaking the statement's tree protocol by hand, W = 4, every dst: "
              "float32 SUM bit for bit and int64 MAX (statement)")
def _(ref):
    world, hand, rng = 4, 2, np.random.default_rng(105)
    xs = [_rand(rng, (50,), torch.float32) for _ in range(world)]
    ns = [_rand(rng, (7,), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in range(world):
            x, n = xs[r].clone(), ns[r].clone()
            if r == hand:
                _hand_reduce(x, d, "SUM")
                _hand_reduce(n, d, "MAX")
            else:
                ref.tree_reduce(x, d)
                ref.tree_reduce(n, d, ReduceOp.MAX)
            out[f"x{d}"], out[f"n{d}"] = x, n
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for d in range(world):
            _same(got[f"x{d}"], _tree_fold(xs, d, "SUM") if r == d else xs[r], f"rank {r}, dst {d}: float32 SUM")
            _same(got[f"n{d}"], _fold(ns, "MAX") if r == d else ns[r], f"rank {r}, dst {d}: int64 MAX")


@case("tree", "tree_broadcast with rank 3 speaking the statement's tree protocol by hand, W = 5, every root "
              "(statement)")
def _(ref):
    world, hand, rng = 5, 3, np.random.default_rng(106)
    xs = [_rand(rng, (3, 11), torch.float64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for s in range(world):
            x = xs[r].clone()
            (_hand_broadcast if r == hand else ref.tree_broadcast)(x, s)
            out[f"x{s}"] = x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for s in range(world):
            _same(got[f"x{s}"], xs[s], f"rank {r}, root {s} (rank {hand} by hand)")


@case("tree", "tree collectives at W = 5, every root: only send/recv/isend/irecv, one message from the parent "
              "and one to each child (global ranks), none of zero elements, every isend waited (statement)")
def _(ref):
    world = 5

    def rank():
        r, problems = dist.get_rank(), []
        for root in range(world):
            v = (r - root) % world
            parent = None if v == 0 else (v - _lowbit(v) + root) % world
            kids = sorted((c + root) % world for c in _kids(v, world))
            for which in ("broadcast", "reduce"):
                x = torch.arange(7.0) + r
                with _Spy() as spy:
                    if which == "broadcast":
                        ref.tree_broadcast(x, root)
                    else:
                        ref.tree_reduce(x, root)
                what = f"tree_{which} from root {root}"
                problems += spy.problems(what)
                sends = sorted(m["peer"] for m in spy.messages if m["kind"] == "send")
                recvs = sorted(m["peer"] for m in spy.messages if m["kind"] == "recv")
                want_sends = kids if which == "broadcast" else ([] if parent is None else [parent])
                want_recvs = ([] if parent is None else [parent]) if which == "broadcast" else kids
                if sends != want_sends or recvs != want_recvs:
                    problems.append(f"{what}: sent to {sends} and received from {recvs}; the binomial tree "
                                    f"sends to {want_sends} and receives from {want_recvs}")
                if any(m["numel"] != 7 or m["dtype"] != torch.float32 for m in spy.messages):
                    problems.append(f"{what}: every message should be the 7 float32 values")
                with _Spy() as spy:
                    e = torch.zeros(0, 4)
                    ref.tree_broadcast(e, root) if which == "broadcast" else ref.tree_reduce(e, root)
                if spy.messages:
                    problems.append(f"tree_{which} of an empty tensor started {len(spy.messages)} message(s)")
        return _pack({"problems": "; ".join(problems[:4])})
    _no_problems(_world(rank, world))


@case("tree", "tree_reduce of float16 and bfloat16 with SUM at every root, W = 4: bit for bit in the tree's "
              "order (statement), MAX equal to dist.reduce")
def _(ref):
    world, rng = 4, np.random.default_rng(107)
    dts = (torch.float16, torch.bfloat16)
    data = {(d, r): _rand(rng, (64,), d, spread=3) for d in dts for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(dts):
            for root in range(world):
                x, m, y = data[d, r].clone(), data[d, r].clone(), data[d, r].clone()
                ref.tree_reduce(x, root)
                ref.tree_reduce(m, root, ReduceOp.MAX)
                dist.reduce(y, root, ReduceOp.MAX)
                if r == root:
                    out[f"x{i}"], out[f"m{i}"], out[f"y{i}"] = x, m, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(dts):
            _same(got[f"x{i}"], _tree_fold([data[d, k] for k in range(world)], r, "SUM"), f"dst {r}, {d} SUM order")
            _same(got[f"m{i}"], got[f"y{i}"], f"dst {r}, {d} MAX vs dist.reduce", how="value")


@case("tree", "tree_reduce float32 SUM and tree_broadcast at W = 6 (two-level subtrees cut at W), every root: "
              "bit for bit in the tree's order (statement)")
def _(ref):
    world, rng = 6, np.random.default_rng(108)
    xs = [_rand(rng, (24,), torch.float32, spread=6) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for d in range(world):
            x, y = xs[r].clone(), xs[r].clone()
            ref.tree_reduce(x, d)
            ref.tree_broadcast(y, d)
            out[f"x{d}"], out[f"y{d}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for d in range(world):
            _same(got[f"x{d}"], _tree_fold(xs, d, "SUM") if r == d else xs[r], f"rank {r}, dst {d}: SUM at W=6")
            _same(got[f"y{d}"], xs[d], f"rank {r}, root {d}: broadcast at W=6")


# ====================================================================================================
# ring
# ====================================================================================================
@case("ring", "chunk_bounds(n, W) cuts like torch.tensor_split for n = 0..60, W = 1..10")
def _(ref):
    for world in range(1, 11):
        for n in range(61):
            got = ref.chunk_bounds(n, world)
            want = _bounds(n, world)
            if [int(b) for b in got] != want or len(got) != world + 1:
                _fail(f"chunk_bounds({n}, {world}) should be {want}, got {got!r}")


@case("ring", "chunk_bounds: the statement's examples, exact for n beyond 2^53, ValueError for n < 0 or W < 1")
def _(ref):
    for (n, world), want in (((10, 4), [0, 3, 6, 8, 10]), ((2, 4), [0, 1, 2, 2, 2]), ((0, 3), [0, 0, 0, 0]),
                             ((7, 1), [0, 7]), ((5, 5), [0, 1, 2, 3, 4, 5])):
        if list(ref.chunk_bounds(n, world)) != want:
            _fail(f"chunk_bounds({n}, {world}) should be {want}, got {ref.chunk_bounds(n, world)!r}")
    n, world = 2 ** 60 + 5, 3
    base, extra = n // world, n % world
    want = [c * base + min(c, extra) for c in range(world + 1)]
    if list(ref.chunk_bounds(n, world)) != want:
        _fail(f"chunk_bounds(2**60 + 5, 3) should be {want} (integer arithmetic), got {ref.chunk_bounds(n, world)!r}")
    for n, world in ((-1, 2), (5, 0), (5, -3), (0, 0)):
        flag = _raises_value_error(lambda: ref.chunk_bounds(n, world))
        if flag != 1:
            _fail(f"chunk_bounds({n}, {world}) should raise ValueError")


@case("ring", "ring_all_reduce of rank + 1 (1 element, and 2W + 1 elements) with SUM / PRODUCT / MIN / MAX, "
              "W = 3 and 4 (gloo allreduce basics; vs dist.all_reduce)")
def _(ref):
    for world in (3, 4):
        def rank():
            r, out = dist.get_rank(), {}
            for name, op in _OPS.items():
                for k, n in enumerate((1, 2 * world + 1)):
                    x, y = torch.full((n,), r + 1.0), torch.full((n,), r + 1.0)
                    ret = ref.ring_all_reduce(x, op)
                    dist.all_reduce(y, op)
                    out[f"x{name}{k}"], out[f"y{name}{k}"], out[f"r{name}{k}"] = x, y, ret is x
            return _pack(out)
        expected = {"SUM": world * (world + 1) / 2, "PRODUCT": float(math.factorial(world)), "MIN": 1.0,
                    "MAX": float(world)}
        for r, got in enumerate(_world(rank, world)):
            for name in _OPS:
                for k, n in enumerate((1, 2 * world + 1)):
                    what = f"W={world}, rank {r}, {name} of rank + 1 over {n} element(s)"
                    _same(got[f"x{name}{k}"], got[f"y{name}{k}"], f"{what}: vs dist.all_reduce")
                    _same(got[f"x{name}{k}"], torch.full((n,), expected[name]), what)
                    if int(got[f"r{name}{k}"]) != 1:
                        _fail(f"{what}: ring_all_reduce should return the tensor it was given")


@case("ring", "ring_all_reduce of int8 / uint8 / int32 / int64 with all four ops over 1, 5, 13, 64 elements, "
              "W = 4, overflow wraps (vs dist.all_reduce)")
def _(ref):
    world, rng = 4, np.random.default_rng(111)
    sizes = (1, 5, 13, 64)
    data = {(d, n, r): _rand(rng, (n,), d) for d in _INTS for n in sizes for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(_INTS):
            for n in sizes:
                for name, op in _OPS.items():
                    x, y = data[d, n, r].clone(), data[d, n, r].clone()
                    ref.ring_all_reduce(x, op)
                    dist.all_reduce(y, op)
                    out[f"x{i}{n}{name}"], out[f"y{i}{n}{name}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(_INTS):
            for n in sizes:
                for name in _OPS:
                    what = f"rank {r}, {d} {name} of {n}"
                    _same(got[f"x{i}{n}{name}"], got[f"y{i}{n}{name}"], f"{what}: vs dist.all_reduce")
                    _same(got[f"x{i}{n}{name}"], _fold([data[d, n, k] for k in range(world)], name), what)


@case("ring", "ring_all_reduce float32 SUM at W = 3 over 1, 2, 3, 4, 7, 100, 1001 elements: bit for bit in "
              "the ring's order (statement), within reordering tolerance of dist.all_reduce (gloo)")
def _(ref):
    world, rng = 3, np.random.default_rng(112)
    sizes = (1, 2, 3, 4, 7, 100, 1001)
    data = {(n, r): _rand(rng, (n,), torch.float32, spread=6) for n in sizes for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for n in sizes:
            x, y = data[n, r].clone(), data[n, r].clone()
            ref.ring_all_reduce(x)
            dist.all_reduce(y)
            out[f"x{n}"], out[f"y{n}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for n in sizes:
            xs = [data[n, k] for k in range(world)]
            _same(got[f"x{n}"], _ring_fold(xs, "SUM"), f"rank {r}, {n} elements: SUM not in the ring's order")
            _near_sum(got[f"x{n}"], got[f"y{n}"], xs, f"rank {r}, {n} elements: vs dist.all_reduce")


@case("ring", "ring_all_reduce bit for bit in the ring's order: float32 SUM at W = 4 (5, 1001, 4099 elements) "
              "and float64 PRODUCT at W = 5 (statement)")
def _(ref):
    rng = np.random.default_rng(113)
    for world, dtype, name, sizes in ((4, torch.float32, "SUM", (5, 1001, 4099)), (5, torch.float64, "PRODUCT", (4, 23, 501))):
        if name == "SUM":
            data = {(n, r): _rand(rng, (n,), dtype, spread=6) for n in sizes for r in range(world)}
        else:
            data = {(n, r): _near_one(rng, (n,), dtype) for n in sizes for r in range(world)}

        def rank():
            r, out = dist.get_rank(), {}
            for n in sizes:
                x = data[n, r].clone()
                ref.ring_all_reduce(x, _OPS[name])
                out[f"x{n}"] = x
            return _pack(out)
        for r, got in enumerate(_world(rank, world)):
            for n in sizes:
                _same(got[f"x{n}"], _ring_fold([data[n, k] for k in range(world)], name),
                      f"W={world}, rank {r}, {dtype} {name} of {n}: not in the ring's order")


@case("ring", "ring_all_reduce SUM of float16 and bfloat16 values in +-65504 / W at W = 4: bit for bit in the "
              "ring's order (statement), close to dist.all_reduce (gloo's float16 allreduce check)")
def _(ref):
    world, rng = 4, np.random.default_rng(114)
    dts = (torch.float16, torch.bfloat16)
    data = {(d, r): torch.from_numpy((rng.random((10, 3)) * 2 - 1) * 65504 / world).to(d) for d in dts for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(dts):
            x, y = data[d, r].clone(), data[d, r].clone()
            ref.ring_all_reduce(x)
            dist.all_reduce(y)
            out[f"x{i}"], out[f"y{i}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(dts):
            xs = [data[d, k] for k in range(world)]
            _same(got[f"x{i}"], _ring_fold(xs, "SUM").view(10, 3), f"rank {r}, {d}: SUM not in the ring's order")
            _near_sum(got[f"x{i}"], got[f"y{i}"], xs, f"rank {r}, {d}: vs dist.all_reduce")


@case("ring", "ring_all_reduce MIN / MAX of float32 and float64 with +-inf and +-0.0 (no NaN), 3 and 17 "
              "elements, W = 4 (vs dist.all_reduce)")
def _(ref):
    world, rng = 4, np.random.default_rng(115)
    specials = np.array([np.inf, -np.inf, 0.0, -0.0, 5e-324, -3e38])
    data = {}
    for d in (torch.float32, torch.float64):
        for n in (3, 17):
            for r in range(world):
                x = _rand(rng, (n,), d, spread=8)
                idx = rng.choice(n, n // 2, replace=False)
                x[idx] = torch.from_numpy(rng.choice(specials, n // 2)).to(d)
                data[d, n, r] = x

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate((torch.float32, torch.float64)):
            for n in (3, 17):
                for name in ("MIN", "MAX"):
                    x, y = data[d, n, r].clone(), data[d, n, r].clone()
                    ref.ring_all_reduce(x, _OPS[name])
                    dist.all_reduce(y, _OPS[name])
                    out[f"x{i}{n}{name}"], out[f"y{i}{n}{name}"] = x, y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate((torch.float32, torch.float64)):
            for n in (3, 17):
                for name in ("MIN", "MAX"):
                    _same(got[f"x{i}{n}{name}"], got[f"y{i}{n}{name}"], f"rank {r}, {d} {name} of {n}: vs dist.all_reduce",
                          how="value")


@case("ring", "ring_all_reduce and ring_reduce_scatter with MAX / MIN propagate NaN like torch.maximum / minimum, "
              "W = 3 (statement; gloo drops NaN)")
def _(ref):
    world, rng = 3, np.random.default_rng(116)
    xs = []
    for r in range(world):
        x = _rand(rng, (14,), torch.float32)
        x[[r, 3 + 2 * r, 13 - r]] = float("nan")
        xs.append(x)

    def rank():
        r, out = dist.get_rank(), {}
        for name in ("MIN", "MAX"):
            x = xs[r].clone()
            ref.ring_all_reduce(x, _OPS[name])
            out[f"a{name}"] = x
            out[f"s{name}"] = ref.ring_reduce_scatter(xs[r].clone(), _OPS[name])
        return _pack(out)
    b = _bounds(14, world)
    for r, got in enumerate(_world(rank, world)):
        for name in ("MIN", "MAX"):
            want = _fold(xs, name)
            _same(got[f"a{name}"], want, f"rank {r}, ring_all_reduce {name} with NaN inputs", how="value")
            _same(got[f"s{name}"], want[b[r]:b[r + 1]], f"rank {r}, ring_reduce_scatter {name} with NaN inputs", how="value")


@case("ring", "ring_all_reduce of 0-d, empty and shorter-than-W tensors, W = 4: float32 SUM in the ring's "
              "order, int64 PRODUCT vs dist.all_reduce, shapes kept, tensor returned")
def _(ref):
    world, rng = 4, np.random.default_rng(117)
    shapes = [(), (0,), (2, 0), (1,), (3,), (1, 3)]
    fs = {(k, r): _rand(rng, s, torch.float32) for k, s in enumerate(shapes) for r in range(world)}
    ns = {(k, r): _rand(rng, s, torch.int64) for k, s in enumerate(shapes) for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for k in range(len(shapes)):
            x, n, m = fs[k, r].clone(), ns[k, r].clone(), ns[k, r].clone()
            ret = ref.ring_all_reduce(x)
            ref.ring_all_reduce(n, ReduceOp.PRODUCT)
            dist.all_reduce(m, ReduceOp.PRODUCT)
            out[f"x{k}"], out[f"n{k}"], out[f"m{k}"], out[f"r{k}"] = x, n, m, ret is x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for k, shape in enumerate(shapes):
            xs = [fs[k, q] for q in range(world)]
            _same(got[f"x{k}"], _ring_fold(xs, "SUM").view(shape), f"rank {r}, float32 SUM of shape {shape}")
            _same(got[f"n{k}"], got[f"m{k}"], f"rank {r}, int64 PRODUCT of shape {shape}: vs dist.all_reduce")
            if int(got[f"r{k}"]) != 1:
                _fail(f"shape {shape}: ring_all_reduce should return the tensor it was given")


@case("ring", "ring_all_reduce on non-contiguous views (transpose, strided columns, expanded-then-sliced) and "
              "on a contiguous slice of a bucket: in place, chunks of the logical order, nothing else touched, W = 3")
def _(ref):
    world, rng = 3, np.random.default_rng(118)
    mats = [_rand(rng, (5, 4), torch.float32) for _ in range(world)]
    bases = [_rand(rng, (3, 8), torch.float64) for _ in range(world)]
    buckets = [_rand(rng, (20,), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        mat, base, bucket = mats[r].clone(), bases[r].clone(), buckets[r].clone()
        view = mat.t()
        ret = ref.ring_all_reduce(view)
        ref.ring_all_reduce(base[:, 1::2], ReduceOp.MAX)
        col = torch.tensor([r + 1.0]).expand(2, 2).contiguous()[:, 0]
        ref.ring_all_reduce(col)
        ref.ring_all_reduce(bucket[4:15])
        out["mat"], out["base"], out["col"], out["bucket"], out["ret"] = mat, base, col, bucket, ret is view
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        want = torch.empty(4, 5)
        want.copy_(_ring_fold([m.t() for m in mats], "SUM").view(4, 5))
        _same(got["mat"], want.t().contiguous(), f"rank {r}: buffer after ring_all_reduce(mat.t())")
        wbase = bases[r].clone()
        wbase[:, 1::2] = _fold([b[:, 1::2] for b in bases], "MAX")
        _same(got["base"], wbase, f"rank {r}: buffer after ring_all_reduce(base[:, 1::2], MAX)", how="value")
        _same(got["col"], torch.full((2,), world * (world + 1) / 2), f"rank {r}: expanded-then-sliced column")
        wb = buckets[r].clone()
        wb[4:15] = _ring_fold([b[4:15] for b in buckets], "SUM")
        _same(got["bucket"], wb, f"rank {r}: bucket after ring_all_reduce(bucket[4:15])")
        if int(got["ret"]) != 1:
            _fail("ring_all_reduce should return the view it was given")


@case("ring", "ring_all_reduce 150 times in a row of [i + rank], then twice on one tensor, W = 3 "
              "(gloo test_allreduce_stress, distributed_test test_all_reduce_sum_twice)")
def _(ref):
    world, count = 3, 150

    def rank():
        r, outs = dist.get_rank(), []
        for i in range(count):
            x = torch.tensor([i + r])
            ref.ring_all_reduce(x)
            outs.append(x)
        twice = torch.arange(7) + r
        ref.ring_all_reduce(twice)
        ref.ring_all_reduce(twice)
        return _pack({"all": torch.cat(outs), "twice": twice})
    want = torch.tensor([i * world + world * (world - 1) // 2 for i in range(count)])
    for r, got in enumerate(_world(rank, world)):
        _same(got["all"], want, f"rank {r}: results of 150 all-reduces")
        _same(got["twice"], world * (torch.arange(7) * world + 3), f"rank {r}: all-reduce applied twice")


@case("ring", "ring_all_reduce on new_group([1, 2]) and a full new_group of W = 4: ring order over group "
              "ranks (statement), int64 vs dist.all_reduce(group=) (distributed_test _group / _full_group)")
def _(ref):
    world, rng = 4, np.random.default_rng(119)
    xs = [_rand(rng, (37,), torch.float32) for _ in range(world)]
    ns = [_rand(rng, (9,), torch.int64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g12, gall = dist.new_group([1, 2]), dist.new_group(list(range(world)))
        x, n, m = xs[r].clone(), ns[r].clone(), ns[r].clone()
        if r in (1, 2):
            ref.ring_all_reduce(x, group=g12)
            ref.ring_all_reduce(n, group=g12)
            dist.all_reduce(m, group=g12)
        out["x"], out["n"], out["m"] = x, n, m
        f = xs[r].clone()
        ref.ring_all_reduce(f, group=gall)
        out["f"] = f
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        if r in (1, 2):
            _same(got["x"], _ring_fold([xs[1], xs[2]], "SUM"), f"rank {r}, group [1, 2]: float32 SUM")
            _same(got["n"], got["m"], f"rank {r}, group [1, 2]: int64 vs dist.all_reduce")
        else:
            _same(got["x"], xs[r], f"rank {r} (outside group [1, 2]) changed")
        _same(got["f"], _ring_fold(xs, "SUM"), f"rank {r}, full group: float32 SUM in the ring's order")


@case("ring", "ring_all_reduce on new_group([0, 2, 3]) (ring of group ranks) and on disjoint groups [0, 3] / "
              "[1, 2] at once, W = 4 (statement order)")
def _(ref):
    world, rng = 4, np.random.default_rng(120)
    xs = [_rand(rng, (41,), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g = dist.new_group([0, 2, 3])
        ga, gb = dist.new_group([0, 3]), dist.new_group([1, 2])
        x = xs[r].clone()
        if r != 1:
            ref.ring_all_reduce(x, group=g)
        out["x"] = x
        y = xs[r].clone()
        ref.ring_all_reduce(y, ReduceOp.PRODUCT, group=ga if r in (0, 3) else gb)
        out["y"] = y
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        want = _ring_fold([xs[0], xs[2], xs[3]], "SUM") if r != 1 else xs[1]
        _same(got["x"], want, f"rank {r}, group [0, 2, 3]")
        pair = [0, 3] if r in (0, 3) else [1, 2]
        _same(got["y"], _ring_fold([xs[pair[0]], xs[pair[1]]], "PRODUCT"), f"rank {r}, disjoint groups at once")


@case("ring", "the ring at W = 1: all_reduce is a no-op returning its tensor, reduce_scatter returns a 1-D copy, "
              "all_gather the flattened chunk, AVG still raises ValueError (statement)")
def _(ref):
    def rank():
        out = {}
        x = torch.arange(6.0).reshape(2, 3)
        out["ret"] = ref.ring_all_reduce(x) is x
        out["x"] = x
        s = ref.ring_reduce_scatter(x)
        s.add_(100)
        out["s"], out["x2"] = s, x
        out["g"] = ref.ring_all_gather(torch.arange(4).reshape(2, 2), [4])
        out["e1"] = _raises_value_error(lambda: ref.ring_all_reduce(x, ReduceOp.AVG))
        out["e2"] = _raises_value_error(lambda: ref.ring_reduce_scatter(x, ReduceOp.AVG))
        return _pack(out)
    got = _world(rank, 1)[0]
    _same(got["x"], torch.arange(6.0).reshape(2, 3), "ring_all_reduce at W=1")
    _same(got["s"], torch.arange(6.0) + 100, "ring_reduce_scatter at W=1 (then the result changed in place)")
    _same(got["x2"], torch.arange(6.0).reshape(2, 3), "the input, after its reduce-scatter result was changed: "
          "ring_reduce_scatter must return a new tensor")
    _same(got["g"], torch.arange(4), "ring_all_gather at W=1")
    if int(got["ret"]) != 1:
        _fail("ring_all_reduce should return the tensor it was given")
    if int(got["e1"]) != 1 or int(got["e2"]) != 1:
        _fail("at W=1, ring_all_reduce / ring_reduce_scatter with AVG should raise ValueError")


@case("ring", "ring_all_reduce of 2^18 + 3 float32 at W = 4: bit for bit in the ring's order (statement)")
def _(ref):
    world, rng = 4, np.random.default_rng(121)
    xs = [_rand(rng, (2 ** 18 + 3,), torch.float32, spread=6) for _ in range(world)]
    want = _ring_fold(xs, "SUM")

    def rank():
        x = xs[dist.get_rank()].clone()
        ref.ring_all_reduce(x)
        return _pack({"ok": torch.equal(x.view(torch.int32), want.view(torch.int32)),
                       "bad": int((x.view(torch.int32) != want.view(torch.int32)).sum())})
    for r, got in enumerate(_world(rank, world)):
        if not int(got["ok"]):
            _fail(f"rank {r}: {int(got['bad'])} of {2 ** 18 + 3} sums differ from the ring's order")


@case("ring", "ring_all_reduce / ring_reduce_scatter with AVG, BAND, BOR, BXOR raise ValueError on every rank "
              "before sending anything; the world still works after (statement)")
def _(ref):
    world = 3

    def rank():
        r, problems = dist.get_rank(), []
        x = torch.arange(7) + r
        with _Spy() as spy:
            for op in ("AVG", "BAND", "BOR", "BXOR"):
                for which, fn in (("ring_all_reduce", ref.ring_all_reduce), ("ring_reduce_scatter", ref.ring_reduce_scatter)):
                    flag = _raises_value_error(lambda: fn(x, getattr(ReduceOp, op)))
                    if flag != 1:
                        problems.append(f"{which}(op={op}) {'raised another exception' if flag == 2 else 'did not raise'}")
        if spy.messages or spy.collectives:
            problems.append(f"the failing calls started {len(spy.messages)} message(s)")
        if not torch.equal(x, torch.arange(7) + r):
            problems.append("a failing call changed the tensor")
        ref.ring_all_reduce(x)
        return _pack({"problems": "; ".join(problems[:4]), "x": x})
    results = _world(rank, world)
    _no_problems(results)
    for r in range(world):
        _same(results[r]["x"], torch.arange(7) * 3 + 3, f"rank {r}: ring_all_reduce after the failing calls")


@case("ring", "ring_reduce_scatter of int64 / int32 over 3, 4, 10, 13, 64 elements with all four ops, W = 4: "
              "chunk r of tensor_split (vs dist.reduce_scatter with variable sizes)")
def _(ref):
    world, rng = 4, np.random.default_rng(122)
    sizes = (3, 4, 10, 13, 64)
    dts = (torch.int64, torch.int32)
    data = {(d, n, r): _rand(rng, (n,), d) for d in dts for n in sizes for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(dts):
            for n in sizes:
                for name, op in _OPS.items():
                    x = data[d, n, r].clone()
                    got = ref.ring_reduce_scatter(x, op)
                    parts = [p.clone() for p in torch.tensor_split(data[d, n, r], world)]
                    theirs = torch.empty_like(parts[r])
                    dist.reduce_scatter(theirs, parts, op)
                    out[f"x{i}{n}{name}"], out[f"y{i}{n}{name}"], out[f"in{i}{n}{name}"] = got, theirs, x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(dts):
            for n in sizes:
                for name in _OPS:
                    what = f"rank {r}, {d} {name} of {n}"
                    _same(got[f"x{i}{n}{name}"], got[f"y{i}{n}{name}"], f"{what}: vs dist.reduce_scatter")
                    _same(got[f"in{i}{n}{name}"], data[d, n, r], f"{what}: ring_reduce_scatter changed its input")


@case("ring", "ring_reduce_scatter float32 SUM of (3, 7) and (2, 2, 5) inputs at W = 3 and 4: a new 1-D chunk, "
              "bit for bit in the ring's order, input untouched (statement)")
def _(ref):
    rng = np.random.default_rng(123)
    shapes = [(3, 7), (2, 2, 5), (1,)]
    for world in (3, 4):
        data = {(k, r): _rand(rng, s, torch.float32, spread=6) for k, s in enumerate(shapes) for r in range(world)}

        def rank():
            r, out = dist.get_rank(), {}
            for k in range(len(shapes)):
                x = data[k, r].clone()
                got = ref.ring_reduce_scatter(x)
                out[f"g{k}"] = got.clone()
                got.fill_(7)
                out[f"in{k}"] = x
            return _pack(out)
        for r, got in enumerate(_world(rank, world)):
            for k, shape in enumerate(shapes):
                n = int(np.prod(shape))
                b = _bounds(n, world)
                want = _ring_fold([data[k, q] for q in range(world)], "SUM")[b[r]:b[r + 1]]
                _same(got[f"g{k}"], want, f"W={world}, rank {r}, input {shape}: chunk {r}")
                _same(got[f"in{k}"], data[k, r], f"W={world}, rank {r}, input {shape}: the input changed "
                      f"(during the call, or when the returned chunk was written)")


@case("ring", "ring_reduce_scatter of a (W * 20, 20) float32 input: rank r's 20 x 20 block, close to "
              "dist.reduce_scatter_tensor (gloo test_reduce_scatter_tensor), bit for bit in the ring's order, W = 3")
def _(ref):
    world, rng = 3, np.random.default_rng(124)
    xs = [torch.from_numpy(rng.random((world * 20, 20))).float() for _ in range(world)]

    def rank():
        r = dist.get_rank()
        got = ref.ring_reduce_scatter(xs[r].clone())
        theirs = torch.empty(20, 20)
        dist.reduce_scatter_tensor(theirs, xs[r].clone())
        return _pack({"g": got, "t": theirs.reshape(-1)})
    full = _ring_fold(xs, "SUM")
    for r, got in enumerate(_world(rank, world)):
        _same(got["g"], full[r * 400:(r + 1) * 400], f"rank {r}: block not in the ring's order")
        _near_sum(got["g"], got["t"], [x.reshape(-1)[r * 400:(r + 1) * 400] for x in xs], f"rank {r}: vs dist.reduce_scatter_tensor")


@case("ring", "ring_all_gather of 3-element chunks in eight dtypes and of (2, 3) chunks, W = 4 "
              "(gloo allgather basics; vs dist.all_gather_into_tensor)")
def _(ref):
    world, rng = 4, np.random.default_rng(125)
    dtypes = _FLOATS + _INTS
    data = {(d, r): _rand(rng, (3,), d) for d in dtypes for r in range(world)}
    mats = [_rand(rng, (2, 3), torch.float64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for i, d in enumerate(dtypes):
            chunk = data[d, r].clone()
            got = ref.ring_all_gather(chunk, [3] * world)
            theirs = torch.empty(3 * world, dtype=d)
            dist.all_gather_into_tensor(theirs, data[d, r].clone())
            out[f"g{i}"], out[f"t{i}"], out[f"c{i}"] = got, theirs, chunk
        out["m"] = ref.ring_all_gather(mats[r].clone(), [6] * world)
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for i, d in enumerate(dtypes):
            _same(got[f"g{i}"], got[f"t{i}"], f"rank {r}, {d}: vs dist.all_gather_into_tensor")
            _same(got[f"g{i}"], torch.cat([data[d, k] for k in range(world)]), f"rank {r}, {d}")
            _same(got[f"c{i}"], data[d, r], f"rank {r}, {d}: ring_all_gather changed its chunk")
        _same(got["m"], torch.cat([m.reshape(-1) for m in mats]), f"rank {r}: (2, 3) chunks, flattened in rank order")


@case("ring", "ring_all_gather of uneven chunks, including empty and 0-d ones, W = 4 (distributed_test "
              "all_gather_v idea; oracle: concatenation in rank order)")
def _(ref):
    world, rng = 4, np.random.default_rng(126)
    layouts = [[(2, 3), (), (0,), (5,)], [(0,), (0,), (1,), (0,)], [(0,), (0, 2), (0,), (0,)], [(1,), (7,), (2, 2), ()]]
    data = {(k, r): _rand(rng, layouts[k][r], torch.int32) for k in range(len(layouts)) for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for k, layout in enumerate(layouts):
            sizes = [int(np.prod(s)) for s in layout]
            out[f"g{k}"] = ref.ring_all_gather(data[k, r].clone(), sizes)
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for k, layout in enumerate(layouts):
            _same(got[f"g{k}"], torch.cat([data[k, q].reshape(-1) for q in range(world)]), f"rank {r}, chunk shapes {layout}")


@case("ring", "ring_all_gather of non-contiguous chunks (strided column, transpose, stride-0 expand), chunks "
              "left unchanged, W = 3 (gloo test_allgather_noncontiguous_input)")
def _(ref):
    world, rng = 3, np.random.default_rng(127)
    mats = [_rand(rng, (3, 4), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        col = torch.tensor([float(r)]).expand(2, 2).contiguous()[:, 0]
        out["col"] = ref.ring_all_gather(col, [2] * world)
        mat = mats[r].clone()
        out["t"] = ref.ring_all_gather(mat.t(), [12] * world)
        out["mat"] = mat
        out["e"] = ref.ring_all_gather(torch.tensor([r + 0.5]).expand(5), [5] * world)
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        _same(got["col"], torch.tensor([0.0, 0, 1, 1, 2, 2]), f"rank {r}: strided columns")
        _same(got["t"], torch.cat([m.t().reshape(-1) for m in mats]), f"rank {r}: transposed chunks (logical order)")
        _same(got["mat"], mats[r], f"rank {r}: ring_all_gather changed its chunk")
        _same(got["e"], torch.cat([torch.full((5,), q + 0.5) for q in range(world)]), f"rank {r}: expanded chunks")


@case("ring", "ring_all_gather raises ValueError on every rank for len(sizes) != W and for chunks that do not "
              "hold sizes[rank] elements, before sending anything; the world still works after (statement)")
def _(ref):
    world = 3

    def rank():
        r, problems = dist.get_rank(), []
        chunk = torch.arange(2) + 10 * r
        bad = {"W - 1 sizes": [2] * (world - 1), "W + 1 sizes": [2] * (world + 1), "sizes one too many": [3] * world,
               "sizes one too few": [1] * world, "sizes all -1": [-1] * world}
        with _Spy() as spy:
            for what, sizes in bad.items():
                flag = _raises_value_error(lambda: ref.ring_all_gather(chunk, sizes))
                if flag != 1:
                    problems.append(f"ring_all_gather with {what} {'raised another exception' if flag == 2 else 'did not raise'}")
        if spy.messages or spy.collectives:
            problems.append(f"the failing calls started {len(spy.messages)} message(s)")
        good = ref.ring_all_gather(chunk, [2] * world)
        return _pack({"problems": "; ".join(problems[:4]), "g": good})
    results = _world(rank, world)
    _no_problems(results)
    for r in range(world):
        _same(results[r]["g"], torch.tensor([0, 1, 10, 11, 20, 21]), f"rank {r}: ring_all_gather after the failing calls")


@case("ring", "ring_reduce_scatter then ring_all_gather of the chunks equals ring_all_reduce bit for bit, "
              "W = 4, 1001 float32 (statement)")
def _(ref):
    world, rng = 4, np.random.default_rng(128)
    xs = [_rand(rng, (7, 143), torch.float32, spread=6) for _ in range(world)]

    def rank():
        r = dist.get_rank()
        chunk = ref.ring_reduce_scatter(xs[r].clone())
        sizes = [int(b - a) for a, b in zip(_bounds(1001, world)[:-1], _bounds(1001, world)[1:], strict=True)]
        gathered = ref.ring_all_gather(chunk, sizes)
        full = xs[r].clone()
        ref.ring_all_reduce(full)
        return _pack({"g": gathered, "f": full.reshape(-1)})
    want = _ring_fold(xs, "SUM")
    for r, got in enumerate(_world(rank, world)):
        _same(got["g"], want, f"rank {r}: reduce-scatter + all-gather")
        _same(got["f"], got["g"], f"rank {r}: ring_all_reduce vs reduce-scatter + all-gather")


@case("ring", "ring_all_gather 100 times in a row of [i + rank], W = 3 (gloo test_allgather_stress)")
def _(ref):
    world, count = 3, 100

    def rank():
        r, outs = dist.get_rank(), []
        for i in range(count):
            outs.append(ref.ring_all_gather(torch.tensor([i + r]), [1] * world))
        return _pack({"all": torch.stack(outs)})
    want = torch.tensor([[i + j for j in range(world)] for i in range(count)])
    for r, got in enumerate(_world(rank, world)):
        _same(got["all"], want, f"rank {r}: results of 100 all-gathers")


@case("ring", "the ring at W = 4 over 2, 6 and 13 elements: only send/recv/isend/irecv, sends to rank + 1 and "
              "receives from rank - 1 only, one message per non-empty chunk of the schedule, none of zero "
              "elements, every isend waited (statement)")
def _(ref):
    world = 4

    def rank():
        r, problems = dist.get_rank(), []
        right, left = (r + 1) % world, (r - 1) % world
        for n in (2, 6, 13):
            b = _bounds(n, world)
            size = [b[c + 1] - b[c] for c in range(world)]
            rs_out = [size[(r - 1 - s) % world] for s in range(world - 1)]
            rs_in = [size[(r - 2 - s) % world] for s in range(world - 1)]
            ag_out = [size[(r - s) % world] for s in range(world - 1)]
            ag_in = [size[(r - 1 - s) % world] for s in range(world - 1)]
            plans = {"ring_all_reduce": (rs_out + ag_out, rs_in + ag_in), "ring_reduce_scatter": (rs_out, rs_in),
                     "ring_all_gather": (ag_out, ag_in)}
            for which, (outs, ins) in plans.items():
                x = torch.arange(float(n)) + r
                with _Spy() as spy:
                    if which == "ring_all_reduce":
                        ref.ring_all_reduce(x)
                    elif which == "ring_reduce_scatter":
                        ref.ring_reduce_scatter(x)
                    else:
                        ref.ring_all_gather(torch.arange(float(size[r])), size)
                what = f"{which} of {n} elements"
                problems += spy.problems(what)
                sends = [m for m in spy.messages if m["kind"] == "send"]
                recvs = [m for m in spy.messages if m["kind"] == "recv"]
                if any(m["peer"] != right for m in sends) or any(m["peer"] != left for m in recvs):
                    problems.append(f"{what}: talked to {sorted({m['peer'] for m in spy.messages})}; "
                                    f"rank {r} sends only to {right} and receives only from {left}")
                if sorted(m["numel"] for m in sends) != sorted(k for k in outs if k):
                    problems.append(f"{what}: sent messages of {[m['numel'] for m in sends]} elements, the ring "
                                    f"sends {[k for k in outs if k]}")
                if sorted(m["numel"] for m in recvs) != sorted(k for k in ins if k):
                    problems.append(f"{what}: received messages of {[m['numel'] for m in recvs]} elements, the "
                                    f"ring receives {[k for k in ins if k]}")
        return _pack({"problems": "; ".join(problems[:4])})
    _no_problems(_world(rank, world))


@case("ring", "ring_all_reduce with rank 2 speaking the statement's ring by hand, W = 4, 103 and 3 elements "
              "(empty chunks): float32 SUM bit for bit, int64 MAX (statement)")
def _(ref):
    world, hand, rng = 4, 2, np.random.default_rng(129)
    cases = [(103, torch.float32, "SUM"), (3, torch.float32, "SUM"), (10, torch.int64, "MAX")]
    data = {(k, r): _rand(rng, (n,), d) for k, (n, d, _) in enumerate(cases) for r in range(world)}

    def rank():
        r, out = dist.get_rank(), {}
        for k, (n, d, name) in enumerate(cases):
            x = data[k, r].clone()
            if r == hand:
                _hand_ring(x, _bounds(n, world), name)
            else:
                ref.ring_all_reduce(x, _OPS[name])
            out[f"x{k}"] = x
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for k, (n, d, name) in enumerate(cases):
            _same(got[f"x{k}"], _ring_fold([data[k, q] for q in range(world)], name),
                  f"rank {r}, {d} {name} of {n} (rank {hand} by hand)")


@case("ring", "ring_reduce_scatter and ring_all_gather with rank 0 speaking the statement's ring by hand, "
              "W = 3, float64 PRODUCT and uneven all-gather sizes (statement)")
def _(ref):
    world, hand, rng = 3, 0, np.random.default_rng(130)
    xs = [_near_one(rng, (11,)) for _ in range(world)]
    sizes = [4, 0, 3]
    chunks = [_rand(rng, (s,), torch.int32) for s in sizes]

    def rank():
        r, out = dist.get_rank(), {}
        b = _bounds(11, world)
        if r == hand:
            flat = _hand_ring(xs[r].clone(), b, "PRODUCT", all_gather=False)
            out["s"] = flat[b[r]:b[r + 1]].clone()
            cb = [0, 4, 4, 7]
            buf = torch.zeros(7, dtype=torch.int32)
            buf[cb[r]:cb[r + 1]] = chunks[r]
            out["g"] = _hand_ring(buf, cb, "SUM", reduce_scatter=False)
        else:
            out["s"] = ref.ring_reduce_scatter(xs[r].clone(), ReduceOp.PRODUCT)
            out["g"] = ref.ring_all_gather(chunks[r].clone(), sizes)
        return _pack(out)
    b = _bounds(11, world)
    full = _ring_fold(xs, "PRODUCT")
    for r, got in enumerate(_world(rank, world)):
        _same(got["s"], full[b[r]:b[r + 1]], f"rank {r}: reduce-scatter PRODUCT chunk (rank {hand} by hand)")
        _same(got["g"], torch.cat(chunks), f"rank {r}: all-gather of sizes {sizes} (rank {hand} by hand)")


@case("ring", "ring_reduce_scatter and ring_all_gather on new_group([1, 2, 3]) of W = 4: chunks by group rank, "
              "rank 0 untouched (distributed_test _group)")
def _(ref):
    world, rng = 4, np.random.default_rng(131)
    xs = [_rand(rng, (16,), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        g = dist.new_group([1, 2, 3])
        x = xs[r].clone()
        if r:
            s = ref.ring_reduce_scatter(x, group=g)
            out["s"] = s
            out["g"] = ref.ring_all_gather(s, [6, 5, 5], group=g)
        out["x"] = x
        return _pack(out)
    members = [xs[1], xs[2], xs[3]]
    full = _ring_fold(members, "SUM")
    b = _bounds(16, 3)
    for r, got in enumerate(_world(rank, world)):
        _same(got["x"], xs[r], f"rank {r}: input changed")
        if r:
            _same(got["s"], full[b[r - 1]:b[r]], f"rank {r} (group rank {r - 1}): reduce-scatter chunk")
            _same(got["g"], full, f"rank {r}: all-gather of the reduced chunks")


@case("ring", "the ring at W = 2: all_reduce SUM / MAX, reduce_scatter of 5 elements, all_gather of sizes "
              "[3, 0] (vs dist.all_reduce / dist.reduce_scatter; gloo basics at the smallest world)")
def _(ref):
    world, rng = 2, np.random.default_rng(132)
    xs = [_rand(rng, (5,), torch.float32) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        for name in ("SUM", "MAX"):
            x, y = xs[r].clone(), xs[r].clone()
            ref.ring_all_reduce(x, _OPS[name])
            dist.all_reduce(y, _OPS[name])
            out[f"x{name}"], out[f"y{name}"] = x, y
        out["s"] = ref.ring_reduce_scatter(xs[r].clone())
        theirs = torch.empty(3 - r)
        dist.reduce_scatter(theirs, [p.clone() for p in torch.tensor_split(xs[r], world)])
        out["t"] = theirs
        out["g"] = ref.ring_all_gather(torch.arange(3.0) if r == 0 else torch.zeros(0), [3, 0])
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for name in ("SUM", "MAX"):
            _same(got[f"x{name}"], got[f"y{name}"], f"W=2, rank {r}, {name}: vs dist.all_reduce")
        _same(got["s"], got["t"], f"W=2, rank {r}: reduce-scatter vs dist.reduce_scatter")
        _same(got["g"], torch.arange(3.0), f"W=2, rank {r}: all-gather of sizes [3, 0]")


@case("ring", "tree, ring and all-to-all collectives interleaved in one world of 3, with 0-d, empty and "
              "shorter-than-W tensors in between: no message is left over for the next collective (statement)")
def _(ref):
    world, rng = 3, np.random.default_rng(133)
    xs = [_rand(rng, (8,), torch.float64) for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        a = torch.tensor(float(r))
        ref.tree_broadcast(a, 2)
        b = torch.tensor([r + 1])
        ref.ring_all_reduce(b, ReduceOp.PRODUCT)
        c = ref.all_to_all([torch.zeros(0), torch.tensor(float(10 * r)), torch.zeros(2, 0)])
        d = torch.zeros(0, 3)
        ref.tree_reduce(d, 1)
        e = ref.ring_all_gather(torch.arange(2) + 5 if r == 1 else torch.zeros(0, dtype=torch.int64), [0, 2, 0])
        f = ref.ring_reduce_scatter(torch.tensor([1.0, 2.0]) * (r + 1))
        g = xs[r].clone()
        ref.ring_all_reduce(g)
        h = xs[r].clone()
        ref.tree_reduce(h, 0)
        out.update(a=a, b=b, c0=c[0], c1=c[1], c2=c[2], e=e, f=f, g=g, h=h)
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        _same(got["a"], torch.tensor(2.0), f"rank {r}: 0-d tree_broadcast")
        _same(got["b"], torch.tensor([6]), f"rank {r}: 1-element ring PRODUCT")
        for i in range(world):
            chunk = [torch.zeros(0), torch.tensor(float(10 * i)), torch.zeros(2, 0)][r]
            _same(got[f"c{i}"], chunk, f"rank {r}: all_to_all entry {i}")
        _same(got["e"], torch.tensor([5, 6]), f"rank {r}: all-gather of sizes [0, 2, 0]")
        _same(got["f"], torch.tensor([6.0, 12.0])[_bounds(2, world)[r]:_bounds(2, world)[r + 1]], f"rank {r}: reduce-scatter of 2 elements")
        _same(got["g"], _ring_fold(xs, "SUM"), f"rank {r}: ring_all_reduce after the small collectives")
        _same(got["h"], _tree_fold(xs, 0, "SUM") if r == 0 else xs[r], f"rank {r}: tree_reduce at the end")


# ====================================================================================================
# all_to_all
# ====================================================================================================
def _a2a_expect(results, chunks, world, what=""):
    for j, got in enumerate(results):
        for i in range(world):
            _same(got[f"o{i}"], chunks[i][j], f"{what}rank {j}'s entry {i} (rank {i}'s chunks[{j}])")


@case("all_to_all", "all_to_all of (i + 1, W) blocks of value rank in eight dtypes, W = 4 (distributed_test "
                    "all_to_all helper; vs dist.all_to_all_single with splits)")
def _(ref):
    world = 4
    dtypes = _FLOATS + _INTS

    def rank():
        r, out = dist.get_rank(), {}
        for k, d in enumerate(dtypes):
            chunks = [torch.ones(i + 1, world, dtype=d) * r for i in range(world)]
            got = ref.all_to_all(chunks)
            theirs = torch.empty((r + 1) * world, world, dtype=d)
            dist.all_to_all_single(theirs, torch.cat(chunks), [r + 1] * world, [i + 1 for i in range(world)])
            for i in range(world):
                out[f"g{k}{i}"] = got[i]
                out[f"t{k}{i}"] = theirs[i * (r + 1):(i + 1) * (r + 1)]
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for k, d in enumerate(dtypes):
            for i in range(world):
                what = f"rank {r}, {d}, entry {i}"
                _same(got[f"g{k}{i}"], got[f"t{k}{i}"], f"{what}: vs dist.all_to_all_single")
                _same(got[f"g{k}{i}"], torch.ones(r + 1, world, dtype=d) * i, what)


@case("all_to_all", "all_to_all of equal splits of a (2W, 3) float32 input, W = 3 (distributed_test "
                    "all_to_all_single equal split; vs dist.all_to_all_single)")
def _(ref):
    world, rng = 3, np.random.default_rng(141)
    xs = [_rand(rng, (2 * world, 3), torch.float32) for _ in range(world)]

    def rank():
        r = dist.get_rank()
        got = ref.all_to_all(list(xs[r].clone().chunk(world)))
        theirs = torch.empty(2 * world, 3)
        dist.all_to_all_single(theirs, xs[r].clone())
        return _pack({"g": torch.cat(got), "t": theirs})
    for r, got in enumerate(_world(rank, world)):
        _same(got["g"], got["t"], f"rank {r}: vs dist.all_to_all_single")
        _same(got["g"], torch.cat([x.chunk(world)[r] for x in xs]), f"rank {r}")


@case("all_to_all", "all_to_all of unequal splits (i + 1 rows to rank i), int64, W = 4 (distributed_test "
                    "all_to_all_single unequal split; vs dist.all_to_all_single)")
def _(ref):
    world, rng = 4, np.random.default_rng(142)
    xs = [_rand(rng, (sum(range(1, world + 1)), 2), torch.int64) for _ in range(world)]

    def rank():
        r = dist.get_rank()
        splits = [i + 1 for i in range(world)]
        got = ref.all_to_all(list(xs[r].clone().split(splits)))
        theirs = torch.empty((r + 1) * world, 2, dtype=torch.int64)
        dist.all_to_all_single(theirs, xs[r].clone(), [r + 1] * world, splits)
        return _pack({"g": torch.cat(got), "t": theirs, "shapes": torch.tensor([list(t.shape) for t in got])})
    for r, got in enumerate(_world(rank, world)):
        _same(got["g"], got["t"], f"rank {r}: vs dist.all_to_all_single")
        _same(got["shapes"], torch.tensor([[r + 1, 2]] * world), f"rank {r}: entry shapes")


@case("all_to_all", "all_to_all of chunks of any shape per destination: 0-d, (0,), (2, 0, 3), (j + 1, i + 2), "
                    "(1, 1, 1, 1), W = 4 (statement; oracle: rank i's chunks[j] on rank j)")
def _(ref):
    world, rng = 4, np.random.default_rng(143)
    shapes = lambda i, j: [(), (0,), (2, 0, 3), (j + 1, i + 2), (1, 1, 1, 1)][(i + 2 * j) % 5]  # noqa: E731
    chunks = [[_rand(rng, shapes(i, j), torch.float64) for j in range(world)] for i in range(world)]

    def rank():
        r = dist.get_rank()
        got = ref.all_to_all([c.clone() for c in chunks[r]])
        return _pack({f"o{i}": got[i] for i in range(world)} | {"n": len(got)})
    results = _world(rank, world)
    for r, got in enumerate(results):
        if int(got["n"]) != world:
            _fail(f"rank {r}: all_to_all should return {world} tensors, got {int(got['n'])}")
    _a2a_expect(results, chunks, world)


@case("all_to_all", "all_to_all where every chunk is empty, shapes (0,) and (0, 3), float32 and int8, W = 3 "
                    "(distributed_test test_all_to_all_empty idea; vs dist.all_to_all)")
def _(ref):
    world = 3

    def rank():
        out = {}
        for k, (shape, d) in enumerate((((0,), torch.float32), ((0, 3), torch.int8))):
            got = ref.all_to_all([torch.empty(shape, dtype=d) for _ in range(world)])
            theirs = [torch.empty(shape, dtype=d) for _ in range(world)]
            dist.all_to_all(theirs, [torch.empty(shape, dtype=d) for _ in range(world)])
            for i in range(world):
                out[f"g{k}{i}"], out[f"t{k}{i}"] = got[i], theirs[i]
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        for k in range(2):
            for i in range(world):
                _same(got[f"g{k}{i}"], got[f"t{k}{i}"], f"rank {r}, empty chunks {k}, entry {i}: vs dist.all_to_all")


@case("all_to_all", "all_to_all returns new tensors: the own entry is a copy, inputs are not modified, "
                    "writing a result does not write an input, W = 3 (statement)")
def _(ref):
    world = 3

    def rank():
        r = dist.get_rank()
        chunks = [torch.full((2,), 10.0 * r + j) for j in range(world)]
        got = ref.all_to_all(chunks)
        same_object = any(g is c for g in got for c in chunks)
        for g in got:
            g.add_(1000)
        return _pack({"in": torch.stack(chunks), "same": same_object, "own": got[r]})
    for r, got in enumerate(_world(rank, world)):
        _same(got["in"], torch.stack([torch.full((2,), 10.0 * r + j) for j in range(world)]),
              f"rank {r}: the input chunks changed (during the call, or when the results were written)")
        if int(got["same"]):
            _fail(f"rank {r}: all_to_all returned one of the input tensors itself, not a copy")
        _same(got["own"], torch.full((2,), 10.0 * r + r + 1000), f"rank {r}: own entry")


@case("all_to_all", "all_to_all of non-contiguous chunks (transposes, strided slices, stride-0 expands) keeps "
                    "each chunk's shape and logical values, W = 3 (statement; gloo noncontiguous tests)")
def _(ref):
    world, rng = 3, np.random.default_rng(144)
    bases = [[_rand(rng, (3, 4), torch.int32) for _ in range(world)] for _ in range(world)]
    views = lambda i, j: [bases[i][j].t(), bases[i][j][:, ::2], bases[i][j][1].expand(2, 4)][(i + j) % 3]  # noqa: E731
    chunks = [[views(i, j) for j in range(world)] for i in range(world)]

    def rank():
        r = dist.get_rank()
        got = ref.all_to_all([views(r, j) for j in range(world)])
        return _pack({f"o{i}": got[i] for i in range(world)})
    _a2a_expect(_world(rank, world), [[c.contiguous() for c in row] for row in chunks], world)


@case("all_to_all", "all_to_all raises ValueError on every rank for W - 1 or W + 1 chunks and for mixed dtypes, "
                    "before sending anything; the world still works after (statement)")
def _(ref):
    world = 3

    def rank():
        r, problems = dist.get_rank(), []
        bad = {"W - 1 chunks": [torch.zeros(2)] * (world - 1), "W + 1 chunks": [torch.zeros(2)] * (world + 1),
               "mixed dtypes": [torch.zeros(2), torch.zeros(2, dtype=torch.float64), torch.zeros(2)],
               "mixed int dtypes": [torch.zeros(2, dtype=torch.int32)] * 2 + [torch.zeros(2, dtype=torch.int64)]}
        with _Spy() as spy:
            for what, chunks in bad.items():
                flag = _raises_value_error(lambda: ref.all_to_all(chunks))
                if flag != 1:
                    problems.append(f"all_to_all with {what} {'raised another exception' if flag == 2 else 'did not raise'}")
        if spy.messages or spy.collectives:
            problems.append(f"the failing calls started {len(spy.messages)} message(s)")
        got = ref.all_to_all([torch.tensor([10 * r + j]) for j in range(world)])
        return _pack({"problems": "; ".join(problems[:4]), "g": torch.cat(got)})
    results = _world(rank, world)
    _no_problems(results)
    for r in range(world):
        _same(results[r]["g"], torch.tensor([10 * i + r for i in range(world)]), f"rank {r}: all_to_all after the failing calls")


@case("all_to_all", "all_to_all on new_group([1, 2]), new_group([0, 2, 3]) and a full new_group of W = 4: one "
                    "entry per group rank (distributed_test _group / _full_group; vs dist.all_to_all)")
def _(ref):
    world = 4

    def rank():
        r, out = dist.get_rank(), {}
        groups = {"12": [1, 2], "023": [0, 2, 3], "all": list(range(world))}
        handles = {k: dist.new_group(v) for k, v in groups.items()}
        for k, members in groups.items():
            if r in members:
                n = len(members)
                chunks = [torch.full((2,), 100.0 * r + j) for j in range(n)]
                got = ref.all_to_all(chunks, group=handles[k])
                theirs = [torch.empty(2) for _ in range(n)]
                dist.all_to_all(theirs, [c.clone() for c in chunks], group=handles[k])
                out[f"n{k}"] = len(got)
                for i in range(n):
                    out[f"g{k}{i}"], out[f"t{k}{i}"] = got[i], theirs[i]
        return _pack(out)
    groups = {"12": [1, 2], "023": [0, 2, 3], "all": list(range(world))}
    for r, got in enumerate(_world(rank, world)):
        for k, members in groups.items():
            if r not in members:
                continue
            me = members.index(r)
            if int(got[f"n{k}"]) != len(members):
                _fail(f"rank {r}, group {members}: all_to_all should return {len(members)} tensors")
            for i, src in enumerate(members):
                _same(got[f"g{k}{i}"], got[f"t{k}{i}"], f"rank {r}, group {members}, entry {i}: vs dist.all_to_all")
                _same(got[f"g{k}{i}"], torch.full((2,), 100.0 * src + me), f"rank {r}, group {members}, entry {i}")


@case("all_to_all", "all_to_all at W = 1 returns [a copy of the one chunk] (0-d, (2, 3)); at W = 2 it swaps "
                    "(gloo test_send_recv_all_to_all)")
def _(ref):
    def one():
        c, z = torch.arange(6.0).reshape(2, 3), torch.tensor(5)
        a, b = ref.all_to_all([c]), ref.all_to_all([z])
        return _pack({"n": len(a), "a": a[0], "b": b[0], "copy": a[0] is not c})
    got = _world(one, 1)[0]
    if int(got["n"]) != 1 or not int(got["copy"]):
        _fail("at W=1 all_to_all should return a list holding a copy of the one chunk")
    _same(got["a"], torch.arange(6.0).reshape(2, 3), "W=1, (2, 3) chunk")
    _same(got["b"], torch.tensor(5), "W=1, 0-d chunk")

    def two():
        r = dist.get_rank()
        got = ref.all_to_all([torch.tensor([r]), torch.tensor([r])])
        return _pack({"o0": got[0], "o1": got[1]})
    _a2a_expect(_world(two, 2), [[torch.tensor([0]), torch.tensor([0])], [torch.tensor([1]), torch.tensor([1])]], 2, "W=2, ")


@case("all_to_all", "all_to_all with rank 1 speaking the statement's header protocol by hand (ndim, shape, "
                    "values; empty messages skipped), W = 3, shapes 0-d / empty / 3-D (statement)")
def _(ref):
    world, hand, rng = 3, 1, np.random.default_rng(145)
    rounds = [
        lambda i, j: [(), (0,), (2, 1, 3)][(i + j) % 3],
        lambda i, j: [(4,), (0, 2), ()][(2 * i + j) % 3],
    ]
    data = [[[_rand(rng, f(i, j), torch.float32) for j in range(world)] for i in range(world)] for f in rounds]

    def rank():
        r, out = dist.get_rank(), {}
        for k in range(len(rounds)):
            chunks = [c.clone() for c in data[k][r]]
            got = _hand_all_to_all(chunks) if r == hand else ref.all_to_all(chunks)
            for i in range(world):
                out[f"o{k}{i}"] = got[i]
        return _pack(out)
    results = _world(rank, world)
    for k in range(len(rounds)):
        for j, got in enumerate(results):
            for i in range(world):
                _same(got[f"o{k}{i}"], data[k][i][j], f"round {k}: rank {j}'s entry {i} (rank {hand} by hand)")


@case("all_to_all", "all_to_all messages per peer are: int64 [ndim], int64 shape if ndim > 0, the values if any; "
                    "only send/recv/isend/irecv, every isend waited, W = 4 (statement)")
def _(ref):
    world, rng = 4, np.random.default_rng(146)
    shapes = lambda i, j: [(), (0,), (3, 2), (0, 5), (1, 2, 2)][(i * 3 + j) % 5]  # noqa: E731
    chunks = [[_rand(rng, shapes(i, j), torch.float64) for j in range(world)] for i in range(world)]

    def expected(c):
        msgs = [("int64", [c.dim()])]
        if c.dim():
            msgs.append(("int64", list(c.shape)))
        if c.numel():
            msgs.append((str(c.dtype), c.numel()))
        return msgs

    def rank():
        r, problems = dist.get_rank(), []
        with _Spy() as spy:
            ref.all_to_all([c.clone() for c in chunks[r]])
        problems += spy.problems("all_to_all")
        for j in range(world):
            if j == r:
                continue
            sent = [m for m in spy.messages if m["kind"] == "send" and m["peer"] == j]
            seen = [("int64" if m["dtype"] == torch.int64 else str(m["dtype"]),
                     m["values"] if m["dtype"] == torch.int64 else m["numel"]) for m in sent]
            if seen != expected(chunks[r][j]):
                problems.append(f"to rank {j} (chunk of shape {tuple(chunks[r][j].shape)}) it sent {seen}; "
                                f"the protocol sends {expected(chunks[r][j])}")
            got = [m["numel"] for m in spy.messages if m["kind"] == "recv" and m["peer"] == j]
            c = chunks[j][r]
            want = [1] + ([c.dim()] if c.dim() else []) + ([c.numel()] if c.numel() else [])
            if got != want:
                problems.append(f"from rank {j} it received messages of {got} elements, the protocol has {want}")
        return _pack({"problems": "; ".join(problems[:4])})
    _no_problems(_world(rank, world))


@case("all_to_all", "40 all_to_alls in a row with random shapes and dtypes (bool included), W = 3 "
                    "(distributed_test stress idea; oracle: rank i's chunks[j] on rank j)")
def _(ref):
    world, rng, count = 3, np.random.default_rng(147), 40
    dtypes = _FLOATS + _INTS + (torch.bool,)
    plan = []
    for _ in range(count):
        d = dtypes[rng.integers(len(dtypes))]
        row = []
        for i in range(world):
            cols = []
            for j in range(world):
                shape = tuple(int(s) for s in rng.integers(0, 4, rng.integers(0, 3)))
                cols.append(torch.from_numpy(rng.integers(0, 2, shape).astype(bool)) if d == torch.bool else _rand(rng, shape, d))
            row.append(cols)
        plan.append(row)

    def rank():
        r, out = dist.get_rank(), {}
        for k, row in enumerate(plan):
            got = ref.all_to_all([c.clone() for c in row[r]])
            for i in range(world):
                out[f"o{k}_{i}"] = got[i]
        return _pack(out)
    results = _world(rank, world)
    for k, row in enumerate(plan):
        for j, got in enumerate(results):
            for i in range(world):
                _same(got[f"o{k}_{i}"], row[i][j], f"call {k} ({row[0][0].dtype}): rank {j}'s entry {i}")


@case("all_to_all", "all_to_all of 2^15-element float64 chunks and (128, 64) int32 chunks, W = 4 (vs dist.all_to_all)")
def _(ref):
    world, rng = 4, np.random.default_rng(148)
    xs = [[_rand(rng, (2 ** 15,), torch.float64) for _ in range(world)] for _ in range(world)]
    ys = [[_rand(rng, (128, 64), torch.int32) for _ in range(world)] for _ in range(world)]

    def rank():
        r, out = dist.get_rank(), {}
        got = ref.all_to_all([c.clone() for c in xs[r]])
        out["x"] = all(torch.equal(got[i], xs[i][r]) for i in range(world))
        got = ref.all_to_all([c.clone() for c in ys[r]])
        theirs = [torch.empty(128, 64, dtype=torch.int32) for _ in range(world)]
        dist.all_to_all(theirs, [c.clone() for c in ys[r]])
        out["y"] = len(got) == len(theirs) and all(torch.equal(a, b) for a, b in zip(got, theirs, strict=True))
        out["y2"] = all(torch.equal(got[i], ys[i][r]) for i in range(world))
        return _pack(out)
    for r, got in enumerate(_world(rank, world)):
        if not int(got["x"]):
            _fail(f"rank {r}: 2^15-element float64 entries are not the senders' chunks")
        if not int(got["y"]) or not int(got["y2"]):
            _fail(f"rank {r}: (128, 64) int32 entries differ from dist.all_to_all / the senders' chunks")


@case("all_to_all", "all_to_all at W = 5 (odd) with chunks of length i + j, int64 (oracle: rank i's chunks[j])")
def _(ref):
    world = 5
    chunks = [[torch.arange(i + j) + 100 * i for j in range(world)] for i in range(world)]

    def rank():
        r = dist.get_rank()
        got = ref.all_to_all([c.clone() for c in chunks[r]])
        return _pack({f"o{i}": got[i] for i in range(world)})
    _a2a_expect(_world(rank, world), chunks, world)


# ====================================================================================================
# alpha_beta
# ====================================================================================================
def _lstsq(sizes, seconds):
    n, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    scale = n.max()
    a = np.stack([1.0 / t, (n / scale) / t], axis=1)
    sol = np.linalg.lstsq(a, np.ones_like(t), rcond=None)[0]
    return float(sol[0]), float(sol[1] / scale)


def _objective(alpha, beta, sizes, seconds):
    n, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    return float(np.sum(((alpha + beta * n - t) / t) ** 2))


def _check_fit(ref, sizes, seconds, what, params=True):
    got = ref.fit_alpha_beta(sizes, seconds)
    if len(got) != 2 or not all(isinstance(v, float) for v in got):
        _fail(f"{what}: fit_alpha_beta should return two Python floats, got {got!r}")
    a, b = got
    wa, wb = _lstsq(sizes, seconds)
    mine, best = _objective(a, b, sizes, seconds), _objective(wa, wb, sizes, seconds)
    if not mine <= best * (1 + 1e-9) + 1e-12:
        _fail(f"{what}: (alpha, beta) = ({a!r}, {b!r}) has relative-error objective {mine!r}; "
              f"least squares reaches {best!r} at ({wa!r}, {wb!r})")
    if params and not (math.isclose(a, wa, rel_tol=1e-6, abs_tol=1e-15) and math.isclose(b, wb, rel_tol=1e-6, abs_tol=1e-22)):
        _fail(f"{what}: (alpha, beta) = ({a!r}, {b!r}), least squares gives ({wa!r}, {wb!r})")
    return a, b


SIZES = [2 ** k for k in range(4, 25, 2)]


@case("alpha_beta", "fit_alpha_beta recovers noiseless lines alpha + beta n exactly, several (alpha, beta) "
                    "over 16 B .. 16 MiB (statement; numpy lstsq oracle)")
def _(ref):
    for alpha, beta in ((5e-5, 1 / 4e9), (2e-6, 1 / 20e9), (1e-3, 1 / 1e8), (3e-5, 0.0)):
        times = [alpha + beta * n for n in SIZES]
        a, b = _check_fit(ref, SIZES, times, f"noiseless alpha={alpha}, beta={beta}")
        if not (math.isclose(a, alpha, rel_tol=1e-7) and math.isclose(b, beta, rel_tol=1e-7, abs_tol=1e-24)):
            _fail(f"noiseless alpha={alpha}, beta={beta}: got ({a!r}, {b!r})")


@case("alpha_beta", "fit_alpha_beta on noisy timings reaches the least relative error to within 1e-9 "
                    "(statement; numpy lstsq on the row-scaled problem), five data sets")
def _(ref):
    rng = np.random.default_rng(151)
    for k in range(5):
        sizes = sorted(int(s) for s in rng.integers(0, 2 ** 26, 9))
        times = [(2e-5 + n / 3e9) * float(np.exp(0.3 * rng.standard_normal())) for n in sizes]
        _check_fit(ref, sizes, times, f"noisy data set {k}")


@case("alpha_beta", "fit_alpha_beta leaves alpha unconstrained: a negative alpha when it fits best (statement)")
def _(ref):
    sizes = [1000, 10_000, 100_000, 1_000_000]
    times = [1e-9 * n ** 1.05 for n in sizes]
    a, _ = _check_fit(ref, sizes, times, "superlinear timings")
    if not a < 0:
        _fail(f"the least-relative-error alpha of these timings is negative, got {a!r}")


@case("alpha_beta", "fit_alpha_beta through two points interpolates them exactly, size 0 included (statement)")
def _(ref):
    for sizes, times in (([0, 1000], [1e-5, 3e-5]), ([64, 2 ** 20], [4e-6, 2.5e-4]), ([10, 20], [5.0, 4.0])):
        a, b = _check_fit(ref, sizes, times, f"two points {sizes}")
        for n, t in zip(sizes, times, strict=True):
            if not math.isclose(a + b * n, t, rel_tol=1e-9):
                _fail(f"two points {sizes}, {times}: the fit gives {a + b * n!r} at {n}, expected {t!r}")


@case("alpha_beta", "fit_alpha_beta stays accurate for sizes from 0 to 2^34 bytes (badly scaled columns; statement "
                    "asks for an accurate solver)")
def _(ref):
    rng = np.random.default_rng(152)
    sizes = [0, 8, 512, 2 ** 16, 2 ** 22, 2 ** 28, 2 ** 31, 2 ** 34]
    times = [(7e-7 + n / 9e9) * float(np.exp(0.05 * rng.standard_normal())) for n in sizes]
    _check_fit(ref, sizes, times, "sizes up to 2^34")
    times = [3e-7 + n / 2e10 for n in sizes]
    _check_fit(ref, sizes, times, "noiseless, sizes up to 2^34")


@case("alpha_beta", "fit_alpha_beta accepts numpy arrays and tuples as well as lists (the notebook passes the "
                    "times run_world returned)")
def _(ref):
    times = [(4e-5 + n / 5e9) * (1 + 0.01 * (-1) ** i) for i, n in enumerate(SIZES)]
    _check_fit(ref, SIZES, times, "lists")
    for what, s, t in (("numpy arrays", np.array(SIZES, dtype=np.int64), np.array(times)), ("tuples", tuple(SIZES), tuple(times))):
        got = ref.fit_alpha_beta(s, t)
        if not all(isinstance(v, float) for v in got):
            _fail(f"{what}: fit_alpha_beta should return Python floats, got {got!r}")
        wa, wb = _lstsq(s, t)
        if not (math.isclose(got[0], wa, rel_tol=1e-6) and math.isclose(got[1], wb, rel_tol=1e-6)):
            _fail(f"{what}: got {got!r}, least squares gives ({wa!r}, {wb!r})")


@case("alpha_beta", "fit_alpha_beta raises ValueError for different lengths, fewer than two distinct sizes, "
                    "a negative size, or a time that is zero, negative, inf or NaN (statement)")
def _(ref):
    bad = {"3 sizes, 2 times": ([1, 2, 3], [1.0, 2.0]), "2 sizes, 3 times": ([1, 2], [1.0, 2.0, 3.0]),
           "empty lists": ([], []), "one point": ([8], [1.0]), "one distinct size": ([8, 8, 8], [1.0, 2.0, 1.5]),
           "negative size": ([-1, 8, 16], [1.0, 2.0, 3.0]), "zero time": ([1, 8, 16], [0.0, 2.0, 3.0]),
           "negative time": ([1, 8, 16], [1.0, -2.0, 3.0]), "inf time": ([1, 8, 16], [1.0, 2.0, math.inf]),
           "NaN time": ([1, 8, 16], [1.0, math.nan, 3.0])}
    for what, (s, t) in bad.items():
        flag = _raises_value_error(lambda: ref.fit_alpha_beta(s, t))
        if flag != 1:
            _fail(f"fit_alpha_beta with {what} should raise ValueError "
                  f"({'raised another exception' if flag == 2 else 'did not raise'})")


@case("alpha_beta", "fit_alpha_beta with repeated measurements per size does not depend on the order of the "
                    "points (statement; numpy lstsq oracle)")
def _(ref):
    rng = np.random.default_rng(153)
    sizes = [s for s in (64, 4096, 2 ** 18, 2 ** 22) for _ in range(3)]
    times = [(1e-5 + n / 6e9) * float(np.exp(0.1 * rng.standard_normal())) for n in sizes]
    a, b = _check_fit(ref, sizes, times, "repeated sizes")
    order = rng.permutation(len(sizes))
    a2, b2 = _check_fit(ref, [sizes[i] for i in order], [times[i] for i in order], "repeated sizes, shuffled")
    if not (math.isclose(a, a2, rel_tol=1e-9) and math.isclose(b, b2, rel_tol=1e-9)):
        _fail(f"shuffling the points changed the fit from ({a!r}, {b!r}) to ({a2!r}, {b2!r})")


@case("alpha_beta", "fit_alpha_beta scales with the times: times x 1000 gives (1000 alpha, 1000 beta) "
                    "(relative error is unit-free)")
def _(ref):
    rng = np.random.default_rng(154)
    sizes = [16, 256, 4096, 65536, 2 ** 20]
    times = [(3e-6 + n / 1e10) * float(np.exp(0.2 * rng.standard_normal())) for n in sizes]
    a, b = _check_fit(ref, sizes, times, "times in seconds")
    a2, b2 = _check_fit(ref, sizes, [1000 * t for t in times], "times in milliseconds")
    if not (math.isclose(a2, 1000 * a, rel_tol=1e-8) and math.isclose(b2, 1000 * b, rel_tol=1e-8)):
        _fail(f"times x 1000 should give (1000 alpha, 1000 beta) = ({1000 * a!r}, {1000 * b!r}), got ({a2!r}, {b2!r})")


@case("alpha_beta", "fit_alpha_beta weighs points by relative error, not absolute: 16 MiB timings do not "
                    "swamp the small sizes (statement's objective, not ordinary least squares)")
def _(ref):
    sizes = [16, 256, 4096, 65536, 2 ** 20, 2 ** 24]
    times = [1.0e-5, 1.3e-5, 0.9e-5, 2.5e-5, 2.6e-4, 5.0e-3]
    ols = np.linalg.lstsq(np.stack([np.ones(6), np.asarray(sizes, float)], 1), np.asarray(times), rcond=None)[0]
    assert _objective(*ols, sizes, times) > 2 * _objective(*_lstsq(sizes, times), sizes, times)  # the data tell them apart
    _check_fit(ref, sizes, times, "timings over six decades")


def run() -> int:
    return SUITE.run()
