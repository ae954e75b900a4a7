"""Public tests of part `speed` (run them with check("speed")). The graders time this more carefully: they compile
your kernel themselves and measure it on one CPU of the grading host (Linux, gcc, glibc)."""
import platform
import shutil
import subprocess
import time

import pytest
import torch


def _gcc_on_linux():
    if platform.system() != "Linux" or shutil.which("cc") is None:
        return False
    try:
        version = subprocess.run(["cc", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "gcc" in version.lower() or "free software foundation" in version.lower()


def test_chain_is_faster_than_eager(lab):
    torch._dynamo.reset()

    def chain(x, y):
        return x * torch.sigmoid(x) + y.sin()

    x, y = torch.randn(1 << 21), torch.randn(1 << 21)
    compiled = torch.compile(chain, backend=lab.fusing_backend)
    assert torch.allclose(compiled(x, y), chain(x, y), atol=1e-5), "the compiled chain x * sigmoid(x) + sin(y) gives wrong values"
    if not _gcc_on_linux():
        torch._dynamo.reset()
        pytest.skip("the speed check is only meaningful with gcc on Linux (glibc's vectorised math under -ffast-math); "
                    "your values are right, and your speed is measured on the grading host")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = {"eager": [], "compiled": []}
        for _ in range(5):
            for name, f in (("eager", chain), ("compiled", compiled)):
                start = time.perf_counter()
                f(x, y)
                times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
    eager, ours = sorted(times["eager"])[2], sorted(times["compiled"])[2]
    assert eager / ours >= 1.0, (f"the compiled chain is not faster than eager: {1e3 * ours:.1f} ms vs {1e3 * eager:.1f} ms; "
                                 "check that your kernel loop vectorises and that run_kernel copies no input")
