# IPT-CANARY lab08 cases.py: hidden grading text, never shown to learners
"""P0's input generators for lab08: shapes with block sizes of every granularity, values over many
magnitudes and offsets, and the corners (constant and all-zero blocks, exact .5 ties, values where
x * (1/s) and x / s round apart, saturation)."""
from __future__ import annotations

import numpy as np

RANGES = [(-128, 127), (0, 255), (-8, 7), (0, 15), (-127, 127), (-128, 126), (-32768, 32767), (-2, 1)]
RANGE_DTYPE = {(-128, 127): "int8", (0, 255): "uint8", (-8, 7): "int8", (0, 15): "uint8", (-127, 127): "int8", (-128, 126): "int8",
               (-32768, 32767): "int16", (-2, 1): "int8"}


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def grouped_block(rng, shape, need_group=True):
    """A block size with at least one dimension cut into groups (1 < block < size) when possible."""
    for _ in range(50):
        block = tuple(int(rng.choice(divisors(n))) for n in shape)
        grouped = any(1 < b < n for b, n in zip(block, shape, strict=True))
        if (grouped or not need_group) and not all(b == 1 for b in block):
            return block
    return tuple(shape)


def values(rng, shape, kind=None):
    kind = kind or rng.choice(["normal", "shifted", "positive", "negative", "wide", "tiny"])
    x = rng.standard_normal(shape)
    if kind == "shifted":
        x = x * rng.uniform(0.1, 3) + rng.uniform(-5, 5)
    elif kind == "positive":
        x = np.abs(x) * rng.uniform(0.1, 10)
    elif kind == "negative":
        x = -np.abs(x) * rng.uniform(0.1, 10)
    elif kind == "wide":
        x = x * 10.0 ** rng.integers(-3, 4, size=shape)
    elif kind == "tiny":
        x = x * 1e-6
    return x.astype(np.float32)


def shape_2d(rng):
    return (int(rng.choice([1, 2, 3, 4, 6, 8])), int(rng.choice([4, 6, 8, 12, 16, 24, 32, 64])))


def shape_3d(rng):
    return tuple(int(rng.choice(c)) for c in ([1, 2, 3, 4], [2, 4, 6], [4, 8, 12]))


def with_special_blocks(rng, x, block):
    """Overwrite one block with a constant and another with zeros (when there are several blocks)."""
    grid = [s // b for s, b in zip(x.shape, block, strict=True)]
    if int(np.prod(grid)) < 3:
        return x
    x = x.copy()
    for fill in (float(rng.uniform(-3, 3)), 0.0):
        start = [int(rng.integers(g)) * b for g, b in zip(grid, block, strict=True)]
        idx = tuple(slice(s, s + b) for s, b in zip(start, block, strict=True))
        x[idx] = fill
    return x


def tie_case(rng, shape, block, qmin, qmax):
    """Power-of-two scales (exact reciprocals) and x at exact half steps: round-half-to-even decides."""
    grid = tuple(s // b for s, b in zip(shape, block, strict=True))
    scale = (2.0 ** rng.integers(-6, 3, size=grid)).astype(np.float32)
    zp = rng.integers(qmin, qmax + 1, size=grid).astype(np.int32)
    k = rng.integers(qmin - 4, qmax + 4, size=shape)
    full = scale
    for axis, b in enumerate(block):
        full = np.repeat(full, b, axis=axis)
    x = ((k + 0.5) * full).astype(np.float32)
    return x, scale, zp


def reciprocal_case(rng, n):
    """n float32 (x, s) pairs where round(x * (1/s)) != round(x / s) in float32."""
    xs, ss = [], []
    while len(xs) < n:
        s = np.float32(rng.uniform(0.01, 1.0))
        k = int(rng.integers(-100, 100))
        x = np.float32((k + 0.5) * s)
        for step in range(-3, 4):
            xx = np.float32(x + np.float32(step) * np.spacing(x))
            a = np.round(np.float32(xx * np.float32(np.float32(1.0) / s)))
            b = np.round(np.float32(xx / s))
            if a != b:
                xs.append(xx)
                ss.append(s)
                break
    return np.array(xs, np.float32), np.array(ss, np.float32)
