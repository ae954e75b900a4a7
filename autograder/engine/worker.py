"""P1, the student side: loads the learner's cells and runs scenarios on request.

Started by autograder.engine.sandbox as `python -I -S -B worker.py CONFIG_JSON`, already confined.
Requests arrive and replies leave on the two pipes named in the config (framed JSON, see wire.py); the learner's own
prints go to stdout/stderr, which the trusted side reads and caps. Nothing here decides a score:
replies are plain data that the trusted side checks.
"""
import json
import sys


def _setup(config):
    sys.path[:0] = [config["engine_dir"], *config["site_dirs"]]
    deny = frozenset(config.get("deny_modules", ()))
    if deny:
        sys.meta_path.insert(0, _DenyFinder(deny, config.get("lab", "this lab")))


class _DenyFinder:
    """Refuses the modules a from-scratch lab rebuilds (the site folder lacks them too)."""

    def __init__(self, deny, lab):
        self.deny, self.lab = deny, lab

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.deny:
            raise ImportError(f"{name} is not available in {self.lab}: here you build this part of PyTorch yourself")
        return None


def _format_error(exc, limit=4000):
    """The learner's view of an exception: their own frames only, then the message."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell ")]
    lines = [f"  {f.filename[1:-1]}, line {f.lineno}, in {f.name}" + (f"\n    {f.line}" if f.line else "") for f in frames[-6:]]
    message = str(exc)
    if len(message) > limit:
        message = message[:limit] + " ..."
    return {"type": type(exc).__name__, "message": message, "traceback": "\n".join(lines)}


def _load_cells(cells, progress):
    import linecache
    import types

    module = types.ModuleType("submission")
    module.__dict__["check"] = lambda *args, **kwargs: None  # a notebook tool, not lab code
    sys.modules["submission"] = module
    errors = []
    for gid, source in cells:
        filename = f"<cell {gid}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        progress(gid)
        try:
            exec(compile(source, filename, "exec"), module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - SystemExit included: one cell never stops the rest
            error = _format_error(exc)
            error["cell"] = gid
            errors.append(error)
    return module, errors


def _load_scenarios(sources):
    """Scenario modules arrive as source text from the trusted side: P1 needs no access to them on disk."""
    import types

    modules = {}
    for lab, source in sources.items():
        module = types.ModuleType(f"{lab}_scenarios")
        exec(compile(source, f"{lab}/scenarios.py", "exec"), module.__dict__)
        modules[lab] = module
    return modules


def _scenario(target, modules):
    module_name, _, func = target.partition(":")
    lab = module_name.split(".")[0]
    if module_name != f"{lab}.scenarios" or lab not in modules or not func.isidentifier():
        raise LookupError(f"bad scenario target {target!r}")
    return getattr(modules[lab], func)


def serve(wire, request_fd, reply_fd):
    """Answer load and call requests until the trusted side closes the pipe."""
    reader, out = wire.Reader(request_fd), reply_fd
    submission, scenarios = None, {}
    while True:
        try:
            request = reader.read()
        except wire.Closed:
            return
        rid = request.get("id")
        if request.get("op") == "load":
            scenarios = _load_scenarios(request.get("scenarios", {}))
            submission, errors = _load_cells(request["cells"], lambda gid: wire.send(out, {"progress": gid}))
            wire.send(out, {"id": rid, "ok": True, "value": errors})
            continue
        if request.get("op") != "call" or submission is None:
            wire.send(out, {"id": rid, "ok": False, "internal": True, "error": {"type": "ProtocolError", "message": "bad request"}})
            continue
        try:
            func = _scenario(request["target"], scenarios)
        except Exception as exc:  # noqa: BLE001 - a grader bug, reported as such
            wire.send(out, {"id": rid, "ok": False, "internal": True, "error": {"type": type(exc).__name__, "message": str(exc)}})
            continue
        try:
            value = func(submission, *wire.from_wire(request["args"]), **wire.from_wire(request["kwargs"]))
            reply = {"id": rid, "ok": True, "value": wire.to_wire(value)}
        except wire.WireError as exc:
            reply = {"id": rid, "ok": False, "error": {"type": "WireError", "message": str(exc), "traceback": ""}}
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: report, keep serving
            reply = {"id": rid, "ok": False, "error": _format_error(exc)}
        wire.send(out, reply)


def _empty_tmp():
    import os
    import shutil
    folders = ["/tmp"] + (["/dev/shm"] if os.path.isdir("/dev/shm") else [])  # lab.toml shm = true
    for entry in (e for folder in folders for e in os.scandir(folder)):
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _remove_sysv_ipc():
    """Remove every System V shared-memory segment, semaphore set and message queue of this IPC namespace
    (the grading run's own), so that nothing one part left there reaches the next part."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    removers = {"shm": lambda i: libc.shmctl(i, ipc_rmid, None), "sem": lambda i: libc.semctl(i, 0, ipc_rmid),
                "msg": lambda i: libc.msgctl(i, ipc_rmid, None)}
    for kind, remove in removers.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].lstrip("-").isdigit():
                remove(int(fields[1]))


def _import_all(names):
    """The heavy modules, imported once before any fork (one that is missing is left to whoever needs it)."""
    import importlib
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _warm(source):
    """The warm-up of a lab whose scenarios define warm_p1() (the scenarios' source, sent by P0; empty for the
    others): it does PyTorch's first-call work (a first torch.compile, torch.export or ONNX export pays seconds of
    one-time set-up) on the lab's own fixed inputs, once, before any fork, so that every worker of every grading
    starts past it. Trusted code, before any learner code; it must leave nothing that a scenario reads. One that
    fails only means the workers pay their first calls themselves."""
    import contextlib
    import io
    import os
    import types
    if not source:
        return
    module = types.ModuleType("ipt_warm_p1")  # a copy of its own: each worker still loads its scenarios afresh
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # what it prints (a graph break's print, an exporter's progress) must not reach the template's pipe
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, "scenarios.py", "exec"), module.__dict__)
            module.warm_p1()
    except Exception:  # noqa: BLE001 - a warm-up is an optimisation
        pass
    finally:
        os.dup2(saved, 1)
        os.close(saved), os.close(null)


def zygote(wire, control_fd, preload, warm=""):
    """Pid 1 of the sandbox: imports the heavy modules once, then forks one worker per test module.

    Requests arrive on a SOCK_SEQPACKET socket: spawn (with the worker's four pipe ends attached),
    wait (exit status of a worker), reset (kill every other process in the namespace).
    """
    import ctypes
    import gc
    import os
    import signal
    import socket
    import time

    _import_all(preload)
    _warm(warm)
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE=0: workers cannot ptrace the zygote
    control = socket.socket(fileno=control_fd)
    control.send(b'{"ready": true}')
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 4096, 4)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        request = json.loads(message)
        if request["op"] == "spawn":
            gc.freeze()  # the worker's collections skip the preloaded modules' objects (no walk, no copy-on-write)
            pid = os.fork()
            if pid == 0:
                control.close()
                os.dup2(fds[2], 1)
                os.dup2(fds[3], 2)
                for fd in fds[2:]:
                    os.close(fd)
                serve(wire, fds[0], fds[1])
                os._exit(0)
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"pid": pid}).encode())
        elif request["op"] == "wait":
            deadline, status = time.monotonic() + request.get("timeout", 2), None
            while status is None and time.monotonic() < deadline:
                try:
                    done, code = os.waitpid(request["pid"], os.WNOHANG)
                except ChildProcessError:
                    break
                status = os.waitstatus_to_exitcode(code) if done else None
                time.sleep(0 if status is not None else 0.01)
            control.send(json.dumps({"status": status}).encode())
        elif request["op"] == "reset":
            try:
                os.kill(-1, signal.SIGKILL)  # from pid 1 of a pid namespace: everyone else in it
            except ProcessLookupError:
                pass
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    break
            _empty_tmp()  # the next part starts with a fresh /tmp (this namespace's private tmpfs)
            _remove_sysv_ipc()  # and with no System V shared memory, semaphores or queues from the last
            control.send(b'{"ok": true}')


def template(wire, listen_fd, preload, warm=""):
    """A lab's warm start (level namespaces): imports the heavy modules once for every grading of a batch, then
    forks each grading's zygote, which is what a fresh `unshare` + jail.py + zygote() would be.

    Started by P0's fork server (sandbox.start_template) through jail.py, chrooted in the jail's root, in a mount
    namespace of its own but otherwise the host's, and still root: it never runs learner code. P0 processes
    (root) connect to the socket `listen_fd` listens on (in a folder only root can enter) and send one request
    with two descriptors: the zygote's control socket and a pipe. The template forks a child C that
    - keeps those two descriptors only (stdin, stdout and stderr on /dev/null),
    - enters new mount, pid, network, IPC and uts namespaces and mounts the grading's own /tmp and /dev/shm,
    - forks pid 1 of the new pid namespace, which mounts its /proc, sets the rlimits, takes the grading's uid
      and no_new_privs, and runs zygote() on the control socket;
    - and waits for it, then writes its CPU seconds (pid 1's and every process it reaped) to the pipe.
    The reply names C's host pid. The template ends when its stdin (a pipe from the server) closes."""
    import os
    import socket

    import forkserve  # noqa: E402 - beside this file, in engine_dir
    environ = dict(os.environ)  # the worker's; imports add to it (torch: TORCHINDUCTOR_CACHE_DIR, for uid 0)
    _import_all(preload)
    _warm(warm)
    listener = socket.socket(fileno=listen_fd)
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    def valid(request):  # a grading never runs as a privileged uid
        return isinstance(request.get("uid"), int) and request["uid"] >= 1000
    forkserve.serve(listener, 2, valid, lambda request, fds: _grading_zygote(wire, request, fds, environ))


def _fresh_process_state():
    """What a zygote started afresh draws at start-up and a forked one would share with every other grading of its
    template: numpy's global generator (seeded from the OS at import) and multiprocessing's authkey. (Python's
    `random` reseeds itself in every forked child.)"""
    import os
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "multiprocessing" in sys.modules:
        sys.modules["multiprocessing"].current_process().authkey = os.urandom(32)


def _grading_zygote(wire, request, fds, environ):
    """C of template(): one grading's namespaces, and its zygote as pid 1 of them."""
    import os
    code = 70
    try:
        import ctypes
        import jail  # noqa: E402 - beside this file, in engine_dir
        control, status = fds
        os.dup2(control, 3)
        os.dup2(status, 4)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(5, 65536)
        jail.unshare_grading()
        jail.grading_mounts(request)
        pid = os.fork()
        if pid == 0:
            os.close(4)
            jail.grading_proc()
            os.chdir("/tmp")
            jail.set_limits(request["limits"])
            jail.drop_privileges(int(request["uid"]))
            ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: C gone, the grading goes (after setuid, which clears it)
            os.environ.clear()
            os.environ.update(environ)
            if "torch._inductor.runtime.cache_dir_utils" in sys.modules:  # as its import does, for this uid
                sys.modules["torch._inductor.runtime.cache_dir_utils"].cache_dir()
            _fresh_process_state()
            zygote(wire, 3, [])
            os._exit(0)
        os.close(3)
        _, _, usage = os.wait4(pid, 0)
        os.write(4, f"{usage.ru_utime + usage.ru_stime:.6f}".encode())
        code = 0
    finally:
        os._exit(code)


def main():
    config = json.loads(sys.argv[1])
    _setup(config)
    import wire  # noqa: E402 - found through engine_dir

    if config.get("template"):
        template(wire, config["fds"][0], config.get("preload", []), config.get("warm", ""))
    elif config.get("zygote"):
        zygote(wire, config["fds"][0], config.get("preload", []), config.get("warm", ""))
    else:
        serve(wire, config["fds"][0], config["fds"][1])


if __name__ == "__main__":
    main()
