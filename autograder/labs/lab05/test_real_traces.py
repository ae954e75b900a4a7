"""Part `real_traces`: replay of traces recorded from real training steps; invariants and quality."""
import pytest

from autograder.labs.lab05 import oracle
from autograder.labs.lab05.oracle import MiB

BIG = 8 << 30


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", oracle.REAL_TRACES)
def test_replay_quality(student, name, measurement):
    events = oracle.load_trace(name)
    got = student.run("lab05.scenarios:run_trace", events, BIG, stats=True, use_replay=True)
    assert len(got["addresses"]) == len(events), f"replay should return one address per event ({len(events)}), got {len(got['addresses'])}"
    problem = oracle.check_live_no_overlap(events, got["addresses"])
    assert problem is None, f"trace {name}: {problem}"
    problem = oracle.check_snapshot(got["snapshot"], f"trace {name}, at the end: ")
    assert problem is None, problem
    ref = oracle.run(events, BIG)["final"]
    peak = got["stats"]["reserved_bytes.all.peak"]
    measurement(f"{name}: peak reserved / reference", peak / ref["reserved_bytes.all.peak"], "x")
    assert peak <= 1.2 * ref["reserved_bytes.all.peak"], (
        f"trace {name}: peak reserved {peak / MiB:.1f} MiB, more than 1.2x PyTorch's rules "
        f"({ref['reserved_bytes.all.peak'] / MiB:.1f} MiB)")
    mallocs = got["stats"]["num_device_alloc"]
    no_cache = oracle.no_cache_device_mallocs(events)
    measurement(f"{name}: cudaMalloc calls (no cache: {no_cache})", mallocs, "calls")
    assert mallocs <= max(2 * ref["num_device_alloc"], 1) and mallocs * 4 <= no_cache, (
        f"trace {name}: {mallocs} device mallocs for {no_cache} allocations; the cache should need about "
        f"{ref['num_device_alloc']}")


@pytest.mark.parametrize("name", oracle.REAL_TRACES)
def test_exact_addresses(student, name):
    events = oracle.load_trace(name)
    got = student.run("lab05.scenarios:run_trace", events, BIG, use_replay=True)
    ref = oracle.run(events, BIG)
    for i, (e, g, w) in enumerate(zip(events, got["addresses"], ref["addresses"])):
        assert g == w, f"trace {name}, event {i} {e}: want {w and hex(w)}, got {g and hex(g)}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["convnet_adam", "mlp_wide"])
def test_tight_device(student, name):
    """A device smaller than the cache wants: cached segments are released and retried, some requests fail."""
    events = oracle.load_trace(name)
    replayed = student.run("lab05.scenarios:run_trace", events[:200], BIG, use_replay=True)
    assert replayed["addresses"] == oracle.run(events[:200], BIG)["addresses"], f"replay of trace {name} gives wrong addresses"
    peak = oracle.run(events, BIG)["final"]["reserved_bytes.all.peak"]
    capacity = int(peak * 0.8) // (2 * MiB) * (2 * MiB)
    ref = oracle.run(events, capacity)
    got = student.run("lab05.scenarios:run_trace", events, capacity)
    got_ooms = [i for i, _ in got["ooms"]]
    assert got_ooms == ref["ooms"], (f"trace {name} on a {capacity // MiB} MiB device: OutOfMemoryError expected at "
                                     f"events {ref['ooms'][:8]}..., got {got_ooms[:8]}...")
    problem = oracle.check_live_no_overlap(events, got["addresses"])
    assert problem is None, f"trace {name} on a {capacity // MiB} MiB device: {problem}"
    assert got["addresses"] == ref["addresses"], f"trace {name} on a {capacity // MiB} MiB device: addresses differ from PyTorch's rules"


# IPT-CANARY lab05 test_real_traces.py: hidden grading text, never shown to learners
