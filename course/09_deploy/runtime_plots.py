"""Helpers for course/09_deploy/04_checkpoints_and_data.ipynb.

Datasets live here, not in the notebook, so that DataLoader workers can import them under any start
method (a class defined in a notebook cell exists only in the notebook's own process when workers are
spawned rather than forked). The figures only lay out numbers the notebook measured.

record_layout(path)                  the zip records of a checkpoint: name, offset of its data, size
draw_layout(records, total, title)   those records as a strip of the file, data records highlighted
Probe                                a dataset that records which worker made each item, and when
draw_loader_timeline(batches, received, t0, title)
                                     per worker, when it made each batch; above, when the loop received it
"""
import os
import struct
import time
import zipfile

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import MaxNLocator
from torch.utils.data import Dataset, get_worker_info


def record_layout(path):
    """(name, offset of the data in the file, size in bytes) of every record of a zip file, in file order."""
    with open(path, "rb") as f:
        raw = f.read()
    rows = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_len + extra_len      # after the local file header
            rows.append((info.filename, start, info.file_size))
    return rows, len(raw)


def draw_layout(records, total, title):
    fig, ax = plt.subplots(figsize=(11, 2.6))
    for k, (name, start, size) in enumerate(records):
        is_data = "/data/" in name and not name.endswith("serialization_id")
        ax.barh(0, max(size, total / 400), left=start, height=0.6,
                color="#4c78a8" if is_data else ("#f58518" if name.endswith("data.pkl") else "#bbbbbb"))
        ax.text(start + size / 2, 0.45 + 0.28 * (k % 3), name.split("/", 1)[1], ha="center", fontsize=8)
    ax.set_xlim(0, total)
    ax.set_ylim(-0.5, 1.4)
    ax.set_yticks([])
    ax.set_xlabel("byte offset in the file (gaps: zip headers and padding; the zip directory ends the file)")
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


class Probe(Dataset):
    """Item i: a tensor full of i, the id of the worker that made it (-1 in the main process), and the
    times (perf_counter, the same clock in every process on one machine) it started and ended. Item i takes
    `cost[i % len(cost)]` seconds."""

    def __init__(self, n, cost=(0.0,), fail_at=None):
        self.n, self.cost, self.fail_at = n, cost, fail_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        if i == self.fail_at:
            raise ValueError(f"item {i} is broken")
        start = time.perf_counter()
        time.sleep(self.cost[i % len(self.cost)])
        return {"x": torch.full((2,), float(i)), "worker": -1 if info is None else info.id,
                "pid": os.getpid(), "start": start, "end": time.perf_counter()}


def draw_loader_timeline(batches, received, t0, title):
    """batches: list of (batch number, worker, start, end); received: (batch number, time the loop got it)."""
    fig, ax = plt.subplots(figsize=(11, 3.2))
    workers = sorted({w for _, w, _, _ in batches})
    for b, w, start, end in batches:
        row = workers.index(w)
        ax.barh(row, end - start, left=start - t0, height=0.6, color=f"C{w % 10}", alpha=0.7)
        ax.text((start + end) / 2 - t0, row, str(b), ha="center", va="center", fontsize=8)
    loop = len(workers)
    for b, t in received:
        ax.plot([t - t0], [loop], "k|", markersize=14)
        ax.text(t - t0, loop + 0.3 + 0.25 * (b % 2), str(b), ha="center", fontsize=8)
    ax.set_yticks(list(range(len(workers))) + [loop])
    ax.set_yticklabels([f"worker {w}" for w in workers] + ["main loop\nreceives"])
    ax.set_xlim(0, max(t for _, t in received) - t0 + 0.02)
    ax.set_ylim(-0.6, loop + 1.0)
    ax.set_xlabel("seconds since iter(loader)")
    ax.xaxis.set_major_locator(MaxNLocator(8))
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig
