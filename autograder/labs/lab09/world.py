# IPT-CANARY lab09 world.py: hidden grading text, never shown to learners
"""P0's side of a graded world: the referee rank beside P1, the cases, and the verdicts.

    def test_something(student, referee):     # `referee`: this module's fixture, imported by the test module
        outcome = play(student, referee, world=4, seat=2, cases=[Case("all_reduce", xs, op="sum"), ...], seed=...)
        outcome.check()          # AssertionError with a learner-readable message, or nothing

A world has W ranks: W - 1 run the learner's code in P1 (scenarios.world, forked from the worker), and
the seat `seat` is the engine's referee rank (autograder/engine/referee.py) running lab09's role
(referee.py), which replays P0's model of that rank. P0 believes only values: what each learner rank
returned (validated in type, dtype and shape) against the model, and what the referee received against
the model's messages. seat=None: all W ranks are the learner's (worlds of one rank, and the fuzzer's
comparisons with torch.distributed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autograder.engine import stubs
from autograder.engine.referee import Job, Referee, busy_timeout, referee_fixture
from autograder.labs.lab09 import model

# errors of a world that stopped: a rank waited for a message that never came, or a peer went away
STALLED = ("RuntimeError", "DistError", "DistNetworkError", "DistBackendError", "DistStoreError", "TimeoutError", "Timeout")
STALLED_HINT = (": the world stopped. A rank waited for a message that never came: it made a call the lab's protocol does "
                "not make (torch.distributed's own collectives, for one: the graders' referee rank never joins them), "
                "sent or expected a message another rank does not, or a peer failed")
TIMEOUT = 4.0   # seconds: every gloo operation of a graded world, on both sides (honest ones take milliseconds), on an
#               idle machine; a busy one scales it (engine.referee.busy_timeout)
ROLE = "autograder.labs.lab09.referee:replay"    # the referee's role (the engine's referee rank runs it)

# the referee rank of a test module: a fixture, imported by the test modules (the rendezvous through its
# store waits the engine's STORE_TIMEOUT, 30 s; scenarios.py waits as long)
referee = referee_fixture([ROLE.partition(":")[0]], "lab09-referee", "lab09.scenarios:ready")


@dataclass
class Case:
    """One collective call on every rank. kind: broadcast, reduce, reduce_scatter, all_gather, all_reduce,
    all_to_all. inputs[r]: rank r's tensor (all_to_all: its list of chunks; all_gather: its chunk).
    layout "t": the tensor handed over is a transposed (non-contiguous) view of inputs[r].T."""
    kind: str
    inputs: list
    op: str | None = None
    root: object = None
    layout: str = "c"
    expect_error: bool = False     # every rank must raise ValueError, nothing may be sent
    label: str = ""
    sizes: list | None = None      # all_gather: the sizes list given (default: the chunks' true sizes)

    def model(self) -> model.World:
        if self.expect_error:  # every rank raises before anything is sent
            return model.World([{} for _ in self.inputs], [[] for _ in self.inputs])
        args = {}
        if self.op is not None:
            args["op"] = self.op
        if self.kind == "broadcast":
            args["src"] = self.root
        if self.kind == "reduce":
            args["dst"] = self.root
        return model.simulate(self.kind, self.inputs, **args)

    def for_p1(self, rank: int) -> dict:
        case = {"kind": self.kind, "op": self.op, "root": self.root, "layout": self.layout, "expect_error": self.expect_error}
        if self.kind == "all_gather":
            case["sizes"] = self.sizes if self.sizes is not None else [int(c.size) for c in self.inputs]
        case["input"] = self.inputs[rank]
        return case

    def describe(self) -> str:
        world = len(self.inputs)
        if self.kind == "all_to_all":
            shapes = [[tuple(c.shape) for c in row] for row in self.inputs]
            return f"all_to_all on {world} ranks, chunk shapes {shapes}, {self.inputs[0][0].dtype}"
        if self.kind == "all_gather":
            sizes = self.sizes if self.sizes is not None else [int(c.size) for c in self.inputs]
            return f"ring_all_gather on {world} ranks, sizes {sizes}, {self.inputs[0].dtype}"
        x = self.inputs[0]
        what = {"broadcast": f"tree_broadcast(src={self.root!r})", "reduce": f"tree_reduce(dst={self.root!r}, op={self.op})",
                "reduce_scatter": f"ring_reduce_scatter(op={self.op})", "all_reduce": f"ring_all_reduce(op={self.op})"}[self.kind]
        layout = ", a non-contiguous (transposed) tensor" if self.layout == "t" else ""
        return f"{what} on {world} ranks, shape {tuple(x.shape)}, {x.dtype}{layout}" + (f" ({self.label})" if self.label else "")


def start(referee: Referee, world: int, seat: int, scripts: list, timeout: float, sentinel_seed: int, group=None) -> Job:
    """Start the referee of one world: at `seat`, it replays scripts[k] (the seat's events of case k, from
    the model) case by case."""
    cases, arrays = [], {}
    for k, events in enumerate(scripts):
        steps = []
        for i, (kind, peer, array) in enumerate(events):
            key = f"c{k}e{i}"
            if kind == "send":
                arrays[key] = array
            steps.append([kind, peer, key, array.dtype.str, int(array.size)])
        cases.append(steps)
    job = {"role": ROLE, "world": world, "seat": seat, "cases": cases, "timeout": timeout, "sentinel_seed": sentinel_seed,
           "group": group}
    return referee.start(job, arrays, len(scripts))


@dataclass
class Outcome:
    cases: list
    ranks: list           # per learner rank: list of per-case replies (or an error dict)
    referee: list         # per case: received arrays (or None)
    seat: int | None
    problems: list = field(default_factory=list)

    def check(self) -> None:
        if self.problems:
            raise AssertionError("\n".join(self.problems[:3]) + (f"\n(and {len(self.problems) - 3} more)" if len(self.problems) > 3 else ""))


FUNCTIONS = {"broadcast": "tree_broadcast", "reduce": "tree_reduce", "all_reduce": "ring_all_reduce",
             "reduce_scatter": "ring_reduce_scatter", "all_gather": "ring_all_gather", "all_to_all": "all_to_all"}


def stub_error(student, case: Case) -> dict | None:
    """The bare NotImplementedError() that the learner's function for `case` raised outside a world (engine.stubs),
    or None: the world is then not played, and its verdict is the one it gives when every learner rank raises that
    error in its first case."""
    return stubs.stub_error(student, "lab09.scenarios:untouched", FUNCTIONS.get(case.kind, ""))


def play(student, referee: Referee | None, world: int, seat: int | None, cases: list[Case], seed: int,
         timeout: float | None = None, group: list[int] | None = None) -> Outcome:
    """Run `cases` one after another on a world of `world` ranks, P0's referee at `seat` (None: no referee).
    group: the sorted global ranks of a subgroup every call runs on (case inputs are then per group rank);
    every rank creates it, members or not. A world whose first case calls an untouched stub is not started
    (stub_error): its ranks would all raise NotImplementedError there."""
    timeout = busy_timeout(TIMEOUT) if timeout is None else timeout
    members = list(range(world)) if group is None else sorted(group)
    models = [c.model() for c in cases]
    learner = [r for r in range(world) if r != seat]
    stub = stub_error(student, cases[0]) if cases else None
    if stub is not None:
        reply = {str(r): [{"error": "NotImplementedError", "message": str(stub.get("message", ""))[:200]}] for r in learner}
        outcome = Outcome(cases, reply, [None for _ in cases], seat)
        outcome.problems = verdicts(cases, models, reply, outcome.referee, [(r, members.index(r)) for r in learner if r in members],
                                    members.index(seat) if seat in members else None, group)
        return outcome
    job = None
    if seat is not None:
        script = [m.events[members.index(seat)] if seat in members else [] for m in models]
        job = start(referee, world, seat, script, timeout, seed, group)
    try:
        reply = student.run("lab09.scenarios:world", job.port if job else None, world, seat,
                            {str(r): [c.for_p1(members.index(r)) for c in cases] if r in members else [] for r in learner},
                            timeout, group)
        finished = isinstance(reply, dict) and all(isinstance(reply.get(str(r)), list) and len(reply[str(r)]) == len(cases)
                                                   and all(isinstance(x, dict) and "error" not in x for x in reply[str(r)])
                                                   for r in learner if r in members)
        recorded = job.finish(3.0 if finished else 0.0) if job else [{} for _ in cases]
        received = [None if r is None else [r[f"m{i}"] for i in range(len(r))] for r in recorded]   # in message order
    finally:
        if job:
            job.close()
    outcome = Outcome(cases, reply, received, seat)
    outcome.problems = verdicts(cases, models, reply, received, [(r, members.index(r)) for r in learner if r in members],
                                members.index(seat) if seat in members else None, group)
    return outcome


def _shape(a) -> str:
    return f"{a.dtype} of shape {tuple(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__


def verdicts(cases, models, reply, received, learner, seat, group=None) -> list[str]:
    """Every way the replies and the referee's record differ from the model, as learner-readable lines.
    learner: (global rank, group rank) of each learner rank in the group; seat: the referee's group rank."""
    problems = []
    if not isinstance(reply, dict):
        return ["the world did not answer (its ranks returned nothing readable)"]
    where = f" (group {sorted(group)} of the world)" if group else ""
    for k, (case, m) in enumerate(zip(cases, models, strict=True)):
        what = case.describe() + where
        for r, g in learner:
            replies = reply.get(str(r))
            if not isinstance(replies, list) or len(replies) <= k:
                err = replies if isinstance(replies, dict) else {}
                problems.append(f"{what}: rank {g} did not finish" + (
                    f" ({err.get('error')}){STALLED_HINT}" if err.get("error") in STALLED else
                    f" ({err.get('error')}: {err.get('message', '')})" if err.get("error") else ""))
                break
            got = replies[k]
            if not isinstance(got, dict):
                problems.append(f"{what}: rank {g} answered {type(got).__name__}")
                continue
            if case.expect_error:
                if got.get("error") != "ValueError":
                    problems.append(f"{what}: rank {g} should raise ValueError before sending anything, "
                                    + (f"raised {got.get('error')}" if got.get("error") else "returned normally"))
                continue
            if "error" in got:
                stalled = got["error"] in STALLED
                said = "did not finish (Timeout)" if got["error"] == "Timeout" else f"raised {got['error']}"
                problems.append(f"{what}: rank {g} {said}" + (STALLED_HINT if stalled else f": {got.get('message', '')}"))
                continue
            problems += _compare(what, g, case, got, m.values[g])
        if seat is not None and not case.expect_error:
            problems += _compare_messages(what, seat, case, received[k], m.events[seat])
        if problems:
            break  # later cases of a world follow from the first one that went wrong
    return problems


def _compare(what, r, case, got, want) -> list[str]:
    out = []
    for name, value in want.items():
        have = got.get(name)
        if name == "results":
            if not isinstance(have, list) or len(have) != len(value):
                return [f"{what}: rank {r} should return a list of {len(value)} tensors, got {_describe(have)}"]
            for i, (h, v) in enumerate(zip(have, value, strict=True)):
                if not isinstance(h, np.ndarray) or h.dtype != v.dtype or h.shape != v.shape:
                    return [f"{what}: rank {r}'s entry {i} should be a {_shape(v)}, got {_shape(h)}"]
                if not model.same(h, v, case.op):
                    return [f"{what}: rank {r}'s entry {i} is {_short(h)}: not the chunk rank {i} sent it"]
            continue
        label = {"tensor": "tensor after the call" if case.kind in ("reduce_scatter",) else "tensor",
                 "result": "returned tensor"}[name]
        if not isinstance(have, np.ndarray) or have.dtype != value.dtype or have.shape != value.shape:
            out.append(f"{what}: rank {r}'s {label} should be a {_shape(value)}, got {_shape(have)}")
        elif not model.same(have, value, case.op):
            out.append(f"{what}: rank {r}'s {label} differs from the lab's order at {_first_difference(have, value, case.op)}")
        if name == "tensor" and case.kind in ("broadcast", "reduce", "all_reduce") and not out:
            ret = got.get("ret")
            if not isinstance(ret, np.ndarray) or ret.shape != value.shape or not model.same(ret, value, case.op):
                out.append(f"{what}: rank {r} should return its tensor (holding the result, like torch.distributed's "
                           f"in-place collectives), returned {_shape(ret)}")
    return out


def _compare_messages(what, seat, case, got, events) -> list[str]:
    if got is None:
        return [f"{what}: the referee at group rank {seat} (the graders' own rank, which speaks only this lab's protocol) "
                f"did not get the messages it expects: a rank waited in a call the protocol does not make, or sent "
                f"a message of the wrong size, or the world stopped"]
    want = [(peer, a) for kind, peer, a in events if kind == "recv"]
    for i, ((peer, a), b) in enumerate(zip(want, got, strict=True)):
        if not model.same(b, a, case.op):
            return [f"{what}: message {i + 1} that rank {seat} received from rank {peer} is not what the lab's "
                    f"schedule sends ({a.size} elements, {a.dtype}): {_first_difference(b, a, case.op)}"]
    return []


def _first_difference(got: np.ndarray, want: np.ndarray, op: str | None) -> str:
    g, w = got.reshape(-1), want.reshape(-1)
    for i in range(w.size):
        if not model.same(g[i:i + 1], w[i:i + 1], op):
            return f"flat index {i} (got {g[i]!r})"
    return "no element differs"


def _short(a: np.ndarray) -> str:
    flat = a.reshape(-1)
    return f"{_shape(a)} {flat[:6].tolist()}" + (" ..." if flat.size > 6 else "")


def _describe(x) -> str:
    return f"a list of {len(x)}" if isinstance(x, list) else type(x).__name__
