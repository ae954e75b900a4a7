"""A warm P0 for the graders' pytest runs: one process imports pytest, hypothesis, numpy and torch once, and
forks a child per grading that runs `pytest.main(args)`. A grading then no longer pays those imports
(about 2 s of CPU each, most of a small lab's grading).

Trusted side only: the learner's code never runs in the server or its children; each child starts its own
P1 (the student process) exactly as a fresh `python -m pytest` would. There is one server per start-up
environment (`startup_env`: PYTHONHASHSEED, PYTHONPATH, OMP_NUM_THREADS, ... take effect when an interpreter
starts or imports torch); every run gets the caller's whole environment through its job. Where a server
cannot start, `pipeline.run_graders` runs a plain subprocess; IPT_P0_FORK=0 turns the servers off.

Protocol, one JSON line each way: {"args", "cwd", "env", "log", "rc", "preload"} -> {"pid"}. `preload` names a
lab's heavy modules (its lab.toml `preload`, e.g. torch._dynamo: about 2 s): the server imports them before it
forks, once, and every later grading of that lab (or another) inherits them. A preloaded module may define
`warm_p0()`: the server calls it once, after the import, to fill the module's caches with what the graders
compute identically for every submission (lab07: P0's AOTAutograd traces of its fixed cases); the caches
hold P0's own results only, never anything a learner's code returned. The child (a process
group of its own, so a timeout kills it and whatever it started) runs pytest in a grandchild, waits for it
and writes its exit status, CPU seconds, and the part of them spent in sandboxes forked from templates, to the
file `rc`; the caller watches the pid and reads `rc`. `IPT_P0_PROFILE=folder` runs each grading's pytest under
cProfile and writes the stats there (P0's side only: the sandboxes are other processes).
CPU accounting: the runs are not the caller's children, so `cpu_seconds()` sums what they reported; at exit
the caller waits for its servers, which have waited for their children, so a process that runs a grading
in a subprocess (nbgrader, the CLI) still sees the whole CPU in its RUSAGE_CHILDREN.

Two more things keep a forked run from paying again for what the server has:
- Learned imports: a run reports the installed modules (standard library and site-packages, never the course's
  own files) that it imported and the server had not (torch imports sympy, torch._dynamo, ... lazily, on
  first use: about 0.6 s for sympy alone in every lab02 grading). The server imports them before its next
  fork. They are the same trusted modules the run imported itself, in the same order.
- `gc.freeze()` before each fork: the server's objects move to the collector's permanent generation, so a
  run's collections no longer walk (and copy-on-write) torch's whole object graph: about 1.2 s of CPU per
  lab02 grading.
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

PRELOAD = ("numpy", "torch", "hypothesis", "pytest", "autograder.engine.plugin")


def _run_pytest(job: dict) -> None:
    """The grandchild: pytest.main(args) in the job's folder and environment; exits with pytest's status."""
    code = 3
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.stdin = open(os.devnull)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        import pytest
        profile = job["env"].get("IPT_P0_PROFILE")   # a folder: P0's side of each grading under cProfile
        if profile:
            import cProfile
            with cProfile.Profile() as prof:
                code = int(pytest.main(job["args"]))
            prof.dump_stats(os.path.join(profile, f"p0-{os.getpid()}.prof"))
        else:
            code = int(pytest.main(job["args"]))
        _report_imports()
        _report_remote_cpu(job["rc"])
    except BaseException as exc:  # noqa: BLE001 - the caller sees the status and the log
        try:
            print(f"p0fork: {type(exc).__name__}: {exc}", file=sys.stderr)
        except Exception:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


_known: set[str] = set()   # the server's modules (and the ones it tried to learn) at the last fork
_replies = sys.stdout       # the server's protocol stream (serve() moves it off fd 1)
_learned_dir = ""          # where runs leave the names of the modules they imported (see _report_imports)
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _report_imports() -> None:
    """A run's new installed modules, in import order, for the server to import before its next fork."""
    if not _learned_dir:
        return
    names = []
    for name, module in list(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
        if name not in _known and origin.startswith(_INSTALLED):
            names.append(name)
    try:
        path = os.path.join(_learned_dir, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(names, f)
        os.rename(path + ".tmp", path)
    except OSError:
        pass


def _report_remote_cpu(rc: str) -> None:
    """The CPU of the zygotes that the server's templates forked for this run (sandbox.remote_cpu_seconds):
    not the run's children, so not in the rusage its parent takes from wait4; the parent adds it."""
    sandbox = sys.modules.get("autograder.engine.sandbox")
    seconds = sandbox.remote_cpu_seconds() if sandbox is not None else 0.0
    with open(rc + ".remote", "w") as f:
        f.write(f"{seconds:.6f}")


def _learn() -> None:
    """Import what finished runs reported (once each; a module that fails to import is left to the runs)."""
    import importlib
    for entry in sorted(os.listdir(_learned_dir)):
        if not entry.endswith(".json"):
            continue
        path = os.path.join(_learned_dir, entry)
        try:
            with open(path) as f:
                names = json.load(f)
        except (OSError, ValueError):
            names = []
        os.unlink(path)
        for name in names:
            if name in _known or name in sys.modules:
                continue
            _known.add(name)
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - SystemExit too: the run imports it again and reports what fails
                pass


def _templates_for(job: dict) -> None:
    """A run uses the server's templates that its job asked for, and no others (IPT_TEMPLATE=0 turns them off)."""
    for name, key in (("sandbox", "template"), ("referee", "referee")):
        module = sys.modules.get(f"autograder.engine.{name}")
        if module is not None and not job.get(key):
            module.forget_templates()


def _child(job: dict) -> None:
    """The server's child: a new process group, the pytest run in a grandchild, and its status and CPU time
    (the grandchild's and everything it waited for, from wait4) written to the job's `rc` file."""
    code = 3
    try:
        _replies.close()
        os.setsid()
        _templates_for(job)
        pid = os.fork()
        if pid == 0:
            _run_pytest(job)
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        try:
            with open(job["rc"] + ".remote") as f:
                remote = float(f.read())
        except (OSError, ValueError):
            remote = 0.0
        with open(job["rc"] + ".tmp", "w") as f:
            f.write(f"{code} {cpu + remote:.6f} {remote:.6f}")
        os.rename(job["rc"] + ".tmp", job["rc"])
    finally:
        os._exit(0)


def serve() -> None:
    import importlib

    from labkit.quickexit import at_exit_skip_final_gc
    at_exit_skip_final_gc()
    for name in PRELOAD:
        importlib.import_module(name)
    global _learned_dir, _replies
    _learned_dir = tempfile.mkdtemp(prefix="ipt-p0fork-")
    atexit.register(shutil.rmtree, _learned_dir, True)
    # replies go out on a private copy of stdout: whatever an imported module prints cannot garble them
    _replies = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    print("ready", file=_replies, flush=True)
    warmed = set()
    for line in sys.stdin:
        job = json.loads(line)
        for name in job.get("preload", ()):  # a lab's heavy modules, imported here once for all its gradings
            try:
                module = importlib.import_module(name)
                if name not in warmed:  # and what they compute the same way for every grading (see the docstring)
                    warmed.add(name)
                    if callable(getattr(module, "warm_p0", None)):
                        module.warm_p0()
            except Exception:  # noqa: BLE001 - the grading imports it again and reports what fails
                pass
        if job.get("template"):  # the lab's warm start for its student zygotes (level namespaces)
            from autograder.engine import sandbox
            sandbox.start_template(sandbox.spec_of(job["template"]))
        if job.get("referee"):  # and of its referee ranks' zygotes (lab.toml referee_roles)
            from autograder.engine import referee
            referee.start_template(job["referee"])
        _learn()
        _known.update(sys.modules)
        gc.freeze()  # a run's collections skip everything the server holds (see the docstring)
        pid = os.fork()
        if pid == 0:
            _child(job)
        print(json.dumps({"pid": pid}), file=_replies, flush=True)
        _reap(block=False)
    for name in ("sandbox", "referee"):  # the templates end when told (their stdin closes); then every child is reaped
        module = sys.modules.get(f"autograder.engine.{name}")
        if module is not None:
            module.stop_own_templates()
    _reap(block=True)   # so the CPU of every run (and template) counts in the rusage of whoever waits for this server


def _reap(block: bool) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Server:
    """The client side: one server per start-up environment, shared by the threads of this process."""

    def __init__(self, env: dict[str, str]):
        self.env, self.lock = env, threading.Lock()
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.engine.p0fork"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                     start_new_session=True)
        if self.proc.stdout.readline().strip() != "ready":
            self.close()
            raise OSError("the P0 fork server did not start")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, args: list[str], cwd: str, log: str, timeout: float, env: dict[str, str] | None = None,
            preload: tuple[str, ...] = (), template: dict | None = None, referee: list[str] | None = None) -> int | None:
        """pytest.main(args) in a fresh child, in `env` (default: the server's); its exit status, or None when
        it ran past `timeout` (killed). `preload`: modules the server imports first (once), so that this run
        and every later one starts with them imported. `template`: the grading job (sandbox.spec_of reads the
        student zygotes' sandbox from it) of this run: the server starts that lab's template
        once (sandbox.start_template), and the run's zygotes are forked from it. `referee`: the role modules of
        the lab's referee ranks, for the same with referee.start_template."""
        rc = log + ".rc"
        job = {"args": args, "cwd": cwd, "env": env if env is not None else self.env, "log": log, "rc": rc,
               "preload": list(preload), "template": template, "referee": referee}
        with self.lock:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
        if not reply:
            raise OSError("the P0 fork server went away")
        pid = json.loads(reply)["pid"]
        deadline = time.monotonic() + timeout
        delay = 0.005
        while _running(pid):
            if time.monotonic() > deadline:
                _kill_group(pid)
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        try:
            with open(rc) as f:
                code, cpu, remote = f.read().split()
        except (OSError, ValueError):
            return -signal.SIGKILL   # died without a word: killed from outside, or crashed
        global _cpu, _sandbox_cpu
        with _servers_lock:
            _cpu += float(cpu)
            _sandbox_cpu += float(remote)
        return int(code)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_servers: dict[str, Server] = {}
_servers_lock = threading.Lock()
_cpu = 0.0   # CPU seconds of every finished run of this process's servers (not in its RUSAGE_CHILDREN)
_sandbox_cpu = 0.0   # the part of _cpu spent in sandboxes forked from the server's templates


def cpu_seconds() -> float:
    """CPU seconds used so far by the forked pytest runs of this process (and what they waited for):
    add it to `resource.getrusage(RUSAGE_CHILDREN)` to count a grading's whole CPU."""
    with _servers_lock:
        return _cpu


def sandbox_cpu_seconds() -> float:
    """The part of `cpu_seconds()` spent in the sandboxes that the server's templates forked (the student
    zygotes and their workers, the referee ranks): what the learner's side of the gradings cost."""
    with _servers_lock:
        return _sandbox_cpu


@atexit.register
def _close_all() -> None:
    for server in list(_servers.values()):
        server.close()


STARTUP_PREFIXES = ("PYTHON", "OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS_", "TORCH", "LD_")


def startup_env(env: dict[str, str]) -> dict[str, str]:
    """The entries that take effect when an interpreter starts or imports torch: the server's key. The rest
    (PYTEST_CURRENT_TEST changes with every test) reaches each run through the job."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(STARTUP_PREFIXES) or k in ("PATH", "HOME", "TMPDIR")}


def server_for(env: dict[str, str]) -> Server | None:
    """The warm server for this start-up environment (started on first use); None where forking is off or fails."""
    if os.environ.get("IPT_P0_FORK", "1") == "0" or not sys.platform.startswith("linux"):
        return None
    key = json.dumps(startup_env(env))
    with _servers_lock:
        server = _servers.get(key)
        if server is not None and server.alive():
            return server
        try:
            server = _servers[key] = Server(env)
        except OSError:
            return None
        return server


if __name__ == "__main__":
    serve()
