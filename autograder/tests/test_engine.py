"""The grading engine on a toy lab: scoring, confinement, and submissions that misbehave."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.authoring.generate import render, solution_notebook, student_notebook
from autograder.engine import p0fork, sandbox, wire
from autograder.engine.pipeline import Options, grade
from autograder.engine.student import Student, StudentCrash, StudentError, StudentTimeout
from autograder.paths import LabPaths

TOYLAB = Path(__file__).parent / "toylab"


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> LabPaths:
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(TOYLAB, root, dirs_exist_ok=True)
    paths = LabPaths("lab00", "lab00_toy", root)
    paths.release_dir.mkdir(parents=True)
    paths.release_notebook.write_text(render(student_notebook(paths.solution.read_text())))
    return paths


def scenarios(paths: LabPaths) -> dict[str, str]:
    return {paths.lab: paths.scenarios.read_text()}


def submission(paths: LabPaths, tmp: Path, name: str, cells: dict[str, str] | None = None, *, drop=(), raw=None) -> Path:
    """The reference notebook with some solution cells replaced (or removed), written to tmp/name.ipynb."""
    out = tmp / f"{name}.ipynb"
    if raw is not None:
        out.write_bytes(raw)
        return out
    nb = solution_notebook(paths.solution.read_text())
    for cell in list(nb.cells):
        gid = cell.metadata["nbgrader"]["grade_id"]
        if gid in drop:
            nb.cells.remove(cell)
        elif cells and gid in cells:
            cell.source = cells[gid]
    out.write_text(nbformat.writes(nb))
    return out


def graded(paths, tmp, name, **kwargs):
    result = grade(paths, submission(paths, tmp, name, **kwargs), tmp / f"out-{name}")
    data = json.loads((tmp / f"out-{name}" / "results.json").read_text())
    feedback = (tmp / f"out-{name}" / "feedback.md").read_text()
    return result, data, feedback


def part_scores(result) -> dict[str, float]:
    return {p.id: p.score for p in result.parts}


# -- wire -------------------------------------------------------------------------------------------
def test_wire_round_trips_safe_data():
    value = {"a": [1, 2.5, None, True, "x"], "arr": np.arange(6, dtype=np.int16).reshape(2, 3), "zero_d": np.array(2.5),
             "inf": float("inf"), "nested": [[np.float32(1.5)]]}
    back = wire.from_wire(json.loads(json.dumps(wire.to_wire(value))))
    assert back["a"] == [1, 2.5, None, True, "x"] and back["inf"] == float("inf")
    assert back["arr"].dtype == np.int16 and back["arr"].shape == (2, 3) and back["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["nested"] == [[1.5]] and back["zero_d"].shape == () and back["zero_d"] == 2.5


@pytest.mark.parametrize("bad", [object(), np.array([object()]), {1: 2}, {"__ndarray__": 1}, type("X", (float,), {})(1.0)])
def test_wire_refuses_unsafe_values(bad):
    with pytest.raises(wire.WireError):
        wire.to_wire(bad)


def test_wire_refuses_forged_arrays():
    with pytest.raises((wire.WireError, TypeError, ValueError)):
        wire.from_wire({"__ndarray__": {"dtype": "|O", "shape": [1], "data": ""}})
    with pytest.raises(wire.WireError):
        wire.from_wire({"__ndarray__": {"dtype": "<f8", "shape": [100], "data": "AAAA"}})


# -- confinement ------------------------------------------------------------------------------------
def test_confined_process_sees_nothing_of_the_course(toy):
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    with Student(spec, [("setup", "import numpy as np")], scenarios=scenarios(toy)) as student:
        seen = student.run("peek")
        level = student.level
    assert "torch" not in seen["torch"] or "not available" in seen["torch"], seen
    if level == "namespaces":
        assert seen["uid"] == sandbox.grading_uid() and seen["uid"] >= sandbox.UID_BASE
        assert "work" not in seen["root"] and "root" not in seen["root"], seen["root"]
        assert seen["network"] != "connected"
    print(f"sandbox level on this host: {level}")


def test_loopback_and_a_trusted_peer_beside_the_sandbox(toy):
    """lab.toml `loopback = true` gives the namespace a working 127.0.0.1 (it starts down: a socket can bind
    there, but nothing can connect), and `sandbox.trusted_peer` runs a P0 program in that namespace's network only, under a uid of
    its own (lab09's referee rank)."""
    import subprocess
    plain = sandbox.SandboxSpec("lab00", ("torch",))
    with Student(plain, [("setup", "import numpy as np")], scenarios=scenarios(toy)) as student:
        got = student.run("listen")
        if student.level != "namespaces":
            pytest.skip(f"no network namespace at sandbox level {student.level}")
        assert got["reach"] != "ok", "a namespace without loopback should not reach its own 127.0.0.1"
    spec = sandbox.SandboxSpec("lab00", ("torch",), loopback=True)
    with Student(spec, [("setup", "import numpy as np")], scenarios=scenarios(toy)) as student:
        got = student.run("listen")
        assert got["reach"] == "ok", f"with loopback = true the sandbox should reach its own 127.0.0.1, got {got['reach']}"
        port = got["port"]
        code = ("import os, socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10); "
                "s.sendall(b'uid %d' % os.getuid()); s.close()")
        argv, env, confine = sandbox.trusted_peer(["-c", code, str(port)], student.net_pid)
        peer = subprocess.Popen(argv, env=env, preexec_fn=confine, stderr=subprocess.PIPE)
        got = student.run("accepted")
        assert peer.wait(timeout=30) == 0, peer.stderr.read().decode()[-2000:]
    expected = sandbox.peer_uid() if sandbox.peer_uid() is not None else os.getuid()
    assert got == f"uid {expected}", f"the peer should connect from inside the namespace as uid {expected}, sent {got!r}"
    assert expected != sandbox.grading_uid()


RANK_BESIDE_THE_REFEREE = '''
def ready(sub):
    return True


def rank_one(sub, port, timeout):
    """Rank 1 of a world of two whose store the referee at seat 0 serves: receives a message, sends it back doubled."""
    import datetime
    import os
    import torch
    import torch.distributed as dist
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    store = dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=30))
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=1, world_size=2,
                            timeout=datetime.timedelta(seconds=timeout))
    got = torch.zeros(3, dtype=torch.float64)
    dist.recv(got, src=0)
    dist.send(got * 2, dst=0)
    store.add("done", 1)
    dist.destroy_process_group()
    return got.numpy()
'''


@pytest.mark.parametrize("start", ["afresh", "from_a_template"])
def test_referee_rank_runs_a_lab_role_at_its_seat(start):
    """The engine's referee rank (`autograder/engine/referee.py`) sits at one seat of a gloo world beside ranks in P1,
    serves the world's store and runs a lab's role there (here lab09's, which replays a script: send P0's array,
    record what comes back); P0 reads the record case by case (None: a case never recorded) and refuses roles
    outside the course's labs or outside the referee's own modules. Its zygote runs in the sandbox's network
    namespace only, under the peer uid with no_new_privs, whether started afresh or forked from a template
    (referee.start_template: the imports once per batch), and a templated one's CPU is counted."""
    from autograder.engine import referee as engine_referee
    from autograder.engine.referee import Referee
    if start == "from_a_template":
        if os.geteuid() != 0:
            pytest.skip("a referee template forks its zygotes as root")
        assert engine_referee.start_template(["autograder.labs.lab09.referee"])
    cpu = sandbox.remote_cpu_seconds()
    with pytest.raises(ValueError):
        Referee(None, ["os"], "lab00-referee", "lab00.scenarios:ready")
    spec = sandbox.SandboxSpec("lab00", (), sandbox.Limits(memory_mb=6144), loopback=True)
    x = np.array([0.5, -1.25, 3.0])
    job = {"role": "autograder.labs.lab09.referee:replay", "world": 2, "seat": 0, "timeout": 10.0, "sentinel_seed": 1,
           "cases": [[["send", 1, "x", "<f8", 3], ["recv", 1, "y", "<f8", 3]], []]}
    cells = [("setup", "import numpy as np")]
    with Student(spec, cells, scenarios={"lab00": RANK_BESIDE_THE_REFEREE}, call_timeout=60) as student, \
            Referee(student, ["autograder.labs.lab09.referee"], "lab00-referee", "lab00.scenarios:ready") as referee:
        with pytest.raises(ValueError):
            referee.start({**job, "role": "os:system"}, {}, 1)
        started = referee.start(job, {"x": x}, 3)
        try:
            got = student.run("rank_one", started.port, 10.0)
            recorded = started.finish(10.0)
        finally:
            started.close()
        assert isinstance(referee.proc, engine_referee._Forked) == (start == "from_a_template")
        status = Path(f"/proc/{referee.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines())
        uid = sandbox.peer_uid() if sandbox.peer_uid() is not None else os.getuid()
        assert int(fields["Uid"].split()[0]) == uid and (uid == os.getuid() or fields["NoNewPrivs"].strip() == "1"), status
        if student.net_pid is not None:
            assert os.readlink(f"/proc/{referee.proc.pid}/ns/net") == os.readlink(f"/proc/{student.net_pid}/ns/net")
            assert os.readlink(f"/proc/{referee.proc.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    if start == "from_a_template":
        assert sandbox.remote_cpu_seconds() > cpu, "the templated referee's CPU was not counted"
    assert np.array_equal(got, x), f"rank 1 should receive the referee's array {x}, got {got}"
    assert len(recorded) == 3 and recorded[2] is None and recorded[1] == {}, recorded
    assert list(recorded[0]) == ["m0"] and np.array_equal(recorded[0]["m0"], 2 * x), f"the referee recorded {recorded[0]}"


def test_confined_process_can_build_and_call_c(toy):
    """Compiled-kernel labs (lab07) let the learner's code run the system C compiler and load the result."""
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    with Student(spec, [("setup", "import numpy as np")], scenarios=scenarios(toy)) as student:
        got = student.run("compile_c")
    assert abs(got - 2 * np.sin(0.5)) < 1e-12, f"the confined C build returned {got}"


def test_each_call_is_bounded_and_a_fresh_process_follows_a_hang(toy):
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    cells = [("setup", "import numpy as np"), ("add_impl", "def add(a, b):\n    while a == [9]: pass\n    return np.add(a, b)")]
    with Student(spec, cells, scenarios=scenarios(toy), call_timeout=1, module_budget=10) as student:
        with pytest.raises(StudentTimeout, match="did not finish within 1 s"):
            student.run("add", [9], [1])
        assert student.run("add", [1], [1]).tolist() == [2]


def test_a_process_that_exits_is_reported_as_a_crash(toy):
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    cells = [("add_impl", "import os\ndef add(a, b):\n    os._exit(3)")]
    with Student(spec, cells, scenarios=scenarios(toy)) as student, pytest.raises(StudentCrash, match="exit status 3"):
        student.run("add", [1], [1])


def test_learner_exceptions_show_their_own_frames_only(toy):
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    cells = [("add_impl", "def add(a, b):\n    return helper(a)\n\ndef helper(a):\n    raise ValueError('bad shape')")]
    with Student(spec, cells, scenarios=scenarios(toy)) as student, pytest.raises(StudentError) as info:
        student.run("add", [1], [1])
    text = str(info.value)
    assert "ValueError: bad shape" in text and "cell add_impl, line 5, in helper" in text
    assert "scenarios" not in text and "/ipt" not in text


# -- the pipeline -----------------------------------------------------------------------------------
def test_reference_scores_full_marks_and_stub_zero(toy, tmp_path):
    result, data, _ = graded(toy, tmp_path, "reference")
    assert (result.score, result.max_score) == (15, 15), data
    assert data["tests"][0]["name"] == "Part 1 · Adding" and data["tests"][0]["status"] == "passed"
    assert len(data["extra_data"]["submission_sha256"]) == 64 and data["extra_data"]["sandbox"] in sandbox.LEVELS
    stub = grade(toy, toy.release_notebook, tmp_path / "stub")
    assert stub.score == 0 and all(p.failures for p in stub.parts)
    assert "not implemented yet" in (tmp_path / "stub" / "feedback.md").read_text()


def test_a_bug_costs_only_its_part_and_feedback_says_what_failed(toy, tmp_path):
    result, _, feedback = graded(toy, tmp_path, "bug", cells={"scale_impl": "def scale(a, k):\n    return [x * abs(k) for x in a]"})
    assert part_scores(result) == {"add": 10, "scale": pytest.approx(5 * 2 / 3, abs=0.01)}
    assert "scale([1, 2], -3) should be [-3, -6]" in feedback


def test_a_syntax_error_in_one_cell_costs_only_that_part(toy, tmp_path):
    result, _, feedback = graded(toy, tmp_path, "syntax", cells={"add_impl": "def add(a, b)\n    return a"})
    assert part_scores(result) == {"add": 0, "scale": 5}
    assert "cell 'add_impl' raised SyntaxError" in feedback


@pytest.mark.parametrize("name, raw, expected", [
    ("not_json", b"{this is not json", "not valid JSON"),
    ("not_a_notebook", b'{"hello": 1}', "not a Jupyter notebook"),
    ("empty", b"", "not valid JSON"),
])
def test_unreadable_notebooks_get_a_clear_message_and_zero(toy, tmp_path, name, raw, expected):
    result, data, feedback = graded(toy, tmp_path, name, raw=raw)
    assert result.score == 0 and data["score"] == 0 and len(data["tests"]) == 2
    assert expected in feedback and expected in data["output"]


def test_missing_and_duplicated_cells_are_noted(toy, tmp_path):
    nb = solution_notebook(toy.solution.read_text())
    nb.cells.append(nbformat.v4.new_code_cell("def scale(a, k):\n    return None",
                                              metadata={"nbgrader": {"grade_id": "scale_impl", "solution": True}}))
    nb.cells = [c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] != "add_impl"]
    path = tmp_path / "odd.ipynb"
    path.write_text(nbformat.writes(nb))
    result = grade(toy, path, tmp_path / "odd")
    assert part_scores(result) == {"add": 0, "scale": 5}
    assert any("'add_impl' is missing" in n for n in result.notes)
    assert any("'scale_impl' appears more than once" in n for n in result.notes)


def test_locked_cells_come_from_the_release(toy, tmp_path):
    result, _, _ = graded(toy, tmp_path, "locked", cells={"setup": "np = None"})
    assert result.score == 15


@pytest.mark.parametrize("name, source, lost_part", [
    ("exit_at_import", "import sys\nsys.exit(0)\ndef add(a, b): pass", "add"),
    ("hang_at_import", "while True:\n    pass", "add"),
    ("hang_in_call", "def add(a, b):\n    while True:\n        pass", "add"),
    ("flood", "def add(a, b):\n    print('x' * 10_000_000)\n    return a", "add"),
])
def test_misbehaving_submissions_lose_only_what_they_touch(toy, tmp_path, name, source, lost_part):
    result, data, feedback = graded(toy, tmp_path, name, cells={"add_impl": source})
    scores = part_scores(result)
    assert scores["add"] < 10 and scores["scale"] == 5, (scores, feedback)
    assert data["score"] == result.score


def test_grading_twice_gives_identical_results(toy, tmp_path):
    one, _, _ = graded(toy, tmp_path, "twice_a", cells={"scale_impl": "def scale(a, k):\n    return [x * abs(k) for x in a]"})
    two, _, _ = graded(toy, tmp_path, "twice_b", cells={"scale_impl": "def scale(a, k):\n    return [x * abs(k) for x in a]"})
    assert [(p.id, p.score, p.failures) for p in one.parts] == [(p.id, p.score, p.failures) for p in two.parts]


def test_the_warm_p0_grades_exactly_as_a_fresh_pytest_process(toy, tmp_path, monkeypatch):
    """Gradings run as children of a P0 server that imported torch & co. once (engine/p0fork.py): the same
    parts, scores and failure texts as a plain `python -m pytest`, for a bug, a hang and the reference."""
    cells = {"scale_impl": "def scale(a, k):\n    return [x * abs(k) for x in a]",
             "add_impl": "def add(a, b):\n    while True:\n        pass"}
    runs, cpu = {}, {}
    for mode, template in (("0", "1"), ("1", "1"), ("1", "0")):  # and with or without the lab's template
        monkeypatch.setenv("IPT_P0_FORK", mode)
        monkeypatch.setenv("IPT_TEMPLATE", template)
        before = p0fork.cpu_seconds(), p0fork.sandbox_cpu_seconds()
        result, _, _ = graded(toy, tmp_path, f"mode{mode}{template}", cells=cells)
        runs[mode + template] = [(p.id, p.score, p.failures) for p in result.parts]
        cpu[mode + template] = (p0fork.cpu_seconds() - before[0], p0fork.sandbox_cpu_seconds() - before[1])
    assert runs["01"] == runs["11"] == runs["10"]
    # the CPU of a forked run, and the part of it spent in sandboxes forked from templates (the hang burns ~its timeout)
    if sandbox.resolve_level("auto") == "namespaces":
        total, inside = cpu["11"]
        assert 0.5 < inside < total, f"a templated run's sandbox CPU {inside:.2f} s of {total:.2f} s"
    assert cpu["10"][1] == 0 and cpu["10"][0] > 0.5, f"without templates no sandbox CPU is reported apart: {cpu['10']}"
    env = dict(os.environ)
    one, two = (p0fork.server_for({**env, "PYTEST_CURRENT_TEST": name}) for name in ("a (call)", "b (call)"))
    assert one is not None, "the P0 server should start on Linux"
    assert one is two, "variables that change per test must not start another server (only start-up ones do)"


def test_a_warm_p0_run_past_its_limit_is_killed_with_what_it_started(tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    server = p0fork.Server(env)
    try:
        (tmp_path / "test_sleep.py").write_text(
            "import subprocess, sys, time\n\ndef test_sleep():\n"
            "    subprocess.Popen([sys.executable, '-c', 'import time; open(\"started\", \"w\"); time.sleep(60)'])\n"
            "    time.sleep(60)\n")
        started = time.monotonic()
        code = server.run(["-q", "-p", "no:cacheprovider", str(tmp_path / "test_sleep.py")], str(tmp_path),
                          str(tmp_path / "log"), timeout=5)
        assert code is None and time.monotonic() - started < 30
        time.sleep(0.5)
        assert (tmp_path / "started").exists()
        leftovers = subprocess.run(["pgrep", "-f", "time.sleep\\(60\\)"], capture_output=True, text=True).stdout.split()
        assert not leftovers, f"processes the timed-out run started are still alive: {leftovers}"
        assert server.run(["-q", "-p", "no:cacheprovider", "--co", str(tmp_path / "test_sleep.py")], str(tmp_path),
                          str(tmp_path / "log2"), timeout=60) == 0, "the server goes on serving after a timeout"
    finally:
        server.close()


def test_a_warm_p0_learns_the_installed_modules_its_runs_import(tmp_path):
    """The server imports, before its next fork, the installed modules a run imported (torch's lazy sympy and
    dynamo imports cost every grading again otherwise); never a module of the course's own tree, and an
    import that prints cannot garble the server's replies."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tmp_path)}
    (tmp_path / "course_module.py").write_text("VALUE = 1\n")
    (tmp_path / "test_first.py").write_text(
        "import sys\n\ndef test_imports():\n    import wave, this, course_module\n"
        "    assert 'wave' in sys.modules\n")
    (tmp_path / "test_second.py").write_text(
        "import sys\n\ndef test_inherits():\n    assert 'wave' in sys.modules and 'this' in sys.modules\n"
        "    assert 'course_module' not in sys.modules\n")
    server = p0fork.Server(env)
    try:
        args = ["-q", "-p", "no:cacheprovider"]
        assert server.run([*args, str(tmp_path / "test_second.py")], str(tmp_path), str(tmp_path / "log0"), 60) == 1, \
            "a fresh server has not imported wave yet (this test would prove nothing)"
        assert server.run([*args, str(tmp_path / "test_first.py")], str(tmp_path), str(tmp_path / "log1"), 60) == 0
        code = server.run([*args, str(tmp_path / "test_second.py")], str(tmp_path), str(tmp_path / "log2"), 60)
        assert code == 0, (tmp_path / "log2").read_text()[-2000:]
    finally:
        server.close()


def test_a_confined_workers_cpu_time_reaches_the_grading_process(toy):
    """`make bench-grader` counts a grading's CPU from RUSAGE_CHILDREN: at level namespaces the sandbox's
    first process must be reaped inside (by unshare) before unshare dies, or its CPU is lost."""
    import resource
    if sandbox.resolve_level("auto") != "namespaces":
        pytest.skip("only level namespaces runs the worker under unshare")

    def children_cpu():
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    spec = sandbox.SandboxSpec("lab00", ("torch",), level="namespaces")
    before = children_cpu()
    zygote = sandbox.Zygote(spec)
    try:
        with Student(spec, [("setup", "x = 1")], scenarios=scenarios(toy), zygote=zygote) as student:
            assert student.run("burn_cpu", 1.0) is True
    finally:
        zygote.close()
    assert children_cpu() - before >= 0.9, f"only {children_cpu() - before:.2f} s of the worker's 1 s of CPU was counted"


def test_selftest_passes_on_the_toy_lab_and_fails_when_a_mutant_survives(toy, capsys):
    from autograder.engine import selftest
    # the toy lab has only two mutants: the at-least-ten rule is the one failure expected
    assert selftest.run(toy, jobs=2) == 1
    out = capsys.readouterr().out
    assert "mutants caught: 2/2" in out and "only 2 mutants" in out
    assert out.count("FAIL") == 1


def test_an_attempt_scoring_above_its_honest_twin_fails_the_selftest(toy, capsys, monkeypatch):
    from autograder.engine import selftest
    monkeypatch.setattr(selftest, "QUICK_ATTEMPTS", 2)  # both attempts below, in quick mode
    attempts = toy.hidden / "adversarial.toml"
    attempts.write_text('''
[[attempt]]
name = "constant_sum"
kind = "hard-coded"
description = "returns a constant: must not beat the stub"
base = "stub"
[attempt.cells]
add_impl = "def add(a, b):\\n    return [3, 5]"

[[attempt]]
name = "honest_but_listed"
kind = "degenerate"
description = "an honest add listed as a cheat: it scores above its twin (the stub), which the selftest reports"
base = "stub"
[attempt.cells]
add_impl = "import numpy as np\\ndef add(a, b):\\n    return np.asarray(a) + np.asarray(b)"
''')
    try:
        assert selftest.run(toy, jobs=2, quick=True) == 1
    finally:
        attempts.unlink()
    out = capsys.readouterr().out
    assert "adversarial attempts held: 1/2" in out, out
    assert "attempt honest_but_listed: scored above its honest twin in add" in " ".join(out.split()), out


def test_catalogue_names_only_existing_tests(toy):
    from autograder.engine import selftest
    toy.catalogue.write_text('''
[[case_class]]
name = "negative numbers"
functions = ["add"]
tests = ["test_add.py::test_add_negative_numbers_that_do_not_exist", "test_add.py::test_small"]
''')
    try:
        classes, problems = selftest.catalogue_problems(toy)
    finally:
        toy.catalogue.unlink()
    assert classes == 1 and len(problems) == 1 and "test_add_negative_numbers_that_do_not_exist" in problems[0], problems


def test_machine_mutants_stay_inside_solution_regions_and_have_stable_ids(toy):
    from autograder.engine import mutation
    text = toy.solution.read_text()
    mutants = mutation.generate(text)
    assert mutants, "no machine mutant generated for the toy lab"
    inside = mutation.solution_lines(text)
    assert all(m.line in inside for m in mutants)
    assert len({m.id for m in mutants}) == len(mutants)
    shifted = "# a comment line that moves every line down\n" + text
    assert {m.id for m in mutation.generate(shifted)} == {m.id for m in mutants}


def test_machine_mutants_made_in_place_are_cosmic_rays_own():
    """generate() mutates each parsed cell in place and restores it; cosmic-ray's mutate_code parses the code
    afresh for every mutant. Both must give the same mutants, in the same order (two labs' solutions)."""
    from autograder.engine import mutation
    from autograder.paths import lab_paths
    for lab in ("lab03", "lab05"):
        text = lab_paths(lab).solution.read_text()
        fast, exact = mutation.generate(text), mutation.generate(text, exact=True)
        assert len(fast) > 50 and fast == exact, f"{lab}: {len(fast)} in place vs {len(exact)} by mutate_code"


def test_batch_grading_writes_a_class_table_and_resumes(toy, tmp_path, capsys):
    from autograder import commands
    folder = tmp_path / "subs"
    folder.mkdir()
    submission(toy, folder, "alice")
    submission(toy, folder, "bob", cells={"add_impl": "def add(a, b):\n    return a"})
    out = tmp_path / "out"
    assert commands.grade(toy, [folder], out, 2, "auto") == 0
    rows = (out / "class.csv").read_text().splitlines()
    assert rows[0].startswith("learner,submission,submitted_at,add,scale,raw_score,days_late,penalty_percent,score,max_score"), rows[0]
    assert rows[1].startswith("alice,alice.ipynb,,10.0,5.0,15.0,0,0.0,15.0,15.0"), rows[1]
    assert rows[2].startswith("bob,bob.ipynb,,0.0,5.0,5.0,0,0.0,5.0,15.0"), rows[2]
    first = (out / "bob" / "results.json").stat().st_mtime_ns
    capsys.readouterr()
    assert commands.grade(toy, [folder], out, 2, "auto") == 0
    assert "2 submission(s) already graded" in capsys.readouterr().out
    assert (out / "bob" / "results.json").stat().st_mtime_ns == first
    assert commands.grade(toy, [folder], out, 2, "auto", force=True) == 0
    assert (out / "bob" / "results.json").stat().st_mtime_ns != first
    outcomes = json.loads((out / "bob" / "outcomes.json").read_text())
    assert {o["part"] for o in outcomes} == {"add", "scale"} and any(o["outcome"] == "failed" for o in outcomes)


def test_class_report_shows_distribution_parts_and_most_failed_tests(toy, tmp_path):
    from autograder import commands
    from autograder.report import build
    folder = tmp_path / "subs"
    folder.mkdir()
    submission(toy, folder, "alice")
    submission(toy, folder, "bob", cells={"add_impl": "def add(a, b):\n    return a"})
    submission(toy, folder, "carol", cells={"add_impl": "def add(a, b):\n    return a"})
    commands.grade(toy, [folder], tmp_path / "out", 2, "auto")
    page = build("lab00", tmp_path / "out").read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "3 submissions" in page and "test_add.py::test_small</code></td><td>2 of 3" in page


@pytest.mark.parametrize("level", ["uid", "rlimits"])
def test_weaker_sandbox_levels_grade_the_same(toy, tmp_path, level):
    if level == "uid" and sandbox.uid_level_problem():
        # a course in a private folder: its worker could not start, and grading says so instead of
        # failing the learner's parts
        result = grade(toy, submission(toy, tmp_path, "ref"), tmp_path / "ref", Options(sandbox=level))
        assert result.error and "SandboxUnavailable" in result.error and "chmod o+x" in result.error, result.error
        with pytest.raises(sandbox.SandboxUnavailable):
            sandbox.resolve_level(level)
        return
    ref = grade(toy, submission(toy, tmp_path, "ref"), tmp_path / "ref", Options(sandbox=level))
    stub = grade(toy, toy.release_notebook, tmp_path / "stub", Options(sandbox=level))
    assert (ref.score, stub.score, ref.level) == (15, 0, level)
    assert json.loads((tmp_path / "ref" / "results.json").read_text())["extra_data"]["sandbox"] == level
    spec = sandbox.SandboxSpec("lab00", ("torch",), level=level)
    with Student(spec, [("setup", "import numpy as np")], scenarios=scenarios(toy)) as student:
        seen = student.run("peek")
    assert seen["uid"] == (sandbox.grading_uid() if level == "uid" else seen["uid"]) and "not available" in seen["torch"]


def test_concurrent_gradings_get_their_own_uid():
    """Per-uid limits (processes) are a grading's own: two grading processes lease different uids."""
    import subprocess
    import sys
    code = "import time; from autograder.engine import sandbox; print(sandbox.grading_uid(), flush=True); time.sleep(3)"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    uids = [int(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait(timeout=30)
    assert uids[0] != uids[1] and min(uids) >= sandbox.UID_BASE, uids


def test_each_part_starts_with_an_empty_tmp(toy):
    """The zygote empties its private /tmp between test modules (parts): nothing a part leaves there
    reaches the next one."""
    listings = _two_parts_of_one_run(toy, "leave_in_tmp")
    assert "left-by-an-earlier-part" not in listings[1], listings


def _two_parts_of_one_run(toy, scenario):
    """The scenario's replies in two consecutive test modules (parts) of one grading run's zygote."""
    if sandbox.resolve_level("auto") != "namespaces":
        pytest.skip("the zygote exists only at sandbox level namespaces")
    spec = sandbox.SandboxSpec("lab00", ("torch",), level="namespaces")
    zygote = sandbox.Zygote(spec)
    replies = []
    try:
        for _ in range(2):
            with Student(spec, [("setup", "import numpy as np")], scenarios=scenarios(toy), zygote=zygote) as student:
                replies.append(student.run(scenario))
    finally:
        zygote.close()
    return replies


def test_each_part_starts_without_system_v_ipc_objects(toy):
    """A shared-memory segment is a channel between parts too: the zygote removes the namespace's System V
    IPC objects along with /tmp between test modules."""
    seen = _two_parts_of_one_run(toy, "leave_shared_memory")
    assert seen[0][1] and seen[1][1], f"the scenario could not create a segment: {seen}"
    assert seen[1][0] == 0, f"the second part saw {seen[1][0]} segment(s) left by the first"


PROCESSES = """
import ctypes, multiprocessing, time

_children = []


def start(sub, name):
    context = multiprocessing.get_context("fork")
    ready = context.Event()  # a POSIX semaphore: it needs /dev/shm

    def child():
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(name.encode()), 0, 0, 0)  # PR_SET_NAME
        ready.set()
        time.sleep(60)

    process = context.Process(target=child, daemon=True)
    process.start()
    _children.append(process)
    return ready.wait(10)


def stop(sub):
    for process in _children:
        process.kill()
        process.join()
    _children.clear()
    return True
"""


def test_the_sandbox_processes_seen_from_outside_and_a_private_dev_shm():
    """lab.toml `shm = true` gives the namespace a writable /dev/shm (multiprocessing's locks and events are
    POSIX semaphores there), and `student.processes()` lists the sandbox's processes from the host's /proc:
    a child the learner's code started, by the name it gave itself, until it is stopped (lab11's loader)."""
    def check(student):
        assert student.processes() == [], "no process before the first call"
        assert student.run("start", "ipt-child") is True
        seen = student.processes()
        assert sum(p["worker"] for p in seen) == 1, seen
        named = [p for p in seen if p["comm"] == "ipt-child"]
        assert len(named) == 1 and not named[0]["worker"] and named[0]["state"] not in "ZX", seen
        assert student.run("stop") is True
        assert not [p for p in student.processes() if p["comm"] == "ipt-child"]

    spec = sandbox.SandboxSpec("lab00", ("torch",), shm=True)
    with Student(spec, [("setup", "x = 1")], scenarios={"lab00": PROCESSES}) as student:
        check(student)
        level = student.level
    if level != "namespaces":
        return
    with Student(sandbox.SandboxSpec("lab00", ("torch",)), [("setup", "x = 1")], scenarios={"lab00": PROCESSES}) as student, \
            pytest.raises(StudentError):
        student.run("start", "ipt-child")  # without shm = true the namespace has no /dev/shm
    zygote = sandbox.Zygote(dataclasses.replace(spec, level="namespaces"))
    try:
        with Student(spec, [("setup", "x = 1")], scenarios={"lab00": PROCESSES}, zygote=zygote) as student:
            check(student)
    finally:
        zygote.close()


WITNESS = """
import os, socket


def _ask(path, line):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(line.encode() + b"\\n")
        return conn.makefile("rb").readline().decode().strip()


def ask_here_and_in_a_child(sub, path):
    here = _ask(path, "parent")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, _ask(path, "child").encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    return [here, os.read(read, 100).decode()]
"""


def test_a_witness_names_the_calling_process_from_the_kernel():
    """engine.witness: a process in the sandbox connects to the socket P0 serves; P0 takes its host pid from the
    socket (SO_PEERCRED), not from anything the process says, and answers with a value of its own choosing. The
    student's own process and a child it forked are told apart, by pids that `processes()` also lists."""
    def check(student):
        with student.witness(lambda pid, line: f"{pid}:{line.decode()}".encode()) as seen:
            assert seen.inside != seen.path or student.level != "namespaces"
            here, child = student.run("ask_here_and_in_a_child", seen.inside)
            records = list(seen.records)
        main = [p["pid"] for p in student.processes() if p["worker"]]
        assert [r[1] for r in records] == [b"parent", b"child"], records
        assert here == f"{records[0][0]}:parent" and child == f"{records[1][0]}:child", (here, child, records)
        assert [records[0][0]] == main, f"the parent's pid {records[0][0]} should be the worker's host pid {main}"
        assert records[1][0] not in main and records[1][0] > 0, records
        assert not os.path.exists(seen.path), "closing the witness removes its socket"

    spec = sandbox.SandboxSpec("lab00", ("torch",))
    with Student(spec, [("setup", "x = 1")], scenarios={"lab00": WITNESS}) as student:
        check(student)
        level = student.level
    if level != "namespaces":
        return
    zygote = sandbox.Zygote(dataclasses.replace(spec, level="namespaces"))  # as a grading run forks its workers
    try:
        with Student(spec, [("setup", "x = 1")], scenarios={"lab00": WITNESS}, zygote=zygote) as student:
            check(student)
    finally:
        zygote.close()


def test_learner_exception_type_names_are_cut_like_messages():
    """A class name is learner text that reaches feedback: a 3000-character name once carried harvested
    hidden inputs out of the sandbox, so both the worker's errors and scenario error replies cut it."""
    from autograder.engine import replies
    from autograder.engine.student import StudentError
    long_name = "Leak" + "A" * 3000
    assert len(StudentError(long_name, "m").type) <= 83 and len(str(StudentError(long_name, "m"))) < 200
    reply = replies.error_reply({"error": long_name, "message": "x" * 5000}, "a case")
    assert len(reply["error"]) <= 83 and len(reply["message"]) <= 300
    assert replies.error_reply({"error": "ValueError", "message": "bad"}, "a case")["error"] == "ValueError"


def test_world_timeouts_grow_with_the_run_queue_and_no_further(monkeypatch):
    """engine.referee.busy_timeout: the base on an idle machine, scaled by the load per core on a busy one
    (an honest rank starved of CPU is not a hanging one), capped at four times the base."""
    import os

    from autograder.engine.referee import busy_timeout
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    for load, want in ((0.0, 4.0), (cores * 1.0, 4.0), (cores * 2.5, 10.0), (cores * 50.0, 16.0)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert busy_timeout(4.0) == want, (load, busy_timeout(4.0))


LOOK = """
import os, resource, socket, time


def look(sub):
    mounts = sorted(" ".join([l.split()[4], l.split()[5], l.split(" - ")[1].split()[0]]) for l in open("/proc/self/mountinfo"))
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_FSIZE")}
    status = [l for l in open("/proc/self/status").read().splitlines() if l.startswith(("NoNewPrivs", "Cap", "Uid", "Gid", "Groups"))]
    return {"mounts": mounts, "limits": limits, "fds": sorted(os.listdir("/proc/self/fd")), "status": status,
            "interfaces": socket.if_nameindex(), "env": dict(os.environ), "cwd": os.getcwd(), "host": socket.gethostname(),
            "root": sorted(os.listdir("/")), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm"))}


def leave(sub):
    open("/tmp/left", "w").write("1")
    open("/dev/shm/left", "w").write("1")
    return True


def burn_cpu(sub, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return True
"""


def test_a_zygote_forked_from_a_template_is_a_fresh_sandbox():
    """sandbox.start_template: a lab's imports once per batch, and each grading's zygote forked from it in new
    namespaces. What the learner's code can observe must be what a zygote started afresh shows: the same
    mounts, limits, descriptors, privileges, environment, network and processes; nothing left by an earlier
    grading in /tmp or /dev/shm; P0's view (processes(), net_pid) unchanged; and its CPU counted."""
    spec = sandbox.SandboxSpec("lab00", ("torch",), level="namespaces", shm=True, loopback=True)
    if sandbox.resolve_level("auto") != "namespaces":
        pytest.skip("templates serve level namespaces only")

    def grading(zygote, cells=(("setup", "x = 1"),)):
        with Student(spec, list(cells), scenarios={"lab00": LOOK}, zygote=zygote) as student:
            seen = student.run("look")
            assert student.run("leave") is True
            processes = student.processes()
            assert [p["worker"] for p in processes] == [False, True], processes  # pid 1 (the zygote), the worker
            assert student.net_pid == zygote.proc.pid
            return seen

    fresh = sandbox.Zygote(spec)
    try:
        assert not isinstance(fresh.proc, sandbox._FromTemplate)
        afresh = grading(fresh)
    finally:
        fresh.close()
    assert sandbox.start_template(spec), "the template did not start"
    for _ in range(2):
        zygote = sandbox.Zygote(spec)
        try:
            assert isinstance(zygote.proc, sandbox._FromTemplate), "the zygote was not forked from the template"
            seen = grading(zygote)
            before = sandbox.remote_cpu_seconds()
            with Student(spec, [], scenarios={"lab00": LOOK}, zygote=zygote) as student:
                assert student.run("burn_cpu", 1.0) is True
        finally:
            zygote.close()
        assert sandbox.remote_cpu_seconds() - before >= 0.9, "the templated zygote's CPU was not counted"
        for key, value in afresh.items():
            assert seen[key] == value, f"{key}: afresh {value}, from the template {seen[key]}"
        assert seen["tmp"] == [] and seen["shm"] == [] and seen["pids"] == [1, 2]


def test_each_grading_run_leases_its_own_uid_and_a_template_none():
    """Concurrent gradings must not share a uid (per-uid limits such as RLIMIT_NPROC, and the per-uid keyring,
    would then be shared between submissions). P0's fork server starts templates and forks every grading run:
    a template leases no uid, and a forked run leases one of its own, never its parent's."""
    if os.geteuid() != 0:
        pytest.skip("uids are leased by root")
    spec = sandbox.SandboxSpec("lab00", ("torch",), level="namespaces")
    if sandbox.resolve_level("auto") == "namespaces":
        leased = sandbox._uid_pid == os.getpid()
        sandbox.start_template(spec)
        assert leased or sandbox._uid_pid != os.getpid(), "starting a template leased a uid in its starter"
    mine = sandbox.grading_uid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, str(sandbox.grading_uid()).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    theirs = int(os.read(read, 64))
    os.close(read)
    assert theirs != mine, f"a forked grading run took its parent's uid {mine}"


KEYRING = """
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)


def add_key(sub):
    return _libc.syscall(248, b"user", b"ipt-left", b"from an earlier grading", 23, -4)  # add_key to @u


def find_key(sub):
    found = _libc.syscall(250, 10, -4, b"user", b"ipt-left", 0)  # KEYCTL_SEARCH in @u
    return found if found >= 0 else -ctypes.get_errno()
"""


def test_a_uid_keyring_is_empty_when_a_grading_starts():
    """The kernel's user keyring belongs to a uid, not to a process: a key one grading adds would still be there for
    the next grading under the same uid (gradings reuse leased uids), unless the sandbox empties it first."""
    import platform
    if platform.machine() != "x86_64":
        pytest.skip("keyctl syscall numbers here are x86-64's")
    spec = sandbox.SandboxSpec("lab00", ("torch",))
    with Student(spec, [("setup", "x = 1")], scenarios={"lab00": KEYRING}) as student:
        if student.level == "rlimits":
            pytest.skip("level rlimits keeps the grader's own uid")
        if student.run("add_key") < 0:
            pytest.skip("this kernel refuses keys here")
        assert student.run("find_key") > 0
    with Student(spec, [("setup", "x = 1")], scenarios={"lab00": KEYRING}) as student:
        assert student.run("find_key") < 0, "a key left by an earlier grading under this uid was found"


def test_a_fork_server_with_templates_stops_them_and_exits_when_closed(toy, tmp_path):
    """The fork server starts a lab's templates (its children) for the gradings it forks; when its caller closes it,
    it stops them and exits at once (it used to wait for them forever, and was killed after 5 s)."""
    if sandbox.resolve_level("auto") != "namespaces":
        pytest.skip("templates serve level namespaces only")
    server = p0fork.Server({**os.environ, "PYTHONHASHSEED": "0"})
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    job = {"lab": "lab00", "deny_modules": ["torch"], "sandbox": "auto", "preload": [], "limits": {}}
    code = server.run(["-q", "-p", "no:cacheprovider", str(tmp_path / "test_nothing.py")], str(tmp_path),
                      str(tmp_path / "log"), timeout=60, template=job)
    assert code == 0
    children = [int(c) for c in Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()]
    assert children, "the server started no template"
    started = time.monotonic()
    server.close()
    assert server.proc.returncode == 0 and time.monotonic() - started < 4, "the server was killed, not closed"
    assert not [c for c in children if Path(f"/proc/{c}").exists()], "a template outlived its server"


def test_an_untouched_stub_is_asked_once_per_student_and_only_a_bare_one_counts():
    """engine.stubs: a lab skips the expensive work (lab09's and lab10's worlds) of an entry point that raised the
    release's bare NotImplementedError() outside that work; a learner's own NotImplementedError with a message, a
    return, or a probe that failed never skips anything. P1 is asked once per student (test module)."""
    from autograder.engine import stubs
    from autograder.engine.student import StudentTimeout

    class Asked:
        def __init__(self, answer):
            self.answer, self.calls = answer, 0

        def run(self, target):
            self.calls += 1
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    student = Asked({"bare": {"error": "NotImplementedError", "message": ""}, "returned": None,
                     "own": {"error": "NotImplementedError", "message": "needs a process group"},
                     "other": {"error": "ValueError", "message": ""}})
    assert stubs.stub_error(student, "labXX.scenarios:untouched", "bare") == {"error": "NotImplementedError", "message": ""}
    for name in ("returned", "own", "other", "missing"):
        assert stubs.stub_error(student, "labXX.scenarios:untouched", name) is None, name
    assert student.calls == 1, "the probe is asked once per student"
    for answer in (StudentTimeout("Timeout", "hung"), ["bare"], "bare"):
        assert stubs.stub_error(Asked(answer), "labXX.scenarios:untouched", "bare") is None, answer


def test_a_learner_facing_failure_reports_its_message_and_an_internal_one_keeps_the_traceback():
    """pytest's traceback of a failed test costs 2-3 ms (Python parses every frame's source); the report of a
    failure the learner reads is its message alone, while a grader's own fault keeps the full traceback."""
    from autograder.engine import plugin

    def full(excinfo, *args, **kwargs):
        full.calls += 1
        return "traceback"
    full.calls = 0
    short = plugin._short_repr_failure(full)
    for exc in (AssertionError("transpose(0, 1) should have strides (1, 3)"), StudentError("ValueError", "bad")):
        try:
            raise exc
        except type(exc):
            assert short(pytest.ExceptionInfo.from_current()) == plugin._message(pytest.ExceptionInfo.from_current())[0]
    assert full.calls == 0
    try:
        {}["missing"]
    except KeyError:
        assert short(pytest.ExceptionInfo.from_current()) == "traceback" and full.calls == 1


HYPOTHESIS_DRAWS = '''
import importlib, sys
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
from autograder.engine.plugin import fix_hypothesis_constants

def draws():
    seen = []
    @seed(7)
    @settings(max_examples=200, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 10**6), st.floats(-1e9, 1e9))
    def draw(i, f):
        seen.append((i, f))
    draw()
    return seen

sys.path.insert(0, sys.argv[1])
before = draws()
importlib.import_module("consts_a")     # a local module with constants of its own
assert draws() != before, "hypothesis no longer draws from local modules' constants: the fix may be obsolete"
assert fix_hypothesis_constants()
fixed = draws()
importlib.import_module("consts_b")
assert draws() == fixed, "with the pool fixed, a newly imported module changed the cases of the same seed"
print("ok")
'''


def test_a_seed_draws_the_same_cases_whatever_the_process_imported(tmp_path):
    """hypothesis takes some values from the constants of the local modules loaded: the graders fix that pool, so
    a batch of several labs, a one-part check and a full grading meet the same cases for one seed."""
    mods = tmp_path / "mods"
    mods.mkdir()
    for name, values in (("consts_a", "123457, 98765.4321, 424243"), ("consts_b", "7654321, 1234.5678, 31337")):
        (mods / f"{name}.py").write_text(f"VALUES = ({values})\n")
    done = subprocess.run([sys.executable, "-c", HYPOTHESIS_DRAWS, str(mods)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_warm_up_runs_once_quietly_and_its_failure_costs_nothing(capfd):
    """worker._warm runs the scenarios' warm_p1() in a module of its own; what it prints goes nowhere (a template
    answers "ready" on its stdout), and one that raises only means the workers pay their first calls themselves."""
    from autograder.engine import worker
    worker._warm("import sys\ndef warm_p1():\n    print('noise')\n    sys.ipt_warm_ran = sys.ipt_warm_ran + 1\n")
    worker._warm("def warm_p1():\n    raise RuntimeError('a broken warm-up')\n")
    worker._warm("")
    print("after")
    assert sys.ipt_warm_ran == 1
    assert capfd.readouterr().out == "after\n"


sys.ipt_warm_ran = 0


def test_the_template_of_a_lab_with_a_warm_up_is_its_own():
    from autograder.engine.pipeline import warm_source
    from autograder.paths import lab_paths
    assert "def warm_p1(" in warm_source(lab_paths("lab11")) and warm_source(lab_paths("lab01")) == ""
    plain = sandbox.SandboxSpec("lab11", preload=("torch.export",))
    warmed = dataclasses.replace(plain, warm=warm_source(lab_paths("lab11")))
    assert sandbox.template_key(plain) != sandbox.template_key(warmed)
    assert sandbox.spec_of({"lab": "lab11", "preload": ["torch.export"], "warm": warmed.warm}) == warmed
