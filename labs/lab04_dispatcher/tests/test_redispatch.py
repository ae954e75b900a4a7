"""Public tests of part `redispatch` (run them with check("redispatch"))."""


def test_autograd_and_tracer(lab):
    K = lab.DispatchKey
    d, tape, trace = lab.Dispatcher(), [], []
    d.define("ipt::mul(Tensor self, Tensor other) -> Tensor")
    d.define("ipt::square(Tensor self) -> Tensor")
    d.impl("ipt::mul", K.CPU, lambda ks, x, y: lab.MiniTensor(x.value * y.value))
    d.impl("ipt::square", K.CPU, lambda ks, x: d.call("ipt::mul", x, x))
    for name in ("ipt::mul", "ipt::square"):
        d.impl(name, K.AutogradCPU, lab.make_autograd_kernel(d, name, tape))
    d.fallback(K.Tracer, lab.make_tracing_fallback(d, trace))
    x = lab.MiniTensor(3.0, [K.CPU, K.AutogradCPU, K.Tracer], requires_grad=True)
    y = d.call("ipt::square", x)
    assert y.value == 9.0, f"square(3) should be 9, got {y.value}"
    assert [n.op for n in tape] == ["ipt::square"], f"one node for the user's op, got {[n.op for n in tape]}"
    assert trace == ["ipt::square"], f"the tracer should record only the outer op, got {trace}"
    assert y.requires_grad and y.grad_fn is tape[0], "the output should point at its node"
