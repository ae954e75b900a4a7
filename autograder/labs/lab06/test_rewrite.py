"""Part `rewrite`: x * sigmoid(x) -> F.silu(x); the whole graph afterwards (node for node, vs the rewrite
done here on real fx), the count, and outputs vs eager. Every model also returns x.sigmoid().mul(x)."""
import pytest

from autograder.engine import replies
from autograder.labs.lab06 import oracle

HARNESS = " (plus x.sigmoid().mul(x))"
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
    what = f"fuse_silu on {MODELS[name]}{HARNESS}"
    got = replies.dict_of(got, {"count", "outs", "graph"}, "the silu scenario")
    count = replies.integer(got["count"], f"{what}: the returned count")
    assert count == want["count"], f"{what}: should rewrite {want['count']} time(s), returned {count}"
    oracle.compare_graphs(got["graph"], want["graph"],
                          f"{what}: the graph afterwards (each match: F.silu(x) with no kwargs inserted before the mul, "
                          "the mul and the sigmoid erased)")
    oracle.close(got["outs"], want["outs"], f"{what}: the rewritten graph's output")

# IPT-CANARY lab06 test_rewrite.py: hidden grading text, never shown to learners
