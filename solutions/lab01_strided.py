# ---
# jupyter:
#   inside_pytorch:
#     lab: lab01
#     title: Strided tensors
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
# # Lab 1 — Strided tensors
#
# A PyTorch tensor is two things: a flat block of memory, its **storage**, and a small recipe
# for reading it: a **shape**, one **stride** per dimension and a **storage offset**. The element
# `x[i, j, k]` lives at
#
# $$\text{storage}[\,\text{offset} + i\cdot\text{stride}_0 + j\cdot\text{stride}_1 + k\cdot\text{stride}_2\,]$$
#
# That one formula is why `view`, `transpose`, `permute`, slicing, `expand` and `as_strided` are
# cheap in PyTorch: they write a new recipe and share the storage; no element moves. In this lab
# you build that machinery from scratch, on top of numpy, and hold it to the exact rules of
# PyTorch 2.13: same shapes, same strides, same offsets, and the same errors.
#
# | part | you build | points | hours, about | also graded through |
# |---|---|---|---|---|
# | `storage` | contiguous strides, `numel`, element lookup, `is_contiguous` | 10 | 1 | (nothing else) |
# | `views` | `view` and `reshape`, with PyTorch's view rule and `-1` inference | 20 | 2 | `numel`, `contiguous_strides`, `storage_index` (the copy `reshape` makes) |
# | `indexing` | `transpose`, `permute`, `select`, `x[...]` with ints and slices | 20 | 2 | (nothing else) |
# | `broadcast` | `expand` (stride 0), `broadcast_shapes`, `broadcast_to` | 15 | 1.5 | (nothing else) |
# | `as_strided` | `as_strided` and `contiguous()` | 10 | 1 | `storage_index`, `is_contiguous_strides`, `contiguous_strides` |
# | `elementwise` | a broadcasting binary op and `sum(dim, keepdim)` | 15 | 1.5 | `broadcast_shapes`, `expand`, `storage_index`, `contiguous_strides` |
# | `channels_last` | channels-last strides and `contiguous(memory_format=...)` | 10 | 1 | `contiguous()`, `storage_index`, `is_contiguous_strides` |
#
# The hours are a rough guide for a learner who has worked through the stage's lectures: about 10 in all.
#
# The graders build every input tensor directly from a shape, strides and an offset, and read
# every result's values themselves from its shape, strides, offset and storage, so a part is graded
# through its own functions plus only those in the last column: a bug in part 1's `storage_index`
# costs points in `views` (copies), `as_strided`, `elementwise` and `channels_last` too, and nowhere else.
#
# **How to work.** Each part has cells where your code goes: replace the
# `raise NotImplementedError()` lines. Then run the part's `check("...")` cell: it runs a few
# public tests and tells you what differs from PyTorch. Your submission is graded by hidden tests
# that compare your tensors with real PyTorch on many generated cases, so a green `check` is a
# good sign, not a guarantee.
#
# Three ground rules:
#
# * The cells you fill in must not import `torch`: grading runs them without it. The
#   exploration cells are not graded and may use it freely; several compare your tensors with
#   the real thing.
# * Sizes, strides and offsets count **elements**, as in PyTorch (numpy's `.strides` count bytes).
# * numpy is here for the storage (a flat array) and for arithmetic on single values. Its own view
#   machinery (`reshape` without a copy, `broadcast_to`, `as_strided`, basic indexing, `.strides`
#   and `.flags`) follows *numpy's* rules, which differ from PyTorch's exactly where this lab is
#   interesting: the strides of size-1 dims, the offset of an empty slice, the strides of tensors
#   with a size-0 dim, 0-d tensors, the errors. Using it is not forbidden, but the graders check
#   PyTorch's answers on precisely those cases, so a submission that hands the layout arithmetic to
#   numpy does not pass those parts. Compute shapes, strides and offsets yourself.
# * Each part builds on the earlier ones; do them in order (the table says which earlier
#   functions each part is graded through).

# %% nbgrader={"grade": false, "grade_id": "notebook-setup", "locked": true, "schema_version": 3, "solution": false}
from labkit import check

# %% [markdown] nbgrader={"grade": false, "grade_id": "setup-md", "locked": true, "schema_version": 3, "solution": false}
# ## Helpers
#
# `add_to_class` lets a class grow across cells: `@add_to_class(Tensor)` above a function makes
# it a method of `Tensor`. `wrap_dim` turns a possibly negative dimension into a positive one the
# way PyTorch does (a 0-d tensor accepts `0` and `-1`), and `size_args` lets `x.view(2, 3)` and
# `x.view((2, 3))` mean the same thing.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false}
import builtins
import math
import operator

import numpy as np


def add_to_class(cls):
    """Decorator: attach the function below it to `cls` as a method.

    The module-level name keeps pointing at the function, except for names of Python builtins:
    after `@add_to_class(Tensor) def sum(...)`, `x.sum(0)` is yours and `sum([1, 2])` is Python's.
    """
    def register(fn):
        setattr(cls, fn.__name__, fn)
        return getattr(builtins, fn.__name__, fn)
    return register


def wrap_dim(dim, ndim):
    """PyTorch's dimension wrapping: -1 is the last dim; a 0-d tensor accepts 0 and -1."""
    dim = operator.index(dim)
    low, high = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not low <= dim <= high:
        raise IndexError(f"Dimension out of range (expected to be in range of [{low}, {high}], but got {dim})")
    return dim % max(ndim, 1)


def size_args(args):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the shape (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(operator.index(a) for a in args)


# memory formats, spelled as strings (torch.contiguous_format, torch.channels_last)
contiguous_format = "contiguous_format"
channels_last = "channels_last"

# %% [markdown] nbgrader={"grade": false, "grade_id": "storage-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 1 — Storage, strides and contiguity (10 points)
#
# The locked cell below gives you the two classes everything else builds on. Read it once.
#
# * `Storage` wraps a 1-D numpy array. Its indexing is bounds-checked and has no negative
#   indices: memory has no "end" to count from, so a bad position fails loudly.
# * `Tensor(storage, shape, stride=None, offset=0)` is a recipe for reading a storage.
#   `x.shape`, `x.stride()`, `x.storage_offset()` and `x.dim()` behave as in PyTorch, and
#   `x.storage` is the `Storage` (PyTorch's is `x.untyped_storage()`). When no stride is given,
#   the tensor is laid out row-major (your `contiguous_strides`). `x.to_numpy()` reads every element through your `storage_index`, and
#   `x.is_contiguous()` asks your `is_contiguous_strides`.
# * `tensor(data)`, `arange(n)`, `zeros(shape)` and `empty_strided(shape, stride)` make fresh
#   tensors, each with its own storage.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "scaffold", "locked": true, "schema_version": 3, "solution": false}
class Storage:
    """A flat block of memory: a bounds-checked 1-D numpy array."""

    def __init__(self, data):
        data = np.asarray(data)
        if data.ndim != 1:
            raise ValueError(f"a Storage holds a 1-D array, got a {data.ndim}-D one")
        self.data = data

    @property
    def dtype(self):
        return self.data.dtype

    def __len__(self):
        return len(self.data)

    def _position(self, i):
        i = operator.index(i)
        if not 0 <= i < len(self.data):
            raise IndexError(f"storage position {i} is out of range for a storage of size {len(self.data)}")
        return i

    def __getitem__(self, i):
        return self.data[self._position(i)]

    def __setitem__(self, i, value):
        self.data[self._position(i)] = value

    def __repr__(self):
        return f"Storage({self.data.tolist()})"


class Tensor:
    """A view of a Storage: element idx lives at storage[offset + sum(idx[d] * stride[d])]."""

    def __init__(self, storage, shape, stride=None, offset=0):
        self.storage = storage
        self.shape = tuple(operator.index(s) for s in shape)
        if stride is None:
            stride = contiguous_strides(self.shape)
        self._stride = tuple(operator.index(s) for s in stride)
        self._offset = operator.index(offset)
        if len(self._stride) != len(self.shape):
            raise ValueError(f"shape {self.shape} and strides {self._stride} have different lengths")

    def stride(self, dim=None):
        return self._stride if dim is None else self._stride[wrap_dim(dim, self.dim())]

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[wrap_dim(dim, self.dim())]

    def storage_offset(self):
        return self._offset

    def dim(self):
        return len(self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def dtype(self):
        return self.storage.dtype

    def is_contiguous(self, memory_format=contiguous_format):
        if memory_format == contiguous_format:
            return is_contiguous_strides(self.shape, self._stride)
        if memory_format == channels_last:
            return is_channels_last_strides(self.shape, self._stride)
        raise ValueError(f"unknown memory format {memory_format!r}")

    def to_numpy(self):
        """A fresh numpy array with this tensor's values, read through storage_index."""
        out = np.empty(self.shape, dtype=self.dtype)
        for idx in np.ndindex(*self.shape):
            out[idx] = self.storage[self.storage_index(idx)]
        return out

    def tolist(self):
        return self.to_numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a number")
        return self.to_numpy().reshape(-1)[0].item()

    def __repr__(self):
        try:
            values = self.tolist()
        except Exception as exc:  # keep repr usable while parts are unfinished
            values = f"<values unavailable: {type(exc).__name__}>"
        return f"tensor({values}, shape={self.shape}, stride={self._stride}, offset={self._offset})"


def tensor(data, dtype=None):
    """A fresh contiguous tensor holding a copy of `data` (nested lists or a numpy array)."""
    array = np.array(data, dtype=dtype)
    return Tensor(Storage(array.reshape(-1)), array.shape)


def arange(n, dtype=np.int64):
    return Tensor(Storage(np.arange(n, dtype=dtype)), (n,))


def zeros(shape, dtype=np.int64):
    shape = size_args((shape,))
    return Tensor(Storage(np.zeros(math.prod(shape), dtype=dtype)), shape)


def empty_strided(shape, stride, dtype=np.int64):
    """A tensor laid out with `stride`, on a storage exactly as large as that needs (zero-filled)."""
    shape, stride = size_args((shape,)), size_args((stride,))
    needed = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    return Tensor(Storage(np.zeros(needed, dtype=dtype)), shape, stride)


def strides_for(shape, memory_format):
    """The strides of a fresh tensor of `shape` in `memory_format`."""
    if memory_format == contiguous_format:
        return contiguous_strides(shape)
    if memory_format == channels_last:
        return channels_last_strides(shape)
    raise ValueError(f"unknown memory format {memory_format!r}")


# %% [markdown] nbgrader={"grade": false, "grade_id": "storage-rules-md", "locked": true, "schema_version": 3, "solution": false}
# ### What you write
#
# 1. **`contiguous_strides(shape)`**: the strides of a fresh row-major tensor. The last dim has
#    stride 1 and each earlier stride is the next stride times the next size, so `(2, 3, 4)` gets
#    `(12, 4, 1)`. PyTorch counts a size of 0 as 1 here: `torch.empty(2, 0, 3).stride()` is
#    `(3, 3, 1)`. A 0-d shape `()` has strides `()`.
# 2. **`Tensor.numel()`**: the number of elements, the product of the sizes (1 for a 0-d tensor).
# 3. **`Tensor.storage_index(idx)`**: where element `idx` (a tuple, one int per dim) lives:
#    `offset + sum(idx[d] * stride[d])`. As in Python, `-1` means the last position; an index
#    outside `[-size, size)` raises `IndexError`.
# 4. **`is_contiguous_strides(shape, stride)`**: PyTorch's meaning of "contiguous". Walk the dims
#    from the last one, keeping `expected`, which starts at 1: a dim of size 1 is skipped (it is
#    never stepped over, so its stride does not matter); any other dim must have
#    `stride == expected`, and then `expected *= size`. A tensor with no elements is always
#    contiguous.
#
# For example, shape `(2, 3)` with strides `(3, 1)` is contiguous, and so is `(1, 3)` with
# strides `(7, 1)`; the transpose of a `(2, 3)` tensor, shape `(3, 2)` with strides `(1, 3)`, is not.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "storage-solution", "locked": false, "schema_version": 3, "solution": true}
def contiguous_strides(shape):
    """Row-major strides of `shape`, as a tuple (sizes of 0 count as 1)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 storage-solution
    strides = []
    running = 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))
    ### END SOLUTION


@add_to_class(Tensor)
def numel(self):
    """The number of elements."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 storage-solution
    return math.prod(self.shape)
    ### END SOLUTION


@add_to_class(Tensor)
def storage_index(self, idx):
    """Position in self.storage of the element at `idx` (a tuple with one int per dim)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 storage-solution
    if len(idx) != self.dim():
        raise IndexError(f"expected {self.dim()} indices, got {len(idx)}")
    position = self.storage_offset()
    for i, size, stride in zip(idx, self.shape, self.stride()):
        if not -size <= i < size:
            raise IndexError(f"index {i} is out of bounds for a dimension of size {size}")
        position += (i % size) * stride
    return position
    ### END SOLUTION


def is_contiguous_strides(shape, stride):
    """True when a tensor with this shape and these strides is contiguous (PyTorch's rule)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 storage-solution
    if math.prod(shape) == 0:
        return True
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size == 1:
            continue
        if step != expected:
            return False
        expected *= size
    return True
    ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "storage-explore-md", "locked": true, "schema_version": 3, "solution": false}
# Try it, and compare with PyTorch (this cell is yours to play with; it is not graded):

# %% nbgrader={"grade": false, "grade_id": "storage-explore", "locked": false, "schema_version": 3, "solution": false}
import torch

x = Tensor(Storage(np.arange(12)), (3, 4))
print(x)
print("strides", x.stride(), "torch:", torch.arange(12).view(3, 4).stride())
print("x[2, -1] lives at storage position", x.storage_index((2, -1)))
xt = Tensor(x.storage, (4, 3), (1, 4))  # the transpose, by hand: same storage, swapped strides
print(xt, "contiguous?", xt.is_contiguous())

# %% [markdown] nbgrader={"grade": false, "grade_id": "diagram-md", "locked": true, "schema_version": 3, "solution": false}
# A picture of the formula: each panel shows a 2-D tensor (left) and its storage (the strip on
# the right). A tensor cell and the storage slot it reads share a colour; grey slots are storage
# the tensor does not reach. The transpose reads the same 12 slots in another order, the strided
# slice skips some, and the expanded tensor reads one row three times (stride 0).

# %% nbgrader={"grade": false, "grade_id": "diagram", "locked": false, "schema_version": 3, "solution": false}
import matplotlib.pyplot as plt


def draw_layout(t, ax, title):
    """Draw a 2-D tensor as a grid of storage positions next to its storage strip."""
    rows, cols = t.shape
    n = len(t.storage)
    colours = plt.cm.viridis(np.linspace(0.1, 0.95, n))
    for r in range(rows):
        for c in range(cols):
            pos = t.storage_index((r, c))
            ax.add_patch(plt.Rectangle((c, -r), 1, 1, facecolor=colours[pos], edgecolor="white"))
            ax.text(c + 0.5, -r + 0.5, str(t.storage[pos]), ha="center", va="center", color="white", fontsize=9)
    used = {t.storage_index(idx) for idx in np.ndindex(*t.shape)}
    x0 = cols + 1
    for p in range(n):
        face = colours[p] if p in used else "0.85"
        ax.add_patch(plt.Rectangle((x0, 1 - (p + 1) * 0.5), 1, 0.5, facecolor=face, edgecolor="white"))
        ax.text(x0 + 0.5, 1 - (p + 0.5) * 0.5, str(p), ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.2, x0 + 1.2)
    ax.set_ylim(min(1 - n * 0.5, 1 - rows) - 0.2, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"{title}\nshape {t.shape}, strides {t.stride()}, offset {t.storage_offset()}", fontsize=9)


base = Tensor(Storage(np.arange(12)), (3, 4))
panels = [
    (base, "x"),
    (Tensor(base.storage, (4, 3), (1, 4)), "x.t()"),
    (Tensor(base.storage, (3, 2), (4, 2), 1), "x[:, 1::2]"),
    (Tensor(base.storage, (3, 4), (0, 1), 4), "x[1].expand(3, 4)"),
]
fig, axes = plt.subplots(1, 4, figsize=(13, 4))
for ax, (t, title) in zip(axes, panels):
    draw_layout(t, ax, title)
plt.tight_layout()
plt.show()

# %% [markdown] nbgrader={"grade": false, "grade_id": "storage-check-md", "locked": true, "schema_version": 3, "solution": false}
# Check part 1:

# %% nbgrader={"grade": true, "grade_id": "storage", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Storage, strides and contiguity"
check("storage")

# %% [markdown] nbgrader={"grade": false, "grade_id": "views-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 2 — `view` and `reshape` (20 points)
#
# `x.view(*shape)` returns a tensor with a new shape **on the same storage**. It never copies:
# when the elements of `x`, read in row-major order, cannot be described by the new shape and
# some strides, it raises
# `RuntimeError: view size is not compatible with input tensor's size and stride ...`.
# `x.reshape(*shape)` is the forgiving version: a view when one exists, a copy otherwise.
#
# ### Step 1: the new shape (`infer_size(shape, numel)`)
#
# One size may be `-1`, meaning "whatever makes the element count right". PyTorch's rule
# (`infer_size_impl`), with `known` = the product of the sizes that are not `-1`:
#
# * a second `-1` raises `RuntimeError("only one dimension can be inferred")`, and a size below
#   `-1` raises `RuntimeError("invalid shape dimension ...")`;
# * the shape is valid when `known == numel`, or when it has a `-1`, `known > 0` and
#   `numel % known == 0`; the `-1` then becomes `numel // known`. One corner: a `-1` with
#   `known == 0` (say `view(-1, 0)` of an empty tensor) could be anything, so it raises
#   `RuntimeError("cannot reshape tensor of 0 elements ... ambiguous")`;
# * anything else raises `RuntimeError("shape '[5, 2]' is invalid for input of size 12")`.
#
# Return the shape as a tuple of ints.
#
# ### Step 2: can the storage be read with the new shape? (`compute_view_strides`)
#
# Group the dims of `x` into **chunks**: runs of neighbouring dims that step through memory as one
# block. Dim `d` joins the chunk to its right when `stride[d]` equals the stride of the chunk's
# last dim times the number of elements in the chunk so far. Dims of size 1 never break a chunk
# (they are never stepped over). A chunk of sizes `(a, b)` whose last stride is `s` is really one
# run of `a*b` elements, `s` apart.
#
# A view exists exactly when the new shape can be cut, from the right, into consecutive groups
# whose sizes multiply to the chunk sizes. Inside a group the strides are row-major multiples of
# the chunk's `s`. New dims of size 1 fit anywhere: one gets the stride the walk has reached
# (the chunk's elements so far times `s`).
#
# Example: `x = arange(24).view(2, 3, 4).transpose(0, 1)` has shape `(3, 2, 4)` and strides
# `(4, 12, 1)`. No two dims merge (`4 != 12*2`, `12 != 1*4`), so the chunks are `(3)`, `(2)` and
# `(4)`. `x.view(3, 2, 2, 2)` works, with strides `(4, 12, 2, 1)`; `x.view(6, 4)` and
# `x.view(3, 8)` raise, since 6 or 8 elements would span two chunks. A view is not limited to
# contiguous tensors: what matters is the chunks.
#
# Two special cases come first: a 0-d `x` can take any shape with one element (every stride 1);
# and when `x` has no elements, the view keeps `x`'s strides if the shape is unchanged and takes
# `contiguous_strides(new_shape)` otherwise.
#
# Return the new strides as a tuple, or `None` when no view exists.
#
# **Derive it first.** Work the example above on paper: write `x`'s dims right to left with their
# strides, mark where a chunk ends, and assign the new shape's dims to chunks from the right. Then open
# the hints one at a time, only as far as you need.
#
# <details><summary>Hint 1: when does a chunk end?</summary>
#
# Dims `d - 1` and `d` merge when stepping once along `d - 1` jumps exactly over all of `d`:
# `stride[d-1] == size[d] * stride[d]`. Walking from the right, keep the product of the sizes seen so
# far in the current chunk, `numel_x`, and the stride of the chunk's last dim, `base`; a chunk ends at
# `d` when `d == 0` or `stride[d-1] != numel_x * base`, except that a dim `d - 1` of size 1 never
# ends it (its stride does not matter).
# </details>
#
# <details><summary>Hint 2: filling the new dims of one chunk</summary>
#
# When a chunk of `numel_x` elements ends, take new dims from the right (the last one not yet placed),
# giving each the stride `numel_view * base` and multiplying `numel_view` by its size, while
# `numel_view < numel_x` or the next new dim has size 1. If `numel_view` then differs from `numel_x`,
# a new dim straddles two chunks: no view. After the last chunk, every new dim must be placed.
# </details>
#
# <details><summary>Hint 3: PyTorch's algorithm (<code>computeStride</code> in
# <code>aten/src/ATen/TensorUtils.cpp</code>)</summary>
#
# ```text
# view_d = last new dim;  base = stride of x's last dim;  numel_x = numel_view = 1
# for d = x's last dim down to 0:
#     numel_x *= size[d]
#     if d == 0 or (size[d-1] != 1 and stride[d-1] != numel_x * base):   # a chunk ends at d
#         while view_d >= 0 and (numel_view < numel_x or new_size[view_d] == 1):
#             new_stride[view_d] = numel_view * base
#             numel_view *= new_size[view_d]
#             view_d -= 1
#         if numel_view != numel_x: no view
#         if d > 0: base = stride[d-1]; numel_x = numel_view = 1
# if view_d != -1: no view
# ```
# </details>
#
# ### Step 3: `view` and `reshape`
#
# `view` puts the two together: infer the shape, compute the strides, raise the RuntimeError
# above when there are none, and return a tensor on the same storage with the same offset.
# `reshape` returns that view when it exists; otherwise a contiguous copy with the new shape (a
# fresh storage: `tensor(...)` or `Tensor(Storage(...), shape)` with the values in row-major
# order).

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "views-infer", "locked": false, "schema_version": 3, "solution": true}
def infer_size(shape, numel):
    """`shape` with its -1 (if any) filled in, as a tuple; RuntimeError when impossible."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 views-infer
    shape = list(shape)
    infer_dim = None
    known = 1
    for i, size in enumerate(shape):
        if size == -1:
            if infer_dim is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer_dim = i
        elif size >= 0:
            known *= size
        else:
            raise RuntimeError(f"invalid shape dimension {size} at index {i} of shape {shape}")
    if numel == known or (infer_dim is not None and known > 0 and numel % known == 0):
        if infer_dim is not None:
            if known == 0:
                raise RuntimeError(
                    f"cannot reshape tensor of 0 elements into shape {shape} because the "
                    "unspecified dimension size -1 can be any value and is ambiguous")
            shape[infer_dim] = numel // known
        return tuple(shape)
    raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "views-strides", "locked": false, "schema_version": 3, "solution": true}
def compute_view_strides(shape, stride, new_shape):
    """Strides that read the same elements with `new_shape`, or None when no view exists."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 views-strides
    shape, stride, new_shape = tuple(shape), tuple(stride), tuple(new_shape)
    if len(shape) == 0:
        return (1,) * len(new_shape)
    if math.prod(shape) == 0:
        return stride if shape == new_shape else contiguous_strides(new_shape)
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    base = stride[-1]
    numel_x = numel_view = 1
    for d in range(len(shape) - 1, -1, -1):
        numel_x *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and stride[d - 1] != numel_x * base):
            while view_d >= 0 and (numel_view < numel_x or new_shape[view_d] == 1):
                new_stride[view_d] = numel_view * base
                numel_view *= new_shape[view_d]
                view_d -= 1
            if numel_view != numel_x:
                return None
            if d > 0:
                base = stride[d - 1]
                numel_x = numel_view = 1
    if view_d != -1:
        return None
    return tuple(new_stride)
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "views-methods", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(Tensor)
def view(self, *shape):
    """x.view(*shape): the same storage read with a new shape; RuntimeError when no view exists."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 views-methods
    shape = infer_size(size_args(shape), self.numel())
    stride = compute_view_strides(self.shape, self.stride(), shape)
    if stride is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead.")
    return Tensor(self.storage, shape, stride, self.storage_offset())
    ### END SOLUTION


@add_to_class(Tensor)
def reshape(self, *shape):
    """x.reshape(*shape): a view when one exists, else a contiguous copy with the new shape."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 views-methods
    shape = infer_size(size_args(shape), self.numel())
    view_stride = compute_view_strides(self.shape, self.stride(), shape)
    if view_stride is not None:
        return Tensor(self.storage, shape, view_stride, self.storage_offset())
    return Tensor(Storage(self.to_numpy().reshape(-1)), shape)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "views-explore", "locked": false, "schema_version": 3, "solution": false}
# The example from the text, next to PyTorch.
def strides_or_error(t, new_shape):
    try:
        return t.view(new_shape).stride()
    except NotImplementedError:
        raise
    except RuntimeError:
        return "RuntimeError"


xt = torch.arange(24).view(2, 3, 4).transpose(0, 1)
x = Tensor(Storage(np.arange(24)), (3, 2, 4), (4, 12, 1))
for new_shape in [(3, 2, 2, 2), (6, 4), (3, 8), (3, 1, 2, 4), (-1, 2, 4)]:
    print(f"view{new_shape}: mine {strides_or_error(x, new_shape)} | torch {strides_or_error(xt, new_shape)}")
y = x.reshape(6, 4)
print("reshape(6, 4) shares storage?", y.storage is x.storage)

# %% nbgrader={"grade": true, "grade_id": "views", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="view and reshape"
check("views")

# %% [markdown] nbgrader={"grade": false, "grade_id": "indexing-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 3 — `transpose`, `permute`, `select` and `x[...]` (20 points)
#
# These only rearrange the recipe. Use `wrap_dim(dim, self.dim())` for every dimension argument:
# it turns `-1` into the last dim and raises PyTorch's `IndexError` for dims out of range.
#
# * **`transpose(dim0, dim1)`** swaps two sizes and the two matching strides. A 0-d tensor
#   accepts the dims `0` and `-1` (that is what `wrap_dim` allows) and returns a 0-d view of itself.
# * **`permute(*dims)`** reorders all dims: dim `i` of the result is dim `dims[i]` of `x`. PyTorch
#   checks, in this order: the number of dims (`RuntimeError` when it differs from `x.dim()`),
#   each dim (`wrap_dim`, `IndexError`), then duplicates (`RuntimeError`).
# * **`select(dim, index)`** picks one position along `dim` and removes that dim: the offset
#   grows by `index * stride[dim]`. A negative index counts from the end; an index outside
#   `[-size, size)` raises `IndexError`, and so does selecting from a 0-d tensor.
# * **`x[index]`** (`__getitem__`), where `index` is an int, a slice, or a tuple of them applied
#   to the dims from the left (dims not mentioned are kept whole):
#   * an int is `select` on the current dim; that dim disappears;
#   * a slice `start:stop:step` keeps the dim. `start` and `stop` are clamped to the dim as in
#     Python: `slice(start, stop, step).indices(size)` does exactly that. The new size is the
#     number of positions `start, start+step, ...` below `stop` (0 when the slice is empty), the
#     stride becomes `stride * step`, and the offset grows by `start * stride`, even when the
#     slice is empty;
#   * `step` must be positive: PyTorch has no negative strides, so `x[::-1]` raises
#     `ValueError("step must be greater than zero")` (`torch.flip` copies instead), and a step of
#     0 raises `ValueError` too;
#   * more indices than dims raise `IndexError`.
#
# Example: for `x = arange(12).view(3, 4)` (strides `(4, 1)`), `x[1:, ::2]` has shape `(2, 2)`,
# strides `(4, 2)` and offset 4; `x[-1]` has shape `(4,)`, stride `(1,)` and offset 8.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "indexing-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(Tensor)
def transpose(self, dim0, dim1):
    """x.transpose(dim0, dim1): swap two dims (sizes and strides)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 indexing-solution
    d0, d1 = wrap_dim(dim0, self.dim()), wrap_dim(dim1, self.dim())
    if self.dim() == 0:
        return Tensor(self.storage, (), (), self.storage_offset())
    shape, stride = list(self.shape), list(self.stride())
    shape[d0], shape[d1] = shape[d1], shape[d0]
    stride[d0], stride[d1] = stride[d1], stride[d0]
    return Tensor(self.storage, shape, stride, self.storage_offset())
    ### END SOLUTION


@add_to_class(Tensor)
def permute(self, *dims):
    """x.permute(*dims): dim i of the result is dim dims[i] of x."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 indexing-solution
    dims = size_args(dims)
    if len(dims) != self.dim():
        raise RuntimeError(
            f"permute: number of dims don't match: input.dim() = {self.dim()} is not equal to len(dims) = {len(dims)}")
    dims = [wrap_dim(d, self.dim()) for d in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    shape = [self.shape[d] for d in dims]
    stride = [self.stride()[d] for d in dims]
    return Tensor(self.storage, shape, stride, self.storage_offset())
    ### END SOLUTION


@add_to_class(Tensor)
def select(self, dim, index):
    """x.select(dim, index): position `index` along `dim`, which disappears."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 indexing-solution
    if self.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = wrap_dim(dim, self.dim())
    size = self.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {size}")
    if index < 0:
        index += size
    shape = self.shape[:dim] + self.shape[dim + 1:]
    stride = self.stride()[:dim] + self.stride()[dim + 1:]
    return Tensor(self.storage, shape, stride, self.storage_offset() + index * self.stride()[dim])
    ### END SOLUTION


@add_to_class(Tensor)
def __getitem__(self, index):
    """x[index] for an int, a slice, or a tuple of them (step > 0)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 indexing-solution
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    result, dim = self, 0
    for item in index:
        if isinstance(item, slice):
            result = result._slice(dim, item)
            dim += 1
        else:
            result = result.select(dim, operator.index(item))
    return result
    ### END SOLUTION


@add_to_class(Tensor)
def _slice(self, dim, item):
    """A helper for __getitem__ (use it or not): the slice object `item` applied to dim `dim`."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 indexing-solution
    if item.step is not None and item.step <= 0:
        raise ValueError("step must be greater than zero" if item.step < 0 else "slice step cannot be zero")
    start, stop, step = item.indices(self.shape[dim])
    length = max(0, (stop - start + step - 1) // step)
    shape, stride = list(self.shape), list(self.stride())
    shape[dim] = length
    stride[dim] = stride[dim] * step
    return Tensor(self.storage, shape, stride, self.storage_offset() + start * self.stride()[dim])
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "indexing-explore", "locked": false, "schema_version": 3, "solution": false}
x, xt = arange(12).view(3, 4), torch.arange(12).view(3, 4)
for name, mine, theirs in [
    ("x[1:, ::2]", x[1:, ::2], xt[1:, ::2]),
    ("x[-1]", x[-1], xt[-1]),
    ("x.t()[::3]", x.transpose(0, 1)[::3], xt.t()[::3]),
    ("x[5:]", x[5:], xt[5:]),
]:
    print(f"{name:12} mine {mine.shape} {mine.stride()} offset {mine.storage_offset()}"
          f" | torch {tuple(theirs.shape)} {theirs.stride()} offset {theirs.storage_offset()}")

# %% nbgrader={"grade": true, "grade_id": "indexing", "locked": true, "points": 20, "schema_version": 3, "solution": false} part_title="transpose, permute, select and indexing"
check("indexing")

# %% [markdown] nbgrader={"grade": false, "grade_id": "broadcast-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 4 — Broadcasting with stride 0 (15 points)
#
# A stride of 0 means "every position along this dim reads the same elements". That is how
# PyTorch repeats data without copying it: `x.expand(*sizes)`.
#
# **`expand(*sizes)`** matches `sizes` against the dims of `x` from the right, like
# broadcasting; `sizes` may be longer than `x.dim()`, never shorter (`RuntimeError`). For each
# target size, working from the last dim to the first:
#
# * for a dim of `x`: `-1` keeps its size; a size equal to the current one keeps size and stride;
#   a size-1 dim can grow to any size (including 0) and gets stride 0; anything else raises
#   `RuntimeError("The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 0 ...")`;
# * for a new leading dim: it acts like a dim of size 1 whose stride is `size * stride` of the dim
#   just to its right in the result (0 when there is none): so a target of 1 gets that stride and
#   any other target gets stride 0; `-1` is not allowed there (`RuntimeError`), nor is any
#   negative size.
#
# For example `arange(3).expand(2, 3)` has strides `(0, 1)`; `arange(3).expand(1, 3)` has strides
# `(3, 1)`; and a `(3, 1)` tensor with strides `(1, 1)` expanded to `(3, 4)` has strides `(1, 0)`.
#
# **`broadcast_shapes(*shapes)`** (each shape a tuple, list or int) is PyTorch's
# `torch.broadcast_shapes`: start from all ones (as long as the longest shape) and fold the shapes
# in one at a time, aligned from the right. At each position: equal sizes are fine; if the result
# so far is 1, it takes the new size (a negative new size raises `ValueError`); if the new size is
# 1 it changes nothing; anything else raises `RuntimeError`. No shapes at all gives `()`.
#
# **`broadcast_to(t, shape)`** is `t.expand(shape)`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "broadcast-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(Tensor)
def expand(self, *sizes):
    """x.expand(*sizes): size-1 dims (and new leading dims) repeated with stride 0, no copy."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 broadcast-solution
    sizes = size_args(sizes)
    if len(sizes) < self.dim():
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({self.dim()})")
    shape, stride = [], []
    for i in range(len(sizes) - 1, -1, -1):
        d = i - (len(sizes) - self.dim())
        if d >= 0:
            size, step = self.shape[d], self.stride()[d]
        else:
            size, step = 1, shape[0] * stride[0] if shape else 0
        target = sizes[i]
        if target == -1:
            if d < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}")
            target = size
        if target != size:
            if size != 1 or target < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) must match the existing size ({size}) at "
                    f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(self.shape)}")
            size, step = target, 0
        shape.insert(0, size)
        stride.insert(0, step)
    return Tensor(self.storage, shape, stride, self.storage_offset())
    ### END SOLUTION


def broadcast_shapes(*shapes):
    """torch.broadcast_shapes: the shape that all `shapes` broadcast to, as a tuple."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 broadcast-solution
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    result = [1] * max((len(s) for s in shapes), default=0)
    for shape in shapes:
        for i in range(-1, -len(shape) - 1, -1):
            if shape[i] == result[i]:
                continue
            if result[i] == 1:
                if shape[i] < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                result[i] = shape[i]
            elif shape[i] != 1:
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {shape[i]} at {i}! Mismatching "
                    f"argument had {shape}; but expected shape should be broadcastable to {result}")
    return tuple(result)
    ### END SOLUTION


def broadcast_to(t, shape):
    """torch.broadcast_to(t, shape)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 broadcast-solution
    return t.expand(shape)
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "broadcast-explore", "locked": false, "schema_version": 3, "solution": false}
row = arange(4)
grid = row.expand(3, 4)
print(grid.stride(), torch.arange(4).expand(3, 4).stride())
print(grid.to_numpy())
print("one storage of", len(grid.storage), "elements behind", grid.numel(), "values")
print(broadcast_shapes((2, 1), (3,), (1, 1, 1)), torch.broadcast_shapes((2, 1), (3,), (1, 1, 1)))

# %% nbgrader={"grade": true, "grade_id": "broadcast", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Broadcasting with stride 0"
check("broadcast")

# %% [markdown] nbgrader={"grade": false, "grade_id": "as-strided-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 5 — `as_strided` and `contiguous` (10 points)
#
# **`as_strided(size, stride, storage_offset=None)`** is the raw tool behind every view: any
# shape, strides and offset on `x`'s storage. The offset is an absolute position in the storage
# (not relative to `x`'s offset); when it is `None`, `x`'s own offset is used. PyTorch raises
# `RuntimeError` when `size` and `stride` differ in length, when a stride, a size or the offset
# is negative, or when the tensor would reach past the end of the storage: a tensor with elements
# needs `offset + 1 + sum((size[d] - 1) * stride[d])` storage elements, and a tensor with no
# elements needs none.
#
# **`contiguous(memory_format=contiguous_format)`** returns `self` unchanged (same object, no
# copy) when `self.is_contiguous(memory_format)` already holds. Otherwise it copies: make a fresh
# tensor with `empty_strided(self.shape, strides_for(self.shape, memory_format), self.dtype)`
# and copy every element to the same index in the new tensor (read and write through
# `storage_index`). With `memory_format=channels_last` this works once you have done part 7.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "as-strided-solution", "locked": false, "schema_version": 3, "solution": true}
@add_to_class(Tensor)
def as_strided(self, size, stride, storage_offset=None):
    """Any shape, strides and (absolute) storage offset on x's storage, bounds-checked."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 as-strided-solution
    size, stride = size_args((size,)), size_args((stride,))
    offset = self.storage_offset() if storage_offset is None else operator.index(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    needed = 0 if 0 in size else offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if needed > len(self.storage):
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset} requiring a "
            f"storage size of {needed} are out of bounds for storage of size {len(self.storage)}")
    return Tensor(self.storage, size, stride, offset)
    ### END SOLUTION


@add_to_class(Tensor)
def contiguous(self, memory_format=contiguous_format):
    """self when already contiguous in `memory_format`, else a copy laid out that way."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 as-strided-solution
    if self.is_contiguous(memory_format):
        return self
    out = empty_strided(self.shape, strides_for(self.shape, memory_format), self.dtype)
    for idx in np.ndindex(*self.shape):
        out.storage[out.storage_index(idx)] = self.storage[self.storage_index(idx)]
    return out
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "as-strided-explore", "locked": false, "schema_version": 3, "solution": false}
# Sliding windows of length 3 over 0..7, without copying: a classic as_strided trick.
s = arange(8)
windows = s.as_strided((6, 3), (1, 1))
print(windows.to_numpy())
print(torch.arange(8).as_strided((6, 3), (1, 1)))
c = windows.contiguous()
print("contiguous copy:", c.stride(), "new storage?", c.storage is not s.storage, "size", len(c.storage))

# %% nbgrader={"grade": true, "grade_id": "as_strided", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="as_strided and contiguous"
check("as_strided")

# %% [markdown] nbgrader={"grade": false, "grade_id": "elementwise-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 6 — Strided elementwise ops and a reduction (15 points)
#
# Now the payoff: ops that read any layout.
#
# **`elementwise(fn, a, b)`** computes `fn` (a numpy ufunc such as `np.add`) element by element
# on two tensors that broadcast together: find the result shape with your `broadcast_shapes`,
# `expand` both inputs to it (stride 0 does the repeating for free), make a fresh contiguous
# result with `zeros(shape, dtype)` (dtype: `np.result_type(a.dtype, b.dtype)`), and for every
# index write `fn(a_value, b_value)`, reading both inputs through their own strides. Shapes that
# do not broadcast raise `RuntimeError`, as in PyTorch. The cell after yours defines `add`, `mul`,
# `x + y` and `x * y` on top of it (a plain number becomes a 0-d tensor).
#
# The result is always contiguous here. Real PyTorch is a little smarter: its TensorIterator lays
# the result out in the inputs' memory order, so `x.t() + x.t()` is itself transposed. The values
# are the same.
#
# **`Tensor.sum(dim, keepdim=False)`** adds up the elements along `dim` (negative dims wrap).
# Make a fresh contiguous `zeros` result whose shape is `x.shape` with `shape[dim] = 1`, walk every
# index of `x` and add the element into the result at the same index with `dim` set to 0. With
# `keepdim=True` that is the answer; otherwise drop the size-1 dim (a contiguous tensor of the
# shorter shape on the same storage reads the same elements). A 0-d tensor accepts `dim` 0 or -1
# and sums to a fresh 0-d tensor holding its one value, with or without `keepdim` (PyTorch:
# `torch.tensor(5).sum(0, keepdim=True)` has shape `()`). PyTorch's reductions also return a
# fresh contiguous tensor: `torch.ones(2, 3).sum(1, keepdim=True)` has shape `(2, 1)` and strides
# `(1, 1)`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "elementwise-solution", "locked": false, "schema_version": 3, "solution": true}
def elementwise(fn, a, b):
    """fn applied elementwise to a and b, broadcast together; a fresh contiguous tensor."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 elementwise-solution
    shape = broadcast_shapes(a.shape, b.shape)
    a, b = a.expand(shape), b.expand(shape)
    out = zeros(shape, np.result_type(a.dtype, b.dtype))
    for idx in np.ndindex(*shape):
        out.storage[out.storage_index(idx)] = fn(a.storage[a.storage_index(idx)], b.storage[b.storage_index(idx)])
    return out
    ### END SOLUTION


@add_to_class(Tensor)
def sum(self, dim, keepdim=False):
    """x.sum(dim, keepdim): a fresh contiguous tensor."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 elementwise-solution
    dim = wrap_dim(dim, self.dim())
    if self.dim() == 0:
        return tensor(self.item(), self.dtype)
    kept_shape = self.shape[:dim] + (1,) + self.shape[dim + 1:]
    out = zeros(kept_shape, self.dtype)
    for idx in np.ndindex(*self.shape):
        target = idx[:dim] + (0,) + idx[dim + 1:]
        out.storage[out.storage_index(target)] += self.storage[self.storage_index(idx)]
    if keepdim:
        return out
    return Tensor(out.storage, self.shape[:dim] + self.shape[dim + 1:])
    ### END SOLUTION


# %% tags=["export"] nbgrader={"grade": false, "grade_id": "elementwise-ops", "locked": true, "schema_version": 3, "solution": false}
def _as_tensor(value):
    return value if isinstance(value, Tensor) else tensor(value)


def add(a, b):
    return elementwise(np.add, _as_tensor(a), _as_tensor(b))


def mul(a, b):
    return elementwise(np.multiply, _as_tensor(a), _as_tensor(b))


Tensor.__add__ = Tensor.__radd__ = add
Tensor.__mul__ = Tensor.__rmul__ = mul

# %% nbgrader={"grade": false, "grade_id": "elementwise-explore", "locked": false, "schema_version": 3, "solution": false}
a = arange(6).view(2, 3).transpose(0, 1)   # (3, 2), not contiguous
b = tensor([10, 20])                        # (2,), broadcast along dim 0
print((a + b).to_numpy())
print(torch.arange(6).view(2, 3).t() + torch.tensor([10, 20]))
print(a.sum(0).to_numpy(), a.sum(-1, keepdim=True).shape)

# %% nbgrader={"grade": true, "grade_id": "elementwise", "locked": true, "points": 15, "schema_version": 3, "solution": false} part_title="Strided elementwise ops and sum"
check("elementwise")

# %% [markdown] nbgrader={"grade": false, "grade_id": "channels-last-md", "locked": true, "schema_version": 3, "solution": false}
# ## Part 7 — Channels last (10 points)
#
# Image batches are 4-D, `(N, C, H, W)`. The default layout stores each channel as a separate
# plane; **channels last** keeps the `C` values of one pixel next to each other, the order many
# convolution kernels prefer. The shape stays `(N, C, H, W)`: only the strides change. The
# storage order is N, H, W, C, so the strides are `(H*W*C, 1, W*C, C)`.
#
# * **`channels_last_strides(shape)`**: those strides, for a 4-D shape. PyTorch multiplies the
#   sizes as they are here, with no "0 counts as 1" rule: `torch.empty(2, 0, 3, 3,
#   memory_format=torch.channels_last).stride()` is `(0, 1, 0, 0)`. Any other number of dims
#   raises `RuntimeError("required rank 4 tensor to use channels_last format")`.
# * **`is_channels_last_strides(shape, stride)`**: PyTorch's
#   `x.is_contiguous(memory_format=torch.channels_last)`. It is your `is_contiguous_strides` rule
#   with the dims visited in the order C, W, H, N instead of last to first: skip dims of size 1,
#   otherwise `stride == expected`, then `expected *= size`. Unlike the default format there is
#   no shortcut for empty tensors, and a tensor that is not 4-D is never channels-last contiguous.
#
# With these two, `x.is_contiguous(channels_last)` and your `x.contiguous(channels_last)` from
# part 5 work. Size-1 dims make for a classic surprise: a contiguous `(2, 1, 3, 3)` tensor,
# strides `(9, 9, 3, 1)`, is *already* channels-last contiguous (the size-1 `C` dim is skipped),
# so `contiguous(channels_last)` returns it unchanged, strides `(9, 9, 3, 1)`; a fresh
# channels-last tensor of that shape has strides `(9, 1, 3, 1)`.

# %% tags=["export"] nbgrader={"grade": false, "grade_id": "channels-last-solution", "locked": false, "schema_version": 3, "solution": true}
def channels_last_strides(shape):
    """Strides of a fresh channels-last tensor of 4-D `shape` (N, C, H, W)."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 channels-last-solution
    if len(shape) != 4:
        raise RuntimeError("required rank 4 tensor to use channels_last format")
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)
    ### END SOLUTION


def is_channels_last_strides(shape, stride):
    """x.is_contiguous(memory_format=torch.channels_last), from shape and strides."""
    ### BEGIN SOLUTION
    # IPT-CANARY lab01 channels-last-solution
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "channels-last-explore", "locked": false, "schema_version": 3, "solution": false}
img = arange(2 * 3 * 2 * 2).view(2, 3, 2, 2)
nhwc = img.contiguous(channels_last)
print(nhwc.shape, nhwc.stride(), nhwc.is_contiguous(), nhwc.is_contiguous(channels_last))
print("storage order (N, H, W, C):", nhwc.storage.data[:6], "...")
ref = torch.arange(24).view(2, 3, 2, 2).contiguous(memory_format=torch.channels_last)
print("torch:", ref.stride(), torch.equal(torch.from_numpy(nhwc.to_numpy()), ref))
one_channel = arange(18).view(2, 1, 3, 3)
print(one_channel.contiguous(channels_last).stride(),
      torch.arange(18).view(2, 1, 3, 3).contiguous(memory_format=torch.channels_last).stride())

# %% nbgrader={"grade": true, "grade_id": "channels_last", "locked": true, "points": 10, "schema_version": 3, "solution": false} part_title="Channels last"
check("channels_last")

# %% [markdown] nbgrader={"grade": false, "grade_id": "outro", "locked": true, "schema_version": 3, "solution": false}
# ## Done
#
# You have rebuilt the core of PyTorch's strided tensor: everything from `view` to
# `channels_last` is arithmetic on a shape, strides and an offset over one flat storage. Save the
# notebook and submit it (`make submit LAB=lab01`).
