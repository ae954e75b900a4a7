"""Public tests of part `ddp` (run them with check("ddp")). Each world is a few forked ranks."""
import numpy as np
import torch
import torch.nn.functional as F
from labkit.testing import raises
from labkit.world import run_world
from torch import nn


def test_plan_buckets_examples(lab):
    cases = [(([4, 4, 4, 4], 8, None), [[3, 2], [1, 0]]),
             (([4, 4, 4, 4], 8, 4), [[3], [2, 1], [0]]),
             (([100, 1, 1], 10, None), [[2, 1, 0]]),
             (([1, 100, 1], 10, None), [[2, 1], [0]]),
             (([], 10, None), [])]
    for (sizes, cap, first), want in cases:
        got = lab.plan_buckets(sizes, cap, first)
        assert [list(b) for b in got] == want, f"plan_buckets({sizes}, {cap}, {first}) should be {want}, got {got!r}"
    with raises(ValueError, "plan_buckets([4], 0)"):
        lab.plan_buckets([4], 0)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def test_gradients_are_the_whole_batch_average(lab):
    def program(x, y):
        model = lab.BucketedDDP(_model(), bucket_cap=40)
        F.mse_loss(model(x), y).backward()
        return [p.grad for p in model.module.parameters()]

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    ranks = run_world(program, 3, [[x[2 * r:2 * r + 2], y[2 * r:2 * r + 2]] for r in range(3)])
    one = _model()
    F.mse_loss(one(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    for rank, grads in enumerate(ranks):
        for i, (got, p) in enumerate(zip(grads, one.parameters())):
            assert np.allclose(got, p.grad.numpy(), atol=1e-6), f"rank {rank}: gradient {i} differs from one process on the whole batch"


def test_start_from_rank_zero_and_no_sync_accumulates(lab):
    def program(x):
        torch.manual_seed(int(x[0, 0]))            # every rank starts from other weights...
        model = lab.BucketedDDP(nn.Linear(2, 1), bucket_cap=4)
        with model.no_sync():
            model(x[:1]).sum().backward()           # ...and accumulates one micro-batch locally
        model(x[1:]).sum().backward()               # the second backward all-reduces both
        return [model.module.weight.detach(), model.module.weight.grad]

    xs = [np.array([[r, 1.0], [2.0, r]], dtype=np.float32) for r in range(2)]
    (w0, g0), (w1, g1) = run_world(program, 2, [[x] for x in xs])
    assert np.array_equal(w0, w1), "after construction every rank must hold rank 0's weights"
    want = sum(x.sum(axis=0) for x in xs) / 2
    assert np.allclose(g0, want) and np.allclose(g1, want), f"the gradient should be {want.tolist()}, got {g0.tolist()} and {g1.tolist()}"
