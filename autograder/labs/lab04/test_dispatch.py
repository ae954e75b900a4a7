"""Part `dispatch`: schemas, binding, registry, priority, fallthrough, boxed fallbacks, redispatch."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab04.checks import same
from autograder.labs.lab04.oracle import reference

SCHEMAS = [
    "ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "ipt::split2(Tensor self) -> (Tensor, Tensor)",
    "ipt::log_it(Tensor self, str msg=\"hi\") -> ()",
    "ipt::sum(Tensor self, int dim=-1, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "ipt::cat(Tensor[] tensors, int dim=0) -> Tensor",
    "ipt::lerp(Tensor self, Tensor end, float weight=0.5) -> Tensor",
    "my_ns::clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
    "ipt::norm( Tensor self , float p = -2.5 , * , bool eps_first = True , str mode = \"fro\" ) -> ( Tensor , Tensor , Tensor )",
    "ipt::zeros(*, int n, int m=0) -> Tensor",
    "ipt::noargs() -> ()",
]


def parse_case(student, text, show=True):
    got, want = student.run("schema_parse", text), reference("schema_parse", text)
    got = replies.dict_of(got, {"name", "returns", "arguments"}, f"parse_schema({text!r})")
    if not same(got, want):
        raise AssertionError(f"parse_schema({text!r}) should give {want}, got {got}" if show
                             else f"parse_schema({text!r}) is wrong: got {got}")


@pytest.mark.weight(3)
def test_parse_schema(student):
    for text in SCHEMAS:
        parse_case(student, text)


TYPES = ["Tensor", "Tensor[]", "int", "float", "bool", "Scalar", "str", "Tensor?", "ScalarType?", "int[]"]
LITERALS = {"int": st.integers(-20, 20).map(str), "float": st.sampled_from(("0.5", "-1.5", "1e-3", "2.0")),
            "bool": st.sampled_from(("True", "False")), "Scalar": st.sampled_from(("1", "-2", "0.25")),
            "str": st.sampled_from(('"x"', '"hello world"', '""')), "Tensor?": st.just("None"),
            "ScalarType?": st.just("None")}


@st.composite
def schemas(draw):
    names = draw(st.lists(st.sampled_from(("self", "other", "x", "y", "alpha", "dim", "out_dtype", "w")), unique=True, max_size=5))
    star = draw(st.integers(0, len(names)))
    pieces, defaults_started = [], False
    for i, name in enumerate(names):
        if i == star and draw(st.booleans()):
            pieces.append("*")
        typ = draw(st.sampled_from(TYPES))
        want_default = typ in LITERALS and (defaults_started or draw(st.booleans()))
        if want_default and i < star:
            defaults_started = True
        pieces.append(f"{typ} {name}" + (f"={draw(LITERALS[typ])}" if want_default else ""))
    rets = draw(st.lists(st.sampled_from(("Tensor", "int", "Tensor[]", "float")), max_size=3))
    ret = rets[0] if len(rets) == 1 and draw(st.booleans()) else "(" + ", ".join(rets) + ")"
    return f"ipt::{draw(st.sampled_from(('f', 'g2', 'op_x')))}({', '.join(pieces)}) -> {ret}"


@pytest.mark.weight(2)
@settings(max_examples=20)
@given(text=schemas())
def test_generated_schemas(student, text):
    parse_case(student, text, show=False)


BIND_CASES = [
    (SCHEMAS[0], ["a", "b"], {}), (SCHEMAS[0], ["a", "b"], {"alpha": 3}), (SCHEMAS[0], ["a", "b", 3], {}),
    (SCHEMAS[0], ["a"], {}), (SCHEMAS[0], ["a"], {"other": "b", "beta": 1}), (SCHEMAS[3], ["x", 0], {"keepdim": True}),
    (SCHEMAS[3], [], {"self": "x", "dtype": "f"}), (SCHEMAS[3], ["x"], {"self": "y"}), (SCHEMAS[5], ["a", "b", 0.1], {}),
    (SCHEMAS[5], ["a", "b", 0.1, 7], {}), (SCHEMAS[5], [], {"end": "e", "self": "s"}), (SCHEMAS[5], ["a"], {"weight": 2.0}),
    (SCHEMAS[6], ["t"], {"max": 4}), (SCHEMAS[6], ["t", None, 3], {}), (SCHEMAS[6], ["t"], {"min": 1, "min ": 2}),
    (SCHEMAS[7], ["t", 1.0], {"mode": "nuc", "eps_first": False}), (SCHEMAS[7], ["t"], {"p": 3.0, "p_": 1}),
    (SCHEMAS[8], [], {"n": 2}), (SCHEMAS[8], [2], {}), (SCHEMAS[8], [], {"m": 1}), (SCHEMAS[9], [], {}), (SCHEMAS[9], [1], {}),
    (SCHEMAS[4], [["a", "b"]], {"dim": 1}), (SCHEMAS[4], [], {"tensors": []}),
]


@pytest.mark.weight(4)
def test_bind(student):
    errors = successes = 0
    for text, args, kwargs in BIND_CASES:
        got, want = student.run("schema_bind", text, args, kwargs), reference("schema_bind", text, args, kwargs)
        call = f"bind({text.split('(')[0]}, args={args}, kwargs={kwargs})"
        if "error" in want:
            got = replies.dict_of(got, {"error"}, call)
            assert got["error"] == "TypeError", f"{call} should raise TypeError, got {got}"
            errors += 1
        else:
            got = replies.dict_of(got, {"bound"}, call)
            assert same(got["bound"], want["bound"]), f"{call} should give {want['bound']}, got {got['bound']}"
            successes += 1
    assert errors and successes


@pytest.mark.weight(2)
def test_registry(student):
    for name, value, k in (("ipt::f", 4.0, 5), ("other_ns::g", -1.5, 3), ("ipt::h_2", 0.25, -2)):
        got = replies.dict_of(student.run("registry_errors", name, value, k), {"handle", "define_twice", "define_other", "impl_unknown",
                              "calls", "second_dispatcher", "second_dispatcher_call"}, "the registry scenario")
        assert got["handle"] == [name, name], f"define() should return an OperatorHandle with name and schema.name {name!r}, got {got['handle']}"
        assert got["define_twice"] == "RuntimeError", f"defining {name} twice should raise RuntimeError, got {got['define_twice']}"
        assert got["define_other"] == [f"{name}_other", 2], f"defining another operator after that should work, got {got['define_other']}"
        assert got["impl_unknown"] == "KeyError", f"impl() for an undefined operator should raise KeyError, got {got['impl_unknown']}"
        want_calls = [["cpu", value], ["other", value * 2], ["other", value * k]]
        assert same(got["calls"], want_calls), f"calling {name} and {name}_other (with k={k}) should return {want_calls}, got {got['calls']}"
        assert got["second_dispatcher"] == "ok" and got["second_dispatcher_call"] == "MissingKernelError", (
            "a second Dispatcher() must have its own registry: defining the same name there should work, and calling it "
            f"(no kernels) should raise MissingKernelError; got {got['second_dispatcher']} / {got['second_dispatcher_call']}")


def check_table(student, table, show=True):
    got, want = student.run("dispatch_table", table), reference("dispatch_table", table)
    what = (f"kernels {table['kernels']}, fallbacks {table['fallbacks']}"
            + (f", then kernels {table['overrides']}" if table.get("overrides") else "")
            + (f", then fallbacks {table['fallback_overrides']}" if table.get("fallback_overrides") else "")
            + (", fallbacks registered before define()" if table.get("order") == "fallback_first" else "")
            + f", {table['returns']} return(s)")
    calls = replies.dict_of(got, {"calls"}, "dispatch_table")["calls"]
    for i, (mine, ref) in enumerate(replies.pairs(calls, want["calls"], f"{what}: the calls")):
        call = table["calls"][i]
        where = f"{what}; call {i + 1} with tensor keys {call['tensors']}, include {call['include']}, exclude {call['exclude']}"
        mine = replies.dict_of(mine, {"log", "tls_after"}, where)
        if "error" in ref:
            err = replies.error_reply(mine, where)
            assert err is not None, f"{where}: should raise {ref['error']}, returned {mine.get('result')}"
            assert err["error"] == ref["error"], f"{where}: should raise {ref['error']}, raised {err['error']}: {err['message']}"
            if ref["error"] == "MissingKernelError":
                key = ref["message"].split("'")[3]
                assert "ipt::op" in err["message"] and key in err["message"], (
                    f"{where}: the MissingKernelError should name the operator ('ipt::op') and the key ({key}), got {err['message']!r}")
        else:
            assert "error" not in mine, f"{where}: raised {mine.get('error')}: {mine.get('message')}"
        if not same(mine["log"], ref["log"]):
            if show:
                raise AssertionError(f"{where}: the kernels that ran [kind, key, keyset bits, bound args, ...] should be "
                                     f"{ref['log']}, got {mine['log']}")
            raise AssertionError(f"{where}: the wrong kernels ran [kind, key, keyset bits, bound args, ...]: {mine['log']}")
        for field in ("result", "result_type"):
            if not same(mine.get(field), ref.get(field)):
                raise AssertionError(f"{where}: the call should return {ref.get(field)}, got {mine.get(field)}" if show
                                     else f"{where}: wrong {field.replace('_', ' ')} {mine.get(field)}")
        assert same(mine["tls_after"], [0, 0]), f"{where}: the thread's include/exclude sets should be empty again after the call, got {mine['tls_after']}"


def table(kernels, fallbacks, calls, returns=1, **extra):
    return {"kernels": kernels, "fallbacks": fallbacks, "returns": returns, "calls": calls, **extra}


def call(self_keys, other_keys=(), include=(), exclude=(), **kw):
    return {"tensors": [list(self_keys), [list(k) for k in other_keys]], "include": list(include), "exclude": list(exclude), **kw}


def test_priority(student):
    check_table(student, table({"1": "kernel", "8": "kernel", "9": "kernel"}, {}, [call([1, 8], [[1, 9]]), call([1], [[8]])]))


@pytest.mark.weight(2)
def test_fallthrough_and_boxed(student):
    check_table(student, table({"1": "kernel"}, {"7": "fallthrough", "5": "boxed_redispatch"},
                               [call([1, 7, 5], n=5), call([1, 7], [[1]], k=4)], returns=2))
    # the op's own fallthrough beats a boxed fallback for that key; the op's kernel beats a fallthrough fallback
    check_table(student, table({"1": "kernel", "6": "fallthrough", "4": "redispatch"}, {"6": "boxed", "4": "fallthrough", "3": "boxed"},
                               [call([1, 6, 4, 3]), call([6, 4, 3], exclude=[3])], returns=0))


@pytest.mark.weight(2)
def test_missing_kernel(student):
    check_table(student, table({"1": "kernel"}, {}, [call([1, 6]), call([1], [[2]]), call([1])]))
    check_table(student, table({"1": "kernel", "10": "redispatch"}, {"5": "fallthrough"}, [call([10, 5, 2]), call([10, 5, 1])]))


def test_empty_keyset(student):
    check_table(student, table({"1": "kernel"}, {}, [call([1], exclude=[1]), call([]), call([1])]))
    check_table(student, table({"1": "fallthrough"}, {}, [call([1], include=[1])]))


@pytest.mark.weight(2)
def test_keyword_and_positional_calls(student):
    calls = [call([1, 5], [[1]], k=7, n=2, style=s) for s in ("positional", "keywords", "others_by_name")]
    check_table(student, table({"1": "kernel", "5": "redispatch"}, {}, calls + [call([1], style="keywords")], returns=1))


@pytest.mark.weight(2)
def test_override_and_registration_order(student):
    check_table(student, table({"1": "kernel", "8": "kernel"}, {"9": "boxed_redispatch"}, [call([1, 8, 9]), call([1, 8])],
                               overrides={"8": "fallthrough", "1": "redispatch", "2": "kernel"}, order="fallback_first",
                               fallback_overrides={"9": "boxed", "5": "fallthrough"}))
    check_table(student, table({"1": "kernel", "9": "fallthrough"}, {"9": "boxed", "8": "boxed_redispatch"}, [call([1, 9, 8])], overrides={"9": "kernel"}))


@pytest.mark.weight(2)
def test_redispatch_ignores_tls(student):
    check_table(student, table({"1": "kernel", "8": "redispatch_guarded", "11": "kernel"}, {"5": "boxed_redispatch"},
                               [call([1, 8, 5], include=[3], exclude=[2]), call([1, 8, 5, 11], exclude=[11])], returns=2))


@pytest.mark.weight(2)
def test_errors_propagate_and_restore_tls(student):
    check_table(student, table({"1": "raise", "9": "redispatch_guarded"}, {"5": "boxed_redispatch"},
                               [call([1, 9, 5], include=[7], exclude=[6]), call([9, 5], include=[1])]))
    check_table(student, table({"1": "kernel", "9": "redispatch"}, {"5": "raise"}, [call([1, 9, 5]), call([1, 9])]))


KEY = st.integers(1, 12)
KINDS = st.sampled_from(("kernel", "fallthrough", "redispatch", "redispatch", "redispatch_guarded", "raise"))
FB_KINDS = st.sampled_from(("boxed", "fallthrough", "boxed_redispatch", "boxed_redispatch", "raise"))


@st.composite
def tables(draw):
    keys = draw(st.lists(KEY, min_size=1, max_size=6, unique=True))
    kernels = {str(k): draw(KINDS) for k in draw(st.lists(st.sampled_from(keys), unique=True))}
    fallbacks = {str(k): draw(FB_KINDS) for k in draw(st.lists(KEY, unique=True, max_size=5))}
    if draw(st.integers(0, 4)):
        kernels.setdefault("1", draw(st.sampled_from(("kernel", "fallthrough"))))
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        c = {"tensors": [draw(st.lists(st.sampled_from(keys + [1]), max_size=4)),
                         draw(st.lists(st.lists(st.sampled_from(keys), max_size=3), max_size=2))],
             "include": draw(st.lists(KEY, max_size=2)), "exclude": draw(st.lists(KEY, max_size=2)),
             "style": draw(st.sampled_from(("positional", "keywords", "others_by_name")))}
        if draw(st.booleans()):
            c["n"] = draw(st.integers(-3, 9))
        if draw(st.booleans()):
            c["k"] = draw(st.integers(-3, 9))
        calls.append(c)
    out = {"calls": calls, "returns": draw(st.integers(0, 2)), "kernels": kernels, "fallbacks": fallbacks,
           "order": draw(st.sampled_from(("define_first", "fallback_first")))}
    if draw(st.integers(0, 3)) == 0:
        out["fallback_overrides"] = {str(k): draw(FB_KINDS) for k in draw(st.lists(KEY, unique=True, min_size=1, max_size=2))}
    if draw(st.integers(0, 3)) == 0:
        out["overrides"] = {str(k): draw(KINDS) for k in draw(st.lists(st.sampled_from(keys), unique=True, min_size=1, max_size=2))}
    return out


@pytest.mark.weight(10)
@settings(max_examples=50)
@given(t=tables())
def test_generated_tables(student, t):
    check_table(student, t, show=False)

# IPT-CANARY lab04 test_dispatch.py: hidden grading text, never shown to learners
