# IPT-CANARY lab04 fuzz.py: hidden grading text, never shown to learners
"""Differential fuzzing of lab04's reference solution (P0, with torch).

- parse_schema against torch._C.parse_schema (names, defaults, keyword-only flags, number of returns);
- bind against Python's own inspect.Signature binding of the same schema (values or TypeError);
- the mini dispatcher (key sets, TLS guards, dispatch tables, autograd/tracing programs) against the
  independent reference model of PyTorch's algorithm in oracle.py, through the graders' own scenarios;
- scaled_softplus (values, gradients, 0-d / size-0 / float32 / negative beta) against F.softplus;
- LoggingMode against a TorchDispatchMode of P0's; NumpyTensor training against CPU training.

    run(examples) -> number of cases checked; raises AssertionError on the first disagreement.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from autograder.labs.lab04 import oracle, scenarios


@functools.lru_cache(maxsize=1)
def reference():
    """The reference solution as a module (its exported cells, as grading runs them)."""
    from autograder.engine.variants import reference_module
    return reference_module("lab04")


TYPES = ["Tensor", "Tensor[]", "int", "float", "bool", "Scalar", "str", "Tensor?", "ScalarType?", "int[]", "Scalar?"]
LITERALS = {"int": st.integers(-20, 20).map(str), "float": st.sampled_from(("0.5", "-1.5", "1e-3", "2.0", "-0.0")),
            "bool": st.sampled_from(("True", "False")), "Scalar": st.sampled_from(("1", "-2", "0.25")),
            "str": st.sampled_from(('"x"', '"hello world"', '""', "'single'")), "Tensor?": st.just("None"),
            "ScalarType?": st.just("None"), "Scalar?": st.sampled_from(("None", "3"))}


@st.composite
def schema_texts(draw):
    """Valid schemas: no required positional argument after a defaulted one."""
    names = draw(st.lists(st.sampled_from(("self", "other", "x", "y", "alpha", "dim", "out_dtype", "w", "p")), unique=True, max_size=6))
    star = draw(st.integers(0, len(names)))
    use_star = draw(st.booleans())
    pieces, seen_default = [], False
    for i, name in enumerate(names):
        kw = use_star and i >= star
        if use_star and i == star:
            pieces.append("*")
        typ = draw(st.sampled_from(TYPES))
        must = seen_default and not kw
        if must and typ not in LITERALS:
            typ = "int"
        has = typ in LITERALS and (must or draw(st.booleans()))
        seen_default |= has and not kw
        pieces.append(f"{typ} {name}" + (f"={draw(LITERALS[typ])}" if has else ""))
    rets = draw(st.lists(st.sampled_from(("Tensor", "int", "Tensor[]", "float")), max_size=3))
    ret = rets[0] if len(rets) == 1 and draw(st.booleans()) else "(" + ", ".join(rets) + ")"
    sep = draw(st.sampled_from((", ", ",", " , ")))
    return f"{draw(st.sampled_from(('ipt', 'my_ns')))}::{draw(st.sampled_from(('f', 'g2', 'op_x')))}({sep.join(pieces)}) -> {ret}"


def check_schema(text, args, kwargs):
    import torch

    ref = reference()
    mine, theirs = ref.parse_schema(text), torch._C.parse_schema(text)
    assert mine.name == theirs.name, (text, mine.name, theirs.name)
    assert len(mine.returns) == len(theirs.returns), (text, mine.returns)
    assert [a.name for a in mine.arguments] == [a.name for a in theirs.arguments], text
    for a, b in zip(mine.arguments, theirs.arguments, strict=True):
        assert a.kwarg_only == b.kwarg_only and a.has_default == b.has_default_value(), (text, a)
        if a.has_default:
            assert a.default == b.default_value and type(a.default) is type(b.default_value) or (
                a.type == "Scalar" and a.default == b.default_value), (text, a, b.default_value)
    params = [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY if a.kwarg_only else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                **({"default": a.default} if a.has_default else {})) for a in mine.arguments]
    sig = inspect.Signature(params)
    try:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        want = list(bound.arguments.values())
    except TypeError:
        want = TypeError
    try:
        got = ref.bind(mine, list(args), dict(kwargs))
    except TypeError:
        got = TypeError
    assert got == want, (text, args, kwargs, got, want)


def run(examples: int = 50) -> int:
    import torch

    from autograder.labs.lab04.test_dispatch import tables
    from autograder.labs.lab04.test_redispatch import programs

    ref = reference()
    count = 0
    budget = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])

    @budget
    @given(text=schema_texts(), args=st.lists(st.integers(0, 9), max_size=5),
           kwargs=st.dictionaries(st.sampled_from(("self", "x", "alpha", "dim", "w", "zz")), st.integers(), max_size=3))
    def schemas(text, args, kwargs):
        nonlocal count
        check_schema(text, args, kwargs)
        count += 1

    @budget
    @given(a=st.lists(st.integers(0, 12), max_size=6), b=st.lists(st.integers(0, 12), max_size=6), key=st.integers(0, 12),
           tensors=st.lists(st.lists(st.integers(0, 12), max_size=4), max_size=3),
           guards=st.lists(st.tuples(st.sampled_from(("include", "exclude")), st.lists(st.integers(0, 12), max_size=3)).map(list), max_size=4),
           raise_at=st.none() | st.integers(0, 4))
    def keysets(a, b, key, tensors, guards, raise_at):
        nonlocal count
        assert scenarios.keyset_algebra(ref, a, b, key) == oracle.reference("keyset_algebra", a, b, key), (a, b, key)
        assert (scenarios.tls_keyset(ref, tensors, guards, raise_at=raise_at)
                == oracle.reference("tls_keyset", tensors, guards, raise_at=raise_at)), (tensors, guards)
        count += 2

    @budget
    @given(t=tables(), prog=programs())
    def dispatch(t, prog):
        nonlocal count
        got, want = scenarios.dispatch_table(ref, t), oracle.reference("dispatch_table", t)
        for g, w in zip(got["calls"], want["calls"], strict=True):
            assert g.get("error") == w.get("error") and g["log"] == w["log"] and g.get("result") == w.get("result"), (t, g, w)
        got, want = scenarios.autograd_program(ref, *prog), oracle.reference("autograd_program", *prog)
        assert got == want, (prog, got, want)
        count += 2

    shapes = st.sampled_from(((), (0,), (0, 3), (1,), (1, 1), (5,), (2, 3), (2, 1, 3)))

    @settings(parent=budget, max_examples=max(5, examples // 5))
    @given(shape=shapes, dtype=st.sampled_from((np.float32, np.float64)), beta=st.sampled_from((0.25, 1.0, 2.5, -1.5, 10.0)),
           seed=st.integers(0, 10_000))
    def softplus(shape, dtype, beta, seed):
        nonlocal count
        rng = np.random.default_rng(seed)
        x = np.asarray(rng.standard_normal(shape) * 4).astype(dtype)
        xt = torch.from_numpy(x.copy()).requires_grad_()
        y = ref.scaled_softplus(xt, beta)
        (g,) = torch.autograd.grad(y.sum(), xt)
        want = torch.nn.functional.softplus(torch.from_numpy(x).double(), beta, threshold=1e6)
        assert y.dtype == xt.dtype and tuple(y.shape) == shape, (shape, dtype, y.dtype, y.shape)
        tol = 1e-5 if dtype == np.float32 else 1e-10
        assert np.allclose(y.detach().double().numpy(), want.numpy(), rtol=tol, atol=tol), (shape, dtype, beta)
        assert np.allclose(g.double().numpy(), torch.sigmoid(beta * torch.from_numpy(x).double()).numpy(), rtol=tol, atol=tol)
        count += 1

    schemas()
    keysets()
    dispatch()
    softplus()
    # the real-torch parts against P0's own runs of the same computations
    for name, seed in [("mlp", 0), ("conv", 1), ("norm", 2), ("tanh_inplace", 3), ("frozen_nested", 4)]:
        got, want = scenarios.log_step(ref, name, seed), oracle.log_step(name, seed)
        assert got["ops"] == want["ops"], name
        count += 1
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    got, want = scenarios.mode_direct(ref, a, b), oracle.mode_direct(a, b)
    assert got["ops"] == want["ops"] and all(np.array_equal(got[k], want[k]) for k in ("c", "i", "k", "z")), "mode_direct"
    for sizes, seed, lr, mom, steps in [([4, 8, 2], 0, 0.1, 0.0, 1), ([6, 4, 3], 2, 0.2, 0.9, 3), ([2, 1], 3, 0.5, 0.5, 2)]:
        x, y = rng.standard_normal((5, sizes[0])).astype(np.float32), rng.standard_normal((5, sizes[-1])).astype(np.float32)
        w = oracle.start_weights(sizes, seed)
        got, want = scenarios.device_sgd(ref, sizes, seed, x, y, lr, mom, steps, w), oracle.cpu_sgd(sizes, seed, x, y, lr, mom, steps, w)
        assert np.allclose(got["losses"], want["losses"], rtol=1e-5, atol=1e-6), sizes
        for n in want["params"]:
            assert np.allclose(got["params"][n], want["params"][n], rtol=1e-5, atol=1e-6), (sizes, n)
        count += 2
    return count
