import numpy as np
import pytest


@pytest.mark.parametrize("k", [0, 2, -3])
def test_scale(student, k):
    got = student.run("lab00.scenarios:scale", [1.0, 2.0], k)
    assert np.array_equal(got, [k, 2 * k]), f"scale([1, 2], {k}) should be [{k}, {2 * k}], got {got}"
