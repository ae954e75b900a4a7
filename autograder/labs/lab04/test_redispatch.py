"""Part `redispatch`: the autograd kernel (records, excludes itself, redispatches below) and the tracing fallback."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab04.oracle import key_names, reference

CPU, ADIOV, AG, TR = 1, 7, 8, 9


def check_program(student, tensors, program):
    got, want = student.run("autograd_program", tensors, program), reference("autograd_program", tensors, program)
    what = f"tensors {tensors} (keys, requires_grad, value), program {program}"
    for field in ("values", "trace", "tape", "requires_grad", "grad_fn", "grad_fn_is_tape", "steps", "keys", "tls_after"):
        mine, ref = got[field], want[field]
        if field == "keys":
            mine, ref = [key_names(b) for b in mine], [key_names(b) for b in ref]
        assert mine == ref, f"{what}: `{field}` should be {ref}, got {mine}"


def test_autograd_records_once(student):
    check_program(student, [[[CPU, AG], True, 3.0]], [["square", [0], {}]])


def test_no_record_without_requires_grad(student):
    check_program(student, [[[CPU, AG], False, 2.0], [[CPU, AG], False, 5.0]], [["mul", [0, 1], {}], ["add", [2, 0], {"alpha": 2.0}]])


def test_tracer_on_top(student):
    check_program(student, [[[CPU, AG, TR], True, 1.5], [[CPU, ADIOV], False, 2.0]],
                  [["axpy", [0, 1], {}], ["split2", [2], {}], ["stack_sum", [3, 4, 1], {}]])


OPS = st.sampled_from(["add", "mul", "square", "axpy", "split2", "stack_sum"])


@st.composite
def programs(draw):
    n = draw(st.integers(1, 3))
    tensors = [[sorted(set([CPU] + draw(st.lists(st.sampled_from([ADIOV, AG, TR]), max_size=3)))), draw(st.booleans()),
                float(draw(st.integers(-3, 3)))] for _ in range(n)]
    program, count = [], n
    for _ in range(draw(st.integers(1, 5))):
        op = draw(OPS)
        arity = {"add": 2, "mul": 2, "square": 1, "axpy": 2, "split2": 1, "stack_sum": draw(st.integers(1, 3))}[op]
        idx = [draw(st.integers(0, count - 1)) for _ in range(arity)]
        kwargs = {"alpha": float(draw(st.integers(-2, 2)))} if op == "add" and draw(st.booleans()) else {}
        program.append([op, idx, kwargs])
        count += 2 if op == "split2" else 1
    return tensors, program


@pytest.mark.weight(6)
@settings(max_examples=30)
@given(case=programs())
def test_generated_programs(student, case):
    check_program(student, *case)

# IPT-CANARY lab04 test_redispatch.py: hidden grading text, never shown to learners
