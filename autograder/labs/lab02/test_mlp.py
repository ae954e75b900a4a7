"""Part `mlp`: Linear, cross_entropy, sgd_step, train: the loss curve matches torch from the same init."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder.engine import replies
from autograder.labs.lab02 import oracle


def setup(seed, n=24, d_in=3, hidden=8, classes=3):
    """Data and initial parameters drawn from `seed` (a grading seed and a case number): every submission
    meets its own numbers."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=(n, d_in)), 3)
    target = rng.integers(0, classes, size=n)
    params = [rng.normal(size=(hidden, d_in)) * 0.6, rng.normal(size=hidden) * 0.1,
              rng.normal(size=(classes, hidden)) * 0.6, rng.normal(size=classes) * 0.1]
    return x, target, params


def torch_train(x, target, params, lr, steps):
    p = [torch.tensor(v, requires_grad=True) for v in params]
    xt, yt = torch.tensor(x), torch.tensor(target)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(torch.tanh(xt @ p[0].T + p[1]) @ p[2].T + p[3], yt)
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for q in p:
                q -= lr * q.grad
                q.grad = None
    return losses, [q.detach().numpy() for q in p]


def test_linear(student, grading_seed):
    _, _, params = setup((grading_seed, 1))
    x = np.round(np.random.default_rng((grading_seed, 4)).normal(size=(5, 3)), 3)
    context = "Linear(weight (8, 3), bias (8,)) on x of shape (5, 3)"
    got = replies.dict_of(oracle.call(student, context, "lab02.scenarios:linear", params[0], params[1], x),
                          ("out", "w_grad", "b_grad"), context)
    w = torch.tensor(params[0], requires_grad=True)
    b = torch.tensor(params[1], requires_grad=True)
    out = torch.tensor(x) @ w.T + b
    out.backward(torch.ones_like(out))
    for key, want in (("out", out), ("w_grad", w.grad), ("b_grad", b.grad)):
        msg = oracle.compare_array(got[key], want.detach().numpy(), f"Linear: {key}")
        assert msg is None, f"{msg} (x @ weight.T + bias, weight of shape (out, in))"


@pytest.mark.weight(2)
def test_cross_entropy(student, grading_seed):
    rng = np.random.default_rng((grading_seed, 6))
    logits, target = np.round(rng.normal(size=(6, 4)) * 3, 3), rng.integers(0, 4, size=6)
    context = "cross_entropy on logits of shape (6, 4)"
    got = replies.dict_of(oracle.call(student, context, "lab02.scenarios:cross_entropy", logits, target),
                          ("loss", "grad"), context)
    t = torch.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(t, torch.tensor(target))
    loss.backward()
    value = replies.number(got["loss"], "cross_entropy(...)")
    assert abs(value - loss.item()) < 1e-9, f"cross_entropy on logits of shape (6, 4): got {value}, torch differs"
    msg = oracle.compare_array(got["grad"], t.grad.numpy(), "d(cross_entropy)/d(logits)")
    assert msg is None, msg


@pytest.mark.weight(4)
@pytest.mark.parametrize("seed,lr,steps", [(0, 0.5, 15), (1, 0.1, 10), (2, 0.3, 1)])
def test_training_matches_torch(student, grading_seed, seed, lr, steps):
    x, target, params = setup((grading_seed, seed))
    context = f"train(MLP 3-8-3, lr={lr}, {steps} steps) on 24 points"
    got = replies.dict_of(oracle.call(student, context, "lab02.scenarios:train_mlp", *params, x, target, lr, steps),
                          ("losses", "params", "grads_cleared"), context)
    want_losses, want_params = torch_train(x, target, params, lr, steps)
    losses = [replies.number(v, f"{context}: loss {i}") for i, v in
              enumerate(replies.list_of(got["losses"], f"{context}: the list of losses", length=steps))]
    msg = oracle.compare_array(np.array(losses), np.array(want_losses), f"{context}: the loss curve", show_expected=False)
    assert msg is None, f"{msg} (index = step)"
    for i, (g, w) in enumerate(replies.pairs(got["params"], want_params, f"{context}: the parameters")):
        msg = oracle.compare_array(g, w, f"{context}: parameter {i} after training", show_expected=False)
        assert msg is None, msg
    cleared = [replies.boolean(v, f"{context}: grad cleared") for v in replies.list_of(got["grads_cleared"], context, length=4)]
    assert all(cleared), f"{context}: sgd_step should leave every parameter's .grad at None"

# IPT-CANARY lab02 test_mlp.py: hidden grading text, never shown to learners
