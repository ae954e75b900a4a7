"""Part `kernels`: one generated, built and loaded kernel per op (values against torch, on hypothesis
inputs with special values where they are meaningful), broadcasting, reductions, and the build cache."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab07 import oracle

OPS = list(oracle.shared.OPS)
SPECIAL = {"add": [np.inf, -np.inf, 0.0], "neg": [np.inf, -np.inf], "exp": [-np.inf, 0.0, 80.0, -80.0],
           "sigmoid": [np.inf, -np.inf, 30.0, -30.0], "tanh": [np.inf, -np.inf, 20.0], "relu": [np.inf, -np.inf, 0.0, -0.0],
           "abs": [-np.inf, -0.0], "maximum": [np.inf, -np.inf], "minimum": [np.inf, -np.inf],
           "clamp": [np.inf, -np.inf], "where_gt": [np.inf, -np.inf], "sum_last": [40.0, -40.0], "amax_last": [-np.inf, np.inf]}


def inputs(op, seed, special):
    rng = np.random.default_rng(seed)
    shapes = oracle.shared.OPS[op][1]
    arrays = [(rng.standard_normal(s) * 2).astype(np.float32) for s in shapes]
    if op in oracle.shared.POSITIVE:
        arrays = [np.abs(a) + np.float32(0.05) for a in arrays]
    if op == "div":
        arrays[1] = np.where(np.abs(arrays[1]) < 0.1, np.float32(0.5), arrays[1]).astype(np.float32)
    if op in ("where_le_scalar", "eq_ne") and arrays[0].size:
        arrays[0].flat[::3] = 0.25 if op == "where_le_scalar" else 0.5
        if op == "eq_ne":
            arrays[1].flat[::4] = arrays[0].flat[::4]
    if special and op in SPECIAL:
        values = SPECIAL[op]
        flat = arrays[0].reshape(-1)
        for k, v in enumerate(values):
            flat[(k * 5 + seed) % flat.size] = v
    return arrays


@pytest.mark.parametrize("op", OPS)
def test_op(student, op):
    @settings(max_examples=2)
    @given(seed=st.integers(0, 2**16), special=st.booleans())
    def check(seed, special):
        arrays = inputs(op, seed, special)
        got = student.run("op_kernel", op, arrays)
        want = oracle.op_values(op, arrays)
        gm = oracle.op_gm(op)
        final = [a.name for a in gm.graph.output_node().all_input_nodes]
        missing = [n for n in final if n not in got["outputs"]]
        assert not missing, f"the kernel for `{op}` must write the graph's output {missing} (it is used outside the group), its outputs are {got['outputs']}"
        for name in got["outputs"]:
            assert name in want, f"the kernel for `{op}` writes {name!r}, which is not a node of its graph"
            if want[name].dtype == np.bool_:
                assert got["dtypes"][name] == "torch.bool", f"`{op}`: the output {name} should be a torch.bool tensor, got {got['dtypes'][name]}"
            scale = max(1.0, float(np.max(np.abs(want[name][np.isfinite(want[name])]), initial=0.0)))
            oracle.close(got["values"][name], want[name],
                         f"the kernel for `{op}`{' with special values (inf, 0, large)' if special else ''}, output {name}",
                         rtol=2e-4, atol=2e-5 * scale)
    check()


@pytest.mark.weight(4)
def test_build_cache(student):
    got = student.run("build_cache", "cache_probe")
    c = got["counts"]
    assert c[1] - c[0] == 1, f"building a new source should run cc once: build_count went from {c[0]} to {c[1]}"
    assert c[2] == c[1], f"building the same source a second time must come from the cache, but build_count went from {c[1]} to {c[2]}"
    assert c[3] - c[2] == 1, f"a changed source must be built again: build_count went from {c[2]} to {c[3]}"
    want = np.arange(16, dtype=np.float32)
    oracle.close(got["outs"][0], want * 2 + 1, "the built function of the first source")
    oracle.close(got["outs"][1], want * 2 + 3, "the built function of the changed source")


@pytest.mark.weight(2)
def test_kernel_is_built_once_per_source(student):
    arrays = inputs("sigmoid", 1, False)
    first = student.run("op_kernel", "sigmoid", arrays, "once_probe")
    again = student.run("op_kernel", "sigmoid", arrays, "once_probe")
    assert first["built"] == 1, f"generating and running the first sigmoid kernel should build it once, build_count grew by {first['built']}"
    assert again["built"] == 0, f"the same kernel source a second time must come from the cache, build_count grew by {again['built']}"

# IPT-CANARY lab07 test_kernels.py: hidden grading text, never shown to learners
