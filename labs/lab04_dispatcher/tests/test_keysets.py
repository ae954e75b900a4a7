"""Public tests of part `keysets` (run them with check("keysets"))."""


def test_bits_and_priority(lab):
    K = lab.DispatchKey
    ks = lab.DispatchKeySet([K.CPU, K.AutogradCPU])
    assert ks.bits == (1 << 1) | (1 << 8), f"DispatchKeySet([CPU, AutogradCPU]).bits should be 258, got {ks.bits}"
    assert ks.highest() == K.AutogradCPU, f"the highest-priority key should be AutogradCPU, got {ks.highest()}"
    assert list(ks) == [K.AutogradCPU, K.CPU], f"iteration should go from the highest priority down, got {list(ks)}"
    assert ks.below(K.AutogradCPU) == lab.DispatchKeySet([K.CPU]), "below(AutogradCPU) should keep only CPU"
    assert lab.DispatchKeySet().highest() == K.Undefined, "an empty set's highest key is Undefined"


def test_tls_guards(lab):
    K = lab.DispatchKey
    t = lab.MiniTensor(1.0, [K.CPU, K.AutogradCPU])
    assert lab.compute_keyset([t, 2]) == lab.DispatchKeySet([K.CPU, K.AutogradCPU]), "the keyset of a call is the union of its tensors' keys"
    with lab.ExcludeKeys(K.AutogradCPU), lab.IncludeKeys(K.Tracer):
        assert lab.compute_keyset([t]) == lab.DispatchKeySet([K.CPU, K.Tracer]), "(keys | included) - excluded"
    assert lab.compute_keyset([t]) == lab.DispatchKeySet([K.CPU, K.AutogradCPU]), "the guards should restore the TLS on exit"


def test_set_operations_and_undefined(lab):
    K, KS = lab.DispatchKey, lab.DispatchKeySet
    a = KS([K.CPU, K.Python, K.Undefined])
    assert a.bits == (1 << 1) | (1 << 5), f"Undefined has no bit: DispatchKeySet([CPU, Python, Undefined]).bits should be 34, got {a.bits}"
    b = a.add(K.Tracer)
    assert a.bits == 34 and b.bits == 34 | (1 << 9), "add() should return a new set and leave the original unchanged"
    assert b.remove(K.CPU) == KS([K.Python, K.Tracer]), "remove(CPU) should drop CPU"
    assert (a | KS([K.Meta])).bits == 38 and (a & KS([K.CPU])).bits == 2 and (a - KS([K.CPU])).bits == 32, "|, & and - work on the bits"
    assert len(b) == 3 and bool(b) and not KS() and len(KS()) == 0, "len counts the keys; an empty set is falsy"
    assert KS.from_bits(b.bits) == b and hash(KS.from_bits(b.bits)) == hash(b), "from_bits gives an equal set with the same hash"
    assert (a == 34) is False, "a DispatchKeySet is never equal to something that is not a DispatchKeySet"
    assert b.below(K.Python) == KS([K.CPU]) and b.below(K.CPU) == KS(), "below(key) keeps the keys strictly lower than key"


def test_guards_nest_restore_on_error_and_are_thread_local(lab):
    import threading
    K = lab.DispatchKey
    t = lab.MiniTensor(1.0, [K.CPU])
    with lab.IncludeKeys(K.Tracer):
        with lab.IncludeKeys(K.Tracer, K.Python):
            pass
        assert lab.compute_keyset([t]).has(K.Tracer), "an inner guard's exit must put back the outer guard's state"
        seen = []
        thread = threading.Thread(target=lambda: seen.append(lab.compute_keyset([t])))
        thread.start()
        thread.join()
        assert seen == [lab.DispatchKeySet([K.CPU])], f"another thread must not see this thread's guards, it saw {seen}"
    try:
        with lab.ExcludeKeys(K.CPU):
            raise ValueError("boom")
    except ValueError:
        pass
    assert lab.local_keysets() == (lab.DispatchKeySet(), lab.DispatchKeySet()), "a guard must restore the TLS when an exception leaves it"
    assert lab.compute_keyset([[t, lab.MiniTensor(0.0, [K.Meta])], (lab.MiniTensor(0.0, [K.Python]),), "x"]) == \
        lab.DispatchKeySet([K.CPU, K.Meta, K.Python]), "tensors inside list and tuple arguments count"
