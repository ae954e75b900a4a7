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

import atexit
import datetime
import hashlib
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


def _imports(modules: list[str]) -> None:
    import numpy  # noqa: F401 - imported once, before any fork
    import torch
    import torch.distributed  # noqa: F401

    for module in modules:
        if not module.startswith(TRUSTED):
            raise SystemExit(f"a referee role module is under {TRUSTED}, not {module!r}")
        importlib.import_module(module)
    torch.set_num_threads(1)


def main(modules: list[str]) -> None:
    _imports(modules)
    serve()


def serve() -> None:
    """The zygote's loop: one child per world, on request."""
    from autograder.engine import forkserve
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
        forkserve.reap_finished()


# -- a referee template: the imports once per batch --------------------------------------------------
def template(modules: list[str], listen_fd: int) -> None:
    """`python -m autograder.engine.referee --template MODULE...`, started by P0's fork server (start_template)
    as root on the host, in the environment `sandbox.trusted_peer` gives a referee: imports torch,
    torch.distributed and the role modules once for a whole batch, and on each request from a P0 process (root)
    forks a child C, which forks the referee zygote R of one test module and waits for it. R joins the network
    namespace P0 names (a descriptor of /proc/PID/ns/net), starts a session, takes the peer uid and
    no_new_privs, exactly as trusted_peer's confine does, and runs `serve()` on the two pipes P0 passed: the
    process `python -m autograder.engine.referee MODULE...` would be, without its 2-3 s of imports. C writes
    "pid R" and, once R has ended, "cpu SECONDS" (R's and what it reaped) to P0's status pipe."""
    import socket
    from autograder.engine import forkserve
    _imports(modules)
    listener = socket.socket(fileno=listen_fd)
    print("ready", flush=True)
    forkserve.serve(listener, 4, lambda request: True, _referee_child)


def _referee_child(request: dict, fds: list[int]) -> None:
    """C of template(): R as its child; once R has ended, whatever R left running is killed and reaped (C is a
    subreaper), and the CPU of all of it goes to P0."""
    import ctypes
    import resource
    from autograder.engine import jail, sandbox
    code = 70
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for i, fd in enumerate(fds):  # requests, replies, status, netns -> 3, 4, 5, 6 (received fds are all above 2)
            os.dup2(fd, 3 + i)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # not the template's pipes
            os.dup2(null, fd)
        os.closerange(7, 65536)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the worlds R leaves behind become C's
        pid = os.fork()
        if pid == 0:
            if libc.setns(6, 0x40000000) != 0:  # CLONE_NEWNET: the sandbox's network, nothing else of it
                raise OSError(ctypes.get_errno(), "setns")
            os.setsid()
            os.dup2(3, 0)
            os.dup2(4, 1)
            os.closerange(3, 65536)
            os.chdir("/")
            if request.get("uid") is not None:
                jail.drop_privileges(int(request["uid"]), keyrings=False)  # as trusted_peer's confine does
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL (after setuid, which clears it): C gone, R goes
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            serve()
            os._exit(0)
        for fd in (3, 4, 6):
            os.close(fd)
        os.write(5, f"pid {pid}\n".encode())
        os.waitpid(pid, 0)
        while True:  # R's worlds still running: C's children now, so their pids cannot be reused meanwhile
            for child in sandbox.children_of(os.getpid()):
                try:
                    os.kill(child, 9)
                except ProcessLookupError:
                    pass
            try:
                os.wait()
            except ChildProcessError:
                break
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        os.write(5, f"cpu {usage.ru_utime + usage.ru_stime:.6f}\n".encode())
        code = 0
    finally:
        os._exit(code)


_templates: dict[tuple[str, ...], str | None] = {}  # role modules -> the template's socket path (forked runs inherit it)
_template_procs: list[subprocess.Popen] = []
_template_owner = os.getpid()


def start_template(roles: list[str], timeout: float = 120) -> bool:
    """Start (once per process, per set of role modules) a referee template (see template()); called by P0's
    fork server before it forks a grading run of a lab whose lab.toml names `referee_roles`."""
    from autograder.engine import sandbox
    global _template_owner
    key = tuple(roles)
    if _template_owner != os.getpid():
        _templates.clear(), _template_procs.clear()
        _template_owner = os.getpid()
    if key in _templates:
        return _templates[key] is not None
    _templates[key] = None
    if os.geteuid() != 0 or not all(m.startswith(TRUSTED) and ":" not in m for m in roles):
        return False

    def launch(fd: int) -> subprocess.Popen:  # the interpreter and environment a referee gets, but root: its children drop the uid
        argv, env, _ = sandbox.trusted_peer(["-m", "autograder.engine.referee", "--template", "--fd", str(fd), *roles], None)
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, cwd="/", pass_fds=(fd,), start_new_session=True)
    try:
        name = "referee-" + hashlib.sha256(repr(key).encode()).hexdigest()[:12]
        _templates[key] = sandbox.run_template(name, launch, _template_procs, timeout)
    except OSError:
        pass
    return _templates[key] is not None


def forget_templates() -> None:
    """This process (a forked grading run) starts its referees afresh, not from its parent's templates."""
    _templates.clear()


@atexit.register
def stop_own_templates() -> None:
    from autograder.engine import sandbox
    if _template_owner == os.getpid():
        sandbox.stop_templates(_template_procs, list(_templates.values()))


class _Forked:
    """A referee zygote R forked by a template, with the parts of Popen's interface `Referee` uses. P0 never
    signals it by pid (C reaps it, so its pid could be another process's by then): closing its stdin ends R's
    loop, and C kills and reaps what R left."""

    def __init__(self, requests: int, replies: int, status: int):
        self.status, self._buffer = status, b""
        line = self._line(30)
        if not line.startswith("pid "):
            raise OSError("the referee template did not start a zygote")
        self.pid = int(line.split()[1])
        self.stdin, self.stdout = os.fdopen(requests, "w"), os.fdopen(replies, "r")

    def _line(self, timeout: float) -> str:
        import select
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.status], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.status, 256) if ready else b""
            if not chunk:
                break
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")

    def poll(self):
        return None if _alive(self.pid) else 0

    def wait(self, timeout: float = 10) -> int:
        """After its stdin closed: C reports the CPU of R and of what it left, once all of it has ended."""
        from autograder.engine import sandbox
        line = self._line(timeout)
        os.close(self.status)
        if line.startswith("cpu "):
            sandbox.add_remote_cpu(float(line.split()[1]))
        return 0


def _from_template(roles: list[str], net_pid: int | None, uid: int | None):
    import socket
    path = _templates.get(tuple(roles))
    if not path or net_pid is None:
        return None
    pipes = [os.pipe(), os.pipe(), os.pipe()]  # requests (P0 -> R), replies (R -> P0), status (C -> P0)
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    try:
        netns = os.open(f"/proc/{net_pid}/ns/net", os.O_RDONLY)
    except OSError:
        for r, w in pipes:
            os.close(r), os.close(w)
        return None
    theirs.append(netns)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.settimeout(30)
            conn.connect(path)
            socket.send_fds(conn, [json.dumps({"uid": uid}).encode()], theirs)
            json.loads(conn.recv(4096))["pid"]
            for fd in theirs:  # R's ends: its stdin reaches EOF when P0 closes the only writer left
                os.close(fd)
            theirs = []
        forked = _Forked(pipes[0][1], pipes[1][0], pipes[2][0])
    except (OSError, ValueError, KeyError, TypeError):
        for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
            try:
                os.close(fd)
            except OSError:
                pass
        forked = None
    finally:
        for fd in theirs:
            os.close(fd)
    return forked


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
        self.proc = _from_template(self.roles, net_pid, sandbox.peer_uid())   # forked, imports done (template())
        if self.proc is None:
            argv, env, confine = sandbox.trusted_peer(["-m", "autograder.engine.referee", *self.roles], net_pid)
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True, env=env, cwd="/", preexec_fn=confine, start_new_session=True)
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
            if not isinstance(self.proc, _Forked):  # a forked one ends with its stdin; its parent cleans up
                try:
                    os.killpg(self.proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
            self.proc.wait()
            self.proc.stdout.close()
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
    if sys.argv[1:2] == ["--template"]:
        template(sys.argv[4:], int(sys.argv[3]))   # --template --fd N MODULE...
    else:
        main(sys.argv[1:])
