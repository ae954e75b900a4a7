"""Public tests of part `tracer` (run them with check("tracer"))."""
import operator

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn


def same_as_fx(lab, model):
    mine, ref = lab.mini_trace(model), torch.fx.symbolic_trace(model).graph
    index = {n: i for i, n in enumerate(mine.nodes)}
    ref_index = {n: i for i, n in enumerate(ref.nodes)}
    for i, (m, r) in enumerate(zip(mine.nodes, ref.nodes)):
        assert (m.op, m.target) == (r.op, r.target), f"node {i} should be {r.op} {r.target!r}, got {m.op} {m.target!r}"
        args = lab.map_arg(m.args, lambda n: ("node", index[n]))
        ref_args = torch.fx.node.map_arg(r.args, lambda n: ("node", ref_index[n]))
        assert repr(args) == repr(tuple(ref_args)), f"node {i} ({r.op} {r.target!r}) should have args {ref_args}, got {args}"
    assert len(mine.nodes) == len(ref.nodes), f"torch.fx gives {len(ref.nodes)} nodes, yours {len(mine.nodes)}"


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x, y):
        h = self.block(self.lin(x)) * self.weight
        z = torch.cat([h, 1 - y], dim=1)
        return F.softmax(z, dim=-1)[:, :2].view(-1), -h.relu()


def test_small_model(lab):
    same_as_fx(lab, Small())


def test_operators_and_output(lab):
    class M(nn.Module):
        def forward(self, x):
            return {"a": x @ x, "b": (x / 2, x ** 2)}

    g = lab.mini_trace(M())
    targets = [n.target for n in g.nodes if n.op == "call_function"]
    assert targets == [operator.matmul, operator.truediv, operator.pow], f"got {targets}"
    out = g.nodes[-1]
    assert out.op == "output" and isinstance(out.args[0], dict), f"the output node's args[0] should be the returned dict, got {out.args}"
