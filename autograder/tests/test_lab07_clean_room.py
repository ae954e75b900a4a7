"""lab07's clean room (labs/lab07/scenarios.py, run by P0 in its own sandbox): the symbol check that keeps a kernel
to one global function and math calls, and the batch compiled ahead (c_prepare), which must be a cache only: a
kernel run from the batch gives what it gives compiled alone, and a text not in the batch is compiled alone."""
import tempfile

import numpy as np
import pytest

from autograder.labs.lab07 import scenarios as clean

MATH = "#include <math.h>\n#include <stdint.h>\n"
SOURCES = {
    "op_exp": MATH + "void op_exp(const float* a, float* o) { for (int64_t i = 0; i < 8; i++) o[i] = expf(a[i]); }\n",
    "op_helper": MATH + "static float twice(float v) { return 2.0f * v; }\n"
                        "static const float shift[2] = {1.0f, -1.0f};\n"
                        "void op_helper(const float* a, float* o) { for (int64_t i = 0; i < 8; i++) o[i] = twice(a[i]) + shift[i & 1]; }\n",
    "op_two_funcs": MATH + "void op_two_funcs(const float* a, float* o) { o[0] = a[0]; }\nvoid spare(void) {}\n",
    "op_global_data": MATH + "float kept;\nvoid op_global_data(const float* a, float* o) { kept = a[0]; o[0] = kept; }\n",
    "op_prints": MATH + "int printf(const char*, ...);\nvoid op_prints(const float* a, float* o) { printf(\"%f\", (double)a[0]); o[0] = a[0]; }\n",
    "op_extern_data": MATH + "extern float elsewhere;\nvoid op_extern_data(const float* a, float* o) { o[0] = a[0] + elsewhere; }\n",
    "op_broken": MATH + "void op_broken(const float* a, float* o) { o[0] = a[0] +; }\n",
}


def spec(name, source=None):
    return {"name": name, "source": SOURCES[name] if source is None else source, "n_in": 1, "n_out": 1,
            "in_bytes": [32], "out_bytes": [32]}


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty clean room: no executable built, none compiled ahead."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(clean, "_EXE", {})
    monkeypatch.setattr(clean, "_PREPARED", {})
    monkeypatch.setattr(clean, "_MAIN_OBJ", {})
    return tmp_path


def test_the_symbol_check_allows_one_global_function_and_math_calls_only(fresh):
    names = list(SOURCES)
    proc, made = clean._compile([spec(n) for n in names], str(fresh))
    assert proc.returncode != 0 and made == [j for j, n in enumerate(names) if n != "op_broken"]
    problems = {names[j]: p for j, p in clean._symbol_problems([spec(n) for n in names], str(fresh), made).items()}
    assert problems["op_exp"] is None and problems["op_helper"] is None
    assert "exactly one global function" in problems["op_two_funcs"] and "spare" in problems["op_two_funcs"]
    assert "exactly one global function" in problems["op_global_data"] and "kept" in problems["op_global_data"]
    assert "calls ['printf']" in problems["op_prints"]
    assert "calls ['elsewhere']" in problems["op_extern_data"]
    # one object at a time (no "File:" headings in the listing) gives the same verdicts
    for j in made:
        assert clean._symbol_problems([spec(n) for n in names], str(fresh), [j])[j] == problems[names[j]]


def values(kernel_spec, x):
    got = clean.c_values(None, [kernel_spec], [x.view(np.uint8)])
    assert "error" not in got, got
    (result,) = got["results"]
    assert result.get("overflow") == [0, 0], result
    return result["outputs"][0].view(np.float32)


def test_a_kernel_compiled_ahead_gives_what_it_gives_compiled_alone(fresh):
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    alone = {n: values(spec(n), x) for n in ("op_exp", "op_helper")}
    np.testing.assert_allclose(alone["op_exp"], np.exp(x), rtol=1e-5)
    clean._EXE.clear()
    assert clean.c_prepare(None, [spec(n) for n in SOURCES]) == {"prepared": 2}   # the others are left out
    for n in ("op_exp", "op_helper"):
        exe = clean._executable([spec(n)])
        assert exe["folder"].startswith(str(fresh / "clean-ahead-")), "an identical text should run from the batch"
        np.testing.assert_array_equal(values(spec(n), x), alone[n])
    # a text that differs in one character is compiled on its own
    changed = spec("op_exp", SOURCES["op_exp"].replace("expf(a[i])", "expf(a[i]) "))
    assert not clean._executable([changed])["folder"].startswith(str(fresh / "clean-ahead-"))
    # kernels left out of the batch report, alone, what they report without one
    for n, error in (("op_prints", "symbols"), ("op_two_funcs", "symbols"), ("op_broken", "compile")):
        assert clean.c_values(None, [spec(n)], [x.view(np.uint8)])["error"] == error


def test_the_p0_server_traces_every_fixed_case_of_the_graders_once():
    """warm_p0 traces the fixed cases' graphs in the fork server; a case a grader adds later would be traced in
    every grading again (about 0.1-0.3 s of P0 each)."""
    from autograder.labs.lab07 import oracle, test_pipeline
    fixed = {case for case, _ in test_pipeline.CASES} | set(test_pipeline.FUSE_CASES) | set(test_pipeline.PASS_CASES)
    assert fixed <= set(oracle.PLAN_CASES + oracle.PIPELINE_ONLY_CASES), fixed - set(oracle.PLAN_CASES + oracle.PIPELINE_ONLY_CASES)
