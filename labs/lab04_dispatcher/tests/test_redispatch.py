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


def test_no_record_without_requires_grad_and_lists(lab):
    K = lab.DispatchKey
    d, tape, trace = lab.Dispatcher(), [], []
    d.fallback(K.Tracer, lab.make_tracing_fallback(d, trace))
    d.define("ipt::total(Tensor[] xs) -> Tensor")          # defined after the fallback: still traced
    d.impl("ipt::total", K.CPU, lambda ks, xs: lab.MiniTensor(sum(x.value for x in xs)))
    d.impl("ipt::total", K.AutogradCPU, lab.make_autograd_kernel(d, "ipt::total", tape))
    a = lab.MiniTensor(1.0, [K.CPU, K.AutogradCPU])
    b = lab.MiniTensor(2.0, [K.CPU, K.AutogradCPU, K.Tracer], requires_grad=True)
    assert d.call("ipt::total", [a]).grad_fn is None and tape == [], "no input requires grad: no node"
    y = d.call("ipt::total", [a, b])
    assert y.value == 3.0 and [n.inputs for n in tape] == [[a, b]], "tensors inside a Tensor[] argument are the node's inputs"
    assert trace == ["ipt::total"], f"the tracing fallback traces ops defined after it, got {trace}"
    assert lab.local_keysets() == (lab.DispatchKeySet(), lab.DispatchKeySet()), "the kernels must leave the TLS as they found it"
