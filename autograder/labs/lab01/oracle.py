"""lab01 oracles: the torch side (P0) of every scenario in autograder/labs/lab01/scenarios.py, and the
comparisons and learner-facing messages the graders share.

Each oracle function takes the same plain-data arguments as its scenario and returns data of the
same form, computed with real PyTorch.
"""
# IPT-CANARY lab01 hidden-graders
from __future__ import annotations

import math

import numpy as np
import torch

from autograder.engine import replies

MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "channels_last": torch.channels_last}


# ---------------------------------------------------------------------------------------------
# torch side


def make(layout) -> torch.Tensor:
    if layout.get("dtype", "int64") == "float64":
        data = torch.arange(layout["size"], dtype=torch.float64) * 0.5 - 3.0
    else:
        data = torch.arange(layout["size"], dtype=torch.int64)
    return data.as_strided(tuple(layout["shape"]), tuple(layout["stride"]), layout["offset"])


def _index(spec):
    if isinstance(spec, list):
        return tuple(_index(item) for item in spec)
    if isinstance(spec, dict):
        return slice(*spec["slice"])
    return spec


def apply(t: torch.Tensor, op) -> torch.Tensor:
    name, args = op[0], op[1:]
    if name in ("view_t", "reshape_t", "expand_t", "permute_t"):  # one tuple argument instead of *sizes
        return getattr(t, name[:-2])(tuple(args[0]))
    if name == "contiguous_kw":
        return t.contiguous(memory_format=MEMORY_FORMATS[args[0]])
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
        return torch.broadcast_to(t, tuple(args[0]))
    if name == "as_strided":
        size, stride, offset = args
        if offset is None:
            return t.as_strided(tuple(size), tuple(stride))
        return t.as_strided(tuple(size), tuple(stride), offset)
    if name == "contiguous":
        return t.contiguous(memory_format=MEMORY_FORMATS[args[0]]) if args else t.contiguous()
    raise ValueError(f"unknown op {name!r}")


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


def _storage_ptr(t):
    return t.untyped_storage().data_ptr()


def describe(t: torch.Tensor, storages=(), flags=False):
    values = t.detach().contiguous().numpy().copy()
    out = {"shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset(),
           "shares": any(_storage_ptr(t) == _storage_ptr(s) for s in storages),
           "values": values, "read_error": None}
    if flags:
        out["contiguous"] = t.is_contiguous()
        out["channels_last"] = t.is_contiguous(memory_format=torch.channels_last)
    return out


def chain(base, ops, flags=False):
    t = make(base)
    root = t
    steps = []
    for op in ops:
        try:
            t = apply(t, op)
        except Exception as exc:  # noqa: BLE001 - torch's error type is the expected answer
            steps.append(_error(exc))
            break
        steps.append(describe(t, (root,), flags))
    return {"steps": steps}


def layout_facts(layout, indices):
    t = make(layout)
    positions = []
    for idx in indices:
        try:
            positions.append(t[tuple(idx)].storage_offset())
        except Exception as exc:  # noqa: BLE001
            positions.append(_error(exc))
    return {"numel": t.numel(), "contiguous": t.is_contiguous(), "storage_index": positions}


def contiguous_strides(shapes):
    return [list(torch.empty(tuple(shape)).stride()) for shape in shapes]


def broadcast_shapes(shapes):
    args = [s if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return {"shape": list(torch.broadcast_shapes(*args))}
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


def binary(op, a, b):
    ta, tb = make(a), make(b)
    fn = {"add": torch.add, "mul": torch.mul}[op]
    try:
        out = fn(ta, tb)
    except Exception as exc:  # noqa: BLE001
        return _error(exc)
    result = describe(out, (ta, tb))
    # The lab's elementwise result is always a fresh contiguous tensor (torch's TensorIterator
    # may choose the inputs' memory order instead; the values are the same).
    result["stride"] = list(torch.empty(out.shape).stride())
    return result


def binary_scalar(op, a, scalar):
    ta = make(a)
    out = {"add": lambda: ta + scalar, "radd": lambda: scalar + ta,
           "mul": lambda: ta * scalar, "rmul": lambda: scalar * ta}[op]()
    result = describe(out, (ta,))
    result["stride"] = list(torch.empty(out.shape).stride())
    return result


def reduce_sum(layout, dim, keepdim):
    t = make(layout)
    try:
        return describe(t.sum(dim, keepdim=keepdim), (t,))
    except IndexError as exc:
        return _error(exc)


def channels_last_strides(shapes):
    out = []
    for shape in shapes:
        try:
            out.append({"stride": list(torch.empty(tuple(shape), memory_format=torch.channels_last).stride())})
        except Exception as exc:  # noqa: BLE001
            out.append(_error(exc))
    return out


def layout_flags(layouts, memory_format="contiguous_format"):
    return [make(layout).is_contiguous(memory_format=MEMORY_FORMATS[memory_format]) for layout in layouts]


# ---------------------------------------------------------------------------------------------
# formatting, in the learner's terms (PyTorch syntax)


def fmt_tuple(values) -> str:
    values = list(values)
    return f"({values[0]},)" if len(values) == 1 else "(" + ", ".join(str(v) for v in values) + ")"


def fmt_layout(layout) -> str:
    return f"shape {fmt_tuple(layout['shape'])}, strides {fmt_tuple(layout['stride'])}, offset {layout['offset']}"


def _fmt_item(item) -> str:
    if isinstance(item, dict):
        start, stop, step = item["slice"]
        text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
        return text + ("" if step is None else f":{step}")
    return str(item)


def fmt_index(spec) -> str:
    if isinstance(spec, list):
        return "()" if not spec else ", ".join(_fmt_item(item) for item in spec) + ("," if len(spec) == 1 else "")
    return _fmt_item(spec)


def _args(values) -> str:
    return ", ".join(str(v) for v in values)


def fmt_op(expr: str, op) -> str:
    """The PyTorch expression that applies `op` to `expr`."""
    name, args = op[0], op[1:]
    if name in ("view_t", "reshape_t", "permute_t", "expand_t"):
        return f"{expr}.{name[:-2]}({fmt_tuple(args[0])})"
    if name == "contiguous_kw":
        return f"{expr}.contiguous(memory_format=torch.{args[0]})"
    if name in ("view", "reshape", "permute", "expand"):
        return f"{expr}.{name}({_args(args[0]) or '()'})"
    if name in ("transpose", "select"):
        return f"{expr}.{name}({args[0]}, {args[1]})"
    if name == "getitem":
        return f"{expr}[{fmt_index(args[0])}]"
    if name == "broadcast_to":
        return f"torch.broadcast_to({expr}, {fmt_tuple(args[0])})"
    if name == "as_strided":
        size, stride, offset = args
        tail = "" if offset is None else f", {offset}"
        return f"{expr}.as_strided({fmt_tuple(size)}, {fmt_tuple(stride)}{tail})"
    if name == "contiguous":
        return f"{expr}.contiguous(memory_format=torch.{args[0]})" if args else f"{expr}.contiguous()"
    return f"{expr}.{name}(...)"


def fmt_values(values) -> str:
    arr = np.asarray(values)
    if arr.size > 24:
        return f"an array of shape {fmt_tuple(arr.shape)}"
    return np.array2string(arr, separator=", ").replace("\n", "")


def fmt_raised(err) -> str:
    """'raised IndexError: message' for an error record of a scenario."""
    if err["error"] == "NotImplementedError":
        return "raised NotImplementedError (not implemented yet)"
    return f"raised {err['error']}: {err['message']}" if err["message"] else f"raised {err['error']}"


def describe_got(got) -> str:
    if got.get("error") == "WrongType":
        return got["message"]
    if "error" in got:
        return fmt_raised(got)
    return f"returned a tensor with {fmt_layout(got)}"


# ---------------------------------------------------------------------------------------------
# comparisons: None when equal, else one learner-facing sentence


MAX_READ = 1 << 20


def read_reply(got, what: str):
    """Validate one tensor reply of a scenario and read its values here, in P0.

    Returns an error record ({"error", "message"}) or a dict with shape, stride, offset, shares,
    values (or None) and read_error (a sentence, or None). Anything malformed fails the test."""
    err = replies.error_reply(got, what)
    if err is not None:
        return {"error": err["error"], "message": err.get("message", "")[:300]}
    got = replies.dict_of(got, {"shape", "stride", "offset", "shares", "storage"}, what)
    shape = replies.int_list(got["shape"], f"{what}.shape")
    stride = replies.int_list(got["stride"], f"{what}.stride()")
    offset = replies.integer(got["offset"], f"{what}.storage_offset()")
    out = {"shape": shape, "stride": stride, "offset": offset,
           "shares": replies.boolean(got["shares"], f"{what} (storage shared)"), "values": None, "read_error": None}
    for key in ("contiguous", "channels_last"):
        if key in got:
            value = got[key]
            out[key] = value if isinstance(value, str) else replies.boolean(value, f"{what}.is_contiguous()")
    data = got["storage"]
    if len(stride) != len(shape) or any(n < 0 for n in shape):
        out["read_error"] = "its shape and strides do not describe a valid layout"
    elif data is None or not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype.kind not in "biuf":
        out["read_error"] = "its storage does not hold a 1-D numeric numpy array"
    elif math.prod(shape) > MAX_READ:
        out["read_error"] = f"it has {math.prod(shape)} elements"
    else:
        pos = np.full((), offset, dtype=np.int64)
        for n, st in zip(shape, stride, strict=True):
            pos = pos[..., None] + np.arange(n, dtype=np.int64) * st
        if pos.size and (pos.min() < 0 or pos.max() >= len(data)):
            out["read_error"] = (f"its shape, strides and offset reach storage position "
                                 f"{int(pos.min()) if pos.min() < 0 else int(pos.max())}, outside its storage of size {len(data)}")
        else:
            out["values"] = data[pos] if pos.size else np.zeros(shape, dtype=data.dtype)
    return out


def compare_tensor(got, want, what: str, fields=("shape", "stride", "offset", "values", "shares"),
                   views_of: str = "x") -> str | None:
    """Compare one described tensor (scenario vs oracle); `what` names it in PyTorch syntax."""
    got = read_reply(got, what)
    if "error" in want:
        if "error" in got and got["error"] == want["error"]:
            return None
        return (f"{what} should raise {want['error']} like torch (\"{want['message']}\"), "
                f"but yours {describe_got(got)}")
    if "error" in got:
        return f"{what} should return a tensor with {fmt_layout(want)} like torch, but yours {describe_got(got)}"
    for key, name in (("shape", "shape"), ("stride", "strides"), ("offset", "storage offset")):
        if key in fields and got[key] != want[key]:
            value = fmt_tuple if key != "offset" else str
            return (f"{what} should have {name} {value(want[key])} like torch, but yours has {value(got[key])} "
                    f"(torch: {fmt_layout(want)}; yours: {fmt_layout(got)})")
    if "values" in fields:
        if got["read_error"]:
            return f"{what} has {fmt_layout(got)}, but {got['read_error']}"
        w, g = np.asarray(want["values"]), np.asarray(got["values"])
        if w.shape != g.shape or not np.array_equal(w, g):
            return f"{what} should hold the values {fmt_values(w)} like torch, but yours holds {fmt_values(g)}"
        if g.dtype.kind != w.dtype.kind:
            return f"{what} should hold {w.dtype} values like torch, but yours holds {g.dtype}"
    if "shares" in fields and got["shares"] != want["shares"]:
        if want["shares"]:
            return f"{what} should be a view sharing the storage of {views_of} (torch does not copy here), but yours made a copy"
        return f"{what} should be a new tensor with its own storage (torch copies here), but yours shares the storage of {views_of}"
    for key, name in (("contiguous", "is_contiguous()"), ("channels_last", "is_contiguous(memory_format=torch.channels_last)")):
        if key in fields and key in want and got.get(key) != want[key]:
            shown = got.get(key)
            return (f"{what}.{name} should be {want[key]} like torch, but yours "
                    + (shown if isinstance(shown, str) else f"gives {shown}"))
    return None


def compare_chain(got, want, base, ops, fields=("shape", "stride", "offset", "values", "shares")) -> str | None:
    """Step by step; the message names the chain up to the first differing step."""
    lead = f"For x with {fmt_layout(base)}"
    got_steps = replies.list_of(replies.dict_of(got, {"steps"}, lead)["steps"], f"{lead}: the steps of the chain")
    expr = "x"
    previous = None
    for i, (op, w) in enumerate(zip(ops, want["steps"], strict=True)):
        expr_i = fmt_op(expr, op)
        if i >= len(got_steps):
            return f"{lead}: {expr_i} was never reached (an earlier step stopped the chain)"
        g = got_steps[i]
        where = lead if previous is None else f"{lead} ({expr} has {fmt_layout(previous)})"
        message = compare_tensor(g, w, expr_i, fields)
        if message:
            return f"{where}: {message}"
        if "error" in w:
            return None
        expr, previous = expr_i, w
    return None


def assert_chain(student, base, ops, fields=("shape", "stride", "offset", "values", "shares"), flags=False):
    got = call(student, f"x with {fmt_layout(base)}", "lab01.scenarios:chain", base, ops, flags=flags)
    want = chain(base, ops, flags=flags)
    message = compare_chain(got, want, base, ops, fields)
    assert message is None, message


def call(student, context: str, target: str, *args, **kwargs):
    """student.run, turning an uncaught learner error into a failure that says where it happened."""
    try:
        return student.run(target, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - only StudentError (and subclasses) become failures
        if any(cls.__name__ == "StudentError" for cls in type(exc).__mro__):
            raise AssertionError(f"{context}: {exc}") from None
        raise


def layout(shape, stride, offset=0, extra=0, dtype="int64", size=None):
    """A layout with explicit strides on a storage just large enough (plus `extra` spare elements), or of
    `size` elements (0: torch.empty(0)'s storage)."""
    needed = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    return {"shape": list(shape), "stride": list(stride), "offset": offset,
            "size": max(offset + needed, 1) + extra if size is None else size, "dtype": dtype}


def contiguous_layout(shape, offset=0, extra=0, dtype="int64"):
    """The row-major layout of `shape`."""
    return layout(shape, list(torch.empty(tuple(shape)).stride()), offset, extra, dtype)


def numel(shape) -> int:
    return math.prod(shape)


# ---------------------------------------------------------------------------------------------
# companions: every fixed case runs together with a success case of the same part, chosen where
# numpy's own view machinery (reshape without copy, broadcast_to, basic indexing, swapaxes) gives a
# different answer from PyTorch. A submission that always raises the expected error, or hands the
# stride logic to numpy, fails every fixed test of the part, not only some.

S, N = "slice", None
COMPANIONS = {
    "views": [
        ([2, 1], [1, 3], 0, [["view", [2, 1, 1]]]),          # new size-1 dims: torch (1, 3, 3), numpy (1, 1, 1)
        ([1, 4], [3, 4], 1, [["reshape", [1, 4]]]),          # kept size-1 dim: torch (16, 4), numpy (3, 4)
        ([1, 1], [2, 3], 1, [["view", [1]]]),                # torch (3,), numpy (1,)
        ([2, 1, 2], [1, 3, 12], 0, [["view", [2, 1, 2]]]),        # torch (1, 24, 12), numpy (1, 3, 12)
    ],
    "indexing": [
        ([3, 4], [4, 1], 0, [["getitem", {S: [5, N, N]}]]),               # empty slice: offset 12 (numpy: 0)
        ([3, 4], [4, 1], 1, [["getitem", [{S: [N, N, N]}, {S: [4, N, N]}]]]),
        ([], [], 2, [["transpose", 0, -1]]),                             # 0-d transpose (numpy raises)
        ([2, 3], [3, 1], 0, [["getitem", [1, {S: [3, N, 2]}]], ["transpose", 0, -1]]),
    ],
    "broadcast": [
        ([3], [1], 0, [["expand", [1, 3]]]),                 # new size-1 dim: torch (3, 1), numpy (0, 1)
        ([3, 1], [1, 7], 0, [["expand", [2, 3, 1]]]),        # kept size-1 dim: torch (0, 1, 7), numpy (0, 1, 0)
        ([1, 3], [3, 1], 0, [["broadcast_to", [1, 3]]]),     # torch (3, 1), numpy (0, 1)
    ],
    "as_strided": [
        ([8], [1], 1, [["as_strided", [3, 2], [2, 1], None], ["contiguous"]]),
        ([3, 2], [1, 3], 0, [["as_strided", [2, 2], [3, 1], 2], ["contiguous"]]),
    ],
    "channels_last": [
        ([2, 3, 2, 2], [12, 4, 2, 1], 1, [["contiguous", "channels_last"]]),
        ([2, 1, 3, 3], [9, 9, 3, 1], 0, [["contiguous", "channels_last"]]),
    ],
}


def companion(part: str, i: int):
    shape, stride, offset, ops = COMPANIONS[part][i % len(COMPANIONS[part])]
    return layout(shape, stride, offset, extra=1), ops


def assert_with_companion(student, part: str, i: int, base, ops, fields=("shape", "stride", "offset", "values", "shares"),
                          flags=False):
    """The fixed case, then a success case of the same part (both must hold)."""
    assert_chain(student, base, ops, fields=fields, flags=flags)
    c_base, c_ops = companion(part, i)
    assert_chain(student, c_base, c_ops, fields=fields, flags=flags)
