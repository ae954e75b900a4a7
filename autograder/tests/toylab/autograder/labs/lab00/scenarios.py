"""Scenarios of the toy lab (run in the student process)."""
import numpy as np


def add(sub, a, b):
    return np.asarray(sub.add(a, b))


def scale(sub, a, k):
    return np.asarray(sub.scale(a, k))


def peek(sub):
    """What the confined process can see and do (for the engine's own tests)."""
    import os
    import socket
    seen = {"uid": os.getuid(), "root": sorted(os.listdir("/"))}
    try:
        socket.create_connection(("127.0.0.1", 22), timeout=1).close()
        seen["network"] = "connected"
    except OSError as exc:
        seen["network"] = type(exc).__name__
    try:
        import torch  # noqa: F401
        seen["torch"] = "imported"
    except ImportError as exc:
        seen["torch"] = str(exc)
    return seen


def leave_shared_memory(sub):
    """Counts the System V shared-memory segments it can see, then creates one (the engine's test that no
    part inherits IPC objects from an earlier one)."""
    import ctypes
    with open("/proc/sysvipc/shm") as table:
        seen = len(table.read().splitlines()) - 1
    libc = ctypes.CDLL(None, use_errno=True)
    created = libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT | 0600
    return [seen, created >= 0]


def leave_in_tmp(sub):
    """Lists /tmp, then leaves a file there (the engine's test that every part gets a fresh /tmp)."""
    import os
    listing = sorted(os.listdir("/tmp"))
    with open("/tmp/left-by-an-earlier-part", "w") as f:
        f.write("x")
    return listing


def compile_c(sub):
    """Builds and calls a tiny C function with the system compiler, as compiled-kernel labs do."""
    import ctypes
    import os
    import subprocess
    import tempfile
    folder = tempfile.mkdtemp()
    source, library = os.path.join(folder, "k.c"), os.path.join(folder, "k.so")
    with open(source, "w") as f:
        f.write("#include <math.h>\ndouble twice_sin(double x) { return 2 * sin(x); }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", source, "-o", library, "-lm"], check=True, capture_output=True)
    fn = ctypes.CDLL(library).twice_sin
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double]
    return fn(0.5)


_listener = {}


def listen(sub):
    """Listen on 127.0.0.1 (a free port) and try to reach it from here: {"port": N, "reach": "ok" or the
    error's name} (a namespace's loopback starts down: binding works, connecting does not)."""
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2)
    _listener["sock"] = sock
    port = sock.getsockname()[1]
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        sock.accept()[0].close()
        reach = "ok"
    except OSError as exc:
        reach = type(exc).__name__
    return {"port": port, "reach": reach}


def accepted(sub):
    """What the first connection to `listen`'s port sent."""
    sock = _listener["sock"]
    sock.settimeout(20)
    conn, _ = sock.accept()
    with conn:
        return conn.recv(64).decode()

def burn_cpu(sub, seconds):
    """Spins for `seconds` of CPU time (the engine's test that a confined worker's CPU is accounted)."""
    import time
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return True
