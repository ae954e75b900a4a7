"""Starting the student process (P1) as confined as this host allows.

Levels, strongest first (the one reached is recorded in results.json):
- "namespaces": new pid/mount/net/ipc/uts namespaces, a minimal read-only root (jail.py), the run's own uid,
  no_new_privs, rlimits. Needs root and unshare.
- "uid": the run's own unprivileged uid (grading_uid), no_new_privs, rlimits, private working folder. Needs root and a Python that
  nobody can run.
- "rlimits": a plain subprocess in its own session with rlimits (a learner's laptop).
In every level the worker runs `python -I -S` with a site folder that lacks the denied modules.
At level namespaces a grading's workers are forked by its zygote (Zygote), and a batch's zygotes by the lab's
template (start_template), so that the heavy imports happen once per batch.
"""
from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from autograder.paths import build_dir
from autograder.engine import jail, witness

ENGINE_DIR = Path(__file__).resolve().parent
LEVELS = ("namespaces", "uid", "rlimits")
_live: set[int] = set()  # workers started by this process and not yet terminated
NOBODY = 65534
UID_BASE, UID_COUNT = 420000, 4096  # one unprivileged uid per grading run, leased from this range
_uid: int | None = None
_lease: int | None = None   # the open, flocked lease file of _uid
_uid_pid: int | None = None  # the process that leased _uid


def grading_uid() -> int:
    """This grading run's own unprivileged uid (no passwd entry needed): per-uid limits such as
    RLIMIT_NPROC are then this submission's alone, and concurrent gradings cannot starve each other.
    Leased with an exclusive flock on a file under build/sandbox/uids, held by an open descriptor (not
    inherited across exec): the kernel releases it when the process dies, so no stale lease is ever taken
    over by two gradings at once."""
    global _uid, _lease, _uid_pid
    if _uid is not None and _uid_pid == os.getpid():
        return _uid
    _uid_pid = os.getpid()  # a forked child (P0's fork server forks every grading run) leases its own
    import fcntl
    folder = build_dir("sandbox", "uids")
    for uid in range(UID_BASE, UID_BASE + UID_COUNT):
        fd = os.open(folder / str(uid), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a live grading
            os.close(fd)
            continue
        _lease, _uid = fd, uid
        return uid
    return NOBODY  # every lease taken: share nobody rather than fail


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 4096
    cpu_seconds: int = 300
    processes: int = 64
    file_mb: int = 64
    open_files: int = 256
    tmp_mb: int = 256

    def rlimits(self) -> dict[str, int]:
        return {
            "RLIMIT_AS": self.memory_mb << 20,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_FSIZE": self.file_mb << 20,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_CORE": 0,
        }


@dataclass(frozen=True)
class SandboxSpec:
    lab: str
    deny_modules: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    level: str = "auto"
    preload: tuple[str, ...] = ()  # extra modules the zygote imports once (e.g. torch._dynamo)
    loopback: bool = False  # level namespaces: bring up the namespace's own loopback interface (ranks that talk TCP)
    shm: bool = False  # level namespaces: a private, writable /dev/shm (POSIX semaphores and shared memory: multiprocessing)
    warm: str = ""  # level namespaces: the scenarios' source where they define warm_p1(), run once after the preloads (worker._warm)


SPEC_FIELDS = ("lab", "deny_modules", "limits", "sandbox", "preload", "loopback", "shm", "warm")  # what spec_of reads


def spec_of(job: dict) -> SandboxSpec:
    """The sandbox a grading job asks for (pipeline.run_graders writes the job; the plugin and the fork server's
    template read it through here, so that both name the same template_key)."""
    return SandboxSpec(job["lab"], tuple(job.get("deny_modules", ())), Limits(**job.get("limits", {})),
                       job.get("sandbox", "auto"), tuple(job.get("preload", ())), bool(job.get("loopback", False)),
                       bool(job.get("shm", False)), job.get("warm", ""))


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _denied(entry: str, deny: tuple[str, ...]) -> bool:
    top = entry.split("-")[0].split(".")[0].lower()
    return top in deny or entry.endswith(".pth")


def site_dir(deny: tuple[str, ...]) -> Path:
    """site-packages without the denied modules: a hard-linked copy, built once and cached."""
    source = _site_packages()
    if not deny:
        return source
    names = sorted(os.listdir(source))
    key = hashlib.sha256(json.dumps([str(source), names, sorted(deny)]).encode()).hexdigest()[:16]
    target = build_dir("sandbox") / f"site-{key}"
    if target.exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix="site-", dir=build_dir("sandbox")))
    staging.chmod(0o755)  # readable by the unprivileged worker
    for name in names:
        if _denied(name, deny):
            continue
        src, dst = source / name, staging / name
        if src.is_dir():
            shutil.copytree(src, dst, copy_function=_link_or_copy, symlinks=True)
        else:
            _link_or_copy(src, dst)
    try:
        staging.rename(target)
    except OSError:  # built concurrently by another grader
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _base_python() -> tuple[Path, Path]:
    """The real interpreter (not the venv's symlink) and its installation prefix."""
    prefix = Path(sys.base_prefix)
    exe = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return (exe if exe.exists() else Path(sys.executable).resolve()), prefix


def _others_can_reach(path: Path) -> bool:
    """Can an unprivileged user traverse every folder above `path` and read it?"""
    return all(p.stat().st_mode & 0o001 for p in path.parents if p != Path("/")) and bool(path.stat().st_mode & 0o004)


def _unprivileged_python() -> tuple[Path, Path]:
    """An interpreter nobody can run: the real one, or a hard-linked minimal copy of it (interpreter,
    libpython, standard library) when it lives under a private folder such as /root."""
    exe, prefix = _base_python()
    if _others_can_reach(exe):
        return exe, prefix
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    target = build_dir("sandbox") / f"{version}-{hashlib.sha256(str(prefix).encode()).hexdigest()[:8]}"
    if not target.exists():
        staging = Path(tempfile.mkdtemp(prefix="python-", dir=build_dir("sandbox")))
        (staging / "bin").mkdir()
        _link_or_copy(exe, staging / "bin" / version)
        shutil.copytree(prefix / "lib", staging / "lib", copy_function=_link_or_copy, symlinks=True,
                        ignore=lambda folder, names: [n for n in names if n in ("site-packages", "test", "pkgconfig")])
        for folder in [staging, *staging.rglob("*")]:
            if folder.is_dir() and not folder.is_symlink():
                folder.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return target / "bin" / version, target


def _worker_env(tmp: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A scrubbed environment: nothing hints at grading, nothing points at the course tree."""
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8", 
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env.update(extra or {})
    return env


@functools.cache
def detect_level() -> str:
    """The strongest level this host allows, found by starting a trivial confined Python."""
    for level in LEVELS[:-1]:
        if level == "uid" and uid_level_problem():
            continue
        try:
            proc = launch(SandboxSpec("probe", level=level), probe=True)
            out, _ = proc.communicate(timeout=30)
            if proc.returncode == 0 and out.strip() == b"ok":
                return level
        except (OSError, subprocess.SubprocessError):
            pass
    return "rlimits"


class SandboxUnavailable(RuntimeError):
    """The requested level cannot run on this host: a fault of the setup, never of a submission."""


def _first_unreachable(path: Path) -> Path | None:
    """The first folder on the way to `path` that an unprivileged user cannot enter, if any."""
    for folder in [*reversed(path.parents), path]:
        if folder != Path("/") and not folder.stat().st_mode & 0o001:
            return folder
    return None


def uid_level_problem() -> str | None:
    """Why level "uid" cannot run here, or None. Its worker runs as another user and reads the
    interpreter copy, the site folder and the engine in place, so they must be reachable by others."""
    for needed in (build_dir("sandbox"), _site_packages(), ENGINE_DIR):
        blocked = _first_unreachable(needed.resolve())
        if blocked is not None:
            return (f"sandbox level 'uid' runs the worker as an unprivileged user, who cannot enter {blocked} "
                    f"(mode {blocked.stat().st_mode & 0o777:o}); let others enter it (chmod o+x), or grade at "
                    f"level 'namespaces' or 'rlimits'")
    return None


def resolve_level(requested: str) -> str:
    if requested == "auto":
        return detect_level()
    if requested not in LEVELS:
        raise ValueError(f"unknown sandbox level {requested!r}; choose one of auto, {', '.join(LEVELS)}")
    if requested == "uid" and (problem := uid_level_problem()):
        raise SandboxUnavailable(problem)
    return requested


def launch(spec: SandboxSpec, probe: bool = False, fds: tuple[int, ...] = (), zygote: bool = False,
           template: bool = False) -> subprocess.Popen:
    """Start the worker (or, with probe=True, a Python that prints ok) under spec.level.

    fds = (requests, replies): the worker reads requests from the first and writes replies to the second.
    zygote=True (level namespaces only): fds = (control socket,), and the process forks workers on request.
    template=True (level namespaces only): fds = (listening socket,); see start_template.
    """
    exe, prefix = _base_python()
    site = site_dir(tuple(spec.deny_modules))
    worker_args = ["-c", "print('ok')"] if probe else None
    common = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  pass_fds=fds, start_new_session=True)

    if spec.level == "namespaces":
        inside_exe = f"/ipt/python/bin/{exe.name}"
        config = {"engine_dir": "/ipt/engine", "site_dirs": ["/ipt/site"],
                  "deny_modules": list(spec.deny_modules), "lab": spec.lab, "fds": list(fds),
                  "zygote": zygote, "template": template,
                  "preload": ["numpy"] + ([] if "torch" in spec.deny_modules else ["torch", *spec.preload]),
                  "warm": spec.warm}
        argv = [inside_exe, "-I", "-S", "-B", "-u"] + (worker_args or ["/ipt/engine/worker.py", json.dumps(config)])
        plan = {
            "root": str(build_dir("sandbox", "root")),
            "binds": {"/ipt/python": str(prefix), "/ipt/site": str(site), "/ipt/engine": str(ENGINE_DIR),
                      witness.INSIDE: str(witness.folder())},
            "tmp_mb": spec.limits.tmp_mb,
            "limits": spec.limits.rlimits(),
            "argv": argv,
            "env": _worker_env("/tmp", {"LD_LIBRARY_PATH": "/ipt/python/lib"}),
            "uid": None if template else grading_uid(),  # a template leases no uid: each grading it serves does
            "loopback": spec.loopback and not template,
            "shm": spec.shm,
            "template": template,
        }
        # a template keeps the host's pid space and network (each grading it forks unshares its own: worker.template)
        namespaces = ["--mount"] if template else ["--pid", "--mount", "--net", "--ipc", "--uts"]
        cmd = ["unshare", *namespaces, "--fork", "--kill-child", "--",
               str(exe), "-I", "-S", "-B", str(ENGINE_DIR / "jail.py"), json.dumps(plan)]
        if template:  # its stdin is the pipe whose end tells it to stop; its stderr goes to a log
            with open(build_dir("sandbox", "templates") / "template.log", "ab") as log:
                proc = subprocess.Popen(cmd, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                                        **{**common, "stdin": subprocess.PIPE, "stderr": log})
        else:
            proc = subprocess.Popen(cmd, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, **common)
        _live.add(proc.pid)
        return proc

    drop = spec.level == "uid"
    if drop:
        exe, prefix = _unprivileged_python()
    workdir = tempfile.mkdtemp(prefix="p1-", dir=build_dir("sandbox"))
    config = {"engine_dir": str(ENGINE_DIR),
              "site_dirs": [str(site)], "deny_modules": list(spec.deny_modules), "lab": spec.lab, "fds": list(fds)}
    argv = [str(exe), "-I", "-S", "-B", "-u"] + (worker_args or [str(ENGINE_DIR / "worker.py"), json.dumps(config)])
    uid = grading_uid() if drop else None
    if drop:
        os.chown(workdir, uid, uid)

    def confine():
        for name, value in spec.limits.rlimits().items():
            resource.setrlimit(getattr(resource, name), (value, value))
        if drop:
            jail.drop_privileges(uid)

    env = _worker_env(workdir, {"LD_LIBRARY_PATH": str(prefix / "lib")})
    proc = subprocess.Popen(argv, cwd=workdir, env=env, preexec_fn=confine, **common)
    proc.workdir = workdir  # removed by terminate()
    _live.add(proc.pid)
    return proc


def peer_uid() -> int | None:
    """The unprivileged uid of a trusted program that talks to P1 over the network (lab09's referee rank),
    other than the learner's, so that P1 can neither signal nor trace it; None where it keeps its uid
    (not root, or the course tree is not readable by other users)."""
    if os.geteuid() != 0 or uid_level_problem() is not None:
        return None
    return grading_uid() + UID_COUNT


def trusted_peer(args: list[str], net_pid: int | None) -> tuple[list[str], dict[str, str], object]:
    """(argv, env, preexec_fn) that run `python *args` (e.g. ["-m", module]) as a trusted P0 program beside
    a sandbox. It joins the network namespace of process `net_pid` (the sandbox's own loopback-only network;
    None at levels without one: the host's) and nothing else of the sandbox: P0's files, P0's pid space.
    It runs as `peer_uid()` where there is one (with an interpreter that user can run, P0's site-packages and
    the course tree on its path) and never loads learner code."""
    from autograder.paths import REPO
    uid = peer_uid()
    exe, prefix = _unprivileged_python() if uid is not None else (Path(sys.executable), Path(sys.base_prefix))
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": f"{_site_packages()}:{REPO}", "LD_LIBRARY_PATH": str(prefix / "lib")}
    import ctypes  # before the uid changes: P0's standard library may be private to root
    libc = ctypes.CDLL(None, use_errno=True)
    namespace = None if net_pid is None else f"/proc/{net_pid}/ns/net"

    def confine():
        if namespace is not None:
            fd = os.open(namespace, os.O_RDONLY)
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                raise OSError(ctypes.get_errno(), f"setns {namespace}")
            os.close(fd)
        if uid is not None:
            jail.drop_privileges(uid, keyrings=False)
    return [str(exe), "-s", "-B", *args], env, confine


_reaper = False


def become_subreaper() -> None:
    """Make this (trusted) process adopt orphans, so daemons a worker leaves behind can be found."""
    global _reaper
    import ctypes
    _reaper = ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


def _kill_orphans() -> None:
    """Kill every adopted process (our children that are not live workers): a worker's daemons."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if int(fields[1]) == me and int(entry) not in _live:
            try:
                os.kill(int(entry), signal.SIGKILL)
                os.waitpid(int(entry), os.WNOHANG)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass



# -- templates: one warm start per lab for a whole batch of gradings ---------------------------------
_templates: dict[str, str | None] = {}  # template_key -> its socket's path (None: could not start); forked children inherit it
_template_procs: list[subprocess.Popen] = []
_template_owner = os.getpid()  # the process that started them (and alone stops them)
_remote_cpu = 0.0  # CPU seconds of the zygotes forked by templates (not this process's children), see remote_cpu_seconds
_remote_lock = threading.Lock()


def template_key(spec: SandboxSpec) -> str:
    """What a template fixes for every grading it serves: the lab, its denied modules, its preloads and its warm-up
    (so its site folder and sys.modules), and whether /dev/shm exists (a mount point in its root). The rest
    (limits, uid, loopback, the contents of /tmp and /dev/shm) each grading sets anew."""
    warm = hashlib.sha256(spec.warm.encode()).hexdigest()[:16] if spec.warm else ""
    return json.dumps([spec.lab, sorted(spec.deny_modules), list(spec.preload), spec.shm, warm])


def start_template(spec: SandboxSpec, timeout: float = 180) -> bool:
    """Start (once per process, per template_key) a lab's template: a root process in the jail's file system that
    has imported numpy, torch and the lab's preloads, and forks each later grading's zygote in fresh namespaces
    (worker.template). Called by P0's fork server before it forks a grading run, so that the run (a child)
    finds it in `_templates`; a grading's Zygote then costs a fork instead of those imports (1.5-2.7 s of CPU).
    Level namespaces only; False where it cannot start (gradings then start their zygotes as before)."""
    global _template_owner
    key = template_key(spec)
    if _template_owner != os.getpid():  # a forked child does not own its parent's templates
        _templates.clear(), _template_procs.clear()
        _template_owner = os.getpid()
    if key not in _templates:
        _templates[key] = None
        try:
            if resolve_level(spec.level) == "namespaces":
                _templates[key] = _start_template(dataclasses.replace(spec, level="namespaces"), timeout)
        except (OSError, SandboxUnavailable, subprocess.SubprocessError, ValueError):
            pass
    return _templates[key] is not None


def template_folder() -> Path:
    """Where templates listen: P0 (root) alone may enter it. Sockets of starters that are gone are removed."""
    folder = build_dir("sandbox", "templates")
    folder.chmod(0o700)
    for entry in folder.glob("*.sock"):
        starter = entry.name.split("-", 1)[0]
        if starter.isdigit() and not os.path.exists(f"/proc/{starter}"):
            entry.unlink(missing_ok=True)
    return folder


def _start_template(spec: SandboxSpec, timeout: float) -> str | None:
    name = hashlib.sha256(template_key(spec).encode()).hexdigest()[:12]
    return run_template(name, lambda fd: launch(spec, fds=(fd,), template=True), _template_procs, timeout)


def run_template(name: str, start, procs: list[subprocess.Popen], timeout: float) -> str | None:
    """Start a template listening on a socket of its own in template_folder(): `start(fd)` starts it (a Popen with
    stdin and stdout pipes) with the listening socket `fd`; it answers "ready" once its imports are done. Returns
    the socket's path, or None (stopped) if it did not answer within `timeout`. The process joins `procs`."""
    import select
    import socket
    path = str(template_folder() / f"{os.getpid()}-{name}.sock")
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(path)
        listener.listen(16)
        proc = start(listener.fileno())
    finally:
        listener.close()
    procs.append(proc)
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready or proc.stdout.readline().strip() != b"ready":
        terminate(proc)
        return None
    return path


def forget_templates() -> None:
    """This process (a forked grading run) starts its zygotes afresh, not from its parent's templates."""
    _templates.clear()


@atexit.register
def stop_own_templates() -> None:
    if _template_owner == os.getpid():
        stop_templates(_template_procs, list(_templates.values()))


def stop_templates(procs: list[subprocess.Popen], paths: list[str | None]) -> None:
    """Each template ends when its stdin closes (and `unshare` with it, for a sandbox template); its starter then
    reaps it and removes its socket."""
    for proc in procs:
        try:
            proc.stdin.close()
        except OSError:
            pass
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            terminate(proc)
    for path in paths:
        if path and os.path.exists(path):
            os.unlink(path)


def add_remote_cpu(seconds: float) -> None:
    global _remote_cpu
    with _remote_lock:
        _remote_cpu += seconds


def remote_cpu_seconds() -> float:
    """CPU seconds of every zygote a template forked for this process, reported when the zygote closed:
    add it to RUSAGE_CHILDREN to count a grading's whole CPU (p0fork does). A template's own start-up
    (its imports, once per batch) is its starter's child and counts there when the batch ends."""
    with _remote_lock:
        return _remote_cpu


class _FromTemplate:
    """The handle on a zygote a template forked: `pid` is the host pid of its parent C (in the grading's
    network namespace, with pid 1 of its pid namespace as its only child), as Popen's pid is for `unshare`."""

    def __init__(self, pid: int, status: int):
        self.pid, self.status = pid, status

    def finish(self, timeout: float = 10) -> None:
        """After the control socket closed: pid 1 exits, C reports its CPU and exits. Killed if it lingers."""
        import select
        ready, _, _ = select.select([self.status], [], [], timeout)
        text = os.read(self.status, 64) if ready else b""
        os.close(self.status)
        try:
            add_remote_cpu(float(text))
        except ValueError:
            for pid in children_of(self.pid) + [self.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


def children_of(pid: int) -> list[int]:
    """The live children of process `pid`, from the host's /proc."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _zygote_from_template(spec: SandboxSpec, theirs) -> _FromTemplate | None:
    import socket
    path = _templates.get(template_key(spec))
    if not path:
        return None
    status_r, status_w = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.settimeout(30)
            conn.connect(path)
            request = {"uid": grading_uid(), "limits": spec.limits.rlimits(), "tmp_mb": spec.limits.tmp_mb,
                       "loopback": spec.loopback, "shm": spec.shm}
            socket.send_fds(conn, [json.dumps(request).encode()], [theirs.fileno(), status_w])
            pid = json.loads(conn.recv(4096))["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        os.close(status_r)
        return None
    finally:
        os.close(status_w)
    return _FromTemplate(pid, status_r)


class Zygote:
    """One confined process per grading run that has imported numpy (and torch, where the lab allows it)
    and forks a fresh worker per test module; `reset` kills every process in its pid namespace. Forked by
    the lab's template where this process has one (start_template), else started afresh."""

    def __init__(self, spec: SandboxSpec, timeout: float = 60):
        import socket
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = _zygote_from_template(spec, theirs)
        if self.proc is not None:
            try:
                self._ready(ours, theirs, timeout)
                return
            except OSError:  # the template failed this grading: start one afresh
                self.sock.close()
                self.proc.finish(timeout=1)
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = launch(spec, fds=(theirs.fileno(),), zygote=True)
        self._ready(ours, theirs, timeout)

    def _ready(self, ours, theirs, timeout: float) -> None:
        theirs.close()
        self.sock, self.broken = ours, False
        self.sock.settimeout(timeout)
        self._ask(None)  # the "ready" message, once the preloads are imported

    def _ask(self, request: dict | None, fds: tuple[int, ...] = ()) -> dict:
        import socket
        try:
            if request is not None:
                socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds)) if fds else self.sock.send(json.dumps(request).encode())
            reply = self.sock.recv(4096)
            if not reply:
                raise OSError("the zygote closed its socket")
            return json.loads(reply)
        except (OSError, ValueError) as exc:
            self.broken = True
            raise OSError(f"zygote: {exc}") from None

    def spawn(self, fds: tuple[int, int, int, int]) -> int:
        return self._ask({"op": "spawn"}, fds)["pid"]

    def wait(self, pid: int, timeout: float) -> int | None:
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout}).get("status")

    def reset(self) -> None:
        self._ask({"op": "reset"})

    def close(self) -> None:
        self.sock.close()
        if isinstance(self.proc, _FromTemplate):
            self.proc.finish()
        else:
            terminate(self.proc)


class ZygoteChild:
    """A worker forked by the zygote, with the parts of Popen's interface the Student uses."""

    def __init__(self, zygote: Zygote, pid: int, stdout: int, stderr: int):
        self.zygote, self.pid, self.returncode = zygote, pid, None
        self.stdout, self.stderr = os.fdopen(stdout, "rb", buffering=0), os.fdopen(stderr, "rb", buffering=0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None and not self.zygote.broken:
            self.returncode = self.zygote.wait(self.pid, timeout or 2)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("worker", timeout or 2)
        return self.returncode

    def terminate(self, drain=lambda: None) -> None:
        try:
            self.zygote.reset()
        except OSError:
            pass
        drain()
        for stream in (self.stdout, self.stderr):
            stream.close()


def terminate(proc: subprocess.Popen, drain=lambda: None) -> None:
    """Kill the worker and everything it started (its session; at level namespaces, its pid namespace;
    elsewhere, as a subreaper, the daemons it left). `drain` runs before the output pipes close.
    At level namespaces the namespace's first process dies first and `unshare` reaps it and exits: its CPU
    time (and that of every worker it reaped) then reaches this process's RUSAGE_CHILDREN, where
    `make bench-grader` counts it. Killing both at once left it unaccounted."""
    inner = children_of(proc.pid)
    try:
        unshare = Path(f"/proc/{proc.pid}/comm").read_text().strip() == "unshare"
    except OSError:
        unshare = False
    if inner and unshare:
        for pid in inner:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    drain()
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
    _live.discard(proc.pid)
    if _reaper:
        _kill_orphans()
    workdir = getattr(proc, "workdir", None)
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)
