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
    nodes = sum(v["seconds"] for v in report["nodes"].values())
    assert nodes <= report["total"], f"the nodes' times ({nodes:.6f} s) cannot add up to more than the total ({report['total']:.6f} s)"
    lines = lab.profile_summary(report, top=3).splitlines()
    assert len(lines) == 4, f"a header and 3 lines expected, got {lines}"


def test_initial_env_and_stale_code(lab):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(4, 8)
    relu = [n for n in gm.graph.nodes if n.op == "call_module"][1]
    interp = lab.ProfilingInterpreter(gm)
    out = interp.run(x, initial_env={relu: torch.ones(4, 8)})
    assert torch.allclose(out, model[2](torch.ones(4, 8))), "a value given in initial_env replaces the node's value"
    assert relu.name not in interp.stats or interp.stats[relu.name]["calls"] == 0, "a node given in initial_env does not run"
    output = [n for n in gm.graph.nodes if n.op == "output"][0]
    with gm.graph.inserting_before(output):
        doubled = gm.graph.call_function(torch.mul, (output.args[0], 2.0))
    output.args = (doubled,)                      # edited, not recompiled
    report = lab.profile_graph(gm, x, runs=1)
    assert torch.allclose(report["result"], 2 * model(x)), "report['result'] comes from interpreting the graph, not gm's stale code"
