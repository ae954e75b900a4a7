"""Part `dce_cse`: purity, dead-code elimination and CSE; node lists and outputs vs a reference run on real fx."""
import pytest

from autograder.labs.lab06 import oracle

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
    got, want = student.run("clean", name, which), oracle.clean_expect(name, which)
    what = f"{' then '.join(which)} on {MODELS[name]}"
    assert got["removed"] == want["removed"], f"{what}: the passes should report removing {want['removed']}, got {got['removed']}"
    assert got["nodes"] == want["nodes"], (
        f"{what}: the graph should have {len(want['nodes'])} nodes afterwards, got {len(got['nodes'])}; "
        f"missing {sorted(set(want['nodes']) - set(got['nodes']))[:4]}, extra {sorted(set(got['nodes']) - set(want['nodes']))[:4]}")
    oracle.close(got["outs"], want["outs"], f"{what}: the cleaned graph's output")


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["dead_impure", "no_merge"])
def test_is_impure(student, name):
    got, want = student.run("impurity", name), oracle.clean_expect(name, [])["impure"]
    wrong = {k: v for k, v in want.items() if got.get(k) != v}
    assert not wrong, f"is_impure on {MODELS[name]}: these nodes should be {wrong} (True = impure)"

# IPT-CANARY lab06 test_dce_cse.py: hidden grading text, never shown to learners
