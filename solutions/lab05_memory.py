# ---
# jupyter:
#   inside_pytorch:
#     lab: lab05
#     title: 'Memory: a caching allocator'
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
# # Lab 5 — Memory: a caching allocator
#
# `cudaMalloc` and `cudaFree` are slow (they can synchronize the whole device), and a training
# step allocates and frees thousands of tensors. So PyTorch never gives GPU memory back after a
# tensor dies: its **caching allocator** (`c10/cuda/CUDACachingAllocator.cpp`) keeps the freed
# block and hands it to the next tensor that fits. It asks the device for big **segments**,
# cuts them into **blocks**, glues neighbouring free blocks back together, and only when the
# device is full does it return cached segments and try again. `torch.cuda.memory_allocated()`
# counts the bytes in live blocks; `torch.cuda.memory_reserved()` counts the segments it holds.
#
# In this lab you build that allocator over a simulated device, with PyTorch's constants and
# rules, and run it on allocation traces recorded from real training steps:
#
# | part | you build | points | hours, about |
# |---|---|---|---|
# | `rounding_pools` | size rounding, small/large pools, segment sizes | 10 | 1 |
# | `best_fit_split` | best-fit search, the split rule, `malloc` | 20 | 2 |
# | `free_coalesce` | `free`, merging a freed block with its free neighbours | 15 | 1.5 |
# | `oom_release` | releasing cached segments and retrying when the device is full | 15 | 1 |
# | `stats` | `memory_stats()`: allocated, reserved, peaks, fragmentation | 15 | 1 |
# | `real_traces` | `replay` of a recorded trace | 15 | 1 |
# | `timeline` | the memory timeline of a training step | 10 | 1 |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 8.5 in all.
#
# **What is real, what is left out.** The constants and rules below are those of PyTorch 2.13's
# native CUDA caching allocator in its default configuration. The real one also has per-stream
# pools (a freed block is reused only on its stream), events that delay reuse across streams,
# expandable segments, `max_split_size_mb` and `roundup_power2_divisions`, a garbage-collection
# threshold, CUDA-graph private pools, and a lock. One device, one stream here.
#
# **How to work.** Replace each `raise NotImplementedError()` with your code and run the part's
# `check("...")` cell. Grading runs hidden tests: generated malloc/free sequences (sizes right at
# the rounding, pool and split boundaries, frees in any order, double frees, full devices) whose
# addresses, blocks and statistics are compared with a reference allocator after every event,
# and real training-step traces. Parts 3–7 run your `malloc`, so they need part 2. The
# cells you fill in must not import `torch` (grading runs them without it); exploration cells
# may. Do the parts in order.

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% [markdown] nbgrader={"grade": false, "grade_id": "setup-md", "locked": true, "schema_version": 3, "solution": false}
# ## The scaffold
#
# * `Device(capacity)` is the GPU. `device.malloc(nbytes)` is `cudaMalloc`: it returns the
#   address of a new segment, or `None` when fewer than `nbytes` bytes are left.
#   `device.free(addr)` is `cudaFree`. (Addresses are virtual, so the device never fragments;
#   only the total counts.)
# * `Block(addr, size, pool, segment)`: a piece of a segment. `allocated` says whether a tensor
#   lives in it; `requested` is the size that tensor asked for; `prev`/`next` are the
#   neighbouring blocks *of the same segment* (`None` at the segment's ends).
# * `BlockPool(name)`: the cached *free* blocks of one pool, kept sorted by `(size, addr)` in
#   `pool.keys` (PyTorch's `std::set` with `BlockComparatorSize`); `pool.blocks` maps an address
#   to its block. Use `pool.insert(block)` and `pool.remove(block)`, never edit the lists.
# * `CachingAllocator(device)` holds `pools` (`"small"`, `"large"`), `active` (address → live
#   block) and `stats`. `self.new_segment(pool_name, nbytes)` asks the device for a segment and
#   returns it as one free block (not in any pool), or `None`; `self.release_segment(block)`
#   gives a whole free segment back. `self.bump(name, delta)` moves a statistic and its peak.
# * `add_to_class(CachingAllocator)` above a function makes it a method.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import bisect

import numpy as np

KiB, MiB = 1024, 1024 * 1024
MIN_BLOCK_SIZE = 512        # kMinBlockSize: every block is a multiple of 512 bytes
SMALL_SIZE = 1 * MiB        # kSmallSize: requests up to 1 MiB use the small pool
SMALL_BUFFER = 2 * MiB      # kSmallBuffer: small-pool segments are 2 MiB
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc: large requests below this share 20 MiB segments
LARGE_BUFFER = 20 * MiB     # kLargeBuffer
ROUND_LARGE = 2 * MiB       # kRoundLarge: bigger requests get their own segment, rounded to 2 MiB


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (torch.cuda.OutOfMemoryError) is a RuntimeError too."""


def format_size(nbytes):
    """Like the allocator's messages: '2.00 MiB'."""
    if nbytes <= 1024:
        return f"{nbytes} bytes"
    if nbytes <= MiB:
        return f"{nbytes / KiB:.2f} KiB"
    if nbytes <= 1024 * MiB:
        return f"{nbytes / MiB:.2f} MiB"
    return f"{nbytes / (1024 * MiB):.2f} GiB"


def add_to_class(cls):
    """Decorator: attach the function below it to `cls` as a method."""
    def register(fn):
        setattr(cls, fn.__name__, fn)
        return fn
    return register


class Device:
    """A simulated GPU with `capacity` bytes; malloc/free are cudaMalloc/cudaFree."""

    def __init__(self, capacity, base=1 << 32):
        self.capacity = int(capacity)
        self.used = 0
        self.segments = {}          # address -> size of every live segment
        self.num_mallocs = 0        # successful cudaMalloc calls
        self.num_frees = 0
        self._next = base

    def malloc(self, nbytes):
        if nbytes <= 0 or nbytes % MIN_BLOCK_SIZE:
            raise ValueError(f"device.malloc({nbytes}): sizes are positive multiples of {MIN_BLOCK_SIZE}")
        if self.used + nbytes > self.capacity:
            return None
        addr = self._next
        self._next += -(-nbytes // SMALL_BUFFER) * SMALL_BUFFER
        self.segments[addr] = nbytes
        self.used += nbytes
        self.num_mallocs += 1
        return addr

    def free(self, addr):
        if addr not in self.segments:
            raise ValueError(f"device.free({addr:#x}): not the start of a segment")
        self.used -= self.segments.pop(addr)
        self.num_frees += 1


class Block:
    """A piece of a segment, free or allocated."""

    def __init__(self, addr, size, pool, segment):
        self.addr, self.size, self.pool, self.segment = addr, size, pool, segment
        self.allocated = False
        self.requested = 0
        self.prev = None            # the block just below in the same segment
        self.next = None            # the block just above in the same segment

    def __repr__(self):
        state = "allocated" if self.allocated else "free"
        return f"Block({self.addr:#x}, {format_size(self.size)}, {self.pool}, {state})"


class BlockPool:
    """The cached free blocks of one pool, sorted by (size, addr)."""

    def __init__(self, name):
        self.name = name
        self.keys = []              # sorted list of (size, addr)
        self.blocks = {}            # addr -> Block

    def insert(self, block):
        if block.addr in self.blocks:
            raise ValueError(f"{block} is already in the {self.name} pool")
        bisect.insort(self.keys, (block.size, block.addr))
        self.blocks[block.addr] = block

    def remove(self, block):
        i = bisect.bisect_left(self.keys, (block.size, block.addr))
        if i == len(self.keys) or self.keys[i] != (block.size, block.addr) or self.blocks.get(block.addr) is not block:
            raise ValueError(f"{block} is not in the {self.name} pool")
        del self.keys[i]
        del self.blocks[block.addr]

    def __len__(self):
        return len(self.keys)

    def __iter__(self):
        return iter([self.blocks[addr] for _, addr in self.keys])


STAT_NAMES = ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment",
              "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


class CachingAllocator:
    def __init__(self, device):
        self.device = device
        self.pools = {"small": BlockPool("small"), "large": BlockPool("large")}
        self.active = {}            # addr -> allocated Block
        self.stats = {name: {"current": 0, "peak": 0} for name in STAT_NAMES}

    def bump(self, name, delta):
        stat = self.stats[name]
        stat["current"] += delta
        stat["peak"] = max(stat["peak"], stat["current"])

    def new_segment(self, pool_name, nbytes):
        """cudaMalloc a segment of `nbytes`; one free Block covering it (in no pool), or None."""
        addr = self.device.malloc(nbytes)
        if addr is None:
            return None
        self.bump("reserved_bytes", nbytes)
        self.bump("segment", 1)
        self.bump("num_device_alloc", 1)
        return Block(addr, nbytes, pool_name, addr)

    def release_segment(self, block):
        """cudaFree a whole segment: `block` must be free, unsplit, and already out of its pool."""
        if block.allocated or block.prev is not None or block.next is not None or block.addr != block.segment:
            raise ValueError(f"{block} is not a whole free segment")
        self.device.free(block.addr)
        self.bump("reserved_bytes", -block.size)
        self.bump("segment", -1)
        self.bump("num_device_free", 1)


# %% [markdown] nbgrader={"grade": false, "grade_id": "rounding-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Rounding and pools (10 points)
#
# Three pure functions decide everything about sizes:
#
# 1. **`round_size(nbytes)`**: every block is a multiple of `MIN_BLOCK_SIZE` (512). Requests
#    below 512 bytes (including 0) get 512; others round *up* to the next multiple of 512.
#    (So here `malloc(0)` takes a 512-byte block, as the C++ `round_size` would; PyTorch's
#    `allocate(0)` returns a null pointer before reaching the allocator. The lab keeps the
#    simpler rule on purpose.)
# 2. **`get_pool(nbytes)`** for a rounded size: `"small"` up to and including `SMALL_SIZE`
#    (1 MiB), `"large"` above.
# 3. **`allocation_size(nbytes)`**: how big a segment to `cudaMalloc` when no cached block fits a
#    rounded request: `SMALL_BUFFER` (2 MiB) for small requests, `LARGE_BUFFER` (20 MiB) for
#    requests below `MIN_LARGE_ALLOC` (10 MiB), and otherwise the request rounded up to a
#    multiple of `ROUND_LARGE` (2 MiB).
#
# So a 4-byte loss scalar takes 512 bytes of a shared 2 MiB segment, a 3 MiB activation takes a
# piece of a 20 MiB segment, and a 64 MiB gradient gets a 64 MiB segment of its own.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "rounding-solution", "locked": false, "schema_version": 3, "solution": true}
def round_size(nbytes):
    """The block size for a request of `nbytes`."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 rounding-solution
    if nbytes < MIN_BLOCK_SIZE:
        return MIN_BLOCK_SIZE
    return MIN_BLOCK_SIZE * ((nbytes + MIN_BLOCK_SIZE - 1) // MIN_BLOCK_SIZE)
    ### END SOLUTION


def get_pool(nbytes):
    """'small' or 'large', for a rounded size."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 rounding-solution
    return "small" if nbytes <= SMALL_SIZE else "large"
    ### END SOLUTION


def allocation_size(nbytes):
    """The size of the segment to cudaMalloc for a rounded request."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 rounding-solution
    if nbytes <= SMALL_SIZE:
        return SMALL_BUFFER
    if nbytes < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((nbytes + ROUND_LARGE - 1) // ROUND_LARGE)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "rounding-explore", "locked": false, "schema_version": 3, "solution": false}
for n in [4, 512, 513, 1 * MiB, 1 * MiB + 1, 3 * MiB, 10 * MiB, 64 * MiB + 4]:
    r = round_size(n)
    print(f"{n:>10} -> block {format_size(r):>10}  {get_pool(r):5}  segment {format_size(allocation_size(r))}")

# %% nbgrader={"grade": true, "grade_id": "rounding_pools", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Rounding and pools"
check("rounding_pools")

# %% [markdown] nbgrader={"grade": false, "grade_id": "malloc-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — Best fit and splitting (20 points)
#
# 1. **`find_free_block(pool, nbytes)`**: the *best fit*: the cached block with the smallest
#    size `>= nbytes`, and among equal sizes the lowest address; `None` if none fits. Because
#    `pool.keys` is sorted by `(size, addr)`, that is one `bisect` (PyTorch's
#    `pool.blocks.lower_bound(&key)`). Do not remove it from the pool here.
# 2. **`should_split(block, nbytes)`**: after putting `nbytes` in `block`, is the remainder
#    worth keeping as a block of its own? In the small pool when it is at least
#    `MIN_BLOCK_SIZE`; in the large pool only when it is *more than* `SMALL_SIZE` (a large
#    block keeps up to 1 MiB of slack rather than leaving a sliver).
# 3. **`CachingAllocator.malloc(self, nbytes)`** returns the address of a block for a request:
#    round the size, choose the pool, take the best fit out of the pool, or else ask for
#    `self.new_segment(pool_name, allocation_size(size))`; if that returns `None`, return
#    `self.malloc_retry(pool_name, size)` instead (part 4). Then split when `should_split`
#    says so: the block keeps the lower `size` bytes, and a new free `Block` for the rest
#    (same pool and segment) goes between it and its old `next` in the linked list, and into the
#    pool. Mark the block allocated, remember `requested = nbytes`, put it in `self.active`, and
#    bump `"allocated_bytes"` by the block's size, `"requested_bytes"` by `nbytes` and
#    `"active"` by 1.
#
# The allocated bytes are the *block* sizes: a large block that was not split counts whole.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "malloc-solution", "locked": false, "schema_version": 3, "solution": true}
def find_free_block(pool, nbytes):
    """The smallest free block of `pool` with size >= nbytes (lowest address on ties), or None."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 malloc-solution
    i = bisect.bisect_left(pool.keys, (nbytes, -1))
    if i == len(pool.keys):
        return None
    return pool.blocks[pool.keys[i][1]]
    ### END SOLUTION


def should_split(block, nbytes):
    """Whether the rest of `block` after `nbytes` becomes a block of its own."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 malloc-solution
    remaining = block.size - nbytes
    if block.pool == "small":
        return remaining >= MIN_BLOCK_SIZE
    return remaining > SMALL_SIZE
    ### END SOLUTION


@add_to_class(CachingAllocator)
def malloc(self, nbytes):
    """Allocate a block for a request of `nbytes`; its address."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 malloc-solution
    size = round_size(nbytes)
    pool_name = get_pool(size)
    pool = self.pools[pool_name]
    block = find_free_block(pool, size)
    if block is not None:
        pool.remove(block)
    else:
        block = self.new_segment(pool_name, allocation_size(size))
        if block is None:
            block = self.malloc_retry(pool_name, size)
    if should_split(block, size):
        rest = Block(block.addr + size, block.size - size, block.pool, block.segment)
        rest.prev, rest.next = block, block.next
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        pool.insert(rest)
    block.allocated = True
    block.requested = nbytes
    self.active[block.addr] = block
    self.bump("allocated_bytes", block.size)
    self.bump("requested_bytes", nbytes)
    self.bump("active", 1)
    return block.addr
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "malloc-explore", "locked": false, "schema_version": 3, "solution": false}
alloc = CachingAllocator(Device(1024 * MiB))
a, b, c = alloc.malloc(1000), alloc.malloc(4), alloc.malloc(3 * MiB)
print(hex(a), hex(b), hex(c))          # a and b share one 2 MiB segment, 1024 bytes apart
print(list(alloc.pools["small"]), list(alloc.pools["large"]))

# %% nbgrader={"grade": true, "grade_id": "best_fit_split", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="Best fit and splitting"
check("best_fit_split")

# %% [markdown] nbgrader={"grade": false, "grade_id": "free-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — Free and coalesce (15 points)
#
# **`CachingAllocator.free(self, addr)`** is called when a tensor's storage dies. Nothing goes
# back to the device: the block goes back into its pool. Take it out of `self.active` (raise
# `ValueError` for an address that is not live: a double free), mark it free, and undo the stat
# bumps of `malloc` (`"allocated_bytes"` by its size, `"requested_bytes"` by its `requested`,
# `"active"` by 1).
#
# Then **coalesce**: if its `prev` block is free, merge them; the same for `next`. A free
# neighbour is in the pool, so remove it from the pool first; the merged block starts at the
# lower address, its size is the sum, and the linked list skips the absorbed block (fix the
# outer neighbour's back pointer too). Finally insert the merged block into the pool. Without
# this, a segment that was split into many small blocks could never serve a big request again,
# nor be released in part 4. After every `free`, no two neighbouring blocks are both free.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "free-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(CachingAllocator)
def free(self, addr):
    """Return the block at `addr` to its pool, merged with its free neighbours."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 free-solution
    block = self.active.pop(addr, None)
    if block is None:
        raise ValueError(f"free({addr:#x}): no live block at this address (double free?)")
    block.allocated = False
    self.bump("allocated_bytes", -block.size)
    self.bump("requested_bytes", -block.requested)
    self.bump("active", -1)
    block.requested = 0
    pool = self.pools[block.pool]
    before = block.prev
    if before is not None and not before.allocated:
        pool.remove(before)
        block.addr = before.addr
        block.size += before.size
        block.prev = before.prev
        if block.prev is not None:
            block.prev.next = block
    after = block.next
    if after is not None and not after.allocated:
        pool.remove(after)
        block.size += after.size
        block.next = after.next
        if block.next is not None:
            block.next.prev = block
    pool.insert(block)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "free-explore", "locked": false, "schema_version": 3, "solution": false}
alloc = CachingAllocator(Device(1024 * MiB))
xs = [alloc.malloc(100 * KiB) for _ in range(4)]
alloc.free(xs[1]); alloc.free(xs[2])
print(list(alloc.pools["small"]))      # one 200 KiB hole and the rest of the segment
alloc.free(xs[0]); alloc.free(xs[3])
print(list(alloc.pools["small"]))      # one free 2 MiB block: the whole segment again

# %% nbgrader={"grade": true, "grade_id": "free_coalesce", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Free and coalesce"
check("free_coalesce")

# %% [markdown] nbgrader={"grade": false, "grade_id": "oom-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — When the device is full (15 points)
#
# The cache can hold a lot of memory that no tensor uses. When `cudaMalloc` fails, PyTorch frees
# cached segments and tries once more before raising `torch.OutOfMemoryError`:
#
# 1. **`CachingAllocator.release_cached_blocks(self)`** (what `torch.cuda.empty_cache()` calls):
#    every cached block of either pool that is a *whole* segment (no `prev`, no `next`) leaves
#    its pool and goes back to the device with `self.release_segment(block)`. Split segments
#    stay: a single live tensor pins its whole segment.
# 2. **`CachingAllocator.malloc_retry(self, pool_name, size)`**, called by `malloc` when
#    `new_segment` returned `None`: release the cached blocks, bump `"num_alloc_retries"`, and
#    ask for the segment again. If it still fails, bump `"num_ooms"` and raise
#    `OutOfMemoryError` with a message that starts `"Tried to allocate <format_size(n)>."` where
#    `n = allocation_size(size)` is the *segment* it asked the device for (as PyTorch does: a
#    3 MiB tensor that does not fit says "Tried to allocate 20.00 MiB"), and that says how much
#    the device has free after the release, as
#    `format_size(self.device.capacity - self.device.used)`. Otherwise return
#    the new block. The allocator stays usable after an `OutOfMemoryError`: frees and later
#    requests work as before.
#
# The hidden tests of this part also run the recorded training traces of part 6 on a device
# too small for them.
#
# PyTorch's default configuration goes straight to "release everything that is not split";
# with `max_split_size_mb` set it first tries to release just enough oversize blocks.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "oom-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(CachingAllocator)
def release_cached_blocks(self):
    """Give every cached, unsplit segment back to the device (empty_cache)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 oom-solution
    for pool in self.pools.values():
        for block in list(pool):
            if block.prev is None and block.next is None:
                pool.remove(block)
                self.release_segment(block)
    ### END SOLUTION


@add_to_class(CachingAllocator)
def malloc_retry(self, pool_name, size):
    """After a failed cudaMalloc: release cached segments and retry once, or raise OutOfMemoryError."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 oom-solution
    self.release_cached_blocks()
    self.bump("num_alloc_retries", 1)
    block = self.new_segment(pool_name, allocation_size(size))
    if block is None:
        self.bump("num_ooms", 1)
        free = self.device.capacity - self.device.used
        raise OutOfMemoryError(
            f"Tried to allocate {format_size(allocation_size(size))}. Device has a total capacity of "
            f"{format_size(self.device.capacity)} of which {format_size(free)} is free. "
            f"{format_size(self.stats['allocated_bytes']['current'])} is allocated by the allocator, and "
            f"{format_size(self.stats['reserved_bytes']['current'] - self.stats['allocated_bytes']['current'])} "
            f"is reserved but unallocated.")
    return block
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "oom-explore", "locked": false, "schema_version": 3, "solution": false}
alloc = CachingAllocator(Device(48 * MiB))
big = alloc.malloc(30 * MiB)
alloc.free(big)                        # 30 MiB stays cached
again = alloc.malloc(40 * MiB)         # cudaMalloc fails, the cache is released, the retry works
print(alloc.stats["num_alloc_retries"], alloc.stats["reserved_bytes"])
try:
    alloc.malloc(20 * MiB)
except OutOfMemoryError as e:
    print("OutOfMemoryError:", e)

# %% nbgrader={"grade": true, "grade_id": "oom_release", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Releasing the cache when the device is full"
check("oom_release")

# %% [markdown] nbgrader={"grade": false, "grade_id": "stats-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — Statistics (15 points)
#
# **`CachingAllocator.memory_stats(self)`** returns a flat dict named like
# `torch.cuda.memory_stats()`:
#
# * `"<stat>.all.current"` and `"<stat>.all.peak"` for `allocated_bytes`, `requested_bytes`,
#   `reserved_bytes`, `active` and `segment`, read from `self.stats`;
# * `"num_alloc_retries"`, `"num_ooms"`, `"num_device_alloc"`, `"num_device_free"`: the
#   `current` of those counters;
# * `"inactive_split.all.current"` and `"inactive_split_bytes.all.current"`: the number and bytes
#   of cached free blocks that sit in a *split* segment (a block with a `prev` or a `next`):
#   memory that `empty_cache()` cannot return;
# * two of ours, not PyTorch's: `"largest_free_block"`, the size of the biggest cached block
#   (0 if none), and `"fragmentation"`, `1 - largest_free_block / cached_free_bytes` where
#   `cached_free_bytes = reserved - allocated` (0.0 when nothing is cached). 0 means all the
#   free memory is one block; near 1, many small holes.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "stats-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(CachingAllocator)
def memory_stats(self):
    """A dict like torch.cuda.memory_stats(), plus largest_free_block and fragmentation."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 stats-solution
    out = {}
    for name in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment"):
        out[f"{name}.all.current"] = self.stats[name]["current"]
        out[f"{name}.all.peak"] = self.stats[name]["peak"]
    for name in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        out[name] = self.stats[name]["current"]
    split_blocks = [b for pool in self.pools.values() for b in pool if b.prev is not None or b.next is not None]
    out["inactive_split.all.current"] = len(split_blocks)
    out["inactive_split_bytes.all.current"] = sum(b.size for b in split_blocks)
    largest = max((b.size for pool in self.pools.values() for b in pool), default=0)
    cached = self.stats["reserved_bytes"]["current"] - self.stats["allocated_bytes"]["current"]
    out["largest_free_block"] = largest
    out["fragmentation"] = 1.0 - largest / cached if cached > 0 else 0.0
    return out
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "stats-explore", "locked": false, "schema_version": 3, "solution": false}
alloc = CachingAllocator(Device(1024 * MiB))
xs = [alloc.malloc(64 * KiB) for _ in range(30)]
for x in xs[::2]:
    alloc.free(x)
{k: v for k, v in alloc.memory_stats().items() if "peak" not in k}

# %% nbgrader={"grade": true, "grade_id": "stats", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Memory statistics"
check("stats")

# %% [markdown] nbgrader={"grade": false, "grade_id": "replay-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — Real traces (15 points)
#
# A *trace* is a list of events `["alloc", id, nbytes]` and `["free", id, nbytes]`, in the order
# a program made them; `id` names one tensor storage from its allocation to its free. The hidden
# tests replay traces recorded from real training steps (an MLP with SGD, a small conv net with
# Adam) with PyTorch's profiler (`torch.profiler.profile(profile_memory=True)`; the cell after
# this one records one).
#
# **`replay(allocator, events)`** runs a trace on an allocator: `allocator.malloc(nbytes)` for
# each alloc, `allocator.free(address)` of that id's address for each free, and returns the list
# of addresses, one per event (for a free, the address freed). Use only the `allocator` you are
# given and its `malloc`/`free` (the graders also pass other allocators with the same two
# methods). The graders check the addresses and the final allocator state against PyTorch's
# rules on the recorded traces and on variants of them with other sizes, so this part also
# needs parts 2 and 3 to be right.
#
# The profiler is used here only to *record* traces; the lab does not grade profiler use.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "replay-solution", "locked": false, "schema_version": 3, "solution": true}
def replay(allocator, events):
    """Run a trace; one address per event."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 replay-solution
    live, addresses = {}, []
    for kind, ident, nbytes in events:
        if kind == "alloc":
            live[ident] = allocator.malloc(nbytes)
            addresses.append(live[ident])
        elif kind == "free":
            addr = live.pop(ident)
            allocator.free(addr)
            addresses.append(addr)
        else:
            raise ValueError(f"unknown trace event {kind!r}")
    return addresses
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "record-trace", "locked": false, "schema_version": 3, "solution": false}
import torch
import torch.nn as nn
from torch._C._profiler import _EventType


def record_trace(step, steps=2):
    """Alloc/free events of `steps` calls of `step()`, from the profiler's memory events."""
    with torch.profiler.profile(profile_memory=True) as prof:
        for _ in range(steps):
            step()
    raw = []

    def walk(node):
        if node.tag == _EventType.Allocation:
            raw.append((node.start_time_ns, node.extra_fields.ptr, node.extra_fields.alloc_size))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    live, events, next_id = {}, [], 0
    for _, ptr, size in sorted(raw, key=lambda e: e[0]):
        if size > 0:
            live[ptr] = (next_id, size)
            events.append(["alloc", next_id, int(size)])
            next_id += 1
        elif ptr in live:
            ident, nbytes = live.pop(ptr)
            events.append(["free", ident, int(nbytes)])
    return events


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
opt = torch.optim.Adam(model.parameters())
x, y = torch.randn(256, 1024), torch.randint(0, 10, (256,))


def train_step():
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


trace = record_trace(train_step)
alloc = CachingAllocator(Device(4096 * MiB))
replay(alloc, trace)
n_allocs = sum(e[0] == "alloc" for e in trace)
print(f"{n_allocs} allocations, {alloc.device.num_mallocs} cudaMalloc calls")
print({k: format_size(v) for k, v in alloc.memory_stats().items() if k.endswith("bytes.all.peak")})

# %% nbgrader={"grade": true, "grade_id": "real_traces", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Replaying real traces"
check("real_traces")

# %% [markdown] nbgrader={"grade": false, "grade_id": "timeline-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — A memory timeline (10 points)
#
# **`memory_timeline(events, capacity)`** replays a trace on a fresh
# `CachingAllocator(Device(capacity))` and returns three numpy `int64` arrays of length
# `len(events) + 1`: `time` (`0, 1, ..., len(events)`), and `allocated` and `reserved` bytes
# (`allocated_bytes` / `reserved_bytes` current): sample 0 is the empty allocator, sample
# `i + 1` is the state right after event `i`. This is the picture `torch.cuda.memory._dump_snapshot`
# and `torch.cuda.memory_allocated()` give on a real GPU.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "timeline-solution", "locked": false, "schema_version": 3, "solution": true}
def memory_timeline(events, capacity):
    """(time, allocated, reserved): int64 arrays of len(events) + 1, sampled after each event."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab05 timeline-solution
    allocator = CachingAllocator(Device(capacity))
    allocated, reserved, live = [0], [0], {}
    for kind, ident, nbytes in events:
        if kind == "alloc":
            live[ident] = allocator.malloc(nbytes)
        else:
            allocator.free(live.pop(ident))
        allocated.append(allocator.stats["allocated_bytes"]["current"])
        reserved.append(allocator.stats["reserved_bytes"]["current"])
    time = np.arange(len(events) + 1, dtype=np.int64)
    return time, np.array(allocated, dtype=np.int64), np.array(reserved, dtype=np.int64)
    ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "timeline-plot-md", "locked": true, "schema_version": 3, "solution": false}
# The timeline of the training step recorded above. The forward pass climbs as activations are
# saved for backward, the backward pass frees them while gradients appear, and the optimizer
# step adds its state. The reserved line never comes down: that is the cache.

# %% nbgrader={"grade": false, "grade_id": "timeline-plot", "locked": false, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt

t, allocated, reserved = memory_timeline(trace, 4096 * MiB)
live_bytes = np.cumsum([0] + [n if kind == "alloc" else -n for kind, _, n in trace])
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.plot(t, live_bytes / MiB, lw=1, color="gray", label="live tensor bytes (no rounding)")
ax.plot(t, allocated / MiB, lw=2, label="allocated")
ax.plot(t, reserved / MiB, lw=2, label="reserved")
ax.set_xlabel("allocator event")
ax.set_ylabel("MiB")
ax.set_title("Two training steps of an MLP with Adam")
ax.legend()
plt.show()

# %% nbgrader={"grade": true, "grade_id": "timeline", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="A memory timeline"
check("timeline")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have built PyTorch's caching allocator in its default configuration: 512-byte blocks, a
# small and a large pool, best fit with splitting, coalescing on free, release and retry when
# the device is full, and the statistics behind `torch.cuda.memory_stats()`. On a real GPU,
# `torch.cuda.memory._record_memory_history()` and `torch.cuda.memory._snapshot()` show the same
# segments and blocks. Save the notebook and submit it (`make submit LAB=lab05`).
