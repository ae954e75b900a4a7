# IPT-CANARY lab11 test_loader.py: hidden grading text, never shown to learners
"""Part `loader`: Loader on datasets, samplers, batch sizes, seeds and worker counts drawn from the grading seed.

Trust: values, the kernel's word and the host's /proc only. The batches are compared with P0's own model of the
lab's rules (oracle_loader.expected, itself checked against DataLoader where the rules coincide). Which process
ran each dataset[i], the kernel tells P0: the dataset asks P0's witness (engine.witness) for a value, P0 takes
the caller's host pid from the socket (SO_PEERCRED) and answers with a keyed hash of (pid, i) that lands in the
delivered row. So every delivered sample names its maker, and P0 checks that the main process made none, one
process made each batch, and batch b was made by worker b % num_workers's own process (oracle_loader.check_makers).
Whether workers were up while the epoch ran and stopped after it, P0 reads from the host's /proc between calls
(student.processes()): the makers' pids, and the names the dataset gives the processes that ran dataset[i]
(prctl(PR_SET_NAME)). Every test holds three cases where a shortcut differs from the lab's rules:
- a dataset that draws torch.rand per sample: DataLoader seeds its workers with base_seed + worker_id, the lab
  per batch, so a loader that hands the work to DataLoader loses every test;
- an epoch observed from outside while it runs and after it ends: loading in the main process or in its threads
  (even behind idle children that carry the dataset's names: attempt loader_threads_behind_named_children), or
  workers left running, lose every test;
- a worker that exits on its first batch while an earlier batch is slow to make: the lab delivers the earlier
  batch first; DataLoader raises at once from its SIGCHLD handler, so a DataLoader dressed in the lab's seeds
  and errors (a batch sampler, a worker_init_fn) loses every test too.
"""
import contextlib

import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab11 import oracle_loader as oracle

LIMIT = 20  # seconds per call: an honest epoch takes a fraction of a second; a loader that hangs costs this


@contextlib.contextmanager
def witnessed(student, case):
    """The case with a witness for its dataset (engine.witness, oracle.Makers): each delivered row then names,
    by the kernel's account, the process that ran its dataset[i]."""
    makers = oracle.Makers()
    with student.witness(makers.answer) as seen:
        yield {**case, "witness": seen.inside}, makers


def _processes(student, makers):
    processes = student.processes()
    makers.main |= {p["pid"] for p in processes if p["worker"]}
    return processes


def epochs(student, case, what):
    with witnessed(student, case) as (case, makers):
        got = student.run_within(LIMIT, "lab11.scenarios:loader_epochs", case)
        processes = _processes(student, makers)
        err = replies.error_reply(got, what)
        assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
        want = oracle.expected(case)
        made = set()
        for e, (g, w) in enumerate(replies.pairs(got, want, f"{what}: the epochs")):
            where = f"{what}, epoch {e}" if len(want) > 1 else what
            made |= oracle.check_makers(oracle.check_epoch(g, w, where, makers=makers), case, makers, where)
        oracle.check_main_clean(processes, case, what)
        oracle.check_stopped(processes, case, f"{what}, once the epoch was over", made)


def _start(student, case, makers, count, what):
    got = student.run_within(LIMIT, "lab11.scenarios:loader_start", case, count)
    _processes(student, makers)
    err = replies.error_reply(got, what)
    assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
    want = oracle.expected(case)[0]
    pairs = replies.pairs(got, want["batches"][:count], f"{what}: the first {count} batches")
    return want, [oracle.check_batch(g, w, f"{what}, batch {b}", makers) for b, (g, w) in enumerate(pairs)]


def staged(student, case, what, count=None, how="rest"):
    """Take `count` batches, look at the processes from outside, then finish the epoch (or close it) and look
    again: num_workers live workers while it runs, none once it is over."""
    count = case["num_workers"] if count is None else count
    with witnessed(student, case) as (case, makers):
        want, first = _start(student, case, makers, count, f"{what}, the first {count} batches")
        made = oracle.check_makers(first, case, makers, f"{what}, the first {count} batches")
        running = student.processes()
        oracle.check_started(running, case, f"{what}, after {count} batches")
        if count >= case["num_workers"]:  # each worker has delivered a batch, so has run dataset[i] by now
            oracle.check_running(running, case, f"{what}, after {count} batches")
        if how == "close":
            got = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "close")
            err = replies.error_reply(got, f"{what}: close()")
            assert err is None, f"{what}: close() in the middle of the epoch raised {err and err['error']}: {err and err['message'][:200]}"
            oracle.check_stopped(student.processes(), case, f"{what}, once close() returned in the middle of the epoch", made)
            return
        rest = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "rest")
        rows = oracle.check_epoch(rest, {**want, "batches": want["batches"][count:]}, f"{what}, the rest of the epoch",
                                  makers=makers)
        made = oracle.check_makers(first + rows, case, makers, what)
        ended = "raised WorkerError" if want["error"] else "raised StopIteration"
        processes = _processes(student, makers)
        oracle.check_main_clean(processes, case, what)
        oracle.check_stopped(processes, case, f"{what}, once next() {ended}", made)


def short_last(rng, **kwargs):
    """A drawn case whose sampler's length is not a multiple of batch_size (a short last batch, which drop_last
    drops): drawn every time, not by chance."""
    while True:
        case = oracle.draw_case(rng, **kwargs)
        if len(list(oracle._sampler(case["sampler"], case["n"]))) % case["batch_size"]:
            return case


def full_last(rng, **kwargs):
    """A drawn case whose sampler's length is a multiple of batch_size: drop_last keeps the last batch, which is
    full (drawn every time, not by chance)."""
    while True:
        case = oracle.draw_case(rng, **kwargs)
        if len(list(oracle._sampler(case["sampler"], case["n"]))) % case["batch_size"] == 0:
            return case


def long_case(rng, workers=2, **kwargs):
    """An epoch of at least 2 * workers + 2 batches (batches of 2), so that workers have work left when P0 looks."""
    return oracle.draw_case(rng, random=True, workers=workers, n=int(rng.integers(4 * workers + 6, 4 * workers + 10)),
                            batch_size=2, sampler="random", drop_last=False, **kwargs)


def dying(student, rng, what="a worker process exits", batch=1):
    """Worker 1 exits on the first sample of batch `batch` (1 or 3: its first or second batch; 1 s after it starts
    the sample) while worker 0 sleeps 2 s over batch 0: the batches before it first, then WorkerError(None, 1), and
    no worker left. DataLoader's SIGCHLD handler raises before batch 0 is made."""
    n, size = int(rng.integers(12, 15)), int(rng.integers(2, 4))
    order = [int(i) for i in rng.permutation(n)]
    case = oracle.draw_case(rng, random=True, n=n, batch_size=size, sampler="list", workers=2, die=[order[batch * size]],
                            slow=[order[0]])
    case["sampler"] = {"kind": "list", "indices": order}
    epochs(student, case, f"for {oracle.describe_case(case)}, where {what} while loading batch {batch} and batch 0 is slow to make")


def failed_then_look(student, rng, what):
    """The batches before a failing one, then one next() that raises WorkerError and no call after it: the workers
    are already stopped and joined when the error reaches the caller."""
    case = failing(rng, long_case(rng))
    want = oracle.expected(case)[0]
    with witnessed(student, case) as (case, makers):
        _, first = _start(student, case, makers, want["where"], f"{what}, the {want['where']} batches before the error")
        made = oracle.check_makers(first, case, makers, what)
        got = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "one")
        assert isinstance(got, dict) and got.get("error") == "WorkerError", (
            f"{what}: next() on batch {want['where']}, which has a sample that raises, should raise WorkerError, got "
            f"{'a batch' if isinstance(got, dict) and 'batch' in got else oracle._name(got)}")
        oracle.check_stopped(_processes(student, makers), case, f"{what}, as soon as next() raised WorkerError", made)


def failing(rng, case, two=False):
    """Make one sample of batch 3 or later raise ValueError (two=True: two samples of that batch, the second
    one later in it: WorkerError names the first)."""
    order = [int(i) for i in oracle._sampler(case["sampler"], case["n"])]
    size = case["batch_size"]
    batch = min(int(rng.integers(3, max(4, len(order) // size))), (len(order) - 1) // size)
    batch = batch if not two or len(order[batch * size:batch * size + size]) >= 2 else batch - 1
    members = order[batch * size:batch * size + size]
    first = int(rng.integers(len(members) - 1)) if two else int(rng.integers(len(members)))
    case["fail"] = [members[first]] + ([members[int(rng.integers(first + 1, len(members)))]] if two else [])
    return case


@pytest.mark.weight(3)
def test_batches_in_sampler_order(student):
    """Datasets without randomness (what DataLoader gives with the same sampler) and with it (the lab's seeds),
    drawn samplers (shuffled, with replacement, lists with repeats), batch sizes and drop_last; two epochs of a
    shuffled sampler take two permutations."""
    rng = case_rng(41)
    for sampler, drop in (("random", True), ("list", False), ("replacement", True)):
        case = short_last(rng, random=False, sampler=sampler, drop_last=drop)
        epochs(student, case, f"for {oracle.describe_case(case)} (a short last batch)")
    case = full_last(rng, random=False, sampler="list", drop_last=True)
    epochs(student, case, f"for {oracle.describe_case(case)} (a full last batch, which drop_last keeps)")
    case = oracle.draw_case(rng, random=True, sampler="random", epochs=2, workers=2)
    epochs(student, case, f"for two epochs of {oracle.describe_case(case)}")
    case = long_case(rng)
    staged(student, case, f"for {oracle.describe_case(case)}")
    dying(student, rng)
    none = oracle.draw_case(rng, random=True, workers=0)
    got = student.run_within(LIMIT, "lab11.scenarios:loader_epochs", none)
    err = replies.error_reply(got, "Loader(..., num_workers=0)")
    assert err is not None and err["error"] == "ValueError", \
        f"Loader(..., num_workers=0) should raise ValueError, got {err['error'] if err else 'batches'}"


@pytest.mark.weight(3)
def test_seeds_per_batch(student):
    """torch.manual_seed(seed + 10_000 * epoch + b) before batch b, in whichever worker makes it: the same
    random draws for 1, 2 and 3 workers, other draws in the next epoch, and get_worker_info() says so."""
    rng = case_rng(42)
    base = oracle.draw_case(rng, random=True, epochs=2, sampler="random", drop_last=False)
    for workers in (1, 2, 3):
        case = {**base, "num_workers": workers, "token": base["token"][:-1] + str(workers)}
        epochs(student, case, f"for two epochs of {oracle.describe_case(case)}")
    odd = oracle.draw_case(rng, random=True, sampler="list", batch_size=1, workers=2)
    epochs(student, odd, f"for {oracle.describe_case(odd)}")
    case = long_case(rng, workers=3)
    staged(student, case, f"for {oracle.describe_case(case)}")
    dying(student, rng)


@pytest.mark.weight(3)
def test_worker_errors(student):
    """A sample that raises: the batches before it, then WorkerError(index, worker id, message), then
    StopIteration, and no worker left; a worker that exits: WorkerError(None, its id), without a hang. Paired
    with a clean epoch."""
    rng = case_rng(43)
    clean = oracle.draw_case(rng, random=True, sampler="random")
    epochs(student, clean, f"for {oracle.describe_case(clean)}")
    for workers, two in ((2, False), (3, True)):
        case = failing(rng, oracle.draw_case(rng, random=True, sampler="random", drop_last=False, workers=workers,
                                             n=int(rng.integers(12, 18))), two=two)
        which = "two samples of one batch raise ValueError" if two else "one sample raises ValueError"
        epochs(student, case, f"for {oracle.describe_case(case)}, where {which}")
    case = failing(rng, long_case(rng))
    staged(student, case, f"for {oracle.describe_case(case)}, where one sample raises ValueError", count=2)
    failed_then_look(student, rng, f"for {oracle.describe_case(case)}, where one sample raises ValueError")
    dying(student, rng, batch=3)


@pytest.mark.weight(3)
def test_worker_processes(student):
    """Seen from outside the sandbox: while an epoch runs, num_workers processes that ran dataset[i] as workers
    0, 1, ... (none of them the main process), all started even for fewer batches than workers; after the epoch's
    end and after close() in its middle, none of them runs, even one busy with a sample that takes 30 s."""
    rng = case_rng(44)
    for workers in (2, 3):
        case = long_case(rng, workers=workers)
        staged(student, case, f"for {oracle.describe_case(case)}")
    case = long_case(rng)
    staged(student, case, f"for {oracle.describe_case(case)}", count=3, how="close")
    few = oracle.draw_case(rng, random=True, workers=3, n=int(rng.integers(4, 7)), batch_size=2, sampler="list", drop_last=True)
    few["sampler"] = {"kind": "list", "indices": [int(i) for i in rng.integers(0, few["n"], size=4)]}
    staged(student, few, f"for {oracle.describe_case(few)} (2 batches for 3 workers)", count=1, how="close")
    stuck = long_case(rng)
    order = [int(i) for i in oracle._sampler(stuck["sampler"], stuck["n"])]
    stuck["stuck"] = [order[2 * stuck["batch_size"]]]  # worker 0's second batch (batch 2), under way after batches 0, 1
    staged(student, stuck, f"for {oracle.describe_case(stuck)}, where a sample of batch 2 takes 30 s (close() should "
                           "kill its worker after a few seconds)", count=2, how="close")
    dying(student, rng)
