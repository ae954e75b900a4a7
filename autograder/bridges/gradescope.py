"""Gradescope: `make gradescope LAB=labNN` builds the autograder zip; `run` is what it executes there.

The zip holds setup.sh, run_autograder, the engine, this lab's hidden graders and scenarios, labkit
and the release notebook. run_autograder grades $ROOT/submission into $ROOT/results/results.json
(ROOT=/autograder on Gradescope; IPT_GRADESCOPE_ROOT points elsewhere for tests).
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import zipfile
from pathlib import Path

from autograder.paths import REPO, LabPaths, build_dir, lab_paths

GRADER_REQUIREMENTS = ("numpy", "pytest", "hypothesis", "nbformat", "rich", "tqdm")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope image set-up: the course's Python (3.11) and the CPU build of torch 2.13.0.
# Ubuntu 22.04 base images ship python3.11 in universe; elsewhere (24.04) it comes from the deadsnakes PPA.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq util-linux ca-certificates >/dev/null
if ! apt-get install -y -qq python3.11 python3.11-venv >/dev/null 2>&1; then
  apt-get install -y -qq software-properties-common >/dev/null
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
fi
python3.11 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install -q --upgrade pip
/autograder/venv/bin/python -m pip install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/python -m pip install -q -r /autograder/source/requirements-grader.txt
/autograder/venv/bin/python -c "import sys, torch; assert sys.version_info[:2] == (3, 11); assert not torch.version.cuda, torch.version.cuda"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Grades /autograder/submission into /autograder/results/results.json; the learner's code runs as
# an unprivileged user in the strongest sandbox the container allows.
ROOT="${{IPT_GRADESCOPE_ROOT:-/autograder}}"
PY="${{IPT_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source" || exit 1
export PYTHONPATH="$ROOT/source:$ROOT/source/labs" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$ROOT/source/build/tmp" && export TMPDIR="$ROOT/source/build/tmp"
# where the learner's code runs as another user without its own filesystem view, hide the graders
chmod -R go-rwx "$ROOT/source/autograder/labs" "$ROOT/results" 2>/dev/null || true
exec "$PY" -m autograder.bridges.gradescope run {lab} --root "$ROOT"
"""


def _members(paths: LabPaths) -> dict[str, Path]:
    """Files of the zip's source/ folder: engine, this lab's graders and scenarios, labkit, release."""
    files = {}
    for base in ("autograder/__init__.py", "autograder/paths.py", "autograder/engine", "autograder/bridges",
                 "labs/labkit"):
        source = REPO / base
        for file in ([source] if source.is_file() else sorted(source.rglob("*"))):
            if file.is_file() and "__pycache__" not in file.parts and file.name != "READY":
                files[str(file.relative_to(REPO))] = file
    skip = {paths.examples, paths.adversarial}  # the hidden folder's instructor-only material
    for file in sorted(paths.hidden.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts and not skip & set(file.parents) \
                and file != paths.mutants:
            files[str(file.relative_to(paths.root))] = file
    files["autograder/labs/__init__.py"] = REPO / "autograder/labs/__init__.py"
    files[str(paths.release_notebook.relative_to(paths.root))] = paths.release_notebook
    return files


def requirements() -> str:
    pins = [line for line in (REPO / "requirements.txt").read_text().splitlines()
            if line.split("==")[0].strip() in GRADER_REQUIREMENTS]
    return "\n".join(pins) + "\n"


def build(lab: "str | LabPaths", target: Path | None = None) -> Path:
    paths = lab_paths(lab)
    target = target or REPO / "dist" / "gradescope" / f"{paths.lab}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        def add(name: str, data: bytes, mode: int = 0o644):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
        add("setup.sh", SETUP_SH.encode(), 0o755)
        add("run_autograder", RUN_AUTOGRADER.format(lab=paths.lab).encode(), 0o755)
        add("requirements-grader.txt", requirements().encode())
        for name, file in _members(paths).items():
            add(name, file.read_bytes())
    target.write_bytes(buffer.getvalue())
    return target


def _is_submit_zip(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as zf:
            return "manifest.json" in zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def find_submission(folder: Path, lab: str) -> Path | None:
    """The uploaded notebook (or `make submit` zip); prefer one named after the lab. Anything else
    (no files, other files, a zip that is not from `make submit`) is None, which the grader answers with
    one message: no notebook was found in the submission."""
    candidates = sorted(p for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts
                        and (p.suffix == ".ipynb" or (p.suffix == ".zip" and _is_submit_zip(p))))
    named = [p for p in candidates if p.name.startswith(lab)]
    return (named or candidates or [None])[0]


def run(lab: str, root: Path) -> int:
    from autograder.engine.pipeline import grade
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = build_dir("gradescope-out")
    grade(lab, find_submission(root / "submission", lab), out)
    (results / "results.json").write_text((out / "results.json").read_text())
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.bridges.gradescope")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write dist/gradescope/LAB.zip")
    b.add_argument("lab")
    r = sub.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json")
    r.add_argument("lab")
    r.add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    if args.command == "build":
        print(f"wrote {build(args.lab)}")
        return 0
    return run(args.lab, args.root)


if __name__ == "__main__":
    sys.exit(main())
