# IPT-CANARY lab11 test_cpp.py: hidden grading text, never shown to learners
"""Part `cpp`: lab11_cpp::safe_div, a C++ operator with a Python fake kernel and backward formula.

Trust: values only. The C++ half is compiled by P0 in the clean room (oracle_cpp.build, cached by source hash)
and run there, where none of the learner's Python exists: its results for P0's inputs are compared with P0's
oracle (values, shape, strides, dtype, the inputs untouched, the result writable without touching them, the
schema's keyword-only fill, its default and its errors). The Python half (register_python_parts) runs in P1 on a
stand-in operator with the same schema: the fake kernel's output metadata under a FakeTensorMode and on meta
tensors, the gradients autograd gives for P0's grad_outputs, and torch.compile(fullgraph=True) of P0's programs.

Rule 8: every test holds cases where PyTorch's nearest operators differ from the lab's rules: zeros in b (torch.div
gives inf/nan, autograd through torch.where gives NaN gradients), transposed inputs (torch.div keeps their
layout; the lab's result is contiguous) or mixed dtypes (torch.div promotes; the lab raises).
"""
import numpy as np
import pytest
import torch

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.engine.student import StudentError
from autograder.labs.lab11 import oracle_cpp as oc


@pytest.fixture(scope="module")
def library(student, clean_room):
    return oc.build(student, clean_room)


def kernel(clean_room, library, cases, what):
    assert "error" not in library, library["error"]
    try:
        got = clean_room.run_within(60, "lab11.scenarios:cpp_cases", library["so"], library["key"], cases)
    except StudentError as exc:
        raise AssertionError(f"{what}: your compiled kernel did not return ({exc})") from None
    got = replies.dict_of(got, set(), what)
    if "load_error" in got:
        raise AssertionError(f"{what}: your compiled library could not be used: {replies.string(got['load_error'], 'the load error')[:300]}")
    return replies.list_of(got.get("results"), f"{what}: the results", len(cases))


def case_what(case):
    call = case.get("call", {})
    style = {"plain": "safe_div(a, b)", "fill_kw": "safe_div(a, b, fill=...)", "fill_pos": "safe_div(a, b, fill) (fill positional)",
             "names": "safe_div(a=a, b=b, fill=...)", "extra_kw": "safe_div(a, b, fill=..., alpha=1.0)"}[call.get("style", "plain")]
    return f"{style} with a: {oc.describe(case['a'])}, b: {oc.describe(case['b'])}"


def zero_mask(case, shape):
    b, _ = oc.make(case["b"])
    return (b == 0).expand(shape).numpy() if shape else (b == 0).numpy()


def check_kernel(case, reply, what):
    want = oc.expected(case)
    err = replies.error_reply(reply, what)
    if want is None:
        assert err is not None, f"{what}: should raise an error, but returned a result"
        return
    assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
    reply = replies.dict_of(reply, {"values", "shape", "stride", "dtype", "after"}, what)
    values, shape, dtype = want
    got_shape = replies.int_list(reply["shape"], f"{what}: the result's shape")
    assert got_shape == shape, f"{what}: the result should have the broadcast shape {shape}, got {got_shape}"
    assert reply["dtype"] == dtype, f"{what}: the result should be {dtype}, got {reply['dtype']}"
    got = replies.array(reply["values"], f"{what}: the values", shape=shape)
    if not oc.close(got, values, oc.RTOL[dtype]):
        zero = zero_mask(case, shape)
        where = "b == 0 (the result there is fill)" if not oc.close(got[zero], values[zero], oc.RTOL[dtype]) else "b != 0 (a / b)"
        raise AssertionError(f"{what}: wrong values where {where}")
    stride = replies.int_list(reply["stride"], f"{what}: the result's strides", len(shape))
    assert oc.significant_strides_ok(shape, stride, oc.contiguous_strides(shape)), (
        f"{what}: the result should be a new contiguous tensor; it has strides {stride}")
    for after, (name, spec_) in replies.pairs(reply["after"], [("a", case["a"]), ("b", case["b"])], what):
        assert oc.close(replies.array(after, f"{what}: {name} after the call"), spec_["base"], 0.0), (
            f"{what}: the call changed {name}")
    if "write" in case:
        after = reply.get("after_write")
        err = replies.error_reply(after, what)
        assert err is None, f"{what}: writing into the result raised {err and err['error']}: it should be a new tensor"
        for values_after, (name, spec_) in replies.pairs(after, [("a", case["a"]), ("b", case["b"])], what):
            assert oc.close(replies.array(values_after, f"{what}: {name} after a write"), spec_["base"], 0.0), (
                f"{what}: writing into the result changed {name}: the result shares memory with it")


def run_kernel(clean_room, library, cases, what):
    for case, reply in zip(cases, kernel(clean_room, library, cases, what), strict=True):
        check_kernel(case, reply, f"{what}: {case_what(case)}")


def _python_cases(rng):
    r, c = int(rng.integers(2, 6)), int(rng.integers(3, 7))
    good = [
        (oc.spec(rng, (c, r), views=[["t"]]), oc.spec(rng, (c,))),
        (oc.spec(rng, (r, 1, c), "float64"), oc.spec(rng, (2, c), "float64")),
        (oc.spec(rng, (0, c)), oc.spec(rng, (c,))),
        (oc.spec(rng, (), "float64"), oc.spec(rng, (r,), "float64")),
        (oc.spec(rng, (r, 2 * c), views=[["slice", 1, 0, None, 2]]), oc.spec(rng, (r, 1))),
    ]
    bad = [
        (oc.spec(rng, (r, c)), oc.spec(rng, (c,), "float64")),
        (oc.spec(rng, (r,), "int64"), oc.spec(rng, (r,), "int64")),
        (oc.spec(rng, (r, c)), oc.spec(rng, (c + 1,))),
    ]
    return good, bad


@pytest.mark.weight(2)
def test_fake_kernel(student):
    """Your fake kernel under a FakeTensorMode and on meta tensors: broadcast shape, contiguous strides, dtype,
    device; mixed and integer dtypes and shapes that do not broadcast raise."""
    rng = case_rng(21)
    good, bad = _python_cases(rng)
    cases = [{"a": a, "b": b, "mode": mode, "call": {"style": "fill_kw", "fill": 1.5}, "good": ok}
             for mode in ("fake", "meta") for ok, group in ((True, good), (False, bad)) for a, b in group]
    order = [int(i) for i in rng.permutation(len(cases))]
    cases = [cases[i] for i in order]
    got = replies.list_of(student.run("lab11.scenarios:py_fake", [{k: v for k, v in c.items() if k != "good"} for c in cases]),
                          "the fake kernel's results", len(cases))
    for case, reply in zip(cases, got, strict=True):
        where = "under a FakeTensorMode" if case["mode"] == "fake" else "on meta tensors"
        what = f"your fake kernel {where}, a: {oc.describe(case['a'])}, b: {oc.describe(case['b'])}"
        err = replies.error_reply(reply, what)
        if not case["good"]:
            assert err is not None, f"{what}: should raise, as the CPU kernel does, but returned a tensor"
            continue
        assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
        reply = replies.dict_of(reply, {"shape", "stride", "dtype", "device"}, what)
        a, _ = oc.make(case["a"])
        b, _ = oc.make(case["b"])
        shape = list(torch.broadcast_shapes(a.shape, b.shape))
        got_shape = replies.int_list(reply["shape"], f"{what}: the shape")
        assert got_shape == shape, f"{what}: the shape should be {shape}, got {got_shape}"
        stride = replies.int_list(reply["stride"], f"{what}: the strides", len(shape))
        assert oc.significant_strides_ok(shape, stride, oc.contiguous_strides(shape)), (
            f"{what}: the strides should be contiguous like the CPU kernel's result, got {stride}")
        dtype = str(a.dtype).replace("torch.", "")
        assert reply["dtype"] == dtype, f"{what}: the dtype should be {dtype}, got {reply['dtype']}"
        device = "cpu" if case["mode"] == "fake" else "meta"
        assert reply["device"] == device, f"{what}: the device should be {device}, got {reply['device']}"


@pytest.mark.weight(3)
def test_gradients(student):
    """Gradients through your registered backward for P0's grad_outputs: zeros in b, broadcasting both ways,
    one input without requires_grad, non-contiguous and 0-d inputs, inf and NaN in a where b is 0."""
    rng = case_rng(22)
    n, m = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    cases = [
        {"a": oc.spec(rng, (n, m), "float64"), "b": oc.spec(rng, (m,), "float64", zeros=2), "requires_grad": [True, True]},
        {"a": oc.spec(rng, (n, 1), "float64"), "b": oc.spec(rng, (1, m), "float64", zeros=1), "requires_grad": [True, False]},
        {"a": oc.spec(rng, (n + m,)), "b": oc.spec(rng, (n + m,), zeros=2), "requires_grad": [False, True]},
        {"a": oc.spec(rng, (m, n), "float64", views=[["t"]]), "b": oc.spec(rng, (), "float64"), "requires_grad": [True, True]},
        {"a": oc.spec(rng, (n,), "float64"), "b": oc.spec(rng, (), "float64", zeros=1), "requires_grad": [True, True]},
        {"a": oc.spec(rng, (2, n, m)), "b": oc.spec(rng, (n, 1), zeros=1), "requires_grad": [True, True]},
        {"a": oc.spec(rng, (n, 1), "float64"), "b": oc.spec(rng, (1, m), "float64", zeros=1), "requires_grad": [True, True]},
    ]
    a, b = oc.spec(rng, (n + m,), "float64"), oc.spec(rng, (n + m,), "float64")
    at = rng.permutation(n + m)[:4]  # inf, -inf, NaN and 0 in a where b is 0: the rule's gradients are 0 there too
    a["base"][at], b["base"][at] = [np.inf, -np.inf, np.nan, 0.0], [0.0, -0.0, 0.0, 0.0]
    cases.append({"a": a, "b": b, "requires_grad": [True, True]})
    for case in cases:
        a, _ = oc.make(case["a"])
        b, _ = oc.make(case["b"])
        shape = torch.broadcast_shapes(a.shape, b.shape)
        case["grad"] = rng.uniform(-2, 2, size=shape).astype(np.asarray(case["a"]["base"]).dtype)
        case["call"] = {"style": "fill_kw", "fill": float(rng.uniform(-3, 3))}
    got = replies.list_of(student.run("lab11.scenarios:py_grad", cases), "the gradients", len(cases))
    for case, reply in zip(cases, got, strict=True):
        who = [name for name, w in zip("ab", case["requires_grad"], strict=True) if w]
        what = (f"the gradient with respect to {' and '.join(who)} of safe_div(a, b, fill=...), a: {oc.describe(case['a'])}, "
                f"b: {oc.describe(case['b'])}")
        err = replies.error_reply(reply, what)
        assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
        reply = replies.dict_of(reply, {"grads", "shapes"}, what)
        dtype = str(np.asarray(case["a"]["base"]).dtype)
        rtol, atol = (1e-10, 1e-12) if dtype == "float64" else (2e-5, 1e-6)
        wants = oc.gradients(case)
        b, _ = oc.make(case["b"])
        for got_g, (name, want) in replies.pairs(reply["grads"], list(zip(who, wants, strict=True)), what):
            assert got_g is not None, f"{what}: no gradient for {name}"
            g = replies.array(got_g, f"{what}: the gradient of {name}")
            assert list(g.shape) == list(want.shape), (
                f"{what}: the gradient of {name} should have {name}'s shape {list(want.shape)}, got {list(g.shape)}")
            scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
            if not oc.close(g, want, rtol, atol * scale):
                bad = "NaN" if np.isnan(g).any() else "wrong values"
                raise AssertionError(f"{what}: {bad} in the gradient of {name}" + (" (b has zeros: the rule gives 0 there)"
                                                                                 if (b == 0).any() else ""))


@pytest.mark.weight(2)
def test_compile(student):
    """torch.compile(fullgraph=True, backend="aot_eager") of P0's programs around the op: values and gradients,
    static and dynamic shapes; a program with a data-dependent branch must not compile into one graph."""
    rng = case_rng(23)

    def inputs(n, m, dtype):
        a = oc.spec(rng, (n, m), dtype)["base"]
        b = oc.spec(rng, (m,), dtype, zeros=1)["base"]
        return a, b

    programs = []
    for dynamic, dtype in ((False, "float64"), (True, "float32")):
        spec_ = {"pre": ["affine", "sin", "tanh"][int(rng.integers(3))], "post": ["square", "mul_a", "none"][int(rng.integers(3))],
                 "reduce": ["sum", "mean", "sum0"][int(rng.integers(3))], "c1": float(rng.uniform(0.5, 2)),
                 "c2": float(rng.uniform(-1, 1)), "fill": float(rng.uniform(-2, 2)), "dynamic": dynamic}
        m = int(rng.integers(2, 5))
        runs = []
        for n in ([int(rng.integers(2, 5))] if not dynamic else [int(rng.integers(2, 5)), int(rng.integers(5, 9))]):
            a, b = inputs(n, m, dtype)
            out_shape = (m,) if spec_["reduce"] == "sum0" else ()
            runs.append([a, b, rng.uniform(-1, 1, size=out_shape).astype(dtype)])
        spec_["inputs"] = runs
        programs.append(spec_)
    probe = dict(programs[0], probe=True, dynamic=False, inputs=programs[0]["inputs"][:1])
    programs.append(probe)
    got = [replies.list_of(student.run("lab11.scenarios:py_compile", [spec_]), "the compiled program", 1)[0]
           for spec_ in programs]  # one call per program: each compile has the whole call timeout to itself
    for spec_, reply in zip(programs, got, strict=True):
        what = (f"torch.compile(fullgraph=True) of a program calling safe_div ({spec_['pre']}, then safe_div, then "
                f"{spec_['post']}, {spec_['reduce']}; {'dynamic' if spec_['dynamic'] else 'static'} shapes)")
        err = replies.error_reply(reply, what)
        if spec_.get("probe"):
            assert err is not None, ("a program with a data-dependent Python branch should fail to compile into one graph "
                                     "with fullgraph=True, but it ran: torch.compile did not compile it")
            continue
        assert err is None, f"{what}: raised {err and err['error']}: {err and err['message'][:200]}"
        runs = replies.list_of(replies.dict_of(reply, {"runs"}, what)["runs"], what, len(spec_["inputs"]))
        dtype = str(np.asarray(spec_["inputs"][0][0]).dtype)
        rtol, atol = (1e-10, 1e-12) if dtype == "float64" else (1e-4, 1e-5)
        for j, (run, (a, b, w)) in enumerate(zip(runs, spec_["inputs"], strict=True)):
            run = replies.dict_of(run, {"out", "grad_a", "grad_b"}, what)
            want = oc.program_run(spec_, a, b, w)
            for name, value, expect in zip(("the output", "the gradient of a", "the gradient of b"),
                                           (run["out"], run["grad_a"], run["grad_b"]), want, strict=True):
                arr = replies.array(value, f"{what}: {name}", shape=expect.shape)
                scale = max(1.0, float(np.max(np.abs(expect), initial=0.0)))
                assert oc.close(arr, expect, rtol, atol * scale), f"{what}, call {j + 1}: {name} is wrong"


# The C++ tests run last: the clean room and the student process are forked by one zygote, and a crash in either
# resets the zygote's whole process group, so a kernel that segfaults must not take the Python tests with it.
@pytest.mark.weight(3)
def test_kernel_values(student, clean_room, library):
    """Broadcast shapes, zeros (and -0.0) in b, NaN/inf/tiny values, fill given or left at its default."""
    rng = case_rng(11)
    n, m, p = (int(rng.integers(2, 6)) for _ in range(3))
    fills = [float(rng.uniform(-5, 5)), float("nan"), float(rng.choice([np.inf, -np.inf]))]
    cases = [
        {"a": oc.spec(rng, (n, m), special=True), "b": oc.spec(rng, (m,), zeros=2), "call": {"style": "fill_kw", "fill": fills[0]}},
        {"a": oc.spec(rng, (n, 1), "float64"), "b": oc.spec(rng, (1, m), "float64", zeros=2, special=True), "call": {"style": "plain"}},
        {"a": oc.spec(rng, (p, 1, m), "float64", special=True), "b": oc.spec(rng, (n, m), "float64", zeros=3),
         "call": {"style": "fill_kw", "fill": fills[1]}},
        {"a": oc.spec(rng, (m + n,), special=True), "b": oc.spec(rng, (m + n,), zeros=3, special=True),
         "call": {"style": "names", "fill": fills[2]}},
        {"a": oc.spec(rng, (n, m), "float64", low=1e-3, high=1e3), "b": oc.spec(rng, (n, m), "float64", zeros=1, low=1e-30, high=1e-20),
         "call": {"style": "fill_kw", "fill": float(int(rng.integers(-9, 9)))}},
    ]
    same = cases[3]  # NaN in a exactly where b is zero: the result there is still fill
    zeros = np.flatnonzero(same["b"]["base"] == 0)
    same["a"]["base"][zeros[0]] = np.nan
    run_kernel(clean_room, library, cases, "your C++ kernel")


@pytest.mark.weight(2)
def test_kernel_layouts(student, clean_room, library):
    """Transposed, sliced, expanded, 0-d and size-0 inputs; the result is new and contiguous, the inputs untouched."""
    rng = case_rng(12)
    r, c = int(rng.integers(2, 6)), int(rng.integers(3, 7))
    w = float(rng.uniform(10, 20))
    cases = [
        {"a": oc.spec(rng, (c, r), views=[["t"]]), "b": oc.spec(rng, (c,), zeros=1)},
        {"a": oc.spec(rng, (r, 2 * c), "float64", views=[["slice", 1, 0, None, 2]]),
         "b": oc.spec(rng, (1, c), "float64", zeros=1, views=[["expand", [r, c]]])},
        {"a": oc.spec(rng, ()), "b": oc.spec(rng, (r, c), zeros=2)},
        {"a": oc.spec(rng, (0, c)), "b": oc.spec(rng, (1, c), zeros=1)},
        {"a": oc.spec(rng, (r, 0), "float64"), "b": oc.spec(rng, (r, 1), "float64")},
        {"a": oc.spec(rng, (r, c)), "b": oc.spec(rng, (c,), zeros=1)},                       # a already has the result's shape
        {"a": oc.spec(rng, (c, r, 2), "float64", views=[["permute", [2, 0, 1]]]), "b": oc.spec(rng, (1,), "float64", zeros=1)},
        {"a": oc.spec(rng, (r, c), zeros=0), "b": oc.spec(rng, (r, c), zeros=2, views=[["t"], ["t"]])},
    ]
    for case in cases:
        case["write"] = w
        case["call"] = {"style": "fill_kw", "fill": float(rng.uniform(-3, 3))}
    run_kernel(clean_room, library, cases, "your C++ kernel")


@pytest.mark.weight(2)
def test_kernel_schema_and_errors(student, clean_room, library):
    """fill is keyword-only with default 0.0, the arguments are named a and b; mixed, integer and half dtypes and
    shapes that do not broadcast raise; each error beside calls that must succeed."""
    rng = case_rng(13)
    n = int(rng.integers(5, 8))  # (3, n): never a shape of the public tests, so no answer table for them passes

    def pair(dtype_a="float32", dtype_b="float32", shape_b=(n,)):
        return oc.spec(rng, (3, n), dtype_a), oc.spec(rng, shape_b, dtype_b, zeros=1)

    cases = []
    for style in ("names", "plain", "fill_kw", "fill_pos", "extra_kw"):
        a, b = pair()
        cases.append({"a": a, "b": b, "call": {"style": style, "fill": float(rng.uniform(1, 5))}})
    a, b = pair("float64", "float64")
    cases.append({"a": a, "b": b, "call": {"style": "fill_kw", "fill": int(rng.integers(1, 9))}})   # an int for a float
    for dtypes in (("float32", "float64"), ("float64", "float32"), ("int64", "int64"), ("float16", "float16"), ("int32", "float32")):
        a, b = pair(*dtypes)
        if dtypes[0].startswith("int"):
            a["base"] = np.round(a["base"] * 3).astype(dtypes[0])
        if dtypes[1].startswith("int"):
            b["base"] = np.round(b["base"] * 3).astype(dtypes[1])
        cases.append({"a": a, "b": b, "call": {"style": "fill_kw", "fill": 1.0}})
    a, b = pair(shape_b=(n + 1,))
    cases.append({"a": a, "b": b, "call": {"style": "plain"}})
    order = rng.permutation(len(cases))
    run_kernel(clean_room, library, [cases[int(i)] for i in order], "the schema of lab11_cpp::safe_div")
