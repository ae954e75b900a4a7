"""Part `indexing`: transpose, permute, select and __getitem__ with ints, slices and tuples."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given

from autograder.labs.lab01 import oracle
from autograder.labs.lab01.strategies import chains, examples, indexing_op, layouts

S, N = "slice", None
FIXED = {
    "transpose-negative": ([2, 3, 4], [12, 4, 1], 0, [["transpose", -1, 0]]),
    "transpose-same": ([2, 3], [3, 1], 1, [["transpose", 1, -1]]),
    "transpose-out-of-range": ([2, 3], [3, 1], 0, [["transpose", 0, 2]]),
    "permute-cycle": ([2, 3, 4], [12, 4, 1], 0, [["permute", [1, 2, 0]], ["permute", [2, 0, 1]]]),
    "permute-negative": ([2, 3, 4], [1, 2, 6], 3, [["permute", [-1, 0, -2]]]),
    "permute-too-few": ([2, 3, 4], [12, 4, 1], 0, [["permute", [1, 0]]]),
    "permute-duplicate": ([2, 3, 4], [12, 4, 1], 0, [["permute", [0, 1, 1]]]),
    "permute-out-of-range": ([2, 3], [3, 1], 0, [["permute", [0, 2]]]),
    "permute-count-before-range": ([3, 4], [4, 1], 0, [["permute", [0, 5, 1]]]),  # the length check comes first
    "select-negative": ([3, 4], [4, 1], 0, [["select", 1, -1]]),
    "select-last-dim": ([2, 3, 4], [1, 2, 6], 2, [["select", -1, 3]]),
    "select-out-of-range": ([3, 4], [4, 1], 0, [["select", 0, 3]]),
    "select-too-negative": ([3, 4], [4, 1], 0, [["select", 0, -4]]),
    "select-to-0d": ([4], [3], 1, [["select", 0, -2], ["getitem", []]]),
    "select-0d": ([4], [1], 0, [["select", 0, 1], ["select", 0, 0]]),
    "int-index-0d": ([4], [1], 0, [["getitem", 2], ["getitem", 0]]),
    "slice-step": ([3, 4], [4, 1], 0, [["getitem", [{S: [1, N, N]}, {S: [N, N, 2]}]]]),
    "slice-step3-odd": ([7], [2], 1, [["getitem", {S: [N, N, 3]}]]),
    "slice-negative-bounds": ([3, 4], [4, 1], 0, [["getitem", [{S: [-2, N, N]}, {S: [-3, -1, N]}]]]),
    "slice-past-the-end": ([3, 4], [4, 1], 0, [["getitem", {S: [5, N, N]}]]),
    "slice-empty": ([3, 4], [4, 1], 0, [["getitem", [{S: [N, N, N]}, {S: [3, 1, N]}]]]),
    "slice-clamped": ([3, 4], [4, 1], 0, [["getitem", {S: [-100, 100, 2]}]]),
    "slice-negative-step": ([3, 4], [4, 1], 0, [["getitem", {S: [N, N, -1]}]]),
    "slice-zero-step": ([3, 4], [4, 1], 0, [["getitem", [0, {S: [N, N, 0]}]]]),
    "int-and-slice": ([3, 4], [4, 1], 0, [["getitem", [{S: [1, N, N]}, -1]]]),
    "int-negative": ([3, 4], [1, 3], 0, [["getitem", -1]]),
    "int-out-of-range": ([3, 4], [4, 1], 0, [["getitem", [0, 4]]]),
    "int-too-negative": ([3, 4], [4, 1], 0, [["getitem", -4]]),
    "too-many-indices": ([3, 4], [4, 1], 0, [["getitem", [0, 0, 0]]]),
    "empty-tuple": ([3, 4], [4, 1], 2, [["getitem", []]]),
    "permute-tuple": ([2, 3, 4], [1, 2, 6], 3, [["permute_t", [2, -3, 1]]]),
    "transpose-0d": ([], [], 3, [["transpose", -1, 0], ["transpose", 0, 0]]),
    "transpose-0d-out-of-range": ([], [], 3, [["transpose", 0, 1]]),
    "select-0d": ([], [], 3, [["select", 0, 0]]),
    "permute-0d": ([], [], 1, [["permute", []], ["getitem", []]]),
    "permute-repeated-spelling": ([2, 3, 4], [12, 4, 1], 0, [["permute", [0, -1, 2]]]),
    "slice-size0-dim": ([3, 0], [1, 1], 1, [["getitem", [{S: [1, N, N]}, {S: [N, N, 2]}]], ["transpose", 0, 1]]),
    "transposed-slice": ([4, 3], [1, 4], 0, [["getitem", [{S: [N, N, 3]}, {S: [1, N, N]}]], ["transpose", 0, 1]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    shape, stride, offset, ops = FIXED[name]
    oracle.assert_with_companion(student, "indexing", list(FIXED).index(name), oracle.layout(shape, stride, offset, extra=1), ops)


@pytest.mark.weight(6)
@examples(100)
@given(case=chains(layouts(min_dim=1, max_dim=4), indexing_op, 1, 4))
def test_generated_index_chains(student, case):
    base, ops = case
    oracle.assert_chain(student, base, ops)
