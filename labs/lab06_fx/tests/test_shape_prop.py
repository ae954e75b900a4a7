"""Public tests of part `shape_prop` (run them with check("shape_prop"))."""
import torch
import torch.fx
from torch import nn


def test_records_meta(lab):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    gm = torch.fx.symbolic_trace(model)
    out = lab.ShapeRecorder(gm).run(torch.randn(2, 3))
    assert out.shape == (2, 4), "run() should return the graph's result"
    meta = {n.name: n.meta for n in gm.graph.nodes}
    assert meta["_0"]["shape"] == (2, 4) and meta["_0"]["dtype"] == torch.float32, f"got {meta['_0']}"
    assert meta["input_1"]["stride"] == (3, 1), f"got {meta['input_1']}"
    assert lab.activation_bytes(gm) == {"_0": 32, "_1": 32}, lab.activation_bytes(gm)


def test_storage_offset(lab):
    class Slice(nn.Module):
        def forward(self, x):
            return x[1:], x.flatten()[3:]

    gm = torch.fx.symbolic_trace(Slice())
    lab.ShapeRecorder(gm).run(torch.randn(4, 3))
    offsets = [n.meta.get("storage_offset") for n in gm.graph.nodes if n.op == "call_function"]
    assert offsets == [3, 3], f"x[1:] of a (4, 3) tensor starts at element 3, so does flatten()[3:]; got {offsets}"
