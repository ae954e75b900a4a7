"""Public tests of part `python_device` (run them with check("python_device"))."""
import torch
from torch import nn


def test_ops(lab):
    a = lab.to_device(torch.arange(6.0).reshape(2, 3))
    assert type(a).__name__ == "NumpyTensor" and a.shape == (2, 3), f"to_device should give a NumpyTensor, got {type(a)}"
    b = a * 2 + 1
    assert type(b).__name__ == "NumpyTensor", "ops on NumpyTensors should return NumpyTensors"
    assert torch.equal(lab.to_cpu(b), torch.arange(6.0).reshape(2, 3) * 2 + 1), "a * 2 + 1 on your device should match the CPU"


def test_one_sgd_step(lab):
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    torch.manual_seed(0)
    dev = lab.module_to_device(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    x, y = torch.randn(5, 3), torch.randn(5, 1)
    for net, inp, tgt in [(cpu, x, y), (dev, lab.to_device(x), lab.to_device(y))]:
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        ((net(inp) - tgt) ** 2).mean().backward()
        opt.step()
    for p, q in zip(dev.parameters(), cpu.parameters()):
        assert type(p).__name__ == "NumpyTensor", f"parameters should be NumpyTensors, got {type(p)}"
        assert torch.allclose(lab.to_cpu(p), q.detach(), atol=1e-6), "parameters after one SGD step should match the CPU"


def test_inplace_returns_input_and_to_device_copies(lab):
    src = torch.arange(4.0)
    a = lab.to_device(src)
    assert a.add_(1.0) is a, "an in-place op on a NumpyTensor should return the NumpyTensor itself"
    assert torch.equal(src, torch.arange(4.0)), "to_device should copy: changing the NumpyTensor changed the CPU tensor"
    assert a.payload.tolist() == [1.0, 2.0, 3.0, 4.0], "in-place ops write into the payload"
