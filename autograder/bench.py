"""`make bench-grader [LAB=labNN]`: our confined grader against `nbgrader autograde`, measured in one run.

Same submissions for both (the lab's bundled examples), runs interleaved (ours, theirs, ours, ...),
medians reported. Prints, per lab: wall and CPU seconds per submission (CPU of the whole process tree,
student processes included), the mean CPU per submission split into the grader's side and the learner's
sandboxes (engine/p0fork.py sandbox_cpu_seconds), `time ratio ours/nbgrader: X.XX`, batch throughput at -j1
and -j2, the projected time for a class of 200 at -j2, and the confinement overhead per test module; then a table
over all labs benchmarked.

The machine's own speed moves: on a shared 2-core host the same grading's CPU varies by 1.5-2x between hours.
So each lab's rounds are interleaved with a fixed calibration workload (`calibrate`), and the report gives the
CPU per submission also at the fastest speed this CPU has shown for that workload (kept in
build/bench/calibration.json). Figures from different hours compare at that speed; figures of one run compare
as measured.

Once per batch, P0's fork server starts each lab's templates (engine/sandbox.py start_template and
engine/referee.py start_template: the student zygote's and the referee's imports, 0.1-4 s of CPU). That start-up
belongs to the batch, not to a submission, so the per-submission CPU leaves it out; it reaches this process's
RUSAGE_CHILDREN when the server exits. `IPT_TEMPLATE=0` measures the gradings without templates.
"""
from __future__ import annotations

import ast
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from autograder.bridges import nbgrader as bridge
from autograder.engine import p0fork, sandbox
from autograder.engine.pipeline import Options, grade
from autograder.engine.student import Student
from autograder.paths import REPO, LabPaths, build_dir, lab_paths


def _nbgrader(course: Path, *args: str) -> None:
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(course / ".jupyter"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs alembic
    subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)


def nbgrader_course(paths: LabPaths, submissions: list[Path]) -> Path:
    course = build_dir("bench", "nbgrader")
    shutil.rmtree(course)
    bridge.build(course, [paths])
    _nbgrader(course, "generate_assignment", paths.lab)
    for i, sub in enumerate(submissions):
        folder = course / "submitted" / f"s{i}" / paths.lab
        folder.mkdir(parents=True)
        shutil.copy(sub, folder / f"{paths.slug}.ipynb")
    return course


def _children_cpu() -> float:
    """CPU seconds of every process this one started and waited for, and of the graders' runs forked by the
    warm P0 (engine/p0fork.py: not this process's children, so they report their own)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + p0fork.cpu_seconds()


_SOURCE = "\n".join(f"def f{i}(x, y=({i}, 'v{i}')):\n    return [x + k for k in range({i} % 7)] + list(y)\n" for i in range(400))


def _workload() -> float:
    import torch
    started, children = time.process_time(), _children_cpu()
    compile(ast.parse(_SOURCE), "<calibration>", "exec")
    table: dict[str, int] = {}
    for i in range(40_000):
        key = f"k{i % 4999}"
        table[key] = table.get(key, 0) + i
    sorted(table.items(), key=lambda kv: (kv[1] % 97, kv[0]))
    a = torch.ones(16)
    for _ in range(10_000):
        a = (a * 1.0001 + 0.5).relu_()
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return time.process_time() - started + _children_cpu() - children


def calibrate() -> float:
    """CPU seconds of a fixed workload made of what a grading does: parse and compile Python source and work
    dicts and strings (pytest, hypothesis, the graders), run small eager torch ops (the scenarios), and fork
    and reap a torch-loaded process (sandboxes, ranks, workers). It runs in a fresh interpreter, after its
    imports, so the work and the process are the same every time and its CPU tells how fast the machine is
    right now. About 0.6 s, plus the interpreter's start."""
    code = "import torch\nfrom autograder import bench\nprint(bench._workload())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, check=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return float(proc.stdout.split()[-1])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else 'unknown CPU'} x{os.cpu_count()}"


def fastest_calibration(seconds: float, record: Path | None = None) -> float:
    """The fastest calibration this CPU model has shown, `seconds` included (build/bench/calibration.json)."""
    record = record or build_dir("bench") / "calibration.json"
    try:
        known = json.loads(record.read_text())
    except (OSError, ValueError):
        known = {}
    model = _cpu_model()
    best = known.get(model, {}).get("seconds")
    if not isinstance(best, (int, float)) or seconds < best:
        known[model] = {"seconds": round(seconds, 4), "date": time.strftime("%Y-%m-%d %H:%M")}
        record.write_text(json.dumps(known, indent=1) + "\n")
        best = seconds
    return float(best)


def time_ours(paths: LabPaths, sub: Path, i: int) -> tuple[float, float, float]:
    """(wall, CPU, sandbox CPU) seconds of one grading; CPU counts every process it started and waited for,
    sandbox CPU the part of it spent in sandboxes forked from the fork server's templates (the learner's side)."""
    started, cpu, inside = time.perf_counter(), _children_cpu(), p0fork.sandbox_cpu_seconds()
    grade(paths, sub, build_dir("bench", "ours", f"s{i}"))
    return time.perf_counter() - started, _children_cpu() - cpu, p0fork.sandbox_cpu_seconds() - inside


def time_nbgrader(paths: LabPaths, course: Path, i: int) -> tuple[float, float]:
    started, cpu = time.perf_counter(), _children_cpu()
    _nbgrader(course, "autograde", paths.lab, f"--student=s{i}", "--force")
    return time.perf_counter() - started, _children_cpu() - cpu


def throughput(paths: LabPaths, submissions: list[Path], jobs: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda ix: grade(paths, ix[1], build_dir("bench", f"j{jobs}", f"s{ix[0]}"), Options()),
                      enumerate(submissions)))
    return len(submissions) / (time.perf_counter() - started)


def module_overhead(paths: LabPaths, repeats: int = 5) -> tuple[str, float]:
    """Median start+load time of a confined worker minus that of a plain (rlimits) one."""
    level = sandbox.detect_level()
    cells = [("setup", "import numpy as np")]
    samples = {level: [], "rlimits": []}
    for _ in range(repeats):
        for lvl in samples:
            spec = sandbox.SandboxSpec(paths.lab, level=lvl)
            started = time.perf_counter()
            with Student(spec, cells, scenarios={paths.lab: paths.scenarios.read_text()}) as student:
                student._start()
            samples[lvl].append(time.perf_counter() - started)
    return level, statistics.median(samples[level]) - statistics.median(samples["rlimits"])


def bench_lab(lab: "str | LabPaths", rounds: int = 2) -> dict:
    from autograder.commands import example_submissions
    paths = lab_paths(lab)
    subs = example_submissions(paths) if isinstance(lab, str) else sorted(paths.examples.glob("*.ipynb"))
    course = nbgrader_course(paths, subs)
    ours, theirs, speed = [], [], [calibrate()]
    for _ in range(rounds):
        for i, sub in enumerate(subs):
            ours.append(time_ours(paths, sub, i))
            theirs.append(time_nbgrader(paths, course, i))
        speed.append(calibrate())
    level, overhead = module_overhead(paths)
    row = {"lab": paths.lab, "subs": len(subs),
           "ours": statistics.median(w for w, _, _ in ours), "ours_cpu": statistics.median(c for _, c, _ in ours),
           "ours_cpu_mean": statistics.mean(c for _, c, _ in ours),
           "sandbox_cpu_mean": statistics.mean(s for _, _, s in ours),
           "theirs": statistics.median(w for w, _ in theirs), "theirs_cpu": statistics.median(c for _, c in theirs),
           "j1": throughput(paths, subs, 1), "j2": throughput(paths, subs, 2)}
    row["ratio"] = row["ours"] / row["theirs"]
    row["class200_min"] = 200 / row["j2"] / 60
    row["calibration"] = statistics.median(speed)
    row["fastest"] = fastest_calibration(row["calibration"])
    row["cpu_mean_at_fastest"] = row["ours_cpu_mean"] * row["fastest"] / row["calibration"]
    print(f"{paths.lab}: {len(subs)} submissions x {rounds} rounds, interleaved; medians")
    print(f"seconds per submission: ours {row['ours']:.2f} wall / {row['ours_cpu']:.2f} CPU (confined, level {level}), "
          f"nbgrader autograde {row['theirs']:.2f} wall / {row['theirs_cpu']:.2f} CPU (unconfined)")
    print(f"CPU per submission, mean over the examples: {row['ours_cpu_mean']:.2f} s (grader side "
          f"{row['ours_cpu_mean'] - row['sandbox_cpu_mean']:.2f}, learner's sandboxes {row['sandbox_cpu_mean']:.2f})")
    print(f"machine speed: the calibration workload took {row['calibration']:.3f} s of CPU (median of {len(speed)}, "
          f"between the rounds); this CPU's fastest: {row['fastest']:.3f} s")
    print(f"CPU per submission, mean, at that fastest speed: {row['cpu_mean_at_fastest']:.2f} s")
    print(f"time ratio ours/nbgrader: {row['ratio']:.2f}")
    print(f"batch throughput: -j1 {row['j1']:.2f} submissions/s, -j2 {row['j2']:.2f} submissions/s")
    print(f"a class of 200 at -j2: {row['class200_min']:.1f} min (projected from the -j2 throughput)")
    print(f"confinement overhead per test module: {overhead:.3f} s ({level} vs plain subprocess)")
    return row


def run(lab: "str | LabPaths | None" = None, rounds: int = 2) -> int:
    from autograder.paths import all_labs
    labs = [lab] if lab else [p.lab for p in all_labs() if p.solution.exists()]
    rows = [bench_lab(one, rounds) for one in labs]
    if len(rows) > 1:
        print("\nlab    ours s  ours CPU  CPU mean  at fastest  nbgrader s  ratio  200 at -j2")
        for r in rows:
            print(f"{r['lab']}  {r['ours']:6.2f}  {r['ours_cpu']:8.2f}  {r['ours_cpu_mean']:8.2f}  {r['cpu_mean_at_fastest']:10.2f}  "
                  f"{r['theirs']:10.2f}  {r['ratio']:5.2f}  {r['class200_min']:6.1f} min")
    return 0
