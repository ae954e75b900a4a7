"""Public tests of part `graph_breaks` (run them with check("graph_breaks"))."""
import torch


def test_recording_backend(lab):
    torch._dynamo.reset()
    backend = lab.RecordingBackend()
    f = torch.compile(lambda x: (x.sin() + 1).relu(), backend=backend)
    x = torch.randn(5)
    assert torch.allclose(f(x), (x.sin() + 1).relu()), "the compiled function should return what the function returns"
    assert len(backend.graphs) == 1 and isinstance(backend.graphs[0], torch.fx.GraphModule), "one GraphModule should be recorded"
    torch._dynamo.reset()


def test_analyze_branchy(lab):
    got = lab.analyze_graph_breaks(lab.branchy, torch.randn(8))
    assert got["graphs"] == 2 and got["breaks"] == 1, f"branchy has 2 graphs and 1 break, got {got}"
    assert got["reasons"] == ["control_flow"], f"branchy breaks on data-dependent control flow, got {got['reasons']}"
    assert got["ops"] == [1, 1], f"branchy's graphs have 1 op each (sin and sum; then the branch), got {got['ops']}"


def test_logged_fixed_is_one_graph(lab):
    torch._dynamo.reset()
    x = torch.randn(6)
    out = torch.compile(lab.logged_fixed, fullgraph=True, backend="eager")(x)
    assert torch.allclose(out, torch.relu(x) * 3), "logged_fixed should return relu(x) * 3"
    torch._dynamo.reset()


def test_branchy_fixed_both_branches(lab):
    for shift in (2.0, -2.0):
        torch._dynamo.reset()
        x = torch.randn(8) * 0.1 + shift
        y = x.sin()
        want = y * 2 if y.sum() > 0 else y - 1
        out = torch.compile(lab.branchy_fixed, fullgraph=True, backend="eager")(x)
        assert torch.allclose(out, want), f"branchy_fixed should return what branchy returns (input near {shift:+.0f})"
    torch._dynamo.reset()


def test_classify_break(lab):
    assert lab.classify_break("Tensor.item() call with capture_scalar_outputs=False") == "scalar", "a Tensor.item() reason is 'scalar'"
    assert lab.classify_break("something else entirely") == "other", "an unknown reason is 'other'"
