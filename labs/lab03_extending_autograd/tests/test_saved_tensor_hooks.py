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
