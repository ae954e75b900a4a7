"""`make setup` installs the CPU build of torch 2.13.0 anywhere: a wheel pip reaches without an index first
(this machine: pip's find-links), else on Linux PyTorch's CPU wheel index, never PyPI's CUDA build.
`make grade` without LAB and the book without npm say what to type."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
FAKE_PY = """#!/usr/bin/env bash
echo "$*" >> "{log}"
case " $* " in *"importlib.metadata"*) exit {torch_check_status};; esac
case " $* " in *" uv"*) exit {uv_status};; esac
case " $* " in *" --no-index "*) exit {no_index_status};; esac
exit 0
"""


def run_setup(tmp_path: Path, local_wheel: bool, makefile: Path = REPO / "Makefile", torch_installed: bool = False,
              uv: bool = True) -> tuple[list[str], str]:
    """Run the setup recipe with a stand-in python that logs its arguments; return what it was asked, and make's
    output."""
    log = tmp_path / "pip.log"
    fake = tmp_path / "python"
    fake.write_text(FAKE_PY.format(log=log, no_index_status=0 if local_wheel else 1,
                                   torch_check_status=0 if torch_installed else 1, uv_status=0 if uv else 1))
    fake.chmod(0o755)
    proc = subprocess.run(["make", "-s", "-B", "-f", str(makefile), "setup", f"PYTHON={fake}", f"PY={fake}",
                           f"STAMP={tmp_path / 'stamp'}"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MAKEFLAGS": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines(), proc.stdout


def setup_commands(tmp_path: Path, local_wheel: bool, makefile: Path = REPO / "Makefile") -> list[str]:
    return run_setup(tmp_path, local_wheel, makefile)[0]


def installer(tmp_path: Path, makefile: Path) -> str:
    """How the recipe installs: the instructor's setup through uv (parallel, bytecode compiled on every core), the
    learner's through pip (it honours a learner's own pip configuration)."""
    if makefile == REPO / "Makefile":
        return f"-m uv pip install -q --compile-bytecode --python {tmp_path / 'python'}"
    return "-m pip install -q"


@pytest.mark.parametrize("makefile", [REPO / "Makefile", REPO / "autograder" / "authoring" / "student" / "Makefile"],
                         ids=["instructor", "student"])
def test_setup_on_an_ordinary_linux_machine_uses_the_cpu_index(tmp_path, makefile):
    if platform.system() != "Linux":
        pytest.skip("the Linux path")
    calls = setup_commands(tmp_path, local_wheel=False, makefile=makefile)
    install = installer(tmp_path, makefile)
    torch = [c for c in calls if "torch==2.13.0" in c or "requirements-torch" in c]
    assert torch[0].startswith("-m pip download -q --no-deps --no-index torch==2.13.0 -d build/wheels"), calls
    assert torch[1] == f"{install} torch==2.13.0 --index-url {CPU_INDEX}", calls
    assert len(torch) == 2, "torch must not be asked for again without the CPU index"
    assert calls.index(torch[1]) < calls.index(f"{install} -r requirements.txt")


def test_setup_here_takes_the_local_wheel_without_any_index(tmp_path):
    calls = setup_commands(tmp_path, local_wheel=True)
    assert not [c for c in calls if "--index-url" in c], calls
    assert f"{installer(tmp_path, REPO / 'Makefile')} build/wheels/torch/*.whl" in calls, calls


def test_setup_falls_back_to_pip_without_uv(tmp_path):
    """Where uv cannot be installed (no index that has it), pip installs the same things."""
    calls, output = run_setup(tmp_path, local_wheel=False, uv=False)
    assert "-m pip install -q -r requirements.txt" in calls and not [c for c in calls if c.startswith("-m uv pip")], calls
    assert "pip installs instead" in output


def test_setup_keeps_an_installed_torch(tmp_path):
    """A rerun (requirements changed) must not reinstall torch 2.13.0 under the processes that are using it."""
    calls, _ = run_setup(tmp_path, local_wheel=True, torch_installed=True)
    assert not [c for c in calls if "torch==2.13.0" in c or "torch/" in c], calls
    assert [c for c in calls if c.endswith("-r requirements.txt")], calls


def test_setup_keeps_an_existing_venv(tmp_path):
    """Setup reruns when requirements change; it must not re-create the venv (another python3.11 on PATH, a
    fresh shell's /usr/bin one, would rewrite pyvenv.cfg under the installed packages and break them)."""
    calls = setup_commands(tmp_path, local_wheel=True)
    assert not [c for c in calls if c.startswith("-m venv")], calls


def test_pip_finds_torch_without_an_index_here(tmp_path):
    """The first step really succeeds on this machine (pip's config has find-links), with no network, even in a
    fresh venv whose torch dependencies are not local wheels (so `install --no-index` alone would fail)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-index", "torch==2.13.0",
                           "-d", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def fresh_stamp(tmp_path: Path) -> str:
    """A setup stamp newer than the requirements: make runs the target without the setup recipe (which would
    reinstall into the venv that the rest of the suite is running from)."""
    stamp = tmp_path / "stamp"
    stamp.touch()
    return f"STAMP={stamp}"


def test_make_grade_without_lab_says_what_to_type(tmp_path):
    proc = subprocess.run(["make", "-s", "grade", fresh_stamp(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "make grade LAB=lab01" in proc.stdout + proc.stderr


def test_make_book_without_npm_names_the_prerequisite(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "sh", "env", "grep", "sed", "expand"):
        if shutil.which(tool):
            (bindir / tool).symlink_to(shutil.which(tool))
    proc = subprocess.run([shutil.which("make"), "-s", "book", fresh_stamp(tmp_path)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PATH": str(bindir)})
    assert proc.returncode == 2 and "needs npm" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
