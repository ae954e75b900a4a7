"""`make bench-status`: how long `make status` takes for a learner who has done every lab.

A copy of labs/ whose notebooks hold the reference solutions (a finished course; the stubs are "not started"
and cost nothing, so they would prove nothing), then, in that copy:
1. `status --fresh`: every lab's public tests run again (the worst case; two labs at a time, as `make status`);
2. `status` with nothing changed: every lab shown from its last run;
3. `status` after an edit to one lab's code (the usual case while working), for each lab in turn: that lab
   runs, the others are shown from their last run.
Each figure is the wall time of `python -m labkit status` as the learner types it (medians of `--rounds` for
1 and 2).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.paths import REPO


def finished_course(root: Path) -> list[str]:
    """labs/ copied to `root` with each lab notebook replaced by its reference solution; the lab slugs."""
    import nbformat

    from autograder.authoring.generate import solution_notebook
    shutil.copytree(REPO / "labs", root, ignore=shutil.ignore_patterns(".labkit-cache", "__pycache__", ".ipynb_checkpoints"))
    slugs = []
    for source in sorted((REPO / "solutions").glob("lab*.py")):
        folder = root / source.stem
        if (folder / f"{source.stem}.ipynb").exists():
            nbformat.write(solution_notebook(source.read_text()), folder / f"{source.stem}.ipynb")
            slugs.append(source.stem)
    return slugs


def edit_one(root: Path, slug: str, k: int) -> None:
    """A learner's edit: a comment appended to the first solution cell of `slug` (the code changes, the result does not)."""
    import nbformat
    path = root / slug / f"{slug}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    cell.source += f"\n# edit {k}\n"
    nbformat.write(nb, path)


def status(root: Path, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "labkit", "status", *args], cwd=root.parent, env=env,
                          capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if proc.returncode != 0 or "Parts passing their public tests" not in proc.stdout:
        raise RuntimeError(f"status failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.benchmarks status", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of measurements 1 and 2 (default 2; medians)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        root = Path(tmp) / "labs"
        slugs = finished_course(root)
        print(f"make status on a finished course ({len(slugs)} labs, reference solutions); wall seconds")
        fresh, reused = [], []
        for _ in range(args.rounds):
            fresh.append(status(root, "--fresh"))
            reused.append(status(root))
        print(f"  every lab run again (status --fresh): {statistics.median(fresh):6.1f} s")
        print(f"  nothing changed (status):             {statistics.median(reused):6.1f} s")
        edited = {}
        for k, slug in enumerate(slugs):
            edit_one(root, slug, k)
            edited[slug] = status(root)
            print(f"  {slug} edited (status):{'':{max(0, 22 - len(slug))}}{edited[slug]:6.1f} s", flush=True)
        print(f"  one lab edited: median {statistics.median(edited.values()):.1f} s, "
              f"slowest {max(edited.values()):.1f} s ({max(edited, key=edited.get)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
