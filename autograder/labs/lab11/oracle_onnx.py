# IPT-CANARY lab11 oracle_onnx.py: hidden grading text, never shown to learners
"""Trusted-side (P0) oracle of lab11's part `onnx`.

P0 draws every model's weights, temperatures, example inputs and run inputs from the grading seed, and computes
the eager results itself with plain torch (log_cosh as T * (logaddexp(x/T, -x/T) - log 2), the kernel's value in
another stable form; the layers with torch.nn.functional.linear), in the model's dtype. The learner's ONNX bytes
are validated and run only in the clean room (scenarios.onnx_run); P0 compares what onnxruntime answered.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from autograder.engine import replies

MAX_BYTES = 8 << 20
MAX_BATCH = 1024
# |got - eager| <= atol + rtol * max|eager| (finite). float64: 1e-12, far above the reference's 1e-16-level
# differences and far below a float32 constant's (log 2 rounded to float32 is off by 1.9e-9, T by up to 6e-8 of T)
TOL = {"float32": (1e-5, 1e-4), "float64": (1e-12, 1e-12)}
KINDS = ["mlp", "two_inputs"]
DTYPES = ["float32", "float64"]


def log_cosh(x, t):
    return t * (torch.logaddexp(x / t, -x / t) - math.log(2.0))


def temperatures(rng, n):
    """A small temperature (where |x| / T overflows cosh soonest), a large one, then any."""
    small, large = float(rng.uniform(0.05, 0.5)), float(rng.uniform(2.0, 20.0))
    return ([small, large] + [float(rng.uniform(0.05, 20.0)) for _ in range(max(0, n - 2))])[:n]


def _linear(rng, d_in, d_out, dtype):
    bound = 1.0 / math.sqrt(d_in)
    return {"weight": rng.uniform(-bound, bound, (d_out, d_in)).astype(dtype),
            "bias": rng.uniform(-bound, bound, (d_out,)).astype(dtype)}


def model_spec(kind, rng, dtype):
    """The model P1 builds (scenarios._onnx_model) and P0 evaluates (eager): weights, temperatures, input shapes."""
    weights = {}

    def layer(name, d_in, d_out):
        for k, v in _linear(rng, d_in, d_out, dtype).items():
            weights[f"{name}.{k}"] = v

    if kind == "mlp":
        d_in, hidden, d_out = (int(rng.integers(3, 9)), int(rng.integers(4, 12)), int(rng.integers(2, 6)))
        layer("fc1", d_in, hidden)
        layer("fc2", hidden, d_out)
        shapes = [[d_in]]
    else:
        dx, dy, hidden, seq = int(rng.integers(3, 8)), int(rng.integers(2, 6)), int(rng.integers(3, 8)), int(rng.integers(2, 5))
        layer("fx", dx, hidden)
        layer("fy", dy, hidden)
        shapes = [[dx], [seq, dy]]
    spec = {"kind": kind, "dtype": dtype, "weights": weights, "temps": temperatures(rng, 2), "shapes": shapes}
    spec["example"] = inputs(spec, rng, int(rng.integers(2, 7)), special=False)
    return spec


def inputs(spec, rng, batch, special):
    """One array per input, batch first. special: magnitudes of 1e3 to 1e4 in half the rows (either sign), the
    rest plain, so that |x| / T passes cosh's float32 overflow after the layers; otherwise N(0, s^2)."""
    out = []
    for shape in spec["shapes"]:
        scale = float(rng.uniform(0.5, 3.0))
        a = rng.standard_normal((batch, *shape)) * scale
        if special:
            rows = rng.random(batch) < 0.5
            rows[int(rng.integers(batch))] = True
            big = 10.0 ** rng.uniform(3.0, 4.0, (batch, *shape)) * rng.choice([-1.0, 1.0], (batch, *shape))
            a = np.where(rows.reshape((batch,) + (1,) * len(shape)), big, a)
        out.append(a.astype(spec["dtype"]))
    return out


def special_values(rng, width, dtype):
    """Rows for the translation alone: zeros, tiny, large of both signs (past float32's cosh overflow for every
    drawn temperature), +-inf, nan, and drawn large magnitudes."""
    fixed = [0.0, -0.0, 1e-30, -1e-30, 3e3, -3e3, 1e5, -1e5, float("inf"), float("-inf"), float("nan"), 1e-3]
    drawn = list(10.0 ** rng.uniform(2.5, 4.5, 12) * rng.choice([-1.0, 1.0], 12))
    values = np.array(fixed + drawn, dtype=dtype)
    rows = math.ceil(len(values) / width)
    values = np.concatenate([values, rng.standard_normal(rows * width - len(values)).astype(dtype)])
    return rng.permutation(values).reshape(rows, width)


def eager(spec, arrays):
    """The eager results of the spec's model on `arrays` (numpy, one per input), in the spec's dtype."""
    W = {k: torch.from_numpy(np.asarray(v)) for k, v in spec["weights"].items()}
    xs = [torch.from_numpy(np.asarray(a)) for a in arrays]
    t = spec["temps"]

    def lin(name, x):
        return F.linear(x, W[name + ".weight"], W[name + ".bias"])

    with torch.no_grad():
        if spec["kind"] == "mlp":
            outs = [lin("fc2", log_cosh(lin("fc1", xs[0]), t[0]))]
        else:
            outs = [log_cosh(lin("fx", xs[0]), t[0]), log_cosh(lin("fy", xs[1]), t[1])]
    return [o.numpy() for o in outs]


def eager_translation(temps, x):
    """scenarios.onnx_translate's outputs: log_cosh of x per temperature, then of the 0-d x[0, 0] (a translation
    whose constants have shape (1,) makes that one (1,))."""
    x = torch.from_numpy(np.asarray(x))
    return [log_cosh(x, t).numpy() for t in temps] + [log_cosh(x[0, 0], temps[0]).numpy()]


# -- replies -------------------------------------------------------------------------------------------------
def model_bytes(reply, what):
    """The bytes P1 answered (validated): a uint8 array of at most MAX_BYTES."""
    error = replies.error_reply(reply, what)
    if error is not None:
        raise AssertionError(f"{what}: raised {error['error']}: {error['message'][:300]}")
    if not (isinstance(reply, dict) and len(reply) == 1 and set(reply) <= {"model", "returned", "too_big"}):
        replies.fail(what, "the model's bytes", reply)
    assert "returned" not in reply, f"{what}: should return the model as bytes, returned {str(reply['returned'])[:60]}"
    assert "too_big" not in reply, f"{what}: the model should be under {MAX_BYTES >> 20} MB"
    assert "model" in reply, f"{what}: no model came back"
    data = replies.array(reply["model"], what, dtype=np.uint8)
    assert data.ndim == 1 and 0 < data.size <= MAX_BYTES, f"{what}: the model should be non-empty bytes under 8 MB"
    return data


def run_model(clean_room, data, feeds, what):
    """Run the learner's bytes in the clean room; returns (input shapes, per-feed results)."""
    got = clean_room.run("lab11.scenarios:onnx_run", data, feeds)
    if isinstance(got, dict) and "invalid" in got:
        raise AssertionError(f"{what}: {replies.string(got['invalid'], what)}")
    got = replies.dict_of(got, {"inputs", "ops", "results"}, f"{what}: the grader's run")
    return got["inputs"], replies.list_of(got["results"], f"{what}: onnxruntime's results", len(feeds))


def check_inputs_dynamic(shapes, spec_shapes, what):
    """Dimension 0 of every input: one shared symbolic dimension; the others static and as exported."""
    shapes = replies.list_of(shapes, f"{what}: the graph's inputs", len(spec_shapes))
    first = None
    for k, (shape, want) in enumerate(zip(shapes, spec_shapes, strict=True)):
        shape = replies.list_of(shape, f"{what}: input {k}'s shape", len(want) + 1)
        assert isinstance(shape[0], str), (
            f"{what}: dimension 0 of input {k} should be the dynamic batch, the graph fixes it to {shape[0]}")
        first = shape[0] if first is None else first
        assert shape[0] == first, (f"{what}: every input's dimension 0 should be the same dynamic batch "
                                   f"dimension, input {k}'s is {shape[0]!r} and input 0's is {first!r}")
        assert list(shape[1:]) == list(want), (
            f"{what}: input {k}'s dimensions after the batch should be static {list(want)}, the graph has {shape[1:]}")


def check_outputs(result, want, dtype, what):
    error = replies.error_reply(result, what)
    if error is not None:
        raise AssertionError(f"{what}: onnxruntime raised {error['error']}: {error['message'][:300]}")
    result = replies.dict_of(result, {"outputs"}, what)
    outs = replies.list_of(result["outputs"], f"{what}: the outputs", len(want))
    atol, rtol = TOL[dtype]
    for k, (g, w) in enumerate(zip(outs, want, strict=True)):
        label = f"{what}, output {k}"
        g = replies.array(g, label, shape=w.shape)
        assert g.dtype == np.dtype(dtype), f"{label}: should be {dtype}, onnxruntime returned {g.dtype}"
        nan_w, nan_g = np.isnan(w), np.isnan(g)
        assert np.array_equal(nan_w, nan_g), (
            f"{label}: {int((nan_g & ~nan_w).sum())} value(s) are nan where eager is not, "
            f"{int((nan_w & ~nan_g).sum())} are not nan where eager is")
        inf_w, inf_g = np.isinf(w), np.isinf(g)
        assert np.array_equal(inf_w, inf_g) and np.array_equal(g[inf_g], w[inf_w]), (
            f"{label}: {int((inf_g & ~inf_w).sum())} value(s) are infinite where eager is finite"
            + (" (does the translation overflow for large |x| / temperature?)" if (inf_g & ~inf_w).any() else "")
            + f", {int((inf_w & ~inf_g).sum())} finite where eager is infinite")
        fin = np.isfinite(w)
        if fin.any():
            err = np.abs(g[fin].astype(np.float64) - w[fin].astype(np.float64))
            bound = atol + rtol * float(np.abs(w[fin].astype(np.float64)).max())
            assert err.max() <= bound, (
                f"{label}: differs from eager by up to {err.max():.3g}, beyond the tolerance {atol:g} + {rtol:g}·m "
                f"= {bound:.3g} ({int((err > bound).sum())} of {err.size} values are off)")
