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
    assert lab.compute_keyset([t, 2]) == lab.DispatchKeySet([K.CPU, K.AutogradCPU])
    with lab.ExcludeKeys(K.AutogradCPU), lab.IncludeKeys(K.Tracer):
        assert lab.compute_keyset([t]) == lab.DispatchKeySet([K.CPU, K.Tracer]), "(keys | included) - excluded"
    assert lab.compute_keyset([t]) == lab.DispatchKeySet([K.CPU, K.AutogradCPU]), "the guards should restore the TLS on exit"
