# IPT-CANARY lab11 oracle_cpp.py: hidden grading text, never shown to learners
"""P0's side of part `cpp`: the build cache of learners' C++ sources, the cases, and the oracle of safe_div.

Builds. The learner's CPP_SOURCE is a string P1 returns. P0 compiles it in the clean room (a confined process in
which nothing of the learner's has run; its private /tmp is the per-grading extensions folder) and keeps the
shared library in build/cpp-cache/lab11/, keyed by the hash of (source, flags, torch version, compiler): the
reference is compiled once for every grading of CI and the selftest, and a submission that changes only Python
meets its library there. A compile error is cached too; a timeout is not. The compiled library only ever goes
back into clean rooms: P0 never loads it.

Trust. The library's results on P0's inputs, run in the clean room, are values; the learner's Python never runs
there. Linking with -Wl,--no-undefined against torch's C++ libraries (no Python) and the symbol check in
cpp_build keep Python and the dynamic loader out of the library.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import subprocess

import numpy as np
import torch

from autograder.engine import replies
from autograder.engine.student import StudentError
from autograder.paths import build_dir

NAME = "lab11_cpp"
FLAGS = ["-O1", "-g0"]
BUILD_TIMEOUT = 240          # seconds for g++ (a cold build is ~12 s of CPU; a loaded machine stretches it)
MAX_SOURCE = 200_000         # characters
MAX_LIBRARY = 32 << 20       # bytes


@functools.cache
def compiler() -> str:
    try:
        return subprocess.run(["g++", "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "g++ ?"


def cache_key(source: str) -> str:
    text = json.dumps([source, FLAGS, torch.__version__, compiler(), NAME])
    return NAME + "-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def compile_message(kind: str, text: str) -> str:
    """What the learner reads about a build that failed: the first error lines, no paths of ours."""
    if kind == "timeout":
        return f"your C++ source did not compile within {BUILD_TIMEOUT} s"
    if kind == "toolchain":
        return "the graders could not run the C++ compiler on this machine (not your fault; your instructor can see it)"
    if kind == "symbols":
        return (f"your library calls {text[:200]}: a kernel library may only use torch's C++ libraries and the C++ "
                "standard library")
    python = re.findall(r"undefined reference to `(_?Py\w+)", text)
    if python:
        return ("your library calls into Python (" + ", ".join(sorted(set(python))[:3]) + "): include <torch/library.h> "
                "and ATen headers, not <torch/extension.h> or pybind11; the graders link it without Python")
    lines = [line for line in text.splitlines() if re.search(r"\berror\b|undefined reference", line)]
    lines = [line if len(line) < 300 else line[:300] + "..." for line in (lines or text.splitlines()[-6:])]
    return "your C++ source does not compile (g++ -O1 -std=c++20):\n" + "\n".join(lines[:8])


def build(student, clean_room) -> dict:
    """{"so": library bytes, "key": cache key} or {"error": a learner-readable sentence}."""
    try:
        source = student.run("lab11.scenarios:cpp_source")
    except StudentError as exc:
        return {"error": f"CPP_SOURCE could not be read from your notebook: {exc}"}
    if isinstance(source, dict):
        return {"error": "your notebook does not define CPP_SOURCE as a string (its cell raised, or was not run)"}
    if not isinstance(source, str) or not source.strip():
        return {"error": "CPP_SOURCE should be a non-empty string of C++"}
    if len(source) > MAX_SOURCE:
        return {"error": f"CPP_SOURCE is {len(source)} characters long; the graders compile at most {MAX_SOURCE}"}
    key = cache_key(source)
    folder = build_dir("cpp-cache", "lab11")
    lib, failed = folder / f"{key}.so", folder / f"{key}.json"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per source, also across concurrent gradings
        if not lib.exists() and not failed.exists():
            saved = clean_room.call_timeout
            clean_room.call_timeout = BUILD_TIMEOUT + 60
            clean_room.module_budget += BUILD_TIMEOUT + 60
            try:
                reply = clean_room.run("lab11.scenarios:cpp_build", source, NAME, FLAGS, BUILD_TIMEOUT)
            except StudentError as exc:
                return {"error": f"the build of your C++ source failed: {exc}"}
            finally:
                clean_room.call_timeout = saved
            reply = replies.dict_of(reply, set(), "the build")
            if "so" in reply:
                data = replies.array(reply["so"], "the compiled library", dtype=np.uint8)
                if not 0 < data.size <= MAX_LIBRARY:
                    return {"error": f"your compiled library is {data.size} bytes; the graders load at most {MAX_LIBRARY}"}
                tmp = folder / f"{key}.so.{os.getpid()}"
                tmp.write_bytes(data.tobytes())
                tmp.rename(lib)
            else:
                kind = replies.string(reply.get("error"), "the build's outcome")
                message = compile_message(kind, replies.string(reply.get("message", ""), "the compiler's output"))
                if kind in ("timeout", "toolchain"):  # not the source's fault: never cached
                    return {"error": message}
                tmp = folder / f"{key}.json.{os.getpid()}"
                tmp.write_text(json.dumps({"error": message}))
                tmp.rename(failed)
    if failed.exists():
        return json.loads(failed.read_text())
    return {"so": np.frombuffer(lib.read_bytes(), dtype=np.uint8), "key": key}


def reference_library() -> str:
    """The reference CPP_SOURCE compiled in P0 (our own source: no clean room needed) into the same cache entry a
    grading of the reference uses, and its path: the fuzzer and the peer suite load it, and in CI the reference's
    grading then finds it built (one build of the reference per machine)."""
    import torch as _torch
    from autograder.engine.variants import reference_module
    source = reference_module("lab11").CPP_SOURCE
    key = cache_key(source)
    folder = build_dir("cpp-cache", "lab11")
    lib = folder / f"{key}.so"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lib.exists():
            import tempfile
            torch_dir = os.path.dirname(_torch.__file__)
            include = os.path.join(torch_dir, "include")
            with tempfile.TemporaryDirectory() as tmp:
                src, out = os.path.join(tmp, f"{NAME}.cpp"), os.path.join(tmp, f"{NAME}.so")
                with open(src, "w") as f:
                    f.write(source)
                cmd = ["g++", f"-DTORCH_EXTENSION_NAME={NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", include,
                       "-isystem", os.path.join(include, "torch", "csrc", "api", "include"), "-fPIC", "-std=c++20", *FLAGS,
                       "-shared", src, "-o", out, f"-L{os.path.join(torch_dir, 'lib')}", "-lc10", "-ltorch", "-ltorch_cpu",
                       "-Wl,--no-undefined"]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT * 2)
                if proc.returncode != 0:
                    raise RuntimeError(f"the reference C++ source does not compile: {proc.stderr[-2000:]}")
                tmp_lib = folder / f"{key}.so.{os.getpid()}"
                tmp_lib.write_bytes(open(out, "rb").read())
                tmp_lib.rename(lib)
    return str(lib)


# -- tensors and the oracle -------------------------------------------------------------------------------------
def make(spec):
    """The tensor a case describes (base array + view ops) and its base: the scenario's own builder, run here in P0."""
    from autograder.labs.lab11.scenarios import _cpp_tensor
    return _cpp_tensor(spec)


def safe_div(a, b, fill=0.0):
    """The lab's rule, differentiable with the lab's gradients (0 where b == 0): P0's oracle."""
    a2, b2 = torch.broadcast_tensors(a, b)
    zero = b2 == 0
    safe = torch.where(zero, torch.ones_like(b2), b2)
    return torch.where(zero, torch.full_like(a2, fill), a2 / safe)


def contiguous_strides(shape):
    return list(torch.empty(shape, device="meta").stride())


def significant_strides_ok(shape, got, want) -> bool:
    """Strides agree on every dimension that matters (size > 1), as torch's own metadata checks compare them."""
    if int(np.prod(shape)) == 0:
        return True
    return all(g == w for s, g, w in zip(shape, got, want, strict=True) if s > 1)


def close(got, want, rtol, atol=0.0) -> bool:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    inf = np.isinf(want)
    if not np.array_equal(got[inf], want[inf]):
        return False
    ok = ~np.isnan(want) & ~inf
    return bool(np.all(np.abs(got[ok] - want[ok]) <= atol + rtol * np.abs(want[ok])))


RTOL = {"float32": 2e-6, "float64": 1e-13}


def describe(spec) -> str:
    shape = list(np.asarray(spec["base"]).shape)
    views = spec.get("views", [])
    dtype = str(np.asarray(spec["base"]).dtype)
    return f"{dtype} {shape}" + (f" viewed by {[v[0] for v in views]}" if views else "")


def spec(rng, shape, dtype="float32", zeros=0, views=(), special=False, low=0.25, high=4.0):
    """A drawn base array: values of both signs, `zeros` exact zeros (half of them -0.0) and, with special,
    a NaN, an inf and a tiny value among them."""
    n = int(np.prod(shape))
    values = rng.uniform(low, high, size=n) * rng.choice([-1.0, 1.0], size=n)
    places = rng.permutation(n)
    for k, i in enumerate(places[:zeros]):
        values[i] = -0.0 if k % 2 else 0.0
    if special and n >= zeros + 3:
        rest = places[zeros:]
        values[rest[0]], values[rest[1]], values[rest[2]] = np.nan, np.inf * rng.choice([-1, 1]), 1e-30
    return {"base": values.reshape(shape).astype(dtype), "views": [list(v) for v in views]}


def expected(case):
    """(values, shape, dtype) safe_div gives for a case, or None where it must raise."""
    a, _ = make(case["a"])
    b, _ = make(case["b"])
    if a.dtype != b.dtype or a.dtype not in (torch.float32, torch.float64):
        return None
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        return None
    call = case.get("call", {})
    if call.get("style") in ("fill_pos", "extra_kw"):
        return None
    fill = call.get("fill", 0.0) if call.get("style", "plain") != "plain" else 0.0
    return safe_div(a, b, fill).numpy(), list(shape), str(a.dtype).replace("torch.", "")


def gradients(case):
    """P0's gradients of (safe_div(a, b) * grad).sum() for the inputs that require grad, in float64."""
    a, _ = make(case["a"])
    b, _ = make(case["b"])
    a = a.detach().to(torch.float64).requires_grad_(True)
    b = b.detach().to(torch.float64).requires_grad_(True)
    fill = case.get("call", {}).get("fill", 0.0)
    out = safe_div(a, b, fill)
    g = torch.from_numpy(np.array(case["grad"], copy=True)).to(torch.float64)
    ga, gb = torch.autograd.grad(out, [a, b], g)
    return [x.numpy() for x, w in ((ga, case["requires_grad"][0]), (gb, case["requires_grad"][1])) if w]


def program(spec_):
    """P0's eager version of the scenario's compiled program, on the oracle safe_div."""
    c1, c2, fill = spec_["c1"], spec_["c2"], spec_["fill"]

    def fn(a, b):
        h = {"affine": lambda: a * c1 + c2, "sin": lambda: torch.sin(a) * c1, "tanh": lambda: torch.tanh(a) + c2}[spec_["pre"]]()
        y = safe_div(h, b, fill)
        z = {"square": lambda: y * y, "mul_a": lambda: y * a, "none": lambda: y}[spec_["post"]]()
        return {"sum": lambda: z.sum(), "mean": lambda: z.mean(), "sum0": lambda: z.sum(0)}[spec_["reduce"]]()
    return fn


def program_run(spec_, a_np, b_np, w_np):
    a = torch.from_numpy(np.array(a_np, copy=True)).to(torch.float64).requires_grad_(True)
    b = torch.from_numpy(np.array(b_np, copy=True)).to(torch.float64).requires_grad_(True)
    out = program(spec_)(a, b)
    loss = (out * torch.from_numpy(np.array(w_np, copy=True)).to(torch.float64)).sum()
    ga, gb = torch.autograd.grad(loss, [a, b])
    return out.detach().numpy(), ga.numpy(), gb.numpy()
