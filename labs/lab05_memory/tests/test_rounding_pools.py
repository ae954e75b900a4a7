"""Public tests of part `rounding_pools` (run them with check("rounding_pools"))."""
MiB = 1024 * 1024


def test_round_size(lab):
    for n, want in [(0, 512), (4, 512), (512, 512), (513, 1024), (MiB + 1, MiB + 512)]:
        assert lab.round_size(n) == want, f"round_size({n}) should be {want}"


def test_pools_and_segments(lab):
    assert lab.get_pool(MiB) == "small" and lab.get_pool(MiB + 512) == "large", "small up to and including 1 MiB"
    assert lab.allocation_size(512) == 2 * MiB, "small requests get a 2 MiB segment"
    assert lab.allocation_size(3 * MiB) == 20 * MiB, "1-10 MiB requests get a 20 MiB segment"
    assert lab.allocation_size(11 * MiB) == 12 * MiB, "bigger requests: their size rounded up to 2 MiB"


def test_segment_size_boundaries(lab):
    assert lab.allocation_size(10 * MiB - 512) == 20 * MiB, "just below 10 MiB still shares a 20 MiB segment"
    assert lab.allocation_size(10 * MiB) == 10 * MiB, "10 MiB and above: own segment, rounded up to 2 MiB"
    assert lab.allocation_size(MiB) == 2 * MiB, "exactly 1 MiB is a small request"
