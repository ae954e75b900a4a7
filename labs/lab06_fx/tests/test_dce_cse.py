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
    assert torch.allclose(gm(x), 2 * torch.relu(x) + x + 1), "the pass must not change what the module computes"


def test_cse(lab):
    gm = torch.fx.symbolic_trace(M())
    assert lab.cse(gm) == 1, "the second torch.relu(x) should be merged into the first"
    x = torch.randn(3)
    assert torch.allclose(gm(x), 2 * torch.relu(x) + x + 1), "the pass must not change what the module computes"


def test_cse_barrier(lab):
    class Mut(nn.Module):
        def forward(self, x):
            t = x.clone()
            a = t * 3
            t.add_(1)
            b = t * 3
            return a + b

    gm = torch.fx.symbolic_trace(Mut())
    assert lab.cse(gm) == 0, "t * 3 before and after t.add_(1) are different values: an impure node is a barrier"
    x = torch.randn(3)
    assert torch.allclose(gm(x), 3 * x + 3 * (x + 1)), "cse must not change what the graph computes"


def test_inplace_kwarg_is_impure(lab):
    class K(nn.Module):
        def forward(self, x):
            torch.nn.functional.relu(x, inplace=True)
            return x

    gm = torch.fx.symbolic_trace(K())
    relu = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert lab.is_impure(relu) is True, "a call with inplace=True is impure"
    assert lab.dead_code_elimination(gm) == 0, "an unused in-place call must stay"
