"""Helpers for the stage-04 course notebook (the caching allocator).

record_allocations(fn)   -> the allocator calls fn really made (torch.profiler)
replay(trace, cache)     -> drive a toy cache with a recorded trace
plot_timeline(...)       -> counts over time, training phases shaded
draw_layouts(rows)       -> hand-written segment layouts, drawn as blocks

There is no working caching allocator here: the notebook's NaiveCache is a
stepping stone, and lab05 is where you build the real design.
"""

from __future__ import annotations

import contextlib
import os
import sys

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle
from torch._C._profiler import _EventType

KiB, MiB = 1024, 1024 ** 2
PHASES = ("forward", "backward", "optimizer")
_PHASE_COLOR = {"forward": "#a9d6e5", "backward": "#f3d5a0",
                "optimizer": "#cfe8c0"}
_USED, _FREE = "#e4572e", "#f2f2f2"


@contextlib.contextmanager
def quiet():
    """Silence native stderr (kineto logs two lines per profiling session)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def record_allocations(fn):
    """Run fn() under torch.profiler(profile_memory=True).

    Returns a list of dicts in time order: ``t`` (ms from the first event),
    ``id`` (an id pairing each allocation with its free),
    ``size`` (bytes, negative for a free), ``op`` (the ATen op or region that
    made the call) and ``phase`` (the enclosing record_function among PHASES).
    """
    with quiet(), torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            profile_memory=True) as prof:
        fn()
    events = []

    def walk(node, stack):
        if node.tag == _EventType.Allocation:
            f = node.extra_fields
            phase = next((s for s in reversed(stack) if s in PHASES), "")
            events.append(dict(t=node.start_time_ns, id=f.ptr,
                               size=f.alloc_size,
                               op=stack[-1] if stack else "", phase=phase))
        for child in node.children:
            walk(child, stack + [node.name])

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, [])
    events.sort(key=lambda e: e["t"])
    live, serial = {}, 0           # a pointer is reused once freed: give each
    for e in events:               # allocation its own id, shared by its free
        if e["size"] > 0:
            serial += 1
            live[e["id"]] = serial
            e["id"] = serial
        else:
            e["id"] = live.pop(e["id"], None)
    t0 = events[0]["t"] if events else 0
    for e in events:
        e["t"] = (e["t"] - t0) / 1e6
    return events


def replay(trace, cache):
    """Feed a recorded trace to a cache with malloc(nbytes) and free(block).

    Returns four lists, one entry per event: times, and the cache's
    ``allocated``, ``reserved`` and ``device_mallocs`` right after it.
    """
    live, times, alloc, res, calls = {}, [], [], [], []
    for e in trace:
        if e["size"] > 0:
            live[e["id"]] = cache.malloc(e["size"])
        elif e["id"] in live:                  # frees of pre-existing tensors
            cache.free(live.pop(e["id"]))      # are skipped
        times.append(e["t"])
        alloc.append(cache.allocated)
        res.append(cache.reserved)
        calls.append(cache.device_mallocs)
    return times, alloc, res, calls


def phase_spans(trace):
    """(phase, t_start, t_end) for each contiguous run of a phase."""
    spans = []
    for e in trace:
        if spans and spans[-1][0] == e["phase"]:
            spans[-1][2] = e["t"]
        else:
            spans.append([e["phase"], e["t"], e["t"]])
    return [tuple(s) for s in spans if s[0]]


def plot_timeline(times, series, spans=(), ax=None, title=None,
                  scale=MiB, ylabel="MiB"):
    """Step plot of several counts over time (divided by scale), phases
    shaded."""
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.6))
    for phase, t0, t1 in spans:
        ax.axvspan(t0, t1, color=_PHASE_COLOR[phase], alpha=0.6, lw=0)
    for label, values in series.items():
        ax.step(times, [v / scale for v in values], where="post",
                label=label)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel(ylabel)
    handles, labels = ax.get_legend_handles_labels()
    shown = {p for p, _, _ in spans}
    for phase in PHASES:
        if phase in shown:
            handles.append(Rectangle((0, 0), 1, 1, color=_PHASE_COLOR[phase]))
            labels.append(phase)
    ax.legend(handles, labels, loc="upper left", fontsize=8, ncol=2)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def draw_layouts(rows, title=None):
    """Draw hand-written segment layouts, one row each, to scale.

    ``rows`` is a list of ``(caption, blocks)``; ``blocks`` lists
    ``(MiB, name)`` from the segment's start, ``name`` None for a free block.
    """
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 0.8))
    for row, (caption, blocks) in enumerate(rows):
        offset = 0
        for size, name in blocks:
            ax.add_patch(Rectangle((offset, row - 0.35), size, 0.7,
                                   facecolor=_FREE if name is None else _USED,
                                   edgecolor="#333333", lw=0.8))
            text = f"{size:g} MiB" if name is None else f"{name}: {size:g} MiB"
            ax.text(offset + size / 2, row, text, ha="center", va="center",
                    fontsize=8)
            offset += size
        ax.text(offset + 0.4, row, caption, va="center", fontsize=9)
    widest = max(sum(s for s, _ in blocks) for _, blocks in rows)
    ax.set_xlim(0, widest * 2.1)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.axis("off")
    ax.legend([Rectangle((0, 0), 1, 1, fc=_USED, ec="#333333"),
               Rectangle((0, 0), 1, 1, fc=_FREE, ec="#333333")],
              ["allocated block", "cached free block"], loc="lower right",
              bbox_to_anchor=(1, 1), ncol=2, fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return ax
