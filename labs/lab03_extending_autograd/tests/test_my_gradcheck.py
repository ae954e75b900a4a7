"""Public tests of part `my_gradcheck` (run them with check("my_gradcheck"))."""
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, factor):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.factor = inputs[1]

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return grad_out * ctx.factor * x ** 2, None


def test_numerical_jacobian(lab):
    x = torch.randn(4, dtype=torch.double, requires_grad=True)
    (jac,) = lab.numerical_jacobian(lambda t: t ** 3, (x,))
    assert jac.shape == (4, 4), f"the Jacobian of a (4,) -> (4,) function has shape (4, 4), got {tuple(jac.shape)}"
    assert torch.allclose(jac, torch.diag(3 * x.detach() ** 2), atol=1e-6), "wrong numerical Jacobian of x ** 3"


def test_analytical_jacobian(lab):
    x = torch.randn(2, 3, dtype=torch.double, requires_grad=True)
    (jac,) = lab.analytical_jacobian(lambda t: Cube.apply(t, 2.0), (x,))
    assert jac.shape == (6, 6), f"expected shape (6, 6), got {tuple(jac.shape)}"
    assert torch.allclose(jac, torch.diag(2 * x.detach().reshape(-1) ** 2)), "wrong analytical Jacobian (factor 2 backward)"


def test_verdicts(lab):
    x = torch.randn(5, dtype=torch.double, requires_grad=True)
    assert lab.my_gradcheck(lambda t: Cube.apply(t, 3.0), (x,)) is True, "a correct backward should pass"
    assert lab.my_gradcheck(lambda t: Cube.apply(t, 2.0), (x,)) is False, "a backward wrong by a factor should fail"


class Square(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return 2 * grad_out * x + 1e-8  # not linear in grad_out, but within atol


def test_checks_only_the_jacobians(lab):
    x = torch.randn(3, dtype=torch.double, requires_grad=True)
    assert lab.my_gradcheck(Square.apply, (x,)) is True, (
        "a backward off by 1e-8 has Jacobians equal within atol: yours should say True (torch's gradcheck says False)")


def test_perturbs_copies(lab):
    a = torch.randn(3, dtype=torch.double, requires_grad=True)
    b = torch.randn(3, dtype=torch.double, requires_grad=True)
    fn = lambda x, y: x * b  # reads the captured b, not its argument  # noqa: E731
    jac_a, jac_b = lab.numerical_jacobian(fn, (a, b))
    assert torch.allclose(jac_b, torch.zeros(3, 3, dtype=torch.double)), (
        "perturbing a copy of b does not move the captured b: its numerical Jacobian should be zero")
    assert lab.my_gradcheck(fn, (a, b)) is False, "numerical (zero) and analytical (diag(a)) disagree for b: False"
    assert torch.equal(b, b.detach().clone()) and b.grad is None, "the caller's tensors stay as they were"


def test_edge_inputs(lab):
    x = torch.randn(3, dtype=torch.double, requires_grad=True)
    (jac,) = lab.analytical_jacobian(lambda t: torch.ones(2, dtype=torch.double), (x,))
    assert torch.equal(jac, torch.zeros(2, 3, dtype=torch.double)), "an output that ignores the input: zero Jacobian"
    s = torch.tensor(0.7, dtype=torch.double, requires_grad=True)
    (jac,) = lab.numerical_jacobian(lambda t, c: c * t, (s, 2.0))
    assert jac.shape == (1, 1) and abs(jac.item() - 2.0) < 1e-6, "a 0-d input and a float argument: Jacobian [[2.0]]"
    w = torch.randn(3, 2, dtype=torch.double).T.requires_grad_()
    (jac,) = lab.numerical_jacobian(lambda t: t * torch.arange(6.0, dtype=torch.double).reshape(2, 3), (w,))
    assert torch.allclose(jac, torch.diag(torch.arange(6.0, dtype=torch.double)), atol=1e-6), (
        "a non-contiguous input: columns in the order of reshape(-1)")
