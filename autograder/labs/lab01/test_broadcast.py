"""Part `broadcast`: expand (stride 0), broadcast_shapes, broadcast_to."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given

from autograder.engine import replies
from autograder.labs.lab01 import oracle
from autograder.labs.lab01.oracle import fmt_tuple
from autograder.labs.lab01.strategies import broadcastable_shapes, chains, examples, expand_op, layouts

FIXED = {
    "expand-rows": ([3], [1], 0, [["expand", [2, 3]]]),
    "expand-new-size1": ([3], [1], 0, [["expand", [1, 3]]]),
    "expand-new-size1-twice": ([3], [2], 1, [["expand", [1, 1, 3]]]),
    "expand-new-then-grow": ([3], [1], 0, [["expand", [1, 2, 3]]]),
    "expand-column": ([3, 1], [1, 1], 0, [["expand", [-1, 4]]]),
    "expand-keeps-size1-stride": ([3, 1], [1, 7], 0, [["expand", [2, 3, 1]]]),
    "expand-to-zero": ([1], [1], 0, [["expand", [0]]]),
    "expand-0d": ([], [], 2, [["expand", [1, 1]]]),
    "expand-0d-grow": ([], [], 2, [["expand", [2, 3]]]),
    "expand-expanded": ([3, 4], [0, 1], 0, [["expand", [2, 3, 4]]]),
    "expand-mismatch": ([3], [1], 0, [["expand", [4]]]),
    "expand-leading-infer": ([3], [1], 0, [["expand", [-1, 3]]]),
    "expand-fewer-sizes": ([3, 4], [4, 1], 0, [["expand", [4]]]),
    "expand-negative": ([3, 1], [1, 1], 0, [["expand", [3, -2]]]),
    "expand-zero-size-dim": ([2, 0], [1, 1], 0, [["expand", [3, 2, 0]]]),
    "expand-tuple": ([3, 1], [1, 1], 2, [["expand_t", [2, -1, 4]]]),
    "expand-0d-to-empty": ([], [], 1, [["expand", [0, 2]]]),
    "expand-keep-size1": ([2, 1], [1, 5], 0, [["expand", [2, 1]]]),
    "broadcast-to": ([1, 3], [3, 1], 0, [["broadcast_to", [2, 2, 3]]]),
    "broadcast-to-infer": ([3], [1], 0, [["broadcast_to", [2, -1]]]),
    "broadcast-to-error": ([2, 3], [3, 1], 0, [["broadcast_to", [3, 3]]]),
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_expand(student, name):
    shape, stride, offset, ops = FIXED[name]
    oracle.assert_with_companion(student, "broadcast", list(FIXED).index(name), oracle.layout(shape, stride, offset, extra=1), ops)


@pytest.mark.weight(4)
@examples(80)
@given(case=chains(layouts(min_dim=0, max_dim=3, zero_strides=True), expand_op, 1, 2))
def test_generated_expand(student, case):
    base, ops = case
    oracle.assert_chain(student, base, ops)


def _check_shapes(student, shapes):
    text = ", ".join(str(s) if isinstance(s, int) else fmt_tuple(s) for s in shapes)
    got = oracle.call(student, f"broadcast_shapes({text})", "lab01.scenarios:broadcast_shapes", shapes)
    want = oracle.broadcast_shapes(shapes)
    call = f"broadcast_shapes({text})"
    if replies.error_reply(got, call) is None:
        got = {"shape": replies.int_list(replies.dict_of(got, {"shape"}, call)["shape"], call)}
    if "error" in want:
        assert "error" in got and got["error"] == want["error"], (
            f"{call} should raise {want['error']} like torch (\"{want['message']}\"), but yours "
            + (oracle.fmt_raised(got) if "error" in got else f"returned {fmt_tuple(got['shape'])}"))
    else:
        assert "error" not in got, f"{call} should be {fmt_tuple(want['shape'])} like torch, but yours {oracle.describe_got(got)}"
        assert got["shape"] == want["shape"], f"{call} should be {fmt_tuple(want['shape'])} like torch, got {fmt_tuple(got['shape'])}"


SHAPES = {
    "three": [[2, 1], [3], [1, 1, 1]],
    "right-aligned": [[4, 3], [3]],
    "right-aligned-ones": [[5, 1, 4], [3, 1]],
    "int-shape": [3, [2, 1]],
    "zero": [[0], [1]],
    "zero-vs-two": [[2], [0]],
    "mismatch": [[3], [4]],
    "mismatch-inner": [[2, 3], [2, 1, 3], [4, 1]],
    "negative": [[-1], [1]],
    "negative-late": [[2], [-1]],
    "none": [],
    "scalars": [[], []],
}


SHAPE_COMPANIONS = [[[5, 1, 4], [3, 1]], [[2, 1], [3], [1, 1, 1]], [3, [2, 1]], [[0], [1]]]


@pytest.mark.parametrize("name", list(SHAPES))
def test_fixed_broadcast_shapes(student, name):
    _check_shapes(student, SHAPES[name])
    i = list(SHAPES).index(name)
    _check_shapes(student, SHAPE_COMPANIONS[i % len(SHAPE_COMPANIONS)])
    oracle.assert_chain(student, *oracle.companion("broadcast", i))


@pytest.mark.weight(2)
@examples(60)
@given(shapes=broadcastable_shapes())
def test_generated_broadcast_shapes(student, shapes):
    _check_shapes(student, shapes)
    oracle.assert_chain(student, *oracle.companion("broadcast", len(shapes)))
