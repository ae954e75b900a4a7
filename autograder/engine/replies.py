"""Reply validation for graders: every value P1 sends back is checked for the shape P0 expects
before it is compared with the oracle.

A reply comes from learner-controlled code, so it may be anything the wire can carry. Each helper
returns the value when it fits and otherwise fails the test with a sentence a learner can act on
(an AssertionError, which the plugin reports as a failed check, never as an internal error).

    got = replies.dict_of(student.run("lab01.scenarios:view", ...), {"shape", "stride", "offset"}, "view()")
    shape = replies.int_list(got["shape"], "view().shape", length=len(want_shape))
    for g, w in replies.pairs(got_rows, want_rows, "rows"):   # never a bare zip over learner data
        ...
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

_KINDS = {bool: "a bool", int: "an int", float: "a number", str: "a string", list: "a list", dict: "a dict"}


def describe(value: Any) -> str:
    """A short, learner-readable description of a reply's type and size."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return f"the bool {value}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:6])
        return f"a dict with keys [{keys}]"
    if isinstance(value, (int, float, str)):
        text = repr(value)
        return f"{_KINDS[type(value)] if type(value) in _KINDS else type(value).__name__} {text[:40]}"
    return type(value).__name__


def fail(what: str, expected: str, got: Any) -> None:
    raise AssertionError(f"{what} should be {expected}, got {describe(got)}")


def is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def integer(value: Any, what: str) -> int:
    if not is_int(value):
        fail(what, "an int", value)
    return int(value)


def number(value: Any, what: str, finite: bool = True) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        fail(what, "a number", value)
    if finite and not math.isfinite(float(value)):
        fail(what, "a finite number", value)
    return float(value)


def boolean(value: Any, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        fail(what, "True or False", value)
    return bool(value)


def string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        fail(what, "a string", value)
    return value


def list_of(value: Any, what: str, length: int | None = None, min_length: int = 0) -> list:
    if not isinstance(value, (list, tuple)):
        fail(what, "a list" if length is None else f"a list of {length} item(s)", value)
    if length is not None and len(value) != length:
        fail(what, f"a list of {length} item(s)", value)
    if len(value) < min_length:
        fail(what, f"a list of at least {min_length} item(s)", value)
    return list(value)


def int_list(value: Any, what: str, length: int | None = None) -> list[int]:
    items = list_of(value, what, length)
    return [integer(v, f"{what}[{i}]") for i, v in enumerate(items)]


def dict_of(value: Any, keys: Iterable[str], what: str, exact: bool = False) -> dict:
    """A dict holding at least `keys` (exactly those with exact=True)."""
    keys = set(keys)
    if not isinstance(value, dict):
        fail(what, f"a dict with keys {sorted(keys)}", value)
    missing = keys - set(value)
    if missing:
        raise AssertionError(f"{what} should have the key(s) {sorted(missing)}; got {describe(value)}")
    if exact and set(value) - keys:
        raise AssertionError(f"{what} has unexpected key(s) {sorted(set(value) - keys)}")
    return value


def array(value: Any, what: str, shape: Sequence[int] | None = None, dtype: Any = None,
          kind: str | None = None) -> np.ndarray:
    """A numpy array; `shape` exact, `dtype` exact, or `kind` a numpy kind string ("f", "iu", "b")."""
    if not isinstance(value, np.ndarray):
        fail(what, "an array" if shape is None else f"an array of shape {tuple(shape)}", value)
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(what, f"an array of shape {tuple(shape)}", value)
    if dtype is not None and value.dtype != np.dtype(dtype):
        fail(what, f"an array of dtype {np.dtype(dtype)}", value)
    if kind is not None and value.dtype.kind not in kind:
        fail(what, f"an array of a {'/'.join(kind)}-kind dtype", value)
    return value


def pairs(got: Any, want: Sequence, what: str):
    """zip() for learner data: the reply must be a list exactly as long as the expectation."""
    return zip(list_of(got, what, len(want)), want, strict=True)


def error_reply(value: Any, what: str) -> dict | None:
    """A scenario that expects errors returns {"error": type name, "message": text} or a result.
    Returns the error dict, or None when the reply is not an error."""
    if isinstance(value, dict) and "error" in value:
        kind = string(value["error"], f"{what} (error type)")
        message = string(value.get("message", ""), f"{what} (error message)")
        # both are learner text that may reach feedback: cut them (a class name can be thousands of characters)
        return {**value, "error": kind if len(kind) <= 80 else kind[:80] + "...", "message": message[:300]}
    return None
