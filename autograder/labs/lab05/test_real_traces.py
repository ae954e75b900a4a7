"""Part `real_traces`: replay() on a stand-in allocator (replay alone), then the learner's allocator on traces
recorded from real training steps, and on variants of them P0 derives (a device too small for them is part 4's test_real_trace_tight_device)."""
import pytest
from hypothesis import given, settings

from autograder.engine import replies
from autograder.labs.lab05 import checks, oracle
from autograder.labs.lab05.oracle import MiB

BIG = 8 << 30


def stand_in(events, base):
    """P0's model of scenarios.replay_fake's stand-in allocator: what a correct replay returns."""
    live, cache, nxt, ids, out = {}, {}, base, {}, []
    for kind, ident, nbytes in events:
        if kind == "alloc":
            stack = cache.get(nbytes)
            if stack:
                addr = stack.pop()
            else:
                addr, nxt = nxt, nxt + 4096 * (1 + nbytes // 4096)
            live[addr] = nbytes
            ids[ident] = addr
        else:
            addr = ids.pop(ident)
            cache.setdefault(live.pop(addr), []).append(addr)
        out.append(addr)
    return out, sorted(live)


def _replay_fake(student, events, base, label):
    got = replies.dict_of(student.run("lab05.scenarios:replay_fake", events, base), {"addresses", "live"}, "replay")
    addrs = replies.list_of(got["addresses"], f"{label}: replay(allocator, events) should return one address per event;"
                                              " the list", len(events))
    want, live = stand_in(events, base)
    for i, (e, g, w) in enumerate(zip(events, addrs, want, strict=True)):
        assert g == w, (f"{label}, event {i} {e}: replay returned {g!r} where allocator.malloc/free of the allocator it "
                        f"was given {'returned' if e[0] == 'alloc' else 'was called with'} another address "
                        "(call malloc(nbytes) for an alloc, free(address of that id) for a free, in order)")
    got_live = replies.int_list(got["live"], f"{label}: live blocks after replay")
    assert got_live == live, f"{label}: after replay the allocator it was given holds {len(got_live)} live block(s), want {len(live)}"


def _variant(events, k):
    """A trace P0 derives from a recorded one: other sizes, same pattern of lifetimes."""
    scale = [(3, 2, 7), (1, 3, 1), (5, 4, 513)][k]
    return [[kind, ident, n * scale[0] // scale[1] + scale[2]] for kind, ident, n in events]


@pytest.mark.weight(3)
@pytest.mark.parametrize("name", ["mlp_sgd", "convnet_adam"])
def test_replay_calls_the_given_allocator(student, name):
    _replay_fake(student, oracle.load_trace(name), (1 << 40) + 4096 * len(name), f"trace {name}")


@settings(max_examples=8)
@given(oracle.traces(max_size=40))
def test_replay_generated(student, events):
    _replay_fake(student, events, 1 << 36, "a generated trace")


def _allocator_run(student, events, capacity, label):
    got = replies.dict_of(student.run("lab05.scenarios:run_trace", events, capacity, use_replay=True),
                          {"addresses", "snapshot"}, "replay")
    checks.compare_trace(events, {"addresses": got["addresses"], "errors": [], "snapshot": got["snapshot"]},
                         oracle.run(events, capacity), label)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", oracle.REAL_TRACES)
def test_exact_addresses(student, name, measurement):
    events = oracle.load_trace(name)
    ref = oracle.run(events, BIG)["final"]
    measurement(f"{name}: cudaMalloc calls with the cache (no cache: {oracle.no_cache_device_mallocs(events)})",
                ref["num_device_alloc"], "calls")
    _allocator_run(student, events, BIG, f"trace {name}")


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("name", ["mlp_sgd", "convnet_adam"])
def test_variants(student, name, k):
    _allocator_run(student, _variant(oracle.load_trace(name), k), BIG, f"a variant of trace {name}")


# IPT-CANARY lab05 test_real_traces.py: hidden grading text, never shown to learners
