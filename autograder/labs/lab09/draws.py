# IPT-CANARY lab09 draws.py: hidden grading text, never shown to learners
"""Inputs for lab09's graded worlds, drawn in P0 from a case's generator (`case_rng(k)`).

Floats are "wide": values spread over twelve decades, so that any other summation order than the lab's
changes some result bits (at W = 4 gloo's own all-reduce differs on about one element in ten; at W = 2
every order agrees, which is why most graded worlds have 3 or 4 ranks).
"""
from __future__ import annotations

import numpy as np


def wide(rng, shape, dtype="float32") -> np.ndarray:
    size = int(np.prod(shape))
    values = rng.standard_normal(size) * 10.0 ** rng.integers(-6, 6, size)
    return np.asarray(values.reshape(shape)).astype(dtype)


def values(rng, shape, dtype, op=None) -> np.ndarray:
    """A tensor for op: wide floats; small integers for PRODUCT (no overflow needed to make a point);
    int64 anywhere in its range for the others."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if op == "product":
            return np.asarray(rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(dtype)
        return wide(rng, shape, dtype)
    if op == "product":
        return np.asarray(rng.integers(-3, 4, shape)).astype(dtype)
    return np.asarray(rng.integers(-2**40, 2**40, shape)).astype(dtype)


def per_rank(rng, world, shape, dtype, op=None) -> list[np.ndarray]:
    return [values(rng, shape, dtype, op) for _ in range(world)]


def with_nan(rng, xs: list[np.ndarray], avoid_rank0: bool = True) -> list[np.ndarray]:
    """One NaN on a rank other than 0 (gloo's MIN/MAX drop NaNs that are not on the first rank)."""
    xs = [x.copy() for x in xs]
    rank = int(rng.integers(1, len(xs))) if avoid_rank0 and len(xs) > 1 else 0
    if xs[rank].size:
        xs[rank].reshape(-1)[int(rng.integers(xs[rank].size))] = np.nan
    return xs


def odd_size(rng, world) -> int:
    """A size not divisible by the world (chunks of two lengths)."""
    while True:
        n = int(rng.integers(world + 1, 300))
        if n % world:
            return n


def seat(rng, world) -> int:
    return int(rng.integers(world))


def subgroup(rng, world, size) -> list[int]:
    """Sorted global ranks of a group whose group ranks are not all equal to the global ones (never 0..size-1)."""
    while True:
        group = sorted(int(r) for r in rng.choice(world, size, replace=False))
        if group != list(range(size)):
            return group


def deep_root(rng, world, seat) -> int:
    """A root that puts `seat` below another rank than the root in the binomial tree (its relative rank is
    not a power of two: 3, 5, 6, 7, ...), so that a flat scheme (the root talking to everyone) sends the seat
    other messages. Needs a world of 4 or more."""
    choices = [root for root in range(world) if ((seat - root) % world) & ((seat - root) % world - 1)]
    return int(choices[int(rng.integers(len(choices)))])
