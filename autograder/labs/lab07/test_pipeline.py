"""Part `pipeline`: the learner's fusing_backend through AOTAutograd on functions and small models the notebook
does not show (outputs and gradients equal to eager, a second call, a second shape), and the kernels fuse_graph
makes for the forward and backward graphs, compiled and run by the grader in its clean room."""
import numpy as np
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab07 import oracle

CASES = [("chain", 1), ("bias_gelu", 2), ("log_softmax", 4), ("layernormish", 5), ("full_sum", 7), ("masked", 9),
         ("mm_cycle", 10), ("relu_clamp", 11), ("tiny_block", 14), ("tanh_net", 15), ("sum_dims", 16),
         ("mean_all_keep", 17), ("scalar_mix", 18), ("outer_bcast", 19), ("amax_of_saved", 1), ("zero_d_dims", 20)]
FUSE_CASES = ["chain", "bias_gelu", "log_softmax", "layernormish", "masked", "mm_cycle", "relu_clamp", "tiny_block",
              "sum_dims", "col_sum", "scalar_mix", "zero_d_dims"]
_fused = {}


@pytest.mark.weight(2)
def test_compiled_sum_runs_the_fused_kernel(student):
    """A backend that hands Dynamo back an unfused graph computes every value eager does: only the lab's own rule
    tells them apart. The fused kernel accumulates a sum in double, so on rows whose terms cancel (1e8 first,
    -1e8 last, small integers between) it returns the exact sum; eager PyTorch's float32 sum drops the small
    terms that meet the large ones. P0 draws the rows from the grading seed and keeps only rows on which eager
    is off by at least 4."""
    rng = case_rng(73)
    n = int(rng.integers(3000, 9000))
    for _ in range(100):
        x = rng.integers(1, 4, (3, n)).astype(np.float32)
        x[:, 0], x[:, -1] = 1e8, -1e8
        w = np.ones(n, np.float32)
        w[1:-1] = rng.integers(1, 3, n - 2)
        exact = (x.astype(np.float64) * w).sum(-1)
        eager = (torch.from_numpy(x) * torch.from_numpy(w)).sum(-1).double().numpy()
        if np.abs(eager - exact).min() >= 4:
            break
    else:
        raise RuntimeError("no rows on which eager's float32 sum is off by 4 or more were found")
    what = (f"torch.compile(lambda a, b: (a * b).sum(-1), backend=fusing_backend) on rows of {n} terms that cancel "
            f"(1e8 first, -1e8 last, small integers between)")
    got = student.run("backend_cancelling_sum", x, w)
    assert not isinstance(got, dict) or "error" not in got, f"{what} failed: {got.get('error')}: {str(got.get('message'))[:300]}"
    got = replies.array(got, f"{what}: the output", shape=(3,))
    off = np.abs(got.astype(np.float64) - exact)
    assert np.all(off < 0.5), (
        f"{what}: the compiled sum is off the exact sum by up to {off.max():.0f}, as eager PyTorch's float32 sum is; "
        f"your fused kernel accumulates in double and gets it exactly: is the compiled function running your kernels?")


def fused_ok(student, clean_room, case):
    """The kernel check of one case, once per module (values through the backend earn nothing without it)."""
    if case not in _fused:
        try:
            check_fused(student, clean_room, case)
            _fused[case] = None
        except AssertionError as exc:
            _fused[case] = str(exc)
    assert _fused[case] is None, _fused[case]


@pytest.mark.weight(2)
@pytest.mark.parametrize("case,seed", CASES)
def test_values_and_gradients(student, clean_room, case, seed):
    fused_ok(student, clean_room, case)
    check_values(student, case, seed)


@pytest.mark.weight(8)
def test_generated_functions(student, clean_room):
    """Two functions drawn from this submission's grading seed: the kernels fuse_graph makes for them, run by
    the grader, and the compiled function's values and gradients."""
    rng = case_rng(72)
    for k in range(2):
        spec = oracle.generated_spec(rng)
        check_fused(student, clean_room, "generated", spec)
        check_values(student, "generated", int(rng.integers(1 << 20)), spec)


def check_values(student, case, seed, spec=None):
    got, want = student.run("backend_case", case, seed, True, spec), oracle.eager_case(case, seed, True, spec)
    case = case if spec is None else oracle.spec_text(spec)
    what = f"torch.compile({case}, backend=fusing_backend)"
    assert not isinstance(got, dict) or "error" not in got, f"{what} failed: {got.get('error')}: {got.get('message')}"
    got = replies.dict_of(got, {"out", "again", "grads"}, what)
    oracle.close(got["out"], want["out"], f"{case} compiled with your backend: the output", rtol=2e-4, atol=2e-5)
    oracle.close(got["again"], want["again"], f"{case}: the output of a second call of the compiled function on new inputs",
                 rtol=2e-4, atol=2e-5)
    grads = replies.dict_of(got["grads"], set(want["grads"]), f"{case}: the gradients")
    for name, grad in want["grads"].items():
        assert (grads[name] is None) == (grad is None), f"{case}: the gradient of {name} is missing"
        if grad is not None:
            oracle.close(grads[name], grad, f"{case}: the gradient of {name} through your backend", rtol=5e-4, atol=5e-5)


@pytest.mark.weight(2)
@pytest.mark.parametrize("case", FUSE_CASES)
def test_fused_kernels_run_by_the_grader(student, clean_room, case):
    fused_ok(student, clean_room, case)


def check_fused(student, clean_room, case, spec=None, subsets=None):
    """fuse_graph's kernels for the forward and backward graphs: as many as the plan has groups, each writing its
    group's outputs, and each one's C source, compiled and run by the grader, computing those outputs. With
    `subsets` (one list of groups per graph), fuse_graph(gm, groups) must fuse exactly those groups."""
    graphs = oracle.graphs_of(case, True, spec)
    got = student.run("fuse_case", case, spec, subsets)
    case = case if spec is None else oracle.spec_text(spec)
    if subsets is not None:
        case = f"{case} (fuse_graph given some of the plan's groups)"
    for k, (entry, gm) in enumerate(replies.pairs(got, graphs, f"fuse_graph on {case}")):
        what = f"{case}, {'forward' if k == 0 else 'backward'} graph"
        entry = replies.dict_of(entry, {"nodes"}, what)
        assert entry["nodes"] == [n.name for n in gm.graph.nodes], (
            f"{what}: the traced graphs differ between the grader and your notebook (did the setup cell change?)")
        assert "error" not in entry, f"{what}: fuse_graph raised {entry.get('error')}: {entry.get('message')}"
        listed = replies.list_of(replies.dict_of(entry, {"kernels"}, what)["kernels"], f"{what}: the kernels fuse_graph returned")
        kernels = [oracle.kernel_reply(kr, f"{what}, kernel {j}") for j, kr in enumerate(listed)]
        matched = oracle.match_kernels(gm, kernels, what, None if subsets is None else subsets[k])
        values = oracle.node_values(gm, gm.meta["ipt_inputs"][0])
        oracle.run_kernels(clean_room, gm, values, matched, what, rtol=5e-4, atol=5e-5)


@pytest.mark.weight(2)
def test_fuse_graph_fuses_the_groups_it_is_given(student, clean_room):
    """fuse_graph(gm, groups): a kernel for each group given (P0 draws which groups of its plan), the rest ATen."""
    rng = case_rng(75)
    for case in ("tiny_block", "log_softmax"):
        subsets = [[g for g in oracle.reference_plan(gm) if rng.random() < 0.6] for gm in oracle.graphs_of(case, True)]
        check_fused(student, clean_room, case, None, subsets)


PASS_CASES = ["tiny_block", "log_softmax", "mm_cycle", "masked", "bias_gelu"]


@pytest.mark.weight(4)
def test_worth_fusing_and_count_passes(student):
    """worth_fusing on every group of P0's plans, count_passes with the whole plan, with a subset P0 draws and with
    no group, on fixed cases and a function drawn from the grading seed; P0 counts itself."""
    rng = case_rng(74)
    cases = [(case, None) for case in PASS_CASES] + [("generated", oracle.generated_spec(rng))]
    for case, spec in cases:
        graphs = oracle.graphs_of(case, True, spec)
        plans = [oracle.reference_plan(gm) for gm in graphs]
        subsets = [[g for g in plan if rng.random() < 0.5] for plan in plans]
        got = student.run("pass_counts", case, spec, plans, subsets)
        name = case if spec is None else oracle.spec_text(spec)
        for k, (entry, gm) in enumerate(replies.pairs(got, graphs, f"worth_fusing and count_passes on {name}")):
            what = f"{name}, {'forward' if k == 0 else 'backward'} graph"
            entry = replies.dict_of(entry, {"nodes"}, what)
            assert entry["nodes"] == [n.name for n in gm.graph.nodes], (
                f"{what}: the traced graphs differ between the grader and your notebook (did the setup cell change?)")
            assert "error" not in entry, f"{what}: worth_fusing or count_passes raised {entry.get('error')}: {entry.get('message')}"
            entry = replies.dict_of(entry, {"worth", "passes"}, what)
            for got_worth, group in replies.pairs(entry["worth"], plans[k], f"{what}: worth_fusing of each group"):
                assert got_worth is (len(group) >= 2), (
                    f"{what}: worth_fusing({group}) should be {len(group) >= 2}: a group is worth a kernel when it holds "
                    "at least two nodes")
            labelled = [("the whole plan", plans[k]), ("some of the plan's groups", subsets[k]), ("no group", [])]
            for got_count, (label, groups) in replies.pairs(entry["passes"], labelled, f"{what}: count_passes"):
                want = oracle.passes(gm, groups)
                assert got_count == want, (f"{what}: count_passes with {label} ({len(groups)} group(s)) should be {want}, "
                                           f"got {got_count}: one per group, plus one per ATen call outside the groups "
                                           "that is not a view")


@pytest.mark.weight(2)
def test_single_node_groups_stay_aten_calls(student):
    """(a * b).sum(-1) + c.sum(-1): the first sum closes a two-node group (a kernel, accumulated in double: exact on
    rows whose terms cancel), the second is a group of one node and stays ATen's float32 sum, which drops the small
    terms, as eager does. P0 draws rows on which eager's float32 sums are off by 4 or more."""
    rng = case_rng(76)
    n = int(rng.integers(3000, 9000))
    for _ in range(200):
        x = rng.integers(1, 4, (3, n)).astype(np.float32)
        x[:, 0], x[:, -1] = 1e8, -1e8
        w = np.ones(n, np.float32)
        w[1:-1] = rng.integers(1, 3, n - 2)
        c = rng.integers(1, 4, (3, n)).astype(np.float32)
        c[:, 0], c[:, -1] = 1e8, -1e8
        exact_ab, exact_c = (x.astype(np.float64) * w).sum(-1), c.astype(np.float64).sum(-1)
        eager_ab = (torch.from_numpy(x) * torch.from_numpy(w)).sum(-1).double().numpy()
        eager_c = torch.from_numpy(c).sum(-1).numpy()
        if np.abs(eager_ab - exact_ab).min() >= 4 and np.abs(eager_c.astype(np.float64) - exact_c).min() >= 4:
            break
    else:
        raise RuntimeError("no rows on which eager's float32 sums are off by 4 or more were found")
    what = (f"torch.compile(lambda a, b, c: (a * b).sum(-1) + c.sum(-1), backend=fusing_backend) on rows of {n} terms "
            f"that cancel (1e8 first, -1e8 last, small integers between)")
    got = student.run("backend_mixed_sum", x, w, c)
    assert not isinstance(got, dict) or "error" not in got, f"{what} failed: {got.get('error')}: {str(got.get('message'))[:300]}"
    got = replies.array(got, f"{what}: the output", shape=(3,)).astype(np.float64)
    want = (exact_ab.astype(np.float32) + eager_c).astype(np.float64)
    if np.any(np.abs(got - want) >= 0.5):
        fused_c = np.abs(got - (exact_ab + exact_c)) < 0.5
        unfused_ab = np.abs(got - (eager_ab + eager_c)) < 0.5
        hint = ("c.sum(-1), a group of one node, was fused (its exact sum came back): it should stay an ATen call"
                if fused_c.all() else "(a * b).sum(-1), a group of two nodes, did not run as your kernel (eager's float32 sum came back)"
                if unfused_ab.all() else "the values are neither")
        raise AssertionError(f"{what}: off by up to {np.abs(got - want).max():.0f}; {hint}")


@pytest.mark.weight(2)
def test_new_shape_recompiles(student, clean_room):
    fused_ok(student, clean_room, "chain")
    got = student.run("backend_recompile")
    assert not isinstance(got, dict) or "error" not in got, (
        f"calling a compiled function with a second shape failed: {got.get('error')}: {got.get('message')}")
    got = replies.dict_of(got, {"outs"}, "a compiled function called at two shapes")
    for out, n in replies.pairs(got["outs"], [6, 11], "the outputs at two shapes"):
        x = torch.linspace(-2, 2, n)
        oracle.close(out, (torch.tanh(x) * 2 + x.exp()).numpy(), f"tanh(x) * 2 + exp(x) on a second shape ({n} elements)")
    what = ("torch.compile(lambda x, b: torch.sigmoid(x) * 2 + b, backend=fusing_backend) with default settings, called at "
            "shapes (4, 8), (6, 3), (5, 7): the second shape is recompiled with symbolic sizes")
    dyn = got.get("dynamic_outs")
    assert not isinstance(dyn, dict) or "error" not in dyn, (
        f"{what} failed ({dyn.get('error')}: {str(dyn.get('message'))[:200]}); a graph with SymInt sizes should run unfused")
    for out, (rows, cols) in replies.pairs(dyn, [(4, 8), (6, 3), (5, 7)], what):
        x, b = torch.linspace(-3, 3, rows * cols).reshape(rows, cols), torch.linspace(-1, 1, cols)
        oracle.close(out, (torch.sigmoid(x) * 2 + b).numpy(), f"{what}: the output at ({rows}, {cols})")
    what = ("torch.compile(lambda x, n: (x * n).sin(), backend=fusing_backend) called with n = 2, 3, 5: the second n "
            "is recompiled as a SymInt input of the graph")
    ints = got.get("int_outs")
    assert not isinstance(ints, dict) or "error" not in ints, (
        f"{what} failed ({ints.get('error')}: {str(ints.get('message'))[:200]}); a graph with a SymInt input should run unfused")
    for out, n in replies.pairs(ints, [2, 3, 5], what):
        oracle.close(out, (torch.linspace(-1, 1, 9) * n).sin().numpy(), f"{what}: the output for n = {n}")

# IPT-CANARY lab07 test_pipeline.py: hidden grading text, never shown to learners
