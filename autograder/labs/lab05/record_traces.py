"""Record the real allocation traces of lab05 (run once by an instructor; the JSON files are committed).

    python -m autograder.labs.lab05.record_traces

Each trace is a few training steps of a small model on CPU, profiled with
`torch.profiler.profile(profile_memory=True)`. Allocation events of the profiler's event tree carry
the pointer and the signed size; pairing them by pointer gives alloc/free events with ids:
    {"name": ..., "description": ..., "events": [["alloc", id, nbytes] | ["free", id, nbytes], ...]}
A free whose allocation happened before profiling started is dropped; blocks still live at the
end stay live.
"""
import json
import os
from pathlib import Path

import torch
import torch.nn as nn
from torch._C._profiler import _EventType
from torch.profiler import profile

HERE = Path(__file__).resolve().parent / "traces"


def _events(step, steps):
    with profile(profile_memory=True) as prof:
        for _ in range(steps):
            step()
    raw = []

    def walk(node):
        if node.tag == _EventType.Allocation:
            raw.append((node.start_time_ns, node.extra_fields.ptr, node.extra_fields.alloc_size))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    raw.sort(key=lambda e: e[0])
    live, events, next_id = {}, [], 0
    for _, ptr, size in raw:
        if size > 0:
            live[ptr] = (next_id, size)
            events.append(["alloc", next_id, int(size)])
            next_id += 1
        elif ptr in live:
            ident, nbytes = live.pop(ptr)
            events.append(["free", ident, int(nbytes)])
    return events


def mlp_step(batch=128, width=2048):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 1024), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def conv_step(batch=16):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 16 * 16, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 3, 64, 64), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def main():
    torch.set_num_threads(1)
    HERE.mkdir(exist_ok=True)
    specs = {
        "mlp_sgd": ("3 training steps: MLP 1024-2048-2048-10, batch 128, SGD with momentum", mlp_step(), 3),
        "convnet_adam": ("3 training steps: 2-conv net with BatchNorm on 16x3x64x64, Adam", conv_step(), 3),
        "mlp_wide": ("2 training steps: MLP 1024-4096-4096-10, batch 512, SGD with momentum", mlp_step(512, 4096), 2),
    }
    for name, (desc, step, steps) in specs.items():
        events = _events(step, steps)
        (HERE / f"{name}.json").write_text(json.dumps({"name": name, "description": desc + " (torch "
                                                       + torch.__version__.split("+")[0] + ", CPU profiler)",
                                                       "events": events}, separators=(",", ":")))
        print(name, len(events), "events")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

# IPT-CANARY lab05 record_traces.py: hidden grading text, never shown to learners
