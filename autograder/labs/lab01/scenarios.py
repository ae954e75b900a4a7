"""lab01 scenarios: run on the student side (P1), against the learner's module `sub`.

numpy only (torch is denied in this lab). Inputs and results are safe data. Tensors are built
directly from (shape, stride, offset) with the locked `Tensor` constructor, so a part is tested
through its own operations only. A result goes back as its layout and a copy of its storage's flat
contents: P0 reads the values itself from those (never the learner's `storage_index`), after
validating every field.

Op encoding for `chain` (one list per op, applied left to right):
    ["view", sizes]  ["reshape", sizes]  ["transpose", d0, d1]  ["permute", dims]
    ["select", dim, index]  ["getitem", spec]  ["expand", sizes]  ["broadcast_to", sizes]
    ["as_strided", size, stride, offset_or_None]  ["contiguous"]  ["contiguous", memory_format]
A getitem spec is an int, {"slice": [start, stop, step]} (None allowed), or a list of those (a tuple).
"""
# IPT-CANARY lab01 hidden-graders

import numpy as np

MAX_VALUES = 1 << 20


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


def _make(sub, layout):
    """A learner Tensor over a fresh Storage of arange values (int64, or float64 halves)."""
    if layout.get("dtype", "int64") == "float64":
        data = np.arange(layout["size"], dtype=np.float64) * 0.5 - 3.0
    else:
        data = np.arange(layout["size"], dtype=np.int64)
    return sub.Tensor(sub.Storage(data), tuple(layout["shape"]), tuple(layout["stride"]), layout["offset"])


def _index(spec):
    if isinstance(spec, list):
        return tuple(_index(item) for item in spec)
    if isinstance(spec, dict):
        return slice(*spec["slice"])
    return spec


def _apply(sub, t, op):
    name, args = op[0], op[1:]
    if name in ("view_t", "reshape_t", "expand_t", "permute_t"):  # one tuple argument instead of *sizes
        return getattr(t, name[:-2])(tuple(args[0]))
    if name == "contiguous_kw":
        return t.contiguous(memory_format=args[0])
    if name == "view":
        return t.view(*args[0]) if args[0] else t.view(())
    if name == "reshape":
        return t.reshape(*args[0]) if args[0] else t.reshape(())
    if name == "transpose":
        return t.transpose(args[0], args[1])
    if name == "permute":
        return t.permute(*args[0]) if args[0] else t.permute(())
    if name == "select":
        return t.select(args[0], args[1])
    if name == "getitem":
        return t[_index(args[0])]
    if name == "expand":
        return t.expand(*args[0]) if args[0] else t.expand(())
    if name == "broadcast_to":
        return sub.broadcast_to(t, tuple(args[0]))
    if name == "as_strided":
        size, stride, offset = args
        if offset is None:
            return t.as_strided(tuple(size), tuple(stride))
        return t.as_strided(tuple(size), tuple(stride), offset)
    if name == "contiguous":
        return t.contiguous(*args)
    raise ValueError(f"unknown op {name!r}")  # a grader bug, not the learner's


def _flag(fn):
    try:
        return bool(fn())
    except Exception as exc:  # noqa: BLE001 - recorded: the grader reports it
        return f"raised {type(exc).__name__}: {str(exc)[:200]}"


def _same_memory(storage, other):
    """The same Storage, or another Storage object over the same numpy memory."""
    if storage is other:
        return True
    data = getattr(storage, "data", None)
    return isinstance(data, np.ndarray) and np.may_share_memory(data, other.data)


def _describe(sub, t, storages=(), flags=False):
    """Plain data about a learner tensor: its layout and its storage's contents (P0 reads the values)."""
    if not isinstance(t, sub.Tensor):
        return {"error": "WrongType", "message": f"returned a {type(t).__name__}, not a Tensor"}
    shape = [int(n) for n in t.shape]
    stride = [int(s) for s in t.stride()]
    offset = int(t.storage_offset())
    data = getattr(t.storage, "data", None)
    data = np.array(data, copy=True) if isinstance(data, np.ndarray) and data.ndim == 1 and data.size <= MAX_VALUES else None
    out = {"shape": shape, "stride": stride, "offset": offset,
           "shares": any(_same_memory(t.storage, s) for s in storages), "storage": data}
    if flags:
        out["contiguous"] = _flag(lambda: t.is_contiguous())
        out["channels_last"] = _flag(lambda: t.is_contiguous("channels_last"))
    return out


def chain(sub, base, ops, flags=False):
    """Apply `ops` one after the other to a tensor laid out as `base`; describe every step.

    A step where the learner's code raises is recorded as {"error", "message"} and ends the chain.
    """
    t = _make(sub, base)
    storage = t.storage
    steps = []
    for op in ops:
        try:
            t = _apply(sub, t, op)
        except Exception as exc:  # noqa: BLE001 - compared by type with torch's error
            steps.append(_error(exc))
            break
        steps.append(_describe(sub, t, (storage,), flags))
        if "error" in steps[-1]:
            break
    return {"steps": steps}


def layout_facts(sub, layout, indices):
    """numel, is_contiguous and storage_index (for each index tuple) of a tensor laid out as `layout`."""
    t = _make(sub, layout)
    positions = []
    for idx in indices:
        try:
            positions.append(int(t.storage_index(tuple(idx))))
        except Exception as exc:  # noqa: BLE001 - out-of-range indices must raise IndexError
            positions.append(_error(exc))
    return {"numel": int(t.numel()), "contiguous": bool(t.is_contiguous()), "storage_index": positions}


def contiguous_strides(sub, shapes):
    return [[int(s) for s in sub.contiguous_strides(tuple(shape))] for shape in shapes]


def broadcast_shapes(sub, shapes):
    """torch.broadcast_shapes(*shapes); a shape given as an int stays an int."""
    args = [s if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return {"shape": [int(n) for n in sub.broadcast_shapes(*args)]}
    except Exception as exc:  # noqa: BLE001 - incompatible shapes must raise like torch
        return _error(exc)


def binary(sub, op, a, b):
    """sub.add / sub.mul of two tensors laid out as `a` and `b` (each on its own storage)."""
    ta, tb = _make(sub, a), _make(sub, b)
    fn = {"add": sub.add, "mul": sub.mul}[op]
    try:
        out = fn(ta, tb)
    except Exception as exc:  # noqa: BLE001 - shapes that do not broadcast must raise RuntimeError
        return _error(exc)
    return _describe(sub, out, (ta.storage, tb.storage))


def binary_scalar(sub, op, a, scalar):
    """a + scalar, scalar * a, ... through the Tensor operators."""
    ta = _make(sub, a)
    out = {"add": lambda: ta + scalar, "radd": lambda: scalar + ta,
           "mul": lambda: ta * scalar, "rmul": lambda: scalar * ta}[op]()
    return _describe(sub, out, (ta.storage,))


def reduce_sum(sub, layout, dim, keepdim, positional=False):
    t = _make(sub, layout)
    try:
        out = t.sum(dim, keepdim) if positional else t.sum(dim, keepdim=keepdim)
    except Exception as exc:  # noqa: BLE001 - an out-of-range dim must raise IndexError
        return _error(exc)
    return _describe(sub, out, (t.storage,))


def channels_last_strides(sub, shapes):
    out = []
    for shape in shapes:
        try:
            out.append({"stride": [int(s) for s in sub.channels_last_strides(tuple(shape))]})
        except Exception as exc:  # noqa: BLE001 - non-4-D shapes must raise RuntimeError
            out.append(_error(exc))
    return out


def layout_flags(sub, layouts, memory_format="contiguous_format"):
    """t.is_contiguous(memory_format) for tensors laid out as `layouts`."""
    return [bool(_make(sub, layout).is_contiguous(memory_format)) for layout in layouts]
