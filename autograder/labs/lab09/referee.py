# IPT-CANARY lab09 referee.py: hidden grading text, never shown to learners
"""lab09's referee role: at one seat of the learner's world it speaks the lab's protocol from P0's script,
recording every message it receives.

The engine's referee rank (`autograder/engine/referee.py`) runs it: a trusted process inside P1's network
namespace only, under an unprivileged uid of its own, that never loads the learner's code. It hosts the
world's TCPStore, joins the gloo group at its seat (and the subgroup, if any), and calls `replay(ctx)`,
which plays the job's cases (world.py writes them from the model) one after another:

* a send is an `isend` of P0's array; a receive is a blocking `recv` into a buffer of the expected size
  filled with a sentinel (a short message leaves sentinel values in place, a long one kills the child:
  both are failed cases);
* after each case it waits for its sends, then records what it received, in order, as m0, m1, ...
  (JOBDIR/case_K.npz).

Then the engine waits until the learner's ranks report done on the store, leaves the group and exits.
P0 believes only the arrays recorded here, compared with its own model; a child that dies or times out
is a failed case, never an internal error.
"""
import numpy as np
import torch
import torch.distributed as dist


def replay(ctx) -> None:
    """job["cases"][k]: the seat's events of case k, [kind ("send"/"recv"), group rank of the peer, array
    name, dtype, size]; a send's array is ctx.arrays[name]."""
    for k, case in enumerate(ctx.job["cases"]):
        sends, received = [], {}
        for kind, peer, key, dtype, size in case:
            if kind == "send":
                sends.append(dist.isend(torch.from_numpy(ctx.arrays[key].copy()), group=ctx.group, group_dst=peer))
            else:
                if np.dtype(dtype).kind == "f":
                    fill = (ctx.rng.standard_normal(size) * 1e30).astype(dtype)
                else:
                    fill = ctx.rng.integers(-2**40, 2**40, size).astype(dtype)
                buffer = torch.from_numpy(fill)
                dist.recv(buffer, group=ctx.group, group_src=peer)
                received[f"m{len(received)}"] = buffer.numpy()
        for work in sends:
            work.wait()
        ctx.record(k, **received)
