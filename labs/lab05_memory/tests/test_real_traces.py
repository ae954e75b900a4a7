"""Public tests of part `real_traces` (run them with check("real_traces"))."""
KiB, MiB = 1024, 1024 * 1024

# the start of a recorded MLP training step: weights, activations, gradients
TRACE = [["alloc", 0, 8388608], ["alloc", 1, 8192], ["alloc", 2, 1048576], ["alloc", 3, 1048576], ["free", 2, 1048576],
         ["alloc", 4, 40], ["alloc", 5, 4], ["free", 4, 40], ["alloc", 6, 1048576], ["free", 3, 1048576],
         ["alloc", 7, 8388608], ["free", 6, 1048576], ["free", 0, 8388608], ["alloc", 8, 8192], ["free", 5, 4]]


def test_replay(lab):
    alloc = lab.CachingAllocator(lab.Device(1024 * MiB))
    addrs = lab.replay(alloc, TRACE)
    assert len(addrs) == len(TRACE), "one address per event"
    assert addrs[12] == addrs[0], "a free returns the address it freed"
    assert addrs[7] == addrs[5], "the address of a free is the address of its alloc"
    assert addrs[10] == addrs[0] + 8 * MiB, "the second 8 MiB tensor shares the 20 MiB segment"
    s = alloc.memory_stats()
    assert (s["active.all.current"], s["num_device_alloc"]) == (3, 3), (
        f"after the trace: 3 live tensors and 3 device mallocs, got {s['active.all.current']} and {s['num_device_alloc']}")


class Recorder:
    """Any object with malloc(nbytes) -> address and free(address) can be replayed on."""

    def __init__(self):
        self.calls, self.next = [], 0x1000

    def malloc(self, nbytes):
        self.calls.append(("malloc", nbytes))
        self.next += 0x1000
        return self.next

    def free(self, addr):
        self.calls.append(("free", addr))


def test_replay_uses_the_given_allocator(lab):
    rec = Recorder()
    addrs = lab.replay(rec, [["alloc", 7, 100], ["alloc", 3, 5000], ["free", 7, 100], ["free", 3, 5000]])
    assert rec.calls == [("malloc", 100), ("malloc", 5000), ("free", 0x2000), ("free", 0x3000)], (
        f"replay calls allocator.malloc(nbytes) and allocator.free(address of that id), in order; got {rec.calls}")
    assert list(addrs) == [0x2000, 0x3000, 0x2000, 0x3000], (
        f"replay returns, per event, the address malloc gave (alloc) or the one freed (free); got {list(addrs)}")
