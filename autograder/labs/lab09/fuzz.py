# IPT-CANARY lab09 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab09's reference against P0's model and torch.distributed (gloo), in P0.

Each world (W = 1..4, forked ranks, labkit.world) runs a batch of drawn cases: every collective of the lab
on 0-d to 2-d tensors of float32 / float64 / int64 with wide values, sizes below, at and above W, uneven
all-gather sizes, all-to-all chunks of drawn shapes, transposed tensors, NaN under MIN / MAX, every root.
Each rank returns the reference's answer and gloo's; P0 then requires
* reference == model.py bit for bit (model.same): the model is the graders' oracle, so this is the check
  that the oracle and the reference tell the same story;
* reference == gloo exactly for data movement, integers and MIN / MAX without NaN; within the reordering
  bound 2(W-1)·eps·Σ|x| for float SUM (gloo adds in its own order); PRODUCT is left to the model.

    run(40)    # CI: a few seconds          run(400)   # make fuzz
"""
from __future__ import annotations

import functools

import numpy as np

from autograder.labs.lab09 import draws, model

KINDS = ("broadcast", "reduce", "reduce_scatter", "all_gather", "all_reduce", "all_to_all")
OPS = ("sum", "product", "min", "max")


@functools.lru_cache(maxsize=1)
def reference():
    from autograder.engine.variants import reference_module
    return reference_module("lab09")


def _shape(rng, world):
    return [(), (0,), (1,), (world - 1,), (world + 1,), (int(rng.integers(2, 200)),), (3, int(rng.integers(1, 7)))][
        int(rng.integers(7))]


def draw_case(rng, world) -> dict:
    kind = KINDS[int(rng.integers(len(KINDS)))]
    dtype = ["float32", "float64", "int64"][int(rng.integers(3))]
    case = {"kind": kind, "dtype": dtype}
    if kind == "all_to_all":
        case["chunks"] = [[draws.values(rng, _shape(rng, world), dtype) for _ in range(world)] for _ in range(world)]
        return case
    if kind == "all_gather":
        case["chunks"] = [draws.values(rng, (int(rng.integers(0, 6)),), dtype) for _ in range(world)]
        return case
    op = OPS[int(rng.integers(4))]
    shape = _shape(rng, world)
    xs = draws.per_rank(rng, world, shape, dtype, op)
    if op in ("min", "max") and dtype != "int64" and rng.random() < 0.3:
        xs = draws.with_nan(rng, xs)
    case.update(op=op, xs=xs, root=int(rng.integers(world)), layout="t" if len(shape) == 2 and rng.random() < 0.5 else "c")
    return case


def _rank_program(cases):
    """Runs on every rank: the reference and gloo on the same inputs, case by case."""
    def program(_):
        import torch
        import torch.distributed as dist
        ref = reference()
        rank = dist.get_rank()
        out = []
        for c in cases:
            if c["kind"] == "all_to_all":
                chunks = [torch.from_numpy(a.copy()) for a in c["chunks"][rank]]
                mine = ref.all_to_all(chunks)
                out += [torch.cat([m.reshape(-1) for m in mine])] if mine else []
                continue
            if c["kind"] == "all_gather":
                mine = ref.ring_all_gather(torch.from_numpy(c["chunks"][rank].copy()), [a.size for a in c["chunks"]])
                out.append(mine)
                continue
            x = torch.from_numpy(c["xs"][rank].copy())
            if c["layout"] == "t":
                x = torch.from_numpy(np.ascontiguousarray(c["xs"][rank].T)).T
            op = getattr(dist.ReduceOp, c["op"].upper())
            theirs = x.clone()
            if c["kind"] == "broadcast":
                ref.tree_broadcast(x, c["root"])
                dist.broadcast(theirs, c["root"])
                out += [x.contiguous(), theirs]
            elif c["kind"] == "reduce":
                ref.tree_reduce(x, c["root"], op)
                dist.reduce(theirs, c["root"], op)
                out += [x.contiguous(), theirs]
            elif c["kind"] == "all_reduce":
                ref.ring_all_reduce(x, op)
                dist.all_reduce(theirs, op)
                out += [x.contiguous(), theirs]
            else:  # reduce_scatter
                out.append(ref.ring_reduce_scatter(x, op))
        return out
    return program


def _model(c) -> model.World:
    if c["kind"] in ("all_to_all", "all_gather"):
        return model.simulate(c["kind"], c["chunks"])
    args = {"op": c["op"]}
    if c["kind"] == "broadcast":
        args = {"src": c["root"]}
    elif c["kind"] == "reduce":
        args["dst"] = c["root"]
    return model.simulate(c["kind"], c["xs"], **args)


def _check(c, world, rank, got: list, m: model.World):
    what = f"{c['kind']} W={world} rank {rank} {c.get('op', '')} {c['dtype']}"
    values = m.values[rank]
    if c["kind"] == "all_to_all":
        want = np.concatenate([v.reshape(-1) for v in values["results"]]) if values["results"] else None
        assert want is None or model.same(got.pop(0), want), what
        return
    if c["kind"] in ("all_gather", "reduce_scatter"):
        assert model.same(got.pop(0), values["result"], c.get("op")), what
        return
    mine, theirs = got.pop(0), got.pop(0)
    want = values["tensor"]
    assert model.same(mine, want, c["op"]), f"{what}: reference != model"
    if c["kind"] == "reduce" and rank != c["root"]:
        return  # gloo leaves partial results there: the lab's rule differs on purpose
    nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
    if c["kind"] == "broadcast" or want.dtype.kind != "f" or c["op"] in ("min", "max"):
        if c["op"] in ("min", "max") and nan.any():
            return  # gloo drops NaNs that are not on rank 0
        assert model.same(theirs, want, c["op"] if c["kind"] != "broadcast" else None), f"{what}: reference != gloo"
    elif c["op"] == "sum":
        bound = 2 * (world - 1) * np.finfo(want.dtype).eps * sum(np.abs(x.astype(np.float64)) for x in c["xs"])
        assert np.all(np.abs(theirs.astype(np.float64) - want) <= bound + 1e-300), f"{what}: reference far from gloo"


def run(examples: int) -> int:
    from labkit.world import run_world
    rng = np.random.default_rng(2026)
    done = 0
    while done < examples:
        world = int(rng.integers(1, 5))
        cases = [draw_case(rng, world) for _ in range(min(12, examples - done))]
        reference()  # loaded before the fork, once
        results = run_world(_rank_program(cases), world, [[np.zeros(1)] for _ in range(world)], timeout=60)
        for rank in range(world):
            got = list(results[rank])
            for c in cases:
                _check(c, world, rank, got, _model(c))
        done += len(cases)
    return done


if __name__ == "__main__":
    import sys

    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 40), "cases agree")
