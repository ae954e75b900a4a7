"""Part `dispatch`: schemas, binding, registry, priority, fallthrough, boxed fallbacks, redispatch."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab04.oracle import reference

SCHEMAS = [
    "ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "ipt::split2(Tensor self) -> (Tensor, Tensor)",
    "ipt::log_it(Tensor self, str msg=\"hi\") -> ()",
    "ipt::sum(Tensor self, int dim=-1, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "ipt::cat(Tensor[] tensors, int dim=0) -> Tensor",
    "ipt::lerp(Tensor self, Tensor end, float weight=0.5) -> Tensor",
]


@pytest.mark.weight(3)
def test_parse_schema(student):
    for text in SCHEMAS:
        got, want = student.run("schema_parse", text), reference("schema_parse", text)
        assert got == want, f"parse_schema({text!r}) should give {want}, got {got}"


BIND_CASES = [
    (SCHEMAS[0], ["a", "b"], {}), (SCHEMAS[0], ["a", "b"], {"alpha": 3}), (SCHEMAS[0], ["a", "b", 3], {}),
    (SCHEMAS[0], ["a"], {}), (SCHEMAS[0], ["a"], {"other": "b", "beta": 1}), (SCHEMAS[3], ["x", 0], {"keepdim": True}),
    (SCHEMAS[3], [], {"self": "x", "dtype": "f"}), (SCHEMAS[3], ["x"], {"self": "y"}), (SCHEMAS[5], ["a", "b", 0.1], {}),
    (SCHEMAS[5], ["a", "b", 0.1, 7], {}),
]


@pytest.mark.weight(3)
def test_bind(student):
    for text, args, kwargs in BIND_CASES:
        got, want = student.run("schema_bind", text, args, kwargs), reference("schema_bind", text, args, kwargs)
        if "error" in want:
            assert got.get("error") == "TypeError", (
                f"bind({text.split('(')[0]}, args={args}, kwargs={kwargs}) should raise TypeError, got {got}")
        else:
            assert got == want, f"bind({text.split('(')[0]}, args={args}, kwargs={kwargs}) should give {want['bound']}, got {got}"


def test_registry_errors(student):
    got = student.run("registry_errors")
    assert got["define_twice"] == "RuntimeError", f"defining an operator twice should raise RuntimeError, got {got['define_twice']}"
    assert got["impl_unknown"] == "KeyError", f"impl() for an undefined operator should raise KeyError, got {got['impl_unknown']}"


def check_table(student, table):
    got, want = student.run("dispatch_table", table), reference("dispatch_table", table)
    what = (f"tensor keys {table['tensors']}, include {table['include']}, exclude {table['exclude']}, "
            f"kernels {table['kernels']}, fallbacks {table['fallbacks']}, {table['returns']} return(s)")
    if "error" in want:
        assert got.get("error") == want["error"], f"{what}: expected {want['error']} ({want['message']}), got {got.get('error') or got.get('result')}"
    else:
        assert "error" not in got, f"{what}: raised {got.get('error')}: {got.get('message')}"
    assert got["log"] == want["log"], f"{what}: the kernels that ran (kind:key:keyset bits:args:n) should be {want['log']}, got {got['log']}"
    assert got.get("result") == want.get("result"), f"{what}: the call should return {want.get('result')}, got {got.get('result')}"
    assert got.get("result_type") == want.get("result_type"), (
        f"{what}: the call should return a {want.get('result_type')}, got a {got.get('result_type')}")


def test_priority(student):
    check_table(student, {"tensors": [[1, 8], [[1, 9]]], "include": [], "exclude": [], "returns": 1,
                          "kernels": {"1": "kernel", "8": "kernel", "9": "kernel"}, "fallbacks": {}})


def test_fallthrough_and_boxed(student):
    check_table(student, {"tensors": [[1, 7, 5], []], "include": [], "exclude": [], "returns": 2, "n": 5,
                          "kernels": {"1": "kernel"}, "fallbacks": {"7": "fallthrough", "5": "boxed_redispatch"}})


def test_missing_kernel(student):
    check_table(student, {"tensors": [[1, 6], []], "include": [], "exclude": [], "returns": 1,
                          "kernels": {"1": "kernel"}, "fallbacks": {}})


def test_empty_keyset(student):
    check_table(student, {"tensors": [[1], []], "include": [], "exclude": [1], "returns": 1,
                          "kernels": {"1": "kernel"}, "fallbacks": {}})


KEY = st.integers(1, 12)


@st.composite
def tables(draw):
    keys = draw(st.lists(KEY, min_size=1, max_size=6, unique=True))
    kinds = st.sampled_from(["kernel", "fallthrough", "redispatch"])
    fb_kinds = st.sampled_from(["boxed", "fallthrough", "boxed_redispatch"])
    kernels = {str(k): draw(kinds) for k in draw(st.lists(st.sampled_from(keys), unique=True))}
    fallbacks = {str(k): draw(fb_kinds) for k in draw(st.lists(KEY, unique=True, max_size=5))}
    kernels.setdefault("1", draw(st.sampled_from(["kernel", "fallthrough"])))
    tensors = [draw(st.lists(st.sampled_from(keys + [1]), max_size=4)),
               draw(st.lists(st.lists(st.sampled_from(keys), max_size=3), max_size=2))]
    table = {"tensors": tensors, "include": draw(st.lists(KEY, max_size=2)), "exclude": draw(st.lists(KEY, max_size=2)),
             "returns": draw(st.integers(0, 2)), "kernels": kernels, "fallbacks": fallbacks}
    if draw(st.booleans()):
        table["n"] = draw(st.integers(-3, 9))
    return table


@pytest.mark.weight(10)
@settings(max_examples=60)
@given(table=tables())
def test_generated_tables(student, table):
    check_table(student, table)

# IPT-CANARY lab04 test_dispatch.py: hidden grading text, never shown to learners
