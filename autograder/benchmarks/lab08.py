"""`make bench LAB=lab08`: an int8 dynamic linear built from the reference's parts, against fp32 and two libraries.

The reference path quantizes the activation per tensor (choose_qparams + quantize, uint8), multiplies with
int_matmul against int8 per-channel weights quantized once, and rescales the int32 result to float
(`acc * (x_scale * w_scale) + bias`). Contenders on the same shapes: fp32 `F.linear`; torchao's
`Int8DynamicActivationInt8WeightConfig` (eager, as `quantize_` leaves it; it is built for torch.compile);
and fbgemm's dynamic quantized Linear through the deprecated `torch.ao.nn.quantized.dynamic`. Every result is
checked against fp32 before timing; rounds interleave the contenders, one thread; figures are medians and
ratios to fp32 (above 1 is faster).
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import warnings

os.environ["OMP_NUM_THREADS"] = "1"
SHAPES = [(1, 1024, 1024), (32, 1024, 1024), (128, 1024, 4096)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks lab08", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per shape (default 9)")
    parser.add_argument("--shapes", default=None, help="M,K,N;M,K,N... (default: three shapes up to 128x1024x4096)")
    args = parser.parse_args(argv)
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]

    import torch
    import torch.nn.functional as F

    from autograder.engine.variants import reference_module
    logging.getLogger("torchao").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    torch.set_num_threads(1)
    ref = reference_module("lab08")
    print(f"{'M x K x N':>18} {'fp32 ms':>9} {'reference int8':>16} {'torchao eager':>15} {'fbgemm (torch.ao)':>18}")
    for m, k, n in shapes:
        torch.manual_seed(0)
        lin = torch.nn.Linear(k, n)
        w, b = lin.weight.detach(), lin.bias.detach()
        ws, wz = ref.choose_qparams(w, (1, k), -128, 127, True)
        wq_t = ref.quantize(w, (1, k), ws, wz, -128, 127).T.contiguous()
        w_row = ws.reshape(1, -1)

        def reference(x):
            xs, xz = ref.choose_qparams(x, tuple(x.shape), 0, 255, False)
            xq = ref.quantize(x, tuple(x.shape), xs, xz, 0, 255, torch.uint8)
            acc = ref.int_matmul(xq, wq_t) - int(xz) * wq_t.to(torch.int32).sum(0)
            return acc.to(torch.float32) * (xs.reshape(()) * w_row) + b

        ao_model = torch.nn.Sequential(torch.nn.Linear(k, n))
        ao_model[0].load_state_dict(lin.state_dict())
        quantize_(ao_model, Int8DynamicActivationInt8WeightConfig())
        fb = torch.ao.nn.quantized.dynamic.Linear(k, n)
        fb.set_weight_bias(torch.quantize_per_channel(w, ws.reshape(-1).double(), torch.zeros(n, dtype=torch.long), 0,
                                                      torch.qint8), b)
        contenders = {"fp32": lambda x: F.linear(x, w, b), "reference": reference, "torchao": ao_model, "fbgemm": fb}
        times = {name: [] for name in contenders}
        with torch.no_grad():
            x0 = torch.randn(m, k)
            want = F.linear(x0, w, b)
            for name, fn in contenders.items():
                err = (fn(x0) - want).abs().max().item() / want.abs().max().item()
                assert err < 0.05, f"{name} on {m}x{k}x{n}: relative error {err:.3g}"
            for _ in range(args.rounds):
                x = torch.randn(m, k)  # fresh input every round
                for name, fn in contenders.items():
                    t = time.perf_counter()
                    fn(x)
                    times[name].append(time.perf_counter() - t)
        med = {name: statistics.median(v) for name, v in times.items()}
        cell = {name: f"{med['fp32'] / med[name]:.2f}x" for name in contenders}
        print(f"{f'{m} x {k} x {n}':>18} {med['fp32'] * 1e3:9.3f} {cell['reference']:>16} {cell['torchao']:>15} "
              f"{cell['fbgemm']:>18}")
    print("ratios: fp32 time / contender time (above 1.00x is faster than fp32)")
    return 0
