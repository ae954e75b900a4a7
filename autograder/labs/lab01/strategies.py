"""hypothesis strategies for lab01: layouts (shape, strides, offset, storage size) and op chains.

Ops are drawn one at a time against the torch tensor the chain has produced so far, so most are
valid for the current shape and a controlled share are not (torch's error is then the answer).
"""
# IPT-CANARY lab01 hidden-graders
from __future__ import annotations

import functools
import math

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from autograder.labs.lab01 import oracle


def examples(n: int) -> settings:
    """Hypothesis settings for a grader: the cases are drawn from the grading seed (one per submission,
    the same on a regrade); no database, no deadline."""
    return settings(max_examples=n, deadline=None, database=None, print_blob=False,
                    suppress_health_check=list(HealthCheck))


def reuse(make):
    """One strategy object per hashable set of arguments. hypothesis validates a strategy object, and works out
    its properties, on its first draw: a fresh object per draw costs more than the draw itself."""
    made = {}

    @functools.wraps(make)
    def strategy(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:   # a list argument (a fixed shape): a strategy of its own, as before
            return make(*args, **kwargs)
        if key not in made:
            made[key] = make(*args, **kwargs)
        return made[key]
    return strategy


# ---------------------------------------------------------------------------------------------
# layouts


@reuse
@st.composite
def layouts(draw, shape=None, min_dim=1, max_dim=4, min_size=1, max_size=4, max_numel=96,
            gaps=True, odd_size1=True, zero_strides=False, offsets=True, order=None, dtype="int64"):
    """A non-overlapping strided layout, like a permuted, sliced view of a bigger tensor.

    Memory order is a random permutation of the dims; steps of 2 and padding between dims model
    slicing; size-1 dims may carry any stride (PyTorch ignores them); with `zero_strides`, dims
    may be expanded (stride 0).
    """
    if shape is None:
        ndim = draw(st.integers(min_dim, max_dim))
        shape = draw(_shapes(ndim, min_size, max_size, max_numel))
    shape = list(shape)
    ndim = len(shape)
    if order is None:
        order = draw(st.permutations(range(ndim)))  # order[-1] is the innermost dim
    stride = [0] * ndim
    running = 1
    for d in reversed(order):
        step = draw(st.sampled_from((1, 1, 1, 2))) if gaps else 1
        pad = draw(st.sampled_from((0, 0, 0, 1))) if gaps else 0
        stride[d] = running * step
        if shape[d] > 1:
            running = stride[d] * (shape[d] - 1) + running + pad
    for d in range(ndim):
        if shape[d] == 1 and odd_size1 and draw(st.booleans()):
            stride[d] = draw(st.integers(0, running + 2))
        elif zero_strides and shape[d] > 1 and draw(st.integers(0, 3)) == 0:
            stride[d] = 0
    offset = draw(st.integers(0, 3)) if offsets else 0
    extra = draw(st.integers(0, 2)) if offsets else 0
    return oracle.layout(shape, stride, offset, extra, dtype)


@reuse   # hypothesis also parses the source of each new filter
def _shapes(ndim, min_size, max_size, max_numel):
    return st.lists(st.integers(min_size, max_size), min_size=ndim, max_size=ndim).filter(lambda s: math.prod(s) <= max_numel)


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@reuse
@st.composite
def factor_shapes(draw, numel: int, max_dim=5):
    """A shape with exactly `numel` elements (numel >= 1), size-1 dims included now and then."""
    primes = prime_factors(numel)
    k = draw(st.integers(0 if numel == 1 else 1, 4))
    sizes = [1] * k
    for p in primes:
        sizes[draw(st.integers(0, k - 1))] *= p
    for _ in range(draw(st.integers(0, 2))):
        if len(sizes) < max_dim:
            sizes.insert(draw(st.integers(0, len(sizes))), 1)
    return sizes


# ---------------------------------------------------------------------------------------------
# ops, drawn against the current torch tensor (a strategy per shape: `view_op(t)` is `_view_op(t.shape)`)


_VIEW_KINDS = st.sampled_from(("exact",) * 6 + ("infer",) * 3 + ("wrong", "two_infer", "negative"))


def view_op(current):
    return _view_op(tuple(current.shape))


@reuse
@st.composite
def _view_op(draw, current):
    """A view or reshape to a shape built from the current element count (`current`: the current shape);
    sometimes invalid."""
    numel = math.prod(current)
    name = draw(st.sampled_from(("view", "view", "reshape")))
    kind = draw(_VIEW_KINDS)
    sizes = draw(factor_shapes(numel)) if numel >= 1 else [0]
    if kind == "infer" and sizes:
        sizes[draw(st.integers(0, len(sizes) - 1))] = -1
    elif kind == "wrong" and sizes:
        i = draw(st.integers(0, len(sizes) - 1))
        sizes[i] += draw(st.sampled_from((1, 2)))
        if draw(st.booleans()) and len(sizes) > 1:
            sizes[(i + 1) % len(sizes)] = -1
    elif kind == "two_infer" and len(sizes) >= 2:
        i, j = draw(st.lists(st.integers(0, len(sizes) - 1), min_size=2, max_size=2, unique=True))
        sizes[i] = sizes[j] = -1
    elif kind == "negative" and sizes:
        sizes[draw(st.integers(0, len(sizes) - 1))] = -2
    return [name, sizes]


def _dim(draw, ndim, bad=False):
    if bad:
        return draw(st.sampled_from((ndim, ndim + 1, -ndim - 1)))
    return draw(st.integers(-ndim, ndim - 1))


_STEPS = st.sampled_from((None, None, 1, 2, 2, 3))
_ODD_STEPS = st.sampled_from((None, None, 1, 2, 2, 3, -1, 0))


@reuse
@st.composite
def slice_item(draw, size):
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    start, stop = draw(bound), draw(bound)
    step = draw(_ODD_STEPS if draw(st.integers(0, 9)) == 0 else _STEPS)
    return {"slice": [start, stop, step]}


@reuse
@st.composite
def index_item(draw, size):
    if draw(st.integers(0, 2)) == 0:
        return draw(slice_item(size))
    if draw(st.integers(0, 7)) == 0:
        return draw(st.sampled_from((size, -size - 1)))
    return draw(st.integers(-size, size - 1)) if size > 0 else 0


def indexing_op(current):
    return _indexing_op(tuple(current.shape))


@reuse
@st.composite
def _indexing_op(draw, current):
    shape = list(current)
    ndim = len(shape)
    if ndim == 0:
        return draw(st.sampled_from((["getitem", []], ["getitem", 0], ["getitem", [0]],
                                     ["transpose", 0, -1], ["transpose", -1, -1], ["transpose", 0, 1],
                                     ["permute", []], ["permute", [0]], ["select", 0, 0],
                                     ["getitem", {"slice": [None, None, None]}])))
    kind = draw(st.sampled_from(("transpose", "permute", "select", "getitem", "getitem", "getitem")))
    bad = draw(st.integers(0, 7)) == 0
    if kind == "transpose":
        return ["transpose", _dim(draw, ndim, bad), _dim(draw, ndim)]
    if kind == "permute":
        dims = list(draw(st.permutations(range(ndim))))
        dims = [d - ndim if draw(st.integers(0, 3)) == 0 else d for d in dims]
        if bad:
            how = draw(st.sampled_from(("short", "long", "dup", "range")))
            if how == "short":
                dims = dims[:-1]
            elif how == "long":
                dims = dims + [0]
            elif how == "dup" and ndim > 1:
                dims[0] = dims[1]
            else:
                dims[0] = _dim(draw, ndim, bad=True)
        return ["permute", dims]
    if kind == "select":
        dim = _dim(draw, ndim, bad and draw(st.booleans()))
        size = shape[dim] if -ndim <= dim < ndim else 1
        index = draw(st.integers(-size - 1, size)) if bad else draw(st.integers(-size, size - 1)) if size else 0
        return ["select", dim, index]
    count = draw(st.integers(1, ndim + 1 if bad else ndim))
    items = [draw(index_item(shape[i] if i < ndim else 1)) for i in range(count)]
    if count == 1 and draw(st.booleans()):
        return ["getitem", items[0]]
    return ["getitem", items]


def expand_op(current):
    return _expand_op(tuple(current.shape))


@reuse
@st.composite
def _expand_op(draw, current):
    shape = list(current)
    sizes = []
    bad = draw(st.integers(0, 6)) == 0
    for n in shape:
        if n == 1:
            sizes.append(draw(st.sampled_from((1, -1, 0, 2, 3, 4, 3))))
        else:
            sizes.append(draw(st.sampled_from((n, n, -1))))
    lead = [draw(st.sampled_from((1, 2, 3))) for _ in range(draw(st.integers(0, 2)))]
    sizes = lead + sizes
    if bad and sizes:
        # (no negative sizes here: torch accepts expand(-2, 0) of a (1, 1) tensor and returns a
        # tensor with a negative size; the fixed cases cover negative sizes where torch raises)
        how = draw(st.sampled_from(("mismatch", "lead_infer", "fewer")))
        i = draw(st.integers(0, len(sizes) - 1))
        if how == "mismatch":
            sizes[i] = sizes[i] + 1 if sizes[i] > 0 else 5
        elif how == "lead_infer":
            sizes.insert(0, -1)
        elif how == "fewer" and shape:
            sizes = sizes[len(lead) + 1:]
    name = draw(st.sampled_from(("expand", "expand", "broadcast_to")))
    return [name, sizes]


_AS_STRIDED_KINDS = st.sampled_from(("fits",) * 6 + ("default", "oob", "negative_stride", "length", "negative_offset"))


@reuse
@st.composite
def as_strided_op(draw, storage_size):
    ndim = draw(st.integers(0, 3))
    size = [draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, 4)) for _ in range(ndim)]
    stride = [draw(st.integers(0, 5)) for _ in range(ndim)]
    need = 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if 0 not in size else 0
    room = storage_size - need
    kind = draw(_AS_STRIDED_KINDS)
    if kind == "fits":
        offset = draw(st.integers(0, max(room, 0)))
    elif kind == "default":
        offset = None
    elif kind == "oob":
        offset = max(room, 0) + draw(st.integers(1, 3))
    elif kind == "negative_offset":
        offset = -draw(st.integers(1, 2))
    elif kind == "negative_stride" and ndim:
        offset = 0
        stride[draw(st.integers(0, ndim - 1))] = -1
    else:
        offset = 0
        stride = stride + [1]
    return ["as_strided", size, stride, offset]


def run_chain(draw, base, op_strategy, length):
    """Draw `length` ops, each against the torch tensor the previous ones produced."""
    t = oracle.make(base)
    ops = []
    for _ in range(length):
        op = draw(op_strategy(t))
        ops.append(op)
        try:
            t = oracle.apply(t, op)
        except Exception:  # noqa: BLE001 - torch raised: the chain ends here
            break
    return ops


@reuse
@st.composite
def chains(draw, layout_strategy, op_strategy, min_ops=1, max_ops=3):
    base = draw(layout_strategy)
    ops = run_chain(draw, base, op_strategy, draw(st.integers(min_ops, max_ops)))
    return base, ops


# ---------------------------------------------------------------------------------------------
# broadcasting


@reuse
@st.composite
def broadcastable_shapes(draw, max_dim=4, max_size=4, count=(1, 4), allow_bad=True):
    """Shapes that broadcast to a common target (sometimes perturbed so they do not)."""
    ndim = draw(st.integers(0, max_dim))
    target = [draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, max_size)) for _ in range(ndim)]
    shapes = []
    for _ in range(draw(st.integers(*count))):
        k = draw(st.integers(0, ndim))
        shape = [1 if draw(st.integers(0, 2)) == 0 else n for n in target[ndim - k:]]
        shapes.append(shape)
    if allow_bad and draw(st.integers(0, 4)) == 0:
        i = draw(st.integers(0, len(shapes) - 1))
        if shapes[i]:
            j = draw(st.integers(0, len(shapes[i]) - 1))
            shapes[i][j] = draw(st.sampled_from((-1, -2, shapes[i][j] + 2, 5)))
    if shapes and draw(st.integers(0, 5)) == 0:
        i = draw(st.integers(0, len(shapes) - 1))
        if len(shapes[i]) == 1:
            shapes[i] = shapes[i][0]  # a bare int, as torch.broadcast_shapes accepts
    return shapes
