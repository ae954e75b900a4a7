"""`python -m labkit lab` (make lab): JupyterLab starts at the course home with nbgrader and jupytext."""
from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


from labkit import jupyter

REPO = Path(__file__).resolve().parents[2]
SERVER_EXTENSIONS = ["jupyterlab_jupytext", "nbgrader.server_extensions.formgrader",
                     "nbgrader.server_extensions.assignment_list", "nbgrader.server_extensions.validate_assignment"]
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
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(jupyter.CONFIG_DIR)
    config = json.loads((jupyter.CONFIG_DIR / "jupyter_server_config.json").read_text())
    enabled = config["ServerApp"]["jpserver_extensions"]
    assert all(enabled[name] for name in SERVER_EXTENSIONS)


def test_server_starts_with_the_extensions(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               PYTHONPATH=os.pathsep.join([str(REPO / "labs"), str(REPO)]))
    env.pop("DISPLAY", None)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "lab", f"--port={port}", "--ServerApp.ip=127.0.0.1",
                             f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, status = time.monotonic() + 25, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = json.loads(get(f"{base}/api/status?token={token}")[1])
                break
            except (OSError, ValueError):
                time.sleep(0.3)
        output = (tmp_path / "server.log").read_text()
        assert status is not None and "started" in status, f"no answer from /api/status:\n{output[-3000:]}"

        code, page = get(f"{base}/lab?token={token}")
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      page, re.S).group(1))
        federated = {ext["name"] for ext in config["federated_extensions"]}
        assert set(LAB_EXTENSIONS) <= federated, federated
        assert not {name for name, off in (config.get("disabledExtensions") or {}).items() if off} & set(LAB_EXTENSIONS)
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
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    if os.geteuid() == 0:
        assert "--allow-root" in (tmp_path / "server.log").read_text().splitlines()[0]
