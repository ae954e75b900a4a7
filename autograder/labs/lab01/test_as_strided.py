"""Part `as_strided`: as_strided (absolute offset, bounds, errors) and contiguous()."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.labs.lab01 import oracle
from autograder.labs.lab01.strategies import as_strided_op, examples, layouts

FIELDS = ("shape", "stride", "offset", "values", "shares", "contiguous")

FIXED = {
    "windows": ([8], [1], 0, [["as_strided", [6, 3], [1, 1], 0]]),
    "default-offset": ([10], [1], 2, [["as_strided", [2, 2], [1, 2], None]]),
    "absolute-offset": ([10], [1], 2, [["as_strided", [2, 2], [1, 2], 0]]),
    "from-a-view": ([3, 2], [1, 3], 1, [["as_strided", [3], [2], 3]]),
    "zero-stride": ([6], [1], 0, [["as_strided", [3, 2], [0, 1], 4]]),
    "0d": ([12], [1], 0, [["as_strided", [], [], 11]]),
    "exactly-fits": ([2, 6], [6, 1], 0, [["as_strided", [2, 6], [6, 1], 0]]),
    "out-of-bounds": ([2, 6], [6, 1], 0, [["as_strided", [2, 7], [6, 1], 0]]),
    "out-of-bounds-offset": ([2, 6], [6, 1], 0, [["as_strided", [2, 6], [6, 1], 1]]),
    "0d-out-of-bounds": ([12], [1], 0, [["as_strided", [], [], 12]]),
    "empty-far-away": ([12], [1], 0, [["as_strided", [0, 2], [100, 1], 50]]),
    "empty-offset-past-end": ([12], [1], 0, [["as_strided", [0, 2], [1, 1], 20]]),
    "empty-rows-at-the-end": ([12], [1], 0, [["as_strided", [2, 0], [3, 1], 11], ["as_strided", [3, 0], [5, 2], 13]]),
    "empty-storage": ([0], [1], 0, [["as_strided", [0, 3], [3, 1], 0], ["as_strided", [4, 0], [1, 1], 2]]),
    "negative-stride": ([12], [1], 0, [["as_strided", [2, 2], [-1, 2], 4]]),
    "negative-offset": ([12], [1], 0, [["as_strided", [2, 2], [1, 1], -1]]),
    "length-mismatch": ([12], [1], 0, [["as_strided", [2, 2], [1], 0]]),
    "negative-size": ([12], [1], 0, [["as_strided", [2, -1], [1, 1], 0]]),
    "negative-size-alone": ([12], [1], 1, [["as_strided", [-1], [1], 3]]),
    "contiguous-copy": ([4, 3], [1, 4], 0, [["contiguous"]]),
    "contiguous-noop": ([3, 4], [4, 1], 2, [["contiguous"]]),
    "contiguous-size1-odd": ([3, 1, 2], [2, 7, 1], 0, [["contiguous"]]),
    "contiguous-expanded": ([3, 4], [0, 1], 1, [["contiguous"], ["contiguous"]]),
    "contiguous-sliced": ([2, 3], [8, 2], 1, [["contiguous"], ["as_strided", [3, 2], [1, 1], 0]]),
    "contiguous-empty": ([2, 0, 3], [1, 1, 2], 0, [["contiguous"]]),
    "contiguous-0d": ([], [], 3, [["contiguous"]]),
    "windows-then-contiguous": ([8], [1], 0, [["as_strided", [6, 3], [1, 1], 0], ["contiguous"]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    shape, stride, offset, ops = FIXED[name]
    # no spare storage: the bounds checks are exact
    dtype = "float64" if name.startswith("contiguous") else "int64"  # a copy keeps the dtype
    size = 0 if name == "empty-storage" else None   # torch.empty(0): a storage with no element at all
    oracle.assert_with_companion(student, "as_strided", list(FIXED).index(name),
                                 oracle.layout(shape, stride, offset, dtype=dtype, size=size), ops, fields=FIELDS, flags=True)


@st.composite
def as_strided_cases(draw):
    base = draw(layouts(min_dim=0, max_dim=3, zero_strides=True, dtype=draw(st.sampled_from(("int64", "float64")))))
    ops = [draw(as_strided_op(base["size"]))]
    if draw(st.booleans()):
        ops.append(["contiguous"])
    return base, ops


@pytest.mark.weight(3)
@examples(60)
@given(case=as_strided_cases())
def test_generated_as_strided(student, case):
    base, ops = case
    oracle.assert_chain(student, base, ops, fields=FIELDS, flags=True)


@pytest.mark.weight(3)
@examples(60)
@given(base=st.sampled_from(("int64", "float64")).flatmap(lambda dtype: layouts(min_dim=0, max_dim=4, zero_strides=True, dtype=dtype)),
       twice=st.booleans())
def test_generated_contiguous(student, base, twice):
    ops = [["contiguous"]] + ([["contiguous"]] if twice else [])  # a second call returns the copy itself
    oracle.assert_chain(student, base, ops, fields=FIELDS, flags=True)
