"""Public tests of part `graph` (run them with check("graph"))."""
import numpy as np


def test_leaves_and_non_leaves(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    c = lab.tensor([3.0, 4.0])
    y = lab.given_mul(x, c)
    assert x.is_leaf and c.is_leaf, "tensors you create are leaves"
    assert not y.is_leaf and y.requires_grad and y.grad_fn is not None, "x * c records a node: y is a non-leaf that requires grad"
    z = lab.given_mul(c, c)
    assert z.is_leaf and not z.requires_grad and z.grad_fn is None, "c * c with no input requiring grad records nothing"


def test_edges(lab):
    x = lab.tensor([1.0, 2.0], requires_grad=True)
    c = lab.tensor([3.0, 4.0])
    y = lab.given_mul(x, c)
    (first, n0), (second, n1) = y.grad_fn.next_functions
    assert type(first).__name__ == "AccumulateGrad" and first.variable is x, "x's edge ends in its AccumulateGrad"
    assert second is None and n0 == n1 == 0, "c needs no gradient: its edge is (None, 0)"
    sq = lab.given_mul(x, x)
    assert sq.grad_fn.next_functions[0][0] is sq.grad_fn.next_functions[1][0], "x * x: one AccumulateGrad, two edges into it"
    w = lab.given_add(y, x)
    assert w.grad_fn.next_functions[0][0] is y.grad_fn, "a non-leaf's edge is its grad_fn"
    np.testing.assert_allclose(w.data, [4.0, 10.0])
