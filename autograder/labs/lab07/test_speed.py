"""Part `speed`: the learner's backend on memory-bound chains of 4M float32, timed here in P0 around calls of a
scenario (P1 pinned to one CPU) and interleaved with eager runs done here with one thread; medians."""
import time

import numpy as np
import pytest
import torch

from autograder.labs.lab07 import oracle

CHAINS = ["x*sigmoid(x) + sin(y)", "tanh(x) * exp(-y) + x", "silu(x) * y"]
ROUNDS, K = 5, 4
_result = {}


def measure(student):
    """Per chain: values, kernel counts, and the median time of K compiled calls (P1) and K eager calls (P0)."""
    if _result:
        return _result
    torch.set_num_threads(1)
    for seed, chain in enumerate(CHAINS):
        setup = student.run("speed_setup", chain, seed)
        want = oracle.chain_eager(chain, seed).reshape(-1)
        entry = {"setup": setup, "want_sample": want[::4099].numpy(), "want_sum": float(want.double().sum())}
        x, y = oracle.shared.chain_inputs(seed)
        fn = oracle.shared.CHAINS[chain]
        fn(x, y)
        student.run("speed_run", 1)
        ours, eager, empty = [], [], []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            student.run("speed_run", 0)
            empty.append(time.perf_counter() - start)
            start = time.perf_counter()
            student.run("speed_run", K)
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in range(K):
                fn(x, y)
            eager.append(time.perf_counter() - start)
        compiled = max(oracle.median(ours) - oracle.median(empty), 1e-6)
        entry["ratio"] = oracle.median(eager) / compiled
        _result[chain] = entry
    return _result


def right(entry):
    s = entry["setup"]
    return (np.allclose(s["sample"], entry["want_sample"], rtol=1e-4, atol=1e-4)
            and abs(s["checksum"] - entry["want_sum"]) <= 1e-3 * max(1.0, abs(entry["want_sum"])) + 1.0)


@pytest.mark.weight(1)
def test_values(student):
    for chain, entry in measure(student).items():
        s = entry["setup"]
        assert s["shape"] == [oracle.shared.SPEED_N], f"{chain}: the compiled chain returned shape {s['shape']}"
        assert right(entry), f"{chain} compiled with your backend gives wrong values on 4M elements"
        assert s["kernels"] == [1], f"{chain} should run as one fused kernel, COMPILED_KERNELS is {s['kernels']}"
        assert s["built"] > 0, f"{chain}: build_count() is 0, your backend built no kernel"


def speedup(student, measurement):
    result = measure(student)
    ratio = oracle.geomean([e["ratio"] for e in result.values()])
    measurement("speedup of the compiled chains over eager (geometric mean, 1 thread)", ratio, "x")
    return ratio, all(right(e) and e["setup"]["kernels"] == [1] for e in result.values())


@pytest.mark.weight(2)
def test_not_slower_than_eager(student, measurement):
    ratio, ok = speedup(student, measurement)
    assert ok, "the compiled chains give wrong values or do not fuse: speed earns nothing then"
    assert ratio >= 1.0, "your compiled chains are slower than eager PyTorch (one thread): check that the kernel loops vectorise and that no input is copied"


@pytest.mark.weight(2)
def test_speedup(student, measurement):
    ratio, ok = speedup(student, measurement)
    assert ok, "the compiled chains give wrong values or do not fuse: speed earns nothing then"
    assert ratio >= 1.2, "your compiled chains are less than 1.2x faster than eager PyTorch (one thread): a fused kernel should read each input once"

# IPT-CANARY lab07 test_speed.py: hidden grading text, never shown to learners
