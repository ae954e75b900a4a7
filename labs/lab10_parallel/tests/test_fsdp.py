"""Public tests of part `fsdp` (run them with check("fsdp"))."""
import numpy as np
import torch
import torch.nn.functional as F
from labkit.world import run_world


def _layers(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in ((5, 3), (5,), (2, 5))]


def test_each_rank_stores_its_padded_shard(lab):
    def program(w, b):
        return [lab.ShardedLinear(w, b).shard]

    rng = np.random.default_rng(1)
    w, b, _ = _layers(rng)
    flat = np.concatenate([w.reshape(-1), b])            # 20 elements on 3 ranks: shards of 7, the last padded
    ranks = run_world(program, 3, [[w, b]] * 3)
    for rank, (shard,) in enumerate(ranks):
        want = np.zeros(7, np.float32)
        part = flat[7 * rank:7 * (rank + 1)]
        want[:len(part)] = part
        assert shard.shape == (7,), f"rank {rank}: the shard should have ceil(20 / 3) = 7 elements, got shape {shard.shape}"
        assert np.array_equal(shard, want), f"rank {rank}: the shard should be {want}, got {shard}"


def test_two_sgd_steps_match_one_process_on_the_average(lab):
    def program(w1, b1, w2, x, y):
        up, down = lab.ShardedLinear(w1, b1), lab.ShardedLinear(w2, None)
        opt = torch.optim.SGD([up.shard, down.shard], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            F.mse_loss(down(torch.tanh(up(x))), y).backward()
            opt.step()
        return [up.shard.detach(), down.shard.detach()]

    rng = np.random.default_rng(2)
    w1, b1, w2 = _layers(rng)
    data = [(rng.standard_normal((4, 2, 3)).astype(np.float32), rng.standard_normal((4, 2, 2)).astype(np.float32))
            for _ in range(2)]
    ranks = run_world(program, 2, [[w1, b1, w2, x, y] for x, y in data])
    up, down = torch.nn.Linear(3, 5), torch.nn.Linear(5, 2, bias=False)
    with torch.no_grad():
        up.weight.copy_(torch.from_numpy(w1)), up.bias.copy_(torch.from_numpy(b1)), down.weight.copy_(torch.from_numpy(w2))
    opt = torch.optim.SGD([*up.parameters(), *down.parameters()], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        loss = sum(F.mse_loss(down(torch.tanh(up(torch.from_numpy(x)))), torch.from_numpy(y)) for x, y in data) / 2
        loss.backward()
        opt.step()
    flats = [torch.cat([up.weight.reshape(-1), up.bias]).detach().numpy(), down.weight.reshape(-1).detach().numpy()]
    for rank, shards in enumerate(ranks):
        for k, (shard, flat) in enumerate(zip(shards, flats)):
            chunk = -(-flat.size // 2)
            want = flat[rank * chunk:(rank + 1) * chunk]
            assert np.allclose(shard[:len(want)], want, atol=1e-5), (
                f"rank {rank}, layer {k}: after two steps the shard differs from one process training the whole "
                f"network on the averaged gradients")
