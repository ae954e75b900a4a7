"""Public tests of part `modes_hooks` (run them with check("modes_hooks"))."""
import numpy as np
import pytest


def test_no_grad(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    with lab.no_grad():
        assert not lab.is_grad_enabled(), "inside `with no_grad():` is_grad_enabled() should be False"
        y = lab.given_mul(x, 2.0)
    assert lab.is_grad_enabled(), "no_grad restores grad mode on exit"
    assert not y.requires_grad and y.grad_fn is None, "inside no_grad nothing is recorded"


def test_hooks(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    a = lab.given_mul(x, 3.0)
    seen = []
    a.register_hook(lambda g: seen.append(g.data.copy()))
    x.register_hook(lambda g: lab.given_mul(g, 10.0))
    lab.given_sum(lab.given_mul(a, a)).backward()
    assert len(seen) == 1, "a hook on a tensor used twice runs once, with the total gradient"
    np.testing.assert_allclose(seen[0], [6.0, 12.0])
    np.testing.assert_allclose(x.grad.data, [180.0, 360.0], err_msg="a leaf hook's result is what accumulates")
    with pytest.raises(RuntimeError):
        lab.tensor([1.0]).register_hook(lambda g: g)


def test_retain_grad(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    a = lab.given_mul(x, 3.0)
    a.retain_grad()
    lab.given_sum(lab.given_mul(a, a)).backward()
    np.testing.assert_allclose(a.grad.data, [6.0, 12.0])


def test_no_grad_exception_and_decorator(lab):
    """Rule: no_grad restores the mode it found, even when the block raises; it works as a decorator."""
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(KeyError):
        with lab.no_grad():
            assert not lab.is_grad_enabled(), "inside no_grad, grad mode is off"
            raise KeyError("leaving by an exception")
    assert lab.is_grad_enabled(), "no_grad restores grad mode even when its block raises"

    @lab.no_grad()
    def scaled(t):
        return lab.given_mul(t, 3.0)

    y = scaled(x)
    assert not y.requires_grad and lab.is_grad_enabled(), "a @no_grad() function records nothing and restores the mode"


def test_retain_grad_twice(lab):
    """Rule: a second retain_grad() changes nothing."""
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    a = lab.given_mul(x, 3.0)
    a.retain_grad()
    a.retain_grad()
    lab.given_sum(lab.given_mul(a, a)).backward()
    np.testing.assert_allclose(a.grad.data, [6.0, 12.0], err_msg="retain_grad() twice: the gradient is not counted twice")
