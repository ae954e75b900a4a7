"""Safe data across the trust boundary: JSON with tagged numpy arrays, framed by length.

Only None, bool, int, float, str, lists/tuples, dicts with str keys and numpy arrays of plain
numeric or bool dtype cross. Arrays travel as raw bytes plus dtype and shape; nothing is pickled.
Runs on both sides (P0 and P1), so it imports nothing but the standard library and numpy.
"""
from __future__ import annotations

import base64
import json
import math
import os
import select
import struct
import time

import numpy as np

MAX_MESSAGE = 256 * 1024 * 1024
MAX_DEPTH = 64
_HEADER = struct.Struct(">I")
_ARRAY_KINDS = "biufc"  # bool, int, uint, float, complex


class WireError(ValueError):
    """Data that may not cross the boundary, or a malformed message."""


def to_wire(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise WireError("data nested too deeply")
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, np.generic) and value.dtype.kind in _ARRAY_KINDS:
        return to_wire(value.item(), depth + 1) if value.dtype.kind != "c" else to_wire(np.asarray(value), depth + 1)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS or value.dtype.hasobject:
            raise WireError(f"arrays of dtype {value.dtype} cannot cross")
        arr = np.require(value, requirements="C")  # keeps 0-d arrays 0-d (ascontiguousarray would not)
        return {"__ndarray__": {"dtype": arr.dtype.str, "shape": list(arr.shape),
                                "data": base64.b64encode(arr.tobytes()).decode("ascii")}}
    if type(value) in (list, tuple):
        return [to_wire(v, depth + 1) for v in value]
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str or k.startswith("__") and k.endswith("__"):
                raise WireError(f"dict key {k!r} cannot cross (keys are plain strings)")
            out[k] = to_wire(v, depth + 1)
        return out
    raise WireError(f"a value of type {type(value).__name__} cannot cross the boundary")


def from_wire(value, depth: int = 0):
    if depth > MAX_DEPTH:
        raise WireError("data nested too deeply")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is list:
        return [from_wire(v, depth + 1) for v in value]
    if type(value) is dict:
        if "__ndarray__" in value:
            spec = value["__ndarray__"]
            dtype = np.dtype(spec["dtype"])
            if dtype.kind not in _ARRAY_KINDS or dtype.hasobject:
                raise WireError(f"arrays of dtype {dtype} cannot cross")
            shape = tuple(int(n) for n in spec["shape"])
            data = base64.b64decode(spec["data"], validate=True)
            if len(data) != dtype.itemsize * math.prod(shape):
                raise WireError("array data does not match its shape")
            return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        if "__float__" in value:
            return float(value["__float__"])
        return {str(k): from_wire(v, depth + 1) for k, v in value.items()}
    raise WireError(f"unexpected {type(value).__name__} in message")


def encode(message: dict) -> bytes:
    body = json.dumps(message, allow_nan=False, separators=(",", ":")).encode()
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes is larger than {MAX_MESSAGE}")
    return _HEADER.pack(len(body)) + body


def send(fd: int, message: dict) -> None:
    data = memoryview(encode(message))
    while data:
        data = data[os.write(fd, data):]


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


class Reader:
    """Reads framed messages from a file descriptor, with an optional deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = bytearray()

    def _fill(self, size: int, deadline: float | None) -> None:
        while len(self.buffer) < size:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                    raise Timeout()
            chunk = os.read(self.fd, max(65536, size - len(self.buffer)))
            if not chunk:
                raise Closed()
            self.buffer += chunk

    def read(self, deadline: float | None = None) -> dict:
        self._fill(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(self.buffer[:_HEADER.size])
        if size > MAX_MESSAGE:
            raise WireError(f"message of {size} bytes is larger than {MAX_MESSAGE}")
        self._fill(_HEADER.size + size, deadline)
        body = bytes(self.buffer[_HEADER.size:_HEADER.size + size])
        del self.buffer[:_HEADER.size + size]
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise WireError(f"malformed message: {exc}") from None
        if type(message) is not dict:
            raise WireError("malformed message: not an object")
        return message
