# IPT-CANARY lab11 test_onnx.py: hidden grading text, never shown to learners
"""Part `onnx`: log_cosh_onnx (the custom operator's onnxscript translation) and export_onnx (a dynamic-batch export
of models that call it), judged by running the ONNX bytes the learner's code made in onnxruntime.

Trust: values only. P1 answers bytes; the clean room (a confined process with none of the learner's cells loaded)
parses them, refuses external data and foreign operator domains, runs onnx.checker and onnxruntime (CPU provider,
no custom-op library) on inputs P0 drew from the grading seed, at batch sizes other than the example's; P0
compares with its own eager results (oracle_onnx). Every test holds float32 inputs whose |x| / T passes cosh's
float32 overflow, where the naive translation (Log of Cosh, what torch's own operators export to) is infinite
and the operator is finite, and a float64 export, which a translation built for float32 only, or on
onnxruntime's float32-only Cosh or Softplus, cannot pass.
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab11 import oracle_onnx as oracle


def export_translation(student, rng, dtype):
    width = int(rng.integers(3, 7))
    temps = oracle.temperatures(rng, 3)
    example = rng.standard_normal((int(rng.integers(2, 6)), width)).astype(dtype)
    what = (f"log_cosh_onnx on {dtype} inputs (a module calling log_cosh with 3 temperatures, and once on the 0-d x[0, 0], "
            "exported by the grader)")
    data = oracle.model_bytes(student.run("lab11.scenarios:onnx_translate", example, temps), what)
    return width, temps, data, what


@pytest.mark.weight(3)
def test_translation(student, clean_room):
    """The translation alone, in float32 and in float64, on drawn temperatures: plain values at batch 1 and a drawn
    batch, then zeros, tiny, large (past cosh's float32 overflow), infinite and nan values, and drawn large
    magnitudes; each time also on a 0-d input (x[0, 0]), whose result is 0-d."""
    for dtype in oracle.DTYPES:
        rng = case_rng(1100 + oracle.DTYPES.index(dtype))
        width, temps, data, what = export_translation(student, rng, dtype)
        n = int(rng.integers(2, 200))
        feeds = [("a batch of 1", rng.standard_normal((1, width)) * 2.0),
                 (f"a batch of {n}", rng.standard_normal((n, width)) * float(rng.uniform(0.5, 5.0))),
                 ("zeros, tiny, large (|x| up to 1e5), infinite and nan values", oracle.special_values(rng, width, dtype))]
        arrays = [[a.astype(dtype)] for _, a in feeds]
        _, results = oracle.run_model(clean_room, data, arrays, what)
        for (label, _), feed, result in zip(feeds, arrays, results, strict=True):
            oracle.check_outputs(result, oracle.eager_translation(temps, feed[0]), dtype, f"{what}, {label}")


@pytest.mark.weight(2)
@pytest.mark.parametrize("kind", oracle.KINDS)
def test_export(student, clean_room, kind):
    """export_onnx on a drawn model, in float32 and in float64: the graph's inputs have one shared dynamic batch
    dimension; the values at batch 1, a drawn batch, a large drawn batch with large-magnitude rows, and the largest
    batch (1024) match eager."""
    for dtype in oracle.DTYPES:
        rng = case_rng(1200 + 10 * oracle.KINDS.index(kind) + oracle.DTYPES.index(dtype))
        spec = oracle.model_spec(kind, rng, dtype)
        wire = {k: spec[k] for k in ("kind", "weights", "temps", "example")}
        desc = (f"export_onnx on a {dtype} model ({'one input' if kind == 'mlp' else 'two inputs'} of shapes "
                f"{[[len(spec['example'][0]), *s] for s in spec['shapes']]}, log_cosh inside)")
        data = oracle.model_bytes(student.run("lab11.scenarios:onnx_export", wire), desc)
        n, m = int(rng.integers(2, 100)), int(rng.integers(100, 1000))
        cases = [("a batch of 1", 1, False), (f"a batch of {n}", n, False),
                 (f"a batch of {m} with large-magnitude rows (|x| of 1e3 to 1e4)", m, True),
                 (f"a batch of {oracle.MAX_BATCH} with large-magnitude rows", oracle.MAX_BATCH, True)]
        feeds = [oracle.inputs(spec, rng, b, special) for _, b, special in cases]
        shapes, results = oracle.run_model(clean_room, data, feeds, desc)
        oracle.check_inputs_dynamic(shapes, spec["shapes"], desc)
        for (label, _, _), feed, result in zip(cases, feeds, results, strict=True):
            oracle.check_outputs(result, oracle.eager(spec, feed), dtype, f"{desc}, {label}")
