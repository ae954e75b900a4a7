"""Build lab01's example submissions from the release notebook: `python autograder/labs/lab01/examples/make_examples.py`.

Each example is the student notebook with some solution cells filled in, the way a learner would
upload it. Cells come from the reference solution (`ref`) or from the learner-written sources
below: a complete implementation written independently of the reference (other algorithms,
other structure), realistic bugs, and a cell with a syntax error.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]   # examples -> lab01 -> labs -> autograder -> the repository
sys.path.insert(0, str(REPO))

from autograder.authoring.generate import solution_notebook  # noqa: E402

# ---------------------------------------------------------------------------------------------
# An independent, complete implementation ("own style")

OWN = {}

OWN["storage-solution"] = '''\
def contiguous_strides(shape):
    """Row-major strides of `shape`, as a tuple (sizes of 0 count as 1)."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(shape[d + 1], 1)
    return tuple(strides)


@add_to_class(Tensor)
def numel(self):
    """The number of elements."""
    n = 1
    for size in self.shape:
        n *= size
    return n


@add_to_class(Tensor)
def storage_index(self, idx):
    """Position in self.storage of the element at `idx` (a tuple with one int per dim)."""
    assert len(idx) == self.dim(), "one index per dim"
    pos = self.storage_offset()
    for d, i in enumerate(idx):
        size = self.shape[d]
        if i < 0:
            i += size
        if i < 0 or i >= size:
            raise IndexError(f"index {idx[d]} out of range for dim {d} of size {size}")
        pos += i * self.stride()[d]
    return pos


def is_contiguous_strides(shape, stride):
    """True when a tensor with this shape and these strides is contiguous (PyTorch's rule)."""
    if 0 in shape:
        return True
    dims = [(n, s) for n, s in zip(shape, stride) if n != 1]   # size-1 dims don't matter
    return all(s == c for (n, s), c in zip(dims, contiguous_strides([n for n, _ in dims])))
'''

OWN["views-infer"] = '''\
def infer_size(shape, numel):
    """`shape` with its -1 (if any) filled in, as a tuple; RuntimeError when impossible."""
    holes = []
    product = 1
    for i, n in enumerate(shape):
        if n == -1:
            holes.append(i)
            if len(holes) > 1:
                raise RuntimeError("only one dimension can be inferred")
        elif n < -1:
            raise RuntimeError(f"invalid shape dimension {n}")
        else:
            product *= n
    out = list(shape)
    if not holes:
        if product != numel:
            raise RuntimeError(f"shape {out} is invalid for input of size {numel}")
        return tuple(out)
    if product == 0:
        if numel == 0:
            raise RuntimeError("cannot reshape tensor of 0 elements: -1 is ambiguous")
        raise RuntimeError(f"shape {out} is invalid for input of size {numel}")
    if numel % product:
        raise RuntimeError(f"shape {out} is invalid for input of size {numel}")
    out[holes[0]] = numel // product
    return tuple(out)
'''

# Chunks first, then a greedy match of the new shape against them, right to left.
OWN["views-strides"] = '''\
def compute_view_strides(shape, stride, new_shape):
    """Strides that read the same elements with `new_shape`, or None when no view exists."""
    if not shape:
        return tuple(1 for _ in new_shape)
    if 0 in shape:
        return tuple(stride) if tuple(shape) == tuple(new_shape) else contiguous_strides(new_shape)
    # chunks of x, innermost first: [number of elements, stride of the chunk's last dim]
    chunks = [[shape[-1], stride[-1]]]
    for d in range(len(shape) - 2, -1, -1):
        count, base = chunks[-1]
        if shape[d] == 1 or stride[d] == count * base:
            chunks[-1][0] = count * shape[d]
        else:
            chunks.append([shape[d], stride[d]])
    out = [0] * len(new_shape)
    d = len(new_shape) - 1
    for i, (count, base) in enumerate(chunks):
        filled = 1
        while d >= 0 and (filled < count or new_shape[d] == 1):
            out[d] = filled * base
            filled *= new_shape[d]
            d -= 1
        if filled != count:
            return None
    return tuple(out) if d < 0 else None
'''

OWN["views-methods"] = '''\
@add_to_class(Tensor)
def view(self, *shape):
    """x.view(*shape): the same storage read with a new shape; RuntimeError when no view exists."""
    shape = infer_size(size_args(shape), self.numel())
    strides = compute_view_strides(self.shape, self.stride(), shape)
    if strides is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride; use .reshape(...)")
    return Tensor(self.storage, shape, strides, self.storage_offset())


@add_to_class(Tensor)
def reshape(self, *shape):
    """x.reshape(*shape): a view when one exists, else a contiguous copy with the new shape."""
    new_shape = infer_size(size_args(shape), self.numel())
    if compute_view_strides(self.shape, self.stride(), new_shape) is not None:
        return self.view(new_shape)
    return tensor(self.to_numpy()).view(new_shape)
'''

OWN["indexing-solution"] = '''\
@add_to_class(Tensor)
def transpose(self, dim0, dim1):
    """x.transpose(dim0, dim1): swap two dims (sizes and strides)."""
    order = list(range(self.dim()))
    a, b = wrap_dim(dim0, self.dim()), wrap_dim(dim1, self.dim())
    order[a], order[b] = order[b], order[a]
    return self.permute(order)


@add_to_class(Tensor)
def permute(self, *dims):
    """x.permute(*dims): dim i of the result is dim dims[i] of x."""
    dims = size_args(dims)
    if len(dims) != self.dim():
        raise RuntimeError("permute: wrong number of dims")
    dims = tuple(wrap_dim(d, self.dim()) for d in dims)
    if sorted(dims) != list(range(self.dim())):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Tensor(self.storage, [self.shape[d] for d in dims], [self.stride(d) for d in dims], self.storage_offset())


@add_to_class(Tensor)
def select(self, dim, index):
    """x.select(dim, index): position `index` along `dim`, which disappears."""
    if self.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = wrap_dim(dim, self.dim())
    n = self.shape[dim]
    i = index + n if index < 0 else index
    if not 0 <= i < n:
        raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {n}")
    keep = [d for d in range(self.dim()) if d != dim]
    return Tensor(self.storage, [self.shape[d] for d in keep], [self.stride(d) for d in keep],
                  self.storage_offset() + i * self.stride(dim))


@add_to_class(Tensor)
def __getitem__(self, index):
    """x[index] for an int, a slice, or a tuple of them (step > 0)."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    shape, stride, offset = [], [], self.storage_offset()
    for d, item in enumerate(items):
        n, s = self.shape[d], self.stride(d)
        if isinstance(item, slice):
            step = 1 if item.step is None else item.step
            if step == 0:
                raise ValueError("slice step cannot be zero")
            if step < 0:
                raise ValueError("step must be greater than zero")
            start = 0 if item.start is None else item.start
            stop = n if item.stop is None else item.stop
            start = min(max(start + n if start < 0 else start, 0), n)
            stop = min(max(stop + n if stop < 0 else stop, start), n)
            shape.append(-(-(stop - start) // step))
            stride.append(s * step)
            offset += start * s
        else:
            i = item + n if item < 0 else item
            if not 0 <= i < n:
                raise IndexError(f"index {item} is out of bounds for dimension {d} with size {n}")
            offset += i * s
    shape += self.shape[len(items):]
    stride += self.stride()[len(items):]
    return Tensor(self.storage, shape, stride, offset)


@add_to_class(Tensor)
def _slice(self, dim, item):
    """A helper for __getitem__ (use it or not): the slice object `item` applied to dim `dim`."""
    return self[(slice(None),) * dim + (item,)]
'''

OWN["broadcast-solution"] = '''\
@add_to_class(Tensor)
def expand(self, *sizes):
    """x.expand(*sizes): size-1 dims (and new leading dims) repeated with stride 0, no copy."""
    sizes = size_args(sizes)
    new = len(sizes) - self.dim()
    if new < 0:
        raise RuntimeError("expand: the number of sizes provided must be greater or equal to the number of dimensions")
    shape = [1] * new + list(self.shape)        # new leading dims start as size-1 dims
    stride = [None] * new + list(self.stride())
    for d in range(len(sizes) - 1, -1, -1):
        if stride[d] is None:                    # a new dim: size * stride of its right neighbour
            if sizes[d] == -1:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {d}")
            stride[d] = shape[d + 1] * stride[d + 1] if d + 1 < len(shape) else 0
        want = shape[d] if sizes[d] == -1 else sizes[d]
        if want != shape[d]:
            if shape[d] != 1 or want < 0:
                raise RuntimeError(f"The expanded size of the tensor ({want}) must match the existing size ({shape[d]}) at non-singleton dimension {d}")
            shape[d], stride[d] = want, 0
    return Tensor(self.storage, shape, stride, self.storage_offset())


def broadcast_shapes(*shapes):
    """torch.broadcast_shapes: the shape that all `shapes` broadcast to, as a tuple."""
    shapes = [[s] if isinstance(s, int) else list(s) for s in shapes]
    ndim = max([len(s) for s in shapes] + [0])
    out = [1] * ndim
    for s in shapes:
        padded = [1] * (ndim - len(s)) + s
        for d, n in enumerate(padded):
            if d < ndim - len(s) or n == out[d]:
                continue
            if out[d] == 1:
                if n < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                out[d] = n
            elif n != 1:
                raise RuntimeError(f"shapes do not broadcast: {n} against {out[d]} at dim {d}")
    return tuple(out)


def broadcast_to(t, shape):
    """torch.broadcast_to(t, shape)."""
    return t.expand(*shape)
'''

OWN["as-strided-solution"] = '''\
@add_to_class(Tensor)
def as_strided(self, size, stride, storage_offset=None):
    """Any shape, strides and (absolute) storage offset on x's storage, bounds-checked."""
    size, stride = tuple(size), tuple(stride)
    offset = self.storage_offset() if storage_offset is None else storage_offset
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if min(stride, default=0) < 0 or min(size, default=0) < 0 or offset < 0:
        raise RuntimeError("as_strided: negative sizes, strides and offsets are not allowed")
    if 0 not in size:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= len(self.storage):
            raise RuntimeError(f"as_strided: element {last} is out of bounds for storage of size {len(self.storage)}")
    return Tensor(self.storage, size, stride, offset)


@add_to_class(Tensor)
def contiguous(self, memory_format=contiguous_format):
    """self when already contiguous in `memory_format`, else a copy laid out that way."""
    if self.is_contiguous(memory_format):
        return self
    out = empty_strided(self.shape, strides_for(self.shape, memory_format), self.dtype)
    values = self.to_numpy()
    for idx in np.ndindex(*self.shape):
        out.storage[out.storage_index(idx)] = values[idx]
    return out
'''

OWN["elementwise-solution"] = '''\
def elementwise(fn, a, b):
    """fn applied elementwise to a and b, broadcast together; a fresh contiguous tensor."""
    shape = broadcast_shapes(a.shape, b.shape)
    return tensor(fn(a.expand(shape).to_numpy(), b.expand(shape).to_numpy()))


@add_to_class(Tensor)
def sum(self, dim, keepdim=False):
    """x.sum(dim, keepdim): a fresh contiguous tensor."""
    dim = wrap_dim(dim, self.dim())
    total = zeros(self.shape[:dim] + self.shape[dim + 1:], self.dtype)
    for i in range(self.shape[dim]):
        total = total + self.select(dim, i)
    return total.view(self.shape[:dim] + (1,) + self.shape[dim + 1:]) if keepdim else total
'''

OWN["channels-last-solution"] = '''\
def channels_last_strides(shape):
    """Strides of a fresh channels-last tensor of 4-D `shape` (N, C, H, W)."""
    if len(shape) != 4:
        raise RuntimeError("required rank 4 tensor to use channels_last format")
    n, c, h, w = shape
    nhwc = [1, 1, 1, 1]           # row-major strides of (N, H, W, C), without the max(size, 1)
    for d in (2, 1, 0):
        nhwc[d] = nhwc[d + 1] * (h, w, c)[d]
    return (nhwc[0], nhwc[3], nhwc[1], nhwc[2])


def is_channels_last_strides(shape, stride):
    """x.is_contiguous(memory_format=torch.channels_last), from shape and strides."""
    if len(shape) != 4:
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if shape[d] == 1:
            continue
        if stride[d] != expected:
            return False
        expected *= shape[d]
    return True
'''

# ---------------------------------------------------------------------------------------------
# realistic bugs, as (cell, wrong text, right text) edits of the reference


SUBTLE = {  # cell: (reference text, the learner's buggy text)
    # view: a size-1 dim with an unusual stride is taken as a chunk boundary
    "views-strides": ("if d == 0 or (shape[d - 1] != 1 and stride[d - 1] != numel_x * base):",
                      "if d == 0 or stride[d - 1] != numel_x * base:"),
    # slicing: the length rounds down
    "indexing-solution": ("length = max(0, (stop - start + step - 1) // step)", "length = max(0, (stop - start) // step)"),
    # expand: new leading dims always get stride 0
    "broadcast-solution": ("size, step = 1, shape[0] * stride[0] if shape else 0", "size, step = 1, 0"),
}

SYNTAX_ERROR = '''\
@add_to_class(Tensor)
def expand(self, *sizes):
    sizes = size_args(sizes)
    shape, stride = list(self.shape), list(self.stride())
    while len(shape) < len(sizes):
        shape.insert(0, 1); stride.insert(0, 0)
    for d, (n, want) in enumerate(zip(shape, sizes):
        if want != -1 and want != n:
            shape[d], stride[d] = want, 0
    return Tensor(self.storage, shape, stride, self.storage_offset())
'''

EXAMPLES = {
    # parts 1-3 done with the reference code; parts 4-7 untouched
    "first_three_parts": {gid: "ref" for gid in ("storage-solution", "views-infer", "views-strides",
                                                  "views-methods", "indexing-solution")},
    # everything done, independently of the reference
    "own_style_complete": OWN,
    # everything done, with three realistic bugs
    "subtle_bugs": {"*": "ref", **{gid: ("edit", *edit) for gid, edit in SUBTLE.items()}},
    # parts 1-5 done, but the broadcast cell does not compile; parts 6-7 not started
    "syntax_error": {gid: "ref" for gid in ("storage-solution", "views-infer", "views-strides", "views-methods",
                                            "indexing-solution", "as-strided-solution")} | {"broadcast-solution": SYNTAX_ERROR},
}


def learner_text(source: str) -> str:
    """A reference cell as a learner would have it: no solution markers, no canary."""
    drop = ("### BEGIN SOLUTION", "### END SOLUTION", "IPT-CANARY")
    return "\n".join(line for line in source.split("\n") if not any(d in line for d in drop))


def build(name: str, plan: dict, release, reference) -> nbformat.NotebookNode:
    ref = {c.metadata["nbgrader"]["grade_id"]: learner_text(c.source) for c in reference.cells}
    nb = nbformat.from_dict(release)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if not cell.metadata.get("nbgrader", {}).get("solution"):
            continue
        action = plan.get(gid, plan.get("*"))
        if action == "ref":
            cell.source = ref[gid]
        elif isinstance(action, tuple):
            _, old, new = action
            assert ref[gid].count(old) == 1, (name, gid, old)
            cell.source = ref[gid].replace(old, new)
        elif isinstance(action, str):
            cell.source = action
    return nb


def main() -> None:
    release = nbformat.read(REPO / "labs/lab01_strided/lab01_strided.ipynb", as_version=4)
    reference = solution_notebook((REPO / "solutions/lab01_strided.py").read_text())
    for name, plan in EXAMPLES.items():
        nb = build(name, plan, release, reference)
        text = nbformat.writes(nb)
        assert "IPT-CANARY" not in text and "BEGIN SOLUTION" not in text, name
        (HERE / f"{name}.ipynb").write_text(text + "\n")
        print(f"wrote {name}.ipynb")


if __name__ == "__main__":
    main()
