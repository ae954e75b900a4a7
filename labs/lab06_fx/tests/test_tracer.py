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


class Rules(nn.Module):
    """The rules where this lab differs from torch.fx, and ==, !=, attributes used as values."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.ones(3))
        self.k = torch.full((3,), 2.0)          # a plain attribute: a constant
        self.loose = [nn.Tanh()]                # not registered: traced through

    def forward(self, x):
        s = self.shift                          # one read, two uses: one get_attr node
        t = self.loose[0](x * self.k) + s * s
        return (t == 1) != (x > 0), t.T, x.shape[0]


def test_the_lab_rules(lab):
    g = lab.mini_trace(Rules())
    ops = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in g.nodes]
    assert ops.count(("get_attr", "shift")) == 1, f"a buffer read once is one get_attr node, even when used twice; got {ops}"
    assert ("call_function", "tanh") in ops, f"an unregistered nn.Tanh is traced through (torch.tanh), got {ops}"
    mul = next(n for n in g.nodes if n.op == "call_function" and n.target is operator.mul)
    assert isinstance(mul.args[1], torch.Tensor), f"a plain tensor attribute stays a constant in args, got {mul.args}"
    targets = [n.target for n in g.nodes if n.op == "call_function"]
    assert operator.eq in targets and operator.ne in targets, "== and != record operator.eq / operator.ne nodes"
    getattrs = [n.args[1] for n in g.nodes if n.op == "call_function" and n.target is getattr]
    assert sorted(getattrs) == ["T", "shape"], f"t.T and x.shape used as values record getattr nodes, got {getattrs}"


def test_control_flow_raises_and_restores(lab):
    class Branch(nn.Module):
        def forward(self, x, y):
            return x if x == y else y

    call = nn.Module.__call__
    try:
        lab.mini_trace(Branch())
        raised = None
    except Exception as exc:  # noqa: BLE001
        raised = type(exc).__name__
    assert raised == "TraceError", f"`x if x == y else y` on proxies should raise TraceError, got {raised}"
    assert nn.Module.__call__ is call, "nn.Module.__call__ must be put back after a failed trace"
    assert len(lab.mini_trace(Small()).nodes) == len(torch.fx.symbolic_trace(Small()).graph.nodes), "a trace after a failed one should work"
