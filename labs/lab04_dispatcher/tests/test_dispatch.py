"""Public tests of part `dispatch` (run them with check("dispatch"))."""
import pytest


def test_parse_and_bind(lab):
    s = lab.parse_schema("ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    assert s.name == "ipt::add" and s.returns == ["Tensor"], f"wrong name or returns: {s}"
    assert [(a.name, a.type, a.kwarg_only) for a in s.arguments] == [("self", "Tensor", False), ("other", "Tensor", False), ("alpha", "Scalar", True)]
    assert lab.bind(s, ["x", "y"], {}) == ["x", "y", 1], "the default of alpha should be filled in"
    with pytest.raises(TypeError):
        lab.bind(s, ["x", "y", 2], {})   # alpha is keyword-only


def test_priority_fallthrough_fallback(lab):
    K = lab.DispatchKey
    d, seen = lab.Dispatcher(), []
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, x: "cpu")
    d.impl("ipt::f", K.AutogradCPU, lab.FALLTHROUGH)

    def boxed(op, ks, stack):
        seen.append(op.name)
        stack[:] = [d.redispatch(op.name, ks.below(K.Python), *stack)]

    d.fallback(K.Python, boxed)
    x = lab.MiniTensor(0.0, [K.CPU, K.AutogradCPU, K.Python])
    assert d.call("ipt::f", x) == "cpu" and seen == ["ipt::f"], "Python's boxed fallback should run, then CPU"
    with pytest.raises(lab.MissingKernelError):
        d.call("ipt::f", lab.MiniTensor(0.0, [K.CPU, K.Functionalize]))
