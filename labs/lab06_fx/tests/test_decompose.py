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
    assert torch.allclose(lab.run_graph(gm, x, w), f(x, w), atol=1e-6)
