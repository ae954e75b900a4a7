"""Public tests of part `zero` (run them with check("zero"))."""
import numpy as np
import torch
from labkit.testing import raises
from labkit.world import run_world


def test_shard_bounds_examples(lab):
    for (n, world), want in (((10, 4), [0, 3, 6, 9, 10]), ((2, 4), [0, 1, 2, 2, 2]), ((6, 3), [0, 2, 4, 6]), ((0, 2), [0, 0, 0])):
        got = lab.shard_bounds(n, world)
        assert list(got) == want, f"shard_bounds({n}, {world}) should be {want}, got {got!r}"
    with raises(ValueError, "shard_bounds(5, 0)"):
        lab.shard_bounds(5, 0)


def test_two_steps_match_adamw_on_the_average(lab):
    def program(w, b, g1, g2):
        params = [w.clone(), b.clone()]
        opt = lab.ZeroAdamW(params, lr=0.1, weight_decay=0.1)
        for g in (g1, g2):
            params[0].grad, params[1].grad = g[:6].reshape(2, 3).clone(), g[6:].clone()
            opt.step()
        return [params[0], params[1], *opt.state_shard()]

    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    grads = [[rng.standard_normal(8).astype(np.float32) for _ in range(2)] for _ in range(3)]
    ranks = run_world(program, 3, [[w, b, *grads[r]] for r in range(3)])
    params = [torch.from_numpy(w.copy()), torch.from_numpy(b.copy())]
    ref = torch.optim.AdamW(params, lr=0.1, weight_decay=0.1)
    for step in range(2):
        g = torch.from_numpy(sum(grads[r][step] for r in range(3)) / 3)
        params[0].grad, params[1].grad = g[:6].reshape(2, 3), g[6:]
        ref.step()
    flat_m = torch.cat([ref.state[p]["exp_avg"].reshape(-1) for p in params]).numpy()
    for rank, (got_w, got_b, m, v) in enumerate(ranks):
        assert np.allclose(got_w, params[0].detach().numpy(), atol=1e-6) and np.allclose(got_b, params[1].detach().numpy(), atol=1e-6), \
            f"rank {rank}: parameters differ from torch.optim.AdamW on the averaged gradients"
        lo, hi = [0, 3, 6, 8][rank], [0, 3, 6, 8][rank + 1]
        assert m.shape == (hi - lo,), f"rank {rank} should keep exp_avg for {hi - lo} elements, keeps {m.shape}"
        assert np.allclose(m, flat_m[lo:hi], atol=1e-6), f"rank {rank}: exp_avg differs from AdamW's on its slice"
