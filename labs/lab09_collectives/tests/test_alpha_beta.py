"""Public tests of part `alpha_beta` (run them with check("alpha_beta"))."""
import math

from labkit.testing import raises


def test_recovers_a_noiseless_line(lab):
    alpha, beta = 5e-5, 1 / 4e9
    sizes = [16, 1024, 65536, 2**20, 2**24]
    a, b = lab.fit_alpha_beta(sizes, [alpha + beta * n for n in sizes])
    assert isinstance(a, float) and isinstance(b, float), f"return two Python floats, got {type(a).__name__}, {type(b).__name__}"
    assert math.isclose(a, alpha, rel_tol=1e-6) and math.isclose(b, beta, rel_tol=1e-6), \
        f"a noiseless line alpha={alpha}, beta={beta} should be fitted exactly, got alpha={a}, beta={b}"


def test_bad_input(lab):
    with raises(ValueError, "fit_alpha_beta with 3 sizes and 2 times"):
        lab.fit_alpha_beta([1, 2, 3], [1.0, 2.0])
    with raises(ValueError, "fit_alpha_beta with one distinct size"):
        lab.fit_alpha_beta([8, 8], [1.0, 2.0])
