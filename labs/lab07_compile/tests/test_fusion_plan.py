"""Public tests of part `fusion_plan` (run them with check("fusion_plan"))."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx


def graph(lab, fn, *args):
    return make_fx(fn, decomposition_table=lab.DECOMPOSITIONS)(*args)


def test_softmax_plans_three_kernels(lab):
    gm = graph(lab, lambda t: torch.softmax(t, -1), torch.randn(4, 8))
    got = lab.plan_fusion(gm)
    assert got == [["amax"], ["sub", "exp", "sum_1"], ["div"]], f"softmax should plan amax; sub, exp, sum_1; div - got {got}"


def test_chain_is_one_group_and_mm_stays_outside(lab):
    gm = graph(lab, lambda x, w: torch.relu(x @ w) * 2 + 1, torch.randn(3, 4), torch.randn(4, 5))
    got = lab.plan_fusion(gm)
    assert got == [["relu", "mul", "add"]], f"relu(x @ w) * 2 + 1 should plan one group [relu, mul, add], got {got}"
    names = {n.name: n for n in gm.graph.nodes}
    assert lab.is_pointwise(names["relu"]), "relu is in POINTWISE_OPS with float32 values: it is pointwise"
    assert not lab.is_pointwise(names["mm"]), "mm is not in POINTWISE_OPS: it is not pointwise"


def test_reduction_over_dim0_is_not_fused(lab):
    gm = graph(lab, lambda x: x.exp().sum(0), torch.randn(3, 4))
    names = {n.name: n for n in gm.graph.nodes}
    assert not lab.is_reduction(names["sum_1"]), "a sum over dim 0 of a 2-D tensor is not a fusible reduction (rule 2)"
    got = lab.plan_fusion(gm)
    assert got == [["exp"]], f"exp is a group of its own and the sum over dim 0 stays an ATen call, got {got}"


def test_explicit_all_dims_reduction_closes_the_group(lab):
    gm = graph(lab, lambda x: (x * 2).sum(dim=(0, 1)), torch.randn(3, 4))
    names = {n.name: n for n in gm.graph.nodes}
    assert lab.is_reduction(names["sum_1"]), "sum(dim=(0, 1)) of a 2-D tensor reduces every dimension: a fusible reduction (rule 2)"
    got = lab.plan_fusion(gm)
    assert got == [["mul", "sum_1"]], f"the all-dims sum closes the group of its input, expected [['mul', 'sum_1']], got {got}"


def test_other_dtypes_are_not_pointwise(lab):
    gm = graph(lab, lambda x: (x.double() * 2).float() + x, torch.randn(5))
    names = {n.name: n for n in gm.graph.nodes}
    assert not lab.is_pointwise(names["mul"]), "a mul on float64 values is not pointwise here (rule 1: float32 or bool only)"
    assert lab.is_pointwise(names["add"]), "the float32 add is pointwise"
