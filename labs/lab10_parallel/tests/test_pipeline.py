"""Public tests of part `pipeline` (run them with check("pipeline"))."""
import numpy as np
import torch
import torch.nn.functional as F
from labkit.testing import raises
from labkit.world import run_world
from torch import nn


def _names(schedule):
    return [" ".join(f"{k}{i}" for k, i in actions) for actions in schedule]


def test_schedules(lab):
    assert _names(lab.gpipe(2, 2)) == ["F0 F1 B0 B1"] * 2, f"gpipe(2, 2) gave {_names(lab.gpipe(2, 2))}"
    want = ["F0 F1 F2 B0 F3 B1 B2 B3", "F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"]
    got = _names(lab.one_f_one_b(4, 3))
    assert got == want, f"one_f_one_b(4, 3) should be {want}, got {got}"
    with raises(ValueError, "gpipe(0, 2)"):
        lab.gpipe(0, 2)


def _stages():
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(3, 4), nn.Tanh()), nn.Linear(4, 2)]


def test_two_stages_1f1b_equal_one_process(lab):
    def program(x, y):
        rank = torch.distributed.get_rank()
        stage = _stages()[rank]
        actions = lab.one_f_one_b(3, 2)[rank]
        losses = lab.run_stage(stage, actions, list(x.split(2)), list(y.split(2)), F.mse_loss, (2, 4))
        return [torch.tensor(losses), *[p.grad for p in stage.parameters()]]

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    ranks = run_world(program, 2, [[x, y], [x, y]])
    first, second = _stages()
    model = nn.Sequential(first, second)
    F.mse_loss(model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    assert ranks[0][0].shape == (0,), f"stage 0 should return no losses, got {ranks[0][0].tolist()}"
    assert ranks[1][0].shape == (3,), f"the last stage should return 3 losses, got {ranks[1][0].tolist()}"
    for rank, stage in enumerate((first, second)):
        for i, p in enumerate(stage.parameters()):
            assert np.allclose(ranks[rank][1 + i], p.grad.numpy(), atol=1e-6), f"stage {rank}: gradient {i} differs from one process"
