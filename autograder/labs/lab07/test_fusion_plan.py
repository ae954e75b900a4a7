"""Part `fusion_plan`: the learner's partition of AOTAutograd's forward and backward graphs, against the
reference planner run on P0's own trace of the same functions and models."""
import functools

import pytest

from autograder.labs.lab07 import oracle

CASES = ["chain", "bias_gelu", "softmax", "layernormish", "silu_mlp", "col_sum", "masked", "mm_cycle", "row_bcast",
         "tiny_mlp", "tiny_block"]


@functools.lru_cache(maxsize=None)
def expected(case):
    return oracle.graphs_of(case)


_got = {}


def learner(student, case):
    if case not in _got:
        _got[case] = student.run("plan", case, True)
    return _got[case]


def which(k):
    return "forward" if k == 0 else "backward"


@pytest.mark.weight(2)
@pytest.mark.parametrize("case", ["chain", "masked", "layernormish", "col_sum", "tiny_block"])
def test_is_pointwise_and_is_reduction(student, case):
    got = learner(student, case)
    for k, (gm, mine) in enumerate(zip(expected(case), got)):
        assert "error" not in mine, f"{case} {which(k)} graph: {mine.get('error')}: {mine.get('message')}"
        want_p = [n.name for n in gm.graph.nodes if oracle.pointwise(n)]
        want_r = [n.name for n in gm.graph.nodes if oracle.reduction(n)]
        assert mine["pointwise"] == want_p, (
            f"{case} {which(k)} graph: the pointwise nodes are {want_p}, is_pointwise said {mine['pointwise']}")
        assert mine["reduction"] == want_r, (
            f"{case} {which(k)} graph: the fusible reductions are {want_r}, is_reduction said {mine['reduction']}")


@pytest.mark.weight(2)
@pytest.mark.parametrize("case", CASES)
def test_plan(student, case):
    got = learner(student, case)
    graphs = expected(case)
    assert len(got) == len(graphs) and [g["nodes"] for g in got] == [[n.name for n in gm.graph.nodes] for gm in graphs], (
        f"{case}: the traced graphs differ between the grader and your notebook (did the setup cell change?)")
    for k, (gm, mine) in enumerate(zip(graphs, got)):
        assert "error" not in mine, f"plan_fusion on the {which(k)} graph of {case} raised {mine.get('error')}: {mine.get('message')}"
        want = oracle.reference_plan(gm)
        problems = oracle.validate_plan(gm, mine["groups"])
        assert not problems, f"{case} {which(k)} graph: your plan is not a valid fusion: {problems[0]}"
        assert len(mine["groups"]) == len(want), (
            f"{case} {which(k)} graph should plan {len(want)} kernels, your plan has {len(mine['groups'])}: "
            f"expected {want}, got {mine['groups']}")
        assert mine["groups"] == want, f"{case} {which(k)} graph: expected the groups {want}, got {mine['groups']}"

# IPT-CANARY lab07 test_fusion_plan.py: hidden grading text, never shown to learners
