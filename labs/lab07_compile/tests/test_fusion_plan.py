"""Public tests of part `fusion_plan` (run them with check("fusion_plan"))."""
import torch
from torch.fx.experimental.proxy_tensor import make_fx


def graph(lab, fn, *args):
    return make_fx(fn, decomposition_table=lab.DECOMPOSITIONS)(*args)


def test_softmax_plans_three_kernels(lab):
    gm = graph(lab, lambda t: torch.softmax(t, -1), torch.randn(4, 8))
    assert lab.plan_fusion(gm) == [["amax"], ["sub", "exp", "sum_1"], ["div"]], f"got {lab.plan_fusion(gm)}"


def test_chain_is_one_group_and_mm_stays_outside(lab):
    gm = graph(lab, lambda x, w: torch.relu(x @ w) * 2 + 1, torch.randn(3, 4), torch.randn(4, 5))
    assert lab.plan_fusion(gm) == [["relu", "mul", "add"]], f"got {lab.plan_fusion(gm)}"
    names = {n.name: n for n in gm.graph.nodes}
    assert lab.is_pointwise(names["relu"]) and not lab.is_pointwise(names["mm"]), "relu is pointwise, mm is not"


def test_reduction_over_dim0_is_not_fused(lab):
    gm = graph(lab, lambda x: x.exp().sum(0), torch.randn(3, 4))
    names = {n.name: n for n in gm.graph.nodes}
    assert not lab.is_reduction(names["sum_1"]), "a sum over dim 0 of a 2-D tensor is not a fusible reduction"
    assert lab.plan_fusion(gm) == [["exp"]], f"got {lab.plan_fusion(gm)}"
