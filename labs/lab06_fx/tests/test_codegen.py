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


def test_source_layout(lab):
    import ast
    net = Net()
    graph = lab.from_fx(torch.fx.symbolic_trace(net))
    source, _ = lab.python_code(graph)
    fn = ast.parse(source).body[0]
    names = [n.name for n in graph.nodes if n.op not in ("placeholder", "output")]
    assigned = [s.targets[0].id for s in fn.body[:-1] if isinstance(s, ast.Assign)]
    assert assigned == names and len(fn.body) == len(names) + 1, (
        f"the body should be exactly one assignment per node, in graph order, then a return; assigned {assigned}")
    floats = {c.value for c in ast.walk(fn) if isinstance(c, ast.Constant) and isinstance(c.value, float)}
    assert 0.25 in floats, "the constant 0.25 should appear in the source exactly (repr)"
