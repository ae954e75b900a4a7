"""Public tests of part `saved_tensor_hooks` (run them with check("saved_tensor_hooks"))."""
import numpy as np
import torch
from torch import nn


def net_and_input():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Dropout(0.3), nn.Linear(16, 3))
    return net, torch.randn(4, 8, requires_grad=True)


def grads(net, x):
    return [x.grad.clone()] + [p.grad.clone() for p in net.parameters()]


def test_offload_gives_identical_gradients(lab):
    net, x = net_and_input()
    torch.manual_seed(1)
    net(x).square().mean().backward()
    want = grads(net, x)
    net.zero_grad()
    x.grad = None
    torch.manual_seed(1)
    with lab.NumpyOffload() as off:
        loss = net(x).square().mean()
    assert off.store and all(isinstance(a, np.ndarray) for a in off.store.values()), "store should hold numpy arrays"
    loss.backward()
    for g, w in zip(grads(net, x), want):
        assert torch.equal(g, w), "gradients with NumpyOffload should be bit-identical"


def test_checkpoint_gives_identical_gradients(lab):
    net, x = net_and_input()
    torch.manual_seed(1)
    net(x).square().mean().backward()
    want = grads(net, x)
    net.zero_grad()
    x.grad = None
    torch.manual_seed(1)
    out = net[3](lab.checkpoint(net[:3], x))
    out.square().mean().backward()
    for g, w in zip(grads(net, x), want):
        assert torch.equal(g, w), "gradients with checkpoint should be bit-identical (dropout must replay the same mask)"


def test_offload_store_holds_copies_and_unpack_reads_it(lab):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    x = torch.randn(4, 3, requires_grad=True)
    with lab.NumpyOffload() as off:
        loss = torch.tanh(lin(x)).sum()
    keys = sorted(off.store)
    assert keys and all(isinstance(k, int) for k in keys), "store keys should be integers"
    with torch.no_grad():
        lin.weight.add_(1.0)  # the store holds copies: backward still sees the forward's weight
    want_w = lin.weight.detach() - 1.0
    out = torch.tanh(x.detach() @ want_w.T + lin.bias.detach())
    loss.backward()
    assert torch.allclose(x.grad, ((1 - out ** 2) @ want_w)), "x's gradient should use the weight saved at forward time"


def test_checkpoint_rules(lab):
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    x = torch.randn(2, 3)  # does not require grad: the Function's output has no grad_fn
    out = lab.checkpoint(lin, x)
    assert out.grad_fn is None, "with no input requiring grad, Checkpoint's output has no grad_fn (the classic pitfall)"
    x.requires_grad_()
    out = lab.checkpoint(lin, x)
    with torch.no_grad():
        lin.weight.mul_(2.0)  # backward recomputes the block, so it sees the new weight
    out.sum().backward()
    assert torch.allclose(x.grad, torch.ones(2, 3) @ lin.weight.detach()), "backward recomputes with the current weights"
    drop = nn.Dropout(0.5)
    x = torch.ones(8, requires_grad=True)
    torch.manual_seed(7)
    given = torch.get_rng_state()
    torch.manual_seed(8)
    y = lab.Checkpoint.apply(drop, given, x)
    y.sum().backward()
    torch.manual_seed(7)
    mask = drop(torch.ones(8))
    assert torch.equal(x.grad, mask), "backward replays the rng_state given to Checkpoint.apply (not the forward's)"
