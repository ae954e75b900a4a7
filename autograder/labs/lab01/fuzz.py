# IPT-CANARY lab01 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab01's reference solution against PyTorch 2.13 (runs in P0, with torch).

The reference module is built from the solution source the way grading builds a learner's module,
and driven through the lab's own scenario functions (so the fuzzer sees exactly what a grader sees);
every answer is compared with the oracle by the graders' own comparisons. Mixed op chains draw from
the whole edge domain of catalogue.toml: 0-d, size-0, size-1 dims with odd strides, stride 0,
negative / out-of-range / duplicate dims, int and float dtypes, errors and second calls.

    run(50)    # CI: a few seconds          run(2000)   # make fuzz
"""
from __future__ import annotations

import functools

import hypothesis
from hypothesis import given
from hypothesis import strategies as st

from autograder.labs.lab01 import oracle, scenarios, strategies as S
from autograder.paths import LabPaths

FIELDS_ALL = ("shape", "stride", "offset", "values", "shares", "contiguous", "channels_last")


@functools.lru_cache(maxsize=1)
def reference():
    """The reference solution as a module (its exported cells, as grading runs them)."""
    from autograder.engine.variants import reference_module
    return reference_module("lab01")


@st.composite
def any_op(draw, current):
    kind = draw(st.sampled_from(("view", "index", "index", "expand", "as_strided", "contiguous")))
    if kind == "view":
        return draw(S.view_op(current))
    if kind == "index":
        return draw(S.indexing_op(current))
    if kind == "expand":
        return draw(S.expand_op(current))
    if kind == "as_strided":
        return draw(S.as_strided_op(current.untyped_storage().nbytes() // current.element_size()))
    if current.dim() == 4 and draw(st.booleans()):
        return ["contiguous", "channels_last"]
    return ["contiguous"]


def _chain(base, ops):
    got = scenarios.chain(reference(), base, ops, flags=True)
    want = oracle.chain(base, ops, flags=True)
    message = oracle.compare_chain(got, want, base, ops, FIELDS_ALL)
    assert message is None, f"reference disagrees with torch: {message}"


def run(examples: int) -> int:
    count = 0
    budget = max(1, examples)

    def settings(n):  # the fuzzer is deterministic: the same cases on every run
        return hypothesis.settings(S.examples(max(1, n)), derandomize=True)

    @settings(budget * 2)
    @given(case=S.chains(S.layouts(min_dim=0, max_dim=4, min_size=0, zero_strides=True,
                                   dtype="float64"), any_op, 1, 4))
    def mixed(case):
        nonlocal count
        count += 1
        _chain(*case)

    @settings(budget)
    @given(case=S.chains(S.layouts(min_dim=0, max_dim=4, zero_strides=True), S.view_op, 1, 3))
    def views(case):
        nonlocal count
        count += 1
        _chain(*case)

    @settings(budget)
    @given(case=S.chains(S.layouts(min_dim=0, max_dim=4, min_size=0), S.indexing_op, 1, 4))
    def indexing(case):
        nonlocal count
        count += 1
        _chain(*case)

    @settings(budget)
    @given(data=st.data())
    def facts(data):
        nonlocal count
        count += 1
        layout = data.draw(S.layouts(min_dim=0, min_size=0, zero_strides=True))
        shape = layout["shape"]
        indices = [[data.draw(st.integers(-n - 1, n)) for n in shape] for _ in range(3)]
        got = scenarios.layout_facts(reference(), layout, indices)
        want = oracle.layout_facts(layout, indices)
        assert got["numel"] == want["numel"] and got["contiguous"] == want["contiguous"], (layout, got, want)
        for g, w in zip(got["storage_index"], want["storage_index"], strict=True):
            assert (isinstance(g, dict) and isinstance(w, dict) and g["error"] == w["error"]) or g == w, (layout, g, w)
        shapes = [shape, [n + 1 for n in shape]]
        assert scenarios.contiguous_strides(reference(), shapes) == oracle.contiguous_strides(shapes), shapes

    @settings(budget)
    @given(shapes=S.broadcastable_shapes())
    def shapes(shapes):
        nonlocal count
        count += 1
        got = scenarios.broadcast_shapes(reference(), shapes)
        want = oracle.broadcast_shapes(shapes)
        assert got.get("error") == want.get("error") and got.get("shape") == want.get("shape"), (shapes, got, want)

    @settings(budget)
    @given(data=st.data())
    def arithmetic(data):
        nonlocal count
        count += 1
        dtype = data.draw(st.sampled_from(("int64", "float64")))
        a = data.draw(S.layouts(min_dim=0, max_dim=3, min_size=0, zero_strides=True, dtype=dtype))
        shape_b = [1 if data.draw(st.integers(0, 2)) == 0 else n for n in a["shape"][data.draw(st.integers(0, len(a["shape"]))):]]
        b = data.draw(S.layouts(shape=shape_b, zero_strides=True,
                                dtype=data.draw(st.sampled_from(("int64", "float64")))))
        op = data.draw(st.sampled_from(("add", "mul")))
        got, want = scenarios.binary(reference(), op, a, b), oracle.binary(op, a, b)
        message = oracle.compare_tensor(got, want, op, ("shape", "stride", "offset", "values", "shares"))
        assert message is None, (a, b, message)
        ndim = len(a["shape"])
        dim = data.draw(st.integers(-max(ndim, 1), max(ndim, 1) - 1))
        keepdim = data.draw(st.booleans())
        got, want = scenarios.reduce_sum(reference(), a, dim, keepdim), oracle.reduce_sum(a, dim, keepdim)
        message = oracle.compare_tensor(got, want, f"sum({dim}, keepdim={keepdim})",
                                        ("shape", "stride", "offset", "values", "shares"))
        assert message is None, (a, message)

    @settings(budget)
    @given(data=st.data())
    def channels_last(data):
        nonlocal count
        count += 1
        shape = data.draw(st.lists(st.integers(0, 4), min_size=3, max_size=5))
        assert scenarios.channels_last_strides(reference(), [shape]) == oracle.channels_last_strides([shape]) or \
            "error" in oracle.channels_last_strides([shape])[0], shape
        layout = data.draw(S.layouts(min_dim=3, max_dim=5, min_size=0, zero_strides=True))
        for fmt in ("contiguous_format", "channels_last"):
            assert scenarios.layout_flags(reference(), [layout], fmt) == oracle.layout_flags([layout], fmt), (layout, fmt)

    for test in (mixed, views, indexing, facts, shapes, arithmetic, channels_last):
        test()
    return count


if __name__ == "__main__":
    import sys

    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 50), "cases agree with torch")
