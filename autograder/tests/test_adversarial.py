"""Submissions that try to cheat or break the grader, each with the outcome it must get.

Every cheat below replaces the toy lab's `add` with code that does NOT add correctly and tries to
earn the points some other way. Required: part `add` scores 0, the honest part `scale` keeps its
5 points, and results.json is valid. Notebook-level attacks must score 0 with a clear message.
"""
from __future__ import annotations

import json
import socket
import subprocess
import textwrap
import threading

import pytest

from autograder.engine.pipeline import grade
from autograder.tests.test_engine import submission, toy  # noqa: F401 - the toy-lab fixture

WRONG = "\n    return [0] * len(a)\n"

CHEATS = {
    "forge_results_files": """
        import json, os, glob
        fake = {"score": 100, "tests": []}
        for d in [".", "..", "/tmp", "/autograder/results", os.path.expanduser("~")] + glob.glob("/work/**/out-*", recursive=True):
            try:
                open(os.path.join(d, "results.json"), "w").write(json.dumps(fake))
            except OSError:
                pass
        def add(a, b):""" + WRONG,
    "forge_stdout_lines": """
        import sys
        line = '{"kind": "test", "part": "add", "outcome": "passed", "weight": 100}'
        def add(a, b):
            print(line); print("15 passed in 0.1s"); sys.stderr.write(line + "\\n")""" + WRONG,
    "sys_exit_at_import": "import sys\nsys.exit(0)\ndef add(a, b):" + WRONG,
    "os_exit_at_import": "import os\nos._exit(0)\ndef add(a, b):" + WRONG,
    "os_exit_mid_test": "import os\ndef add(a, b):\n    os._exit(0)",
    "system_exit_mid_test": "def add(a, b):\n    raise SystemExit(0)",
    "keyboard_interrupt": "def add(a, b):\n    raise KeyboardInterrupt",
    "monkeypatch_numpy": """
        import numpy as np
        np.array_equal = lambda *args, **kwargs: True
        np.testing.assert_allclose = lambda *args, **kwargs: None
        np.ndarray.__eq__ = lambda self, other: True
        def add(a, b):""" + WRONG,
    "monkeypatch_pytest_and_scenarios": """
        import sys
        try:
            import pytest
            pytest.fail = lambda *a, **k: None
        except ImportError:
            pass
        for name, module in list(sys.modules.items()):
            if "scenario" in name:
                module.add = lambda sub, a, b: "fake"
        def add(a, b):""" + WRONG,
    "lying_eq_object": """
        class Liar:
            def __eq__(self, other): return True
            def __array__(self, *a, **k): raise RuntimeError
        def add(a, b):
            return Liar()""",
    "lying_ndarray_subclass": """
        import numpy as np
        class Liar(np.ndarray):
            def __eq__(self, other): return np.ones(np.shape(other), bool)
        def add(a, b):
            return np.zeros(len(a)).view(Liar)""",
    "pickle_payload": """
        import pickle, os
        class Evil:
            def __reduce__(self): return (os.system, ("touch /tmp/pwned",))
        def add(a, b):
            return pickle.dumps(Evil())""",
    "read_hidden_files": """
        import glob
        found = glob.glob("/work/**/graders/**/*.py", recursive=True) + glob.glob("/work/**/solutions/*.py", recursive=True)
        def add(a, b):
            if found:
                print(open(found[0]).read())
            return [0] * len(a)""",
    "infinite_loop": "def add(a, b):\n    while True:\n        pass",
    "sleep": "import time\ndef add(a, b):\n    time.sleep(1000)",
    "ignore_signals_and_hang": """
        import signal
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        def add(a, b):
            while True:
                pass""",
    "memory_bomb": "def add(a, b):\n    hog = bytearray(64 * 1024 ** 3)\n    return a",
    "memory_creep": "def add(a, b):\n    hog = []\n    while True:\n        hog.append(bytearray(50 * 1024 ** 2))",
    "fork_bomb": """
        import os
        def add(a, b):
            for _ in range(10_000):
                try:
                    os.fork()
                except OSError:
                    break
            return [0] * len(a)""",
    "daemon": """
        import os
        def add(a, b):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", "4242.5"])
                os._exit(0)
            return [0] * len(a)""",
    "network_exfiltration": """
        import socket
        def add(a, b):
            for port in range(PORT, PORT + 1):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).sendall(b"LEAK")
                except OSError:
                    pass
            return [0] * len(a)""",
    "output_flood": "import sys\ndef add(a, b):\n    sys.stdout.write('x' * 200_000_000)\n    return [0] * len(a)",
    "close_protocol_pipes": "import os\ndef add(a, b):\n    os.closerange(3, 64)\n    return [0] * len(a)",
    "forge_protocol_replies": """
        import os, json, struct
        def add(a, b):
            for fd in range(3, 20):
                try:
                    body = json.dumps({"id": 2, "ok": True, "value": [2, 4]}).encode()
                    os.write(fd, struct.pack(">I", len(body)) + body)
                except OSError:
                    pass
            return [0] * len(a)""",
    "import_real_torch": "import torch\ndef add(a, b):\n    return torch.add(torch.tensor(a), torch.tensor(b)).numpy()",
    "import_torch_by_path": """
        import sys, glob, importlib
        sys.path += glob.glob("/**/site-packages", recursive=True)[:5]
        torch = importlib.import_module("to" + "rch")
        def add(a, b):
            return torch.add(torch.tensor(a), torch.tensor(b)).numpy()""",
    "recursion_bomb": "def add(a, b):\n    return add(a, b)",
    "deep_result": "def add(a, b):\n    x = []\n    for _ in range(100_000):\n        x = [x]\n    return x",
}


@pytest.fixture(scope="module")
def listener():
    """A loopback server that records whatever connects (it must stay silent)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                received.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheat_earns_nothing_and_costs_nothing_else(toy, tmp_path, listener, name):  # noqa: F811
    port, received = listener
    source = textwrap.dedent(CHEATS[name]).strip("\n").replace("PORT", str(port))
    out = tmp_path / "out"
    result = grade(toy, submission(toy, tmp_path, name, cells={"add_impl": source}), out)
    data = json.loads((out / "results.json").read_text())
    scores = {p.id: p.score for p in result.parts}
    assert scores == {"add": 0, "scale": 5}, f"{name}: {scores}\n{(out / 'feedback.md').read_text()}"
    assert data["score"] == 5 and data["tests"][0]["score"] == 0 and data["tests"][1]["score"] == 5
    assert not received, f"{name} reached the network: {received}"
    assert not list(tmp_path.glob("**/pwned")), "a pickle payload ran"
    leftover = subprocess.run(["pgrep", "-f", "sleep 4242.5"], capture_output=True, text=True).stdout
    assert not leftover.strip(), f"{name} left a process running: {leftover}"


@pytest.mark.parametrize("name, make, expected", [
    ("huge", lambda: b'{"cells": [], "nbformat": 4, "x": "' + b"a" * (21 << 20) + b'"}', "larger than"),
    ("binary", lambda: bytes(range(256)) * 100, "not valid JSON"),
    ("nbformat3", lambda: b'{"nbformat": 3, "cells": [], "worksheets": []}', "format 4"),
    ("cells_not_list", lambda: b'{"nbformat": 4, "cells": {"a": 1}}', "not a Jupyter notebook"),
    ("deep_json", lambda: b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
])
def test_malformed_notebooks_score_zero_with_a_message(toy, tmp_path, name, make, expected):  # noqa: F811
    out = tmp_path / "out"
    result = grade(toy, submission(toy, tmp_path, name, raw=make()), out)
    data = json.loads((out / "results.json").read_text())
    assert result.score == 0 and data["score"] == 0
    assert expected in data["output"], data["output"]


def test_cells_of_the_wrong_type_or_with_odd_metadata_are_graded_as_missing(toy, tmp_path):  # noqa: F811
    import nbformat
    from autograder.authoring.generate import solution_notebook
    nb = solution_notebook(toy.solution.read_text())
    for cell in nb.cells:
        gid = cell.metadata["nbgrader"]["grade_id"]
        if gid == "add_impl":
            cell.cell_type, cell.pop("outputs"), cell.pop("execution_count")
            cell.cell_type = "markdown"
        if gid == "intro":
            cell.metadata["nbgrader"] = "not a dict"
    path = tmp_path / "odd.ipynb"
    path.write_text(nbformat.writes(nb, version=4))
    result = grade(toy, path, tmp_path / "out")
    assert {p.id: p.score for p in result.parts} == {"add": 0, "scale": 5}
    assert any("no longer a code cell" in n for n in result.notes)


def test_a_batch_with_cheats_grades_the_honest_submission_in_full(toy, tmp_path):  # noqa: F811
    from autograder import commands
    folder = tmp_path / "batch"
    folder.mkdir()
    for name in ("infinite_loop", "fork_bomb", "forge_results_files", "memory_bomb"):
        submission(toy, folder, name, cells={"add_impl": textwrap.dedent(CHEATS[name]).strip("\n")})
    submission(toy, folder, "zz_honest")
    assert commands.grade(toy, [folder], tmp_path / "out", 2, "auto") == 0
    honest = json.loads((tmp_path / "out" / "zz_honest" / "results.json").read_text())
    assert honest["score"] == 15
    for name in ("infinite_loop", "fork_bomb", "forge_results_files", "memory_bomb"):
        assert json.loads((tmp_path / "out" / name / "results.json").read_text())["score"] == 5
