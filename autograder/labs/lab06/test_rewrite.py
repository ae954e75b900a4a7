"""Part `rewrite`: x * sigmoid(x) -> F.silu(x); counts, what is left, outputs vs eager."""
import pytest

from autograder.labs.lab06 import oracle

MODELS = {
    "silu_none": "a graph without the pattern (x * tanh(x), a lone sigmoid)",
    "silu_one": "x * torch.sigmoid(x)",
    "silu_many": "four matches: sigmoid(h) * h, torch.mul(h, h.sigmoid()), g.sigmoid() * g inside a product, x * sigmoid(x) in a .mul",
    "silu_near": "near misses (x * sigmoid(y), a sigmoid with another user, sigmoid(y) * sigmoid(y), (y + 0) * sigmoid(y)) and one match",
    "silu_mixed": "three matches in a loop, each next to a sigmoid of the same value kept for later",
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_fuse_silu(student, name):
    got, want = student.run("silu", name), oracle.silu_expect(name)
    what = f"fuse_silu on {MODELS[name]}"
    assert got["count"] == want["count"], f"{what}: should rewrite {want['count']} time(s), returned {got['count']}"
    silus = sum(1 for n in got["nodes"] if n == "call_function:torch.nn.functional.silu")
    assert silus == want["silus"], f"{what}: the graph should then call F.silu {want['silus']} time(s), got {silus}"
    assert len(got["nodes"]) == want["nodes"], (
        f"{what}: the graph should have {want['nodes']} nodes afterwards (each rewrite erases the mul and the sigmoid "
        f"and adds one silu), got {len(got['nodes'])}")
    oracle.close(got["outs"], want["outs"], f"{what}: the rewritten graph's output")

# IPT-CANARY lab06 test_rewrite.py: hidden grading text, never shown to learners
