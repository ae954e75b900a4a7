# ---
# jupyter:
#   inside_pytorch:
#     lab: lab09
#     title: Collectives from send and recv
#   jupytext:
#     notebook_metadata_filter: inside_pytorch,kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Lab 9 — Collectives from send and recv
#
# Data-parallel training ends every step with an **all-reduce**: each of $W$ processes (*ranks*) holds
# a gradient, and each must end up with the sum of all of them. `torch.distributed` does it in one
# call, `dist.all_reduce(t)`. In this lab you build that call, and its relatives, out of the only
# thing a network really offers: one rank sending a buffer to another.
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `tree` | a binomial tree: `tree_broadcast` and `tree_reduce` from any root, in $\lceil\log_2 W\rceil$ rounds | 25 | 2 |
# | `ring` | chunk boundaries for any size, `ring_reduce_scatter`, `ring_all_gather`, and the two together: `ring_all_reduce` | 40 | 3 |
# | `all_to_all` | every rank sends a different tensor to every other rank | 15 | 1.5 |
# | `alpha_beta` | the α-β cost model, fitted to your own timings, and used to predict | 20 | 1 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 7.5 in all.
#
# Everything runs on your CPU: each rank is a separate Python process, and the processes talk
# over TCP on `127.0.0.1` through the **gloo** backend. `run_world(fn, W, inputs)` (imported below)
# starts $W$ ranks, gives rank $r$ the tensors `inputs[r]`, runs `fn(*tensors)` on each, and returns
# every rank's result to you as numpy arrays. Your functions never start processes themselves: they
# take a `group` (a `ProcessGroup`; `None` means all ranks) and run on every rank of it, like
# `torch.distributed`'s own collectives — so they work unchanged under `torchrun`, across machines.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code, then run the part's
# `check("...")` cell: a few public tests start small worlds and compare you with the lab's rules and
# with `torch.distributed`. The hidden graders use more and different inputs, world sizes 1 to 6,
# other roots and subgroups, so a green `check` is a good sign, not a guarantee.
#
# Ground rules:
#
# * Inside your collectives, communicate **only** with `dist.send`, `dist.recv`, `dist.isend` and
#   `dist.irecv`, and compute with tensor operations. No `dist.broadcast`, `dist.reduce`,
#   `dist.all_reduce`, `dist.all_gather`, `dist.reduce_scatter`, `dist.all_to_all`, `dist.barrier`,
#   `batch_isend_irecv`, object collectives, new process groups, or the store: those are what you are
#   rebuilding. The graders can tell (see *Reduction order* below, and they also run one rank of your
#   world themselves, speaking this lab's protocol and nothing else: a rank that waits in a collective
#   waits forever, and the case fails on its timeout).
# * `src`, `dst` and every peer you talk to are ranks **within `group`**: `dist.get_rank(group)`,
#   `dist.get_world_size(group)`, and `dist.send(t, group=group, group_dst=k)` /
#   `dist.recv(t, group=group, group_src=k)` take group ranks directly.
# * Wait for every `isend` / `irecv` you start (`work.wait()`) before your function returns. A send
#   still in flight when its process exits is lost: the peer's `recv` fails with "Connection closed
#   by peer", or waits until the timeout.
# * gloo's `send` (and an `isend`'s `wait()`) returns only once the peer has posted the matching
#   `recv`, whatever the size: two ranks that both `send` to each other first deadlock, even for a
#   single element. Start the send with `isend`, then `recv`, then wait for the send.
# * Messages carry no metadata: `recv` needs a tensor of the right size and dtype, allocated in
#   advance. Both sides must therefore agree on every message's size from what they already know.
#   gloo does not forgive a mismatch: a message longer than the receiving tensor kills the receiving
#   process ("Received data size doesn't match expected size"), a shorter one silently fills only
#   the start of it.
#   A message of zero elements is never sent (and never received): skip it on both sides.
#
# **Reduction order.** Floating-point addition is not associative: `(a + b) + c` and `a + (b + c)`
# may differ in the last bit. Each algorithm below fixes the order in which it combines the ranks'
# values, and the graders check SUM and PRODUCT of float tensors **bit for bit** against that order.
# A different algorithm — or `dist.all_reduce`, which uses gloo's own order — gives other bits.
# (MAX and MIN are order-free, except that NaN must propagate as in `torch.maximum`, which gloo does
# not do; -0.0 and +0.0 count as equal.)

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check
from labkit.world import run_world

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import operator
import time

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

# %% [markdown] nbgrader={"grade": false, "grade_id": "helpers-md", "locked": true, "schema_version": 3, "solution": false}
# ## Given: the plumbing
#
# These helpers are yours to use (and to read: every collective below needs them). `reduce_fn(op)`
# maps a `ReduceOp` to its element-wise torch function; `_send` starts an `isend` and `_recv` does a
# blocking `recv`, both to or from a **group rank**, and both do nothing for a tensor of zero
# elements (so both sides skip empty messages without talking about it); `_wait` waits for any number
# of sends, ignoring the `None` of a skipped one; `_flat` / `_write_back` let you work on a flat
# contiguous tensor and still update a non-contiguous one in place.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "helpers", "locked": true, "schema_version": 3, "solution": false}
def reduce_fn(op):
    """The element-wise torch function of a reduction op: torch.add for ReduceOp.SUM, ..."""
    for known, fn in ((ReduceOp.SUM, torch.add), (ReduceOp.PRODUCT, torch.mul),
                      (ReduceOp.MIN, torch.minimum), (ReduceOp.MAX, torch.maximum)):
        if op == known:
            return fn
    raise ValueError(f"unsupported reduction op {op!r}: use SUM, PRODUCT, MIN or MAX")


def _rank_world(group):
    """(rank within group, group size); ValueError on a rank outside the group."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("this rank is not a member of the group")
    return rank, world


def _check_root(root, world):
    """root as an int; ValueError unless it is a rank of the group (bool is not a rank)."""
    try:
        index = None if isinstance(root, bool) else operator.index(root)
    except TypeError:
        index = None
    if index is None or not 0 <= index < world:
        raise ValueError(f"root {root!r} is not a rank of a group of {world}")
    return index


def _flat(tensor):
    """A flat contiguous tensor holding tensor's values: a view when possible, else a copy."""
    return tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)


def _write_back(tensor, flat):
    """Make `tensor` hold `flat`'s values (nothing to do when flat is a view of it)."""
    if not tensor.is_contiguous():          # _flat made a copy
        tensor.copy_(flat.view(tensor.shape))
    return tensor


def _send(t, peer, group):
    """isend t to group rank `peer` (None, and nothing sent, when t is empty)."""
    return dist.isend(t, group=group, group_dst=peer) if t.numel() else None


def _recv(t, peer, group):
    """Blocking receive into t from group rank `peer` (nothing when t is empty)."""
    if t.numel():
        dist.recv(t, group=group, group_src=peer)


def _wait(*works):
    for work in works:
        if work is not None:
            work.wait()


# %% [markdown] nbgrader={"grade": false, "grade_id": "world-md", "locked": true, "schema_version": 3, "solution": false}
# ## Warm-up: a world of ranks (not graded)
#
# Each rank runs the same function on its own data; `dist.get_rank()` tells them apart. The cell
# below starts 3 ranks; rank 0 sends a tensor to rank 1, rank 1 adds its own and sends on to rank 2.
#
# *Predict first*: what does each rank return? How long does starting a world of 3 take, compared
# with sending the message?

# %% nbgrader={"grade": false, "grade_id": "world-explore", "locked": false, "schema_version": 3, "solution": false}
import numpy as np  # noqa: E402


def pass_along(x):
    rank = dist.get_rank()
    if rank > 0:
        incoming = torch.empty_like(x)
        dist.recv(incoming, rank - 1)
        x = x + incoming
    if rank + 1 < dist.get_world_size():
        dist.send(x, rank + 1)
    return x


start = time.perf_counter()
print(run_world(pass_along, 3, [[np.full(4, 10.0 ** r)] for r in range(3)]))
print(f"world of 3 started, ran and torn down in {time.perf_counter() - start:.2f} s")

# %% [markdown] nbgrader={"grade": false, "grade_id": "tree-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Broadcast and reduce as binomial trees (25 points)
#
# A root that sends its tensor to the other $W-1$ ranks one by one needs $W-1$ rounds. If every rank
# that already has the data passes it on, the number of holders doubles each round:
# $\lceil\log_2 W\rceil$ rounds. The tree that does this is the **binomial tree**.
#
# Number ranks relative to the root: $v = (\text{rank} - \text{root}) \bmod W$, so the root is $v=0$.
#
# * `binomial_parent(v)`: $v$ with its lowest set bit cleared (`v & (v - 1)`); the root has none
#   (return `None`). `binomial_parent(6) == 4`, `binomial_parent(4) == 0`.
# * `binomial_children(v, world)`: $v + 1, v + 2, v + 4, \dots$, nearest first, for each step $2^k$
#   smaller than $v$'s lowest set bit (every power of two for $v = 0$) and with $v + 2^k < W$.
#   `binomial_children(0, 8) == [1, 2, 4]`, `binomial_children(4, 8) == [5, 6]`,
#   `binomial_children(4, 6) == [5]`, `binomial_children(3, 8) == []`.
#
# The subtree of $v$ is the contiguous block of relative ranks $[v, v + \text{lowbit}(v))$ (cut at
# $W$), and $v$'s children split it in halves, quarters, ...
#
# **`tree_broadcast(tensor, src, group=None)`**: afterwards every rank's `tensor` holds `src`'s
# values, in place (same shape and dtype on every rank, as for `dist.broadcast`); returns `tensor`.
# A rank first receives from its parent (the root has nothing to receive), then sends to its children
# **farthest first** (the farthest child heads the largest subtree, so it should start earliest; the
# order of the sends changes no value, and the graders do not check it).
#
# **`tree_reduce(tensor, dst, op=ReduceOp.SUM, group=None)`**: afterwards `dst`'s `tensor` holds the
# reduction of all ranks' tensors, in place; every other rank's `tensor` is **unchanged** (gloo's
# `dist.reduce` leaves partial sums there; you must not). Returns `tensor`. A rank starts from a copy
# of its own values, `acc`; for each child **nearest first** it receives the child's partial result
# and sets `acc = op(acc, received)`; then it sends `acc` to its parent. So the operands are combined
# in relative-rank order, grouped by the tree: with $W = 4$ and `dst = 0`
# $(x_0 \oplus x_1) \oplus (x_2 \oplus x_3)$; with $W = 3$: $(x_0 \oplus x_1) \oplus x_2$; with $W=4$
# and `dst = 2`: $(x_2 \oplus x_3) \oplus (x_0 \oplus x_1)$.
#
# Shared rules for every collective of this lab:
#
# * `op` is one of `ReduceOp.SUM`, `PRODUCT`, `MIN`, `MAX`, applied as `torch.add`, `torch.mul`,
#   `torch.minimum`, `torch.maximum` in the tensor's own dtype (integers wrap around on overflow, as
#   in torch). Any other op raises `ValueError`, as does a root outside `0 … W-1`, on every rank,
#   before anything is sent (the given `reduce_fn` and `_check_root` do both checks).
# * Tensors of any shape (0-d included), any size (size-0 included: nothing is sent), any layout
#   (a non-contiguous tensor is still updated in place), float or integer dtypes.
# * A world of one rank is legal: nothing is sent.
#
# *Hint*: work on `flat = _flat(tensor)`: a view when `tensor` is contiguous (receiving into it writes
# `tensor`), otherwise a contiguous copy that `_write_back(tensor, flat)` copies back at the end.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "tree-solution", "locked": false, "schema_version": 3, "solution": true}
def binomial_parent(v):
    """Parent of relative rank v in the binomial tree (None for the root, v == 0)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 tree-solution
    return None if v == 0 else v & (v - 1)
    ### END SOLUTION


def binomial_children(v, world):
    """Children of relative rank v, nearest first: v + 1, v + 2, v + 4, ... below v's lowest set bit."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 tree-solution
    lowbit = v & -v if v else 1 << world.bit_length()
    children, step = [], 1
    while step < lowbit and v + step < world:
        children.append(v + step)
        step <<= 1
    return children
    ### END SOLUTION


def tree_broadcast(tensor, src, group=None):
    """Every rank's tensor gets src's values, through a binomial tree rooted at src."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 tree-solution
    rank, world = _rank_world(group)
    src = _check_root(src, world)
    if world == 1 or tensor.numel() == 0:
        return tensor
    flat = _flat(tensor)
    v = (rank - src) % world
    parent = binomial_parent(v)
    if parent is not None:
        _recv(flat, (parent + src) % world, group)
    for child in reversed(binomial_children(v, world)):      # farthest first
        _wait(_send(flat, (child + src) % world, group))
    return _write_back(tensor, flat) if parent is not None else tensor
    ### END SOLUTION


def tree_reduce(tensor, dst, op=ReduceOp.SUM, group=None):
    """dst's tensor gets op over all ranks' tensors, combined up a binomial tree; others unchanged."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 tree-solution
    rank, world = _rank_world(group)
    dst = _check_root(dst, world)
    combine = reduce_fn(op)
    if world == 1 or tensor.numel() == 0:
        return tensor
    v = (rank - dst) % world
    acc = tensor.detach().reshape(-1).clone()
    received = torch.empty_like(acc)
    for child in binomial_children(v, world):                # nearest first: rank order
        _recv(received, (child + dst) % world, group)
        combine(acc, received, out=acc)
    parent = binomial_parent(v)
    if parent is None:
        tensor.copy_(acc.view(tensor.shape))
    else:
        _wait(_send(acc, (parent + dst) % world, group))
    return tensor
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "tree-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: with W = 4 and root 0, which rank sends to which, in which round? How many rounds
# would W = 8 take, and W = 5?
for world in (4, 5, 8):
    print(world, {v: binomial_children(v, world) for v in range(world)})


# Predict: does your tree_reduce of float32 values agree bit for bit with dist.reduce at W = 2?
# At W = 3? (dist.reduce is allowed here: this cell is an experiment, not a collective of yours.)
def reduce_both(x):
    mine, theirs = tree_reduce(x.clone(), 0), x.clone()
    dist.reduce(theirs, 0)
    return mine, theirs


rng = np.random.default_rng(0)
for world in (2, 3):
    xs = [(rng.standard_normal(1000) * 10.0 ** rng.integers(-6, 6, 1000)).astype(np.float32) for _ in range(world)]
    results = run_world(reduce_both, world, [[x] for x in xs])
    mine, theirs = results[0]
    print(f"W={world}: {np.count_nonzero(mine != theirs)} of 1000 sums differ in some bit")

# %% nbgrader={"grade": true, "grade_id": "tree", "locked": true, "points": 25, "schema_version": 3, "solution": false} part_title="Broadcast and reduce as binomial trees"
check("tree")

# %% [markdown] nbgrader={"grade": false, "grade_id": "ring-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — The ring: reduce-scatter + all-gather = all-reduce (40 points)
#
# A tree reduce followed by a tree broadcast moves the whole tensor $2\lceil\log_2 W\rceil$ times
# along its critical path. The **ring** does better for large tensors: cut the tensor into $W$
# chunks, arrange the ranks in a circle (rank $r$ sends to $r+1$ and receives from $r-1$, modulo $W$),
# and keep every link busy at every step.
#
# **Chunks.** `chunk_bounds(n, world)` returns $W+1$ offsets `b` with chunk $c$ = elements
# `b[c]:b[c+1]` of the flattened tensor: the first `n % world` chunks hold `n // world + 1`
# elements, the others `n // world` (as `torch.tensor_split(x, world)` cuts them). So
# `chunk_bounds(10, 4) == [0, 3, 6, 8, 10]` and `chunk_bounds(2, 4) == [0, 1, 2, 2, 2]`: chunks
# may be empty. `n ≥ 0`, `world ≥ 1`, else `ValueError`. (Computing them with `torch.tensor_split` is fine.)
#
# **`ring_reduce_scatter(tensor, op=ReduceOp.SUM, group=None)`** returns a new 1-D tensor: chunk $r$
# (of the flattened tensor) reduced over all ranks, on rank $r$. `tensor` is not modified. It runs
# $W-1$ steps; at step $s = 0, 1, \dots, W-2$, rank $r$
#
# 1. sends its chunk $(r - 1 - s) \bmod W$ to rank $r+1$,
# 2. receives chunk $(r - 2 - s) \bmod W$ from rank $r - 1$, and sets its own copy of that chunk to
#    `op(received, own)` — the **received partial on the left**.
#
# At step 0 a rank sends its own raw values; at each later step it sends what it has just
# accumulated. Follow chunk $c$: it starts at rank $c+1$, travels once around the ring and ends at
# rank $c$, so its value is the left fold
# $$\big(\dots\big((x_{c+1} \oplus x_{c+2}) \oplus x_{c+3}\big) \oplus \dots\big) \oplus x_{c}
# \qquad\text{(rank indices modulo } W\text{)}.$$
# With $W = 4$: chunk 0 is $((x_1 \oplus x_2) \oplus x_3) \oplus x_0$, chunk 3 is
# $((x_0 \oplus x_1) \oplus x_2) \oplus x_3$.
#
# **`ring_all_gather(chunk, sizes, group=None)`**: rank $r$ holds `chunk` (any shape, `sizes[r]`
# elements); `sizes` lists every rank's number of elements (the same list on every rank). Returns a
# new 1-D tensor, the concatenation of every rank's chunk in rank order, in `chunk`'s dtype. At step
# $s = 0, \dots, W-2$ rank $r$ sends chunk $(r - s) \bmod W$ to $r+1$ and receives chunk
# $(r - 1 - s) \bmod W$ from $r-1$. `ValueError` when `len(sizes) != W`, and on a rank whose `chunk`
# does not hold `sizes[r]` elements (its peers cannot know: they wait, and a launcher such as torchrun
# ends the job when that rank fails).
#
# **`ring_all_reduce(tensor, op=ReduceOp.SUM, group=None)`**: reduce-scatter, then all-gather, in
# place (like `dist.all_reduce`); returns `tensor`. Every rank ends with the same values, chunk $c$
# reduced in the order above.
#
# *Predict first*: in a ring all-reduce of $n$ bytes, how many bytes does each rank send? How does
# that compare with the tree (reduce, then broadcast)?
#
# *Hints*: receive straight into the slice of the buffer where the data belongs (a slice of a
# contiguous 1-D tensor is contiguous, and `recv` fills it in place). Each step is `isend` to the
# right, `recv` from the left, then wait for the send (see the ground rules: blocking sends on both
# sides deadlock).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "ring-solution", "locked": false, "schema_version": 3, "solution": true}
def chunk_bounds(n, world):
    """world + 1 offsets: chunk c of n elements is [b[c], b[c + 1]); the first n % world are one longer."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    if n < 0 or world < 1:
        raise ValueError(f"need n >= 0 and world >= 1, got n={n}, world={world}")
    base, extra = divmod(n, world)
    return [c * base + min(c, extra) for c in range(world + 1)]
    ### END SOLUTION


_WORKSPACE = {}


def _workspace(numel, dtype):
    """A receive buffer reused from call to call (a fresh multi-MiB tensor costs page faults every time)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    buf = _WORKSPACE.get(dtype)
    if buf is None or buf.numel() < numel:
        buf = _WORKSPACE[dtype] = torch.empty(numel, dtype=dtype)
    return buf[:numel]
    ### END SOLUTION


def _reduce_scatter_(flat, bounds, op, group, sends):
    """In place on a flat contiguous tensor: afterwards chunk `rank` holds the reduction.
    The isends are appended to `sends`, for the caller to wait for."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    rank, world = _rank_world(group)
    combine = reduce_fn(op)
    right, left = (rank + 1) % world, (rank - 1) % world
    received = _workspace(max(bounds[c + 1] - bounds[c] for c in range(world)), flat.dtype)
    for step in range(world - 1):
        out_c, in_c = (rank - 1 - step) % world, (rank - 2 - step) % world
        sends.append(_send(flat[bounds[out_c]:bounds[out_c + 1]], right, group))
        incoming = received[:bounds[in_c + 1] - bounds[in_c]]
        _recv(incoming, left, group)
        own = flat[bounds[in_c]:bounds[in_c + 1]]
        combine(incoming, own, out=own)               # received partial on the left
    return flat
    ### END SOLUTION


def _all_gather_(flat, bounds, group, sends):
    """In place on a flat contiguous tensor whose chunk `rank` is filled: fill the others."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    rank, world = _rank_world(group)
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(world - 1):
        out_c, in_c = (rank - step) % world, (rank - 1 - step) % world
        sends.append(_send(flat[bounds[out_c]:bounds[out_c + 1]], right, group))
        _recv(flat[bounds[in_c]:bounds[in_c + 1]], left, group)
    return flat
    ### END SOLUTION


def ring_reduce_scatter(tensor, op=ReduceOp.SUM, group=None):
    """Rank r's chunk of the flattened tensor, reduced over all ranks around a ring (new 1-D tensor)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    rank, world = _rank_world(group)
    reduce_fn(op)
    flat = tensor.detach().reshape(-1).clone()
    bounds = chunk_bounds(flat.numel(), world)
    sends = []
    _reduce_scatter_(flat, bounds, op, group, sends)
    _wait(*sends)
    return flat[bounds[rank]:bounds[rank + 1]].clone()
    ### END SOLUTION


def ring_all_gather(chunk, sizes, group=None):
    """Every rank's chunk, concatenated in rank order (new 1-D tensor), passed around a ring."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    rank, world = _rank_world(group)
    sizes = [int(s) for s in sizes]
    if len(sizes) != world or any(s < 0 for s in sizes):
        raise ValueError(f"sizes must list {world} non-negative sizes, got {sizes}")
    if chunk.numel() != sizes[rank]:
        raise ValueError(f"rank {rank}'s chunk has {chunk.numel()} elements, sizes says {sizes[rank]}")
    bounds = [0]
    for s in sizes:
        bounds.append(bounds[-1] + s)
    flat = torch.empty(bounds[-1], dtype=chunk.dtype)
    flat[bounds[rank]:bounds[rank + 1]] = chunk.detach().reshape(-1)
    sends = []
    _all_gather_(flat, bounds, group, sends)
    _wait(*sends)
    return flat
    ### END SOLUTION


def ring_all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """In place: every rank's tensor becomes op over all ranks' tensors (ring reduce-scatter + all-gather)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 ring-solution
    rank, world = _rank_world(group)
    reduce_fn(op)
    if world == 1 or tensor.numel() == 0:
        return tensor
    flat = _flat(tensor)
    bounds = chunk_bounds(flat.numel(), world)
    # One wait for every send, at the end (about 5% faster at 4 ranks than waiting step by step). Safe: a
    # sent chunk is written again only by the all-gather, when its reduced value comes back, and that
    # value was computed along a path whose first hop was this very send, so the send is complete.
    sends = []
    _reduce_scatter_(flat, bounds, op, group, sends)
    _all_gather_(flat, bounds, group, sends)
    _wait(*sends)
    return _write_back(tensor, flat)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "ring-explore", "locked": false, "schema_version": 3, "solution": false}
# Predict first: does your ring agree bit for bit with dist.all_reduce at W = 2? W = 3? W = 4?
# (Why can W = 2 never disagree, whatever either side does?)
def all_reduce_both(x):
    mine, theirs = ring_all_reduce(x.clone()), x.clone()
    dist.all_reduce(theirs)
    return mine, theirs


for world in (2, 3, 4):
    xs = [(rng.standard_normal(1000) * 10.0 ** rng.integers(-6, 6, 1000)).astype(np.float32) for _ in range(world)]
    results = run_world(all_reduce_both, world, [[x] for x in xs])
    mine, theirs = results[0]
    print(f"W={world}: {np.count_nonzero(mine != theirs)} of 1000 sums differ; "
          f"max relative difference {np.max(np.abs(mine - theirs) / np.abs(theirs)):.1e}")

# %% nbgrader={"grade": true, "grade_id": "ring", "locked": true, "points": 40, "schema_version": 3, "solution": false} part_title="Ring reduce-scatter, all-gather and all-reduce"
check("ring")

# %% [markdown] nbgrader={"grade": false, "grade_id": "all_to_all-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — All-to-all (15 points)
#
# In an all-to-all every rank has a different message for every other rank: rank $i$'s
# `chunks[j]` must reach rank $j$. Mixture-of-experts layers route tokens to experts this way, and
# "Ulysses" sequence parallelism swaps a sequence split for a head split with it.
#
# **`all_to_all(chunks, group=None)`**: `chunks` is a list of $W$ tensors, one per destination
# rank, of any shapes (0-d and empty included) and one dtype (the same on every rank). Returns a list
# of $W$ new tensors: entry $i$ is rank $i$'s `chunks[rank]`, with its shape; your own entry is a
# copy of `chunks[rank]`. `ValueError` when `len(chunks) != W` or the chunks' dtypes differ.
#
# The receiver does not know the shapes, so each message is preceded by a **header**. Schedule:
# at step $s = 1, \dots, W-1$, rank $r$ sends to $(r + s) \bmod W$ and receives from $(r - s) \bmod W$:
#
# 1. a 1-element `torch.int64` tensor holding the chunk's number of dimensions $d$,
# 2. if $d > 0$, a $d$-element `torch.int64` tensor holding its shape,
# 3. if the chunk has elements, its values (contiguous, in its dtype).
#
# Messages between one pair of ranks arrive in the order they were sent.
#
# *Predict first*: how many steps does this schedule take, and why would "everybody sends to rank 0
# first, then to rank 1, ..." be slower?

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "all_to_all-solution", "locked": false, "schema_version": 3, "solution": true}
def all_to_all(chunks, group=None):
    """Entry i of the result is rank i's chunks[this rank]: a header (ndim, shape), then the values."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 all_to_all-solution
    rank, world = _rank_world(group)
    chunks = list(chunks)
    if len(chunks) != world:
        raise ValueError(f"need one chunk per rank ({world}), got {len(chunks)}")
    dtype = chunks[0].dtype
    if any(c.dtype != dtype for c in chunks):
        raise ValueError("all chunks must share one dtype")
    result = [None] * world
    result[rank] = chunks[rank].detach().clone()
    for step in range(1, world):
        to, frm = (rank + step) % world, (rank - step) % world
        out = chunks[to].detach().contiguous()
        header = [torch.tensor([out.dim()], dtype=torch.int64), torch.tensor(out.shape, dtype=torch.int64)]
        works = [_send(header[0], to, group), _send(header[1], to, group), _send(out.view(-1), to, group)]
        ndim = torch.empty(1, dtype=torch.int64)
        _recv(ndim, frm, group)
        shape = torch.empty(int(ndim), dtype=torch.int64)
        _recv(shape, frm, group)
        incoming = torch.empty(tuple(shape.tolist()), dtype=dtype)
        _recv(incoming.view(-1), frm, group)
        result[frm] = incoming
        _wait(*works)
    return result
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "all_to_all-explore", "locked": false, "schema_version": 3, "solution": false}
# An all-to-all is a transpose of who-holds-what: rank i's row becomes column i.
def transpose_rows(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    parts = [x[j].reshape(1) * 10 + rank for j in range(world)]     # "message (rank -> j)"
    return torch.stack(all_to_all(parts)).reshape(-1)


print(run_world(transpose_rows, 3, [[np.arange(3.0)] for _ in range(3)]))

# %% nbgrader={"grade": true, "grade_id": "all_to_all", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="All-to-all"
check("all_to_all")

# %% [markdown] nbgrader={"grade": false, "grade_id": "alpha_beta-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — The α-β model (20 points)
#
# The simplest useful cost model of a message: sending $n$ bytes takes $T(n) = \alpha + \beta n$,
# a fixed latency $\alpha$ (seconds) plus $\beta$ seconds per byte ($1/\beta$ is the bandwidth).
# With it you can predict an algorithm before running it. For a tensor of $n$ bytes on $W$ ranks:
#
# * ring all-reduce: $2(W-1)$ steps of $n/W$ bytes: $T = 2(W-1)\,\alpha + 2\frac{W-1}{W}\,n\,\beta$;
# * tree reduce + tree broadcast: $2\lceil\log_2 W\rceil$ rounds of $n$ bytes:
#   $T = 2\lceil\log_2 W\rceil\,(\alpha + n\beta)$.
#
# The ring wins on bandwidth, the tree on latency; the model tells you where they cross. It leaves
# out the time of the reductions themselves (a third, per-byte term often called γ), and it assumes
# every rank has a core of its own: the plot below shows what each omission costs on your machine.
#
# **`fit_alpha_beta(sizes, seconds)`** fits the model to measurements: `sizes` are message sizes in
# bytes (integers ≥ 0), `seconds` the measured times (> 0), as lists of one length. Timings span
# orders of magnitude, so minimise the **relative** error:
# $$\min_{\alpha,\beta}\ \sum_i \Big(\frac{\alpha + \beta\, n_i - t_i}{t_i}\Big)^2,$$
# a linear least-squares problem (divide row $i$ of $[1, n_i]\,[\alpha, \beta]^T = t_i$ by $t_i$).
# Return `(alpha, beta)` as Python floats, unconstrained (a negative α fits noisy data too). Raise
# `ValueError` for lists of different lengths, fewer than two distinct sizes, a negative size, or a
# time that is not positive and finite. The graders check that your $(\alpha, \beta)$ reaches the
# least relative error to within $10^{-9}$ of its own, so any accurate solver will do
# (`torch.linalg.lstsq` in float64 is fine; scale the columns if you solve normal equations).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "alpha_beta-solution", "locked": false, "schema_version": 3, "solution": true}
def fit_alpha_beta(sizes, seconds):
    """(alpha, beta) minimising the squared relative error of alpha + beta * size against seconds."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab09 alpha_beta-solution
    n = torch.as_tensor([float(s) for s in sizes], dtype=torch.float64)
    t = torch.as_tensor([float(s) for s in seconds], dtype=torch.float64)
    if n.numel() != t.numel():
        raise ValueError(f"{n.numel()} sizes but {t.numel()} times")
    if (n < 0).any() or torch.unique(n).numel() < 2:
        raise ValueError("need sizes >= 0, at least two of them distinct")
    if not (torch.isfinite(t).all() and (t > 0).all()):
        raise ValueError("times must be positive and finite")
    scale = float(n.max())                                  # columns of similar size: a well-posed solve
    a = torch.stack([1.0 / t, (n / scale) / t], dim=1)
    solution = torch.linalg.lstsq(a, torch.ones_like(t).unsqueeze(1), driver="gelsd").solution.reshape(-1)
    return float(solution[0]), float(solution[1]) / scale
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "alpha_beta-explore", "locked": false, "schema_version": 3, "solution": false}
# Measure: ping-pong between ranks 0 and 1 (a round trip is two messages), then a ring all-reduce at
# W = 2 and 4 ranks. Predict first: from the fitted alpha and beta, what will the ring all-reduce
# of 4 MiB take at W = 4? Where does the tree beat the ring?
# Each point is the fastest of several repetitions: on a busy machine the median mostly measures
# the other programs. With more ranks than cores, ranks take turns: the model fits that too, badly.
import math  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

SIZES = [2 ** k for k in range(4, 25, 2)]     # bytes, 16 B ... 16 MiB


def repetitions(nbytes, reps):
    return int(reps) if nbytes < 2 ** 20 else 5


def ping_pong(reps):
    rank = dist.get_rank()
    times = []
    for nbytes in SIZES:
        buf = torch.zeros(nbytes // 4)
        samples = []
        for _ in range(repetitions(nbytes, reps)):
            start = time.perf_counter()
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            samples.append((time.perf_counter() - start) / 2)
        times.append(min(samples))
    return torch.tensor(times, dtype=torch.float64)


def time_ring(reps):
    times = []
    for nbytes in SIZES:
        x = torch.zeros(nbytes // 4)
        samples = []
        for _ in range(repetitions(nbytes, reps)):
            dist.barrier()                        # start together (allowed here: this is not your collective)
            start = time.perf_counter()
            ring_all_reduce(x)
            samples.append(time.perf_counter() - start)
        times.append(min(samples))
    return torch.tensor(times, dtype=torch.float64)


p2p = run_world(ping_pong, 2, [[np.array(30)], [np.array(30)]], timeout=300)[0][0]
alpha, beta = fit_alpha_beta(SIZES, p2p)
print(f"alpha = {alpha * 1e6:.1f} us, 1/beta = {1 / beta / 1e9:.2f} GB/s")

fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(SIZES, p2p, "o", label="send/recv measured")
ax.loglog(SIZES, [alpha + beta * n for n in SIZES], "-", label="α + βn fitted")
for world in (2, 4):
    ring = run_world(time_ring, world, [[np.array(20)]] * world, timeout=300)[0][0]
    steps = 2 * (world - 1)
    ax.loglog(SIZES, ring, "s", label=f"ring all-reduce W={world} measured")
    ax.loglog(SIZES, [steps * alpha + steps / world * n * beta for n in SIZES], "--",
              label=f"ring W={world} predicted")
    ax.loglog(SIZES, [2 * math.ceil(math.log2(world)) * (alpha + n * beta) for n in SIZES], ":",
              label=f"tree W={world} predicted")
ax.set_xlabel("bytes")
ax.set_ylabel("seconds")
ax.legend(fontsize=7)
plt.show()

# %% nbgrader={"grade": true, "grade_id": "alpha_beta", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="The α-β model"
check("alpha_beta")

# %% [markdown] nbgrader={"grade": false, "grade_id": "multinode-md", "locked": true, "schema_version": 3, "solution": false}
# ## Beyond one machine (not graded)
#
# Nothing in your collectives knows how the ranks were started. Save a script that calls
# `dist.init_process_group("gloo")` (it reads `RANK`, `WORLD_SIZE`, `MASTER_ADDR` and `MASTER_PORT`
# from the environment), runs `ring_all_reduce`, and prints the result; then
#
# ```
# # one machine, 4 ranks
# torchrun --standalone --nproc-per-node 4 my_allreduce.py
# # two machines, 2 ranks each: the same line on both (torchrun hands out the ranks)
# torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint nodeA.example:29500 \
#          --rdzv-id lab09 my_allreduce.py
# # or a static rendezvous: --node-rank 0 on node A, --node-rank 1 on node B
# torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr nodeA.example --master-port 29500 \
#          my_allreduce.py
# ```
#
# (`--node-rank` means nothing to the c10d rendezvous: torchrun ignores it there, with a warning. On
# machines with several network interfaces, `GLOO_SOCKET_IFNAME=eth0` picks the one gloo uses.)
# The α-β model then needs two pairs of constants: one for messages within a machine, one across.

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built the collectives that data, tensor and pipeline parallelism rest on from point-to-
# point messages alone: trees for latency, rings for bandwidth, a header protocol for all-to-all,
# and a cost model that says which to use when. Lab 10 puts them to work in DDP, ZeRO and FSDP.
# Save the notebook and submit it (`make submit LAB=lab09`).
