"""Part `dce_cse`: purity, dead-code elimination and CSE; node lists and outputs vs the lab's rules run on
real fx here. Every model sits in a harness with unused in-place ops (fx's default purity misses them),
a value read before and after an in-place op, and x + 2 vs x + 2.0 (fx's CSEPass merges those)."""
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab06 import oracle

HARNESS = " (plus t.mul_(2) between two t * 3, F.relu(w, inplace=True), x + 2 and x + 2.0, a dead sum)"
MODELS = {
    "dead_chain": "a model with a dead chain, an unused parameter read, a dead module call and a dead cat/getitem",
    "dead_impure": "a model with unused in-place ops (add_, inplace=True, ReLU(inplace=True)), rand_like and torch._assert",
    "dups": "a model with duplicated relu, +1, slices, cat of lists, module calls, and near-duplicates with other kwargs",
    "no_merge": "a model with duplicated rand_like, in-place ops and in-place modules, and x + 1 / x + 1.0 / x + True",
}
STEPS = [["dce"], ["cse"], ["cse", "dce"]]


@pytest.mark.parametrize("which", STEPS, ids=["-".join(s) for s in STEPS])
@pytest.mark.parametrize("name", list(MODELS))
def test_passes(student, name, which):
    check_clean(student, name, which, f"{' then '.join(which)} on {MODELS[name]}{HARNESS}")


def check_clean(student, name, which, what, program=None):
    got, want = student.run("clean", name, which, 0, program), oracle.clean_expect(name, which, 0, program)
    got = replies.dict_of(got, {"removed", "nodes", "outs"}, "the clean scenario")
    removed = replies.dict_of(got["removed"], set(which), f"{what}: the counts returned")
    for step in which:
        n = replies.integer(removed[step], f"{what}: what {step} returned")
        assert n == want["removed"][step], f"{what}: {step} should report removing {want['removed'][step]} node(s), got {n}"
    nodes = replies.list_of(got["nodes"], f"{what}: the nodes left")
    assert nodes == want["nodes"], (
        f"{what}: the graph should have {len(want['nodes'])} nodes afterwards, got {len(nodes)}; "
        f"missing {sorted(set(want['nodes']) - set(map(str, nodes)))[:4]}, extra {sorted(set(map(str, nodes)) - set(want['nodes']))[:4]}")
    oracle.close(got["outs"], want["outs"], f"{what}: the cleaned graph's output")


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["dead_impure", "no_merge", "dups"])
def test_is_impure(student, name):
    want = oracle.clean_expect(name, [])["impure"]
    got = replies.dict_of(student.run("impurity", name), set(want), f"is_impure on {MODELS[name]}")
    wrong = {k: v for k, v in want.items() if got.get(k) is not v}
    assert not wrong, f"is_impure on {MODELS[name]}{HARNESS}: these nodes should be {wrong} (True = impure)"

@pytest.mark.weight(6)
def test_generated_programs(student):
    """Two programs drawn from this submission's grading seed: some steps repeated (CSE merges them), most
    values dead (DCE removes them), inside the same harness."""
    rng = case_rng(61)
    for _ in range(2):
        program = oracle.generated_program(rng, int(rng.integers(4, 12)), repeat=0.3)
        for which in STEPS:
            check_clean(student, "program", which, f"{' then '.join(which)} on the generated program "
                                                   f"{oracle.program_text(program)}{HARNESS}", program)
        want = oracle.clean_expect("program", [], 0, program)["impure"]
        got = replies.dict_of(student.run("impurity", "program", 0, program), set(want), "is_impure on a generated program")
        wrong = {k: v for k, v in want.items() if got.get(k) is not v}
        assert not wrong, f"is_impure on {oracle.program_text(program)}{HARNESS}: these nodes should be {wrong} (True = impure)"


# IPT-CANARY lab06 test_dce_cse.py: hidden grading text, never shown to learners
