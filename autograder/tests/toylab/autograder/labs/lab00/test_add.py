import numpy as np
from hypothesis import given, settings, strategies as st


def test_small(student):
    got = student.run("lab00.scenarios:add", np.arange(3), [1, 2, 3])
    assert np.array_equal(got, [1, 3, 5]), f"add([0, 1, 2], [1, 2, 3]) should be [1, 3, 5], got {got}"


@settings(max_examples=20)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=5))
def test_random(student, xs):
    got = student.run("lab00.scenarios:add", xs, xs)
    assert np.array_equal(got, 2 * np.array(xs)), f"add(x, x) for x = {xs} should be {2 * np.array(xs)}, got {got}"
