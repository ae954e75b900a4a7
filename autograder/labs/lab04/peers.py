# IPT-CANARY lab04 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab04 (the dispatcher), run against the reference solution in P0.

The cases are our own, written through the lab's functions. They are *modelled on* public test suites
and sources written by others (no code or prose of them is copied; each group names what gave the
idea), and where possible the oracle of a case is torch 2.13 itself:

* keysets -- c10/core/DispatchKeySet.h (one bit per key, `highestPriorityTypeId`, `add`/`remove`/`has`,
  `DispatchKeySet(FULL_AFTER, k)` as the mask "strictly below k", iteration from the highest key down)
  and c10/core/impl/LocalDispatchKeySet.h (`IncludeDispatchKeyGuard` / `ExcludeDispatchKeyGuard`: the
  computed set is `(tensor keys | included) - excluded`, guards nest, are undone on an exception and
  are per thread). The relative priority of the lab's functionality keys and the FULL_AFTER mask are
  checked against the real `torch._C.DispatchKeySet` / `torch._C._dispatch_keyset_full_after`, and the
  nesting of real guards against `torch._C._IncludeDispatchKeyGuard` / `_ExcludeDispatchKeyGuard`.
* dispatch -- test/test_dispatch.py (`test_def`, `test_multiple_def_error`, `test_overwrite_math`,
  `test_computed_table`, the exhaustive registration-order tables), aten/src/ATen/core/dispatch/
  OperatorEntry.cpp (an op's own kernel, then the backend fallback, fallthroughs skipped, a missing
  kernel is an error "Could not run ... with arguments from the ... backend", a later kernel for the
  same key overrides with a warning), op_registration_test.cpp (boxed fallbacks, stack in / returns
  out), and the schema language of native_functions.yaml / `torch._C.parse_schema` (real aten schemas
  are parsed by the lab and compared field by field with torch's parser).
* redispatch -- torch/csrc/autograd/generated/VariableType*.cpp (`AutoDispatchBelowADInplaceOrView`,
  `redispatch(ks & after_autograd_keyset)`, `set_history` once per user-visible op, not without
  requires_grad, multi-output ops), the TorchScript tracer's boxed fallback (tracer_state, "trace only
  the outermost op"), test/test_python_dispatch.py's redispatch tests.
* custom_op -- test/test_custom_ops.py (`TestCustomOpAPI`: `test_basic` (a numpy kernel),
  `test_no_grad_skips_autograd`, `test_library_register_fake` (FakeTensorMode shapes),
  `test_register_autograd_*`, schema inference; the opcheck tests), the torch.library / opcheck
  documentation ("The Custom Operators Manual": opcheck, torch.compile(fullgraph=True), gradcheck),
  test/test_fake_tensor.py (fake outputs carry the real output's metadata, Meta kernels), and the
  torch.export tests (a custom op stays one opaque node). The oracle is `torch.logaddexp(0, beta * x) /
  beta` and autograd through it, and `F.softplus(x, beta, threshold=...)` for beta > 0.
* logging_mode -- test/test_python_dispatch.py (the `LoggingTensorMode` / `capture_logs` tests,
  `test_nested_enable_torch_dispatch_mode` (stacked modes), factory functions seen by a mode, results
  returned unchanged, in-place ops returning their input); the oracle is a plain `TorchDispatchMode`
  written here, run on an identical copy of the module.
* python_device -- test/test_python_dispatch.py's wrapper-subclass tests (`test_make_wrapper_subclass_noalloc`
  and the other `_make_wrapper_subclass` tests, in-place ops returning `self`, views aliasing,
  multi-output ops) and torch/testing/_internal/logging_tensor.py, plus the "a new device trains like
  the CPU" idea of test/test_cpp_extensions_open_device_registration.py; the oracle is the same
  training on plain CPU tensors (SGD, SGD with momentum, Adam, frozen layers, accumulation).

Where the lab deliberately simplifies PyTorch, the case follows the statement and says so: the TLS
starts empty (torch's default included set has BackendSelect and ADInplaceOrView); a second `fallback`
for a key replaces the first (torch raises "Tried to register multiple backend fallbacks"); the lab's
backends CPU < Meta < PrivateUse1 are plain keys (in c10 they are backend bits), so they are left out of
the comparisons with the real key order.

    run()   # -> number of cases; raises AssertionError listing every disagreement
"""
from __future__ import annotations

import copy
import random
import threading

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.engine.peer_suite import Suite

SUITE = Suite("lab04")
case, CASES, reference = SUITE.case, SUITE.cases, SUITE.reference  # check(ref) raises on a disagreement


# -- helpers ----------------------------------------------------------------------------------------
def _eq(got, want, what):
    assert got == want, f"{what}: got {got!r}, want {want!r}"


def _raises(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        return e
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{getattr(fn, '__name__', fn)} should raise {exc.__name__}, raised {type(e).__name__}: {e}")
    raise AssertionError(f"{getattr(fn, '__name__', fn)}{args} should raise {exc.__name__}")


def _keys(ref):
    """Every real key of the lab, Undefined left out, lowest priority first."""
    return [k for k in ref.DispatchKey if k != ref.DispatchKey.Undefined]


def _clean_tls(ref, where):
    empty = ref.DispatchKeySet()
    _eq(ref.local_keysets(), (empty, empty), f"TLS {where}")


def _names(ks):
    return [k.name for k in ks]


class _Recorder(TorchDispatchMode):
    """The oracle of the logging cases: a plain mode that notes str(func) and runs the op."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


# ===================================================================================================
# keysets
# ===================================================================================================
@case("keysets", "each key has exactly the bit int(key); Undefined has none")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    for k in _keys(ref):
        ks = KS([k])
        _eq(ks.bits, 1 << int(k), f"DispatchKeySet([{k.name}]).bits")
        _eq((len(ks), ks.highest(), list(ks), bool(ks)), (1, k, [k], True), f"single-key set {k.name}")
    u = KS([K.Undefined])
    _eq((u.bits, len(u), bool(u), list(u), u.highest()), (0, 0, False, [], K.Undefined), "DispatchKeySet([Undefined])")


@case("keysets", "the full set: 12 keys, highest PythonDispatcher, iteration strictly descending")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    full = KS(_keys(ref))
    _eq(full.bits, sum(1 << i for i in range(1, 13)), "bits of the full set")
    _eq(len(full), 12, "len of the full set")
    _eq(full.highest(), K.PythonDispatcher, "highest of the full set")
    _eq(list(full), sorted(_keys(ref), key=int, reverse=True), "iteration order of the full set")
    assert all(isinstance(k, K) for k in full), "iteration must yield DispatchKey members"
    _eq(list(full.below(K.PythonDispatcher)), sorted(_keys(ref), key=int, reverse=True)[1:],
        "full.below(PythonDispatcher)")


@case("keysets", "the empty set: no bits, falsy, highest Undefined, below() of it empty")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    e = KS()
    _eq((e.bits, len(e), bool(e), list(e), e.highest()), (0, 0, False, [], K.Undefined), "DispatchKeySet()")
    for k in _keys(ref):
        _eq(e.below(k), KS(), f"empty.below({k.name})")
        assert not e.has(k), f"the empty set has no {k.name}"
    _eq(KS.from_bits(0), e, "from_bits(0)")


@case("keysets", "duplicates and any iterable in the constructor")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    want = (1 << 1) | (1 << 8)
    for keys in ([K.CPU, K.CPU, K.AutogradCPU], (K.AutogradCPU, K.CPU), {K.CPU, K.AutogradCPU},
                 (k for k in [K.CPU, K.AutogradCPU, K.CPU]), [K.Undefined, K.AutogradCPU, K.Undefined, K.CPU]):
        ks = KS(keys)
        _eq((ks.bits, len(ks)), (want, 2), f"DispatchKeySet({keys!r})")


@case("keysets", "iteration and highest() on seeded random subsets follow int(key)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    rng = random.Random(4)
    keys = _keys(ref)
    for _ in range(200):
        sub = rng.sample(keys, rng.randint(0, len(keys)))
        ks = KS(sub)
        _eq(list(ks), sorted(set(sub), key=int, reverse=True), f"iteration of {sorted(_names(sub))}")
        _eq(ks.highest(), max(sub, key=int) if sub else K.Undefined, f"highest of {sorted(_names(sub))}")
        _eq(len(ks), len(set(sub)), f"len of {sorted(_names(sub))}")
        for k in keys:
            _eq(ks.has(k), k in sub, f"{sorted(_names(sub))}.has({k.name})")


@case("keysets", "|, &, - agree with Python sets on seeded random pairs; == and hash follow the keys")
def _(ref):
    KS = ref.DispatchKeySet
    rng = random.Random(11)
    keys = _keys(ref)
    for _ in range(150):
        a = set(rng.sample(keys, rng.randint(0, 12)))
        b = set(rng.sample(keys, rng.randint(0, 12)))
        A, B = KS(a), KS(b)
        _eq(A | B, KS(a | b), f"{sorted(_names(a))} | {sorted(_names(b))}")
        _eq(A & B, KS(a & b), f"{sorted(_names(a))} & {sorted(_names(b))}")
        _eq(A - B, KS(a - b), f"{sorted(_names(a))} - {sorted(_names(b))}")
        _eq((A == B), a == b, f"== of {sorted(_names(a))} and {sorted(_names(b))}")
        _eq((A != B), a != b, f"!= of {sorted(_names(a))} and {sorted(_names(b))}")
        _eq(set(A | B), a | b, "iteration of a union")
        assert hash(KS(list(a))) == hash(A), "equal sets must hash equally"


@case("keysets", "operators return new sets and leave both operands unchanged")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    a, b = KS([K.CPU, K.Python]), KS([K.Python, K.Tracer])
    for op, r in (("|", a | b), ("&", a & b), ("-", a - b), ("add", a.add(K.Meta)), ("remove", a.remove(K.CPU)),
                  ("below", a.below(K.Python))):
        assert r is not a and r is not b, f"{op} must return a new set"
        assert isinstance(r, KS), f"{op} must return a DispatchKeySet, got {type(r).__name__}"
    _eq((a.bits, b.bits), ((1 << 1) | (1 << 5), (1 << 5) | (1 << 9)), "operands after the operations")


@case("keysets", "add/remove are idempotent; Undefined is a no-op for both (c10: DispatchKeySet(Undefined) is empty)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    a = KS([K.CPU, K.AutogradCPU])
    _eq(a.add(K.CPU), a, "add of a present key")
    _eq(a.add(K.CPU).add(K.CPU).bits, a.bits, "add twice")
    _eq(a.remove(K.Python), a, "remove of an absent key")
    _eq(a.remove(K.CPU).remove(K.CPU), KS([K.AutogradCPU]), "remove twice")
    _eq(a.add(K.Undefined), a, "add(Undefined)")
    _eq(a.remove(K.Undefined), a, "remove(Undefined)")
    _eq(KS().add(K.Python).remove(K.Python), KS(), "add then remove")
    # the real c10 set agrees that adding Undefined changes nothing
    C = torch._C
    assert C.DispatchKeySet(C.DispatchKey.CPU).add(C.DispatchKey.Undefined).raw_repr() == \
        C.DispatchKeySet(C.DispatchKey.CPU).raw_repr(), "torch: add(Undefined) is a no-op"


@case("keysets", "highest() of a pair matches c10's highestPriorityTypeId for the lab's functionality keys")
def _(ref):
    C = torch._C
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    # Tracer and Batched have no Python binding; Meta/PrivateUse1 are backend bits in c10 (the lab flattens them)
    names = ["CPU", "BackendSelect", "Python", "Functionalize", "ADInplaceOrView", "AutogradCPU", "AutocastCPU",
             "PythonDispatcher"]
    for a in names:
        for b in names:
            if a == b:
                continue
            real = (C.DispatchKeySet(getattr(C.DispatchKey, a)) | C.DispatchKeySet(getattr(C.DispatchKey, b)))
            want = str(real.highestPriorityTypeId()).split(".")[-1]
            _eq(KS([K[a], K[b]]).highest().name, want, f"highest of {{{a}, {b}}}")


@case("keysets", "below(k) keeps what c10's DispatchKeySet(FULL_AFTER, k) keeps")
def _(ref):
    C = torch._C
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    # PythonDispatcher is left out: the real FULL_AFTER mask keeps it (it is outside the functionality order)
    names = ["CPU", "BackendSelect", "Python", "Functionalize", "ADInplaceOrView", "AutogradCPU", "AutocastCPU"]
    everything = KS([K[n] for n in names])
    for k in names:
        mask = C._dispatch_keyset_full_after(getattr(C.DispatchKey, k))
        want = sorted(n for n in names if mask.has(getattr(C.DispatchKey, n)))
        _eq(sorted(_names(everything.below(K[k]))), want, f"below({k})")


@case("keysets", "below(k) is strict, works for a key not in the set, and never looks up")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    rng = random.Random(7)
    keys = _keys(ref)
    for _ in range(120):
        sub = set(rng.sample(keys, rng.randint(0, 12)))
        k = rng.choice(keys + [K.Undefined])
        got = KS(sub).below(k)
        _eq(set(got), {x for x in sub if int(x) < int(k)}, f"{sorted(_names(sub))}.below({k.name})")
    _eq(KS([K.CPU, K.Meta]).below(K.CPU), KS(), "below(CPU) is empty")
    _eq(KS([K.CPU, K.Tracer]).below(K.AutogradCPU), KS([K.CPU]), "below(AutogradCPU) without AutogradCPU in the set")


@case("keysets", "from_bits round-trips, gives an int `bits`, and equal sets hash equally (dict/set keys)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    rng = random.Random(3)
    for _ in range(60):
        sub = rng.sample(_keys(ref), rng.randint(0, 12))
        ks = KS(sub)
        back = KS.from_bits(ks.bits)
        assert isinstance(back, KS) and type(back.bits) is int, "from_bits gives a DispatchKeySet with int bits"
        _eq((back, hash(back), list(back)), (ks, hash(ks), list(ks)), f"from_bits({ks.bits})")
    s = {KS([K.CPU]), KS([K.CPU]), KS.from_bits(2), KS([K.Python])}
    _eq(len(s), 2, "a set of DispatchKeySets dedups equal ones")
    d = {KS([K.CPU, K.Python]): "x"}
    _eq(d.get(KS([K.Python, K.CPU])), "x", "a DispatchKeySet as a dict key")


@case("keysets", "equality is only with DispatchKeySets (not ints, frozensets, lists, None)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    a = KS([K.CPU])
    for other in (2, frozenset([K.CPU]), [K.CPU], None, K.CPU, "DispatchKeySet(CPU)"):
        assert (a == other) is False, f"DispatchKeySet([CPU]) == {other!r} should be False"
        assert (a != other) is True, f"DispatchKeySet([CPU]) != {other!r} should be True"
    assert a == KS([K.CPU]) and not (a != KS([K.CPU])), "equal sets"


@case("keysets", "local_keysets() is empty at first, in this thread and in a fresh one")
def _(ref):
    _clean_tls(ref, "at the start of a case")
    seen = []
    t = threading.Thread(target=lambda: seen.append(ref.local_keysets()))
    t.start()
    t.join()
    _eq(seen, [(ref.DispatchKeySet(), ref.DispatchKeySet())], "local_keysets() of a new thread")


@case("keysets", "IncludeKeys/ExcludeKeys take several keys; the sets are visible in local_keysets()")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    with ref.IncludeKeys(K.Tracer, K.Python, K.Functionalize):
        _eq(ref.local_keysets(), (KS([K.Tracer, K.Python, K.Functionalize]), KS()), "inside IncludeKeys(3 keys)")
        with ref.ExcludeKeys(K.AutogradCPU, K.ADInplaceOrView):
            _eq(ref.local_keysets(), (KS([K.Tracer, K.Python, K.Functionalize]), KS([K.AutogradCPU, K.ADInplaceOrView])),
                "inside ExcludeKeys(2 keys)")
        _eq(ref.local_keysets()[1], KS(), "excluded after the inner guard")
    _clean_tls(ref, "after both guards")


@case("keysets", "a guard acts on entry, not on construction, and can be entered again later")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    inc, exc = ref.IncludeKeys(K.Tracer), ref.ExcludeKeys(K.CPU)
    _clean_tls(ref, "after constructing two guards")
    for _ in range(2):
        with inc, exc:
            _eq(ref.local_keysets(), (KS([K.Tracer]), KS([K.CPU])), "inside the guards")
        _clean_tls(ref, "after leaving the guards")


@case("keysets", "excluded wins over included for the same key; included keys need no tensor")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    t = ref.MiniTensor(0.0, [K.CPU])
    with ref.IncludeKeys(K.Python):
        _eq(ref.compute_keyset([]), KS([K.Python]), "compute_keyset([]) under IncludeKeys(Python)")
        _eq(ref.compute_keyset([1, "a", None]), KS([K.Python]), "only non-tensor args under IncludeKeys(Python)")
        with ref.ExcludeKeys(K.Python):
            _eq(ref.compute_keyset([t]), KS([K.CPU]), "Python both included and excluded")
            with ref.IncludeKeys(K.Python):
                _eq(ref.compute_keyset([t]), KS([K.CPU]), "excluded still wins after a second include")
    _eq(ref.compute_keyset([]), KS(), "compute_keyset([]) with an empty TLS")
    _clean_tls(ref, "after the guards")


@case("keysets", "three-level nesting of include/exclude restores each level on the way out")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    t = ref.MiniTensor(0.0, [K.CPU, K.AutogradCPU, K.ADInplaceOrView])
    levels = []
    with ref.ExcludeKeys(K.AutogradCPU):
        levels.append(ref.compute_keyset([t]))
        with ref.IncludeKeys(K.Tracer):
            levels.append(ref.compute_keyset([t]))
            with ref.ExcludeKeys(K.ADInplaceOrView, K.AutogradCPU):
                levels.append(ref.compute_keyset([t]))
            levels.append(ref.compute_keyset([t]))
        levels.append(ref.compute_keyset([t]))
    levels.append(ref.compute_keyset([t]))
    want = [KS([K.CPU, K.ADInplaceOrView]), KS([K.CPU, K.ADInplaceOrView, K.Tracer]), KS([K.CPU, K.Tracer]),
            KS([K.CPU, K.ADInplaceOrView, K.Tracer]), KS([K.CPU, K.ADInplaceOrView]), KS([K.CPU, K.ADInplaceOrView, K.AutogradCPU])]
    _eq([_names(x) for x in levels], [_names(x) for x in want], "keysets at each nesting level")


@case("keysets", "an inner guard on an already-included/excluded key leaves it so after exit (like c10's guards)")
def _(ref):
    C = torch._C
    K = ref.DispatchKey
    # the real guards: an inner include/exclude of a key the outer guard set does not remove it on exit
    with C._IncludeDispatchKeyGuard(C.DispatchKey.Python):
        with C._IncludeDispatchKeyGuard(C.DispatchKey.Python):
            pass
        real_inc = C._dispatch_tls_is_dispatch_key_included(C.DispatchKey.Python)
    with C._ExcludeDispatchKeyGuard(C.DispatchKeySet(C.DispatchKey.Python)):
        with C._ExcludeDispatchKeyGuard(C.DispatchKeySet(C.DispatchKey.Python)):
            pass
        real_exc = C._dispatch_tls_is_dispatch_key_excluded(C.DispatchKey.Python)
    assert real_inc and real_exc, "torch 2.13: the outer guard's key survives the inner guard's exit"
    with ref.IncludeKeys(K.Python):
        with ref.IncludeKeys(K.Python):
            pass
        lab_inc = ref.local_keysets()[0].has(K.Python)
    with ref.ExcludeKeys(K.Python):
        with ref.ExcludeKeys(K.Python, K.Meta):
            pass
        lab_exc = ref.local_keysets()[1]
    _eq((lab_inc, _names(lab_exc)), (True, ["Python"]), "the lab's guards after an inner guard on the same key")
    _clean_tls(ref, "after the guards")


@case("keysets", "an exception crossing two nested guards restores the TLS at both levels")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    with ref.IncludeKeys(K.Meta):
        try:
            with ref.ExcludeKeys(K.CPU), ref.IncludeKeys(K.Tracer, K.Python):
                raise KeyError("boom")
        except KeyError:
            pass
        _eq(ref.local_keysets(), (KS([K.Meta]), KS()), "TLS after the exception, inside the outer guard")
    _clean_tls(ref, "after the outer guard")
    for guard in (ref.IncludeKeys, ref.ExcludeKeys):
        try:
            with guard(K.AutocastCPU):
                raise RuntimeError("x")
        except RuntimeError:
            pass
        _clean_tls(ref, f"after an exception in {guard.__name__}")


@case("keysets", "guards do not swallow exceptions")
def _(ref):
    K = ref.DispatchKey
    for guard in (ref.IncludeKeys, ref.ExcludeKeys):
        def boom():
            with guard(K.Tracer):
                raise ValueError("must propagate")
        _raises(ValueError, boom)
    _clean_tls(ref, "after the exceptions")


@case("keysets", "thread-locality both ways: a worker's guard is invisible here and ours invisible there")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    entered, checked, seen = threading.Event(), threading.Event(), {}

    def worker():
        seen["start"] = ref.local_keysets()
        with ref.IncludeKeys(K.Tracer), ref.ExcludeKeys(K.CPU):
            seen["inside"] = ref.local_keysets()
            entered.set()
            checked.wait(10)
        seen["end"] = ref.local_keysets()

    with ref.IncludeKeys(K.Python):
        th = threading.Thread(target=worker)
        th.start()
        entered.wait(10)
        here = ref.local_keysets()
        checked.set()
        th.join()
    _eq(here, (KS([K.Python]), KS()), "this thread's TLS while the worker is inside its guards")
    _eq(seen["start"], (KS(), KS()), "the worker's TLS at start while this thread holds IncludeKeys(Python)")
    _eq(seen["inside"], (KS([K.Tracer]), KS([K.CPU])), "the worker's TLS inside its guards")
    _eq(seen["end"], (KS(), KS()), "the worker's TLS after its guards")
    _clean_tls(ref, "after the threads")


@case("keysets", "compute_keyset: lists/tuples of tensors count, other values (dicts, numbers, None) do not")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    a = ref.MiniTensor(0.0, [K.CPU])
    b = ref.MiniTensor(0.0, [K.Meta, K.Python])
    c = ref.MiniTensor(0.0, [K.Tracer])
    _eq(ref.compute_keyset([a, (b,), [c]]), KS([K.CPU, K.Meta, K.Python, K.Tracer]), "tensor, tuple, list")
    _eq(ref.compute_keyset([{"t": b}, 3, 2.5, None, "CPU", K.Python]), KS(), "a dict, numbers, None, a str, a key")
    _eq(ref.compute_keyset([[], ()]), KS(), "empty list and tuple")
    _eq(ref.compute_keyset([[a, 1, None, b]]), KS([K.CPU, K.Meta, K.Python]), "a list mixing tensors and other values")
    _eq(ref.compute_keyset(()), KS(), "no arguments at all")


@case("keysets", "compute_keyset matches (union | included) - excluded on seeded random calls")
def _(ref):
    KS = ref.DispatchKeySet
    rng = random.Random(21)
    keys = _keys(ref)
    for _ in range(60):
        ts = [ref.MiniTensor(0.0, rng.sample(keys, rng.randint(0, 4))) for _ in range(rng.randint(0, 4))]
        inc, exc = rng.sample(keys, rng.randint(0, 3)), rng.sample(keys, rng.randint(0, 3))
        union = set()
        for t in ts:
            union |= set(t.key_set)
        before = [t.key_set.bits for t in ts]
        with ref.IncludeKeys(*inc), ref.ExcludeKeys(*exc):
            got = ref.compute_keyset(ts)
        _eq(set(got), (union | set(inc)) - set(exc), f"keyset of {len(ts)} tensors, include {_names(inc)}, exclude {_names(exc)}")
        _eq([t.key_set.bits for t in ts], before, "compute_keyset must not change the tensors' key sets")
    _clean_tls(ref, "after the random calls")


# ===================================================================================================
# dispatch: schemas and bind
# ===================================================================================================
def _args(schema):
    return [(a.name, a.type, a.default, a.has_default, a.kwarg_only) for a in schema.arguments]


@case("dispatch", "overload names are part of the name; no arguments; '->' without spaces")
def _(ref):
    s = ref.parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    _eq(s.name, "aten::add.Tensor", "name with an overload")
    s = ref.parse_schema("ipt::zeros() -> Tensor")
    _eq((s.name, s.arguments, s.returns), ("ipt::zeros", [], ["Tensor"]), "a schema without arguments")
    s = ref.parse_schema("ipt::f(Tensor self)->Tensor")   # torch._C.parse_schema accepts this too
    _eq((s.name, _args(s), s.returns), ("ipt::f", [("self", "Tensor", None, False, False)], ["Tensor"]), "'->' without spaces")


@case("dispatch", "types are kept as written: Tensor?, Tensor[], int[], int[1]?, ScalarType?, Tensor(a!)")
def _(ref):
    s = ref.parse_schema("ipt::f(Tensor(a!) self, Tensor? w, Tensor[] xs, int[] dims, int[1]? dim, ScalarType? dtype=None) -> Tensor(a!)")
    _eq([(a.name, a.type) for a in s.arguments],
        [("self", "Tensor(a!)"), ("w", "Tensor?"), ("xs", "Tensor[]"), ("dims", "int[]"), ("dim", "int[1]?"), ("dtype", "ScalarType?")],
        "argument (name, type) pairs")
    _eq(s.returns, ["Tensor(a!)"], "an aliased return type")


@case("dispatch", "defaults are Python literals of the right type; None default is a default")
def _(ref):
    s = ref.parse_schema('ipt::f(Tensor? w=None, int n=-1, float eps=1e-05, bool b=False, str m="mean", str e="", '
                         'int[] dims=[], Scalar alpha=1, float half=0.5) -> Tensor')
    got = [(a.name, a.default, type(a.default).__name__, a.has_default) for a in s.arguments]
    want = [("w", None, "NoneType", True), ("n", -1, "int", True), ("eps", 1e-05, "float", True), ("b", False, "bool", True),
            ("m", "mean", "str", True), ("e", "", "str", True), ("dims", [], "list", True), ("alpha", 1, "int", True),
            ("half", 0.5, "float", True)]
    _eq(got, want, "(name, default, type of default, has_default)")


@case("dispatch", "keyword-only: everything after '*', with or without defaults; '*' first")
def _(ref):
    s = ref.parse_schema("ipt::g(*, int n, Tensor? out=None) -> ()")
    _eq(_args(s), [("n", "int", None, False, True), ("out", "Tensor?", None, True, True)], "'*' first")
    _eq(s.returns, [], "'-> ()'")
    s = ref.parse_schema("aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor")
    _eq([(a.name, a.kwarg_only, a.has_default) for a in s.arguments],
        [("self", False, False), ("other", False, False), ("rounding_mode", True, False)], "div.Tensor_mode")


@case("dispatch", "returns: one, (), one in parentheses, two, three, a list")
def _(ref):
    for ret, want in (("Tensor", ["Tensor"]), ("()", []), ("(Tensor)", ["Tensor"]), ("(Tensor, Tensor)", ["Tensor", "Tensor"]),
                      ("(Tensor, Tensor, Tensor)", ["Tensor"] * 3), ("Tensor[]", ["Tensor[]"]), ("int", ["int"]),
                      ("(Tensor, int)", ["Tensor", "int"])):
        _eq(ref.parse_schema(f"ipt::r(Tensor self) -> {ret}").returns, want, f"returns of '-> {ret}'")


@case("dispatch", "real aten schemas: the lab's parse agrees with torch._C.parse_schema field by field")
def _(ref):
    ops = [torch.ops.aten.addmm.default, torch.ops.aten.sum.dim_IntList, torch.ops.aten.div.Tensor_mode,
           torch.ops.aten.leaky_relu.default, torch.ops.aten.add.Tensor, torch.ops.aten.add_.Tensor, torch.ops.aten.add.out,
           torch.ops.aten.softplus.default, torch.ops.aten.clamp.default, torch.ops.aten.linear.default,
           torch.ops.aten.gelu.default, torch.ops.aten.cumsum.default, torch.ops.aten.transpose.int,
           torch.ops.aten.threshold_backward.default, torch.ops.aten.native_layer_norm.default, torch.ops.aten.t.default,
           torch.ops.aten.dropout.default, torch.ops.aten.mean.dim, torch.ops.aten.zeros_like.default,
           torch.ops.aten.arange.start, torch.ops.aten.var.correction, torch.ops.aten.nll_loss_forward.default]
    checked = 0
    for op in ops:
        real = op._schema
        text = str(real)
        if any(r.name for r in real.returns):
            continue  # named returns: see the report (the lab's statement does not cover them)
        s = ref.parse_schema(text)
        name = real.name + (f".{real.overload_name}" if real.overload_name else "")
        _eq(s.name, name, f"name of {text}")
        _eq([a.name for a in s.arguments], [a.name for a in real.arguments], f"argument names of {name}")
        _eq([a.kwarg_only for a in s.arguments], [a.kwarg_only for a in real.arguments], f"kwarg_only of {name}")
        _eq([a.has_default for a in s.arguments], [a.has_default_value() for a in real.arguments], f"has_default of {name}")
        for mine, theirs in zip(s.arguments, real.arguments, strict=True):
            if theirs.has_default_value() and "[" not in mine.type and isinstance(theirs.default_value, (bool, int, float, str, type(None))):
                _eq(mine.default, theirs.default_value, f"default of {name}.{theirs.name}")
        _eq(len(s.returns), len(real.returns), f"number of returns of {name}")
        checked += 1
    assert checked >= 20, f"only {checked} schemas were compared"


@case("dispatch", "bind: positional, by name, mixed, any keyword order; result in schema order")
def _(ref):
    s = ref.parse_schema("ipt::f(Tensor self, Tensor other, int n=3, *, Scalar alpha=1, bool flag) -> Tensor")
    want = ["x", "y", 3, 1, True]
    for args, kwargs in ((["x", "y"], {"flag": True}), ([], {"flag": True, "other": "y", "self": "x"}),
                         (["x"], {"other": "y", "flag": True}), (("x", "y", 3), {"flag": True, "alpha": 1})):
        _eq(ref.bind(s, args, kwargs), want, f"bind(args={args}, kwargs={kwargs})")
    _eq(ref.bind(s, ["x", "y", 7], {"alpha": 2.5, "flag": False}), ["x", "y", 7, 2.5, False], "every argument given")


@case("dispatch", "bind: an explicit None or falsy value is kept, not replaced by the default")
def _(ref):
    s = ref.parse_schema("ipt::f(Tensor self, int? n=3, *, float eps=0.5, bool flag=True) -> Tensor")
    _eq(ref.bind(s, ["x", None], {"eps": 0.0, "flag": False}), ["x", None, 0.0, False], "explicit None / 0.0 / False")
    _eq(ref.bind(s, ["x"], {"n": 0}), ["x", 0, 0.5, True], "n=0 by keyword")


@case("dispatch", "bind: every TypeError of the statement, on several schemas")
def _(ref):
    s = ref.parse_schema("ipt::f(Tensor self, Tensor other, int n=3, *, Scalar alpha=1, bool flag) -> Tensor")
    z = ref.parse_schema("ipt::z() -> Tensor")
    k = ref.parse_schema("ipt::k(*, int n=1) -> ()")
    bad = [(s, ["x", "y", 3, 1], {"flag": True}, "a keyword-only argument passed positionally"),
           (s, ["x", "y", 3, 1, True], {}, "too many positional"),
           (s, ["x", "y"], {}, "a missing keyword-only argument without default"),
           (s, ["x"], {"flag": True}, "a missing positional argument"),
           (s, [], {"other": "y", "flag": True}, "self missing though other is given"),
           (s, ["x", "y"], {"flag": True, "beta": 2}, "an unknown keyword"),
           (s, ["x", "y"], {"flag": True, "other": "z"}, "other given twice"),
           (s, ["x", "y", 4], {"flag": True, "n": 5}, "n given twice"),
           (z, [1], {}, "a positional argument to a schema without arguments"),
           (z, [], {"x": 1}, "a keyword to a schema without arguments"),
           (k, [2], {}, "a positional argument to a keyword-only schema")]
    for schema, args, kwargs, why in bad:
        try:
            ref.bind(schema, args, kwargs)
        except TypeError:
            continue
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"bind({schema.name}, {args}, {kwargs}) raised {type(e).__name__}, want TypeError: {why}")
        raise AssertionError(f"bind({schema.name}, {args}, {kwargs}) should raise TypeError: {why}")
    _eq(ref.bind(z, [], {}), [], "bind of a schema without arguments")
    _eq(ref.bind(k, [], {}), [1], "bind of a keyword-only schema with its default")


@case("dispatch", "bind does not change its inputs; a list default is filled in as the value")
def _(ref):
    s = ref.parse_schema("ipt::f(Tensor self, int[] dims=[], *, str m=\"sum\") -> Tensor")
    args, kwargs = ["x"], {"m": "mean"}
    out = ref.bind(s, args, kwargs)
    _eq(out, ["x", [], "mean"], "bind result")
    _eq((args, kwargs), (["x"], {"m": "mean"}), "bind's arguments after the call")
    assert out is not args, "bind returns a new list"


# ===================================================================================================
# dispatch: the registry and dispatch
# ===================================================================================================
def _t(ref, *keys):
    return ref.MiniTensor(0.0, list(keys))


@case("dispatch", "define returns a handle (name, parsed schema, no kernels); dispatchers are independent")
def _(ref):
    K = ref.DispatchKey
    d1, d2 = ref.Dispatcher(), ref.Dispatcher()
    op = d1.define("ipt::f(Tensor self, *, int n=2) -> (Tensor, Tensor)")
    assert isinstance(op, ref.OperatorHandle), f"define should return an OperatorHandle, got {type(op).__name__}"
    _eq((op.name, op.schema.name, [a.name for a in op.schema.arguments], op.schema.returns, dict(op.kernels)),
        ("ipt::f", "ipt::f", ["self", "n"], ["Tensor", "Tensor"], {}), "the handle")
    d2.define("ipt::f(Tensor self) -> Tensor")   # no clash across dispatchers
    d1.fallback(K.Python, lambda o, ks, st: None)
    d2.impl("ipt::f", K.CPU, lambda ks, x: "d2")
    _raises(ref.MissingKernelError, d2.call, "ipt::f", _t(ref, K.CPU, K.Python))   # d1's fallback is not d2's
    _raises(ref.MissingKernelError, d1.call, "ipt::f", _t(ref, K.CPU))              # d2's kernel is not d1's


@case("dispatch", "impl fills the handle's kernels; overload names are distinct ops")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    op = d.define("ipt::f(Tensor self) -> Tensor")
    op_out = d.define("ipt::f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    cpu = lambda ks, x: "f"  # noqa: E731
    d.impl("ipt::f", K.CPU, cpu)
    d.impl("ipt::f", K.AutogradCPU, ref.FALLTHROUGH)
    d.impl("ipt::f.out", K.CPU, lambda ks, x, out: "f.out")
    assert op.kernels[K.CPU] is cpu and op.kernels[K.AutogradCPU] is ref.FALLTHROUGH, f"kernels of ipt::f: {op.kernels}"
    _eq(set(op_out.kernels), {K.CPU}, "kernel keys of ipt::f.out")
    t = _t(ref, K.CPU, K.AutogradCPU)
    c = _t(ref, K.CPU)
    _eq((d.call("ipt::f", t), d.call("ipt::f.out", c, out=c)), ("f", "f.out"), "the two overloads")
    _raises(ref.MissingKernelError, d.call, "ipt::f.out", t, out=t)   # f's fallthrough is not f.out's


@case("dispatch", "a second define raises RuntimeError and leaves the first op and its kernels working")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, x: "kept")
    _raises(RuntimeError, d.define, "ipt::f(Tensor self) -> Tensor")
    _raises(RuntimeError, d.define, "ipt::f(Tensor self, Tensor other) -> Tensor")   # another schema, same name
    _eq(d.call("ipt::f", _t(ref, K.CPU)), "kept", "the op after the failed redefinitions")
    _raises(TypeError, d.call, "ipt::f", _t(ref, K.CPU), _t(ref, K.CPU))   # the first schema (one argument) is kept


@case("dispatch", "impl on an unknown op raises KeyError and defines nothing")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    _raises(KeyError, d.impl, "ipt::ghost", K.CPU, lambda ks, x: x)
    d.define("ipt::ghost(Tensor self) -> Tensor")   # still definable afterwards
    d.impl("ipt::ghost", K.CPU, lambda ks, x: "ok")
    _eq(d.call("ipt::ghost", _t(ref, K.CPU)), "ok", "after the failed impl")


@case("dispatch", "priority: the highest key with a kernel runs, whichever order kernels were registered in")
def _(ref):
    K = ref.DispatchKey
    rng = random.Random(5)
    keys = _keys(ref)
    for trial in range(20):
        d = ref.Dispatcher()
        d.define("ipt::f(Tensor self) -> Tensor")
        order = keys[:]
        rng.shuffle(order)
        for k in order:
            d.impl("ipt::f", k, (lambda kk: lambda ks, x: kk)(k))
        sub = rng.sample(keys, rng.randint(1, 12))
        _eq(d.call("ipt::f", _t(ref, *sub)), max(sub, key=int), f"registration order {_names(order)}, keys {_names(sub)}")


def _model_dispatch(ref, kernels, fallbacks, ks):
    """The statement's walk, as the oracle of the random tables: ('kernel', k) / ('fallback', k) / ('missing', k)."""
    for key in sorted(ks, key=int, reverse=True):
        if key in kernels:
            if kernels[key] == "fallthrough":
                continue
            return ("kernel", key)
        if key in fallbacks:
            if fallbacks[key] == "fallthrough":
                continue
            return ("fallback", key)
        return ("missing", key)
    return ("missing", ref.DispatchKey.Undefined)


@case("dispatch", "seeded random kernel/fallback/fallthrough tables agree with the statement's walk (400 calls)")
def _(ref):
    rng = random.Random(2024)
    keys = _keys(ref)
    for trial in range(40):
        d = ref.Dispatcher()
        d.define("ipt::f(Tensor self, *, int n=0) -> Tensor")
        kernels, fallbacks = {}, {}
        for k in keys:
            r = rng.random()
            if r < 0.3:
                kernels[k] = "kernel"
                d.impl("ipt::f", k, (lambda kk: lambda ks, x, n: ("kernel", kk))(k))
            elif r < 0.45:
                kernels[k] = "fallthrough"
                d.impl("ipt::f", k, ref.FALLTHROUGH)
            r = rng.random()
            if r < 0.25:
                fallbacks[k] = "boxed"
                d.fallback(k, (lambda kk: lambda op, ks, stack: stack.__setitem__(slice(None), [("fallback", kk)]))(k))
            elif r < 0.45:
                fallbacks[k] = "fallthrough"
                d.fallback(k, ref.FALLTHROUGH)
        for _ in range(10):
            sub = rng.sample(keys, rng.randint(0, 6))
            want = _model_dispatch(ref, kernels, fallbacks, sub)
            where = f"trial {trial}, keys {_names(sorted(sub, key=int))}, kernels {kernels}, fallbacks {fallbacks}"
            if want[0] == "missing":
                e = _raises(ref.MissingKernelError, d.call, "ipt::f", _t(ref, *sub))
                assert "ipt::f" in str(e), f"{where}: the error should name the op: {e}"
                if want[1] != ref.DispatchKey.Undefined:
                    assert want[1].name in str(e), f"{where}: the error should name the key {want[1].name}: {e}"
            else:
                _eq(d.call("ipt::f", _t(ref, *sub)), want, where)


@case("dispatch", "a kernel gets the whole dispatch keyset and the bound arguments (defaults, keywords in place)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d, seen = ref.Dispatcher(), []
    d.define("ipt::f(Tensor self, int n=3, *, Scalar alpha=1, str m=\"x\") -> Tensor")
    d.impl("ipt::f", K.Python, lambda ks, *a: seen.append((ks, a)) or "py")
    t = _t(ref, K.CPU, K.Meta, K.Python)
    _eq(d.call("ipt::f", t, m="y"), "py", "result")
    _eq(seen[0][0], KS([K.CPU, K.Meta, K.Python]), "the keyset the kernel receives (not masked)")
    _eq(len(seen[0][1]), 4, "number of arguments the kernel receives")
    assert seen[0][1][0] is t and list(seen[0][1][1:]) == [3, 1, "y"], f"arguments: {seen[0][1]}"


@case("dispatch", "a boxed fallback gets the handle, the keyset and a list stack of the bound arguments")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d, seen = ref.Dispatcher(), []
    op = d.define("ipt::f(Tensor self, Tensor[] others, *, int n=7) -> Tensor")

    def boxed(o, ks, stack):
        seen.append((o, ks, type(stack), list(stack)))
        stack.clear()
        stack.append("boxed")

    d.fallback(K.Functionalize, boxed)
    a, b = _t(ref, K.CPU, K.Functionalize), _t(ref, K.Meta)
    _eq(d.call("ipt::f", a, [b]), "boxed", "result left by clear()+append() on the stack")
    o, ks, typ, stack = seen[0]
    assert o is op, "the fallback receives the OperatorHandle that define() returned"
    _eq(ks, KS([K.CPU, K.Functionalize, K.Meta]), "the keyset the fallback receives")
    assert typ is list, f"the stack should be a list, got {typ.__name__}"
    assert stack[0] is a and stack[1] == [b] and stack[2] == 7, f"the stack: {stack}"


@case("dispatch", "boxed returns: () gives None, one gives stack[0], three give a 3-tuple")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::none(Tensor self) -> ()")
    d.define("ipt::one(Tensor self) -> Tensor")
    d.define("ipt::three(Tensor self) -> (Tensor, Tensor, int)")

    def boxed(op, ks, stack):
        n = len(op.schema.returns)
        stack[:] = [f"r{i}" for i in range(n)]

    d.fallback(K.Python, boxed)
    t = _t(ref, K.Python)
    _eq(d.call("ipt::none", t), None, "() return")
    _eq(d.call("ipt::one", t), "r0", "one return")
    out = d.call("ipt::three", t)
    _eq((type(out), out), (tuple, ("r0", "r1", "r2")), "three returns")


@case("dispatch", "an op's own kernel beats the fallback; its own FALLTHROUGH skips a boxed fallback")
def _(ref):
    K = ref.DispatchKey
    d, seen = ref.Dispatcher(), []
    for name in ("ipt::own", "ipt::skip", "ipt::plain"):
        d.define(f"{name}(Tensor self) -> Tensor")
        d.impl(name, K.CPU, lambda ks, x: "cpu")

    def boxed(op, ks, stack):
        seen.append(op.name)
        stack[:] = ["fallback"]

    d.fallback(K.Python, boxed)
    d.impl("ipt::own", K.Python, lambda ks, x: "own")
    d.impl("ipt::skip", K.Python, ref.FALLTHROUGH)
    t = _t(ref, K.CPU, K.Python)
    _eq([d.call(n, t) for n in ("ipt::own", "ipt::skip", "ipt::plain")], ["own", "cpu", "fallback"], "results")
    _eq(seen, ["ipt::plain"], "ops that reached the fallback")


@case("dispatch", "a FALLTHROUGH fallback skips the key only for ops without their own kernel for it")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::a(Tensor self) -> Tensor")
    d.define("ipt::b(Tensor self) -> Tensor")
    for n in ("ipt::a", "ipt::b"):
        d.impl(n, K.CPU, lambda ks, x: "cpu")
    d.impl("ipt::b", K.ADInplaceOrView, lambda ks, x: "inplace-or-view")
    d.fallback(K.ADInplaceOrView, ref.FALLTHROUGH)
    t = _t(ref, K.CPU, K.ADInplaceOrView)
    _eq((d.call("ipt::a", t), d.call("ipt::b", t)), ("cpu", "inplace-or-view"), "results")


@case("dispatch", "fallbacks apply to ops defined before and after them")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::before(Tensor self) -> Tensor")
    d.fallback(K.Tracer, lambda op, ks, stack: stack.__setitem__(slice(None), [op.name]))
    d.define("ipt::after(Tensor self) -> Tensor")
    t = _t(ref, K.Tracer)
    _eq((d.call("ipt::before", t), d.call("ipt::after", t)), ("ipt::before", "ipt::after"), "boxed results")


@case("dispatch", "re-registration: the last impl/fallback for a key wins, through kernel -> FALLTHROUGH -> kernel")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, x: "cpu")
    t = _t(ref, K.CPU, K.Python)
    d.impl("ipt::f", K.Python, lambda ks, x: "py1")
    r1 = d.call("ipt::f", t)
    d.impl("ipt::f", K.Python, ref.FALLTHROUGH)
    r2 = d.call("ipt::f", t)
    d.impl("ipt::f", K.Python, lambda ks, x: "py3")
    r3 = d.call("ipt::f", t)
    _eq((r1, r2, r3), ("py1", "cpu", "py3"), "impl replacements (torch: 'Overriding a previously registered kernel')")
    d2 = ref.Dispatcher()
    d2.define("ipt::g(Tensor self) -> Tensor")
    d2.impl("ipt::g", K.CPU, lambda ks, x: "cpu")
    u = _t(ref, K.CPU, K.Tracer)
    d2.fallback(K.Tracer, lambda op, ks, st: st.__setitem__(slice(None), ["fb1"]))
    f1 = d2.call("ipt::g", u)
    d2.fallback(K.Tracer, ref.FALLTHROUGH)
    f2 = d2.call("ipt::g", u)
    d2.fallback(K.Tracer, lambda op, ks, st: st.__setitem__(slice(None), ["fb3"]))
    f3 = d2.call("ipt::g", u)
    # the lab's rule (the statement): a second fallback replaces the first; torch 2.13 raises instead
    _eq((f1, f2, f3), ("fb1", "cpu", "fb3"), "fallback replacements")


@case("dispatch", "a missing kernel does not fall through; the error names op and key; it is a LookupError")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::add(Tensor self, Tensor other) -> Tensor")
    d.impl("ipt::add", K.CPU, lambda ks, x, y: "cpu")
    e = _raises(ref.MissingKernelError, d.call, "ipt::add", _t(ref, K.CPU), _t(ref, K.CPU, K.Python))
    assert isinstance(e, LookupError), "MissingKernelError is a LookupError"
    assert "ipt::add" in str(e) and "Python" in str(e), f"message should name ipt::add and Python: {e}"
    e = _raises(ref.MissingKernelError, d.call, "ipt::add", _t(ref, K.AutocastCPU, K.CPU), _t(ref, K.CPU))
    assert "AutocastCPU" in str(e), f"message should name AutocastCPU: {e}"
    _eq(d.call("ipt::add", _t(ref, K.CPU), _t(ref, K.CPU)), "cpu", "the op still works after the errors")


@case("dispatch", "an empty keyset, and a keyset that is all fallthrough, raise MissingKernelError")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(int n) -> Tensor")
    d.define("ipt::g(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, n: n)
    _raises(ref.MissingKernelError, d.call, "ipt::f", 3)            # no tensor, no TLS: nothing to dispatch on
    d.impl("ipt::g", K.AutogradCPU, ref.FALLTHROUGH)
    d.fallback(K.ADInplaceOrView, ref.FALLTHROUGH)
    e = _raises(ref.MissingKernelError, d.call, "ipt::g", _t(ref, K.AutogradCPU, K.ADInplaceOrView))
    assert "ipt::g" in str(e), f"message should name ipt::g: {e}"
    _raises(ref.MissingKernelError, d.redispatch, "ipt::g", ref.DispatchKeySet(), _t(ref, K.CPU))


@case("dispatch", "a factory-like call with no tensors dispatches on the TLS included keys")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::zeros(int n, *, str dtype=\"float\") -> Tensor")
    d.impl("ipt::zeros", K.BackendSelect, lambda ks, n, dtype: ("backend-select", n, dtype))
    with ref.IncludeKeys(K.BackendSelect):
        _eq(d.call("ipt::zeros", 4), ("backend-select", 4, "float"), "call under IncludeKeys(BackendSelect)")
    _clean_tls(ref, "after the call")


@case("dispatch", "call honours the TLS: IncludeKeys(Python) reroutes, ExcludeKeys(AutogradCPU) skips")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    for k, v in ((K.CPU, "cpu"), (K.Python, "py"), (K.AutogradCPU, "ag")):
        d.impl("ipt::f", k, (lambda vv: lambda ks, x: vv)(v))
    t = _t(ref, K.CPU, K.AutogradCPU)
    got = [d.call("ipt::f", t)]
    with ref.IncludeKeys(K.Python):
        got.append(d.call("ipt::f", _t(ref, K.CPU)))
        with ref.ExcludeKeys(K.AutogradCPU):
            got.append(d.call("ipt::f", t))
    with ref.ExcludeKeys(K.AutogradCPU):
        got.append(d.call("ipt::f", t))
    got.append(d.call("ipt::f", t))
    _eq(got, ["ag", "py", "py", "cpu", "ag"], "kernels chosen")


@case("dispatch", "keys of tensors passed by keyword and inside Tensor[] arguments count")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self, Tensor[] xs, *, Tensor? other=None) -> Tensor")
    for k, v in ((K.CPU, "cpu"), (K.Python, "py"), (K.Functionalize, "func")):
        d.impl("ipt::f", k, (lambda vv: lambda ks, *a: vv)(v))
    c = _t(ref, K.CPU)
    _eq(d.call("ipt::f", c, [], other=_t(ref, K.CPU, K.Python)), "py", "Python key from a keyword tensor")
    _eq(d.call("ipt::f", c, [c, _t(ref, K.Functionalize)]), "func", "Functionalize from a Tensor[] element")
    _eq(d.call("ipt::f", c, xs=[c]), "cpu", "a Tensor[] by keyword")


@case("dispatch", "redispatch uses exactly the keyset given: no TLS, no recomputation from the arguments")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self, int n) -> Tensor")
    for k, v in ((K.CPU, "cpu"), (K.Python, "py"), (K.Meta, "meta")):
        d.impl("ipt::f", k, (lambda vv: lambda ks, x, n: (vv, ks.bits, n))(v))
    cpu = _t(ref, K.CPU)
    with ref.ExcludeKeys(K.CPU), ref.IncludeKeys(K.Python):
        r1 = d.redispatch("ipt::f", KS([K.CPU]), cpu, 1)
    r2 = d.redispatch("ipt::f", KS([K.Meta, K.CPU]), cpu, 2)      # Meta although the tensor has only CPU
    r3 = d.redispatch("ipt::f", KS([K.CPU]), _t(ref, K.Python), 3)  # the tensor's Python key is not looked at
    _eq((r1, r2, r3), (("cpu", 2, 1), ("meta", 6, 2), ("cpu", 2, 3)), "redispatch results")
    _clean_tls(ref, "after redispatch")


@case("dispatch", "exceptions from kernels and fallbacks propagate and leave no state behind")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    calls = []

    def bad(ks, x):
        calls.append("cpu")
        raise ZeroDivisionError("kernel failed")

    d.impl("ipt::f", K.CPU, bad)

    def boxed(op, ks, stack):
        with ref.ExcludeKeys(K.Python):
            stack[:] = [d.redispatch(op.name, ks.below(K.Python), *stack)]

    d.fallback(K.Python, boxed)
    _raises(ZeroDivisionError, d.call, "ipt::f", _t(ref, K.CPU, K.Python))
    _clean_tls(ref, "after a failing kernel under a guarded fallback")
    d.impl("ipt::f", K.CPU, lambda ks, x: "fixed")
    _eq(d.call("ipt::f", _t(ref, K.CPU, K.Python)), "fixed", "the second call after the failure")
    _eq(calls, ["cpu"], "the failing kernel ran once")


@case("dispatch", "second calls are dispatched afresh (no result or keyset cached between calls)")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, x: ("cpu", x.value))
    d.impl("ipt::f", K.Python, lambda ks, x: ("py", x.value))
    got = [d.call("ipt::f", ref.MiniTensor(v, keys)) for v, keys in
           ((1, [K.CPU, K.Python]), (2, [K.CPU]), (3, [K.CPU, K.Python]), (4, [K.CPU]))]
    _eq(got, [("py", 1), ("cpu", 2), ("py", 3), ("cpu", 4)], "four calls")


@case("dispatch", "kernels may call other ops; those nested calls see the TLS of the moment")
def _(ref):
    K = ref.DispatchKey
    d = ref.Dispatcher()
    d.define("ipt::outer(Tensor self) -> Tensor")
    d.define("ipt::inner(Tensor self) -> Tensor")
    d.impl("ipt::inner", K.CPU, lambda ks, x: "inner-cpu")
    d.impl("ipt::inner", K.Python, lambda ks, x: "inner-py")

    def outer(ks, x):
        with ref.ExcludeKeys(K.Python):
            return ("outer", d.call("ipt::inner", x))

    d.impl("ipt::outer", K.Python, outer)
    t = _t(ref, K.CPU, K.Python)
    _eq(d.call("ipt::outer", t), ("outer", "inner-cpu"), "nested call with Python excluded")
    _eq(d.call("ipt::inner", t), "inner-py", "the same op afterwards, TLS clean")


# ===================================================================================================
# redispatch: autograd and tracing kernels
# ===================================================================================================
def _graph(ref, tape=None, trace=None):
    """A dispatcher with mul, add, square (calls mul), scale (Tensor, float), split2 (two returns), touch (no return)."""
    K = ref.DispatchKey
    d = ref.Dispatcher()
    tape = [] if tape is None else tape
    d.define("ipt::mul(Tensor self, Tensor other) -> Tensor")
    d.define("ipt::add(Tensor self, Tensor other) -> Tensor")
    d.define("ipt::square(Tensor self) -> Tensor")
    d.define("ipt::scale(Tensor self, float s, Tensor other) -> Tensor")
    d.define("ipt::split2(Tensor self) -> (Tensor, Tensor, int)")
    d.define("ipt::touch(Tensor self) -> ()")
    d.impl("ipt::mul", K.CPU, lambda ks, x, y: ref.MiniTensor(x.value * y.value, [K.CPU, K.AutogradCPU]))
    d.impl("ipt::add", K.CPU, lambda ks, x, y: ref.MiniTensor(x.value + y.value, [K.CPU, K.AutogradCPU]))
    d.impl("ipt::square", K.CPU, lambda ks, x: d.call("ipt::mul", x, x))
    d.impl("ipt::scale", K.CPU, lambda ks, x, s, y: ref.MiniTensor(x.value * s + y.value, [K.CPU, K.AutogradCPU]))
    d.impl("ipt::split2", K.CPU, lambda ks, x: (ref.MiniTensor(x.value, [K.CPU]), ref.MiniTensor(-x.value, [K.CPU]), 2))
    d.impl("ipt::touch", K.CPU, lambda ks, x: None)
    for name in ("ipt::mul", "ipt::add", "ipt::square", "ipt::scale", "ipt::split2", "ipt::touch"):
        d.impl(name, K.AutogradCPU, ref.make_autograd_kernel(d, name, tape))
    if trace is not None:
        d.fallback(K.Tracer, ref.make_tracing_fallback(d, trace))
    return d, tape


def _leaf(ref, v, grad=True, tracer=False):
    K = ref.DispatchKey
    keys = [K.CPU, K.AutogradCPU] + ([K.Tracer] if tracer else [])
    return ref.MiniTensor(v, keys, requires_grad=grad)


@case("redispatch", "below autograd: the kernel sees keyset.below(AutogradCPU) and the autograd keys excluded")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d, tape, seen = ref.Dispatcher(), [], []
    d.define("ipt::f(Tensor self) -> Tensor")

    def cpu(ks, x):
        seen.append((ks, ref.local_keysets()))
        return ref.MiniTensor(1.0, [K.CPU])

    d.impl("ipt::f", K.CPU, cpu)
    d.impl("ipt::f", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::f", tape))
    d.impl("ipt::f", K.AutocastCPU, ref.FALLTHROUGH)
    d.call("ipt::f", ref.MiniTensor(0.0, [K.CPU, K.AutogradCPU, K.AutocastCPU], requires_grad=True))
    ks, (inc, exc) = seen[0]
    _eq(ks, KS([K.CPU]), "keyset of the CPU kernel (AutogradCPU and everything above it masked off)")
    assert exc.has(K.AutogradCPU) and exc.has(K.ADInplaceOrView), f"excluded during the redispatch: {exc}"
    _clean_tls(ref, "after the autograd kernel")


@case("redispatch", "no node without requires_grad; the output is left alone")
def _(ref):
    d, tape = _graph(ref)
    a, b = _leaf(ref, 2.0, grad=False), _leaf(ref, 3.0, grad=False)
    y = d.call("ipt::mul", a, b)
    _eq((y.value, y.requires_grad, y.grad_fn, tape), (6.0, False, None, []), "(value, requires_grad, grad_fn, tape)")
    y = d.call("ipt::split2", a)
    assert all(not t.requires_grad and t.grad_fn is None for t in y[:2]) and tape == [], "split2 without grad"


@case("redispatch", "one node per user-visible op, through two levels of ops calling ops")
def _(ref):
    K = ref.DispatchKey
    d, tape = _graph(ref)
    d.define("ipt::quad(Tensor self) -> Tensor")
    d.impl("ipt::quad", K.CPU, lambda ks, x: d.call("ipt::square", d.call("ipt::square", x)))
    d.impl("ipt::quad", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::quad", tape))
    x = _leaf(ref, 2.0)
    y = d.call("ipt::quad", x)
    _eq((y.value, [n.op for n in tape]), (16.0, ["ipt::quad"]), "(value, tape)")
    assert y.grad_fn is tape[0] and tape[0].inputs[0] is x, "the node links the output to x"


@case("redispatch", "sequential ops chain: nodes in order, each node's inputs are the exact tensors")
def _(ref):
    d, tape = _graph(ref)
    x, w, b = _leaf(ref, 2.0), _leaf(ref, 3.0), _leaf(ref, 1.0, grad=False)
    h = d.call("ipt::mul", x, w)
    y = d.call("ipt::add", h, b)
    z = d.call("ipt::square", y)
    _eq([n.op for n in tape], ["ipt::mul", "ipt::add", "ipt::square"], "tape")
    _eq((z.value, y.value), (49.0, 7.0), "values")
    assert [id(t) for t in tape[1].inputs] == [id(h), id(b)], "add's node inputs are h and b themselves"
    assert tape[1].inputs[0].grad_fn is tape[0] and z.grad_fn is tape[2], "the graph links through grad_fn"
    assert all(isinstance(n, ref.Node) for n in tape), "the tape holds Node objects"


@case("redispatch", "node inputs: tensor arguments only, in order, Tensor[] flattened; one input with grad suffices")
def _(ref):
    K = ref.DispatchKey
    d, tape = _graph(ref)
    d.define("ipt::total(Tensor a, Tensor[] xs, float s) -> Tensor")
    d.impl("ipt::total", K.CPU, lambda ks, a, xs, s: ref.MiniTensor(a.value + sum(t.value for t in xs) * s, [K.CPU]))
    d.impl("ipt::total", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::total", tape))
    a, p, q = _leaf(ref, 1.0, grad=False), _leaf(ref, 2.0, grad=False), _leaf(ref, 3.0)
    y = d.call("ipt::total", a, [p, q], 2.0)
    _eq(y.value, 11.0, "value")
    assert len(tape) == 1 and [id(t) for t in tape[0].inputs] == [id(a), id(p), id(q)], \
        f"inputs should be [a, p, q], got {tape[0].inputs if tape else None}"
    y = d.call("ipt::scale", q, 10.0, a)
    assert [id(t) for t in tape[1].inputs] == [id(q), id(a)], "the float argument is not an input"


@case("redispatch", "tuple outputs: every tensor is marked with the same node; other items untouched")
def _(ref):
    d, tape = _graph(ref)
    x = _leaf(ref, 5.0)
    out = d.call("ipt::split2", x)
    assert type(out) is tuple and len(out) == 3, f"split2 returns a 3-tuple, got {out!r}"
    a, b, n = out
    _eq((a.value, b.value, n), (5.0, -5.0, 2), "values")
    assert a.requires_grad and b.requires_grad and a.grad_fn is tape[0] and b.grad_fn is tape[0], "both outputs marked"
    _eq(len(tape), 1, "one node for a two-output op")


@case("redispatch", "a Tensor[] output: every tensor of the returned list gets the node (as torch's split/unbind do)")
def _(ref):
    K = ref.DispatchKey
    d, tape = _graph(ref)
    d.define("ipt::chunks(Tensor self) -> Tensor[]")
    d.impl("ipt::chunks", K.CPU, lambda ks, x: [ref.MiniTensor(x.value / 2, [K.CPU]), ref.MiniTensor(x.value / 2, [K.CPU])])
    d.impl("ipt::chunks", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::chunks", tape))
    out = d.call("ipt::chunks", _leaf(ref, 4.0))
    assert isinstance(out, list) and [t.value for t in out] == [2.0, 2.0], f"chunks result: {out!r}"
    assert all(t.requires_grad and t.grad_fn is tape[0] for t in out), "every tensor of the list is marked"


@case("redispatch", "an op without outputs records a node (statement) and returns None")
def _(ref):
    d, tape = _graph(ref)
    x = _leaf(ref, 1.0)
    _eq(d.call("ipt::touch", x), None, "result of a '-> ()' op")
    _eq([n.op for n in tape], ["ipt::touch"], "tape")


@case("redispatch", "the autograd kernel returns exactly the object from below, and uses its own op name")
def _(ref):
    K = ref.DispatchKey
    d, tape = ref.Dispatcher(), []
    d.define("ipt::f(Tensor self) -> Tensor")
    made = []
    d.impl("ipt::f", K.CPU, lambda ks, x: made.append(ref.MiniTensor(1.0, [K.CPU])) or made[-1])
    d.impl("ipt::f", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::f", tape))
    y = d.call("ipt::f", _leaf(ref, 0.0))
    assert y is made[0], "the autograd kernel must return the kernel's own output object"
    _eq(tape[0].op, "ipt::f", "node op name")


@case("redispatch", "a failing kernel below autograd: the error propagates, no node, TLS restored")
def _(ref):
    K = ref.DispatchKey
    d, tape = ref.Dispatcher(), []
    d.define("ipt::f(Tensor self) -> Tensor")

    def bad(ks, x):
        raise ArithmeticError("below autograd")

    d.impl("ipt::f", K.CPU, bad)
    d.impl("ipt::f", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::f", tape))
    _raises(ArithmeticError, d.call, "ipt::f", _leaf(ref, 0.0))
    _eq(tape, [], "tape after the failure")
    _clean_tls(ref, "after the failure")


@case("redispatch", "autograd redispatches to the keys below it in order (Python fallback, then CPU)")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d, tape, seen = ref.Dispatcher(), [], []
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.CPU, lambda ks, x: seen.append(("cpu", ks)) or ref.MiniTensor(x.value + 1, [K.CPU]))
    d.impl("ipt::f", K.AutogradCPU, ref.make_autograd_kernel(d, "ipt::f", tape))
    d.fallback(K.ADInplaceOrView, ref.FALLTHROUGH)

    def py(op, ks, stack):
        seen.append(("python", ks))
        stack[:] = [d.redispatch(op.name, ks.below(K.Python), *stack)]

    d.fallback(K.Python, py)
    y = d.call("ipt::f", ref.MiniTensor(1.0, [K.CPU, K.AutogradCPU, K.ADInplaceOrView, K.Python], requires_grad=True))
    _eq([s[0] for s in seen], ["python", "cpu"], "order below autograd")
    _eq(seen[0][1], KS([K.CPU, K.ADInplaceOrView, K.Python]), "keyset at the Python fallback")
    _eq((y.value, y.grad_fn is tape[0], len(tape)), (2.0, True, 1), "result and node")


@case("redispatch", "with AutogradCPU excluded by an outer guard, no node is recorded even with requires_grad")
def _(ref):
    K = ref.DispatchKey
    d, tape = _graph(ref)
    x = _leaf(ref, 2.0)
    with ref.ExcludeKeys(K.AutogradCPU):
        y = d.call("ipt::mul", x, x)
    _eq((y.value, y.requires_grad, tape), (4.0, False, []), "(value, requires_grad, tape) below autograd")
    z = d.call("ipt::mul", x, x)
    _eq(([n.op for n in tape], z.requires_grad), (["ipt::mul"], True), "afterwards autograd records again")


@case("redispatch", "a second call records a second, distinct node; outputs point at their own node")
def _(ref):
    d, tape = _graph(ref)
    x = _leaf(ref, 3.0)
    y1 = d.call("ipt::square", x)
    y2 = d.call("ipt::square", x)
    assert len(tape) == 2 and tape[0] is not tape[1], "two calls, two nodes"
    assert y1.grad_fn is tape[0] and y2.grad_fn is tape[1], "each output points at its own node"
    assert not x.requires_grad or x.grad_fn is None, "the leaf's grad_fn is untouched"


@case("redispatch", "tracing fallback: top-level ops traced in call order, nested ones not, values right")
def _(ref):
    K = ref.DispatchKey
    trace = []
    d, tape = _graph(ref, trace=trace)
    x = ref.MiniTensor(3.0, [K.CPU, K.Tracer])
    y = d.call("ipt::square", x)
    z = d.call("ipt::add", y, x)
    w = d.call("ipt::scale", z, 0.5, x)
    _eq((y.value, z.value, w.value), (9.0, 12.0, 9.0), "values")
    _eq(trace, ["ipt::square", "ipt::add", "ipt::scale"], "trace")
    _clean_tls(ref, "after tracing")


@case("redispatch", "tracing with autograd below: one trace entry and one node per top-level op")
def _(ref):
    trace = []
    d, tape = _graph(ref, trace=trace)
    x = _leaf(ref, 2.0, tracer=True)
    w = _leaf(ref, 5.0, grad=False, tracer=True)
    y = d.call("ipt::square", x)
    z = d.call("ipt::mul", y, w)
    _eq((trace, [n.op for n in tape]), (["ipt::square", "ipt::mul"], ["ipt::square", "ipt::mul"]), "(trace, tape)")
    assert z.grad_fn is tape[1] and tape[1].inputs[0] is y, "the node chain"
    _eq(z.value, 20.0, "value")


@case("redispatch", "tracing fallback: multi-return ops give a tuple, '-> ()' ops give None, keywords bound")
def _(ref):
    K = ref.DispatchKey
    trace = []
    d, tape = _graph(ref, trace=trace)
    d.define("ipt::kw(Tensor self, *, int n=2, str tag=\"t\") -> Tensor")
    d.impl("ipt::kw", K.CPU, lambda ks, x, n, tag: (x.value * n, tag))
    x = ref.MiniTensor(4.0, [K.CPU, K.Tracer])
    out = d.call("ipt::split2", x)
    assert type(out) is tuple and len(out) == 3 and out[0].value == 4.0 and out[2] == 2, f"split2 via the tracer: {out!r}"
    _eq(d.call("ipt::touch", x), None, "touch via the tracer")
    _eq(d.call("ipt::kw", x, tag="u"), (8.0, "u"), "keywords through the tracer")
    _eq(trace, ["ipt::split2", "ipt::touch", "ipt::kw"], "trace")


@case("redispatch", "tracing fallback: Tracer excluded during the redispatch, masked off the keyset below")
def _(ref):
    K, KS = ref.DispatchKey, ref.DispatchKeySet
    d, trace, seen = ref.Dispatcher(), [], []
    d.fallback(K.Tracer, ref.make_tracing_fallback(d, trace))
    d.define("ipt::f(Tensor self) -> Tensor")
    d.impl("ipt::f", K.Meta, lambda ks, x: seen.append((ks, ref.local_keysets()[1])) or "meta")
    _eq(d.call("ipt::f", _t(ref, K.CPU, K.Tracer, K.Meta)), "meta", "result")
    ks, exc = seen[0]
    _eq(ks, KS([K.CPU, K.Meta]), "keyset below the tracer")
    assert exc.has(K.Tracer), f"Tracer should be excluded while the tracer redispatches: {exc}"
    _clean_tls(ref, "after tracing")


@case("redispatch", "tracing by TLS: IncludeKeys(Tracer) traces calls on plain tensors")
def _(ref):
    K = ref.DispatchKey
    trace = []
    d, tape = _graph(ref, trace=trace)
    x = ref.MiniTensor(2.0, [K.CPU])
    with ref.IncludeKeys(K.Tracer):
        y = d.call("ipt::square", x)
    d.call("ipt::square", x)    # outside the guard: not traced
    _eq((y.value, trace), (4.0, ["ipt::square"]), "(value, trace)")


@case("redispatch", "an op with its own Tracer kernel is not seen by the boxed tracing fallback")
def _(ref):
    K = ref.DispatchKey
    trace = []
    d, tape = _graph(ref, trace=trace)
    d.define("ipt::own(Tensor self) -> Tensor")
    d.impl("ipt::own", K.Tracer, lambda ks, x: "own tracer kernel")
    x = ref.MiniTensor(1.0, [K.CPU, K.Tracer])
    _eq(d.call("ipt::own", x), "own tracer kernel", "result")
    _eq(trace, [], "trace")


@case("redispatch", "a failing op under the tracer: name traced first, error propagates, TLS restored")
def _(ref):
    K = ref.DispatchKey
    d, trace = ref.Dispatcher(), []
    d.fallback(K.Tracer, ref.make_tracing_fallback(d, trace))
    d.define("ipt::f(Tensor self) -> Tensor")

    def bad(ks, x):
        raise OverflowError("nope")

    d.impl("ipt::f", K.CPU, bad)
    _raises(OverflowError, d.call, "ipt::f", _t(ref, K.CPU, K.Tracer))
    _eq(trace, ["ipt::f"], "trace (the statement: append, then redispatch)")
    _clean_tls(ref, "after the failure")


# ===================================================================================================
# custom_op
# ===================================================================================================
def _softplus(x, beta):
    """The torch oracle: log(1 + exp(beta x)) / beta, stable, differentiable."""
    return torch.logaddexp(torch.zeros_like(x), beta * x) / beta


BETAS = (0.5, 1.0, 1.5, 2.0, 10.0, -1.0, -3.5, 0.01)


@case("custom_op", "the inferred schema is ipt::scaled_softplus(Tensor x, float beta) -> Tensor")
def _(ref):
    _eq(str(torch.ops.ipt.scaled_softplus.default._schema), "ipt::scaled_softplus(Tensor x, float beta) -> Tensor",
        "schema")
    assert isinstance(ref.scaled_softplus, torch._library.custom_ops.CustomOpDef), \
        f"scaled_softplus should be a torch.library.custom_op, got {type(ref.scaled_softplus).__name__}"


@case("custom_op", "values match the torch formula for positive and negative beta (float64)")
def _(ref):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 7, dtype=torch.float64, generator=g) * 4
    for beta in BETAS:
        y = ref.scaled_softplus(x, beta)
        torch.testing.assert_close(y, _softplus(x, beta), rtol=1e-12, atol=1e-12, msg=lambda m: f"beta={beta}: {m}")
        if beta > 0:
            torch.testing.assert_close(y, F.softplus(x, beta, threshold=1000.0), rtol=1e-10, atol=1e-12,
                                       msg=lambda m: f"F.softplus, beta={beta}: {m}")


@case("custom_op", "the op and torch.ops.ipt.scaled_softplus.default give the same values; int beta accepted")
def _(ref):
    x = torch.linspace(-3, 3, 9, dtype=torch.float64)
    torch.testing.assert_close(ref.scaled_softplus(x, 2.0), torch.ops.ipt.scaled_softplus.default(x, 2.0))
    torch.testing.assert_close(ref.scaled_softplus(x, 2), _softplus(x, 2.0))   # a float schema argument takes an int


@case("custom_op", "float32 in, float32 out, close to the float64 result")
def _(ref):
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
    for beta in (1.0, 3.0, -0.5):
        y = ref.scaled_softplus(x, beta)
        _eq(y.dtype, torch.float32, f"dtype for beta={beta}")
        torch.testing.assert_close(y, _softplus(x.double(), beta).float(), rtol=1e-5, atol=1e-6)


@case("custom_op", "0-d and size-0 inputs: shapes, dtypes, values and gradients")
def _(ref):
    for x in (torch.tensor(0.7, dtype=torch.float64), torch.tensor(-2.0), torch.zeros(0), torch.zeros(2, 0, 3, dtype=torch.float64)):
        xr = x.clone().requires_grad_()
        y = ref.scaled_softplus(xr, 1.5)
        _eq((y.shape, y.dtype), (x.shape, x.dtype), f"shape/dtype for input {tuple(x.shape)} {x.dtype}")
        torch.testing.assert_close(y.detach(), _softplus(x, 1.5))
        (g,) = torch.autograd.grad(y.sum(), xr)
        _eq(g.shape, x.shape, "gradient shape")
        torch.testing.assert_close(g, torch.sigmoid(1.5 * x))


@case("custom_op", "non-contiguous inputs (transpose, step slice, expand) give the right values")
def _(ref):
    base = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for x in (base.t(), base[:, ::3], base[1:4, 2:7], torch.randn(1, 5, dtype=torch.float64).expand(4, 5)):
        y = ref.scaled_softplus(x, 0.8)
        _eq(y.shape, x.shape, "shape")
        torch.testing.assert_close(y, _softplus(x, 0.8))


@case("custom_op", "the output is new memory: not x, not a view of it; writing it leaves x alone")
def _(ref):
    for x in (torch.randn(3, 4, dtype=torch.float64), torch.randn(5), torch.tensor(1.5, dtype=torch.float64)):
        keep = x.clone()
        y = ref.scaled_softplus(x, 1.0)
        assert y is not x, "the op returned its input"
        assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr(), "the output shares x's storage"
        y.add_(100.0)
        assert torch.equal(x, keep), "writing the output changed the input"


@case("custom_op", "large |x| stays finite: y ~ relu(x), gradient 0 or 1 (like F.softplus's threshold)")
def _(ref):
    x = torch.tensor([-1000.0, -80.0, 0.0, 80.0, 1000.0], dtype=torch.float64, requires_grad=True)
    for beta in (1.0, 5.0):
        y = ref.scaled_softplus(x, beta)
        assert torch.isfinite(y).all(), f"beta={beta}: non-finite output {y}"
        torch.testing.assert_close(y.detach(), F.softplus(x.detach(), beta, threshold=20.0), rtol=1e-9, atol=1e-12)
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.isfinite(g).all(), f"beta={beta}: non-finite gradient {g}"
        torch.testing.assert_close(g, torch.sigmoid(beta * x.detach()))
    y32 = ref.scaled_softplus(torch.tensor([-200.0, 200.0]), 1.0)
    assert torch.isfinite(y32).all() and y32.dtype == torch.float32, f"float32 overflow: {y32}"


@case("custom_op", "gradients equal autograd of the torch formula, for several beta, in a bigger graph")
def _(ref):
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.float64, torch.float32):
        x = (torch.randn(4, 5, generator=g) * 3).to(dtype).requires_grad_()
        w = torch.randn(4, 5, generator=g).to(dtype)
        for beta in BETAS:
            (mine,) = torch.autograd.grad((ref.scaled_softplus(x, beta) * w).sum(), x)
            (want,) = torch.autograd.grad((_softplus(x, beta) * w).sum(), x)
            tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(mine, want, **tol, msg=lambda m: f"{dtype}, beta={beta}: {m}")


@case("custom_op", "gradcheck and gradgradcheck (the backward is made of torch ops)")
def _(ref):
    g = torch.Generator().manual_seed(6)
    for beta in (1.3, -0.7):
        x = torch.randn(3, 4, dtype=torch.float64, generator=g, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: ref.scaled_softplus(t, beta), (x,)), f"gradcheck beta={beta}"
        assert torch.autograd.gradgradcheck(lambda t: ref.scaled_softplus(t, beta), (x,)), f"gradgradcheck beta={beta}"
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    (g1,) = torch.autograd.grad(ref.scaled_softplus(x, 2.0).sum(), x, create_graph=True)
    (g2,) = torch.autograd.grad(g1.sum(), x)
    s = torch.sigmoid(2.0 * x.detach())
    torch.testing.assert_close(g2, 2.0 * s * (1 - s))


@case("custom_op", "no graph without requires_grad or under no_grad; a non-contiguous grad_output")
def _(ref):
    x = torch.randn(3, 3)
    _eq((ref.scaled_softplus(x, 1.0).requires_grad, ref.scaled_softplus(x, 1.0).grad_fn), (False, None), "plain input")
    xr = x.clone().requires_grad_()
    with torch.no_grad():
        y = ref.scaled_softplus(xr, 1.0)
    _eq(y.requires_grad, False, "under no_grad")
    y = ref.scaled_softplus(xr, 1.0)
    go = torch.randn(3, 6)[:, ::2]
    y.backward(go)
    torch.testing.assert_close(xr.grad, go * torch.sigmoid(x))


@case("custom_op", "opcheck passes on 2-D, 0-d, empty, float32, transposed, negative beta, no-grad inputs")
def _(ref):
    g = torch.Generator().manual_seed(7)
    inputs = [(torch.randn(3, 4, dtype=torch.float64, generator=g, requires_grad=True), 1.5),
              (torch.tensor(0.3, dtype=torch.float64, requires_grad=True), 2.0),
              (torch.zeros(0, 3, dtype=torch.float64, requires_grad=True), 1.0),
              (torch.randn(2, 5, generator=g, requires_grad=True), 0.5),
              (torch.randn(4, 6, dtype=torch.float64, generator=g).t().requires_grad_(), 1.0),
              (torch.randn(5, dtype=torch.float64, generator=g, requires_grad=True), -1.5),
              (torch.randn(2, 2, generator=g), 3.0)]
    for x, beta in inputs:
        res = torch.library.opcheck(ref.scaled_softplus, (x, beta))
        bad = {k: v for k, v in res.items() if v != "SUCCESS"}
        assert not bad, f"opcheck on {tuple(x.shape)} {x.dtype} beta={beta}: {bad}"


@case("custom_op", "fake kernel: FakeTensorMode outputs have the real output's shape, dtype and strides")
def _(ref):
    from torch._subclasses.fake_tensor import FakeTensorMode
    cases = [torch.randn(4, 2), torch.tensor(1.0, dtype=torch.float64), torch.zeros(0, 5), torch.randn(3, 7, dtype=torch.float64).t(),
             torch.randn(2, 3, 4)]
    for x in cases:
        real = ref.scaled_softplus(x, 2.0)
        with FakeTensorMode() as mode:
            fx = mode.from_tensor(x)
            fake = torch.ops.ipt.scaled_softplus.default(fx, 2.0)
        _eq((fake.shape, fake.dtype, fake.device), (real.shape, real.dtype, real.device), f"fake vs real metadata for {tuple(x.shape)}")
        if real.numel():   # strides of an empty tensor carry no meaning
            _eq(fake.stride(), real.stride(), f"fake vs real strides for {tuple(x.shape)} strides {x.stride()}")


@case("custom_op", "meta tensors: the fake kernel serves the Meta key")
def _(ref):
    m = torch.empty(3, 4, device="meta", dtype=torch.float64)
    y = ref.scaled_softplus(m, 1.0)
    _eq((y.device.type, y.shape, y.dtype), ("meta", m.shape, torch.float64), "meta output")


@case("custom_op", "torch.compile(fullgraph=True): the op stays one opaque node; forward and backward right")
def _(ref):
    from torch._dynamo.backends.common import aot_autograd
    fw, bw = [], []
    backend = aot_autograd(fw_compiler=lambda gm, ex: (fw.append(gm), gm)[1], bw_compiler=lambda gm, ex: (bw.append(gm), gm)[1])
    f = torch.compile(lambda t: (ref.scaled_softplus(t, -2.0) * 3).sum(), fullgraph=True, backend=backend)
    x = torch.randn(6, generator=torch.Generator().manual_seed(8), requires_grad=True)
    y = f(x)
    y.backward()
    torch.testing.assert_close(y.detach(), (_softplus(x.detach(), -2.0) * 3).sum())
    torch.testing.assert_close(x.grad, 3 * torch.sigmoid(-2.0 * x.detach()))
    fw_ops = [str(n.target) for n in fw[0].graph.nodes if n.op == "call_function"]
    assert "ipt.scaled_softplus.default" in fw_ops, f"forward graph should call the op: {fw_ops}"
    assert not any("logaddexp" in o or "softplus.default" == o.split("aten.")[-1] for o in fw_ops), f"op decomposed: {fw_ops}"
    assert bw, "a backward graph should be compiled"


@case("custom_op", "torch.compile with dynamic shapes: three shapes, right values")
def _(ref):
    f = torch.compile(lambda t: ref.scaled_softplus(t, 3.0) + 1, fullgraph=True, backend="aot_eager", dynamic=True)
    g = torch.Generator().manual_seed(9)
    for shape in ((2, 3), (5, 1), (4, 4)):
        x = torch.randn(*shape, generator=g)
        torch.testing.assert_close(f(x), _softplus(x, 3.0) + 1, rtol=1e-5, atol=1e-6)


@case("custom_op", "torch.export keeps ipt.scaled_softplus as one node and the program runs")
def _(ref):
    class M(nn.Module):
        def forward(self, x):
            return ref.scaled_softplus(x, 0.5) * 2

    ep = torch.export.export(M(), (torch.randn(3, 2),))
    ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert "ipt.scaled_softplus.default" in ops, f"exported graph: {ops}"
    x = torch.randn(3, 2)
    torch.testing.assert_close(ep.module()(x), _softplus(x, 0.5) * 2)


@case("custom_op", "second calls agree with the first; a training step through the op matches the torch formula")
def _(ref):
    torch.manual_seed(10)
    lin = nn.Linear(4, 3)
    twin = copy.deepcopy(lin)
    x = torch.randn(8, 4)
    a = ref.scaled_softplus(x, 1.5)
    torch.testing.assert_close(ref.scaled_softplus(x, 1.5), a, rtol=0, atol=0)
    for net, fn in ((lin, lambda t: ref.scaled_softplus(t, 1.5)), (twin, lambda t: _softplus(t, 1.5))):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            fn(net(x)).pow(2).mean().backward()
            opt.step()
    for p, q in zip(lin.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


# ===================================================================================================
# logging_mode
# ===================================================================================================
def _modules():
    torch.manual_seed(12)
    return {
        "Linear": (nn.Linear(3, 2), torch.randn(4, 3)),
        "Linear no bias": (nn.Linear(3, 2, bias=False), torch.randn(4, 3)),
        "MLP ReLU": (nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(5, 3)),
        "Tanh LayerNorm": (nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 1)), torch.randn(3, 4)),
        "Conv2d": (nn.Sequential(nn.Conv2d(2, 3, 3), nn.GELU(), nn.Flatten()), torch.randn(2, 2, 5, 5)),
    }


@case("logging_mode", "LoggingMode is a TorchDispatchMode with a list `ops`, empty before use")
def _(ref):
    m = ref.LoggingMode()
    assert isinstance(m, TorchDispatchMode), "LoggingMode should subclass TorchDispatchMode"
    _eq((type(m.ops), m.ops), (list, []), "a new mode's ops")


@case("logging_mode", "log_training_step logs exactly what a plain TorchDispatchMode sees, module by module")
def _(ref):
    for name, (module, x) in _modules().items():
        twin = copy.deepcopy(module)
        got = ref.log_training_step(module, x)
        with _Recorder() as rec:
            twin(x).sum().backward()
        _eq(got, rec.ops, f"ops of a training step of {name}")
        assert all(type(o) is str for o in got), f"{name}: ops should be str"


@case("logging_mode", "log_training_step leaves the same gradients as a plain step")
def _(ref):
    for name, (module, x) in _modules().items():
        twin = copy.deepcopy(module)
        ref.log_training_step(module, x)
        twin(x).sum().backward()
        for (pn, p), q in zip(module.named_parameters(), twin.parameters(), strict=True):
            assert p.grad is not None, f"{name}.{pn} has no gradient after log_training_step"
            torch.testing.assert_close(p.grad, q.grad, msg=lambda m: f"{name}.{pn}: {m}")


@case("logging_mode", "a second log_training_step (grads now accumulate) returns a fresh list equal to the oracle's")
def _(ref):
    torch.manual_seed(13)
    module = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid(), nn.Linear(3, 1))
    twin = copy.deepcopy(module)
    x = torch.randn(2, 3)
    first = ref.log_training_step(module, x)
    second = ref.log_training_step(module, x)
    twin(x).sum().backward()
    with _Recorder() as rec:
        twin(x).sum().backward()
    _eq(second, rec.ops, "ops of the second step")
    assert second is not first, "each call returns its own list"
    assert first.count("aten.addmm.default") == 2 and second.count("aten.addmm.default") == 2, "no carry-over between calls"


@case("logging_mode", "forward of nn.Linear: t then addmm; backward has mm and a sum")
def _(ref):
    torch.manual_seed(14)
    ops = ref.log_training_step(nn.Linear(5, 3), torch.randn(7, 5))
    _eq(ops[:2], ["aten.t.default", "aten.addmm.default"], "first ops")
    assert ops.count("aten.mm.default") >= 1 and any(o.startswith("aten.sum.") for o in ops), f"backward ops: {ops}"


@case("logging_mode", "results and in-place identity are the real ones; kwargs kept")
def _(ref):
    a = torch.arange(6.0).reshape(2, 3)
    with ref.LoggingMode() as mode:
        s = torch.sum(a, dim=0, keepdim=True)
        z = torch.zeros(2, dtype=torch.int32)
        r = a.add_(1)
        v = a.view(3, 2)
        m = torch.max(a, dim=1)
        parts = torch.split(a, 1)
    _eq(mode.ops, ["aten.sum.dim_IntList", "aten.zeros.default", "aten.add_.Tensor", "aten.view.default",
                   "aten.max.dim", "aten.split.Tensor"], "ops")
    assert torch.equal(s, torch.tensor([[3.0, 5.0, 7.0]])) and s.shape == (1, 3), f"sum keepdim: {s}"
    _eq(z.dtype, torch.int32, "dtype kwarg")
    assert r is a, "an in-place op under the mode returns its input"
    assert v.data_ptr() == a.data_ptr(), "a view under the mode aliases its base"
    assert torch.equal(m.values, torch.tensor([3.0, 6.0])) and torch.equal(m.indices, torch.tensor([2, 2])), f"max: {m}"
    _eq(len(parts), 2, "split")


@case("logging_mode", "factory functions with no tensor input are seen (the Python key comes from the TLS)")
def _(ref):
    with ref.LoggingMode() as mode:
        torch.empty(3)
        torch.arange(4)
        torch.full((2,), 7.0)
        torch.randn(2, generator=torch.Generator().manual_seed(0))
    with _Recorder() as rec:
        torch.empty(3)
        torch.arange(4)
        torch.full((2,), 7.0)
        torch.randn(2, generator=torch.Generator().manual_seed(0))
    _eq(mode.ops, rec.ops, "factory ops")
    assert len(mode.ops) == 4, f"four factory calls: {mode.ops}"


@case("logging_mode", "nested modes: LoggingMode inside or outside another mode, both see every op")
def _(ref):
    x = torch.randn(3, 3)

    def work():
        return (x @ x).relu().sum()

    with _Recorder() as outer, ref.LoggingMode() as inner:
        r1 = work()
    with ref.LoggingMode() as outer2, _Recorder() as inner2:
        r2 = work()
    with ref.LoggingMode() as l1, ref.LoggingMode() as l2:
        work()
    _eq(inner.ops, outer.ops, "LoggingMode inside a recorder")
    _eq(outer2.ops, inner2.ops, "LoggingMode outside a recorder")
    _eq((l1.ops, l2.ops), (outer.ops, outer.ops), "two LoggingModes")
    torch.testing.assert_close(r1, r2)


@case("logging_mode", "after the with block nothing more is logged; instances are independent")
def _(ref):
    m1 = ref.LoggingMode()
    _eq(m1.ops, [], "a new mode's ops")
    with m1:
        torch.ones(1)
    torch.ones(2) + 1
    m2 = ref.LoggingMode()
    with m2:
        torch.zeros(1)
    _eq((m1.ops, m2.ops), (["aten.ones.default"], ["aten.zeros.default"]), "(m1.ops, m2.ops)")


@case("logging_mode", "an op failing under the mode: the error propagates, the mode is popped, logs agree")
def _(ref):
    a, b = torch.randn(2, 3), torch.randn(2, 3)

    def bad():
        a.add(1)
        return a @ b

    mode = ref.LoggingMode()
    try:
        with mode:
            bad()
    except RuntimeError:
        pass
    else:
        raise AssertionError("a @ b with mismatched shapes should raise under the mode")
    rec = _Recorder()
    try:
        with rec:
            bad()
    except RuntimeError:
        pass
    torch.ones(1)
    _eq(mode.ops, rec.ops, "ops up to the failure")
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    _eq(_get_current_dispatch_mode_stack(), [], "mode stack after the exception")


@case("logging_mode", "the custom op and its backward are logged like a plain mode logs them")
def _(ref):
    x = torch.randn(4, requires_grad=True)
    with ref.LoggingMode() as mode:
        ref.scaled_softplus(x, 2.0).sum().backward()
    y = x.detach().clone().requires_grad_()
    with _Recorder() as rec:
        ref.scaled_softplus(y, 2.0).sum().backward()
    _eq(mode.ops, rec.ops, "ops")
    assert "ipt.scaled_softplus.default" in mode.ops and "aten.sigmoid.default" in mode.ops, f"ops: {mode.ops}"


@case("logging_mode", "a plain autograd graph (no module) and a no_grad forward")
def _(ref):
    x = torch.randn(3, requires_grad=True)
    with ref.LoggingMode() as m1:
        (x * 2).exp().sum().backward()
    x2 = x.detach().clone().requires_grad_()   # a fresh leaf: its first backward, like x's
    with _Recorder() as r1:
        (x2 * 2).exp().sum().backward()
    _eq(m1.ops, r1.ops, "ops of a small graph")
    w = torch.randn(4, 3, requires_grad=True)
    inp = torch.randn(2, 3)
    with torch.no_grad(), ref.LoggingMode() as m2:
        out = nn.functional.linear(inp, w)
    with torch.no_grad(), _Recorder() as r2:
        nn.functional.linear(inp, w)
    _eq(m2.ops, r2.ops, "ops of a no_grad forward")
    assert not out.requires_grad, "no graph under no_grad"


# ===================================================================================================
# python_device
# ===================================================================================================
def _dev_pair(ref, make, seed):
    torch.manual_seed(seed)
    cpu = make()
    dev = ref.module_to_device(copy.deepcopy(cpu))
    return cpu, dev


def _train(net, inp, tgt, steps, make_opt):
    opt = make_opt(net.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((net(inp) - tgt) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return losses


def _check_params(ref, dev, cpu, what, atol=1e-6):
    for (n, p), q in zip(dev.named_parameters(), cpu.parameters(), strict=True):
        assert type(p).__name__ == "NumpyTensor", f"{what}: {n} is a {type(p).__name__}"
        torch.testing.assert_close(ref.to_cpu(p), q.detach(), atol=atol, rtol=1e-5, msg=lambda m: f"{what}: {n}: {m}")


@case("python_device", "NumpyTensor(array): metadata from the array; it wraps the array (shares memory)")
def _(ref):
    for arr in (np.arange(6.0).reshape(2, 3), np.ones(4, dtype=np.float32), np.arange(3), np.array([True, False]),
                np.array(2.5), np.zeros((0, 2))):
        t = ref.NumpyTensor(arr)
        want_dtype = torch.from_numpy(arr).dtype
        _eq((tuple(t.shape), t.dtype, t.device.type, t.requires_grad), (arr.shape, want_dtype, "cpu", False),
            f"metadata of NumpyTensor({arr.dtype}, shape {arr.shape})")
        assert isinstance(t.payload, np.ndarray), f"the payload should be a numpy array, got {type(t.payload)}"
        if arr.size:
            assert np.shares_memory(t.payload, arr), "NumpyTensor(array) should wrap the array, not copy it"
    t = ref.NumpyTensor(np.ones(3), requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad_fn is None, "requires_grad=True gives a leaf that requires grad"


@case("python_device", "to_device copies (any layout); to_cpu gives a plain torch.Tensor with the values")
def _(ref):
    for src in (torch.arange(6.0).reshape(2, 3), torch.randn(3, 4, dtype=torch.float64).t(), torch.arange(5),
                torch.tensor(3.5), torch.randn(2, 3, requires_grad=True)):
        a = ref.to_device(src)
        assert type(a).__name__ == "NumpyTensor", f"to_device gave {type(a).__name__}"
        _eq((a.shape, a.dtype), (src.shape, src.dtype), "metadata after to_device")
        back = ref.to_cpu(a)
        assert type(back) is torch.Tensor, f"to_cpu should give a plain torch.Tensor, got {type(back).__name__}"
        assert torch.equal(back, src.detach()), "to_cpu(to_device(t)) should equal t"
        before = src.detach().clone()
        a.payload[...] = 0 if a.payload.size else a.payload
        assert torch.equal(src.detach(), before), "to_device should copy the data"


@case("python_device", "elementwise, matmul, reductions, broadcasting, cat on the device match the CPU")
def _(ref):
    g = torch.Generator().manual_seed(15)
    x, y, v = torch.randn(3, 4, generator=g), torch.randn(4, 2, generator=g), torch.randn(4, generator=g)
    X, Y, V = ref.to_device(x), ref.to_device(y), ref.to_device(v)
    for name, dev, cpu in (("x*2+1", X * 2 + 1, x * 2 + 1), ("x@y", X @ Y, x @ y), ("x+v", X + V, x + v),
                           ("tanh", torch.tanh(X), torch.tanh(x)), ("sum0", X.sum(0), x.sum(0)),
                           ("mean", X.mean(), x.mean()), ("cat", torch.cat([X, X], 1), torch.cat([x, x], 1)),
                           ("where", torch.where(X > 0, X, V), torch.where(x > 0, x, v)), ("t", X.t(), x.t()),
                           ("zeros_like", torch.zeros_like(X), torch.zeros_like(x))):
        assert type(dev).__name__ == "NumpyTensor", f"{name}: result is a {type(dev).__name__}"
        torch.testing.assert_close(ref.to_cpu(dev), cpu, msg=lambda m: f"{name}: {m}")


@case("python_device", "dtypes follow torch: comparisons give bool, integer ops stay int64, float32 stays float32")
def _(ref):
    a = ref.to_device(torch.arange(6).reshape(2, 3))
    f = ref.to_device(torch.ones(2, dtype=torch.float32))
    for name, t, dt in (("a>2", a > 2, torch.bool), ("a*3", a * 3, torch.int64), ("f/3", f / 3, torch.float32),
                        ("a.float()", a.float(), torch.float32)):
        _eq((type(t).__name__, t.dtype, np.dtype(t.payload.dtype)), ("NumpyTensor", dt, torch.empty(0, dtype=dt).numpy().dtype),
            f"{name}: (type, dtype, payload dtype)")
    torch.testing.assert_close(ref.to_cpu(a > 2), torch.arange(6).reshape(2, 3) > 2)


@case("python_device", "multi-output ops and non-tensor results (.item())")
def _(ref):
    x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    X = ref.to_device(x)
    vals, idx = torch.max(X, dim=1)
    assert type(vals).__name__ == "NumpyTensor" and type(idx).__name__ == "NumpyTensor", "both outputs on the device"
    torch.testing.assert_close(ref.to_cpu(vals), torch.tensor([5.0, 7.0]))
    assert torch.equal(ref.to_cpu(idx), torch.tensor([1, 0])), "argmax indices"
    item = X.sum().item()
    _eq((type(item), item), (float, 18.0), ".item() on the device")


@case("python_device", "in-place ops return the input wrapper and write into its payload")
def _(ref):
    a = ref.to_device(torch.arange(4.0))
    payload = a.payload
    b = ref.to_device(torch.ones(4))
    assert a.add_(1.0) is a, "add_ returns its input"
    assert a.mul_(b * 2) is a, "mul_ returns its input"
    c = a
    c += b
    assert c is a, "+= keeps the object"
    assert a.copy_(a * 0 + 9) is a and a.zero_() is a, "copy_ and zero_ return their input"
    a.add_(3.0)
    _eq(payload.tolist(), [3.0, 3.0, 3.0, 3.0], "the original payload array after the in-place ops")
    assert a.payload is payload or np.shares_memory(a.payload, payload), "in-place ops keep the payload's memory"


@case("python_device", "__torch_dispatch__ itself returns the input wrapper for in-place ops (the statement's rule)")
def _(ref):
    a, b = ref.to_device(torch.arange(3.0)), ref.to_device(torch.ones(3))
    T = type(a)
    for func, args in ((torch.ops.aten.add_.Tensor, (a, b)), (torch.ops.aten.mul_.Scalar, (a, 2.0)), (torch.ops.aten.zero_.default, (a,))):
        out = T.__torch_dispatch__(func, (T,), args, {})
        assert out is a, f"{func}: __torch_dispatch__ returned {type(out).__name__} {'(a new wrapper)' if out is not a else ''}"
    _eq(a.payload.tolist(), [0.0, 0.0, 0.0], "payload after add_, mul_, zero_")


@case("python_device", "views alias their base: an in-place op on a view writes into the base's payload")
def _(ref):
    a = ref.to_device(torch.arange(6.0).reshape(2, 3))
    row = a[0]
    row.add_(10.0)
    col = a.t()[1]
    col.mul_(-1.0)
    want = torch.arange(6.0).reshape(2, 3)
    want[0] += 10
    want[:, 1] *= -1
    assert torch.equal(ref.to_cpu(a), want), f"base after writes through views: {ref.to_cpu(a)}"


@case("python_device", "clone copies; detach keeps the values")
def _(ref):
    a = ref.to_device(torch.arange(3.0))
    c = a.clone()
    c.add_(5.0)
    _eq((ref.to_cpu(a).tolist(), ref.to_cpu(c).tolist()), ([0.0, 1.0, 2.0], [5.0, 6.0, 7.0]), "(a, clone + 5)")
    d = a.detach()
    assert type(d).__name__ == "NumpyTensor" and torch.equal(ref.to_cpu(d), ref.to_cpu(a)), "detach"


@case("python_device", "module_to_device: same module back, every parameter an nn.Parameter over a NumpyTensor")
def _(ref):
    torch.manual_seed(16)
    m = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Linear(4, 4, bias=False), nn.LayerNorm(4)), nn.Linear(4, 1))
    vals = {n: p.detach().clone() for n, p in m.named_parameters()}
    out = ref.module_to_device(m)
    assert out is m, "module_to_device should return the module itself"
    _eq(sorted(n for n, _ in m.named_parameters()), sorted(vals), "parameter names")
    for n, p in m.named_parameters():
        assert isinstance(p, nn.Parameter) and type(p).__name__ == "NumpyTensor" or \
            (isinstance(p, nn.Parameter) and isinstance(p, ref.NumpyTensor)), f"{n}: {type(p)}"
        assert p.requires_grad and p.dtype == vals[n].dtype and p.shape == vals[n].shape, f"{n}: metadata"
        torch.testing.assert_close(ref.to_cpu(p), vals[n], msg=lambda msg: f"{n}: {msg}")
    assert m[1][0].bias is None, "a missing bias stays None"


@case("python_device", "a module used twice keeps one shared parameter (like nn.Module.to)")
def _(ref):
    lin = nn.Linear(3, 3, bias=False)
    m = nn.Sequential(lin, nn.Tanh(), lin)
    ref.module_to_device(m)
    assert m[0].weight is m[2].weight and len(list(m.parameters())) == 1, "the shared module's weight stays shared"


@case("python_device", "a parameter shared by two different modules stays one parameter (like nn.Module.to)")
def _(ref):
    emb, head = nn.Linear(4, 4), nn.Linear(4, 4)
    head.weight = emb.weight
    m = nn.Sequential(emb, nn.Tanh(), head)
    ref.module_to_device(m)
    assert m[0].weight is m[2].weight and len(list(m.parameters())) == 3, (
        f"a weight tied across two modules should stay one parameter; got {len(list(m.parameters()))} parameters")


@case("python_device", "second forward calls with other batch sizes match the CPU")
def _(ref):
    cpu, dev = _dev_pair(ref, lambda: nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), 23)
    for n in (1, 7, 7, 3):
        x = torch.randn(n, 3)
        out = dev(ref.to_device(x))
        assert type(out).__name__ == "NumpyTensor" and out.shape == (n, 2), f"batch {n}: {type(out).__name__} {out.shape}"
        torch.testing.assert_close(ref.to_cpu(out), cpu(x).detach(), rtol=1e-5, atol=1e-6)


@case("python_device", "three SGD steps of an MLP: losses and parameters equal the CPU's")
def _(ref):
    cpu, dev = _dev_pair(ref, lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)), 17)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    lc = _train(cpu, x, y, 3, lambda ps: torch.optim.SGD(ps, lr=0.1))
    ld = _train(dev, ref.to_device(x), ref.to_device(y), 3, lambda ps: torch.optim.SGD(ps, lr=0.1))
    torch.testing.assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-5, atol=1e-6)
    _check_params(ref, dev, cpu, "after 3 steps")
    for p in dev.parameters():
        assert type(p.grad).__name__ == "NumpyTensor", f"gradients should live on the device, got {type(p.grad)}"


@case("python_device", "SGD with momentum, weight decay and nesterov; ReLU and LayerNorm; two steps")
def _(ref):
    make = lambda: nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 2))  # noqa: E731
    cpu, dev = _dev_pair(ref, make, 18)
    x, y = torch.randn(10, 4), torch.randn(10, 2)
    opt = lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True)  # noqa: E731
    lc = _train(cpu, x, y, 2, opt)
    ld = _train(dev, ref.to_device(x), ref.to_device(y), 2, opt)
    torch.testing.assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-5, atol=1e-6)
    _check_params(ref, dev, cpu, "after momentum steps")


@case("python_device", "Adam on the device matches Adam on the CPU")
def _(ref):
    cpu, dev = _dev_pair(ref, lambda: nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 1)), 19)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    lc = _train(cpu, x, y, 2, lambda ps: torch.optim.Adam(ps, lr=0.01))
    ld = _train(dev, ref.to_device(x), ref.to_device(y), 2, lambda ps: torch.optim.Adam(ps, lr=0.01))
    torch.testing.assert_close(torch.tensor(ld), torch.tensor(lc), rtol=1e-5, atol=1e-6)
    _check_params(ref, dev, cpu, "after Adam steps")


@case("python_device", "frozen parameters stay frozen: no gradient, unchanged, the rest matches the CPU")
def _(ref):
    torch.manual_seed(20)
    cpu = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    cpu[0].requires_grad_(False)
    dev = ref.module_to_device(copy.deepcopy(cpu))
    frozen = ref.to_cpu(dev[0].weight).clone()
    assert not dev[0].weight.requires_grad and not dev[0].bias.requires_grad, "frozen parameters should stay frozen"
    x, y = torch.randn(6, 3), torch.randn(6, 1)
    _train(cpu, x, y, 2, lambda ps: torch.optim.SGD(ps, lr=0.2))
    _train(dev, ref.to_device(x), ref.to_device(y), 2, lambda ps: torch.optim.SGD(ps, lr=0.2))
    assert dev[0].weight.grad is None, "a frozen parameter gets no gradient"
    assert torch.equal(ref.to_cpu(dev[0].weight), frozen), "a frozen parameter is unchanged"
    _check_params(ref, dev, cpu, "with a frozen layer")


@case("python_device", "gradients accumulate over two backward passes like on the CPU; input gradients too")
def _(ref):
    cpu, dev = _dev_pair(ref, lambda: nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2)), 21)
    x = torch.randn(4, 3)
    xc = x.clone().requires_grad_()
    xd = ref.NumpyTensor(x.numpy().copy(), requires_grad=True)
    for _ in range(2):
        cpu(xc).pow(2).sum().backward()
        dev(xd).pow(2).sum().backward()
    for (n, p), q in zip(dev.named_parameters(), cpu.parameters(), strict=True):
        torch.testing.assert_close(ref.to_cpu(p.grad), q.grad, rtol=1e-5, atol=1e-6, msg=lambda m: f"{n}.grad: {m}")
    assert type(xd.grad).__name__ == "NumpyTensor", f"the input's gradient is a {type(xd.grad).__name__}"
    torch.testing.assert_close(ref.to_cpu(xd.grad), xc.grad, rtol=1e-5, atol=1e-6)


@case("python_device", "float64 modules stay float64 on the device and train like the CPU")
def _(ref):
    cpu, dev = _dev_pair(ref, lambda: nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double(), 22)
    for p in dev.parameters():
        _eq((p.dtype, p.payload.dtype), (torch.float64, np.dtype("float64")), "dtype of a float64 parameter")
    x, y = torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    _train(cpu, x, y, 2, lambda ps: torch.optim.SGD(ps, lr=0.3))
    _train(dev, ref.to_device(x), ref.to_device(y), 2, lambda ps: torch.optim.SGD(ps, lr=0.3))
    _check_params(ref, dev, cpu, "float64", atol=1e-12)


@case("python_device", "the LoggingMode sees the device's ops (Python mode above the subclass)")
def _(ref):
    a = ref.to_device(torch.ones(2, 2))
    with ref.LoggingMode() as mode:
        b = a @ a
    _eq(mode.ops, ["aten.mm.default"], "ops on NumpyTensors under the mode")
    torch.testing.assert_close(ref.to_cpu(b), torch.full((2, 2), 2.0))


def run() -> int:
    return SUITE.run()
