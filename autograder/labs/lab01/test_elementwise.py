"""Part `elementwise`: a broadcasting strided binary op (contiguous result) and sum(dim, keepdim)."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.labs.lab01 import oracle
from autograder.labs.lab01.oracle import fmt_layout
from autograder.labs.lab01.strategies import examples, layouts

FIELDS = ("shape", "stride", "offset", "values", "shares")


def _check_binary(student, op, a, b):
    what = f"torch.{op}(a, b)"
    context = f"For a with {fmt_layout(a)} and b with {fmt_layout(b)}"
    got = oracle.call(student, context, "lab01.scenarios:binary", op, a, b)
    want = oracle.binary(op, a, b)
    message = oracle.compare_tensor(got, want, what, FIELDS, views_of="a or b")
    assert message is None, f"{context}: {message} (the result is a fresh contiguous tensor)"


BINARY = {
    "same-shape": ("add", ([2, 3], [3, 1], 0), ([2, 3], [3, 1], 0)),
    "transposed-inputs": ("mul", ([3, 2], [1, 3], 0), ([3, 2], [1, 3], 1)),
    "row-broadcast": ("add", ([3, 2], [1, 3], 0), ([2], [1], 0)),
    "column-broadcast": ("add", ([3, 1], [1, 1], 0), ([1, 4], [4, 1], 2)),
    "rank-broadcast": ("mul", ([2, 1, 3], [3, 3, 1], 0), ([4, 1], [2, 5], 1)),
    "expanded-input": ("add", ([3, 4], [0, 1], 0), ([3, 4], [4, 1], 0)),
    "sliced-input": ("mul", ([2, 3], [8, 2], 1), ([3], [2], 1)),
    "0d": ("add", ([], [], 3), ([2, 2], [2, 1], 0)),
    "mismatch": ("add", ([3], [1], 0), ([4], [1], 0)),
    "mismatch-inner": ("mul", ([2, 3], [3, 1], 0), ([2, 1, 2], [2, 2, 1], 0)),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_fixed_binary(student, name):
    op, a, b = BINARY[name]
    _check_binary(student, op, oracle.layout(*a, extra=1), oracle.layout(*b, extra=1))
    # a success case of the same operation in every test: raising RuntimeError everywhere earns nothing
    op, a, b = list(BINARY.values())[(list(BINARY).index(name) + 3) % 8]
    _check_binary(student, op, oracle.layout(*a, extra=2), oracle.layout(*b, extra=1))


def test_mixed_dtypes(student):
    a = oracle.layout([2, 3], [1, 2], 0, dtype="int64")
    b = oracle.layout([3], [2], 1, dtype="float64")
    _check_binary(student, "add", a, b)


@pytest.mark.parametrize("op,scalar", [("add", 2), ("radd", 3), ("mul", -2), ("rmul", 2.5)])
def test_scalar_operands(student, op, scalar):
    a = oracle.layout([3, 2], [1, 3], 1)
    expr = {"add": f"a + {scalar}", "radd": f"{scalar} + a", "mul": f"a * {scalar}", "rmul": f"{scalar} * a"}[op]
    context = f"For a with {fmt_layout(a)}"
    got = oracle.call(student, f"{context}: {expr}", "lab01.scenarios:binary_scalar", op, a, scalar)
    want = oracle.binary_scalar(op, a, scalar)
    message = oracle.compare_tensor(got, want, expr, ("shape", "values", "shares"), views_of="a")
    assert message is None, f"{context}: {message}"


@st.composite
def binary_cases(draw):
    ndim = draw(st.integers(0, 3))
    target = [draw(st.integers(1, 4)) for _ in range(ndim)]
    shapes = []
    for _ in range(2):
        k = draw(st.integers(0, ndim))
        shapes.append([1 if draw(st.integers(0, 2)) == 0 else n for n in target[ndim - k:]])
    if draw(st.integers(0, 7)) == 0 and shapes[0]:
        shapes[0][-1] = shapes[0][-1] + 1 if shapes[0][-1] > 1 else 3
    dtypes = draw(st.sampled_from((("int64", "int64"), ("float64", "float64"), ("int64", "float64"))))
    a = draw(layouts(shape=shapes[0], zero_strides=True, dtype=dtypes[0]))
    b = draw(layouts(shape=shapes[1], zero_strides=True, dtype=dtypes[1]))
    return draw(st.sampled_from(("add", "mul"))), a, b


@pytest.mark.weight(4)
@examples(70)
@given(case=binary_cases())
def test_generated_binary(student, case):
    _check_binary(student, *case)


def _check_sum(student, layout, dim, keepdim, positional=False):
    what = f"x.sum({dim}, {keepdim})" if positional else f"x.sum({dim}, keepdim={keepdim})"
    context = f"For x with {fmt_layout(layout)}"
    got = oracle.call(student, f"{context}: {what}", "lab01.scenarios:reduce_sum", layout, dim, keepdim, positional)
    want = oracle.reduce_sum(layout, dim, keepdim)
    message = oracle.compare_tensor(got, want, what, FIELDS)
    assert message is None, f"{context}: {message}"


SUMS = {
    "rows": ([2, 3], [3, 1], 0, 1, False),
    "rows-keepdim": ([2, 3], [3, 1], 0, 1, True),
    "transposed": ([3, 2], [1, 3], 0, 0, False),
    "negative-dim": ([2, 3, 4], [12, 4, 1], 0, -2, True),
    "middle-dim": ([2, 3, 4], [1, 2, 6], 1, 1, False),
    "expanded": ([3, 4], [0, 1], 2, 0, True),
    "size1-dim": ([2, 1, 3], [3, 5, 1], 0, 1, False),
    "1d": ([5], [2], 1, 0, False),
    "1d-keepdim": ([5], [2], 1, -1, True),
    "0d-keepdim": ([], [], 2, 0, True),
    "0d-negative": ([], [], 3, -1, False),
    "empty-dim": ([2, 0, 3], [1, 1, 2], 0, 1, False),
    "reduce-empty-dim": ([2, 0, 3], [3, 3, 1], 0, 1, True),
    "reduce-to-empty": ([0, 3], [3, 1], 0, 1, False),
}


@pytest.mark.parametrize("name", list(SUMS))
def test_fixed_sum(student, name):
    shape, stride, offset, dim, keepdim = SUMS[name]
    _check_sum(student, oracle.layout(shape, stride, offset, extra=1), dim, keepdim, positional=name.startswith("1d"))


SUM_ERRORS = {  # shape, stride, offset, a dim out of range, a dim of the same tensor that is fine
    "dim-past-the-end": ([3, 4], [4, 1], 0, 2, 1),
    "dim-too-negative": ([3, 4], [1, 3], 1, -3, -2),
    "0d-dim-1": ([], [], 2, 1, -1),
    "size0-dim-out-of-range": ([2, 0], [1, 1], 0, -3, 0),
}


@pytest.mark.parametrize("name", list(SUM_ERRORS))
def test_sum_dim_out_of_range(student, name):
    shape, stride, offset, bad, good = SUM_ERRORS[name]
    base = oracle.layout(shape, stride, offset, extra=1, dtype="float64")
    _check_sum(student, base, bad, False)  # raises IndexError, like torch
    _check_sum(student, base, good, True)  # and the same tensor still sums


@pytest.mark.weight(3)
@examples(50)
@given(data=st.data())
def test_generated_sum(student, data):
    layout = data.draw(layouts(min_dim=0 if data.draw(st.integers(0, 5)) == 0 else 1, max_dim=4,
                               min_size=0 if data.draw(st.integers(0, 5)) == 0 else 1, zero_strides=True,
                               dtype=data.draw(st.sampled_from(("int64", "float64")))))
    ndim = max(len(layout["shape"]), 1)
    _check_sum(student, layout, data.draw(st.integers(-ndim, ndim - 1)), data.draw(st.booleans()))
