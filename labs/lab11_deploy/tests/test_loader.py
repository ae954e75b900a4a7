"""Public tests of part `loader` (run them with check("loader"))."""
import os

import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler


class Records:
    """Sample i: ([i, worker id, batch seed, one torch.rand draw], pid of the process that made it)."""

    def __init__(self, lab, n, fail=()):
        self.lab, self.n, self.fail = lab, n, set(fail)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = self.lab.get_worker_info()
        if i in self.fail:
            raise ValueError(f"sample {i} is broken")
        worker, seed = (-1, -1) if info is None else (info.id, info.seed)
        return torch.tensor([i, worker, seed, torch.rand(()).item()], dtype=torch.float64), os.getpid()


class Plain:
    def __len__(self):
        return 11

    def __getitem__(self, i):
        return {"x": torch.full((2,), float(i)), "label": i % 3}


def expected(order, batch_size, workers, seed, epoch=0):
    """The lab's rule: batch b made by worker b % workers after torch.manual_seed(seed + 10_000 * epoch + b)."""
    batches = []
    for b, k in enumerate(range(0, len(order), batch_size)):
        s = seed + 10_000 * epoch + b
        generator = torch.Generator().manual_seed(s)
        batches.append(torch.tensor([[i, b % workers, s, torch.rand((), generator=generator).item()]
                                     for i in order[k:k + batch_size]], dtype=torch.float64))
    return batches


def alive(pid):
    """Running, or exited but not yet joined (a zombie): join() makes a worker's /proc entry go away."""
    return os.path.exists(f"/proc/{pid}")


def test_same_batches_as_dataloader(lab):
    sampler = RandomSampler(range(11), generator=torch.Generator().manual_seed(3))
    mine = list(lab.Loader(Plain(), 3, sampler, num_workers=2))
    sampler = RandomSampler(range(11), generator=torch.Generator().manual_seed(3))
    theirs = list(DataLoader(Plain(), batch_size=3, sampler=sampler))
    assert len(mine) == len(theirs) == 4, f"11 samples in batches of 3 make 4 batches, got {len(mine)}"
    for b, (got, want) in enumerate(zip(mine, theirs)):
        assert torch.equal(got["x"], want["x"]) and torch.equal(got["label"], want["label"]), \
            f"batch {b} differs from DataLoader's with the same shuffled sampler"
    dropped = list(lab.Loader(Plain(), 3, range(11), num_workers=2, drop_last=True))
    assert len(dropped) == 3, f"with drop_last=True, 11 samples in batches of 3 make 3 batches, got {len(dropped)}"


def test_seeds_per_batch(lab):
    order = [4, 0, 7, 7, 2, 9, 1]
    for workers in (1, 2):
        got = [x for x, _ in lab.Loader(Records(lab, 10), 2, order, num_workers=workers, seed=5)]
        want = expected(order, 2, workers, seed=5)
        assert len(got) == len(want), f"{len(order)} indices in batches of 2 make {len(want)} batches, got {len(got)}"
        for b, (g, w) in enumerate(zip(got, want)):
            assert torch.equal(g[:, 0], w[:, 0]), f"batch {b} should hold samples {w[:, 0].int().tolist()}, got {g[:, 0].tolist()}"
            assert torch.equal(g[:, 1:3], w[:, 1:3]), (
                f"with {workers} worker(s), batch {b}: get_worker_info() should give worker {b % workers} and seed "
                f"{5 + b}, got {g[0, 1:3].int().tolist()}")
            assert torch.equal(g[:, 3], w[:, 3]), (
                f"with {workers} worker(s), batch {b}: the random draws should follow torch.manual_seed({5 + b})")
    loader = lab.Loader(Records(lab, 10), 3, range(6), num_workers=2, seed=0)
    first, second = ([x for x, _ in loader] for _ in range(2))
    assert torch.equal(second[1][:, 2], torch.full((3,), 10_001.0, dtype=torch.float64)), \
        f"batch 1 of epoch 1 should be seeded with 0 + 10_000 * 1 + 1, got {second[1][0, 2].item():.0f}"


def test_worker_error(lab):
    iterator = iter(lab.Loader(Records(lab, 12, fail={7}), 2, range(12), num_workers=2))
    got = []
    with pytest.raises(lab.WorkerError) as info:
        for x, _ in iterator:
            got.append(x)
    assert len(got) == 3, f"sample 7 is in batch 3: batches 0, 1 and 2 should come first, got {len(got)}"
    assert (info.value.index, info.value.worker_id) == (7, 1), \
        f"WorkerError should name sample 7 and worker 1 (batch 3 % 2), got index {info.value.index}, worker {info.value.worker_id}"
    assert "ValueError" in str(info.value) and "sample 7 is broken" in str(info.value), \
        f"the WorkerError's message should hold 'ValueError' and the exception's text, got {str(info.value)!r}"
    with pytest.raises(StopIteration):
        next(iterator)


def test_workers_are_processes_and_stop(lab):
    iterator = iter(lab.Loader(Records(lab, 12), 2, range(12), num_workers=2))
    pids = set()
    for _ in range(3):
        pids.update(next(iterator)[1].tolist())
    assert os.getpid() not in pids, "dataset[i] ran in the main process: only the workers may call it"
    assert len(pids) == 2 and all(alive(p) for p in pids), \
        f"two worker processes should have made the first batches and still run, got {len(pids)} process(es)"
    for _, made in iterator:
        pids.update(made.tolist())
    still = [p for p in pids if alive(p)]
    assert not still, f"{len(still)} worker(s) still running or not joined after the epoch ended: stop them and join() them"
    iterator = iter(lab.Loader(Records(lab, 12), 2, range(12), num_workers=2))
    pids = set(next(iterator)[1].tolist()) | set(next(iterator)[1].tolist())
    iterator.close()
    iterator.close()
    assert not [p for p in pids if alive(p)], "worker(s) still running or not joined after close()"
