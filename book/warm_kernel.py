"""Warm kernels for the book build: each course notebook still runs in a process of its own, but that process is
forked from a *zygote* that has imported torch and ipykernel once, instead of importing them again (3-4 s of CPU
per notebook here, a third of what executing the 22 notebooks costs).

    python book/warm_kernel.py serve SOCKET          the zygote (book/build.py starts it and stops it)
    python book/warm_kernel.py launch SOCKET -f CONN the kernelspec's command (what Jupyter starts as "the kernel")

The launcher asks the zygote for a kernel over a Unix socket, handing over its working directory, environment,
arguments and standard streams; the zygote forks, and the child becomes an ordinary ipykernel with those (a
fresh session, SIGCHLD reset, `random` reseeded by Python's own fork hook). The launcher then stands in for the
kernel: it forwards SIGINT/SIGTERM/SIGHUP to it and exits when it exits; the kernel exits when the launcher is
killed (Jupyter's immediate shutdown sends SIGKILL). Without a zygote the launcher execs a plain ipykernel.

Only torch, numpy and ipykernel are preloaded: matplotlib reads MPLBACKEND when it is imported, which ipykernel
sets when the kernel starts, so every notebook imports it in its own kernel as a learner's would.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import threading

PRELOAD = ("torch", "numpy", "ipykernel.kernelapp", "ipykernel.ipkernel", "IPython")


def _watch(pid: int) -> None:
    """When process `pid` (the launcher) is gone, end this kernel's process group: the kernel and what it started
    (as Jupyter's kill of a kernel's group would)."""
    def run():
        try:
            fd = os.pidfd_open(pid)
            select.select([fd], [], [])
        finally:
            os.killpg(0, signal.SIGKILL)
    threading.Thread(target=run, daemon=True, name="launcher-watch").start()


def _become_kernel(request: dict, fds: list[int]) -> None:
    """In the forked child: take the launcher's streams, place and environment, then run ipykernel."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = request["argv"]
    sys.path[0] = os.getcwd()  # as `python -m ipykernel_launcher`: the working directory first
    _watch(int(request["launcher"]))
    code = 0
    try:
        from ipykernel import kernelapp
        kernelapp.launch_new_instance()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - said on the kernel's stderr, as a cold kernel would
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def serve(path: str) -> None:
    for module in PRELOAD:
        __import__(module)
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the zygote never waits for its kernels
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                message, fds, _, _ = socket.recv_fds(conn, 1 << 22, 3)
                request = json.loads(message)
            except (OSError, ValueError):
                continue
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                _become_kernel(request, fds)
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())


def _cold(args: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *args])


def available() -> bool:
    """Warm kernels need Linux's pidfd (a process can wait for one that is not its child)."""
    return hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def launch(path: str, args: list[str]) -> int:
    import importlib.util
    if not available():
        _cold(args)
    request = {"argv": [importlib.util.find_spec("ipykernel_launcher").origin, *args], "cwd": os.getcwd(), "env": dict(os.environ),
               "launcher": os.getpid()}
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
        socket.send_fds(client, [json.dumps(request).encode()], [0, 1, 2])
        reply = client.makefile().readline()
        pid = int(reply)
        kernel = os.pidfd_open(pid)
    except (OSError, ValueError):
        client.close()
        _cold(args)  # no zygote (or it failed): an ordinary kernel
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    while True:
        try:
            ready, _, _ = select.select([kernel], [], [])
        except InterruptedError:
            continue
        if ready:
            return 0


def kernelspec(folder, python: str, path: str) -> None:
    """Write the `python3` kernelspec under folder/kernels/ (put folder first on JUPYTER_PATH)."""
    spec = {"argv": [python, os.path.abspath(__file__), "launch", path, "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}
    target = os.path.join(folder, "kernels", "python3")
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, "kernel.json"), "w") as f:
        json.dump(spec, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "launch":
        sys.exit(launch(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit("usage: warm_kernel.py serve SOCKET | launch SOCKET -f CONNECTION_FILE")
