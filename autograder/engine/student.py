"""The trusted side's handle on one student process: `student.run("lab01.scenarios:fn", ...)`."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time

from autograder.engine import sandbox, wire, witness

OUTPUT_CAP = 64 * 1024


class StudentError(Exception):
    """The learner's code raised; str() is a line the learner can act on."""

    TYPE_LIMIT = 80  # a class name is learner text too: long names once carried 3000-character payloads

    def __init__(self, type_: str, message: str, traceback: str = ""):
        type_ = type_ if len(type_) <= self.TYPE_LIMIT else type_[:self.TYPE_LIMIT] + "..."
        super().__init__(type_, message)
        self.type, self.message, self.traceback = type_, message, traceback

    def __str__(self) -> str:
        if self.type == "NotImplementedError":
            text = "not implemented yet (your code raised NotImplementedError)"
        else:
            text = f"your code raised {self.type}: {self.message}" if self.message else f"your code raised {self.type}"
        return f"{text}\n{self.traceback}" if self.traceback else text


class StudentTimeout(StudentError):
    def __str__(self) -> str:
        return self.message


class StudentCrash(StudentError):
    def __str__(self) -> str:
        return self.message


class GraderError(Exception):
    """A fault on the grading side (bad scenario name, protocol error): not the learner's."""


class _Capped:
    """Drains a pipe in a thread, keeping the first OUTPUT_CAP bytes."""

    def __init__(self, stream):
        self.data, self.dropped = bytearray(), 0
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream):
        try:
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                room = OUTPUT_CAP - len(self.data)
                self.data += chunk[:room]
                self.dropped += max(0, len(chunk) - room)
        except (OSError, ValueError):
            pass


class Student:
    def __init__(self, spec: sandbox.SandboxSpec, cells: list[tuple[str, str]], *, scenarios: dict[str, str],
                 call_timeout: float = 10,
                 module_budget: float = 120, load_timeout: float = 30, skipped: dict | None = None,
                 zygote: sandbox.Zygote | None = None):
        self.spec, self.cells, self.scenarios = spec, cells, scenarios  # scenarios: lab -> module source
        self.zygote = zygote  # forks workers with the heavy modules already imported (level namespaces)
        self.call_timeout, self.module_budget, self.load_timeout = call_timeout, module_budget, load_timeout
        self.level = sandbox.resolve_level(spec.level)
        self.spec = dataclasses.replace(spec, level=self.level)
        self.spent = 0.0
        self.load_errors: list[dict] = []
        self.fatal: str | None = None
        self.skipped: dict[str, dict] = skipped if skipped is not None else {}  # cells that broke loading
        self._progress: str | None = None
        self.test_id: str | None = None
        self._broken: tuple[str | None, StudentError] | None = None  # (test, error) of the last hang or crash
        self.proc = None
        self.outputs: list[_Capped] = []
        self._ids = 0

    @property
    def net_pid(self) -> int | None:
        """A host pid whose network namespace is this worker's (level namespaces), for
        `sandbox.trusted_peer`; None where the worker shares the host's network."""
        if self.level != "namespaces":
            return None
        if isinstance(self.proc, sandbox.ZygoteChild):
            return self.proc.zygote.proc.pid
        return self.proc.pid if self.proc is not None else (self.zygote.proc.pid if self.zygote else None)

    # -- process lifecycle -------------------------------------------------------------------
    def _start(self) -> None:
        """Start a worker and load the cells; a cell that hangs or kills the process while loading
        is skipped (and reported), so it costs only the parts that need it."""
        while True:
            self._launch()
            cells = [c for c in self.cells if c[0] not in self.skipped]
            started = time.monotonic()
            try:
                errors = self._request({"op": "load", "cells": cells, "scenarios": self.scenarios}, min(self.load_timeout, self._remaining()),
                                       what="loading your notebook")
                break
            except (StudentTimeout, StudentCrash) as exc:
                cell = self._progress
                if cell is None or cell in self.skipped or self._remaining() <= 0:
                    raise
                self.skipped[cell] = {"cell": cell, "type": "Timeout" if isinstance(exc, StudentTimeout) else "Crash",
                                      "message": f"{exc}; the cell was skipped", "traceback": ""}
            finally:
                self.spent += time.monotonic() - started
        if not self.load_errors:
            self.load_errors = list(self.skipped.values()) + errors

    def _launch(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.proc = self._fork_from_zygote(req_r, rep_w) or sandbox.launch(self.spec, fds=(req_r, rep_w))
        os.close(req_r)
        os.close(rep_w)
        self._out, self._reader = req_w, wire.Reader(rep_r)
        self.outputs += [_Capped(self.proc.stdout), _Capped(self.proc.stderr)]

    def _fork_from_zygote(self, req_r: int, rep_w: int):
        if self.zygote is None or self.zygote.broken:
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = self.zygote.spawn((req_r, rep_w, out_w, err_w))
        except OSError:
            os.close(out_r), os.close(err_r)
            return None
        finally:
            os.close(out_w), os.close(err_w)
        return sandbox.ZygoteChild(self.zygote, pid, out_r, err_r)

    def close(self) -> None:
        if self.proc is not None:
            if isinstance(self.proc, sandbox.ZygoteChild):
                self.proc.terminate(self._drain)
            else:
                sandbox.terminate(self.proc, self._drain)
            for fd in (self._out, self._reader.fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc = None

    def _drain(self) -> None:
        """Let the output readers reach the end of what the (now dead) worker wrote."""
        for capture in self.outputs[-2:]:
            capture.thread.join(timeout=1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _remaining(self) -> float:
        return max(0.0, self.module_budget - self.spent)

    @property
    def output(self) -> str:
        text = b"".join(bytes(o.data) for o in self.outputs).decode("utf-8", "replace")
        dropped = sum(o.dropped for o in self.outputs)
        return text + (f"\n[... {dropped} more bytes of output dropped]" if dropped else "")

    # -- calls --------------------------------------------------------------------------------
    def _request(self, message: dict, timeout: float, what: str):
        self._ids += 1
        message["id"] = self._ids
        deadline = time.monotonic() + timeout
        self._progress = None
        try:
            wire.send(self._out, message)
            while True:
                reply = self._reader.read(deadline)
                if "progress" in reply:
                    self._progress = str(reply["progress"])
                    continue
                if reply.get("id") == self._ids:
                    break
        except wire.Timeout:
            self.close()
            where = f" (cell {self._progress!r} was still running)" if message["op"] == "load" and self._progress else ""
            raise StudentTimeout("Timeout", f"{what} did not finish within {timeout:.0f} s{where}") from None
        except (wire.Closed, BrokenPipeError, wire.WireError) as exc:
            try:
                code = self.proc.wait(timeout=2) if self.proc else None
            except subprocess.TimeoutExpired:
                code = None
            self.close()
            if isinstance(exc, wire.WireError):
                raise StudentCrash("Crash", f"{what}: the student process sent malformed data ({exc})") from None
            how = _describe_exit(code)
            raise StudentCrash("Crash", f"{what}: the student process ended unexpectedly ({how})") from None
        if reply.get("ok"):
            return wire.from_wire(reply.get("value"))
        error = reply.get("error") or {}
        if reply.get("internal"):
            raise GraderError(f"{error.get('type')}: {error.get('message')}")
        raise StudentError(str(error.get("type", "Exception")), str(error.get("message", "")), str(error.get("traceback", "")))

    def run(self, target: str, *args, **kwargs):
        """Run a scenario in the student process and return its (safe) result."""
        return self._call(self.call_timeout, target, args, kwargs)

    def run_within(self, seconds: float, target: str, *args, **kwargs):
        """`run` with a tighter limit than the lab's call timeout, for a case whose honest answer takes a tiny
        fraction of `seconds` and whose wrong algorithm never finishes (an exponential walk): such a
        submission then pays `seconds` instead of the whole call timeout. A limit, never a speed verdict:
        keep `seconds` hundreds of times above the honest cost (see engine.referee.busy_timeout on a busy machine)."""
        return self._call(min(seconds, self.call_timeout), target, args, kwargs)

    def _call(self, limit: float, target: str, args: tuple, kwargs: dict):
        if ":" not in target:
            target = f"{self.spec.lab}.scenarios:{target}"
        if self.fatal:
            raise StudentTimeout("Timeout", self.fatal)
        if self._broken and self.test_id is not None and self._broken[0] == self.test_id:
            raise self._broken[1]  # one hang or crash per test is enough
        if self._remaining() <= 0:
            self.fatal = f"this part's time budget of {self.module_budget:.0f} s is used up; remaining checks were not run"
            raise StudentTimeout("Timeout", self.fatal)
        if self.proc is None:
            try:
                self._start()
            except StudentError as exc:
                self.fatal = str(exc)  # loading fails the same way every time: do not retry
                raise
        payload = {"op": "call", "target": target, "args": wire.to_wire(list(args)), "kwargs": wire.to_wire(kwargs)}
        timeout = min(limit, self._remaining())
        started = time.monotonic()
        try:
            return self._request(payload, timeout, what=f"{target.split(':')[-1]}")
        except (StudentTimeout, StudentCrash) as exc:
            self._broken = (self.test_id, exc)
            raise
        finally:
            self.spent += time.monotonic() - started

    def processes(self) -> list[dict]:
        """The live processes of this student's sandbox, read by P0 from the host's /proc between calls: each
        {"pid", "ppid" (host pids), "comm", "state" (a letter of /proc/PID/stat: R, S, Z, ...), "worker": True
        for the student's own worker}. Nothing here comes from P1: a process cannot hide from, or forge its
        entry in, the host's /proc, and only a process itself can set its comm (a lab's dataset can name the
        process that loaded a sample; lab11's loader part). The sandbox is: its pid namespace at level
        namespaces (daemons and orphans included), the grading uid's processes at level uid, the worker's
        process tree at level rlimits. Empty before the first call and after a hang or crash."""
        if self.proc is None:
            return []
        table = _proc_table()
        if isinstance(self.proc, sandbox.ZygoteChild):
            root, inner_worker = self.proc.zygote.proc.pid, self.proc.pid
        else:
            root, inner_worker = self.proc.pid, None
        if self.level == "namespaces":
            children = [p for p in table.values() if p["ppid"] == root]  # pid 1 of the namespace, under unshare
            ns = children[0]["ns"] if children else None
            members = [p for p in table.values() if ns is not None and p["ns"] == ns]
            worker = [p["pid"] for p in members if (p["nspid"] == inner_worker if inner_worker else p["nspid"] == 1)]
        elif self.level == "uid":
            members = [p for p in table.values() if p["uid"] == sandbox.grading_uid()]
            worker = [root]
        else:
            tree, frontier = {root}, [root]
            while frontier:
                frontier = [p["pid"] for p in table.values() if p["ppid"] in frontier and p["pid"] not in tree]
                tree.update(frontier)
            members = [p for p in table.values() if p["pid"] in tree]
            worker = [root]
        return [{"pid": p["pid"], "ppid": p["ppid"], "comm": p["comm"], "state": p["state"], "worker": p["pid"] in worker}
                for p in sorted(members, key=lambda p: p["pid"])]

    def witness(self, answer) -> witness.Witness:
        """A socket this sandbox can connect to, where P0 learns from the kernel which process calls
        (engine.witness): `answer(host_pid, line) -> bytes` makes each reply. Use it as a context manager;
        `.inside` is the path to hand to a scenario, `.records` what each connection asked and got."""
        return witness.Witness(answer, self.level)

    def begin_test(self, test_id: str) -> None:
        """Calls are grouped by test: after a hang or crash, the rest of that test fails at once."""
        self.test_id = test_id


def _proc_table() -> dict[int, dict]:
    """Every process of the host's /proc: pid, ppid, comm, state, real uid, pid namespace, pid inside it."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat", "rb").read().decode("utf-8", "replace")
            status = open(f"/proc/{entry}/status", "rb").read().decode("utf-8", "replace")
            ns = os.readlink(f"/proc/{entry}/ns/pid")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        nspid = fields.get("NSpid", entry).split()
        table[int(entry)] = {"pid": int(entry), "ppid": int(rest[1]), "comm": comm, "state": rest[0],
                             "uid": int(fields.get("Uid", "-1").split()[0]), "ns": ns, "nspid": int(nspid[-1])}
    return table


def _describe_exit(code) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        import signal
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGKILL": "killed, often for using too much memory or CPU time", "SIGXCPU": "CPU time limit",
                "SIGXFSZ": "file size limit", "SIGSEGV": "segmentation fault"}.get(name, "")
        return f"{name}{': ' + hint if hint else ''}"
    return f"exit status {code}"
