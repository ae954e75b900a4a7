"""Public tests of part `ptq` (run them with check("ptq"))."""
import torch
import torch.nn.functional as F
from torch import nn


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3)).eval()


def test_prepare_inserts_one_observer_per_linear_and_changes_nothing(lab):
    m = model()
    gm = lab.prepare_ptq(torch.fx.symbolic_trace(m))
    observers = [mod for mod in gm.modules() if isinstance(mod, lab.MinMaxObserver)]
    assert len(observers) == 2, f"a model with two Linears should get two observers, got {len(observers)}"
    x = torch.randn(4, 8)
    assert torch.equal(gm(x), m(x)), "a prepared model should compute exactly what the float model computes"


def test_convert_quantizes_like_the_spec(lab):
    m = model()
    gm = lab.prepare_ptq(torch.fx.symbolic_trace(m))
    calib = torch.randn(16, 8)
    gm(calib)
    gm = lab.convert_ptq(gm)
    quant = [mod for mod in gm.modules() if isinstance(mod, lab.QuantLinear)]
    assert len(quant) == 2 and not any(isinstance(mod, lab.MinMaxObserver) for mod in gm.modules()), \
        "after convert_ptq: two QuantLinear modules and no observers"
    assert quant[0].weight_q.dtype == torch.int8 and quant[0].weight_q.shape == (6, 8), \
        f"QuantLinear.weight_q should be int8 (6, 8), got {quant[0].weight_q.dtype} {tuple(quant[0].weight_q.shape)}"
    # the first layer by hand: input per tensor in [0, 255] from the calibration range, weight per channel
    x = torch.randn(3, 8)
    lo, hi = min(calib.min(), 0), max(calib.max(), 0)
    s = (hi - lo) / 255
    z = torch.clamp(-torch.round(lo / s), 0, 255)
    x_hat = (torch.clamp(torch.round(x * (1.0 / s)) + z, 0, 255) - z) * s
    w = m[0].weight.detach()
    ws = w.abs().amax(1, keepdim=True) / 127.5
    w_hat = torch.clamp(torch.round(w * (1.0 / ws)), -128, 127) * ws
    want = F.linear(x_hat, w_hat, m[0].bias)
    assert torch.allclose(quant[0](x), want, atol=1e-6), "QuantLinear(x) differs from F.linear on the fake-quantized input and weight"
