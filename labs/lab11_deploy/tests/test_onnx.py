"""Public tests of part `onnx` (run them with check("onnx"))."""
import functools
import logging
import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn


def quiet():
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")


def run(data, *arrays):
    import onnxruntime
    session = onnxruntime.InferenceSession(bytes(data), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(arrays), f"the ONNX model takes {len(names)} inputs, the model {len(arrays)}"
    return session.run(None, dict(zip(names, (a.numpy() for a in arrays))))


def eager_log_cosh(x, t):
    return t * (torch.logaddexp(x / t, -x / t) - math.log(2.0))


class Temps(nn.Module):
    def __init__(self, temps):
        super().__init__()
        self.temps = temps

    def forward(self, x):
        return tuple(torch.ops.lab11.log_cosh(x, t) for t in self.temps)


@functools.cache
def translated(lab, dtype):
    quiet()
    program = torch.onnx.export(Temps((0.1, 4.0)), (torch.zeros(2, 3, dtype=dtype),), dynamo=True, verbose=False,
                                dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=1024)},),
                                custom_translation_table={torch.ops.lab11.log_cosh.default: lab.log_cosh_onnx})
    return program.model_proto.SerializeToString()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_translation(lab, dtype):
    x = torch.tensor([[0.0, 0.5, -2.0], [100.0, -100.0, 1e4], [float("inf"), float("-inf"), float("nan")]],
                     dtype=dtype)
    got = run(translated(lab, dtype), x)
    tol = 1e-9 if dtype == torch.float64 else 1e-5
    for k, t in enumerate((0.1, 4.0)):
        want = eager_log_cosh(x, t)
        g = torch.from_numpy(got[k])
        assert g.dtype == dtype, f"temperature {t}: the output should be {dtype}, got {g.dtype}"
        assert torch.allclose(g, want, rtol=tol, atol=tol, equal_nan=True), (
            f"log_cosh(x, {t}) in onnxruntime ({dtype}) differs from eager on\n{x}:\ngot\n{g}\nwant\n{want}")


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(2, 3)

    def forward(self, x, y):
        h = self.a(x) + self.b(y)
        return torch.ops.lab11.log_cosh(h, 0.2), torch.ops.lab11.log_cosh(h, 3.0).sum(-1)


def test_export_dynamic_batch(lab):
    quiet()
    torch.manual_seed(0)
    model = Head().eval()
    data = lab.export_onnx(model, (torch.randn(3, 4), torch.randn(3, 2)))
    assert isinstance(data, bytes), f"export_onnx should return bytes, got {type(data).__name__}"
    for batch in (1, 7):
        x, y = torch.randn(batch, 4) * 300, torch.randn(batch, 2)
        got = run(data, x, y)
        with torch.no_grad():
            want = model(x, y)
        assert len(got) == 2, f"the model has 2 outputs, the ONNX model {len(got)}"
        for k in range(2):
            g = torch.from_numpy(np.asarray(got[k]))
            assert g.shape == want[k].shape, f"batch of {batch}: output {k} has shape {tuple(g.shape)}, eager {tuple(want[k].shape)}"
            assert torch.allclose(g, want[k], rtol=1e-4, atol=1e-5), (
                f"batch of {batch}, |x| up to ~1000: output {k} differs from eager by "
                f"{(g - want[k]).abs().max().item():.3g}")
