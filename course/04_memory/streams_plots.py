"""Helpers for the stage-04 notebook on streams, events and the profiler.

ToyDevice             -> a made-up device with FIFO streams on a made-up clock
draw_timeline(dev)    -> its host and stream rows, drawn as bars
step_names(trace)     -> the ProfilerStep#<n> labels in an exported chrome trace
step_bars(trace, n)   -> the events of one ProfilerStep in an exported chrome trace
plot_step(bars)       -> those events as nested horizontal bars

ToyDevice is an illustration of the rules CUDA streams follow, not a model of
any GPU: its durations are invented, and nothing here measures a device.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from memory_plots import _PHASE_COLOR, quiet  # noqa: F401  (quiet: re-exported)

_HOST, _WAIT = "#9aa5b1", "#f2f2f2"
_STREAM_COLORS = ("#e4572e", "#4c8bf5", "#76b041", "#a05195")


class ToyDevice:
    """A host thread that enqueues kernels on FIFO streams (times in ms).

    Launching costs the host ``launch_ms`` and returns; the kernel starts
    once it is launched, every earlier kernel of its stream has finished, and
    every event its stream was told to wait for has passed. The schedule is
    computed as the program runs, so an event is simply a time.
    """

    def __init__(self, launch_ms=0.5):
        self.launch_ms = launch_ms
        self.host = 0.0    # the host thread's clock
        self.ready = {}    # stream -> when the work queued on it so far ends
        self.bars = []     # (row, start, end, label, kind)
        self.waits = []    # (from stream, to stream, time): wait_event arrows

    def launch(self, stream, name, ms):
        """Enqueue a kernel of ``ms`` milliseconds on ``stream``."""
        t = self.host
        self.host += self.launch_ms
        self.bars.append(("host", t, self.host, name, "launch"))
        start = max(self.host, self.ready.get(stream, 0.0))
        self.ready[stream] = start + ms
        self.bars.append((stream, start, start + ms, name, "kernel"))

    def record_event(self, stream):
        """An event marks the end of the work queued on ``stream`` so far."""
        return stream, self.ready.get(stream, 0.0)

    def wait_event(self, stream, event):
        """Later kernels on ``stream`` start after ``event``; the host goes on."""
        source, t = event
        self.ready[stream] = max(self.ready.get(stream, 0.0), t)
        self.waits.append((source, stream, t))

    def synchronize(self, stream=None, label="synchronize"):
        """The host waits for ``stream`` (or for every stream)."""
        if stream is None:
            t = max(self.ready.values(), default=0.0)
        else:
            t = self.ready.get(stream, 0.0)
        if t > self.host:
            self.bars.append(("host", self.host, t, label, "wait"))
            self.host = t


def draw_timeline(dev, title=None, ax=None):
    """Host row on top, one row per stream below, kernels labelled."""
    rows = ["host"] + sorted({b[0] for b in dev.bars if b[0] != "host"})
    y = {row: i for i, row in enumerate(rows)}
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.75 * len(rows) + 1.0))
    for row, start, end, label, kind in dev.bars:
        if kind == "kernel":
            color = _STREAM_COLORS[(y[row] - 1) % len(_STREAM_COLORS)]
        else:
            color = _HOST if kind == "launch" else _WAIT
        ax.barh(y[row], end - start, left=start, height=0.6, color=color,
                edgecolor="#333333", lw=0.8,
                hatch="//" if kind == "wait" else None)
        if kind == "launch":
            continue  # launches are too short to label; the kernels say it
        ax.text((start + end) / 2, y[row], label, ha="center", va="center",
                fontsize=8, color="white" if kind == "kernel" else "black",
                bbox=None if kind == "kernel" else
                dict(fc="white", ec="none", pad=1.5))
    for source, target, t in dev.waits:
        ax.annotate("", xy=(t, y[target] - 0.3), xytext=(t, y[source] + 0.3),
                    arrowprops=dict(arrowstyle="->", color="#333333", lw=1.2,
                                    linestyle="--"))
        ax.text(t + 0.1, (y[source] + y[target]) / 2, "wait_event",
                fontsize=8, va="center")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlabel("time (ms, invented)")
    ax.legend([Patch(fc=_HOST, ec="#333333"),
               Patch(fc=_WAIT, ec="#333333", hatch="//")],
              ["host launches a kernel", "host waits"], loc="lower right",
              bbox_to_anchor=(1, 1), fontsize=8, ncol=2, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return ax


def _spans(trace_file):
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("ph") == "X"
            and e.get("cat") in ("cpu_op", "user_annotation")]


def step_names(trace_file):
    """The ``ProfilerStep#<n>`` events of a chrome trace, in order."""
    return sorted((e["name"] for e in _spans(trace_file)
                   if e["name"].startswith("ProfilerStep#")),
                  key=lambda name: int(name.split("#")[1]))


def step_bars(trace_file, step):
    """The op and region events of ``ProfilerStep#<step>`` in a chrome trace.

    Returns ``(name, start_us, dur_us, depth, region)`` tuples: start from
    the step's own start, depth 0 for the outermost events, and region the
    name of the depth-0 event each one sits in.
    """
    spans = _spans(trace_file)
    outer = next(e for e in spans if e["name"] == f"ProfilerStep#{step}")
    t0, t1 = outer["ts"], outer["ts"] + outer["dur"]
    inside = sorted((e for e in spans if e is not outer
                     and t0 <= e["ts"] and e["ts"] + e["dur"] <= t1 + 1e-3),
                    key=lambda e: (e["ts"], -e["dur"]))
    bars, stack = [], []  # stack of (end, region) of the enclosing events
    for e in inside:
        while stack and e["ts"] >= stack[-1][0] - 1e-3:
            stack.pop()
        region = stack[0][1] if stack else e["name"]
        bars.append((e["name"], e["ts"] - t0, e["dur"], len(stack), region))
        stack.append((e["ts"] + e["dur"], region))
    return bars


def plot_step(bars, max_depth=4, title=None):
    """Nested bars, one row per depth, coloured by the enclosing region."""
    fig, ax = plt.subplots(figsize=(10, 0.55 * (max_depth + 1) + 1.2))
    width = max(start + dur for _, start, dur, _, _ in bars)
    for name, start, dur, depth, region in bars:
        if depth > max_depth:
            continue
        ax.barh(depth, dur, left=start, height=0.8,
                color=_PHASE_COLOR.get(region, "#dddddd"),
                edgecolor="#333333", lw=0.5)
        label = name.replace("aten::", "").replace("autograd::engine::", "")
        fits = int(dur / width * 130)  # characters that fit in the bar, roughly
        if fits >= 4:
            if len(label) > fits:
                label = label[:fits - 1] + "…"
            ax.text(start + dur / 2, depth, label, ha="center", va="center",
                    fontsize=7)
    ax.set_ylim(max_depth + 0.6, -0.6)
    ax.set_yticks(range(max_depth + 1))
    ax.set_ylabel("nesting depth")
    ax.set_xlabel("time since the step began (µs, this machine, this run)")
    ax.legend([Patch(fc=c, ec="#333333") for c in _PHASE_COLOR.values()],
              list(_PHASE_COLOR), loc="lower right", bbox_to_anchor=(1, 1),
              fontsize=8, ncol=3, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return ax
