"""Public tests of part `all_to_all` (run them with check("all_to_all"))."""
import numpy as np
import torch
import torch.distributed as dist
from labkit.world import run_world


def test_transposes_who_holds_what(lab):
    def program(x):
        rank = dist.get_rank()
        chunks = [torch.full((j + 1,), 10.0 * rank + j) for j in range(3)]
        return lab.all_to_all(chunks)

    results = run_world(program, 3, [[np.zeros(1)] for _ in range(3)])
    for rank, got in enumerate(results):
        want = [np.full(rank + 1, 10.0 * i + rank, dtype=np.float32) for i in range(3)]
        for i in range(3):
            assert got[i].shape == want[i].shape and np.array_equal(got[i], want[i]), \
                f"rank {rank}'s entry {i} should be rank {i}'s chunk for it, {want[i].tolist()}; got {got[i].tolist()}"


def test_any_shapes(lab):
    def program(x):
        rank = dist.get_rank()
        if rank == 0:
            chunks = [torch.tensor(0.0), torch.zeros(0)]
        else:
            chunks = [torch.arange(6.0).reshape(2, 3), torch.tensor(7.0)]
        return lab.all_to_all(chunks)

    results = run_world(program, 2, [[np.zeros(1)], [np.zeros(1)]])
    assert results[0][1].shape == (2, 3), f"rank 0 should receive rank 1's (2, 3) chunk, got shape {results[0][1].shape}"
    assert results[1][0].shape == (0,), f"rank 1 should receive rank 0's empty chunk, got shape {results[1][0].shape}"
    assert results[1][1].shape == (), f"rank 1's own entry is its 0-d chunk, got shape {results[1][1].shape}"
