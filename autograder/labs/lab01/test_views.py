"""Part `views`: infer_size, compute_view_strides, view and reshape, against torch."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given

from autograder.labs.lab01 import oracle
from autograder.labs.lab01.strategies import chains, examples, layouts, view_op

# (shape, strides, offset), then chains of view/reshape ops; every step is compared with torch
FIXED = {
    # arange(24).view(2, 3, 4).transpose(0, 1): three chunks, nothing merges
    "transposed-split": ([3, 2, 4], [4, 12, 1], 0, [["view", [3, 2, 2, 2]]]),
    "transposed-merge": ([3, 2, 4], [4, 12, 1], 0, [["view", [6, 4]]]),
    "transposed-merge-last": ([3, 2, 4], [4, 12, 1], 0, [["view", [3, 8]]]),
    "transposed-size1": ([3, 2, 4], [4, 12, 1], 0, [["view", [3, 1, 2, 1, 4]]]),
    "transposed-infer": ([3, 2, 4], [4, 12, 1], 0, [["view", [3, 2, -1, 2]]]),
    # a sliced tensor whose inner dims still merge: x[:, ::2] of a (2, 6, 2) tensor
    "sliced-merge": ([2, 3, 2], [12, 4, 1], 2, [["view", [2, 6]], ["view", [4, 3]]]),
    "sliced-no-merge": ([2, 3, 2], [12, 4, 1], 2, [["view", [6, 2]]]),
    # size-1 dims with odd strides never break a chunk
    "size1-odd-stride": ([2, 1, 3], [3, 7, 1], 0, [["view", [6]], ["view", [3, 1, 2]]]),
    "size1-leading": ([1, 4, 3], [99, 3, 1], 1, [["view", [2, 2, 3]], ["view", [12, 1]]]),
    # expanded (stride 0) dims
    "expanded-rows": ([3, 4], [0, 1], 0, [["view", [3, 2, 2]]]),
    "expanded-merge": ([3, 4], [0, 1], 0, [["view", [12]]]),
    "expanded-size1": ([3, 4], [0, 1], 0, [["view", [1, 3, 4, 1]]]),
    # channels-last layout of (2, 3, 4, 5)
    "channels-last-view": ([2, 3, 4, 5], [60, 1, 15, 3], 0, [["view", [2, 3, 20]]]),
    "channels-last-bad": ([2, 3, 4, 5], [60, 1, 15, 3], 0, [["view", [6, 20]]]),
    "channels-last-reshape": ([2, 3, 4, 5], [60, 1, 15, 3], 0, [["reshape", [6, 20]]]),
    # 0-d tensors
    "0d-view": ([], [], 3, [["view", [1, 1]], ["view", []], ["view", [-1]]]),
    "0d-reshape": ([], [], 3, [["reshape", [1, -1, 1]]]),
    # -1 inference and its errors
    "infer-two": ([4, 3], [3, 1], 0, [["view", [-1, -1]]]),
    "infer-negative": ([4, 3], [3, 1], 0, [["view", [-2, 6]]]),
    "infer-wrong-numel": ([4, 3], [3, 1], 0, [["view", [5, 2]]]),
    "infer-indivisible": ([4, 3], [3, 1], 0, [["view", [5, -1]]]),
    "infer-reshape-error": ([4, 3], [1, 4], 0, [["reshape", [7, -1]]]),
    # a 0 beside -1 with elements to place: no size fits (the division by the known 0 must not be tried)
    "infer-beside-zero": ([4, 3], [3, 1], 0, [["view", [0, -1]]]),
    "infer-beside-zero-reshape": ([4, 3], [1, 4], 0, [["reshape", [2, 0, -1]]]),
    # reshape: a view when possible, a copy otherwise
    "reshape-copies": ([4, 3], [1, 4], 2, [["reshape", [12]]]),
    "reshape-views": ([4, 3], [3, 1], 2, [["reshape", [2, -1]], ["reshape", [3, 4]]]),
    "reshape-copy-then-view": ([3, 2, 4], [4, 12, 1], 0, [["reshape", [6, 4]], ["view", [24]]]),
    # tensors with no elements
    "empty-new-shape": ([2, 0, 3], [3, 3, 1], 0, [["view", [0, 3, 5]]]),
    "empty-same-shape": ([3, 0, 2], [1, 3, 3], 0, [["view", [3, 0, 2]]]),
    "empty-infer": ([2, 0, 3], [3, 3, 1], 0, [["view", [-1, 3]]]),
    "empty-ambiguous": ([2, 0, 3], [3, 3, 1], 0, [["view", [-1, 0]]]),
    "empty-reshape": ([0, 4], [1, 1], 0, [["reshape", [2, 0, 2]]]),
    # one tuple argument instead of *sizes (x.view((2, 6))), as PyTorch accepts
    "tuple-view": ([3, 2, 4], [4, 12, 1], 1, [["view_t", [3, 2, 2, 2]], ["reshape_t", [6, -1]]]),
    "tuple-view-error": ([4, 3], [3, 1], 0, [["view_t", [5, -1]]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    shape, stride, offset, ops = FIXED[name]
    oracle.assert_with_companion(student, "views", list(FIXED).index(name), oracle.layout(shape, stride, offset, extra=1), ops)


@pytest.mark.weight(4)
@examples(90)
@given(case=chains(layouts(min_dim=0, max_dim=4, zero_strides=True), view_op, 1, 3))
def test_generated_view_chains(student, case):
    base, ops = case
    oracle.assert_chain(student, base, ops)


@pytest.mark.weight(2)
@examples(40)
@given(case=chains(layouts(min_dim=2, max_dim=4, gaps=False, offsets=False, zero_strides=False),
                   view_op, 2, 3))
def test_generated_views_of_permuted_tensors(student, case):
    base, ops = case
    oracle.assert_with_companion(student, "views", len(ops) + len(base["shape"]), base, ops)
