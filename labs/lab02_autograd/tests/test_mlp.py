"""Public tests of part `mlp` (run them with check("mlp"))."""
import numpy as np
import torch
import torch.nn.functional as F


def test_cross_entropy(lab):
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3]])
    target = np.array([0, 2])
    t = lab.tensor(logits, requires_grad=True)
    loss = lab.cross_entropy(t, target)
    tt = torch.tensor(logits, requires_grad=True)
    want = F.cross_entropy(tt, torch.tensor(target))
    np.testing.assert_allclose(float(loss.data), want.item(), err_msg="cross_entropy value")
    loss.backward()
    want.backward()
    np.testing.assert_allclose(t.grad.data, tt.grad.numpy(), err_msg="cross_entropy gradient")


def test_training_loss_goes_down(lab):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 2)), rng.integers(0, 2, size=16)
    model = lab.MLP(rng.normal(size=(6, 2)), np.zeros(6), rng.normal(size=(2, 6)), np.zeros(2))
    losses = lab.train(model, x, y, 0.5, 10)
    assert len(losses) == 10 and losses[-1] < losses[0], f"10 SGD steps should lower the loss, got {losses}"
    assert all(p.grad is None for p in model.parameters()), "sgd_step clears the gradients"
