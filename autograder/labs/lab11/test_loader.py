# IPT-CANARY lab11 test_loader.py: hidden grading text, never shown to learners
"""Part `loader`: Loader on datasets, samplers, batch sizes, seeds and worker counts drawn from the grading seed.

Trust: values and the host's /proc only. The batches are compared with P0's own model of the lab's rules
(oracle_loader.expected, itself checked against DataLoader where the rules coincide). Every test holds a dataset
that draws torch.rand per sample: DataLoader seeds its workers with base_seed + worker_id, the lab per batch, so
a loader that hands the work to DataLoader loses every test. Whether the work ran in worker processes, and
whether they stopped, P0 reads from the host's /proc between calls (student.processes()): the dataset names the
process that ran dataset[i] (only a process can set its own name), and P0 looks for those names.
"""
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab11 import oracle_loader as oracle

LIMIT = 20  # seconds per call: an honest epoch takes a fraction of a second; a loader that hangs costs this


def epochs(student, case, what):
    got = student.run_within(LIMIT, "lab11.scenarios:loader_epochs", case)
    err = replies.error_reply(got, what)
    assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
    want = oracle.expected(case)
    for e, (g, w) in enumerate(replies.pairs(got, want, f"{what}: the epochs")):
        oracle.check_epoch(g, w, f"{what}, epoch {e}" if len(want) > 1 else what)


@pytest.mark.weight(3)
def test_batches_in_sampler_order(student):
    """Datasets without randomness (what DataLoader gives with the same sampler) and with it (the lab's seeds),
    drawn samplers (shuffled, with replacement, lists with repeats), batch sizes and drop_last; two epochs of a
    shuffled sampler take two permutations."""
    rng = case_rng(41)
    for sampler in ("random", "list", "replacement"):
        case = oracle.draw_case(rng, random=False, sampler=sampler)
        epochs(student, case, f"for {oracle.describe_case(case)}")
    case = oracle.draw_case(rng, random=True, sampler="random", epochs=2, workers=2)
    epochs(student, case, f"for two epochs of {oracle.describe_case(case)}")


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


@pytest.mark.weight(3)
def test_worker_errors(student):
    """A sample that raises: the batches before it, then WorkerError(index, worker id, message), then
    StopIteration; a worker that exits: WorkerError(None, its id), without a hang. Paired with a clean epoch."""
    rng = case_rng(43)
    clean = oracle.draw_case(rng, random=True, sampler="random")
    epochs(student, clean, f"for {oracle.describe_case(clean)}")
    for _ in range(2):
        case = oracle.draw_case(rng, random=True, sampler="random", drop_last=False)
        order = [int(i) for i in oracle._sampler(case["sampler"], case["n"])]
        first_batch = int(rng.integers(1, max(2, len(order) // case["batch_size"])))  # never batch 0
        bad = order[min(len(order) - 1, first_batch * case["batch_size"] + int(rng.integers(case["batch_size"])))]
        case["fail"] = [bad]
        epochs(student, case, f"for {oracle.describe_case(case)}, where one sample raises ValueError")
    n, size = int(rng.integers(10, 15)), int(rng.integers(2, 4))
    order = [int(i) for i in rng.permutation(n)]
    dying = order[size + int(rng.integers(size))]  # in batch 1: worker 1's first batch, nothing of it sent yet
    case = oracle.draw_case(rng, random=True, n=n, batch_size=size, sampler="list", workers=2, die=[dying])
    case["sampler"] = {"kind": "list", "indices": order}
    epochs(student, case, f"for {oracle.describe_case(case)}, where a worker process exits while loading batch 1")


def _start(student, case, count, what):
    got = student.run_within(LIMIT, "lab11.scenarios:loader_start", case, count)
    err = replies.error_reply(got, what)
    assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
    want = oracle.expected(case)[0]
    for b, (g, w) in enumerate(replies.pairs(got, want["batches"][:count], f"{what}: the first {count} batches")):
        oracle.check_batch(g, w, f"{what}, batch {b}")
    return want


@pytest.mark.weight(3)
def test_worker_processes(student):
    """Seen from outside the sandbox: while an epoch runs, num_workers processes that ran dataset[i] as workers
    0, 1, ... (none of them the main process); after the epoch's end, none of them runs."""
    rng = case_rng(44)
    for workers in (2, 3):
        case = oracle.draw_case(rng, random=True, workers=workers, n=int(rng.integers(14, 20)), batch_size=2,
                                sampler="random", drop_last=False)
        what = f"for {oracle.describe_case(case)}"
        want = _start(student, case, workers, f"{what}, the first {workers} batches")
        oracle.check_running(student.processes(), case, f"{what}, after {workers} batches")
        rest = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "rest")
        oracle.check_epoch(rest, {**want, "batches": want["batches"][workers:]}, f"{what}, the rest of the epoch")
        oracle.check_stopped(student.processes(), case, f"{what}, once next() raised StopIteration")


@pytest.mark.weight(2)
def test_shutdown_on_error_and_close(student):
    """Seen from outside the sandbox: after a WorkerError and after close() in the middle of an epoch, no worker
    process runs; the values before are the lab's."""
    rng = case_rng(45)
    case = oracle.draw_case(rng, random=True, n=int(rng.integers(14, 20)), batch_size=2, sampler="random", drop_last=False)
    order = [int(i) for i in oracle._sampler(case["sampler"], case["n"])]
    bad = order[2 * int(rng.integers(3, len(order) // 2)) + int(rng.integers(2))]  # in batch 3 or later
    case["fail"] = [bad]
    what = f"for {oracle.describe_case(case)}, where one sample raises ValueError"
    want = _start(student, case, 2, f"{what}, the first 2 batches")
    oracle.check_running(student.processes(), case, f"{what}, after 2 batches")
    rest = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "rest")
    oracle.check_epoch(rest, {**want, "batches": want["batches"][2:], "where": want["where"]}, f"{what}, the rest of the epoch")
    oracle.check_stopped(student.processes(), case, f"{what}, once next() raised WorkerError")

    case = oracle.draw_case(rng, random=True, n=int(rng.integers(14, 20)), batch_size=2, sampler="random", drop_last=False)
    what = f"for {oracle.describe_case(case)}"
    _start(student, case, 3, f"{what}, the first 3 batches")
    oracle.check_running(student.processes(), case, f"{what}, after 3 batches")
    got = student.run_within(LIMIT, "lab11.scenarios:loader_resume", "close")
    err = replies.error_reply(got, f"{what}: close()")
    assert err is None, f"{what}: close() in the middle of the epoch raised {err and err['error']}: {err and err['message'][:200]}"
    oracle.check_stopped(student.processes(), case, f"{what}, once close() returned in the middle of the epoch")
