"""lab11's P1 side keeps torch's ONNX operator registry once per worker (scenarios._torchlib_once and
_registry_once): the models exported must be byte for byte those of torch's own path, and the custom translation
one export adds must not reach the next."""
import subprocess
import sys
from pathlib import Path

EXPORTS = '''
import hashlib, importlib, sys, tomllib, warnings
warnings.simplefilter("ignore")
for name in tomllib.load(open("autograder/labs/lab11/lab.toml", "rb"))["preload"]:
    importlib.import_module(name)
import torch
if sys.argv[1] == "cached":                      # else torch's own path: every export builds everything afresh
    from autograder.labs.lab11 import scenarios
    scenarios._torchlib_once()

class Model(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4, dtype=dtype)

    def forward(self, x):
        return torch.tanh(x[0, 0]) + torch.nn.functional.softplus(x) * x.cosh(), self.fc(x).amax(-1)

torch.manual_seed(0)
x, batch = torch.linspace(-1, 1, 6).reshape(2, 3), torch.export.Dim("batch", min=1, max=512)
for dtype in (torch.float32, torch.float64):
    program = torch.onnx.export(Model(dtype), (x.to(dtype),), dynamo=True, verbose=False, dynamic_shapes=({0: batch},))
    print(hashlib.sha256(program.model_proto.SerializeToString()).hexdigest())
if sys.argv[1] == "cached":
    from torch.onnx._internal.exporter._registration import ONNXRegistry
    assert getattr(ONNXRegistry.__dict__["from_torchlib"].__func__, "_ipt_once", False), "the cache is not in place"
    one, two = ONNXRegistry.from_torchlib(), ONNXRegistry.from_torchlib()
    one.register_op(torch.ops.aten.sin.default, lambda x: x, False)
    assert len(one.functions["aten::sin"]) == len(two.functions["aten::sin"]) + 1, "a custom translation leaked"
'''


def test_exports_through_the_kept_registry_are_torchs_own():
    root = Path(__file__).resolve().parents[2]
    got = {}
    for mode in ("torch", "cached"):
        done = subprocess.run([sys.executable, "-c", EXPORTS, mode], capture_output=True, text=True, timeout=300, cwd=root)
        assert done.returncode == 0, done.stderr[-3000:]
        got[mode] = done.stdout.split()
    assert len(got["torch"]) == 2 and got["torch"] == got["cached"], got
