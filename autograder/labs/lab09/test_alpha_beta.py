# IPT-CANARY lab09 test_alpha_beta.py: hidden grading text, never shown to learners
"""Part `alpha_beta`: fit_alpha_beta minimises the squared relative error of alpha + beta * n.

Trust: values only. P0 solves the same least-squares problem itself (numpy, columns scaled) and checks
that the learner's (alpha, beta) reaches its least relative error to within 1e-9: coefficients are not
compared one by one (the columns differ by eight decades, many answers are equally good to the last bit).
"""
import numpy as np

from autograder.engine import replies
from autograder.engine.plugin import case_rng


def objective(alpha, beta, n, t):
    return float(np.sum(((alpha + beta * n - t) / t) ** 2))


def best_line(n, t):
    """P0's (alpha, beta): least squares on the rows divided by t, the size column scaled to [0, 1]."""
    scale = float(n.max())
    a = np.stack([1.0 / t, (n / scale) / t], axis=1)
    (alpha, b), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return float(alpha), float(b) / scale


def optimum(n, t):
    return objective(*best_line(n, t), n, t)


def timings(rng, noise=0.2):
    """Sizes over six decades, times of a link with latency 20-200 us and 0.5-10 GB/s, with noise."""
    n = np.unique(np.round(2.0 ** rng.uniform(2, 24, int(rng.integers(6, 14))))).astype(np.int64)
    alpha, beta = rng.uniform(2e-5, 2e-4), 1 / rng.uniform(5e8, 1e10)
    t = (alpha + beta * n) * np.exp(rng.normal(0, noise, n.size))
    return [int(v) for v in n], [float(v) for v in t]


def fits(student, cases):
    return replies.list_of(student.run("lab09.scenarios:fit", cases), "fit_alpha_beta results", len(cases))


def check_fit(sizes, seconds, reply):
    n, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    what = f"fit_alpha_beta on {len(sizes)} timings ({sizes[0]} to {sizes[-1]} bytes)"
    assert isinstance(reply, dict) and "error" not in reply, \
        f"{what} raised {reply.get('error')}: {reply.get('message', '')}" if isinstance(reply, dict) else f"{what}: no answer"
    value = reply.get("value")
    assert isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value), \
        f"{what} should return (alpha, beta) as two Python floats, got {value!r}"
    alpha, beta = value
    best = optimum(n, t)
    got = objective(alpha, beta, n, t)
    assert np.isfinite(got) and got <= best * (1 + 1e-9) + 1e-12, (
        f"{what}: alpha={alpha:.6g}, beta={beta:.6g} leave a sum of squared relative errors of {got:.10g}; "
        f"the least possible is {best:.10g}")


def test_fits_noisy_timings(student):
    rng = case_rng(600)
    cases = [timings(rng) for _ in range(6)]
    for (sizes, seconds), reply in zip(cases, fits(student, cases), strict=True):
        check_fit(sizes, seconds, reply)


def test_relative_not_absolute(student):
    """A link where an ordinary least-squares fit follows only the largest sizes: the small messages'
    latency decides alpha."""
    rng = case_rng(610)
    sizes = [16, 64, 256, 1024, 4096, 2**20, 2**22, 2**24]
    base = [5e-5 + n / 4e9 for n in sizes]
    seconds = [b * float(np.exp(rng.normal(0, 0.05))) for b in base]
    seconds[-1] *= 1.5
    (reply,) = fits(student, [(sizes, seconds)])
    check_fit(sizes, seconds, reply)


def test_exact_line_and_two_points(student):
    """Two distinct sizes and a noiseless line: the fit passes through the points."""
    rng = case_rng(620)
    alpha, beta = float(rng.uniform(1e-5, 1e-4)), float(1 / rng.uniform(1e9, 5e9))
    sizes = [int(rng.integers(1, 100)), int(rng.integers(10**6, 10**7))]
    seconds = [alpha + beta * s for s in sizes]
    many = sorted({int(s) for s in rng.integers(0, 10**6, 8)} | {0})
    cases = [(sizes, seconds), (many, [alpha + beta * s for s in many]), (sizes + sizes, seconds + seconds)]
    for (s, t), reply in zip(cases, fits(student, cases), strict=True):
        check_fit(s, t, reply)


def test_bad_input(student):
    """ValueError for mismatched lengths, one distinct size, a negative size, a time <= 0 or not finite;
    and in the same call, good input answers."""
    rng = case_rng(630)
    sizes, seconds = timings(rng)
    bad = [(sizes, seconds[:-1]), ([64, 64, 64], [1e-4, 1.1e-4, 0.9e-4]), ([-8] + sizes[1:], seconds), ([-1] + sizes[1:], seconds),
           (sizes, [0.0] + seconds[1:]), (sizes, seconds[:-1] + [float("inf")]), (sizes, [-1e-5] + seconds[1:]),
           (sizes, seconds[:-1] + [float("nan")])]
    got = fits(student, bad + [(sizes, seconds)])
    for (s, t), reply in zip(bad, got[:-1], strict=True):
        assert isinstance(reply, dict) and reply.get("error") == "ValueError", \
            f"fit_alpha_beta({s[:3]}..., {t[:3]}...) should raise ValueError, got {reply.get('value', reply.get('error'))!r}"
    check_fit(sizes, seconds, got[-1])


def test_negative_alpha(student):
    """Times that grow faster than linearly (a cache falling off, say): the best line has alpha < 0, and
    the fit is unconstrained."""
    rng = case_rng(640)
    cases = []
    while len(cases) < 3:
        n = np.unique(np.round(2.0 ** rng.uniform(10, 24, int(rng.integers(6, 12))))).astype(np.int64)
        t = rng.uniform(0.5e-9, 2e-9) * n.astype(np.float64) ** rng.uniform(1.1, 1.3)
        if best_line(n.astype(np.float64), t)[0] < 0:
            cases.append(([int(v) for v in n], [float(v) for v in t]))
    for (sizes, seconds), reply in zip(cases, fits(student, cases), strict=True):
        check_fit(sizes, seconds, reply)
