# IPT-CANARY lab11 scenarios.py: hidden grading text, never shown to learners
"""lab11 scenarios: run on the student side (P1), against the learner's module `sub`.

Programs arrive as the bytes of torch.export.save (P0 exported them); checkpoints as the bytes of an archive
P0 wrote. Each scenario takes a list of cases and answers one reply per case; an exception in one case becomes
{"error": type name, "message": ...} for that case.

Trust: these functions only build inputs, call the learner's code and return what it produced, as plain data.
P0 compares it with its own oracle (torch.fx.Interpreter with P0's kernel table, torch.load); nothing here
reports how a value was computed.
"""
import collections
import io
import os
import tempfile

import numpy as np
import torch

_programs = {}


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:300]}


def _program(data):
    key = (len(data), bytes(data[:64]).hex(), bytes(data[-64:]).hex())
    if key not in _programs:
        _programs[key] = torch.export.load(io.BytesIO(np.asarray(data, np.uint8).tobytes()))
    return _programs[key]


def _op(name):
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def _kernel(fn, kind, c):
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out * c if kind == "scale" else out + c
    return run


def _tensor(t):
    if not isinstance(t, torch.Tensor):
        return {"values": None, "dtype": type(t).__name__}
    t = t.detach()
    values = t.to(torch.float32) if t.dtype in (torch.bfloat16, torch.float16) else t
    return {"values": values.contiguous().numpy().copy(), "dtype": str(t.dtype).replace("torch.", "")}


def _run_reply(outputs, mutations, args):
    return {"outputs": [_tensor(o) for o in outputs] if isinstance(outputs, (tuple, list)) else repr(type(outputs)),
            "mutations": [[str(k), _tensor(v)] for k, v in mutations.items()] if isinstance(mutations, dict)
            else repr(type(mutations)),
            "inputs": [_tensor(a) for a in args]}


# -- part export -----------------------------------------------------------------------------------------------
def run_program(sub, program, cases):
    """Each case: args (numpy), state (FQN -> numpy, or None), kernels ([op, kind, c]), twice (run twice with
    the same state: the reply holds both runs)."""
    ep = _program(program)
    results = []
    for case in cases:
        try:
            state = None if case.get("state") is None else {k: torch.from_numpy(np.array(v, copy=True))
                                                            for k, v in case["state"].items()}
            kernels = {_op(op): _kernel(_op(op), kind, c) for op, kind, c in case.get("kernels") or []}
            replies = []
            for _ in range(2 if case.get("twice") else 1):
                args = tuple(torch.from_numpy(np.array(a, copy=True)) for a in case["args"])
                with torch.no_grad():
                    outputs, mutations = sub.run_program(ep, args, **({} if state is None else {"state": state}),
                                                         **({"kernels": kernels} if kernels else {}))
                replies.append(_run_reply(outputs, mutations, args))
            results.append(replies if case.get("twice") else replies[0])
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            results.append(_error(exc))
    return results


def check_inputs(sub, program, cases):
    """Each case: args (numpy), as_list (the index of one arg to pass as nested Python lists); the reply is None
    (accepted), an error, or what check_inputs returned instead."""
    ep = _program(program)
    results = []
    for case in cases:
        try:
            args = tuple(np.array(a, copy=True).tolist() if k == case.get("as_list") else torch.from_numpy(np.array(a, copy=True))
                         for k, a in enumerate(case["args"]))
            got = sub.check_inputs(ep, args)
            results.append({"returned": None if got is None else repr(type(got).__name__)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


# -- part checkpoint -------------------------------------------------------------------------------------------
def _encode(o):
    if isinstance(o, torch.Tensor):
        t = o.detach()
        values = t.to(torch.float32) if t.dtype in (torch.bfloat16, torch.float16) else t
        return {"tensor": values.contiguous().numpy().copy(), "dtype": str(t.dtype).replace("torch.", ""),
                "size": list(t.shape), "stride": list(t.stride()), "offset": int(t.storage_offset()),
                "requires_grad": bool(o.requires_grad)}
    if isinstance(o, collections.OrderedDict):
        return {"odict": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if isinstance(o, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if isinstance(o, list):
        return {"list": [_encode(v) for v in o]}
    if isinstance(o, tuple):
        return {"tuple": [_encode(v) for v in o]}
    if o is None or isinstance(o, (bool, int, float, str)):
        return {"value": o}
    return {"other": type(o).__name__[:60]}


def _groups(o):
    ptrs = []

    def walk(x):
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            ptrs.append(st.data_ptr() if st.nbytes() else None)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk(o)
    first = {}
    return [-1 if p is None else first.setdefault(p, k) for k, p in enumerate(ptrs)]


def _index(index):
    if not isinstance(index, (list, tuple)):
        return repr(type(index).__name__)
    out = []
    for entry in index:
        if not isinstance(entry, dict):
            out.append(repr(type(entry).__name__))
            continue
        dtype = entry.get("dtype")
        out.append({"key": entry.get("key") if isinstance(entry.get("key"), str) else repr(entry.get("key")),
                    "dtype": str(dtype).replace("torch.", "") if isinstance(dtype, torch.dtype) else repr(dtype),
                    "offset": entry.get("offset") if isinstance(entry.get("offset"), int) else None,
                    "size": [int(s) for s in entry.get("size")] if isinstance(entry.get("size"), (tuple, list, torch.Size)) else None,
                    "stride": [int(s) for s in entry.get("stride")] if isinstance(entry.get("stride"), (tuple, list)) else None})
    return out


def load_checkpoint(sub, files):
    """Each file: {"data": archive bytes, "name": file name}; the reply: obj, index and storage groups."""
    folder = tempfile.mkdtemp()
    results = []
    for k, case in enumerate(files):
        path = os.path.join(folder, case.get("name") or f"file{k}.pt")
        with open(path, "wb") as f:
            f.write(np.asarray(case["data"], np.uint8).tobytes())
        try:
            got = sub.load_checkpoint(path)
            if not isinstance(got, tuple) or len(got) != 2:
                results.append({"obj": {"other": type(got).__name__}, "index": [], "groups": []})
                continue
            obj, index = got
            results.append({"obj": _encode(obj), "index": _index(index), "groups": _groups(obj)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


def shared_write(sub, files):
    """Each file holds a list whose first two tensors share a storage: write into the first, read the second."""
    folder = tempfile.mkdtemp()
    results = []
    for k, case in enumerate(files):
        path = os.path.join(folder, f"shared{k}.pt")
        with open(path, "wb") as f:
            f.write(np.asarray(case["data"], np.uint8).tobytes())
        try:
            obj, _ = sub.load_checkpoint(path)
            first, second = obj[0], obj[1]
            first.fill_(case["fill"])
            results.append({"second": _tensor(second)})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


# -- part loader ------------------------------------------------------------------------------------------------
# A case: n (dataset length), token (P0's per-case name), random (torch.rand augmentation), fail (indices that
# raise ValueError), die (indices whose worker calls os._exit), slow (indices that sleep 2 s), stuck (indices that
# sleep 30 s), witness (P0's witness socket, engine.witness), sampler ({"kind": "list", "indices"} or
# {"kind": "random", "seed", "replacement", "num_samples"}), batch_size, num_workers, seed, drop_last, epochs.
import ctypes  # noqa: E402
import functools  # noqa: E402
import time  # noqa: E402

import torch.utils.data  # noqa: E402

_loader_state = {}


@functools.cache
def _libc():
    return ctypes.CDLL(None)


def _witness(path, i):
    """Ask P0's witness (engine.witness) for sample i's value: P0 learns the caller's pid from the kernel."""
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(f"{i}\n".encode())
        return float(conn.makefile("rb").readline().decode().strip())


class _Samples:
    """Sample i: (float64 [i, worker id, batch seed, r0, r1, w], i * 7 + 3). The worker id and seed are what the
    learner's get_worker_info() says (-1 where it says None); r are torch.rand draws for a random dataset; w is
    what P0's witness answered this process for sample i (oracle_loader.Makers), where the case has one.
    Each call names the calling thread `token` + worker id (`token` + "m" outside a worker) with
    prctl(PR_SET_NAME); P0 reads the process's name (its main thread's) from the host's /proc: only a process
    itself can set its own name."""

    def __init__(self, sub, case):
        self.sub, self.n, self.token, self.random = sub, int(case["n"]), str(case["token"]), bool(case["random"])
        self.witness = case.get("witness")
        self.fail, self.die = {int(i) for i in case.get("fail") or []}, {int(i) for i in case.get("die") or []}
        self.slow = {int(i) for i in case.get("slow") or []}
        self.stuck = {int(i) for i in case.get("stuck") or []}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = self.sub.get_worker_info()
        try:
            wid, seed = (-1, -1) if info is None else (int(info[0]), int(info[2]))
        except Exception:  # noqa: BLE001 - not a WorkerInfo: recorded as unknown
            wid, seed = -2, -2
        name = (self.token + (str(wid) if wid >= 0 else "m")).encode()[:15]
        _libc().prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME: the calling thread's comm
        i = int(i)
        if i in self.fail:
            raise ValueError(f"sample {i} is broken")
        if i in self.die:  # after a pause: the batches this worker already put on the queue get through first (its
            time.sleep(1.0)  # feeder thread flushes them; an exit in the middle of a send would take the queue's lock along)
            os._exit(3)
        if i in self.slow:  # longer than a dying sample's pause: its worker exits while this batch is still being made
            time.sleep(2.0)
        if i in self.stuck:  # a worker busy for longer than close() waits
            time.sleep(30)
        noise = torch.rand(2, dtype=torch.float64) if self.random else torch.tensor([0.5 * i, -i], dtype=torch.float64)
        seen = [torch.tensor([_witness(self.witness, i)], dtype=torch.float64)] if self.witness else []
        return torch.cat([torch.tensor([i, wid, seed], dtype=torch.float64), noise, *seen]), i * 7 + 3


def _sampler(spec, n):
    if spec["kind"] == "list":
        return [int(i) for i in spec["indices"]]
    generator = torch.Generator().manual_seed(int(spec["seed"]))
    return torch.utils.data.RandomSampler(range(n), replacement=bool(spec.get("replacement")),
                                          num_samples=spec.get("num_samples"), generator=generator)


def _loader(sub, case):
    return sub.Loader(_Samples(sub, case), int(case["batch_size"]), _sampler(case["sampler"], int(case["n"])),
                      num_workers=int(case["num_workers"]), seed=int(case["seed"]), drop_last=bool(case["drop_last"]))


def _loader_batch(batch):
    if isinstance(batch, (tuple, list)) and len(batch) == 2 and all(isinstance(t, torch.Tensor) for t in batch):
        return [batch[0].detach().to(torch.float64).contiguous().numpy().copy(),
                batch[1].detach().to(torch.int64).contiguous().numpy().copy()]
    return {"other": type(batch).__name__}


def _loader_error(exc):
    out = _error(exc)
    for name in ("index", "worker_id"):
        value = getattr(exc, name, "missing")
        out[name] = value if value is None or isinstance(value, (int, str)) and not isinstance(value, bool) else repr(value)[:40]
    return out


def _drain(iterator, limit):
    """Batches until StopIteration or an error, then what one more next() gives."""
    batches, error, after = [], None, None
    try:
        while len(batches) < limit:
            batches.append(_loader_batch(next(iterator)))
    except StopIteration:
        pass
    except Exception as exc:  # noqa: BLE001
        error = _loader_error(exc)
    try:
        extra = next(iterator)
        after = {"batch": _loader_batch(extra)}
    except StopIteration:
        after = "stop"
    except Exception as exc:  # noqa: BLE001
        after = {"error": type(exc).__name__}
    return {"batches": batches, "error": error, "after": after}


def loader_epochs(sub, case):
    """Every epoch of the case, each to its end (or its error), with what next() gives after it."""
    try:
        loader = _loader(sub, case)
        epochs = []
        for _ in range(int(case["epochs"])):
            iterator = iter(loader)
            epochs.append(_drain(iterator, 10_000))
            close = getattr(iterator, "close", None)
            if callable(close):
                close()
        return epochs
    except Exception as exc:  # noqa: BLE001
        return _loader_error(exc)


def loader_start(sub, case, count):
    """Start an epoch and take its first `count` batches; the iterator stays alive for loader_resume."""
    try:
        iterator = iter(_loader(sub, case))
        _loader_state["iterator"] = iterator
        return [_loader_batch(next(iterator)) for _ in range(int(count))]
    except Exception as exc:  # noqa: BLE001
        return _loader_error(exc)


def loader_resume(sub, how):
    """how = "rest": the rest of the epoch (as loader_epochs reports one); how = "close": close() it; how = "one":
    one next() (its batch, "stop" or its error), the iterator kept alive for another call."""
    iterator = _loader_state.pop("iterator", None)
    if iterator is None:
        return {"error": "NoIterator", "message": "the epoch did not start"}
    if how == "one":
        _loader_state["iterator"] = iterator
        try:
            return {"batch": _loader_batch(next(iterator))}
        except StopIteration:
            return "stop"
        except Exception as exc:  # noqa: BLE001
            return _loader_error(exc)
    if how == "close":
        try:
            iterator.close()
            return "closed"
        except Exception as exc:  # noqa: BLE001
            return _loader_error(exc)
    return _drain(iterator, 10_000)


# -- part cpp ---------------------------------------------------------------------------------------------------
# Two kinds of process run these. P1 (the learner's module loaded) answers cpp_source and tests
# register_python_parts on a stand-in operator defined here (py_*). The clean room (none of the learner's
# Python) compiles CPP_SOURCE (cpp_build) and runs the learner's kernel (cpp_cases). Every reply is data P0 checks.
CPP_NAMESPACE, CPP_OP = "lab11_cpp", "safe_div"
CPP_SCHEMA = "safe_div(Tensor a, Tensor b, *, float fill=0.0) -> Tensor"
_cpp = {"lib": None, "standin": None, "libraries": []}


def cpp_source(sub):
    source = getattr(sub, "CPP_SOURCE", None)
    return source if isinstance(source, str) else {"error": "missing", "message": f"CPP_SOURCE is {type(source).__name__}"}


def cpp_build(sub, source, name, flags, timeout):
    """Compile `source` into a shared library in this process's private /tmp; its bytes, or the compiler's
    complaint with the folder and the include paths cut out."""
    import subprocess
    torch_dir = os.path.dirname(torch.__file__)
    folder = tempfile.mkdtemp(prefix="cpp-")
    src, so = os.path.join(folder, f"{name}.cpp"), os.path.join(folder, f"{name}.so")
    with open(src, "w") as f:
        f.write(source)
    include = os.path.join(torch_dir, "include")
    cmd = ["g++", f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", include,
           "-isystem", os.path.join(include, "torch", "csrc", "api", "include"), "-fPIC", "-std=c++20", *flags,
           "-shared", src, "-o", so, f"-L{os.path.join(torch_dir, 'lib')}", "-lc10", "-ltorch", "-ltorch_cpu",
           "-Wl,--no-undefined"]

    def scrub(text):
        return (text.replace(src, "CPP_SOURCE").replace(folder + "/", "").replace(include + "/", "<torch>/")
                .replace(torch_dir + "/", "<torch>/"))
    try:
        proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return {"error": "timeout", "message": f"the compiler did not finish within {timeout} s"}
    except OSError as exc:  # no compiler where the graders run: the host's fault, not the source's
        return {"error": "toolchain", "message": f"{type(exc).__name__}: {exc}"[:300]}
    if proc.returncode != 0:
        return {"error": "compile", "message": scrub(proc.stderr)[-20000:]}
    nm = subprocess.run(["nm", "-D", "--undefined-only", so], capture_output=True, text=True, timeout=60)
    reached = sorted({line.split()[-1].split("@")[0] for line in nm.stdout.splitlines() if line.split()}
                     & {"dlopen", "dlsym", "dlvsym", "dlmopen", "system", "popen", "fork", "execve", "execv", "execvp"})
    if nm.returncode != 0 or reached:
        return {"error": "symbols", "message": ", ".join(reached) or "nm could not read the library"}
    with open(so, "rb") as f:
        data = f.read()
    return {"so": np.frombuffer(data, dtype=np.uint8).copy()}


def _cpp_tensor(spec):
    t = torch.from_numpy(np.array(spec["base"], copy=True))
    base = t
    for view in spec.get("views", []):
        kind = view[0]
        if kind == "t":
            t = t.transpose(-1, -2)
        elif kind == "permute":
            t = t.permute(*view[1])
        elif kind == "slice":
            _, dim, start, stop, step = view
            t = t[(slice(None),) * dim + (slice(start, stop, step),)]
        elif kind == "expand":
            t = t.expand(*view[1])
        elif kind == "unsqueeze":
            t = t.unsqueeze(view[1])
    return t, base


def _cpp_call(op, a, b, call):
    style, fill = call.get("style", "plain"), call.get("fill", 0.0)
    if style == "plain":
        return op(a, b)
    if style == "fill_kw":
        return op(a, b, fill=fill)
    if style == "fill_pos":
        return op(a, b, fill)
    if style == "names":
        return op(b=b, a=a, fill=fill)
    if style == "extra_kw":
        return op(a, b, fill=fill, alpha=1.0)
    raise ValueError(style)


def _values(t):
    t = t.detach()
    return (t.to(torch.float64) if t.dtype in (torch.float16, torch.bfloat16) else t).contiguous().numpy().copy()


def _op_reply(out, bases, write):
    if not isinstance(out, torch.Tensor):
        return {"error": "NotATensor", "message": type(out).__name__}
    reply = {"values": _values(out), "shape": list(out.shape), "stride": list(out.stride()),
             "dtype": str(out.dtype).replace("torch.", ""), "device": str(out.device),
             "after": [_values(t) for t in bases]}
    if write is not None:
        try:
            with torch.no_grad():
                out.fill_(write)
            reply["after_write"] = [_values(t) for t in bases]
        except Exception as exc:  # noqa: BLE001
            reply["after_write"] = _error(exc)
    return reply


def cpp_cases(sub, so, key, cases):
    """Load the library compiled from the learner's source (once per process) and run the cases on it."""
    if _cpp["lib"] != key:
        if _cpp["lib"] is not None:
            return {"load_error": "another library is already loaded in this process"}
        path = os.path.join(tempfile.mkdtemp(prefix="lib-"), f"{key}.so")
        with open(path, "wb") as f:
            f.write(np.asarray(so, np.uint8).tobytes())
        try:
            torch.ops.load_library(path)
        except Exception as exc:  # noqa: BLE001
            return {"load_error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        _cpp["lib"] = key
    try:
        op = getattr(getattr(torch.ops, CPP_NAMESPACE), CPP_OP)
    except (AttributeError, RuntimeError):
        return {"load_error": f"after loading your library, torch.ops.{CPP_NAMESPACE}.{CPP_OP} does not exist"}
    return {"results": [_cpp_case(op, case) for case in cases]}


def _cpp_case(op, case):
    try:
        a, abase = _cpp_tensor(case["a"])
        b, bbase = _cpp_tensor(case["b"])
        out = _cpp_call(op, a, b, case.get("call", {}))
        return _op_reply(out, [abase, bbase], case.get("write"))
    except Exception as exc:  # noqa: BLE001
        return _error(exc)


def _standin_kernel(a, b, *, fill=0.0):
    """The graders' CPU kernel of lab11_cpp::safe_div in P1, to test the learner's Python parts on."""
    if a.dtype != b.dtype or a.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"safe_div: unsupported dtypes {a.dtype} and {b.dtype}")
    a2, b2 = torch.broadcast_tensors(a, b)
    zero = b2 == 0
    out = torch.where(zero, torch.full_like(a2, fill), a2 / torch.where(zero, torch.ones_like(b2), b2))
    return out.contiguous().clone()


def _python_parts(sub):
    """The stand-in operator (unless the learner's own library already defines it in this process) and the
    learner's registrations on it, once per process: None, or the error register_python_parts raised."""
    if _cpp["standin"] is None:
        try:
            getattr(getattr(torch.ops, CPP_NAMESPACE), CPP_OP)
        except (AttributeError, RuntimeError):
            lib = torch.library.Library(CPP_NAMESPACE, "DEF")
            lib.define(CPP_SCHEMA)
            lib.impl(CPP_OP, _standin_kernel, "CPU")
            _cpp["libraries"].append(lib)
        try:
            lib = torch.library.Library(CPP_NAMESPACE, "FRAGMENT")
            _cpp["libraries"].append(lib)
            sub.register_python_parts(lib)
            _cpp["standin"] = {"ok": True}
        except Exception as exc:  # noqa: BLE001
            _cpp["standin"] = {"error": type(exc).__name__, "message": "register_python_parts raised: " + str(exc)[:250]}
    return None if "ok" in _cpp["standin"] else _cpp["standin"]


def _cpp_op():
    return getattr(getattr(torch.ops, CPP_NAMESPACE), CPP_OP)


def _on_standin(sub, cases, one):
    """one(case) per case, on the stand-in operator with the learner's Python registrations: a case that raises
    answers its error; if the registrations failed, every case answers that failure."""
    failed = _python_parts(sub)
    if failed:
        return [failed for _ in cases]
    results = []
    for case in cases:
        try:
            results.append(one(case))
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return results


def py_fake(sub, cases):
    """The learner's fake kernel under a FakeTensorMode ("fake") and on meta tensors ("meta")."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def one(case):
        a, _ = _cpp_tensor(case["a"])
        b, _ = _cpp_tensor(case["b"])
        if case["mode"] == "meta":
            am = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
            bm = torch.empty_strided(b.shape, b.stride(), dtype=b.dtype, device="meta")
            out = _cpp_call(_cpp_op(), am, bm, case.get("call", {}))
        else:
            with FakeTensorMode() as mode:
                out = _cpp_call(_cpp_op(), mode.from_tensor(a), mode.from_tensor(b), case.get("call", {}))
        if not isinstance(out, torch.Tensor):
            return {"error": "NotATensor", "message": type(out).__name__}
        return {"shape": [int(s) for s in out.shape], "stride": [int(s) for s in out.stride()],
                "dtype": str(out.dtype).replace("torch.", ""), "device": str(out.device)}
    return _on_standin(sub, cases, one)


def py_grad(sub, cases):
    """Gradients of the stand-in operator through the learner's autograd registration."""
    def one(case):
        a, _ = _cpp_tensor(case["a"])
        b, _ = _cpp_tensor(case["b"])
        wants = case["requires_grad"]
        a, b = a.detach().requires_grad_(bool(wants[0])), b.detach().requires_grad_(bool(wants[1]))
        out = _cpp_call(_cpp_op(), a, b, case.get("call", {}))
        inputs = [t for t, w in ((a, wants[0]), (b, wants[1])) if w]
        grads = torch.autograd.grad(out, inputs, grad_outputs=torch.from_numpy(np.array(case["grad"], copy=True)),
                                    allow_unused=True)
        return {"out": _values(out), "grads": [None if g is None else _values(g) for g in grads],
                "shapes": [None if g is None else list(g.shape) for g in grads]}
    return _on_standin(sub, cases, one)


def _cpp_program(spec):
    op = _cpp_op()
    c1, c2, fill = spec["c1"], spec["c2"], spec["fill"]

    def fn(a, b):
        h = {"affine": lambda: a * c1 + c2, "sin": lambda: torch.sin(a) * c1, "tanh": lambda: torch.tanh(a) + c2}[spec["pre"]]()
        y = op(h, b, fill=fill)
        if spec.get("probe"):  # a data-dependent branch: no single graph holds it
            if y.sum() > 0:
                y = y * 2
        z = {"square": lambda: y * y, "mul_a": lambda: y * a, "none": lambda: y}[spec["post"]]()
        return {"sum": lambda: z.sum(), "mean": lambda: z.mean(), "sum0": lambda: z.sum(0)}[spec["reduce"]]()
    return fn


def py_compile(sub, programs):
    """Each program compiled with torch.compile(fullgraph=True, backend="aot_eager") and run on its inputs:
    the outputs and the gradients of (out * weight).sum() with respect to a and b."""
    def one(spec):
        compiled = torch.compile(_cpp_program(spec), fullgraph=True, backend="aot_eager", dynamic=bool(spec["dynamic"]))
        runs = []
        for a_np, b_np, w_np in spec["inputs"]:
            a = torch.from_numpy(np.array(a_np, copy=True)).requires_grad_(True)
            b = torch.from_numpy(np.array(b_np, copy=True)).requires_grad_(True)
            out = compiled(a, b)
            loss = (out * torch.from_numpy(np.array(w_np, copy=True))).sum()
            ga, gb = torch.autograd.grad(loss, [a, b])
            runs.append({"out": _values(out), "grad_a": _values(ga), "grad_b": _values(gb)})
        return {"runs": runs}
    return _on_standin(sub, programs, one)


# -- the template's warm-up -------------------------------------------------------------------------------------
def warm_p1():
    """Run once in the lab's template, before any grading forks from it (worker._warm): a first torch.export (saved
    and loaded), a first ONNX export and a first torch.compile(backend="aot_eager") pay 0.3-1 s of one-time set-up
    each, which every worker that calls them would pay again. Built-in operators on fixed inputs only (the lab's
    operators are the learner's to register); Dynamo is reset after."""
    import logging
    import warnings
    from torch._subclasses.fake_tensor import FakeTensorMode

    class Warm(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x[0, 0]) + torch.nn.functional.softplus(x) * x.cosh()

    x, batch = torch.linspace(-1, 1, 6).reshape(2, 3), torch.export.Dim("batch", min=1, max=1024)
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "torchvision is not installed" and the like, into the template's log otherwise
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            saved = io.BytesIO()
            torch.export.save(torch.export.export(Warm(), (x,), dynamic_shapes=({0: batch},)), saved)
            torch.export.load(io.BytesIO(saved.getvalue())).module()(x)
            _torchlib_once()
            torch.onnx.export(Warm(), (x,), dynamo=True, verbose=False, dynamic_shapes=({0: batch},)).model_proto.SerializeToString()
            for dynamic in (False, True):
                a = x.clone().requires_grad_(True)
                torch.compile(lambda t: (t * 2).sin().sum(), fullgraph=True, backend="aot_eager", dynamic=dynamic)(a).backward()
            with FakeTensorMode() as mode:
                torch.add(mode.from_tensor(x), 1)
    finally:
        quiet.setLevel(level)
        torch._dynamo.reset()


# -- part onnx -------------------------------------------------------------------------------------------------
# The learner side exports (through the learner's log_cosh_onnx / export_onnx) and answers the ONNX model's bytes;
# onnx_run runs in the clean room (P0's confined process, none of the learner's cells loaded): it parses the
# bytes, refuses external data and foreign domains, checks the model and runs it in onnxruntime on P0's inputs.
ONNX_MAX_BYTES = 8 << 20


def _quiet_onnx():
    import logging
    import warnings
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    _torchlib_once()


def _torchlib_once():
    """Every torch.onnx.export(dynamo=True) builds its operator registry afresh (ONNXRegistry.from_torchlib), and
    onnxscript's get_torchlib_ops re-parses the source of ~500 torchlib functions each time for their signatures:
    about 0.8 s of CPU per export. Its answer (frozen records of module-level functions) is the same every time
    in a process, so this worker computes it once (a learner's custom_translation_table goes into each export's
    own registry, not into this list), and keeps the registry built from it too (_registry_once)."""
    try:
        from torch.onnx._internal._lazy_import import onnxscript_apis as apis   # the module torch's exporter calls
        if getattr(apis.get_torchlib_ops, "_ipt_once", False):
            return
        ops = tuple(apis.get_torchlib_ops())
    except Exception:  # noqa: BLE001 - another torch or onnxscript: exports then just cost what they cost
        return

    def get_torchlib_ops():
        return list(ops)
    get_torchlib_ops._ipt_once = True
    apis.get_torchlib_ops = get_torchlib_ops
    _registry_once()


def _registry_once():
    """Then each export builds its registry from those records (ONNXRegistry.from_torchlib): about 550 entries, each
    working out its function's signature, 0.14 s of CPU per export, the same every time. This worker builds it
    once per opset; every export still gets a registry of its own (its own dict, lists and entries), into which
    the exporter puts that export's custom translations."""
    import copy
    try:
        from torch.onnx._internal.exporter._registration import ONNXRegistry
        original = ONNXRegistry.__dict__["from_torchlib"].__func__
    except (ImportError, KeyError, AttributeError):  # another torch: exports then just cost what they cost
        return
    if getattr(original, "_ipt_once", False):
        return
    built = {}

    def from_torchlib(cls, *args, **kwargs):
        key = (cls, args, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = original(cls, *args, **kwargs)
        registry = copy.copy(built[key])
        registry.functions = {name: [copy.copy(entry) for entry in entries] for name, entries in built[key].functions.items()}
        return registry
    from_torchlib._ipt_once = True
    ONNXRegistry.from_torchlib = classmethod(from_torchlib)


def _onnx_error(exc):
    """The exporter wraps the real error (a translation that raised, a shape it cannot handle) in a ConversionError
    or TorchExportError with colour codes and advice: answer the outer type, its first line and the innermost cause."""
    import re

    def line(e):
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
        return text.splitlines()[0].split(" Next steps")[0][:160] if text else ""

    inner, seen = exc, 0
    while inner.__cause__ is not None and seen < 8:
        inner, seen = inner.__cause__, seen + 1
    message = line(exc)
    if inner is not exc:
        message += f" ... caused by {type(inner).__name__}: {line(inner)}"
    return {"error": type(exc).__name__, "message": message[:300]}


def _onnx_bytes(data):
    if not isinstance(data, (bytes, bytearray)):
        return {"returned": type(data).__name__[:60]}
    if len(data) > ONNX_MAX_BYTES:
        return {"too_big": len(data)}
    return {"model": np.frombuffer(bytes(data), dtype=np.uint8).copy()}


def _onnx_model(spec):
    from torch import nn

    weights = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in spec["weights"].items()}
    temps = [float(t) for t in spec["temps"]]
    log_cosh = torch.ops.lab11.log_cosh

    def linear(prefix):
        w = weights[prefix + ".weight"]
        layer = nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype)
        return layer

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = linear("fc1"), linear("fc2")

        def forward(self, x):
            return self.fc2(log_cosh(self.fc1(x), temps[0]))

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fx, self.fy = linear("fx"), linear("fy")

        def forward(self, x, y):  # the inputs never meet: only the export can say that they share the batch
            return log_cosh(self.fx(x), temps[0]), log_cosh(self.fy(y), temps[1])

    model = {"mlp": Mlp, "two_inputs": TwoInputs}[spec["kind"]]()
    model.load_state_dict(weights)
    return model.eval()


def onnx_export(sub, spec):
    """The learner's export_onnx on P0's model (built here from P0's weights) and example inputs."""
    _quiet_onnx()
    try:
        model = _onnx_model(spec)
        example = tuple(torch.from_numpy(np.array(a, copy=True)) for a in spec["example"])
        return _onnx_bytes(sub.export_onnx(model, example))
    except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
        return _onnx_error(exc)


def onnx_translate(sub, example, temps):
    """torch.onnx.export of a module that applies log_cosh once per temperature, and once more with the first
    temperature to the 0-d x[0, 0], with the learner's translation."""
    _quiet_onnx()
    from torch import nn

    class Temps(nn.Module):
        def forward(self, x):
            return (*(torch.ops.lab11.log_cosh(x, float(t)) for t in temps), torch.ops.lab11.log_cosh(x[0, 0], float(temps[0])))

    try:
        x = torch.from_numpy(np.array(example, copy=True))
        program = torch.onnx.export(Temps(), (x,), dynamo=True, verbose=False,
                                    dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=1024)},),
                                    custom_translation_table={torch.ops.lab11.log_cosh.default: sub.log_cosh_onnx})
        return _onnx_bytes(program.model_proto.SerializeToString())
    except Exception as exc:  # noqa: BLE001
        return _onnx_error(exc)


def _onnx_tensors(message):
    """Every TensorProto inside an ONNX protobuf message (initializers, attributes, subgraphs, functions)."""
    import onnx
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for item in ([value] if hasattr(value, "ListFields") else value):
            if isinstance(item, onnx.TensorProto):
                yield item
            yield from _onnx_tensors(item)


def _onnx_nodes(message):
    """Every NodeProto inside an ONNX protobuf message: the graph's, subgraphs' (If, Loop, Scan) and functions'."""
    import onnx
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for item in ([value] if hasattr(value, "ListFields") else value):
            if isinstance(item, onnx.NodeProto):
                yield item
            yield from _onnx_nodes(item)


def onnx_run(sub, model, feeds):
    """Clean room only. Validate the model, then run it once per feed (a list of input arrays, in order)."""
    import onnx
    import onnxruntime as ort

    data = np.asarray(model, np.uint8).tobytes()
    if len(data) > ONNX_MAX_BYTES:
        return {"invalid": f"the model has {len(data)} bytes, more than {ONNX_MAX_BYTES}"}
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"the bytes are not an ONNX model ({type(exc).__name__})"}
    if any(t.data_location == onnx.TensorProto.EXTERNAL or len(t.external_data) for t in _onnx_tensors(proto)):
        return {"invalid": "the model refers to external data (its weights must be inside the file)"}
    local = {(f.domain, f.name) for f in proto.functions}
    foreign = sorted({o.domain for o in proto.opset_import} - {"", "ai.onnx"} - {d for d, _ in local})
    used = sorted({f"{n.domain}.{n.op_type}" for n in _onnx_nodes(proto)
                   if n.domain not in ("", "ai.onnx") and (n.domain, n.op_type) not in local})
    if foreign or used:
        return {"invalid": f"the model uses operators outside the standard ONNX domain: {(foreign + used)[:4]}"}
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"onnx.checker rejects the model: {str(exc)[:300]}"}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = False
    options.add_session_config_entry("session.load_model_format", "ONNX")   # no ORT-format models
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting threads
    # no custom-op library is registered (register_custom_ops_library is never called): the model can only name
    # operators that onnxruntime itself implements, and only standard ONNX ones pass the check above
    try:
        session = ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        return {"invalid": f"onnxruntime cannot load the model: {str(exc)[:300]}"}
    inputs = session.get_inputs()
    shapes = [[d if isinstance(d, int) else ("?" if d is None else str(d)) for d in i.shape] for i in inputs]
    results = []
    for feed in feeds:
        if len(feed) != len(inputs):
            results.append({"error": "InputCount", "message": f"the model takes {len(inputs)} inputs, not {len(feed)}"})
            continue
        try:
            outs = session.run(None, {i.name: np.asarray(a) for i, a in zip(inputs, feed, strict=True)})
            results.append({"outputs": [np.asarray(o) if isinstance(o, np.ndarray) else repr(type(o)) for o in outs]})
        except Exception as exc:  # noqa: BLE001
            results.append(_error(exc))
    return {"inputs": shapes, "ops": [n.op_type for n in proto.graph.node], "results": results}
