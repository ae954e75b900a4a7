"""Part `fusion_plan`: the learner's partition of AOTAutograd's forward and backward graphs, against the
reference planner run on P0's own trace of the same functions and models."""
import functools

import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab07 import oracle

CASES = oracle.PLAN_CASES


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
@pytest.mark.parametrize("case", ["masked", "layernormish", "col_sum", "tiny_block", "sum_dims", "mean_all_keep",
                                  "dtype_mix", "sum_f64", "neg_dim0", "amax_partial", "vec_mean", "cmp_f64"])
def test_is_pointwise_and_is_reduction(student, case):
    check_classes(learner(student, case), expected(case), case)


def check_classes(got, graphs, case):
    for k, (mine, gm) in enumerate(replies.pairs(got, graphs, f"plan on {case}")):
        mine = replies.dict_of(mine, set(), f"plan on {case}")
        assert "error" not in mine, f"{case} {which(k)} graph: {mine.get('error')}: {mine.get('message')}"
        mine = replies.dict_of(mine, {"pointwise", "reduction"}, f"plan on {case}")
        want_p = [n.name for n in gm.graph.nodes if oracle.pointwise(n)]
        want_r = [n.name for n in gm.graph.nodes if oracle.reduction(n)]
        assert mine["pointwise"] == want_p, (
            f"{case} {which(k)} graph: the pointwise nodes are {want_p}, is_pointwise said {mine['pointwise']}")
        assert mine["reduction"] == want_r, (
            f"{case} {which(k)} graph: the fusible reductions are {want_r}, is_reduction said {mine['reduction']}")


@pytest.mark.weight(2)
@pytest.mark.parametrize("case", CASES)
def test_plan(student, case):
    check_plan(learner(student, case), expected(case), case)


@pytest.mark.weight(8)
def test_generated_functions(student):
    """Three functions drawn from this submission's grading seed (pointwise chains, row and column reductions,
    softmax, a matmul, broadcasting a bias): the classes of every node and the plan, forward and backward."""
    rng = case_rng(71)
    for _ in range(3):
        spec = oracle.generated_spec(rng)
        got, graphs = student.run("plan", "generated", True, spec), oracle.graphs_of("generated", True, spec)
        check_classes(got, graphs, oracle.spec_text(spec))
        check_plan(got, graphs, oracle.spec_text(spec))


def check_plan(got, graphs, case):
    for k, (mine, gm) in enumerate(replies.pairs(got, graphs, f"plan on {case}")):
        mine = replies.dict_of(mine, {"nodes"}, f"plan on {case}")
        assert mine["nodes"] == [n.name for n in gm.graph.nodes], (
            f"{case}: the traced graphs differ between the grader and your notebook (did the setup cell change?)")
        assert "error" not in mine, f"plan_fusion on the {which(k)} graph of {case} raised {mine.get('error')}: {mine.get('message')}"
        mine = replies.dict_of(mine, {"groups"}, f"plan on {case}")
        groups = replies.list_of(mine["groups"], f"plan_fusion on the {which(k)} graph of {case}")
        mine["groups"] = [[replies.string(m, f"plan_fusion on {case}: a group member") for m in
                           replies.list_of(g, f"plan_fusion on {case}: group {j}", min_length=1)] for j, g in enumerate(groups)]
        want = oracle.reference_plan(gm)
        problems = oracle.validate_plan(gm, mine["groups"])
        assert not problems, f"{case} {which(k)} graph: your plan is not a valid fusion: {problems[0]}"
        assert len(mine["groups"]) == len(want), (
            f"{case} {which(k)} graph should plan {len(want)} kernels, your plan has {len(mine['groups'])}: {mine['groups']}")
        first = next((j for j, (g, w) in enumerate(zip(mine["groups"], want, strict=True)) if g != w), None)
        assert first is None, (f"{case} {which(k)} graph: your group {first}, {mine['groups'][first]}, does not follow the rules "
                               f"(check rules 3-5 on its nodes); your plan: {mine['groups']}")

# IPT-CANARY lab07 test_fusion_plan.py: hidden grading text, never shown to learners
