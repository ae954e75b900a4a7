"""Public tests of part `dispatch` (run them with check("dispatch"))."""
import pytest


def test_parse_and_bind(lab):
    s = lab.parse_schema("ipt::add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    assert s.name == "ipt::add" and s.returns == ["Tensor"], f"wrong name or returns: {s}"
    assert [(a.name, a.type, a.kwarg_only) for a in s.arguments] == [("self", "Tensor", False), ("other", "Tensor", False), ("alpha", "Scalar", True)], f"arguments should be (name, type, kwarg_only) in order, got {[(a.name, a.type, a.kwarg_only) for a in s.arguments]}"
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


def test_parse_returns_defaults_and_bind_errors(lab):
    s = lab.parse_schema('ipt::f(Tensor self, str msg="hi", float p=-1.5, *, bool flag=True, int n) -> ()')
    assert s.returns == [], f"'-> ()' means no returns, got {s.returns}"
    assert [(a.default, a.has_default, a.kwarg_only) for a in s.arguments] == [
        (None, False, False), ("hi", True, False), (-1.5, True, False), (True, True, True), (None, False, True)], \
        "defaults are Python values; arguments after '*' are keyword-only"
    assert lab.parse_schema("ipt::g(Tensor self) -> (Tensor, Tensor)").returns == ["Tensor", "Tensor"], "'-> (Tensor, Tensor)' has two returns"
    assert lab.bind(s, ["x"], {"n": 2}) == ["x", "hi", -1.5, True, 2], "defaults are filled in, keywords placed in schema order"
    assert lab.bind(s, [], {"self": "x", "n": 1, "msg": "m"}) == ["x", "m", -1.5, True, 1], "positional arguments may be given by name"
    for args, kwargs, why in [(["x"], {}, "a missing argument without default"), (["x", "m", 1.0, True], {"n": 1}, "too many positional"),
                              (["x"], {"n": 1, "zzz": 2}, "an unknown keyword"), (["x"], {"self": "y", "n": 1}, "a repeated argument")]:
        with pytest.raises(TypeError):
            lab.bind(s, args, kwargs)
            pytest.fail(f"bind(args={args}, kwargs={kwargs}) should raise TypeError: {why}")


def test_registry_and_overrides(lab):
    K = lab.DispatchKey
    d = lab.Dispatcher()
    op = d.define("ipt::f(Tensor self) -> Tensor")
    assert op.name == "ipt::f" and op.schema.name == "ipt::f", "define() returns the OperatorHandle"
    with pytest.raises(RuntimeError):
        d.define("ipt::f(Tensor self) -> Tensor")
    with pytest.raises(KeyError):
        d.impl("ipt::missing", K.CPU, lambda ks, x: x)
    d.impl("ipt::f", K.CPU, lambda ks, x: "first")
    d.impl("ipt::f", K.CPU, lambda ks, x: "second")
    assert d.call("ipt::f", lab.MiniTensor(0.0, [K.CPU])) == "second", "a later impl() for the same key replaces the earlier kernel"
    with pytest.raises(lab.MissingKernelError, match="ipt::f.*Meta"):
        d.call("ipt::f", lab.MiniTensor(0.0, [K.Meta]))


def test_boxed_multi_return_and_redispatch_ignores_tls(lab):
    K = lab.DispatchKey
    d, seen = lab.Dispatcher(), []
    d.define("ipt::two(Tensor self, *, int n=2) -> (Tensor, Tensor)")
    d.impl("ipt::two", K.CPU, lambda ks, x, n: (ks.bits, n))

    def boxed(op, ks, stack):
        seen.append(list(stack[1:]))
        with lab.ExcludeKeys(K.CPU):   # redispatch uses the keyset it is given: the TLS does not apply
            stack[:] = list(d.redispatch(op.name, ks.below(K.Python), *stack))

    d.fallback(K.Python, boxed)
    out = d.call("ipt::two", lab.MiniTensor(0.0, [K.CPU, K.Python]), n=5)
    assert out == (2, 5) and type(out) is tuple, f"two returns come back as a tuple (2, 5), got {out!r}"
    assert seen == [[5]], "the boxed fallback gets the bound arguments as the stack"
