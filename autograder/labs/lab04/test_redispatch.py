"""Part `redispatch`: the autograd kernel (records, excludes itself, redispatches below) and the tracing fallback."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab04.checks import same, shown
from autograder.labs.lab04.oracle import key_names, reference

CPU, ADIOV, AG, TR, AUTOCAST, PY = 1, 7, 8, 9, 10, 5
FIELDS = ("steps", "values", "trace", "tape", "requires_grad", "grad_fn", "grad_fn_is_tape", "keys", "printed",
          "cpu_keysets", "ids", "tls_after")


def check_program(student, tensors, program, show=True):
    got, want = student.run("autograd_program", tensors, program), reference("autograd_program", tensors, program)
    what = f"tensors {tensors} ([keys, requires_grad, value]), program {program}"
    got = replies.dict_of(got, FIELDS, what)
    for field in FIELDS:
        mine, ref = got[field], want[field]
        if field == "keys" and isinstance(mine, list):
            mine, ref = [key_names(b) for b in mine], [key_names(b) for b in ref]
        if not same(mine, ref):
            if show:
                raise AssertionError(f"{what}: `{field}` should be {ref}, got {mine}")
            raise AssertionError(f"{what}: `{field}` is wrong, got {shown(field, mine)}")


def test_autograd_records_once(student):
    check_program(student, [[[CPU, AG], True, 3.0]], [["square", [0], {}]])


def test_no_record_without_requires_grad(student):
    check_program(student, [[[CPU, AG], False, 2.0], [[CPU, AG], False, 5.0]], [["mul", [0, 1], {}], ["add", [2, 0], {"alpha": 2.0}]])


@pytest.mark.weight(2)
def test_tracer_on_top(student):
    check_program(student, [[[CPU, AG, TR], True, 1.5], [[CPU, ADIOV], False, 2.0]],
                  [["axpy", [0, 1], {}], ["split2", [2], {}], ["stack_sum", [3, 4, 1], {}]])


@pytest.mark.weight(2)
def test_lists_tuples_and_no_returns(student):
    # requires_grad only inside a Tensor[] argument; three outputs; an op with no return; ops defined after the fallback
    check_program(student, [[[CPU], False, 1.0], [[CPU, AG, TR], True, 2.0], [[CPU, AG], False, -1.0]],
                  [["stack_sum", [0, 1, 2], {}], ["triple", [3], {}], ["log_it", [4], {"msg": "x"}], ["log_it", [0], {}],
                   ["stack_sum", [2, 0], {}]])


@pytest.mark.weight(2)
def test_keys_above_autograd(student):
    # a fallthrough key above autograd: the autograd kernel must mask *below* itself, not only remove itself
    check_program(student, [[[CPU, AG, AUTOCAST], True, 2.0], [[CPU, AUTOCAST, ADIOV], True, 3.0]],
                  [["mul", [0, 1], {}], ["square", [1], {}], ["add", [2, 3], {"alpha": -1.0}]])


@pytest.mark.weight(2)
def test_guards_around_calls(student):
    check_program(student, [[[CPU, AG], True, 2.0], [[CPU], True, 4.0]],
                  [["mul", [0, 1], {}, ["exclude", [AG]]], ["square", [1], {}, ["include", [AG, TR]]],
                   ["add", [0, 1], {}, ["include", [TR]]], ["split2", [0], {}, ["exclude", [TR]]]])


@pytest.mark.weight(2)
def test_kernel_error_restores_state(student):
    # an error below the autograd kernel / the tracer propagates, records nothing and leaves the TLS as it was
    check_program(student, [[[CPU, AG, TR], True, 2.0]], [["fail", [0], {}], ["square", [0], {}], ["fail", [1], {}, ["include", [PY]]],
                                                           ["mul", [1, 0], {}]])
    # without the tracer on top (its guard would put the TLS back and hide a leak in the autograd kernel's)
    check_program(student, [[[CPU, AG], True, 3.0]], [["fail", [0], {}], ["square", [0], {}], ["mul", [1, 0], {}]])


@pytest.mark.weight(2)
def test_second_program_same_values(student):
    tensors = [[[CPU, AG, TR], True, 1.0], [[CPU, AG], False, 3.0]]
    program = [["axpy", [0, 1], {}], ["square", [2], {}], ["add", [3, 2], {"alpha": 0.5}]]
    check_program(student, tensors, program)
    check_program(student, tensors, program)


OPS = st.sampled_from(("add", "mul", "square", "axpy", "split2", "stack_sum", "log_it", "triple", "fail"))
GUARD = st.none() | st.tuples(st.sampled_from(("include", "exclude")),
                              st.lists(st.sampled_from((ADIOV, AG, TR, AUTOCAST)), min_size=1, max_size=2)).map(list)


@st.composite
def programs(draw):
    n = draw(st.integers(1, 3))
    tensors = [[sorted(set([CPU] + draw(st.lists(st.sampled_from((ADIOV, AG, TR, AUTOCAST)), max_size=3)))), draw(st.booleans()),
                float(draw(st.integers(-3, 3)))] for _ in range(n)]
    program, count = [], n
    for _ in range(draw(st.integers(1, 5))):
        op = draw(OPS)
        arity = {"add": 2, "mul": 2, "square": 1, "axpy": 2, "split2": 1, "stack_sum": draw(st.integers(1, 3)),
                 "log_it": 1, "triple": 1, "fail": 1}[op]
        idx = [draw(st.integers(0, count - 1)) for _ in range(arity)]
        kwargs = {"alpha": float(draw(st.integers(-2, 2)))} if op == "add" and draw(st.booleans()) else {}
        step = [op, idx, kwargs]
        guard = draw(GUARD)
        if guard:
            step.append(guard)
        program.append(step)
        count += {"split2": 2, "triple": 3, "log_it": 0, "fail": 0}.get(op, 1)
    return tensors, program


@pytest.mark.weight(6)
@settings(max_examples=30)
@given(case=programs())
def test_generated_programs(student, case):
    check_program(student, *case, show=False)

# IPT-CANARY lab04 test_redispatch.py: hidden grading text, never shown to learners
