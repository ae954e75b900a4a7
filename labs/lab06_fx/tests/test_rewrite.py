"""Public tests of part `rewrite` (run them with check("rewrite"))."""
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn


class NearMiss(nn.Module):
    def forward(self, x, y):
        s = torch.sigmoid(x)
        return x * s + y * s + y * torch.sigmoid(x)


class Match(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * x - 1


def test_near_miss_left_alone(lab):
    gm = torch.fx.symbolic_trace(NearMiss())
    assert lab.fuse_silu(gm) == 0, "s = sigmoid(x) has two users, and y * sigmoid(x) multiplies by another value: nothing to rewrite"


def test_match(lab):
    x = torch.randn(5)
    gm = torch.fx.symbolic_trace(Match())
    assert lab.fuse_silu(gm) == 1, "sigmoid(x) * x should be rewritten"
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls[0] is F.silu and torch.sigmoid not in calls, f"got {calls}"
    assert torch.allclose(gm(x), F.silu(x) - 1), "after the rewrite the module still computes the same values as before"


def test_method_spelling_and_exact_node(lab):
    class M(nn.Module):
        def forward(self, x):
            return x.sigmoid().mul(x)

    gm = torch.fx.symbolic_trace(M())
    assert lab.fuse_silu(gm) == 1, "x.sigmoid().mul(x) is a match (methods, sigmoid first)"
    silu = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert len(silu) == 1 and silu[0].target is F.silu and len(silu[0].args) == 1 and silu[0].kwargs == {}, (
        f"the new node should be exactly call_function(F.silu, (x,)) without kwargs, got {[(n.target, n.args, n.kwargs) for n in silu]}")
