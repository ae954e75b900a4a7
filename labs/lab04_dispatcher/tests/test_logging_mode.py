"""Public tests of part `logging_mode` (run them with check("logging_mode"))."""
import torch
from torch import nn


def test_linear_step(lab):
    torch.manual_seed(0)
    ops = lab.log_training_step(nn.Linear(3, 2), torch.randn(4, 3))
    assert ops[:2] == ["aten.t.default", "aten.addmm.default"], f"the forward of nn.Linear should start with t, addmm; got {ops[:2]}"
    assert "aten.mm.default" in ops, f"the backward should run mm, got {ops}"


def test_mode_returns_results(lab):
    with lab.LoggingMode() as mode:
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert mode.ops == ["aten.ones.default", "aten.ones.default", "aten.mm.default"], f"got {mode.ops}"
    assert torch.equal(y, torch.full((2, 2), 2.0)), "ops under the mode should return their real results"


def test_mode_passes_kwargs(lab):
    with lab.LoggingMode() as mode:
        z = torch.zeros(2, dtype=torch.float64)
    assert mode.ops == ["aten.zeros.default"] and z.dtype == torch.float64, "ops keep their kwargs (dtype=...) under the mode"
