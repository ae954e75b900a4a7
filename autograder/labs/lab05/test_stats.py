"""Part `stats`: memory_stats() after every event against the reference allocator, and on states P0 sets up
directly (so that the part does not rest on the learner's malloc/free alone)."""
import pytest
from hypothesis import given, settings, strategies as st

from autograder.engine import replies
from autograder.labs.lab05 import checks, oracle
from autograder.labs.lab05.oracle import KiB, MiB

KEYS = [f"{k}.all.{w}" for k in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment")
        for w in ("current", "peak")] + ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
                                          "inactive_split.all.current", "inactive_split_bytes.all.current",
                                          "largest_free_block", "fragmentation"]


def _compare_row(got, want, where, reveal):
    row = replies.dict_of(got, KEYS, f"{where}memory_stats()")
    for key in KEYS:
        w = want[key]
        if key == "fragmentation":
            g = replies.number(row[key], f"{where}memory_stats()['fragmentation']")
            ok = abs(g - w) <= 1e-9
        else:
            g = replies.integer(row[key], f"{where}memory_stats()[{key!r}]")
            ok = g == w
        assert ok, (f"{where}memory_stats()[{key!r}] should be {w}, got {g}" if reveal else
                    f"{where}memory_stats()[{key!r}] is {g}, which is not what the allocator's state gives")


def _check(student, events, capacity, reveal=False, label=None):
    label = label or f"a generated trace on a {capacity // MiB} MiB device"
    got = student.run("lab05.scenarios:run_trace", events, capacity, stats=True)
    ref = oracle.run(events, capacity, stats=True)
    got = checks.compare_trace(events, got, ref, label, reveal=reveal, check_snapshot=False)
    rows = replies.list_of(got.get("stats"), f"{label}: memory_stats() after each event", len(events))
    for i, (g, w) in enumerate(zip(rows, ref["stats"], strict=True)):
        _compare_row(g, w, f"{label}, after event {i} {events[i]}: ", reveal)


FIXED = {
    "holes": ([["alloc", i, 48 * KiB] for i in range(30)] + [["free", i, 0] for i in range(1, 30, 2)], 1 << 30),
    "large-slack": ([["alloc", 0, 19 * MiB + 100], ["alloc", 1, 3 * MiB], ["free", 1, 0], ["free", 0, 0]], 1 << 30),
    "retry-and-oom": ([["alloc", 0, 30 * MiB], ["free", 0, 0], ["alloc", 1, 40 * MiB], ["alloc", 2, 20 * MiB],
                       ["alloc", 3, 1000], ["free", 1, 0], ["alloc", 4, 20 * MiB]], 48 * MiB),
    "empty-cache-and-bad-free": ([["alloc", 0, 5 * MiB], ["alloc", 1, 700], ["alloc", 2, 12 * MiB], ["free", 2, 0],
                                  ["bad_free", 2, 0], ["empty_cache", 0, 0], ["free", 0, 0], ["alloc", 3, 0]], 1 << 30),
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(FIXED))
def test_fixed(student, name):
    events, capacity = FIXED[name]
    _check(student, events, capacity, reveal=True, label=f"trace {name} on a {capacity // MiB} MiB device")


@settings(max_examples=15)
@given(oracle.traces(max_size=40, bad_frees=True, empty_cache=True), st.sampled_from((32, 64, 4096)))
def test_generated(student, events, cap_mib):
    _check(student, events, cap_mib * MiB)


B = 1 << 32


@st.composite
def states(draw):
    """Segments cut into blocks (no two free neighbours), plus arbitrary stat values P0 chose."""
    segments, addr = [], B
    for _ in range(draw(st.integers(0, 4))):
        pool = draw(st.sampled_from(("small", "large")))
        sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=6))
        rows, a, prev_free = [], addr, False
        for k in sizes:
            allocated = draw(st.booleans()) if not prev_free else True
            rows.append([a, k * 512 * (1 if pool == "small" else 4096), allocated])
            a += rows[-1][1]
            prev_free = not allocated
        segments.append([addr, pool, rows])
        addr = -(-a // (2 * MiB)) * (2 * MiB) + 2 * MiB
    reserved = sum(r[1] for s in segments for r in s[2])
    allocated = sum(r[1] for s in segments for r in s[2] if r[2])
    stats = {name: [v, v + draw(st.integers(0, 5000))] for name, v in
             [(n, draw(st.integers(0, 10 ** 6))) for n in oracle.STAT_NAMES]}
    stats["reserved_bytes"][0], stats["allocated_bytes"][0] = reserved, allocated
    stats["reserved_bytes"][1] = max(stats["reserved_bytes"][1], reserved)
    stats["allocated_bytes"][1] = max(stats["allocated_bytes"][1], allocated)
    return segments, stats


def _expected(segments, stats):
    out = {}
    for k in ("allocated_bytes", "requested_bytes", "reserved_bytes", "active", "segment"):
        out[f"{k}.all.current"], out[f"{k}.all.peak"] = stats[k]
    for k in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        out[k] = stats[k][0]
    free = [(r[1], len(rows) > 1) for _, _, rows in segments for r in rows if not r[2]]
    out["inactive_split.all.current"] = sum(1 for _, split in free if split)
    out["inactive_split_bytes.all.current"] = sum(n for n, split in free if split)
    out["largest_free_block"] = max((n for n, _ in free), default=0)
    cached = stats["reserved_bytes"][0] - stats["allocated_bytes"][0]
    out["fragmentation"] = 1.0 - out["largest_free_block"] / cached if cached > 0 else 0.0
    return out


@pytest.mark.weight(2)
@settings(max_examples=10)
@given(states())
def test_stats_of_a_given_state(student, state):
    segments, stats = state
    got = student.run("lab05.scenarios:stats_of_state", 1 << 40, segments, stats)
    shape = [(pool, [(r[1], "allocated" if r[2] else "free") for r in rows]) for _, pool, rows in segments]
    _compare_row(got, _expected(segments, stats), f"an allocator holding segments {shape[:3]}: ", reveal=False)

# IPT-CANARY lab05 test_stats.py: hidden grading text, never shown to learners
