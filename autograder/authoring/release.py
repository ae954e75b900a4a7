"""`make release`: the student edition of the course, in dist/student/ and dist/student.tar.gz.

What goes in: course/, labs/ (labkit, every lab's notebook generated afresh from its solution,
its public tests), book/ sources (not _build), requirements*.txt and environment.yml, and a
student README and Makefile (templates in autograder/authoring/student/). What never goes in:
solutions/, autograder/, mutants, example submissions, build outputs.

The tree is then leak-scanned (and book/_build/html, when it exists); any leak fails the build,
listing file and line, and no archive is written. The archive is deterministic: sorted entries,
fixed times, owners and modes, so the same sources give the same bytes.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import sys
import tarfile
from pathlib import Path

from autograder.authoring import leakscan
from autograder.authoring.generate import render, student_notebook
from autograder.paths import REPO

TEMPLATES = Path(__file__).resolve().parent / "student"
ARCHIVE_ROOT = "inside-pytorch"
ARCHIVE_MTIME = 1767225600  # 2026-01-01T00:00:00Z, unless SOURCE_DATE_EPOCH says otherwise
JUNK_NAMES = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".hypothesis", "_build", ".DS_Store",
              ".jupyter_cache", ".virtual_documents", "submissions"}
JUNK_SUFFIXES = {".pyc", ".pyo", ".part"}
ROOT_FILES = ("requirements.txt", "requirements-torch.txt", "environment.yml")
PRIVATE = ("solutions", "autograder")


class ReleaseError(RuntimeError):
    pass


def _ignore(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in JUNK_NAMES or Path(n).suffix in JUNK_SUFFIXES or n.endswith("~")}


def _copytree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, ignore=_ignore, symlinks=False)


def copy_labs(repo: Path, out: Path, log) -> list[str]:
    """labs/: labkit, the top-level conftest, and each lab with a solution (notebook regenerated)."""
    labs, target = repo / "labs", out / "labs"
    target.mkdir(parents=True)
    released = []
    for path in sorted(labs.iterdir()):
        if path.name in JUNK_NAMES:
            continue
        if path.is_file():
            shutil.copy2(path, target / path.name)
        elif not path.name.startswith("lab") or path.name == "labkit":
            _copytree(path, target / path.name)
        elif (repo / "solutions" / f"{path.name}.py").is_file():
            _copytree(path, target / path.name)
            fresh = render(student_notebook((repo / "solutions" / f"{path.name}.py").read_text(encoding="utf-8")))
            committed = path / f"{path.name}.ipynb"
            if not committed.is_file() or committed.read_text(encoding="utf-8") != fresh:
                log(f"note: {committed.relative_to(repo)} is stale or missing; released the one generated now "
                    "(run `make labs` and commit)")
            (target / path.name / f"{path.name}.ipynb").write_text(fresh, encoding="utf-8")
            released.append(path.name)
        else:
            log(f"note: labs/{path.name} has no solutions/{path.name}.py; not released")
    for solution in sorted((repo / "solutions").glob("lab[0-9][0-9]_*.py")):
        if solution.stem not in released:
            log(f"note: {solution.name} has no labs/{solution.stem}/ (public tests); not released")
    return released


def assemble(repo: Path, out: Path, log=print) -> list[str]:
    """Write the student tree into `out` (emptied first); return the released lab slugs."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for folder in ("course", "book"):
        if (repo / folder).is_dir():
            _copytree(repo / folder, out / folder)
        else:
            log(f"note: {folder}/ does not exist yet; not released")
    released = copy_labs(repo, out, log)
    shutil.copy2(TEMPLATES / "README.md", out / "README.md")
    shutil.copy2(TEMPLATES / "Makefile", out / "Makefile")
    for name in ROOT_FILES:
        if (repo / name).is_file():
            shutil.copy2(repo / name, out / name)
        else:
            log(f"note: {name} does not exist in the repository; not released")
    return released


def private_copies(repo: Path, out: Path) -> list[str]:
    """Released files that are, byte for byte, a file of solutions/ or autograder/ (or sit in such a folder)."""
    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    private = {}
    for folder in PRIVATE:
        for path in (repo / folder).rglob("*"):
            if path.is_file() and path.stat().st_size >= 64 and "__pycache__" not in path.parts \
                    and not path.is_relative_to(repo / TEMPLATES.relative_to(REPO)):  # student README, Makefile
                private.setdefault(digest(path), path.relative_to(repo))
    found = []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if rel.parts[0] in PRIVATE or any(part in PRIVATE for part in rel.parts[:-1]):
            found.append(f"{rel}: a private folder in the release")
        elif path.is_file() and digest(path) in private:
            found.append(f"{rel}: a copy of {private[digest(path)]}")
    return found


def write_archive(src: Path, archive: Path, root: str = ARCHIVE_ROOT) -> Path:
    """A reproducible .tar.gz of `src`: sorted entries, fixed mtime, root owner, normalised modes."""
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", ARCHIVE_MTIME))
    paths = sorted(src.rglob("*"), key=lambda p: p.relative_to(src).as_posix())
    partial = archive.with_name(archive.name + ".part")
    with partial.open("wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for entry in [src, *paths]:
            rel = entry.relative_to(src).as_posix()
            info = tarfile.TarInfo(root if rel == "." else f"{root}/{rel}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
            if entry.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = entry.stat().st_size
                info.mode = 0o755 if os.access(entry, os.X_OK) else 0o644
                with entry.open("rb") as stream:
                    tar.addfile(info, stream)
    partial.replace(archive)
    return archive


def build(repo: Path = REPO, dist: Path | None = None, book_html: Path | None = None, log=print) -> int:
    """Build, check and archive the student release; 0 when it is clean, 1 on any leak."""
    repo = Path(repo).resolve()
    if not (repo / "labs" / "labkit").is_dir():
        raise ReleaseError(f"{repo / 'labs' / 'labkit'} is missing: is {repo} the course repository?")
    dist = Path(dist) if dist else repo / "dist"
    out, archive = dist / "student", dist / "student.tar.gz"
    if archive.exists():
        archive.unlink()
    released = assemble(repo, out, log)
    log(f"release: {out} with {len(released)} lab(s): {', '.join(released) or 'none'}")

    problems = private_copies(repo, out)
    scanned = [out]
    book_html = Path(book_html) if book_html else repo / "book" / "_build" / "html"
    if book_html.is_dir():
        scanned.append(book_html)
    patterns = leakscan.Patterns.from_repo(repo)
    leaks = leakscan.scan(scanned, patterns)
    log(f"leak scan of {', '.join(str(p) for p in scanned)}: {len(patterns.solution)} solution and "
        f"{len(patterns.hidden)} hidden patterns, {len(leaks)} leak(s)")
    if problems or leaks:
        for line in problems:
            log(f"LEAK {line}")
        if leaks:
            log(leakscan.report(leaks))
        log("release FAILED: nothing may reach learners from solutions/ or the hidden graders; no archive written")
        return 1
    write_archive(out, archive)
    log(f"wrote {archive} ({archive.stat().st_size >> 10} KiB, sha256 {hashlib.sha256(archive.read_bytes()).hexdigest()[:16]})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dist", help="output folder (default: dist/ in the repository)")
    parser.add_argument("--repo", default=str(REPO), help=argparse.SUPPRESS)
    parser.add_argument("--book-html", help="built book to scan too (default: book/_build/html if it exists)")
    args = parser.parse_args(argv)
    try:
        return build(Path(args.repo), Path(args.dist) if args.dist else None,
                     Path(args.book_html) if args.book_html else None)
    except ReleaseError as exc:
        print(f"release FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
