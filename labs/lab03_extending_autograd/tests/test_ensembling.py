"""Public tests of part `ensembling` (run them with check("ensembling"))."""
import torch
from torch import nn


def test_same_input(lab):
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)) for _ in range(3)]
    x = torch.randn(5, 4)
    out = lab.ensemble_predict(models, x)
    assert out.shape == (3, 5, 2), f"expected shape (3, 5, 2), got {tuple(out.shape)}"
    for m, model in enumerate(models):
        assert torch.allclose(out[m], model(x), atol=1e-6), f"model {m}: wrong outputs"
    assert all(p.device.type == "cpu" for model in models for p in model.parameters()), "the caller's models must stay on the CPU"


def test_different_inputs(lab):
    torch.manual_seed(1)
    models = [nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)) for _ in range(2)]
    x = torch.randn(2, 5, 4)
    out = lab.ensemble_predict(models, x, same_input=False)
    for m, model in enumerate(models):
        assert torch.allclose(out[m], model(x[m]), atol=1e-6), f"model {m}: wrong outputs for x[{m}]"


def test_models_with_buffers(lab):
    torch.manual_seed(1)
    models = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).eval() for _ in range(2)]
    for m in models:
        m[1].running_mean.normal_()
        m[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(5, 3)
    out = lab.ensemble_predict(models, x)
    for m, model in enumerate(models):
        assert torch.allclose(out[m], model(x), atol=1e-5), f"model {m} (batch norm in eval mode): stack the buffers too"
