"""`python -m labkit lab` (make lab): JupyterLab starts at the course home with nbgrader and jupytext.
In the instructor's repository the instructor tools (formgrader, Create Assignment) are on; in a learner's
copy (no autograder/, as in the student release) they are off and only Assignments and Validate remain."""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path


from labkit import jupyter

REPO = Path(__file__).resolve().parents[2]
SERVER_EXTENSIONS = ["jupyterlab_jupytext", "nbgrader.server_extensions.formgrader",
                     "nbgrader.server_extensions.assignment_list", "nbgrader.server_extensions.validate_assignment"]
INSTRUCTOR_ONLY = ["@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"]
LAB_EXTENSIONS = ["@jupyter/nbgrader", "jupyterlab-jupytext"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_command_line(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    args = jupyter.command(["--port=1234"])
    assert args[1:3] == ["-m", "jupyterlab"] and f"--ServerApp.root_dir={REPO}" in args
    assert ("--allow-root" in args) == (os.geteuid() == 0)
    assert "--no-browser" in args and args[-1] == "--port=1234"
    env = jupyter.environment()
    instructor = REPO / "autograder" / "bridges" / "jupyter_instructor"
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[:2] == [str(instructor), str(jupyter.CONFIG_DIR)]
    config = json.loads((instructor / "jupyter_server_config.json").read_text())
    enabled = config["ServerApp"]["jpserver_extensions"]
    assert all(enabled[name] for name in SERVER_EXTENSIONS)
    learner = json.loads((jupyter.CONFIG_DIR / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert learner["nbgrader.server_extensions.formgrader"] is False and learner["nbgrader.server_extensions.assignment_list"]


def start(tmp_path, pythonpath: list[Path]):
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONPATH=os.pathsep.join(map(str, pythonpath)))
    env.pop("DISPLAY", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "lab", f"--port={port}", "--ServerApp.ip=127.0.0.1",
                             f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline, status = time.monotonic() + 150, None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = json.loads(get(f"{base}/api/status?token={token}")[1])
            break
        except (OSError, ValueError):
            time.sleep(0.3)
    return proc, log, base, token, status


def stop(proc, log):
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()


def disabled_extensions(config: dict) -> set[str]:
    found = config.get("disabledExtensions") or []
    return {name for name, off in found.items() if off} if isinstance(found, dict) else set(found)


def page_config(base: str, token: str) -> dict:
    page = get(f"{base}/lab?token={token}")[1]
    return json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S).group(1))


def test_learner_copy_has_no_instructor_tools(tmp_path):
    """The student release's `make lab`: Assignments and Validate yes; formgrader and Create Assignment no."""
    home = tmp_path / "inside-pytorch"
    shutil.copytree(REPO / "labs" / "labkit", home / "labs" / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    proc, log, base, token, status = start(tmp_path, [home / "labs"])
    try:
        output = (tmp_path / "server.log").read_text()
        assert status is not None and "started" in status, f"no answer from /api/status:\n{output[-3000:]}"
        config = page_config(base, token)
        assert Path(config["serverRoot"]).resolve() == home.resolve()
        disabled = disabled_extensions(config)
        assert set(INSTRUCTOR_ONLY) <= disabled, disabled
        assert "@jupyter/nbgrader:assignment-list" not in disabled
        assert get(f"{base}/formgrader?token={token}")[0] == 404
        output = (tmp_path / "server.log").read_text()
        assert "nbgrader.server_extensions.assignment_list | extension was successfully loaded" in output
        assert "nbgrader.server_extensions.formgrader | extension was successfully loaded" not in output
    finally:
        stop(proc, log)


def test_server_starts_with_the_extensions(tmp_path):
    proc, log, base, token, status = start(tmp_path, [REPO / "labs", REPO])
    try:
        output = (tmp_path / "server.log").read_text()
        assert status is not None and "started" in status, f"no answer from /api/status:\n{output[-3000:]}"

        code, page = get(f"{base}/lab?token={token}")
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      page, re.S).group(1))
        federated = {ext["name"] for ext in config["federated_extensions"]}
        assert set(LAB_EXTENSIONS) <= federated, federated
        assert not disabled_extensions(config) & (set(LAB_EXTENSIONS) | set(INSTRUCTOR_ONLY))
        assert Path(config["serverRoot"]).resolve() == REPO  # the course home, whatever the cwd

        output = (tmp_path / "server.log").read_text()
        for name in SERVER_EXTENSIONS:
            assert f"{name} | extension was successfully loaded" in output, f"{name} not loaded:\n{output[-3000:]}"
        # jupytext's contents manager opens a .py file as a notebook
        code, body = get(f"{base}/api/contents/labs/conftest.py?type=notebook&token={token}")
        assert code == 200 and json.loads(body)["type"] == "notebook"
        # nbgrader's formgrader answers (a redirect to its page)
        assert get(f"{base}/formgrader?token={token}")[0] == 200
    finally:
        stop(proc, log)
    if os.geteuid() == 0:
        assert "--allow-root" in (tmp_path / "server.log").read_text().splitlines()[0]
