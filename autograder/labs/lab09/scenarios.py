# IPT-CANARY lab09 scenarios.py: hidden grading text, never shown to learners
"""lab09 scenarios: run on the student side (P1), against the learner's module `sub`.

`world(sub, port, world, seat, cases, timeout)` forks one process per learner rank (every rank but
`seat`, where P0's referee sits). Each joins the gloo group through the TCPStore the referee serves on
127.0.0.1:port (seat None: all ranks are here and meet through a FileStore in /tmp), runs the cases in
order with the learner's functions, and hands back per case what the call returned and what the tensor
it was given holds afterwards. A rank stops at its first exception (its peers cannot go on either).

Trust: these functions only build inputs, call the learner's code and return the values it produced.
P0 compares them, and what its referee received, with its own model; nothing here reports how a value
was computed.
"""
import datetime
import io
import os
import pickle
import select
import tempfile
import time

import numpy as np

STORE_TIMEOUT = 30.0   # the rendezvous (a busy machine may start a rank late); gloo's own operations get `timeout`


def ready(sub):
    return True


def _tensor(value, layout):
    import torch
    if layout == "t" and value.ndim == 2:
        return torch.from_numpy(np.ascontiguousarray(value.T)).T      # same values, strides transposed
    return torch.from_numpy(np.array(value, copy=True))


def _out(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy().copy()
    if isinstance(value, (list, tuple)):
        return [_out(v) for v in value]
    return repr(type(value).__name__)


def _op(name):
    from torch.distributed import ReduceOp
    return getattr(ReduceOp, name.upper())


def _call(sub, case, group):
    kind = case["kind"]
    extra = {} if group is None else {"group": group}
    if kind == "all_to_all":
        chunks = [_tensor(c, "c") for c in case["input"]]
        return {"results": _out(sub.all_to_all(chunks, **extra))}
    if kind == "all_gather":
        return {"result": _out(sub.ring_all_gather(_tensor(case["input"], "c"), case["sizes"], **extra))}
    t = _tensor(case["input"], case["layout"])
    if kind == "broadcast":
        ret = sub.tree_broadcast(t, case["root"], **extra)
    elif kind == "reduce":
        ret = sub.tree_reduce(t, case["root"], _op(case["op"]), **extra)
    elif kind == "all_reduce":
        ret = sub.ring_all_reduce(t, _op(case["op"]), **extra)
    elif kind == "reduce_scatter":
        return {"result": _out(sub.ring_reduce_scatter(t, _op(case["op"]), **extra)), "tensor": _out(t)}
    else:
        raise ValueError(kind)
    return {"ret": _out(ret), "tensor": _out(t)}


def _rank(sub, rank, world, port, folder, cases, timeout, group_ranks, emit):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    delta, patience = datetime.timedelta(seconds=timeout), datetime.timedelta(seconds=STORE_TIMEOUT)
    if port is not None:
        store = dist.TCPStore("127.0.0.1", port, world, False, timeout=patience)
    else:
        store = dist.FileStore(os.path.join(folder, "store"), world)
        store.set_timeout(patience)
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=delta)
    group = dist.new_group(group_ranks) if group_ranks else None    # every rank calls it, members or not
    failed = False
    try:
        for case in cases:
            try:
                emit("case", _call(sub, case, group))
            except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
                emit("case", {"error": type(exc).__name__[:80], "message": str(exc)[:200]})
                if not case.get("expect_error"):
                    failed = True
                    break
    finally:
        store.add("done", 1)
        if port is None:  # no referee serving the store: wait for the others before leaving
            deadline = time.monotonic() + timeout
            while int(store.add("done", 0)) < world and time.monotonic() < deadline:
                time.sleep(0.005)
        if not failed:   # a failed rank's world is lost, and tearing its group down where a peer has died (gloo
            dist.destroy_process_group()   # aborts a rank on a collective mismatch) spins at full CPU for 5 s


def world(sub, port, world, seat, cases, timeout, group=None):
    folder = tempfile.mkdtemp(prefix="world-")
    children = {}
    for key in cases:
        rank = int(key)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            with os.fdopen(write, "wb", buffering=0) as pipe:
                def emit(tag, value):   # one pickle per finished case: a rank that hangs later keeps what it did
                    pickle.dump((tag, value), pipe)
                try:
                    _rank(sub, rank, world, port, folder, cases[key], timeout, group, emit)
                    emit("done", None)
                except BaseException as exc:  # noqa: BLE001
                    emit("error", {"error": type(exc).__name__[:80], "message": str(exc)[:200]})
            os._exit(0)
        os.close(write)
        children[read] = (rank, pid, [])
    deadline = time.monotonic() + STORE_TIMEOUT + timeout + 5
    open_fds = set(children)
    while open_fds and time.monotonic() < deadline:
        ready_fds, _, _ = select.select(list(open_fds), [], [], 0.05)
        for fd in ready_fds:
            chunk = os.read(fd, 1 << 20)
            if chunk:
                children[fd][2].append(chunk)
            else:
                open_fds.discard(fd)
    replies = {}
    for fd, (rank, pid, chunks) in children.items():
        if fd in open_fds:
            os.kill(pid, 9)
        os.close(fd)
        os.waitpid(pid, 0)
        replies[str(rank)] = _answer(b"".join(chunks), fd in open_fds)
    return replies


def _answer(data, killed):
    """A rank's pickles, one after another -> its per-case results; a rank that stopped early ends with its
    error, so the failure is reported against the case it was in (before any case: the error alone)."""
    results, end, stream = [], None, io.BytesIO(data)
    try:
        while end is None:
            tag, value = pickle.load(stream)
            if tag == "case":
                results.append(value)
            else:
                end = (tag, value)
    except Exception:  # noqa: BLE001 - the end of the stream, or a pickle cut short by a killed rank
        pass
    if end is not None and end[0] == "done":
        return results
    error = end[1] if end is not None else {"error": "Timeout" if killed else "Crash",
                                            "message": "the rank did not finish" if killed else "the rank died"}
    return results + [error] if results else error


def untouched(sub):
    """Which collectives are still the release's stubs: each called once, outside any world (no process group),
    in a forked child so that nothing it does stays in this process. {name: the exception's type and message,
    or None when it returned}. P0 skips the worlds of a function that raised NotImplementedError here (they would
    fail the same way), so a false answer only loses points (world.play)."""
    import torch
    from torch.distributed import ReduceOp
    calls = {"tree_broadcast": lambda: sub.tree_broadcast(torch.zeros(2), 0),
             "tree_reduce": lambda: sub.tree_reduce(torch.zeros(2), 0, ReduceOp.SUM),
             "ring_all_reduce": lambda: sub.ring_all_reduce(torch.zeros(2), ReduceOp.SUM),
             "ring_reduce_scatter": lambda: sub.ring_reduce_scatter(torch.zeros(2), ReduceOp.SUM),
             "ring_all_gather": lambda: sub.ring_all_gather(torch.zeros(2), [2]),
             "all_to_all": lambda: sub.all_to_all([torch.zeros(2)])}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        results = _each([(call,) for call in calls.values()], lambda call: (call(), None)[1])
        out = {name: (r if "error" in r else None) for name, r in zip(calls, results, strict=True)}
        with os.fdopen(write, "wb") as pipe:
            pickle.dump(out, pipe)
        os._exit(0)
    os.close(write)
    data, deadline = b"", time.monotonic() + 10
    while time.monotonic() < deadline:
        ready_fds, _, _ = select.select([read], [], [], 0.05)
        chunk = os.read(read, 1 << 16) if ready_fds else b""
        if ready_fds and not chunk:
            break
        data += chunk
    os.close(read)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that hung or died: nothing is known
        return {}


def _each(cases, fn):
    results = []
    for case in cases:
        try:
            results.append({"value": fn(*case)})
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            results.append({"error": type(exc).__name__[:80], "message": str(exc)[:200]})
    return results


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(type(value).__name__)


def tree_shape(sub, cases):
    """[(v, world)] -> {"value": [parent, children]} per case."""
    return _each(cases, lambda v, world: [_plain(sub.binomial_parent(v)), _plain(sub.binomial_children(v, world))])


def bounds(sub, cases):
    return _each(cases, lambda n, world: _plain(sub.chunk_bounds(n, world)))


def fit(sub, cases):
    return _each(cases, lambda sizes, seconds: _plain(sub.fit_alpha_beta(list(sizes), list(seconds))))
