# IPT-CANARY lab10 roles.py: hidden grading text, never shown to learners
"""The referee's role in lab10's worlds: the part's rank program (scenarios.py), run with P0's own
implementation (oracle.py) at the referee's seat.

It makes the collective calls the statement describes, so a learner rank that makes others waits for a
peer that never comes. It records, as case 0, every tensor that arrived from the other ranks (`seen{i}`,
in order of arrival: bucket sums, gathered parameters, gathered layers and reduce-scattered gradient slices,
all-reduced activations and gradients, received pipeline tensors) and the values its own program produced (`out.NAME` and `out.NAME.J`). P0 compares
both with its single-process oracle.
"""
from __future__ import annotations

import numpy as np
import torch._dynamo  # noqa: F401 - torch.optim imports it on first use (seconds): the zygote imports it once, before any world
import torch.optim  # noqa: F401

from autograder.labs.lab10 import oracle, scenarios


def _flatten(prefix: str, value, into: dict) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}", item, into)
    elif isinstance(value, list):
        for j, item in enumerate(value):
            _flatten(f"{prefix}.{j}", item, into)
    elif value is not None and not isinstance(value, str):
        into[prefix] = np.asarray(value)


def play(ctx) -> None:
    part, spec = ctx.job["part"], ctx.job["spec"]
    if ctx.job.get("group") and ctx.seat not in ctx.job["group"]:
        ctx.record(0)   # a rank outside the group takes no part
        return
    oracle.SEEN.clear()
    # fsdp: the referee's shard differs in backward's gathers (arrays shift{k}, only the referee's): see oracle.ShardedLinear
    oracle.SHIFTS[:] = [ctx.arrays[f"shift{k}"] for k in range(len(spec.get("layers", []))) if f"shift{k}" in ctx.arrays]
    result = scenarios.PROGRAMS[part](oracle, spec, dict(ctx.arrays), ctx.group)
    record = {f"seen{i}": t.detach().numpy().copy() for i, t in enumerate(oracle.SEEN)}
    _flatten("out", result, record)
    ctx.record(0, **record)
