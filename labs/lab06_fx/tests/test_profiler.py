"""Public tests of part `profiler` (run them with check("profiler"))."""
import torch
import torch.fx
from torch import nn


def test_every_node_timed(lab):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    gm = torch.fx.symbolic_trace(model)
    report = lab.profile_graph(gm, torch.randn(4, 8), runs=2)
    assert set(report["nodes"]) == {n.name for n in gm.graph.nodes}, f"got {sorted(report['nodes'])}"
    assert all(v["calls"] == 2 and v["seconds"] > 0 for v in report["nodes"].values()), report["nodes"]
    assert sum(v["seconds"] for v in report["nodes"].values()) <= report["total"]
    lines = lab.profile_summary(report, top=3).splitlines()
    assert len(lines) == 4, f"a header and 3 lines expected, got {lines}"
