"""The referee rank: a trusted process that takes one seat in a torch.distributed (gloo) world beside the
learner's ranks and runs a lab's *role* there, a function of P0's, recording what it saw.

A lab supplies the role (`autograder/labs/labNN/...:function`, one argument, a `Context`): lab09's
replays P0's model of its seat's messages and records what it receives; a computing role runs P0's own
reference program for its seat (a DDP rank's forward and backward, joining the same collectives) and
records the values it met. The engine does the rest, on both sides:

* P0 (`Referee`, one per test module through `referee_fixture`): `start(job, arrays, ncases)` writes
  the job (a JSON dict: world, seat, role, timeout, optional group and sentinel_seed, whatever the role
  reads) and P0's arrays to a folder of its own and returns a `Job`: its `port` is the world's store,
  which the learner's ranks join (they add 1 to the store counter "done" when they finish, and so does
  the referee; a rank that waits for the counter to reach the world size leaves when everyone has);
  `job.finish(grace)` returns, per case, the arrays the role recorded for it (None: never recorded).
* the zygote, `python -m autograder.engine.referee MODULE...`, run by P0 through `sandbox.trusted_peer`
  inside P1's network namespace only (`nsenter --net`), under an unprivileged uid of its own; it never
  loads the learner's code. It imports torch and the role modules (only ones under `autograder.labs.`)
  once and then forks one child per world on request ("run JOBDIR" on stdin, "pid N" on stdout);
* the child hosts the world's TCPStore (127.0.0.1, a free port, written to JOBDIR/port), joins the gloo
  group at its seat (and the job's subgroup, which every rank creates), calls the role, waits until the
  learner's ranks report done on the store (it serves the store), then leaves the group and exits.
  An exception writes "Type: message" to JOBDIR/error.

P0 believes only the arrays the role recorded, compared with its own model; a child that dies or times
out leaves cases unrecorded, which the lab fails, never an internal error.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

TRUSTED = "autograder.labs."   # role modules live in the course's own labs, never anywhere else
STORE_TIMEOUT = 30.0            # seconds: the rendezvous through the referee's store (a busy machine starts ranks late)


def busy_timeout(base: float, most: float = 4.0) -> float:
    """A world's per-operation timeout: `base` seconds on an idle machine, scaled up by the run queue per core
    (1-minute load average / cores, at most `most` times) so that an honest rank starved of CPU on a busy machine
    is not taken for one that waits for a message that never comes. Only a world that hangs pays it; a timeout
    decides no score that an honest program could lose on an idle machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        per_core = os.getloadavg()[0] / cores
    except OSError:  # no load average on this system
        per_core = 1.0
    return round(base * min(most, max(1.0, per_core)), 1)


# -- the referee process (the zygote and its children) ----------------------------------------------
class Context:
    """What a role gets: the job (P0's dict) and P0's arrays, its seat in a world of `world` ranks, the
    job's subgroup (None: the whole world), the store it serves, a generator seeded from the job's
    `sentinel_seed` (default 0), and `record(k, **arrays)`, which writes case k's record for P0."""

    def __init__(self, jobdir: str, job: dict, arrays: dict[str, np.ndarray], group, store):
        self.jobdir, self.job, self.arrays, self.group, self.store = jobdir, job, arrays, group, store
        self.seat, self.world = int(job["seat"]), int(job["world"])
        self.rng = np.random.default_rng(job.get("sentinel_seed", 0))

    def record(self, k: int, /, **arrays: np.ndarray) -> None:
        """Case k's record: written whole (a temporary file, then renamed), read by `Job.finish`."""
        np.savez(os.path.join(self.jobdir, f"case_{k}.tmp.npz"), **arrays)
        os.rename(os.path.join(self.jobdir, f"case_{k}.tmp.npz"), os.path.join(self.jobdir, f"case_{k}.npz"))


def _role(name: str):
    module, _, function = name.partition(":")
    if not module.startswith(TRUSTED) or not function:
        raise ValueError(f"a referee role is module:function under {TRUSTED}, not {name!r}")
    return getattr(importlib.import_module(module), function)


def _play(jobdir: str) -> int:
    import torch.distributed as dist

    import faulthandler
    faulthandler.enable(open(os.path.join(jobdir, "fault"), "w"))   # a crash in C++ (gloo, torch) says where
    with open(os.path.join(jobdir, "job.json")) as f:
        job = json.load(f)
    with np.load(os.path.join(jobdir, "arrays.npz"), allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    role = _role(job["role"])
    world, seat = int(job["world"]), int(job["seat"])
    store = dist.TCPStore("127.0.0.1", 0, world, True, timeout=datetime.timedelta(seconds=job["store_timeout"]),
                          wait_for_workers=False)             # the rendezvous: ranks arrive when a busy machine lets them
    with open(os.path.join(jobdir, "port.tmp"), "w") as f:
        f.write(str(store.port))
    os.rename(os.path.join(jobdir, "port.tmp"), os.path.join(jobdir, "port"))
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=seat, world_size=world,
                            timeout=datetime.timedelta(seconds=job["timeout"]))   # every gloo operation
    group = dist.new_group(job["group"]) if job.get("group") else None   # every rank calls it, members or not
    try:
        role(Context(jobdir, job, arrays, group, store))
    except BaseException:
        store.add("done", 1)   # ranks waiting to leave together need not wait for a role that failed
        raise
    store.add("done", 1)   # leave together: nobody closes a link a peer may still read from
    deadline = time.monotonic() + job["store_timeout"]   # a busy machine may finish the learner's ranks late
    while int(store.add("done", 0)) < world and time.monotonic() < deadline:
        time.sleep(0.005)
    dist.destroy_process_group()
    return 0


def main(modules: list[str]) -> None:
    import numpy  # noqa: F401 - imported once, before any fork
    import torch
    import torch.distributed  # noqa: F401

    for module in modules:
        if not module.startswith(TRUSTED):
            raise SystemExit(f"a referee role module is under {TRUSTED}, not {module!r}")
        importlib.import_module(module)
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


# -- P0's side -------------------------------------------------------------------------------------
class Referee:
    """The referee zygote of one test module, started beside the student's worker on first use.

    roles: the modules whose roles jobs name (imported once by the zygote); name: its folder under build/;
    warmup: a scenario ("labNN.scenarios:fn") run first when the student has no worker yet, so that the
    referee joins the worker's network namespace."""

    def __init__(self, student, roles: list[str], name: str, warmup: str, store_timeout: float = STORE_TIMEOUT):
        for module in roles:
            if not module.startswith(TRUSTED) or ":" in module:
                raise ValueError(f"a referee role module is a module under {TRUSTED}, not {module!r}")
        from autograder.paths import build_dir
        self.student, self.roles, self.warmup, self.store_timeout = student, list(roles), warmup, store_timeout
        self.proc, self.net_pid, self.uid = None, None, None
        self.root = build_dir(name)

    def _ensure(self) -> None:
        from autograder.engine import sandbox
        if self.student.proc is None:
            self.student.run(self.warmup)   # the worker (and its network namespace) first
        net_pid = self.student.net_pid
        if self.proc is not None and self.proc.poll() is None and net_pid == self.net_pid:
            return
        self.close()
        argv, env, confine = sandbox.trusted_peer(["-m", "autograder.engine.referee", *self.roles], net_pid)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env=env, cwd="/", preexec_fn=confine, start_new_session=True)
        self.net_pid, self.uid = net_pid, sandbox.peer_uid()

    def start(self, job: dict, arrays: dict[str, np.ndarray], ncases: int) -> Job:
        """Start a world's referee: `job` (JSON data: world, seat, role "module:function", timeout in seconds
        for every gloo operation, optional group and sentinel_seed, and what the role reads) with `arrays`.
        Returns once the world's store listens (`Job.port`); RuntimeError if the referee did not start."""
        module = str(job["role"]).partition(":")[0]
        if module not in self.roles:
            raise ValueError(f"the role {job['role']!r} is not in this referee's modules {self.roles}")
        self._ensure()
        jobdir = tempfile.mkdtemp(dir=self.root)
        with open(os.path.join(jobdir, "job.json"), "w") as f:
            json.dump({**job, "store_timeout": self.store_timeout}, f)
        np.savez(os.path.join(jobdir, "arrays.npz"), **arrays)
        if self.uid is not None:
            for path in [jobdir] + [os.path.join(jobdir, n) for n in os.listdir(jobdir)]:
                os.chown(path, self.uid, self.uid)
        try:
            self.proc.stdin.write(f"run {jobdir}\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline().split()
        except OSError:   # the zygote went away (a role module that does not import, for one)
            answer = []
        if len(answer) != 2 or answer[0] != "pid":
            shutil.rmtree(jobdir, ignore_errors=True)
            raise RuntimeError(f"the referee rank did not start: its zygote answered {' '.join(answer)[:80]!r}")
        started = Job(jobdir, int(answer[1]), ncases)
        deadline = time.monotonic() + self.store_timeout
        while not os.path.exists(os.path.join(jobdir, "port")):
            if time.monotonic() > deadline or os.path.exists(os.path.join(jobdir, "error")) or not _alive(started.pid):
                reason = started.error()
                started.close()
                raise RuntimeError(f"the referee rank did not start: {reason}")
            time.sleep(0.005)
        with open(os.path.join(jobdir, "port")) as f:
            started.port = int(f.read())
        return started

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None

    def __enter__(self) -> Referee:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def referee_fixture(roles: list[str], name: str, warmup: str):
    """A module-scoped pytest fixture `referee` yielding a `Referee(student, roles, name, warmup)`; a lab
    binds it in its own module (`referee = referee_fixture([...], "labNN-referee", "labNN.scenarios:ready")`)
    and its test modules import it from there."""
    import pytest

    @pytest.fixture(scope="module")
    def referee(student):
        """The referee rank of this test module (import this fixture into a test module to use it)."""
        with Referee(student, roles, name, warmup) as r:
            yield r
    return referee


def _alive(pid: int) -> bool:
    """Whether the referee's child `pid` (the referee zygote's child, never ours) still runs."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read().lower()
    except OSError:
        return False


class Job:
    """One world's referee: `port` is its store; `finish` collects what its role recorded."""

    def __init__(self, jobdir: str, pid: int, ncases: int):
        self.jobdir, self.pid, self.ncases, self.port = jobdir, pid, ncases, 0

    def finish(self, grace: float) -> list[dict[str, np.ndarray] | None]:
        """The arrays the role recorded, case by case, by name (None: that case was never recorded), after
        waiting up to `grace` seconds for the referee to finish."""
        deadline = time.monotonic() + grace
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.005)
        results = []
        for k in range(self.ncases):
            path = os.path.join(self.jobdir, f"case_{k}.npz")
            if os.path.exists(path):
                with np.load(path, allow_pickle=False) as data:
                    results.append({name: data[name] for name in data.files})
            else:
                results.append(None)
        return results

    def error(self) -> str:
        for name in ("error", "fault"):
            path = os.path.join(self.jobdir, name)
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text[-3000:]
        return "no reason given"

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self.jobdir, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
