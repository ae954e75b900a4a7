# IPT-CANARY lab10 draws.py: hidden grading text, never shown to learners
"""The worlds of lab10's graders, drawn in P0 from a case's generator (`case_rng(k)`): (spec, per-rank
arrays). Every rank gets only what its own process would have (its data, its initial weights)."""
from __future__ import annotations

import numpy as np

from autograder.labs.lab10 import oracle


def _f(rng, *shape, scale=1.0) -> np.ndarray:
    """float32 values of `shape` (an array even for shape (): a numpy scalar would travel as a Python float)."""
    return np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)


def seat(rng, world: int) -> int:
    return int(rng.integers(world))


def subgroup(rng, world: int, size: int) -> list[int]:
    """Sorted global ranks of a group whose rank 0 is not global rank 0."""
    while True:
        group = sorted(int(r) for r in rng.choice(world, size, replace=False))
        if group[0] != 0:
            return group


# ---------------------------------------------------------------- ddp
def ddp(rng, world: int, shuffled: bool = False, spare: str | None = None, frozen: bool = True,
        probe: bool = False) -> tuple[dict, list[dict]]:
    """A Linear/tanh model: chained blocks of drawn widths, or square blocks run in a shuffled order (so
    backward reaches them in another order than registration); a frozen parameter; an unused `spare`
    Linear; two or three SGD steps, the first with micro-batches accumulated under no_sync."""
    if shuffled:
        d = int(rng.integers(3, 7))
        nblocks = int(rng.integers(3, 5))
        blocks = [(d, d, bool(rng.integers(2))) for _ in range(nblocks)]
        order = [int(i) for i in rng.permutation(nblocks)]
        while order == sorted(order):
            order = [int(i) for i in rng.permutation(nblocks)]
        d_in, d_out = d, d
    else:
        widths = [int(w) for w in rng.integers(2, 8, int(rng.integers(3, 5)))]
        blocks = [(widths[k], widths[k + 1], bool(rng.integers(2)) or k == 0) for k in range(len(widths) - 1)]
        order = list(range(len(blocks)))
        d_in, d_out = widths[0], widths[-1]
    spec = {"blocks": blocks, "order": order, "spare": spare, "frozen": [], "lr": float(rng.uniform(0.05, 0.3))}
    # parameter shapes in registration order
    shapes = [(2, 2), (2,)] if spare == "first" else []
    for i, o, b in blocks:
        shapes += [(o, i)] + ([(o,)] if b else [])
    shapes += [(2, 2), (2,)] if spare == "last" else []
    if frozen:
        spec["frozen"] = [int(rng.integers(len(shapes)))]
    sizes = [int(np.prod(s)) * 4 for k, s in enumerate(shapes) if k not in spec["frozen"]]
    cap = int(rng.integers(max(sizes) // 2 + 1, max(sum(sizes) // 2, max(sizes) // 2 + 2)))
    spec["cap"] = cap
    spec["first_cap"] = None if rng.integers(3) == 0 else int(rng.integers(1, min(sizes) + 8))
    steps = [[int(r) for r in rng.integers(1, 4, int(rng.integers(2, 4)))]]      # accumulated under no_sync
    steps += [[int(rng.integers(1, 5))] for _ in range(int(rng.integers(1, 3)))]
    spec["steps"] = steps
    arrays = []
    for _ in range(world):
        a = {f"p{k}": _f(rng, *s, scale=0.7) for k, s in enumerate(shapes)}   # rank 0's are the truth
        a["scale"] = rng.uniform(0.5, 1.5, d_out).astype(np.float32)
        for s, micro in enumerate(steps):
            for b, rows in enumerate(micro):
                a[f"x{s}_{b}"], a[f"y{s}_{b}"] = _f(rng, rows, d_in), _f(rng, rows, d_out)
        arrays.append(a)
    if len(oracle.plan_buckets(sizes, spec["cap"], spec["first_cap"])) < 2:
        spec["cap"] = max(1, min(sizes))
    if probe:   # every parameter a bucket of its own: the last block's weight and bias are ready, and launched,
        assert spare != "last", "the last parameter must be a used one"   # before the probe's backward
        spec["probe"] = True
        spec["cap"], spec["first_cap"] = 1, None
        i, o, _ = blocks[-1]
        blocks[-1] = (i, o, True)
        if not shapes or shapes[-1] != (o,):
            shapes.append((o,))
            for a in arrays:
                a[f"p{len(shapes) - 1}"] = _f(rng, o, scale=0.7)
        spec["frozen"] = [k for k in spec["frozen"] if k < len(shapes) - 2]
    return spec, arrays


def in_group(arrays: list[dict], group: list[int], world: int) -> list[dict]:
    """Per-member arrays (group rank order) placed at the members' global ranks of a world of `world`."""
    out = [{} for _ in range(world)]
    for g, r in enumerate(group):
        out[r] = arrays[g]
    return out


# ---------------------------------------------------------------- zero
def zero(rng, world: int, n_small: bool = False, dtype: str = "float32", single: bool = False) -> tuple[dict, list[dict]]:
    """ZeroAdamW's parameters (several shapes; n_small: fewer elements than ranks; single: one parameter
    whose size the world does not divide), gradients per rank and step, one missing gradient."""
    if single:
        shapes = [(int(world * rng.integers(1, 4) + rng.integers(1, world)),)] if world > 1 else [(3,)]
    elif n_small:
        shapes = [(), (int(rng.integers(1, world)),)] if world > 2 else [()]
    else:
        shapes = []
        while not shapes or (world > 1 and sum(int(np.prod(s)) for s in shapes) % world == 0):
            shapes = [tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(0, 3)))) for _ in range(int(rng.integers(2, 5)))]
    steps = int(rng.integers(2, 4))
    none = [[int(rng.integers(steps)), int(rng.integers(len(shapes)))]]
    spec = {"shapes": [list(s) for s in shapes], "steps": steps, "lr": float(rng.uniform(0.01, 0.1)),
            "betas": [float(rng.uniform(0.8, 0.95)), float(rng.uniform(0.9, 0.999))],
            "eps": float(10.0 ** rng.uniform(-8, -6)), "wd": float(rng.uniform(0.0, 0.2)), "none": none, "dtype": dtype}
    init = {f"init{i}": _f(rng, *s).astype(dtype) for i, s in enumerate(shapes)}
    arrays = []
    for _ in range(world):
        a = dict(init)
        for s in range(steps):
            for i, shape in enumerate(shapes):
                a[f"g{s}_{i}"] = _f(rng, *shape, scale=float(10.0 ** rng.uniform(-2, 1))).astype(dtype)
        arrays.append(a)
    return spec, arrays


# ---------------------------------------------------------------- fsdp
def fsdp(rng, world: int, n_small: bool = False, seat: int | None = None, three_d: bool | None = None) -> tuple[dict, list[dict]]:
    """A chain of 2-3 ShardedLinears with tanh between (a bias or not; flat sizes the world does not
    divide, or, n_small, a layer with fewer elements than ranks), inputs of 2 or 3 dimensions (three_d;
    None: drawn), 2-3 SGD steps. The rank at `seat` (group rank order) also gets the referee's backward shifts `shift{k}`."""
    while True:
        if n_small:
            layers = [(1, 1, bool(world > 2)), (1, int(rng.integers(2, 4)), True)]
        else:
            widths = [int(w) for w in rng.integers(2, 7, int(rng.integers(3, 5)))]
            layers = [(widths[k], widths[k + 1], bool(rng.integers(2)) or k == 0) for k in range(len(widths) - 1)]
        sizes = [i * o + (o if b else 0) for i, o, b in layers]
        if n_small or world == 1 or all(n % world for n in sizes):
            break
    three_d = bool(rng.integers(2)) if three_d is None else three_d
    lead = [int(rng.integers(1, 5))] + ([int(rng.integers(2, 4))] if three_d else [])
    spec = {"layers": [list(x) for x in layers], "steps": int(rng.integers(2, 4)), "lr": float(rng.uniform(0.05, 0.3))}
    weights = {}
    for k, (i, o, b) in enumerate(layers):
        weights[f"w{k}"] = _f(rng, o, i, scale=0.7)
        if b:
            weights[f"b{k}"] = _f(rng, o, scale=0.5)
    arrays = []
    for _ in range(world):
        a = dict(weights)
        for t in range(spec["steps"]):
            a[f"x{t}"] = _f(rng, *lead, layers[0][0])
            a[f"y{t}"] = _f(rng, *lead, layers[-1][1])
        arrays.append(a)
    if seat is not None:
        for k, n in enumerate(sizes):
            arrays[seat][f"shift{k}"] = _f(rng, -(-n // world), scale=0.5)
    return spec, arrays


# ---------------------------------------------------------------- tp
def tp(rng, world: int, three_d: bool = False, transposed: bool = False, size: int | None = None) -> tuple[dict, list[dict]]:
    """A world of `world` ranks whose tensor-parallel group has `size` ranks (default: all)."""
    size = world if size is None else size
    i = int(rng.integers(2, 7))
    hidden = size * int(rng.integers(1, 4))
    lead = (int(rng.integers(1, 4)), int(rng.integers(2, 4))) if three_d else (int(rng.integers(2, 5)),)
    shared = {"w1": _f(rng, hidden, i), "b1": _f(rng, hidden), "w2": _f(rng, i, hidden), "b2": _f(rng, i),
              "x": _f(rng, *lead, i), "gy": _f(rng, *lead, i),
              "bad_w": _f(rng, size * int(rng.integers(1, 3)) + 1, i), "bad_b": _f(rng, size * 2 + 1 + i)}
    shared["bad_b"] = shared["bad_b"][:shared["bad_w"].shape[0]]
    ashape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 3))))
    arrays = []
    for _ in range(world):
        arrays.append({**shared, "a": _f(rng, *ashape), "ca": _f(rng, *ashape), "b": _f(rng, *ashape), "cb": _f(rng, *ashape)})
    return {"transposed": transposed}, arrays


# ---------------------------------------------------------------- pipeline
def pipeline(rng, p: int, m: int, schedule: str, vocab: int | None = None) -> tuple[dict, list[dict]]:
    """p stages of one or two Linear layers (tanh between); vocab: stage 0 first embeds integer token ids."""
    widths = [int(w) for w in rng.integers(2, 6, p + 1)]
    stages = []
    for s in range(p):
        layers = [(widths[s], widths[s + 1])]
        if rng.integers(3) == 0:
            layers = [(widths[s], widths[s]), (widths[s], widths[s + 1])]
        stages.append(layers)
    rows = int(rng.integers(1, 4))
    if schedule == "gpipe":
        plan = oracle.gpipe(m, p)
    elif schedule == "1f1b":
        plan = oracle.one_f_one_b(m, p)
    elif schedule == "1f1b-permuted":   # 1F1B over the micro-batches taken in a drawn order (not 0, 1, 2, ...)
        order = [int(i) for i in rng.permutation(m)]
        while m > 1 and order == sorted(order):
            order = [int(i) for i in rng.permutation(m)]
        plan = [[(kind, order[i]) for kind, i in stage] for stage in oracle.one_f_one_b(m, p)]
    else:   # GPipe with the backwards in reverse order on every stage: as valid, other messages first
        plan = [[("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))] for _ in range(p)]
    spec = {"stages": stages, "m": m, "in_shapes": [[rows, widths[s]] for s in range(p)], "vocab": vocab,
            "schedule": [[list(a) for a in stage] for stage in plan]}
    arrays = []
    for s in range(p):
        a = {}
        for k, (i, o) in enumerate(stages[s]):
            a[f"w{s}_{k}"], a[f"b{s}_{k}"] = _f(rng, o, i, scale=0.8), _f(rng, o, scale=0.5)
        if s == 0 and vocab:
            a["x"] = rng.integers(0, vocab, m * rows).astype(np.int64)
            a["emb"] = _f(rng, vocab, widths[0])
        elif s == 0:
            a["x"] = _f(rng, m * rows, widths[0])
        if s == p - 1:
            a["y"] = _f(rng, m * rows, widths[-1])
        arrays.append(a)
    return spec, arrays
