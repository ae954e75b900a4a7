"""pytest plugin of the public tests: the `lab` fixture, a module-like view of the learner's names.

Where the names come from:
- inside `check()` and `python -m labkit status`: the namespace they hand over (`use_namespace`);
- in a plain `pytest labs/...` run: the lab's working notebook, assembled from its exported cells
  (or the notebook named by the LABKIT_NOTEBOOK environment variable: `.ipynb`, or a jupytext `.py`).
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

from labkit.labs import find_lab
from labkit.notebook import NotebookError, assemble, load_module, read_notebook
from labkit.quickexit import at_exit_skip_final_gc

__all__ = ["lab", "pytest_configure", "pytest_collection_finish", "pytest_unconfigure", "LabNamespace", "MissingName", "use_namespace"]

_active: list[tuple[dict, str]] = []  # (names, origin) handed over by check(), innermost last
_loaded: dict[tuple, "LabNamespace"] = {}
_saved_profile: list = []


class MissingName(AttributeError):
    """The learner's notebook does not (yet) define a name a test needs."""


class LabNamespace:
    """The learner's definitions as attributes (`lab.Tensor`), read live from their namespace."""

    def __init__(self, names: dict, origin: str = "your notebook", problems: list[str] | None = None):
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_origin", origin)
        object.__setattr__(self, "_problems", list(problems or []))

    def __getattr__(self, name: str):
        try:
            return self._names[name]
        except KeyError:
            if name.startswith("__"):
                raise AttributeError(name) from None
            raise MissingName(f"{self._origin} does not define `{name}` yet: run the cell that defines it") from None

    def __setattr__(self, name: str, value) -> None:
        self._names[name] = value

    def __dir__(self):
        return sorted(k for k in self._names if not k.startswith("__"))

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def __repr__(self) -> str:
        return f"<lab namespace of {self._origin}>"


@contextlib.contextmanager
def use_namespace(names: dict, origin: str = "your notebook"):
    """While active, every test's `lab` fixture is a view of `names`."""
    _active.append((names, origin))
    try:
        yield
    finally:
        _active.pop()


def _read_any(path: Path):
    if path.suffix == ".py":  # a jupytext percent notebook, e.g. an instructor's reference solution
        import jupytext

        return jupytext.read(path, fmt="py:percent")
    return read_notebook(path)


def load_notebook_namespace(path: Path) -> LabNamespace:
    """Execute a notebook's exported cells into a fresh module (cached while the file is unchanged)."""
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _loaded:
        nb = _read_any(path)
        assembly = assemble(nb, nb)
        cwd = os.getcwd()
        os.chdir(path.parent)  # the learner's code may open files beside its notebook
        try:
            module, errors = load_module(assembly.cells, name=path.stem)
        finally:
            os.chdir(cwd)
        _loaded[key] = LabNamespace(module.__dict__, f"the notebook {path.name}", assembly.problems + errors)
    return _loaded[key]


@pytest.fixture
def lab(request) -> LabNamespace:
    """The learner's lab module: their notebook's names (`lab.contiguous_strides`, `lab.Tensor`, ...)."""
    if _active:
        names, origin = _active[-1]
        return LabNamespace(names, origin)
    target = os.environ.get("LABKIT_NOTEBOOK")
    try:
        path = Path(target) if target else find_lab(cwd=Path(str(request.path)).parent).notebook
        return load_notebook_namespace(path)
    except (NotebookError, LookupError, OSError) as exc:
        pytest.fail(f"cannot load the lab notebook: {exc}", pytrace=False)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "weight(w): weight of a test within its part (used by the graders)")
    at_exit_skip_final_gc()  # a `pytest labs/...` process that imported torch ends most of a second sooner


def pytest_collection_finish(session) -> None:
    """Deterministic hypothesis without a database, when the tests use hypothesis at all."""
    if "hypothesis" not in sys.modules or _saved_profile:
        return
    from hypothesis import HealthCheck, settings

    _saved_profile.append(settings.get_current_profile_name())
    settings.register_profile("labkit", derandomize=True, database=None, deadline=None, print_blob=False,
                              suppress_health_check=list(HealthCheck))
    settings.load_profile("labkit")


def pytest_unconfigure(config) -> None:
    if _saved_profile:
        from hypothesis import settings

        settings.load_profile(_saved_profile.pop())
