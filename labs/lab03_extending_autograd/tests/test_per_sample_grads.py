"""Public tests of part `per_sample_grads` (run them with check("per_sample_grads"))."""
import torch
import torch.nn.functional as F
from torch import nn


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    return model, torch.randn(5, 3), torch.randint(0, 2, (5,))


def test_matches_one_sample_at_a_time(lab):
    model, x, y = setup()
    grads = lab.per_sample_grads(model, F.cross_entropy, x, y)
    assert set(grads) == {n for n, _ in model.named_parameters()}, "one entry per parameter name"
    for b in range(5):
        want = torch.autograd.grad(F.cross_entropy(model(x[b:b + 1]), y[b:b + 1]), tuple(model.parameters()))
        for (name, _), w in zip(model.named_parameters(), want):
            assert torch.allclose(grads[name][b], w, atol=1e-6), f"sample {b}: wrong gradient of {name}"
    assert all(p.grad is None for p in model.parameters()), "the model's parameters should get no .grad"


def test_loop_agrees(lab):
    model, x, y = setup()
    fast, slow = lab.per_sample_grads(model, F.cross_entropy, x, y), lab.per_sample_grads_loop(model, F.cross_entropy, x, y)
    for name in fast:
        assert torch.allclose(fast[name], slow[name], atol=1e-6), f"the two versions disagree on {name}"


def test_frozen_parameters_left_out(lab):
    model, x, y = setup()
    model[0].weight.requires_grad_(False)
    for fn in (lab.per_sample_grads, lab.per_sample_grads_loop):
        grads = fn(model, F.cross_entropy, x, y)
        assert set(grads) == {"0.bias", "2.weight", "2.bias"}, f"{fn.__name__}: frozen 0.weight should be left out, got {sorted(grads)}"
