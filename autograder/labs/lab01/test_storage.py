"""Part `storage`: contiguous strides, numel, storage_index, is_contiguous."""
# IPT-CANARY lab01 hidden-graders
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab01 import oracle
from autograder.labs.lab01.oracle import fmt_layout, fmt_tuple
from autograder.labs.lab01.strategies import examples, layouts

FIXED_SHAPES = [[], [5], [2, 3], [2, 3, 4], [4, 1, 3], [1, 1], [3, 1], [2, 0, 3], [0], [3, 0],
                [0, 2, 1, 5], [1, 2, 1, 3, 1], [2, 2, 2, 2, 2]]


def _check_strides(student, shapes):
    got = oracle.call(student, f"contiguous_strides on shapes {shapes}", "lab01.scenarios:contiguous_strides", shapes)
    for (shape, w), g in zip(zip(shapes, oracle.contiguous_strides(shapes), strict=True),
                             replies.list_of(got, "contiguous_strides over several shapes", len(shapes)), strict=True):
        g = replies.int_list(g, f"contiguous_strides({fmt_tuple(shape)})")
        assert g == w, (f"contiguous_strides({fmt_tuple(shape)}) should be {fmt_tuple(w)} "
                        f"(torch.empty{fmt_tuple(shape)}.stride()), got {fmt_tuple(g)}")


def test_contiguous_strides_fixed(student):
    _check_strides(student, FIXED_SHAPES)


@examples(30)
@given(shapes=st.lists(st.lists(st.integers(0, 5), max_size=5), min_size=1, max_size=4))
def test_contiguous_strides_generated(student, shapes):
    _check_strides(student, shapes + [[len(shapes), 0, 2]])  # the zero-size rule in every example


def _index_draw(data, shape):
    idx = [data.draw(st.integers(-n, n - 1)) if n else 0 for n in shape]
    if shape and data.draw(st.integers(0, 3)) == 0:
        d = data.draw(st.integers(0, len(shape) - 1))
        idx[d] = data.draw(st.sampled_from((shape[d], -shape[d] - 1)))
    return idx


def _check_facts(student, layout, indices):
    got = oracle.call(student, f"x with {fmt_layout(layout)}", "lab01.scenarios:layout_facts", layout, indices)
    want = oracle.layout_facts(layout, indices)
    lead = f"For x with {fmt_layout(layout)}"
    got = replies.dict_of(got, {"numel", "contiguous", "storage_index"}, lead)
    got["numel"] = replies.integer(got["numel"], f"{lead}: x.numel()")
    got["contiguous"] = replies.boolean(got["contiguous"], f"{lead}: x.is_contiguous()")
    got["storage_index"] = replies.list_of(got["storage_index"], f"{lead}: storage_index replies", len(indices))
    assert got["numel"] == want["numel"], f"{lead}: x.numel() should be {want['numel']}, got {got['numel']}"
    assert got["contiguous"] == want["contiguous"], (
        f"{lead}: x.is_contiguous() should be {want['contiguous']} like torch, got {got['contiguous']}")
    for g, (idx, w) in replies.pairs(got["storage_index"], list(zip(indices, want["storage_index"], strict=True)),
                                     f"{lead}: storage_index replies"):
        call = f"x.storage_index({fmt_tuple(idx)})"
        if replies.error_reply(g, call) is None:
            g = replies.integer(g, f"{lead}: {call}")
        if isinstance(w, dict):
            assert isinstance(g, dict) and g["error"] == w["error"], (
                f"{lead}: {call} should raise {w['error']} (index out of range; torch: \"{w['message']}\"), "
                f"but yours {oracle.fmt_raised(g) if isinstance(g, dict) else 'returned ' + str(g)}")
        else:
            assert g == w, (f"{lead}: {call} should be storage position {w} (x[{', '.join(map(str, idx))}] "
                            f"in torch has storage_offset() {w}), but yours "
                            f"{oracle.fmt_raised(g) if isinstance(g, dict) else 'is ' + str(g)}")


FIXED_LAYOUTS = [
    ([3, 4], [4, 1], 0),          # contiguous
    ([4, 3], [1, 4], 0),          # transposed
    ([3, 2], [4, 2], 1),          # x[:, 1::2]
    ([2, 1, 3], [3, 7, 1], 2),    # size-1 dim with an odd stride: still contiguous
    ([3, 4], [0, 1], 0),          # expanded rows
    ([1, 1], [5, 9], 3),          # one element: contiguous whatever the strides
    ([0, 3], [1, 5], 0),          # no elements: contiguous
    ([], [], 4),                  # 0-d
]


@pytest.mark.parametrize("shape,stride,offset", FIXED_LAYOUTS, ids=[str(f[0]) + str(f[1]) for f in FIXED_LAYOUTS])
def test_layout_fixed(student, shape, stride, offset):
    layout = oracle.layout(shape, stride, offset, extra=1)
    indices = [[n - 1 for n in shape], [-1] * len(shape), [0] * len(shape)]
    if shape and all(shape):
        indices.append([shape[0]] + [0] * (len(shape) - 1))
        indices.append([-shape[0] - 1] + [0] * (len(shape) - 1))
    _check_facts(student, layout, indices)
    # and, in every test, a transposed layout with indices in and out of range
    _check_facts(student, oracle.layout([4, 3], [1, 4], 1, extra=1), [[3, 2], [-1, 0], [4, 0], [0, -4]])


@examples(60)
@given(data=st.data())
def test_layout_generated(student, data):
    layout = data.draw(layouts(min_dim=0, min_size=0 if data.draw(st.integers(0, 5)) == 0 else 1,
                               zero_strides=True))
    indices = [_index_draw(data, layout["shape"]) for _ in range(3)]
    _check_facts(student, layout, indices)
