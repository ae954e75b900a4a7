"""Public tests of part `conv_bn_fold` (run them with check("conv_bn_fold"))."""
import pytest
import torch
import torch.fx
from torch import nn


def make():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    return m


def test_folds(lab):
    m, x = make().eval(), torch.randn(2, 3, 8, 8)
    gm = lab.fold_conv_bn(torch.fx.symbolic_trace(m))
    kinds = [type(gm.get_submodule(n.target)).__name__ for n in gm.graph.nodes if n.op == "call_module"]
    assert kinds == ["Conv2d", "ReLU"], f"the BatchNorm2d should be folded away, got calls of {kinds}"
    assert torch.allclose(gm(x), m(x), atol=1e-5), "the folded model should compute what the original computes"


def test_training_refused(lab):
    with pytest.raises(ValueError):
        lab.fold_conv_bn(torch.fx.symbolic_trace(make().train()))


def test_only_conv2d_batchnorm2d(lab):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).eval()
    gm = lab.fold_conv_bn(torch.fx.symbolic_trace(m))
    kinds = [type(gm.get_submodule(n.target)).__name__ for n in gm.graph.nodes if n.op == "call_module"]
    assert kinds == ["Linear", "BatchNorm1d"], f"only Conv2d + BatchNorm2d fold: Linear + BatchNorm1d stays, got {kinds}"
