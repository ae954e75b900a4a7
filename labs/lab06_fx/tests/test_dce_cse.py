"""Public tests of part `dce_cse` (run them with check("dce_cse"))."""
import torch
import torch.fx
from torch import nn


class M(nn.Module):
    def forward(self, x):
        a, b = torch.relu(x), torch.relu(x)
        unused = (a * 2).sum()
        t = x.clone()
        t.add_(1)
        return a + b + t


def test_dce_keeps_inplace(lab):
    gm = torch.fx.symbolic_trace(M())
    assert lab.dead_code_elimination(gm) == 2, "the dead mul and sum should go (2 nodes)"
    assert "add_" in [n.target if isinstance(n.target, str) else n.target.__name__ for n in gm.graph.nodes], "t.add_(1) must stay"
    x = torch.randn(3)
    assert torch.allclose(gm(x), 2 * torch.relu(x) + x + 1)


def test_cse(lab):
    gm = torch.fx.symbolic_trace(M())
    assert lab.cse(gm) == 1, "the second torch.relu(x) should be merged into the first"
    x = torch.randn(3)
    assert torch.allclose(gm(x), 2 * torch.relu(x) + x + 1)
