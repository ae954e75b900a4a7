"""Public tests of part `decompose` (run them with check("decompose"))."""
import torch
import torch.nn.functional as F


def test_gelu_linear(lab):
    def f(x, w):
        return F.gelu(x @ w)

    x, w = torch.randn(3, 4), torch.randn(4, 5)
    gm = lab.to_core_aten(f, x, w)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert all(torch.Tag.core in t.tags for t in targets), f"not Core ATen: {[t for t in targets if torch.Tag.core not in t.tags]}"
    assert lab.op_histogram(gm) == {"aten.mm.default": 1, "aten.gelu.default": 1}, lab.op_histogram(gm)
    assert torch.allclose(lab.run_graph(gm, x, w), f(x, w), atol=1e-6), "run_graph on the decomposed graph should compute what f computes"


def test_run_graph_walks_the_graph(lab):
    def f(x):
        return torch.tanh(x) + 1

    x = torch.randn(5)
    gm = lab.to_core_aten(f, x)
    output = [n for n in gm.graph.nodes if n.op == "output"][0]
    first = output.args[0][0] if isinstance(output.args[0], (tuple, list)) else output.args[0]
    with gm.graph.inserting_before(output):
        neg = gm.graph.call_function(torch.ops.aten.neg.default, (first,))
    output.args = (neg,)                          # edited, not recompiled: gm's own code is stale
    assert torch.allclose(lab.run_graph(gm, x), -f(x)), "run_graph should walk gm.graph (the edited graph), not call gm"
    with gm.graph.inserting_before(output):
        gm.graph.call_method("neg", (neg,))
    try:
        lab.run_graph(gm, x)
        raised = None
    except Exception as exc:  # noqa: BLE001
        raised = type(exc).__name__
    assert raised == "RuntimeError", f"a call_method node in the graph should make run_graph raise RuntimeError, got {raised}"


def test_gelu_is_core(lab):
    x = torch.randn(3, 4)
    gm = lab.to_core_aten(F.gelu, x)
    assert lab.op_histogram(gm) == {"aten.gelu.default": 1}, f"gelu is Core ATen and stays aten.gelu, got {lab.op_histogram(gm)}"
