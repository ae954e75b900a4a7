"""Where each piece of a lab lives in the repository."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AUTOGRADER = REPO / "autograder"
BUILD = REPO / "build"


@dataclass(frozen=True)
class LabPaths:
    lab: str   # "lab01"
    slug: str  # "lab01_strided"
    root: Path = REPO  # a course tree; tests use a toy one

    @property
    def solution(self) -> Path:
        return self.root / "solutions" / f"{self.slug}.py"

    @property
    def release_dir(self) -> Path:
        return self.root / "labs" / self.slug

    @property
    def release_notebook(self) -> Path:
        return self.release_dir / f"{self.slug}.ipynb"

    @property
    def public_tests(self) -> Path:
        return self.release_dir / "tests"

    @property
    def hidden(self) -> Path:
        """The lab's whole grading in one folder: graders (test_<part>.py, oracle, lab.toml),
        scenarios.py, mutants.toml, adversarial attempts, the edge-domain catalogue and examples."""
        return self.root / "autograder" / "labs" / self.lab

    @property
    def graders(self) -> Path:
        return self.hidden

    @property
    def scenarios(self) -> Path:
        return self.hidden / "scenarios.py"

    @property
    def mutants(self) -> Path:
        return self.hidden / "mutants.toml"

    @property
    def adversarial(self) -> Path:
        return self.hidden / "adversarial"

    @property
    def catalogue(self) -> Path:
        return self.hidden / "catalogue.toml"

    @property
    def examples(self) -> Path:
        return self.hidden / "examples"


def all_labs(root: Path = REPO) -> list[LabPaths]:
    """Every lab with a solution source or a release folder (a grading-only install has no solutions)."""
    slugs = {p.stem for p in (root / "solutions").glob("lab[0-9][0-9]_*.py")}
    slugs |= {p.name for p in (root / "labs").glob("lab[0-9][0-9]_*") if p.is_dir()}
    return [LabPaths(slug.split("_", 1)[0], slug, root) for slug in sorted(slugs)]


def lab_paths(lab: "str | LabPaths", root: Path = REPO) -> LabPaths:
    """`lab` may be the id ("lab01"), the slug ("lab01_strided") or already a LabPaths."""
    if isinstance(lab, LabPaths):
        return lab
    for paths in all_labs(root):
        if lab in (paths.lab, paths.slug):
            return paths
    known = ", ".join(p.lab for p in all_labs(root)) or "none"
    raise SystemExit(f"unknown lab {lab!r} (known: {known})")


def build_dir(*parts: str) -> Path:
    """A folder under build/, created on demand."""
    path = BUILD.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def project_env() -> dict[str, str]:
    """Environment entries that keep torch's caches and temp files inside build/."""
    return {
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "TORCHINDUCTOR_CACHE_DIR": str(build_dir("inductor-cache")),
        "TORCH_EXTENSIONS_DIR": str(build_dir("torch-extensions")),
        "TMPDIR": str(build_dir("tmp")),
    }
