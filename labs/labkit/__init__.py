"""labkit: the small toolbox of the Inside PyTorch labs.

In a lab notebook:  `from labkit import check`, then `check("views")` runs that part's public tests.
From a shell:       `python -m labkit status | submit LAB | lab`  (or `make status`, `make submit LAB=...`).
"""
from __future__ import annotations

__version__ = "1.0.0"
__all__ = ["check", "__version__"]


def check(part: str, lab=None, namespace=None) -> None:
    """Run the public tests of `part` against your current definitions and print a short report.

    `lab` is the lab id ("lab01"), its folder name, or a path; by default it is the lab whose
    folder the notebook runs in. `namespace` defaults to the notebook's globals.
    """
    from labkit.checker import check as _check

    _check(part, lab=lab, namespace=namespace)
