"""`python -m labkit lab`: JupyterLab at the course home with the jupytext and nbgrader student extensions.

`jupyter_config/` beside this file (added to JUPYTER_CONFIG_PATH, so nothing in the learner's home
folder changes) switches on jupytext and nbgrader's Assignments and Validate, and switches off the
instructor tools (Formgrader, Create Assignment, Courses). In the instructor's repository (which has
autograder/), autograder/bridges/jupyter_instructor/ is put first and switches them back on.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from labkit.labs import COURSE_HOME

CONFIG_DIR = Path(__file__).resolve().parent / "jupyter_config"


def config_dirs(home: Path = COURSE_HOME) -> list[Path]:
    instructor = home / "autograder" / "bridges" / "jupyter_instructor"
    return ([instructor] if instructor.is_dir() else []) + [CONFIG_DIR]


def has_display() -> bool:
    if sys.platform.startswith("linux") or "bsd" in sys.platform:
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def command(extra: list[str] = (), home: Path = COURSE_HOME) -> list[str]:
    args = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={home}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    if not has_display():
        args.append("--no-browser")
    return args + list(extra)


def environment(home: Path = COURSE_HOME) -> dict[str, str]:
    env = dict(os.environ)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in (*map(str, config_dirs(home)), env.get("JUPYTER_CONFIG_PATH")) if p)
    # kernels find labkit (and the course's helpers) even before `make setup` wrote the .pth file
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(home / "labs"), str(home), env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def main(extra: list[str]) -> int:
    args, env = command(extra), environment()
    print("starting JupyterLab:", " ".join(args[1:]), flush=True)
    if os.name == "posix":
        os.chdir(COURSE_HOME)
        os.execve(sys.executable, args, env)  # Ctrl-C and signals go straight to Jupyter
    return subprocess.call(args, env=env, cwd=COURSE_HOME)
