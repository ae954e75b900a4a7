"""Public tests of part `codegen` (run them with check("codegen"))."""
import torch
import torch.fx
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        self.scale = nn.Parameter(torch.tensor([2.0, -1.0]))

    def forward(self, x):
        h = self.layers(x) * self.scale
        return h[:, 0] - 0.25, torch.relu(h).sum(dim=1)


def test_runs_like_eager(lab):
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 3)
    mini = lab.MiniGraphModule(net, lab.from_fx(torch.fx.symbolic_trace(net)))
    assert isinstance(mini.code, str) and "def forward" in mini.code, "mini.code should hold the generated source"
    for got, want in zip(mini(x), net(x)):
        assert torch.allclose(got, want), "MiniGraphModule's outputs should equal eager"


def test_holds_the_same_submodules(lab):
    net = Net()
    mini = lab.MiniGraphModule(net, lab.from_fx(torch.fx.symbolic_trace(net)))
    assert sorted(mini.state_dict()) == sorted(torch.fx.symbolic_trace(net).state_dict()), sorted(mini.state_dict())
    assert mini.get_submodule("layers.0") is net.layers[0], "call_module targets should be the root's own modules, not copies"
