"""Run a function on a small world of gloo ranks from a notebook: `run_world(fn, W, inputs)`.

    def add_one(x):
        return x + dist.get_rank()

    run_world(add_one, 3, [[np.zeros(2)], [np.zeros(2)], [np.zeros(2)]])
    # -> [[array([0., 0.])], [array([1., 1.])], [array([2., 2.])]]

Each rank is a process forked from this one (so `fn` may be defined in a notebook cell). The ranks meet
through a FileStore in a fresh temporary folder: no port to pick, nothing listening in the notebook
(a store served by the process that forks was seen to hang forked ranks). gloo then talks TCP over the
loopback interface. Rank r calls `fn(*inputs[r], **kwargs)` with torch tensors; what it returns (a
tensor, a number, or a list / tuple of them) comes back as a list of numpy arrays. A rank that raises
makes `run_world` raise `WorldError` with every rank's error; a world that runs past `timeout` seconds
is killed and raises `WorldTimeout`. Under torchrun the same rank functions run unchanged: torchrun
starts the processes and `dist.init_process_group("gloo")` reads the rendezvous from the environment.
"""
from __future__ import annotations

import datetime
import os
import pickle
import select
import shutil
import sys
import tempfile
import time

import numpy as np

__all__ = ["run_world", "WorldError", "WorldTimeout"]


class WorldError(RuntimeError):
    """A rank failed; `.errors` maps rank -> "Type: message"."""

    def __init__(self, errors: dict[int, str]):
        self.errors = errors
        super().__init__("; ".join(f"rank {r}: {m}" for r, m in sorted(errors.items())))


class WorldTimeout(WorldError):
    """The world did not finish within its timeout; every rank was killed."""


def _arrays(value) -> list[np.ndarray]:
    import torch
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, torch.Tensor):
            out.append(item.detach().cpu().contiguous().numpy().copy())
        elif isinstance(item, (bool, int, float, np.ndarray, np.generic)):
            out.append(np.asarray(item))
        else:
            raise TypeError(f"a rank returned a {type(item).__name__}; return tensors or numbers")
    return out


def _rank(fn, rank, world, folder, args, kwargs, timeout):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if sys.platform == "linux":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    delta = datetime.timedelta(seconds=timeout)
    store = dist.FileStore(os.path.join(folder, "store"), world)
    store.set_timeout(delta)
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=delta)
    try:
        tensors = [torch.from_numpy(np.array(a, copy=True)) if isinstance(a, np.ndarray) else a for a in args]
        return _arrays(fn(*tensors, **kwargs))
    finally:
        store.add("done", 1)                     # leave together: nobody closes a link a peer still reads
        deadline = time.monotonic() + timeout
        while int(store.add("done", 0)) < world and time.monotonic() < deadline:
            time.sleep(0.005)
        dist.destroy_process_group()


def run_world(fn, world_size: int, inputs=None, *, kwargs=None, timeout: float = 30.0) -> list[list[np.ndarray]]:
    """Run fn on `world_size` forked gloo ranks; inputs[r] is rank r's list of arguments (numpy arrays
    arrive as torch tensors). Returns, per rank, the list of numpy arrays fn returned."""
    if not 1 <= world_size <= 16:
        raise ValueError(f"world_size must be in 1..16, got {world_size}")
    inputs = [[] for _ in range(world_size)] if inputs is None else [list(a) for a in inputs]
    if len(inputs) != world_size:
        raise ValueError(f"need one list of inputs per rank ({world_size}), got {len(inputs)}")
    folder = tempfile.mkdtemp(prefix="world-")
    children = {}
    try:
        for rank in range(world_size):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the rank
                os.close(read)
                try:
                    answer = ("ok", _rank(fn, rank, world_size, folder, inputs[rank], kwargs or {}, timeout))
                except BaseException as exc:  # noqa: BLE001 - reported to the parent
                    answer = ("error", f"{type(exc).__name__}: {str(exc)[:500]}")
                with os.fdopen(write, "wb") as f:
                    f.write(pickle.dumps(answer))
                os._exit(0)
            os.close(write)
            children[read] = (rank, pid, [])
        waiting, deadline = set(children), time.monotonic() + timeout + 10
        while waiting and time.monotonic() < deadline:
            for fd in select.select(list(waiting), [], [], 0.05)[0]:
                chunk = os.read(fd, 1 << 20)
                children[fd][2].append(chunk) if chunk else waiting.discard(fd)
    finally:
        for fd, (rank, pid, _) in children.items():
            try:
                os.kill(pid, 9) if fd in waiting else None
            except (ProcessLookupError, NameError):
                pass
            os.close(fd)
            os.waitpid(pid, 0)
        shutil.rmtree(folder, ignore_errors=True)
    if waiting:
        raise WorldTimeout({children[fd][0]: f"still running after {timeout:.0f} s" for fd in waiting})
    results, errors = [], {}
    for rank, _, chunks in sorted(children.values()):
        status, value = pickle.loads(b"".join(chunks)) if chunks else ("error", "died without an answer")
        if status == "ok":
            results.append(value)
        else:
            errors[rank] = value
            results.append([])
    if errors:
        raise WorldError(errors)
    return results
