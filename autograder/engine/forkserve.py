"""The request loop of a template (engine/worker.py template, engine/referee.py template): a root process that has
imported a lab's heavy modules once and forks, per request from P0, a child that becomes one grading's zygote or one
test module's referee. Standard library only: it runs inside the jail (found on engine_dir) and on the host.

A request is one message on a SOCK_SEQPACKET connection, with descriptors attached (SCM_RIGHTS); only a root peer
(P0) is served. The reply names the child's host pid. The template ends when its stdin (a pipe from the process that
started it) reaches end of file.
"""
import gc
import json
import os
import select
import socket
import struct


def reap_finished() -> None:
    """Reap every child that has ended, without waiting for the others."""
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not done:
            return


def serve(listener: socket.socket, nfds: int, valid, child) -> None:
    """Answer requests until stdin closes: each carries exactly `nfds` descriptors and a JSON object that
    `valid(request)` accepts; `child(request, fds)` runs in the forked child and never returns."""
    while True:
        reap_finished()
        ready, _, _ = select.select([listener, 0], [], [], 1.0)
        if 0 in ready and not os.read(0, 1):
            os._exit(0)
        if listener not in ready:
            continue
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        fds = []
        try:
            conn.settimeout(5)
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            message, fds, _, _ = socket.recv_fds(conn, 65536, nfds)
            request = json.loads(message)
            if uid != 0 or len(fds) != nfds or not valid(request):
                continue
            gc.freeze()  # the child's collections skip the template's objects (no walk, no copy-on-write)
            pid = os.fork()
            if pid == 0:
                listener.detach(), conn.detach()
                child(request, fds)
                os._exit(70)
            conn.send(json.dumps({"pid": pid}).encode())
        except (OSError, ValueError, KeyError, TypeError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()
