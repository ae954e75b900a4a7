"""Part `kernels`: the C source generate_kernel writes for one group is compiled and run by the grader itself,
in its clean room (none of the learner's Python loaded), on the grader's inputs, and compared with torch;
the learner's run_kernel and build cache are checked on values too."""
import zlib

import numpy as np
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_seed
from autograder.engine.student import StudentError
from autograder.labs.lab07 import oracle

LONG_SUM = "sum_long_row"          # graded by test_long_row_sum_precision, on inputs of its own
OPS = [op for op in oracle.shared.OPS if op != LONG_SUM]
SPECIAL = {"add": [np.inf, -np.inf, 0.0], "neg": [np.inf, -np.inf], "exp": [-np.inf, 0.0, 80.0, -80.0],
           "sigmoid": [np.inf, -np.inf, 30.0, -30.0, -100.0, -1000.0], "tanh": [np.inf, -np.inf, 20.0], "relu": [np.inf, -np.inf, 0.0, -0.0],
           "abs": [-np.inf, -0.0], "maximum": [np.inf, -np.inf], "minimum": [np.inf, -np.inf],
           "clamp": [np.inf, -np.inf], "where_gt": [np.inf, -np.inf], "sum_last": [40.0, -40.0], "amax_last": [-np.inf, np.inf]}


def inputs(op, seed, special):
    rng = np.random.default_rng(seed)
    shapes = oracle.shared.OPS[op][1]
    arrays = [np.asarray(rng.standard_normal(s) * 2, dtype=np.float32) for s in shapes]
    if op in oracle.shared.POSITIVE:
        arrays = [np.abs(a) + np.float32(0.05) for a in arrays]
    if op == "div":
        arrays[1] = np.where(np.abs(arrays[1]) < 0.1, np.float32(0.5), arrays[1]).astype(np.float32)
    if op in ("where_le_scalar", "eq_ne") and arrays[0].size:
        arrays[0].flat[::3] = 0.25 if op == "where_le_scalar" else 0.5
        if op == "eq_ne":
            arrays[1].flat[::4] = arrays[0].flat[::4]
    if special and op in SPECIAL and arrays[0].size:
        values = SPECIAL[op]
        flat = arrays[0].reshape(-1)
        for k, v in enumerate(values):
            flat[(k * 5 + seed) % flat.size] = v
    return arrays


@pytest.fixture(scope="module")
def ahead(student, clean_room):
    """Once per part: every op's kernel from generate_kernel (one call), compiled by the clean room in one batch
    (oracle.prepare_kernels). A cache, never a verdict: each test still asks for its own kernel, and the clean
    room runs exactly the text that test received, from the batch only where the text is the same."""
    ops = [*OPS, LONG_SUM]
    try:
        got = student.run_within(30, "op_sources", ops)
    except StudentError:
        return
    if not isinstance(got, list) or len(got) != len(ops):
        return
    kernels = []
    for op, entry in zip(ops, got, strict=True):
        try:
            kernel = oracle.kernel_reply(entry, op)
        except AssertionError:
            continue
        if kernel["name"] == f"op_{op}":
            kernels.append(kernel)
    oracle.prepare_kernels(clean_room, kernels)


def check_op(student, clean_room, op, seed, special):
    arrays = inputs(op, seed, special)
    what = f"the kernel for `{op}`{' with special values (inf, 0, large)' if special else ''}"
    got = replies.dict_of(student.run("op_kernel", op, arrays), {"values", "dtypes"}, f"{what}: the scenario reply")
    kernel = oracle.kernel_reply(got, what)
    assert kernel["name"] == f"op_{op}", f"{what}: generate_kernel(gm, group, 'op_{op}') should name the kernel 'op_{op}', got {kernel['name']!r}"
    gm = oracle.op_gm(op)
    group = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    values = oracle.node_values(gm, [torch.from_numpy(np.array(a, copy=True)) for a in arrays])
    oracle.run_kernels(clean_room, gm, values, [(kernel, group)], what)
    # the learner's runner: one tensor per output, in kernel.outputs order
    outs = replies.list_of(got["values"], f"{what}: run_kernel's result", length=len(kernel["outputs"]))
    dtypes = replies.list_of(got["dtypes"], f"{what}: run_kernel's dtypes", length=len(kernel["outputs"]))
    for j, name in enumerate(kernel["outputs"]):
        want = values[name].numpy()
        if want.dtype == np.bool_:
            assert dtypes[j] == "torch.bool", f"{what}: run_kernel's output {name} should be a torch.bool tensor, got {dtypes[j] or 'no tensor'}"
        scale = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0))) if want.dtype != np.bool_ else 1.0
        oracle.close(outs[j], want, f"{what}: run_kernel's output {name}", rtol=2e-4, atol=2e-5 * scale)


# a size-0 case computes nothing, so a runner that never calls the kernel passes it alone: it counts only
# together with a non-empty case of the same kind of op (degenerate submissions score zero)
COMPANION = {"size0": "bias_row", "size0_rowstat": "bias_col"}


@pytest.mark.parametrize("op", OPS)
def test_op(student, clean_room, ahead, op):
    seed = case_seed(zlib.crc32(op.encode())) % 2**16
    for special in (False, True):  # plain values, then the same kernel with inf, 0 and large values among them
        check_op(student, clean_room, op, seed + special, special)
        if op in COMPANION:
            check_op(student, clean_room, COMPANION[op], seed + special, special)


def long_sum_inputs(seed):
    """Two rows of 2**20 positive terms: 64 large ones (about 1e3) at each end of the row, small ones (about 3e-5)
    between, the shape of a softmax denominator. A float accumulator, in however many vector lanes, sees each
    small term fall below half an ulp of its running sum and loses about 1e-4 of the total; a double one is
    exact to float rounding, like PyTorch's own sum (about 1e-7)."""
    rng = np.random.default_rng(seed)
    shapes = oracle.shared.OPS[LONG_SUM][1]
    a = rng.uniform(0.5, 1.5, shapes[0]).astype(np.float32)
    b = rng.uniform(1e-5, 5e-5, shapes[1]).astype(np.float32)
    b[0, :64] = rng.uniform(1000.0, 2000.0, 64)
    b[0, -64:] = rng.uniform(1000.0, 2000.0, 64)
    return [a, b]


@pytest.mark.weight(2)
def test_long_row_sum_precision(student, clean_room, ahead, grading_seed):
    arrays = long_sum_inputs(grading_seed)
    what = ("the kernel for (a * b).sum(-1) over rows of 2**20 terms (a few large terms, a million small ones: "
            "accumulate a sum in double, a float running sum drops the small terms)")
    got = replies.dict_of(student.run("op_kernel", LONG_SUM, arrays), {"values", "dtypes"}, f"{what}: the scenario reply")
    kernel = oracle.kernel_reply(got, what)
    gm = oracle.op_gm(LONG_SUM)
    group = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    values = oracle.node_values(gm, [torch.from_numpy(np.array(a, copy=True)) for a in arrays])
    # PyTorch's float32 sum is within 1e-7 of the exact sum here: 1e-5 leaves the rounding of any honest order
    oracle.run_kernels(clean_room, gm, values, [(kernel, group)], what, rtol=1e-5, atol=0.0)
    outs = replies.list_of(got["values"], f"{what}: run_kernel's result", length=len(kernel["outputs"]))
    for j, name in enumerate(kernel["outputs"]):
        oracle.close(outs[j], values[name].numpy(), f"{what}: run_kernel's output {name}", rtol=1e-5, atol=0.0)


@pytest.mark.weight(4)
def test_build_cache(student):
    rng = np.random.default_rng()
    scale, shift = float(np.float32(rng.uniform(1.5, 4.0))), float(np.float32(rng.uniform(-3.0, 3.0)))
    name = f"cache_probe_{int(rng.integers(1 << 30))}"
    got = replies.dict_of(student.run("build_cache", name, scale, shift), {"counts", "same_object", "outs"}, "build()")
    outs = replies.list_of(got["outs"], "build(): the results of the built functions", length=2)
    want = np.arange(16, dtype=np.float32)
    oracle.close(outs[0], want * np.float32(scale) + np.float32(shift), "the function build() returns for a new source", rtol=1e-5, atol=1e-4)
    oracle.close(outs[1], want * np.float32(scale) + np.float32(shift + 2.0), "the function build() returns for a changed source",
                 rtol=1e-5, atol=1e-4)
    c = replies.int_list(got["counts"], "build_count() around the builds", length=4)
    assert c[1] - c[0] == 1, f"building a new source should run cc once: build_count went from {c[0]} to {c[1]}"
    assert c[2] == c[1], f"building the same source a second time must come from the cache, but build_count went from {c[1]} to {c[2]}"
    assert c[3] - c[2] == 1, f"a changed source must be built again: build_count went from {c[2]} to {c[3]}"
    assert replies.boolean(got["same_object"], "build() twice on one source returns the same function"), (
        "build(source) twice should return the cached function the second time")

# IPT-CANARY lab07 test_kernels.py: hidden grading text, never shown to learners
