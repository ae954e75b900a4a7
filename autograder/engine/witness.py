"""A witness: a Unix socket that P0 serves to the student's sandbox, where the kernel says who is calling.

Some facts a lab must grade are about processes, not values: "dataset[i] ran in a worker process, not in
the process that called next()". P1 could report anything about itself, so P0 asks the kernel instead.
The lab's code in P1 connects to the witness's socket, sends one short line, and reads one line back; P0
takes the connecting process's pid from the socket itself (SO_PEERCRED: filled in by the kernel at
connect(), in P0's own pid namespace, so the host pid that `Student.processes()` lists) and answers
with a value that P0 computes from (pid, line). A lab makes the answer a keyed hash of both and puts it
in the value the learner's code must return: each returned value then names the process that obtained
it, and P0 trusts that name because only P0 knows the key.

The sockets live in build/sandbox/witness/, a folder the namespaces jail binds read-only at
/ipt/witness (connect() needs write permission on the socket file, not on its file system). The folder
is mode 0711: a sandbox can reach a socket whose name it was given, not list the others.
"""
from __future__ import annotations

import os
import secrets
import select
import socket
import struct
import threading
from typing import Callable

from autograder.paths import build_dir

INSIDE = "/ipt/witness"  # where the namespaces jail binds the folder
MAX_LINE = 256  # bytes of one request; a longer one is cut
MAX_RECORDS = 100_000  # a flood is refused rather than remembered


def folder():
    path = build_dir("sandbox", "witness")
    path.chmod(0o711)
    return path


class Witness:
    """Serves one socket on a thread until closed. `answer(pid, line) -> bytes` computes each reply (one
    line, without its newline); `records` holds (pid, line, reply) per connection, in arrival order.
    `inside` is the socket's path as the sandbox sees it (level namespaces: under /ipt/witness; other
    levels share the host's file system)."""

    def __init__(self, answer: Callable[[int, bytes], bytes], level: str, timeout: float = 2.0):
        self.answer, self.timeout, self.records = answer, timeout, []
        name = f"{secrets.token_hex(12)}.sock"
        self.path = str(folder() / name)
        self.inside = f"{INSIDE}/{name}" if level == "namespaces" else self.path
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        os.chmod(self.path, 0o666)  # the grading uid connects
        self._server.listen(64)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="witness", daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            ready, _, _ = select.select([self._server], [], [], 0.05)
            if not ready:
                continue
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                self._one(conn)

    def _one(self, conn):
        try:
            pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
            conn.settimeout(self.timeout)
            line = b""
            while not line.endswith(b"\n") and len(line) < MAX_LINE:
                chunk = conn.recv(MAX_LINE - len(line))
                if not chunk:
                    break
                line += chunk
            line = line.rstrip(b"\n")
            if len(self.records) >= MAX_RECORDS:
                return
            reply = self.answer(pid, line)
            self.records.append((pid, line, reply))
            conn.sendall(reply + b"\n")
        except OSError:  # the caller went away or stalled: no record, no reply
            return

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

