"""Finding labs on disk: `labs/labNN_slug/` holds `labNN_slug.ipynb` and `tests/test_<part>.py`."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import labkit._fast  # noqa: F401  (before nbformat: see _fast.py)
from labkit.notebook import LabInfo, NotebookError, Part, lab_info, read_notebook

LABS_ROOT = Path(__file__).resolve().parents[1]   # the labs/ folder this labkit ships in
COURSE_HOME = LABS_ROOT.parent                     # README, course/, labs/
SLUG = re.compile(r"^(lab\d\d)_\w+$")


class LabNotFound(LookupError):
    """No lab matches what the learner asked for; the message says what exists."""


@dataclass(frozen=True)
class LabDir:
    path: Path
    name: str = ""   # the notebook's stem when the folder is not named after it (nbgrader's `lab01/`)

    @property
    def slug(self) -> str:
        return self.name or self.path.name

    @property
    def id(self) -> str:
        match = SLUG.match(self.slug)
        return match.group(1) if match else self.slug

    @property
    def notebook(self) -> Path:
        return self.path / f"{self.slug}.ipynb"

    @property
    def tests(self) -> Path:
        return self.path / "tests"

    def test_file(self, part: str) -> Path:
        return self.tests / f"test_{part}.py"

    def info(self) -> LabInfo:
        """Parts (with titles and points) from the notebook; raises NotebookError."""
        return lab_info(read_notebook(self.notebook))

    def parts(self) -> list[Part]:
        """Graded parts from the notebook, or from the public test files when it cannot be read."""
        try:
            parts = self.info().parts
        except NotebookError:
            parts = []
        return parts or [Part(p.stem.removeprefix("test_"), p.stem.removeprefix("test_"), 0.0)
                         for p in sorted(self.tests.glob("test_*.py"))]


def lab_slug(path: Path) -> str | None:
    """The lab notebook's stem when `path` is a lab folder: `labs/lab01_strided/` (the course layout)
    or `lab01/` holding `lab01_strided.ipynb` (nbgrader's release, fetch and submit layout)."""
    if not path.is_dir():
        return None
    if SLUG.match(path.name) and (path / f"{path.name}.ipynb").is_file():
        return path.name
    if re.fullmatch(r"lab\d\d", path.name):
        found = [p.stem for p in path.glob(f"{path.name}_*.ipynb") if SLUG.match(p.stem) and p.is_file()]
        if len(found) == 1:
            return found[0]
    return None


def is_lab_dir(path: Path) -> bool:
    return lab_slug(path) is not None


def lab_dir(path: Path) -> LabDir:
    path = Path(path).resolve()
    slug = lab_slug(path)
    return LabDir(path, "" if slug == path.name else slug or "")


def all_labs(root: Path | str = LABS_ROOT) -> list[LabDir]:
    root = Path(root).resolve()
    return [lab_dir(p) for p in sorted(root.iterdir()) if is_lab_dir(p)] if root.is_dir() else []


def find_lab(lab: str | os.PathLike | None = None, cwd: Path | str | None = None,
             root: Path | str = LABS_ROOT) -> LabDir:
    """The lab named by `lab` (id, slug or path), or else the one whose folder contains `cwd`."""
    if lab is not None:
        path = Path(lab)
        if is_lab_dir(path):
            return lab_dir(path)
        for found in all_labs(root):
            if str(lab) in (found.id, found.slug):
                return found
        known = ", ".join(f.id for f in all_labs(root)) or "none"
        raise LabNotFound(f"no lab {str(lab)!r} (labs: {known})")
    here = Path(cwd or os.getcwd()).resolve()
    for path in (here, *here.parents):
        if is_lab_dir(path):
            return lab_dir(path)
    known = ", ".join(f.id for f in all_labs(root)) or "none"
    raise LabNotFound(f"this notebook is not inside a lab folder ({here}); pass lab=..., e.g. "
                      f"check('part', lab='lab01') (labs: {known})")
