"""Part `channels_last`: channels-last strides, is_contiguous(channels_last), contiguous(channels_last)."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab01 import oracle
from autograder.labs.lab01.oracle import fmt_layout, fmt_tuple
from autograder.labs.lab01.strategies import examples, layouts

FIELDS = ("shape", "stride", "offset", "values", "shares", "contiguous", "channels_last")


def _check_strides(student, shapes):
    got = oracle.call(student, f"channels_last_strides on shapes {shapes}", "lab01.scenarios:channels_last_strides", shapes)
    for g, (shape, w) in replies.pairs(got, list(zip(shapes, oracle.channels_last_strides(shapes), strict=True)),
                                       "channels_last_strides over several shapes"):
        call = f"channels_last_strides({fmt_tuple(shape)})"
        if replies.error_reply(g, call) is None:
            g = {"stride": replies.int_list(replies.dict_of(g, {"stride"}, call)["stride"], call)}
        if "error" in w:
            assert "error" in g and g["error"] == w["error"], (
                f"{call} should raise {w['error']} like torch (\"{w['message']}\"), but yours "
                + (oracle.fmt_raised(g) if "error" in g else f"returned {fmt_tuple(g['stride'])}"))
        else:
            assert "error" not in g, f"{call} should be {fmt_tuple(w['stride'])} like torch, but yours {oracle.fmt_raised(g)}"
            assert g["stride"] == w["stride"], (
                f"{call} should be {fmt_tuple(w['stride'])} (torch.empty{fmt_tuple(shape)}, "
                f"memory_format=torch.channels_last).stride()), got {fmt_tuple(g['stride'])}")


def test_strides_fixed(student):
    _check_strides(student, [[2, 3, 4, 5], [1, 3, 2, 2], [2, 1, 3, 3], [2, 3, 1, 1], [1, 1, 1, 1],
                             [2, 0, 3, 3], [0, 3, 2, 2], [2, 3, 0, 2], [2, 3, 4], [2, 3, 4, 5, 6], []])


@examples(30)
@given(shapes=st.lists(st.lists(st.integers(0, 5), min_size=4, max_size=4), min_size=1, max_size=4))
def test_strides_generated(student, shapes):
    _check_strides(student, shapes)


def _check_flags(student, layouts_):
    got = oracle.call(student, "is_contiguous(memory_format=channels_last)", "lab01.scenarios:layout_flags",
                      layouts_, "channels_last")
    want = oracle.layout_flags(layouts_, "channels_last")
    for g, (layout, w) in replies.pairs(got, list(zip(layouts_, want, strict=True)), "is_contiguous over several layouts"):
        g = replies.boolean(g, f"For x with {fmt_layout(layout)}: x.is_contiguous(memory_format=torch.channels_last)")
        assert g == w, (f"For x with {fmt_layout(layout)}: x.is_contiguous(memory_format=torch.channels_last) "
                        f"should be {w} like torch, got {g}")


FLAG_LAYOUTS = [
    ([2, 3, 4, 5], [60, 1, 15, 3], 0),   # channels last
    ([2, 3, 4, 5], [60, 20, 5, 1], 0),   # contiguous
    ([2, 1, 3, 3], [9, 9, 3, 1], 0),     # contiguous, and channels last too (C is size 1)
    ([2, 3, 1, 1], [3, 1, 1, 1], 0),     # contiguous, and channels last too
    ([2, 3, 1, 1], [3, 1, 3, 3], 0),     # a fresh channels-last tensor of that shape
    ([2, 3, 4, 5], [60, 1, 15, 6], 0),   # W stride wrong
    ([2, 3, 2, 2], [24, 2, 12, 6], 1),   # C sliced with a step
    ([2, 0, 3, 3], [0, 1, 0, 0], 0),     # empty channels-last tensor
    ([2, 0, 3, 3], [9, 9, 3, 1], 0),     # empty contiguous tensor: not channels last
    ([3, 4, 5], [1, 15, 3], 0),          # 3-D: never
]


def test_flags_fixed(student):
    _check_flags(student, [oracle.layout(*f) for f in FLAG_LAYOUTS])


@st.composite
def cl_layouts(draw):
    ndim = 4 if draw(st.integers(0, 5)) else draw(st.sampled_from((3, 5)))
    order = draw(st.one_of(st.just([0, 2, 3, 1]), st.just([0, 2, 3, 1]), st.permutations(range(ndim)))) \
        if ndim == 4 else None
    return draw(layouts(min_dim=ndim, max_dim=ndim, min_size=1 if draw(st.integers(0, 5)) else 0,
                        max_size=3, order=order, gaps=draw(st.integers(0, 3)) == 0, offsets=False,
                        zero_strides=draw(st.integers(0, 4)) == 0))


@pytest.mark.weight(3)
@examples(60)
@given(layouts_=st.lists(cl_layouts(), min_size=1, max_size=3))
def test_flags_generated(student, layouts_):
    _check_flags(student, layouts_)


CONTIGUOUS = {
    "nchw-to-nhwc": ([2, 3, 4, 5], [60, 20, 5, 1], 0, [["contiguous", "channels_last"]]),
    "already-nhwc": ([2, 3, 4, 5], [60, 1, 15, 3], 0, [["contiguous", "channels_last"]]),
    "one-channel": ([2, 1, 3, 3], [9, 9, 3, 1], 0, [["contiguous", "channels_last"]]),
    "one-pixel": ([2, 3, 1, 1], [3, 1, 1, 1], 1, [["contiguous", "channels_last"]]),
    "one-image": ([1, 3, 2, 2], [12, 4, 2, 1], 0, [["contiguous", "channels_last"]]),
    "round-trip": ([2, 3, 2, 2], [12, 4, 2, 1], 2, [["contiguous", "channels_last"], ["contiguous"]]),
    "from-permuted": ([2, 5, 3, 4], [60, 1, 20, 5], 0, [["contiguous", "channels_last"]]),
    "expanded": ([2, 3, 2, 2], [0, 1, 0, 0], 0, [["contiguous", "channels_last"]]),
    "empty-channels": ([2, 0, 3, 3], [9, 9, 3, 1], 0, [["contiguous", "channels_last"]]),
    "3d": ([2, 3, 4], [12, 4, 1], 0, [["contiguous", "channels_last"]]),
    "keyword": ([2, 3, 2, 2], [12, 1, 6, 3], 0, [["contiguous_kw", "contiguous_format"], ["contiguous_kw", "channels_last"]]),
}


@pytest.mark.parametrize("name", list(CONTIGUOUS))
def test_contiguous_fixed(student, name):
    shape, stride, offset, ops = CONTIGUOUS[name]
    oracle.assert_with_companion(student, "channels_last", list(CONTIGUOUS).index(name),
                                 oracle.layout(shape, stride, offset, extra=1), ops, fields=FIELDS, flags=True)


@pytest.mark.weight(3)
@examples(50)
@given(base=cl_layouts(), back=st.booleans())
def test_contiguous_generated(student, base, back):
    ops = [["contiguous", "channels_last"]] + ([["contiguous"]] if back else [])
    oracle.assert_chain(student, base, ops, fields=FIELDS, flags=True)
