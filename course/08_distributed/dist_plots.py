"""Helpers for the stage-08 course notebooks (distributed).

A notebook cannot call ``torchrun``, so ``run_world`` plays its part: it forks one
process per rank, lets them meet through a ``FileStore`` in a fresh temporary folder,
runs a function that was defined in a notebook cell on every rank, and hands back
what each rank returned. The figures only lay out numbers that the notebook computes.

Worlds
------
run_world(fn, world_size, *args)     fn(rank, world_size, *args) on ``world_size`` forked
                                     ranks in one gloo process group; a list of the
                                     ranks' return values (or a RankError per rank)

Figures
-------
draw_collectives(panels, origin)     what every rank holds before and after collectives
draw_alpha_beta(measured, lines)     time vs message size, log-log, with model lines, and
                                     optionally bus bandwidth vs message size
draw_ring_schedule(steps, held, W)   a ring all-reduce step by step: which chunk each rank
                                     sends, and how many ranks' inputs each chunk holds
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

__all__ = ["run_world", "RankError", "WorldTimeout", "draw_collectives", "draw_alpha_beta",
           "draw_ring_schedule", "PALETTE"]

PALETTE = ["#4c8fbd", "#f3a712", "#5aa469", "#e4572e", "#8e6bb5", "#b5895a",
           "#3fa7a0", "#d96c9a"]


# ------------------------------------------------------------------------- worlds
class RankError:
    """What a rank raised instead of returning: ``RankError("RuntimeError: ...")``."""

    def __init__(self, message: str):
        self.message = message

    def __repr__(self):
        return f"RankError({self.message!r})"

    def __str__(self):
        return self.message


class WorldTimeout(RuntimeError):
    """Some rank had not reported back when the world's time was up; all were killed."""


def _barrier(store, key: str, world_size: int, seconds: float) -> bool:
    """Wait on the store (not on gloo) until every rank has reached this point."""
    store.add(key, 1)
    deadline = time.monotonic() + seconds
    while store.add(key, 0) < world_size:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def _rank_main(fn, rank, world_size, folder, timeout, backend, port, args, kwargs, conn):
    # Each rank's own output (including C++ warnings) goes to a file, not to the notebook.
    log = os.open(os.path.join(folder, f"rank{rank}.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    outcome = None
    store = None
    try:
        store = dist.FileStore(os.path.join(folder, "store"), world_size)
        if port is None:
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=timeout))
        else:
            # What torchrun does: the variables below, and env:// reads them. Rank 0
            # hosts a TCPStore on MASTER_PORT; the others connect to it.
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                              RANK=str(rank), WORLD_SIZE=str(world_size),
                              LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
            dist.init_process_group(backend, init_method="env://",
                                    timeout=timedelta(seconds=timeout))
        try:
            outcome = ("ok", fn(rank, world_size, *args, **kwargs))
        except Exception as exc:  # reported to the parent, like a return value
            outcome = ("error", f"{type(exc).__name__}: {exc}".strip())
    except Exception as exc:
        outcome = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    try:
        conn.send_bytes(pickle.dumps(outcome))   # plain pickle: tensors travel as bytes
    except Exception as exc:
        conn.send_bytes(pickle.dumps(("error", f"result not picklable: {exc}")))
    conn.close()
    # Tear down only when every rank is done, so nobody closes a connection that a
    # peer is still reading from. A rank that never arrives (it crashed or exited)
    # means there is nothing clean left to do.
    if store is not None and dist.is_initialized():
        if _barrier(store, "finished", world_size, seconds=min(timeout, 10.0)):
            dist.destroy_process_group()
    os._exit(0)


def _log_tail(folder: str, rank: int, lines: int = 2) -> str:
    """The last lines a dead rank wrote (gloo's own error message, usually)."""
    try:
        with open(os.path.join(folder, f"rank{rank}.log"), errors="replace") as f:
            text = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return "; its last output: " + " | ".join(text[-lines:]) if text else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(fn, world_size: int, *args, timeout: float = 20.0, backend: str = "gloo",
              rendezvous: str = "file", **kwargs):
    """Run ``fn(rank, world_size, *args, **kwargs)`` on ``world_size`` forked processes.

    The ranks rendezvous through a ``FileStore`` in a new temporary folder and form the
    default process group (``backend``, gloo by default) with ``timeout`` seconds for
    every collective and point-to-point wait. Returns a list indexed by rank: what that
    rank's ``fn`` returned, or a ``RankError`` with the exception it raised, or a
    ``RankError`` saying it exited without reporting. If some rank has not reported
    after ``timeout`` plus a margin, every rank is killed and ``WorldTimeout`` is raised.

    ``rendezvous="env"`` makes the ranks meet the way they do under ``torchrun``: each
    rank gets ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE`` in its
    environment and calls ``init_process_group(init_method="env://")``.

    ``fn`` may be defined in a notebook cell: the ranks are forked, not started afresh.
    Return values must be picklable (tensors, numbers, strings).
    """
    if rendezvous not in ("file", "env"):
        raise ValueError("rendezvous is 'file' or 'env'")
    port = _free_port() if rendezvous == "env" else None
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")   # gloo talks over loopback
    folder = tempfile.mkdtemp(prefix="world-")
    ctx = mp.get_context("fork")
    procs, conns = [], []
    try:
        for rank in range(world_size):
            receive, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_main, daemon=True,
                            args=(fn, rank, world_size, folder, timeout, backend, port,
                                  args, kwargs, send))
            p.start()
            send.close()
            procs.append(p)
            conns.append(receive)
        results = [None] * world_size
        pending = dict(zip(conns, range(world_size)))
        deadline = time.monotonic() + timeout + 15.0
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorldTimeout(f"ranks {sorted(pending.values())} did not report within "
                                   f"{timeout + 15:.0f} s")
            for conn in multiprocessing.connection.wait(list(pending), timeout=left):
                rank = pending.pop(conn)
                try:
                    status, value = pickle.loads(conn.recv_bytes())
                except EOFError:
                    status, value = "error", ("the process exited without reporting"
                                              + _log_tail(folder, rank))
                results[rank] = value if status == "ok" else RankError(value)
        # A rank that died cannot reach the teardown barrier; don't wait for the others.
        crashed = any(isinstance(r, RankError) and r.message.startswith("the process exited")
                      for r in results)
        for p in procs:
            p.join(timeout=0.5 if crashed else max(0.1, deadline - time.monotonic()))
        return results
    finally:
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
        for c in conns:
            c.close()
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------- collectives
_REDUCED = "#3d3d6b"


def _cell(ax, x, y, value, face, text_color="black", hatch=None, edge="white"):
    ax.add_patch(Rectangle((x, y), 0.94, 0.86, facecolor=face, edgecolor=edge,
                           hatch=hatch, lw=0.8))
    label = "" if value is None or value != value else f"{value:g}"   # NaN: nothing held
    ax.text(x + 0.47, y + 0.43, label, ha="center", va="center", fontsize=8,
            color=text_color)


def draw_collectives(panels, origin, title=None):
    """One panel per collective: every rank's tensor before (left) and after (right).

    ``panels`` is a list of dicts with ``name``, ``before`` and ``after`` (one list of
    numbers per rank, as the ranks returned them), ``kind`` ("move" or "reduce") and
    optionally ``stale``: ranks whose output the collective does not define (drawn
    hatched). ``origin`` maps each original value to the rank that held it: after a
    "move" every value keeps its rank's colour; after a "reduce" reduced values are
    dark.
    """
    ncols = 3
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.3 * ncols, 2.55 * nrows))
    axes = np.atleast_1d(axes).ravel()
    for ax, panel in zip(axes, panels):
        before, after = panel["before"], panel["after"]
        world = len(before)
        wb = max(len(row) for row in before)
        gap = 1.3
        for r in range(world):
            y = world - 1 - r
            ax.text(-0.25, y + 0.43, f"rank {r}", ha="right", va="center", fontsize=8)
            for c, v in enumerate(before[r]):
                if v != v:        # NaN: this rank's input does not matter
                    _cell(ax, c, y, None, "white", edge="#bbbbbb")
                else:
                    _cell(ax, c, y, v, PALETTE[origin[v] % len(PALETTE)])
            for c, v in enumerate(after[r]):
                x = wb + gap + c
                if r in panel.get("stale", ()):
                    _cell(ax, x, y, v, "#f2f2f2", text_color="#999999", hatch="////",
                          edge="#cccccc")
                elif panel["kind"] == "move":
                    _cell(ax, x, y, v, PALETTE[origin[v] % len(PALETTE)])
                else:
                    _cell(ax, x, y, v, _REDUCED, text_color="white")
        wa = max(len(row) for row in after)
        ax.annotate("", xy=(wb + gap - 0.15, world / 2), xytext=(wb + 0.15, world / 2),
                    arrowprops=dict(arrowstyle="->", color="#555555", lw=1.2))
        ax.text(wb / 2, world + 0.15, "before", ha="center", fontsize=8, color="#555555")
        ax.text(wb + gap + wa / 2, world + 0.15, "after", ha="center", fontsize=8,
                color="#555555")
        ax.set_xlim(-1.6, wb + gap + wa + 0.1)
        ax.set_ylim(-0.7, world + 0.9)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(panel["name"], fontsize=10, fontfamily="monospace")
        if panel.get("note"):
            ax.text((wb + gap + wa) / 2, -0.45, panel["note"], ha="center", va="center",
                    fontsize=7.5, color="#555555")
    for ax in axes[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout()
    return fig


# -------------------------------------------------------------------- cost model
def _log_axes(ax, ylabel):
    """Log-log axes over message sizes, with a light grid and a legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size n (bytes)", fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(True, which="major", color="#eeeeee")
    ax.legend(fontsize=8, frameon=False)


def draw_alpha_beta(measured: dict, lines: dict, busbw: dict | None = None,
                    bandwidth=None, title=None):
    """Time against message size on log-log axes, and optionally bus bandwidth.

    ``measured``: label -> (bytes, seconds) drawn as markers; ``lines``: label ->
    (bytes, seconds, colour index, line style) drawn as lines; ``busbw``: label ->
    (bytes, bytes per second, colour index) for a second panel, where ``bandwidth`` =
    (bytes per second, label) draws a horizontal reference line.
    """
    n = 1 if busbw is None else 2
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n, 4.3))
    axes = np.atleast_1d(axes)
    ax = axes[0]
    for k, (label, (x, t)) in enumerate(measured.items()):
        ax.plot(x, np.asarray(t) * 1e6, "o", ms=5, color=PALETTE[k % len(PALETTE)],
                label=label)
    for label, (x, t, color, style) in lines.items():
        ax.plot(x, np.asarray(t) * 1e6, style, lw=1.4, color=PALETTE[color % len(PALETTE)],
                label=label)
    _log_axes(ax, "time per all_reduce (µs)")
    if busbw is not None:
        bx = axes[1]
        for label, (x, bw, color) in busbw.items():
            bx.plot(x, np.asarray(bw) / 1e9, "o-", ms=4, lw=1, color=PALETTE[color],
                    label=label)
        if bandwidth is not None:
            bx.axhline(bandwidth[0] / 1e9, color="#777777", lw=1, ls="--",
                       label=bandwidth[1])
        _log_axes(bx, "bus bandwidth (GB/s)")
    if title:
        fig.suptitle(title, fontsize=10.5)
    fig.tight_layout()
    return fig


def draw_ring_schedule(steps, held, world_size, title=None):
    """A ring all-reduce as a timeline: one column per step, one row per rank.

    ``steps`` is a list of (phase, {rank: chunk it sends to rank + 1}); ``held`` is a
    list, one entry per column (the start, then after each step), of
    ``held[col][rank][chunk]`` = how many ranks' inputs that chunk already contains.
    Each cell shows a rank's W chunks, darker the more inputs they hold; the chunk
    the rank sends during the *next* step is outlined in red.
    """
    world = world_size
    cols = len(held)
    fig, ax = plt.subplots(figsize=(1.85 * cols + 1.2, 0.95 * world + 1.5))
    cmap = plt.get_cmap("Blues")
    cw, ch = 0.36, 0.5
    for col in range(cols):
        x0 = col * 1.85
        sending = steps[col][1] if col < len(steps) else {}
        for r in range(world):
            y0 = (world - 1 - r) * 0.95
            for c in range(world):
                count = held[col][r][c]
                face = cmap(0.12 + 0.78 * count / world)
                red = sending.get(r) == c
                ax.add_patch(Rectangle((x0 + c * cw, y0), cw * 0.92, ch, facecolor=face,
                                       edgecolor=PALETTE[3] if red else "white",
                                       lw=2.2 if red else 0.6))
                ax.text(x0 + c * cw + cw * 0.46, y0 + ch / 2, str(count), ha="center",
                        va="center", fontsize=7,
                        color="white" if count > world / 2 else "black")
            if col == 0:
                ax.text(-0.15, y0 + ch / 2, f"rank {r}", ha="right", va="center",
                        fontsize=8.5)
        if col == 0:
            label = "start"
        else:
            phase, _ = steps[col - 1]
            done = sum(1 for p, _ in steps[:col] if p == phase)
            label = f"after {phase}\nstep {done}"
        ax.text(x0 + world * cw / 2, world * 0.95 + 0.05, label, ha="center", va="bottom",
                fontsize=8)
    for c in range(world):
        ax.text(c * cw + cw * 0.46, -0.18, f"c{c}", ha="center", va="top", fontsize=7,
                color="#555555")
    ax.set_xlim(-1.1, cols * 1.85)
    ax.set_ylim(-0.45, world * 0.95 + 0.55)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
