# IPT-CANARY lab09 referee.py: hidden grading text, never shown to learners
"""The referee rank: a trusted process that takes one seat in the learner's world and speaks the lab's
protocol from P0's script, recording every message it receives.

Run by P0 (world.py) as `python -m autograder.labs.lab09.referee`, inside P1's network namespace only
(`nsenter --net`), under an unprivileged uid of its own; it never loads the learner's code. It imports
torch once and then forks one child per world on request ("run JOBDIR" on stdin, "pid N" on stdout):

* the child hosts the world's TCPStore (127.0.0.1, a free port, written to JOBDIR/port), joins the gloo
  group at its seat, and replays its script case by case: a send is an `isend` of P0's array, a receive
  is a blocking `recv` into a buffer of the expected size filled with a sentinel (a short message leaves
  sentinel values in place, a long one kills the child: both are failed cases);
* after each case it waits for its sends, then writes what it received to JOBDIR/case_K.npz;
* at the end it waits until the learner's ranks report done on the store (it serves the store), then
  leaves the group and exits.

P0 believes only the arrays this process wrote, compared with its own model; a child that dies or
times out is a failed case, never an internal error.
"""
import datetime
import json
import os
import sys
import time


def _play(jobdir: str) -> int:
    import numpy as np
    import torch
    import torch.distributed as dist

    job = json.loads(open(os.path.join(jobdir, "job.json")).read())
    arrays = np.load(os.path.join(jobdir, "arrays.npz"), allow_pickle=False)
    timeout = datetime.timedelta(seconds=job["timeout"])      # every gloo operation
    world, seat = job["world"], job["seat"]
    store = dist.TCPStore("127.0.0.1", 0, world, True, timeout=datetime.timedelta(seconds=job["store_timeout"]),
                          wait_for_workers=False)             # the rendezvous: ranks arrive when a busy machine lets them
    with open(os.path.join(jobdir, "port.tmp"), "w") as f:
        f.write(str(store.port))
    os.rename(os.path.join(jobdir, "port.tmp"), os.path.join(jobdir, "port"))
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=seat, world_size=world, timeout=timeout)
    group = dist.new_group(job["group"]) if job.get("group") else None   # every rank calls it, members or not
    rng = np.random.default_rng(job["sentinel_seed"])
    for k, case in enumerate(job["cases"]):
        sends, received = [], {}
        for i, (kind, peer, key, dtype, size) in enumerate(case):
            if kind == "send":
                sends.append(dist.isend(torch.from_numpy(arrays[key].copy()), group=group, group_dst=peer))
            else:
                if np.dtype(dtype).kind == "f":
                    fill = (rng.standard_normal(size) * 1e30).astype(dtype)
                else:
                    fill = rng.integers(-2**40, 2**40, size).astype(dtype)
                buffer = torch.from_numpy(fill)
                dist.recv(buffer, group=group, group_src=peer)
                received[f"m{len(received)}"] = buffer.numpy()
        for work in sends:
            work.wait()
        np.savez(os.path.join(jobdir, f"case_{k}.tmp.npz"), **received)
        os.rename(os.path.join(jobdir, f"case_{k}.tmp.npz"), os.path.join(jobdir, f"case_{k}.npz"))
    deadline = time.monotonic() + job["timeout"]
    while int(store.add("done", 0)) < world - 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    dist.destroy_process_group()
    return 0


def main() -> None:
    import numpy  # noqa: F401 - imported once, before any fork
    import torch
    import torch.distributed  # noqa: F401

    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    for line in sys.stdin:
        command, _, jobdir = line.strip().partition(" ")
        if command != "run":
            break
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _play(jobdir)
            except BaseException as exc:  # noqa: BLE001 - the reason goes to P0, which decides
                try:
                    with open(os.path.join(jobdir, "error"), "w") as f:
                        f.write(f"{type(exc).__name__}: {str(exc)[:300]}")
                except OSError:
                    pass
            finally:
                os._exit(code)
        print(f"pid {pid}", flush=True)
        while True:  # reap finished children without blocking
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not done:
                break


if __name__ == "__main__":
    main()
