"""Part `rewrite`: x * sigmoid(x) -> F.silu(x); the whole graph afterwards (node for node, vs the rewrite
done here on real fx), the count, and outputs vs eager. Every model also returns x.sigmoid().mul(x)."""
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab06 import oracle

HARNESS = " (plus x.sigmoid().mul(x))"
MODELS = {
    "silu_none": "a graph without the pattern (x * tanh(x), a lone sigmoid)",
    "silu_one": "x * torch.sigmoid(x)",
    "silu_many": "four matches: sigmoid(h) * h, torch.mul(h, h.sigmoid()), g.sigmoid() * g inside a product, x * sigmoid(x) in a .mul",
    "silu_near": "near misses (x * sigmoid(y), a sigmoid with another user, sigmoid(y) * sigmoid(y), (y + 0) * sigmoid(y), "
                 "y.add(y.sigmoid()), y.mul(y.tanh())) and one match",
    "silu_mixed": "three matches in a loop, each next to a sigmoid of the same value kept for later",
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_fuse_silu(student, name):
    check_silu(student, name, f"fuse_silu on {MODELS[name]}{HARNESS}")


@pytest.mark.weight(5)
def test_generated_programs(student):
    """Three programs drawn from this submission's grading seed, mixing every silu spelling with near misses."""
    rng = case_rng(62)
    for _ in range(3):
        program = oracle.generated_program(rng, int(rng.integers(3, 10)), ops=oracle.SILU_OPS + ("add", "tanh", "relu"))
        at = int(rng.integers(len(program) + 1))     # always one near miss that is an add: x + sigmoid(x)
        program.insert(at, ["silu_add", 1 + at, int(rng.integers(2 + at)), 1.0])
        check_silu(student, "program", f"fuse_silu on the generated program {oracle.program_text(program)}{HARNESS}", program)


def check_silu(student, name, what, program=None):
    got, want = student.run("silu", name, 0, program), oracle.silu_expect(name, 0, program)
    got = replies.dict_of(got, {"count", "outs", "graph"}, "the silu scenario")
    count = replies.integer(got["count"], f"{what}: the returned count")
    assert count == want["count"], f"{what}: should rewrite {want['count']} time(s), returned {count}"
    oracle.compare_graphs(got["graph"], want["graph"],
                          f"{what}: the graph afterwards (each match: F.silu(x) with no kwargs inserted before the mul, "
                          "the mul and the sigmoid erased)")
    oracle.close(got["outs"], want["outs"], f"{what}: the rewritten graph's output")

# IPT-CANARY lab06 test_rewrite.py: hidden grading text, never shown to learners
