# IPT-CANARY lab10 world.py: hidden grading text, never shown to learners
"""P0's side of a graded lab10 world: the referee rank beside P1, the learner's ranks, and what came back.

    outcome = play(student, referee, "ddp", world=3, seat=1, spec=spec, arrays=per_rank_arrays, seed=...)
    got = outcome.rank(2, "a DDP rank")   # the values rank 2 of the learner returned (AssertionError if it failed)
    outcome.seen                          # what the referee rank received, in order (None: it did not finish)

A world has W ranks: W - 1 run the learner's implementation in P1 (scenarios.world), and the seat `seat`
is the referee (the engine's referee with roles.play), which runs the same rank program with P0's
implementation. seat None: all ranks are the learner's (a world of one, or a world without a referee
beside a refereed one in the same test).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.engine import stubs
from autograder.engine.referee import busy_timeout, referee_fixture

referee = referee_fixture(["autograder.labs.lab10.roles"], "lab10-referee", "lab10.scenarios:ready")

TIMEOUT = 5.0   # seconds: every gloo operation of a graded world, on both sides (honest ones take milliseconds), on an
#               idle machine; a busy one scales it (engine.referee.busy_timeout)
STALLED = ("RuntimeError", "DistError", "DistNetworkError", "DistBackendError", "DistStoreError", "TimeoutError", "Timeout", "Crash")
STALLED_HINT = (": the world stopped. A rank waited in a collective no other rank joined: it made a call the lab's rules "
                "do not make (or in another order, or with another size), skipped one they make, or a peer failed")


@dataclass
class Outcome:
    what: str
    replies: dict          # str(rank) -> the learner rank's values (dict) or an error dict
    record: dict | None    # the referee's record (roles.play), None without a referee or when it did not finish
    seat: int | None
    error: str = ""        # the referee's own reason (a trace with P0's paths): for the graders' authors, never shown

    def rank(self, r: int) -> dict:
        """The values learner rank r returned; fails the test with a readable message if it raised or stalled."""
        got = self.replies.get(str(r)) if isinstance(self.replies, dict) else None
        if not isinstance(got, dict):
            raise AssertionError(f"{self.what}: rank {r} returned nothing readable")
        if "error" in got and len(got) == 2 and "message" in got:
            if got["error"] in STALLED:
                raise AssertionError(f"{self.what}: rank {r} raised {got['error']}{STALLED_HINT}")
            raise AssertionError(f"{self.what}: rank {r} raised {got['error']}: {got.get('message', '')}")
        return got

    @property
    def seen(self) -> list | None:
        """What arrived at the referee from the other ranks, in order (None: no complete record)."""
        if self.record is None:
            return None
        return [self.record[f"seen{i}"] for i in range(sum(1 for k in self.record if k.startswith("seen")))]

    def out(self, name: str):
        """The referee's own value `name` (an array), or None."""
        return None if self.record is None else self.record.get(f"out.{name}")

    def learner_ranks(self) -> list[int]:
        return sorted(int(k) for k in self.replies) if isinstance(self.replies, dict) else []

    def need_referee(self) -> None:
        if self.seat is not None and self.record is None:
            raise AssertionError(f"{self.what}: the graders' rank {self.seat} did not finish: a rank of yours "
                                 f"made a collective call the lab's rules do not make, in another order or with another "
                                 f"size, skipped one, or failed")


# the parts whose rank program lets an error of its first call into the learner's code end the rank (ddp_dtypes
# catches the errors of its calls and returns their names)
FIRST_CALL_ENDS = {"ddp", "zero", "fsdp", "tp", "pipeline"}


def stub_error(student, part: str) -> dict | None:
    """The bare NotImplementedError() that `part`'s first call into the learner's code raised outside a world
    (engine.stubs), or None: the world is then not played, and its outcome is the one it has when every learner
    rank raises that error at once."""
    return stubs.stub_error(student, "lab10.scenarios:untouched", part) if part in FIRST_CALL_ENDS else None


def play(student, referee, part: str, world: int, seat: int | None, spec: dict, arrays: list[dict], what: str,
         timeout: float | None = None, group: list[int] | None = None) -> Outcome:
    """Run `part`'s rank program on `world` ranks: rank r gets arrays[r]; P0's referee sits at `seat`. A world
    whose first call is an untouched stub is not started (stub_error): its ranks would all raise there."""
    stub = stub_error(student, part)
    if stub is not None:
        raised = {"error": "NotImplementedError", "message": str(stub.get("message", ""))[:200]}
        return Outcome(what, {str(r): ({} if group and r not in group else dict(raised)) for r in range(world) if r != seat},
                       None, seat)
    timeout = busy_timeout(TIMEOUT) if timeout is None else timeout
    job = None
    if seat is not None:
        job = referee.start({"role": "autograder.labs.lab10.roles:play", "world": world, "seat": seat, "timeout": timeout,
                             "part": part, "spec": spec, "group": group}, arrays[seat], 1)
    learner = {str(r): arrays[r] for r in range(world) if r != seat}
    record, error = None, ""
    try:
        reply = student.run("lab10.scenarios:world", job.port if job else None, world, seat, part, spec, learner, timeout, group)
        if job:
            finished = isinstance(reply, dict) and all(isinstance(reply.get(k), dict) and "error" not in reply[k] for k in learner)
            record = job.finish(5.0 if finished else 0.5)[0]
            error = job.error()
    finally:
        if job:
            job.close()
    return Outcome(what, reply if isinstance(reply, dict) else {}, record, seat, error)


def close(got, want, what: str, rtol: float = 2e-4, atol: float = 2e-5) -> str | None:
    """None if `got` is an array of want's shape within tolerance of it, else a learner-readable problem."""
    want = np.asarray(want)
    if not isinstance(got, np.ndarray):
        return f"{what} should be a tensor of shape {tuple(want.shape)}, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"{what} should have shape {tuple(want.shape)}, got {tuple(got.shape)}"
    if not np.all(np.isfinite(got)) and np.all(np.isfinite(want)):
        return f"{what} holds inf or NaN"
    if not np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol):
        worst = float(np.max(np.abs(got.astype(np.float64) - want)))
        return f"{what} differs from the single-process result (largest difference {worst:.3g})"
    return None


def expect_close(got, want, what: str, **tolerance) -> None:
    problem = close(got, want, what, **tolerance)
    assert problem is None, problem
