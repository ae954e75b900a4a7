"""The shared frame of the labs' peer suites (`autograder/labs/labNN/peers.py`): a registry of cases and a
runner that checks every case against the reference solution and lists every disagreement.

    SUITE = Suite("lab08")
    case, CASES, reference = SUITE.case, SUITE.cases, SUITE.reference

    @case("quantize", "ties round half to even")
    def _(ref): ...                  # raises AssertionError on a disagreement

    def run() -> int: return SUITE.run()
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from typing import Callable


class Suite:
    def __init__(self, lab: str):
        self.lab = lab
        self.cases: list[tuple[str, str, Callable]] = []  # (part, name, check(ref) -> None)

    def case(self, part: str, name: str):
        def register(check):
            self.cases.append((part, name, check))
            return check
        return register

    @functools.cache
    def reference(self):
        """The reference solution as a module (its exported cells, as grading runs them)."""
        from autograder.engine.variants import reference_module
        return reference_module(self.lab)

    def run(self) -> int:
        """Every case against the reference, warnings silenced; torch's global state (rng, quantized
        engine) is put back afterwards. Returns the number of cases run; raises AssertionError listing
        every disagreement. With IPT_PEER_SAMPLE=k (a quick selftest) only every k-th case runs: a
        fixed sample, the same in every run."""
        every = max(1, int(os.environ.get("IPT_PEER_SAMPLE", "1")))
        ref = self.reference()
        torch = sys.modules.get("torch")
        saved = (torch.get_rng_state(), torch.backends.quantized.engine) if torch else None
        failures = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for part, name, check in self.cases[::every]:
                    try:
                        check(ref)
                    except Exception as e:  # noqa: BLE001 - every disagreement is listed
                        failures.append(f"[{part}] {name}: {type(e).__name__}: {e}")
        finally:
            if saved:
                torch.set_rng_state(saved[0])
                torch.backends.quantized.engine = saved[1]
        if failures:
            raise AssertionError(f"{len(failures)} of {len(self.cases[::every])} peer cases disagree:\n" + "\n".join(failures))
        return len(self.cases[::every])
