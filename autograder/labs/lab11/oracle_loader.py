# IPT-CANARY lab11 oracle_loader.py: hidden grading text, never shown to learners
"""P0's oracle of part `loader`: its own model of the lab's rules (batches cut from the sampler, batch b made
by worker b % W after torch.manual_seed(seed + 10_000 * epoch + b), the first failing batch ends the epoch
with WorkerError), checked against torch.utils.data.DataLoader where the rules coincide (a dataset without
randomness, without failures), and the checks of the processes P0 reads from the host's /proc.

Sample i of the scenarios' dataset is (float64 [i, worker id, batch seed, r0, r1, w], i * 7 + 3); r is
torch.rand(2, float64) for a random dataset, [i / 2, -i] otherwise; w is the witness's answer (Makers): a
keyed hash of (the calling process's host pid, i) that only P0 can make, so each delivered row names the
process that ran its dataset[i], as the kernel reported it.
"""
from __future__ import annotations

import hmac
import secrets

import numpy as np
import torch

from autograder.engine import replies

EPOCH_STRIDE = 10_000


def draw_case(rng, *, random=True, workers=2, n=None, batch_size=None, epochs=1, drop_last=None, sampler=None,
              fail=(), die=(), slow=(), stuck=()):
    n = int(rng.integers(9, 17)) if n is None else n
    if sampler is None:
        sampler = ["random", "list", "replacement"][int(rng.integers(3))]
    if sampler == "random":
        spec = {"kind": "random", "seed": int(rng.integers(2**31)), "replacement": False, "num_samples": None}
    elif sampler == "replacement":
        spec = {"kind": "random", "seed": int(rng.integers(2**31)), "replacement": True,
                "num_samples": int(rng.integers(n - 3, n + 4))}
    else:  # a list of drawn indices, some repeated, not all of the dataset
        spec = {"kind": "list", "indices": [int(i) for i in rng.integers(0, n, size=int(rng.integers(n - 3, n + 3)))]}
    return {"n": n, "token": "ipt" + "".join("abcdefghjkmnpqrstuvwxyz"[int(k)] for k in rng.integers(0, 23, 7)),
            "random": random, "fail": [int(i) for i in fail], "die": [int(i) for i in die], "slow": [int(i) for i in slow],
            "stuck": [int(i) for i in stuck], "sampler": spec,
            "batch_size": int(rng.integers(2, 5)) if batch_size is None else batch_size, "num_workers": workers,
            "seed": int(rng.integers(2**30)), "drop_last": bool(rng.random() < 0.5) if drop_last is None else drop_last,
            "epochs": epochs}


def _sampler(spec, n):
    if spec["kind"] == "list":
        return list(spec["indices"])
    generator = torch.Generator().manual_seed(int(spec["seed"]))
    return torch.utils.data.RandomSampler(range(n), replacement=bool(spec.get("replacement")),
                                          num_samples=spec.get("num_samples"), generator=generator)


def _sample(i, worker, seed, generator, random):
    noise = (torch.rand(2, dtype=torch.float64, generator=generator) if random
             else torch.tensor([0.5 * i, -i], dtype=torch.float64))
    return np.concatenate([[float(i), float(worker), float(seed)], noise.numpy()])


def expected(case) -> list[dict]:
    """Per epoch: {"batches": [(x, ids)], "error": None or (index, worker id), "where": batch number of the error}."""
    sampler, size, workers = _sampler(case["sampler"], case["n"]), case["batch_size"], case["num_workers"]
    fail, die = set(case["fail"]), set(case["die"])
    epochs = []
    for epoch in range(case["epochs"]):
        indices = [int(i) for i in sampler]
        cut = [indices[k:k + size] for k in range(0, len(indices), size)]
        if case["drop_last"] and cut and len(cut[-1]) < size:
            cut.pop()
        batches, error = [], None
        for b, batch in enumerate(cut):
            seed = case["seed"] + EPOCH_STRIDE * epoch + b
            generator = torch.Generator().manual_seed(seed)
            rows = []
            for i in batch:
                if i in fail or i in die:
                    error = (i if i in fail else None, b % workers)
                    break
                rows.append(_sample(i, b % workers, seed, generator, case["random"]))
            if error is not None:
                break
            batches.append((np.stack(rows), np.array([i * 7 + 3 for i in batch], dtype=np.int64)))
        epochs.append({"batches": batches, "error": error, "where": len(batches)})
    if not case["random"] and not fail and not die:  # where the rules coincide: what DataLoader gives
        _agree_with_dataloader(case, epochs)
    return epochs


class _Plain(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([i, 0, 0, 0.5 * i, -i], dtype=torch.float64), i * 7 + 3


def _agree_with_dataloader(case, epochs):
    loader = torch.utils.data.DataLoader(_Plain(case["n"]), batch_size=case["batch_size"], drop_last=case["drop_last"],
                                         sampler=_sampler(case["sampler"], case["n"]))
    for epoch in epochs:
        got = [(x.numpy(), ids.numpy()) for x, ids in loader]
        assert len(got) == len(epoch["batches"]), "internal: P0's model and DataLoader cut different batches"
        for (x, ids), (wx, wids) in zip(got, epoch["batches"], strict=True):
            assert np.array_equal(ids, wids) and np.array_equal(x[:, [0, 3, 4]], wx[:, [0, 3, 4]]), \
                "internal: P0's model and DataLoader disagree"


def describe_case(case) -> str:
    kind = {"list": "a list of indices", "random": "a RandomSampler"}[case["sampler"]["kind"]]
    if case["sampler"].get("replacement"):
        kind = "a RandomSampler with replacement"
    data = "a dataset that draws torch.rand per sample" if case["random"] else "a dataset without randomness"
    return (f"{data}, {kind} as sampler, batch_size={case['batch_size']}, num_workers={case['num_workers']}, "
            f"drop_last={case['drop_last']}")


class Makers:
    """P0's side of the loader's witness (engine.witness): the scenario's dataset[i] asks it for a value with
    the line "i"; the answer is a keyed hash of (the caller's host pid, i), 48 bits, exact in float64. Only P0
    holds the key, so a value in a delivered row can only come from the process the kernel named when it
    asked for that very sample."""

    def __init__(self):
        self.key, self.given, self.main = secrets.token_bytes(16), {}, set()  # main: the student's own pid(s)

    def answer(self, pid: int, line: bytes) -> bytes:
        try:
            i = int(line)
        except ValueError:
            return b"-1"
        value = int.from_bytes(hmac.digest(self.key, f"{pid}:{i}".encode(), "sha256")[:6], "big")
        self.given[value] = (pid, i)
        return str(value).encode()

    def maker(self, row) -> int | None:
        """The host pid that obtained this row's value for this row's index, or None."""
        value = row[5]
        if not np.isfinite(value) or value < 0 or value != int(value):
            return None
        pid, i = self.given.get(int(value), (None, None))
        return pid if i == row[0] else None


def check_makers(xs, case, makers, what):
    """Who made the delivered batches of one epoch, from the witness (not from anything P1 says): each row by a
    process other than the student's own; each batch by one process; batch b by the same process as every
    batch b' = b (mod num_workers), and different residues by different processes. Returns those pids."""
    workers, by_worker = case["num_workers"], {}
    for b, x in enumerate(xs):
        made = set()
        for row in x:
            pid = makers.maker(row)
            assert pid is not None, (f"{what}, batch {b}: the last field of sample {int(row[0])} is not the value the "
                                     "grader gave the process that ran dataset[i]: a batch must hold the samples "
                                     "exactly as dataset[i] returned them in a worker")
            assert pid not in makers.main, (f"{what}, batch {b}: dataset[{int(row[0])}] ran in the main process (the "
                                            "process that called next()), as the kernel reports it; only workers may call it")
            made.add(pid)
        assert len(made) == 1, (f"{what}, batch {b}: its samples were loaded by {len(made)} different processes, as the "
                                "kernel reports them; one worker makes a whole batch")
        pid = made.pop()
        first = by_worker.setdefault(b % workers, (pid, b))
        assert first[0] == pid, (f"{what}: batches {first[1]} and {b} were made by different processes, as the kernel "
                                 f"reports them; both belong to worker {b % workers} (batch b goes to worker b % num_workers, "
                                 "one process per worker for the whole epoch)")
    pids = [pid for pid, _ in by_worker.values()]
    assert len(set(pids)) == len(pids), (f"{what}: one process made the batches of {len(pids) - len(set(pids)) + 1} "
                                         "different workers, as the kernel reports it; each worker is its own process")
    return set(pids)


def check_batch(got, want, what, makers=None):
    """One batch: (float64 [B, 5] rows, or [B, 6] with the witness's column, int64 [B] second field); returns the
    rows."""
    wx, wids = want
    if isinstance(got, dict):
        raise AssertionError(f"{what}: a batch should be what default_collate makes of the samples (a list of two "
                             f"tensors here), got {got.get('other', 'something else')!r}")
    x, ids = replies.list_of(got, f"{what}: the batch", 2)
    x = replies.array(x, f"{what}: the batch's first field", dtype=np.float64)
    ids = replies.array(ids, f"{what}: the batch's second field", dtype=np.int64)
    columns = wx.shape[1] + (makers is not None)
    if x.shape != (wx.shape[0], columns) or ids.shape != wids.shape:
        raise AssertionError(f"{what}: the batch holds {len(ids)} samples of {x.shape[1:] or 'no'} fields, expected "
                             f"{len(wids)} samples of {columns}")
    rows, x = x, x[:, :wx.shape[1]]
    if not np.array_equal(ids, wids) or not np.array_equal(x[:, 0], wx[:, 0]):
        raise AssertionError(f"{what}: the batch holds other samples (or another order) than the sampler's indices "
                             "cut into batches")
    if not np.array_equal(x[:, 1], wx[:, 1]):
        if np.all(x[:, 1] == -1):
            raise AssertionError(f"{what}: inside dataset[i], get_worker_info() returned None: call "
                                 "set_worker_info(WorkerInfo(...)) in the worker before it loads a batch")
        raise AssertionError(f"{what}: inside dataset[i], get_worker_info().id is not the worker that should make "
                             "this batch (batch b goes to worker b % num_workers)")
    if not np.array_equal(x[:, 2], wx[:, 2]):
        raise AssertionError(f"{what}: inside dataset[i], get_worker_info().seed is not seed + 10_000 * epoch + b "
                             "for batch b of this epoch")
    if not np.array_equal(x[:, 3:], wx[:, 3:]):
        raise AssertionError(f"{what}: the samples' torch.rand draws differ from those after "
                             "torch.manual_seed(seed + 10_000 * epoch + b) in the worker, before the batch's first sample")
    return rows


def check_epoch(got, want, what, stopped="stop", makers=None):
    """One epoch's reply of loader_epochs / loader_resume against `want` (from expected); with the witness
    (`makers`), its rows carry the witness's column. Returns the batches' rows, for check_makers."""
    err = replies.error_reply(got, what) if isinstance(got, dict) and "batches" not in got else None
    assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
    got = replies.dict_of(got, {"batches", "error", "after"}, what)
    batches = replies.list_of(got["batches"], f"{what}: the batches")
    wanted = want["batches"]
    if len(batches) != len(wanted):
        if want["error"] is None:
            error = f" and then raised {got['error'].get('error')}" if isinstance(got["error"], dict) else ""
            raise AssertionError(f"{what}: the epoch gave {len(batches)} batches{error}, expected {len(wanted)}")
        raise AssertionError(f"{what}: {len(batches)} batches came before the error (or the end), expected "
                             f"{len(wanted)}: the batches before the failing one come first, then WorkerError")
    xs = [check_batch(g, w, f"{what}, batch {b}", makers) for b, (g, w) in enumerate(zip(batches, wanted, strict=True))]
    if want["error"] is None:
        assert got["error"] is None, (f"{what}: after its {len(wanted)} batches the epoch should end with "
                                      f"StopIteration, got {_name(got['error'])}")
    else:
        index, worker = want["error"]
        where = (f"a sample of batch {want['where']} that raises ValueError" if index is not None
                 else f"a sample of batch {want['where']} on which its worker process exits (os._exit)")
        error = got["error"]
        assert isinstance(error, dict) and error.get("error") == "WorkerError", \
            f"{what}: {where} should raise WorkerError when its turn comes, got {_name(error)}"
        if index is None:
            assert error.get("index") is None, f"{what}: {where}: WorkerError.index should be None, got {error.get('index')!r}"
        else:
            assert error.get("index") == index, (f"{what}: {where}: WorkerError.index should be the index of the sample "
                                                 f"that raised, got {error.get('index')!r}")
            message = replies.string(error.get("message"), f"{what}: the WorkerError's message")
            assert "ValueError" in message and "is broken" in message, \
                f"{what}: {where}: the WorkerError's message should hold the exception's type name and text"
        assert error.get("worker_id") == worker, (f"{what}: {where}: WorkerError.worker_id should be the id of the "
                                                  f"worker making that batch, got {error.get('worker_id')!r}")
    if stopped is not None:
        after = got["after"]
        assert after == "stop", (f"{what}: next() after the epoch {'failed' if want['error'] else 'ended'} should raise "
                                 f"StopIteration, got {'a batch' if isinstance(after, dict) and 'batch' in after else _name(after)}")
    return xs


def _name(error):
    if isinstance(error, dict):
        return str(error.get("error", "an error"))[:80]
    return "StopIteration" if error == "stop" else "nothing"


def check_running(processes, case, what):
    """While an epoch runs: num_workers live processes that ran dataset[i] as worker 0, 1, ..., none of them the
    student's own process, and the student's process never ran dataset[i]."""
    token, workers = case["token"], case["num_workers"]
    ours = [p for p in processes if p["comm"].startswith(token)]
    assert not any(p["worker"] for p in ours) and not any(p["comm"] == token + "m" for p in ours), \
        f"{what}: dataset[i] ran in the main process (the process that called next()); only workers may call it"
    for w in range(workers):
        named = [p for p in ours if p["comm"] == f"{token}{w}" and p["state"] not in "ZX"]
        assert named, (f"{what}: while the epoch runs, no live process has run dataset[i] as worker {w} "
                       f"(seen from outside the sandbox, {workers} worker processes should be up)")
        assert len(named) == 1, f"{what}: {len(named)} live processes ran dataset[i] as worker {w}, expected one"
    pids = {p["pid"] for p in ours if p["state"] not in "ZX"}
    assert len(pids) == workers, f"{what}: {len(pids)} live processes ran dataset[i], expected {workers} workers"


def check_started(processes, case, what):
    """While an epoch runs: the student's process has num_workers live children (iter(loader) starts every worker,
    even one that gets no batch)."""
    main = {p["pid"] for p in processes if p["worker"]}
    children = [p for p in processes if p["ppid"] in main and p["state"] not in "ZX"]
    assert len(children) >= case["num_workers"], (
        f"{what}: while the epoch runs, the main process has {len(children)} live child process(es), seen from "
        f"outside the sandbox; iter(loader) starts num_workers = {case['num_workers']} workers, even when there are "
        "fewer batches than workers")


def check_main_clean(processes, case, what):
    """After any call: the student's own process never ran dataset[i] (it would carry the dataset's name)."""
    main = [p for p in processes if p["worker"] and p["comm"].startswith(case["token"])]
    assert not main, f"{what}: dataset[i] ran in the main process (the process that called next()); only workers may call it"


def check_stopped(processes, case, what, makers=()):
    """After the epoch ended, failed or was closed: no process that ran dataset[i] is left, running or exited but
    never joined (a zombie: join() reaps it); those are the processes named by the dataset, and the `makers`
    (pids the witness saw make delivered batches)."""
    left = [p for p in processes if (p["comm"].startswith(case["token"]) or p["pid"] in makers) and not p["worker"]]
    running = [p for p in left if p["state"] not in "ZX"]
    assert not running, (f"{what}: {len(running)} worker process(es) still running, seen from outside the sandbox: "
                         "the loader should stop its workers and join() them before it returns")
    assert not left, (f"{what}: {len(left)} worker process(es) exited but were never joined (zombies, seen from outside "
                      "the sandbox): join() each worker before returning")
