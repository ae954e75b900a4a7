# IPT-CANARY lab11 oracle.py: hidden grading text, never shown to learners
"""Trusted-side (P0) oracles of lab11.

Part `export`: four fixed models, exported and lowered to Core ATen once per P0 process (the fork server's
warm_p0), serialized with torch.export.save and loaded back: P1 receives exactly those bytes. The expected
results come from torch.fx.Interpreter over the program's own graph module with P0's kernel table (an
implementation independent of the reference's loop), and the guards from a table of the ranges each model
was exported with, written here by hand (not read from range_constraints).

Part `checkpoint`: P0 writes its own torch.save archives (a pickle.Pickler of its own, storage keys drawn from
the grading seed, either byte order, crafted corruptions and forbidden globals) and reads the expected
objects with torch.load(weights_only=True); the expected index is the writer's own record.
"""
from __future__ import annotations

import collections
import functools
import io
import os
import pickle
import warnings
import zipfile

import numpy as np
import torch
from torch import nn

from autograder.engine import replies

INF = None  # an unbounded upper end in SPECS


# -- part export: the fixed models --------------------------------------------------------------------------
class Mlp(nn.Module):
    """Two linears, a buffer it accumulates into, a lifted constant; one dynamic batch in [2, 16]."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(5, 4), nn.Linear(4, 3)
        self.register_buffer("total", torch.zeros(3))
        self.offset = torch.tensor([0.5, -0.25, 1.0])

    def forward(self, x):
        y = self.fc2(torch.tanh(self.fc1(x))) + self.offset
        self.total.add_(y.sum(0))
        return y, y.amax(1)


class Norm(nn.Module):
    """BatchNorm in training mode (three buffer mutations, one int64), a view on a symbolic size, a constant
    placeholder between the parameters and the buffers; batch in [3, oo)."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 2)
        self.gain = torch.tensor(1.5)

    def forward(self, x):
        h = self.fc(self.bn(x))
        return (h.view(x.shape[0], -1) * self.gain).sigmoid()


class Twice(nn.Module):
    """A user input mutated in place, two symbols (rows shared by x and y), a buffer it overwrites."""

    def __init__(self):
        super().__init__()
        self.register_buffer("last", torch.zeros(2))

    def forward(self, x, y):
        x.mul_(2)
        self.last.copy_(x.sum(0))
        z = torch.cat([x, y], 1)
        return z.cumsum(1) - self.last.sum(), y.exp().sum()


class Static(nn.Module):
    """Static shapes; operators with several results (getitem), keyword arguments and integer outputs."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x, idx):
        vals, where = torch.max(x @ self.w, dim=1)
        soft = torch.softmax(x, dim=-1)
        return vals + torch.full((2,), 0.5), where + idx, soft * 2.0


class Mixed(nn.Module):
    """A non-persistent buffer (it lives in ep.constants) and a buffer it only reads beside one it writes; one
    symbol on axis 0 of x and axis 1 of y, another on axis 0 of z; both overloads of aten.pow that Core ATen
    keeps (Tensor_Scalar and Tensor_Tensor)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.5, -0.5, 2.0]), persistent=False)
        self.register_buffer("bias", torch.tensor([0.25, 0.0, -1.0]))
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x, y, z):
        h = x * self.scale + self.bias + y.t()
        self.seen.add_(h.mean(0))
        s = (z.abs() + 1.0) ** torch.tanh(z)
        return h ** 2, s.sum(0) - h.amax()


# name -> (model class, example args, dynamic shapes, SPEC). SPEC: per user input (placeholder name, dims),
# a dim is an int (static) or (symbol, lower, upper or None): the ranges the model was exported with.
PROGRAMS = {
    "mlp": (Mlp, lambda: (torch.randn(4, 5),), lambda D: ({0: D("batch", min=2, max=16)},),
            [("x", [("b", 2, 16), 5])]),
    "norm": (Norm, lambda: (torch.randn(5, 4),), lambda D: ({0: D("n", min=3)},),
             [("x", [("n", 3, INF), 4])]),
    "twice": (Twice, lambda: (torch.randn(3, 2), torch.randn(3, 4)),
              lambda D: (lambda r: ({0: r}, {0: r, 1: D("cols", min=1, max=9)}))(D("rows", max=6)),
              [("x", [("r", 0, 6), 2]), ("y", [("r", 0, 6), ("c", 1, 9)])]),
    "static": (Static, lambda: (torch.randn(2, 3), torch.tensor([1, 2])), lambda D: None,
               [("x", [2, 3]), ("idx", [2])]),
    "mixed": (Mixed, lambda: (torch.randn(4, 3), torch.randn(3, 4), torch.randn(5, 3)),
              lambda D: (lambda n: ({0: n}, {1: n}, {0: D("m", min=1, max=7)}))(D("n", min=1, max=8)),
              [("x", [("n", 1, 8), 3]), ("y", [3, ("n", 1, 8)]), ("z", [("m", 1, 7), 3])]),
}
UNBOUNDED_CAP = 12  # the largest size drawn for an unbounded dimension


def _export(name):
    from torch.export import Dim, export
    cls, example, dynamic, _ = PROGRAMS[name]
    torch.manual_seed(11)
    model = cls()
    if name == "norm":
        model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = export(model, example(), dynamic_shapes=dynamic(Dim)).run_decompositions()
        buf = io.BytesIO()
        torch.export.save(ep, buf)
        data = buf.getvalue()
        loaded = torch.export.load(io.BytesIO(data))
    return loaded, data


def _cache_file(name):
    """build/lab11/programs/<name>-<hash>.pt2: the exported bytes, keyed by this file's text and torch's version, so
    that a new P0 process loads (0.1 s) what an earlier one exported (1-5 s a model)."""
    import hashlib
    from pathlib import Path

    from autograder.paths import build_dir
    digest = hashlib.sha256(Path(__file__).read_bytes() + torch.__version__.encode()).hexdigest()[:16]
    return build_dir("lab11", "programs") / f"{name}-{digest}.pt2"


@functools.cache
def program(name):
    """(the ExportedProgram as P1 will load it, its torch.export.save bytes)."""
    cache = _cache_file(name)
    if cache.exists():
        data = cache.read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.export.load(io.BytesIO(data)), data
    ep, data = _export(name)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, cache)
    return ep, data


def warm_p0():
    """Run once by the P0 fork server before it forks gradings: every fixed model exported and lowered."""
    for name in PROGRAMS:
        program(name)


def program_bytes(name):
    return np.frombuffer(program(name)[1], dtype=np.uint8).copy()


def kernel_ops(name):
    """Targets whose every node makes one floating tensor: a kernel table may replace them."""
    ep = program(name)[0]
    ok, bad = set(), set()
    for node in ep.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        val = node.meta.get("val")
        (ok if isinstance(val, torch.Tensor) and val.dtype.is_floating_point else bad).add(str(node.target))
    return sorted(ok - bad)


def apply_kernel(fn, kind, c):
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out * c if kind == "scale" else out + c
    return run


class _KernelInterpreter(torch.fx.Interpreter):
    def __init__(self, gm, table):
        super().__init__(gm)
        self.table = table

    def call_function(self, target, args, kwargs):
        entry = self.table.get(str(target))
        fn = apply_kernel(target, *entry) if entry else target
        return fn(*args, **kwargs)


def state_of(name, rng, wide=False):
    """A fresh state dict (FQN -> numpy) with the program's names, shapes and dtypes, drawn from rng; wide=True:
    float64 where the program has float32 (the spec runs the operators on the caller's tensors as given)."""
    ep = program(name)[0]
    state = {}
    for fqn, t in [*ep.state_dict.items(), *ep.constants.items()]:
        if t.dtype.is_floating_point:
            v = rng.standard_normal(tuple(t.shape)).astype(np.float64 if wide else np.float32)
            state[fqn] = np.abs(v) + 0.5 if "var" in fqn else v
        else:
            state[fqn] = rng.integers(0, 50, size=tuple(t.shape)).astype(np.int64)
    return state


def inputs_of(name, rng, sizes=None, wide=False):
    """User inputs within the ranges (sizes: symbol -> size to use), as numpy arrays (wide: float64)."""
    spec = PROGRAMS[name][3]
    chosen = dict(sizes or {})
    arrays = []
    for input_name, dims in spec:
        shape = []
        for d in dims:
            if isinstance(d, int):
                shape.append(d)
            else:
                sym, lo, hi = d
                if sym not in chosen:
                    chosen[sym] = int(rng.integers(lo, (UNBOUNDED_CAP if hi is None else hi) + 1))
                shape.append(chosen[sym])
        if input_name == "idx":
            arrays.append(rng.integers(-5, 5, size=shape).astype(np.int64))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float64 if wide else np.float32))
    return arrays


def sibling_kernels(name, rng):
    """Kernel tables for one overload of an operator whose other overload the program also calls (aten.pow's
    Tensor_Scalar and Tensor_Tensor): the table names an OpOverload, so the sibling keeps running the operator."""
    ops = kernel_ops(name)
    packets = collections.Counter(op.rsplit(".", 1)[0] for op in ops)
    return [[[op, "scale" if rng.random() < 0.5 else "shift", float(np.round(rng.uniform(0.3, 1.7), 3))]]
            for op in ops if packets[op.rsplit(".", 1)[0]] > 1]


def distinct_sizes(name, rng):
    """A size for every symbol of the program, drawn so that no two symbols get the same size (where the ranges
    allow): an input whose symbols happen to agree cannot tell a guard keyed by symbol from one keyed otherwise."""
    spec = PROGRAMS[name][3]
    chosen = {}
    for _, dims in spec:
        for d in dims:
            if isinstance(d, int) or d[0] in chosen:
                continue
            sym, lo, hi = d
            free = [v for v in range(max(lo, 1), (UNBOUNDED_CAP if hi is None else hi) + 1) if v not in chosen.values()]
            chosen[sym] = int(rng.choice(free)) if free else int(lo)
    return chosen


def kernels_of(name, rng, count):
    ops = kernel_ops(name)
    picked = rng.choice(len(ops), size=min(count, len(ops)), replace=False) if count else []
    return [[ops[int(i)], "scale" if rng.random() < 0.5 else "shift", float(np.round(rng.uniform(0.3, 1.7), 3))]
            for i in picked]


def expected_run(name, args, state, kernels):
    """{"outputs": [...], "mutations": [[fqn, value]...], "inputs": [user inputs after the call]} (numpy)."""
    ep = program(name)[0]
    sig = ep.graph_signature
    users = [torch.from_numpy(np.array(a, copy=True)) for a in args]
    own = {**ep.state_dict, **ep.constants}
    flat = []
    for spec in sig.input_specs:
        if spec.kind.name == "USER_INPUT":
            flat.append(users[sig.user_inputs.index(spec.arg.name)])
        else:
            flat.append(own[spec.target].detach().clone() if state is None
                        else torch.from_numpy(np.array(state[spec.target], copy=True)))
    table = {op: (kind, c) for op, kind, c in kernels}
    with torch.no_grad():
        results = _KernelInterpreter(ep.graph_module, table).run(*flat)
    outputs, mutations = [], []
    after = [u.clone() for u in users]
    for spec, value in zip(sig.output_specs, results, strict=True):
        kind = spec.kind.name
        if kind == "USER_OUTPUT":
            outputs.append(value)
        elif kind == "BUFFER_MUTATION":
            mutations.append([spec.target, value])
        elif kind == "USER_INPUT_MUTATION":
            after[sig.user_inputs.index(spec.target)] = value
    return {"outputs": [np.asarray(o.detach().numpy()) for o in outputs],
            "mutations": [[k, v.detach().numpy()] for k, v in mutations],
            "inputs": [a.detach().numpy() for a in after]}


def guard_violation(name, shapes, module_rules=False):
    """None when the shapes fit the SPEC; otherwise the user input the GuardError must name ('' for a wrong
    number of inputs). module_rules=True: ep.module()'s rules, which skip lower bounds of 2 or less."""
    spec = PROGRAMS[name][3]
    if len(shapes) != len(spec):
        return ""
    seen = {}
    for (input_name, dims), shape in zip(spec, shapes, strict=True):
        if len(shape) != len(dims):
            return input_name
        for d, size in zip(dims, shape, strict=True):
            if isinstance(d, int):
                if size != d:
                    return input_name
                continue
            sym, lo, hi = d
            lo = 0 if module_rules and lo <= 2 else lo
            if size < lo or (hi is not None and size > hi) or seen.setdefault(sym, size) != size:
                return input_name
    return None


def bad_shapes(name, rng):
    """Out-of-range cases of every kind the program has: (shapes, what), drawn from rng."""
    spec = PROGRAMS[name][3]
    base = [[d if isinstance(d, int) else None for d in dims] for _, dims in spec]
    valid = [list(a.shape) for a in inputs_of(name, rng)]
    cases = []
    symbols = {}
    for i, (input_name, dims) in enumerate(spec):
        for j, d in enumerate(dims):
            if isinstance(d, int):
                shapes = [list(s) for s in valid]
                shapes[i][j] = d + int(rng.integers(1, 3))
                cases.append((shapes, f"{input_name} with a static size changed"))
                if d != 1:
                    shapes = [list(s) for s in valid]
                    shapes[i][j] = 1
                    cases.append((shapes, f"{input_name} with a static size given as 1 (it would broadcast)"))
                continue
            sym, lo, hi = d
            symbols.setdefault(sym, []).append((i, j))
            if hi is not None:
                size = hi + int(rng.integers(1, 4))
                cases.append((_with_symbol(spec, valid, sym, size), f"a dynamic size above its range's upper end ({input_name})"))
            if lo > 0:
                size = int(rng.integers(0, lo))
                cases.append((_with_symbol(spec, valid, sym, size), f"a dynamic size below its range's lower end ({input_name})"))
    for sym, places in symbols.items():
        if len(places) > 1:
            shapes = [list(s) for s in valid]
            i, j = places[-1]
            shapes[i][j] = shapes[i][j] + 1 if shapes[i][j] < 6 else shapes[i][j] - 1
            cases.append((shapes, "two dimensions of one symbol with different sizes"))
    shapes = [list(s) for s in valid]
    shapes[-1] = shapes[-1] + [2]
    cases.append((shapes, "an input with one dimension too many"))
    k = int(rng.integers(len(valid)))
    shapes = [list(s) for s in valid]
    shapes[k] = shapes[k][:-1]
    cases.append((shapes, "an input with one dimension too few"))
    cases.append(([list(s) for s in valid[:-1]] + ([] if len(valid) > 1 else [list(valid[0]), [2]]),
                  "the wrong number of inputs"))
    del base
    return cases


def _with_symbol(spec, valid, sym, size):
    shapes = [list(s) for s in valid]
    for i, (_, dims) in enumerate(spec):
        for j, d in enumerate(dims):
            if not isinstance(d, int) and d[0] == sym:
                shapes[i][j] = size
    return shapes


def arrays_for(name, shapes, rng):
    arrays = []
    spec = PROGRAMS[name][3]
    for k, shape in enumerate(shapes):
        if k < len(spec) and spec[k][0] == "idx":
            arrays.append(rng.integers(-5, 5, size=shape).astype(np.int64))
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32))
    return arrays


# -- part export: checking replies ----------------------------------------------------------------------------
def check_tensor(got, want, what, dtype=None):
    got = replies.dict_of(got, {"values", "dtype"}, what)
    values = replies.array(got["values"], what)
    want = np.asarray(want)
    assert tuple(values.shape) == tuple(want.shape), f"{what}: expected shape {list(want.shape)}, got {list(values.shape)}"
    wdt = dtype or str(want.dtype)
    name = replies.string(got["dtype"], f"{what} (dtype)")
    assert name == wdt, f"{what}: expected dtype {wdt}, got {name}"
    if want.dtype.kind == "f":
        ok = np.allclose(values.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        ok = np.array_equal(values, want)
    assert ok, f"{what}: the values differ from the expected ones"


def check_run(got, want, what):
    error = replies.error_reply(got, what)
    if error is not None:
        raise AssertionError(f"{what}: raised {error['error']}: {error.get('message', '')[:200]}")
    got = replies.dict_of(got, {"outputs", "mutations", "inputs"}, what)
    outs = replies.list_of(got["outputs"], f"{what}: the user outputs", len(want["outputs"]))
    for k, (g, w) in enumerate(zip(outs, want["outputs"], strict=True)):
        check_tensor(g, w, f"{what}: user output {k}")
    muts = replies.list_of(got["mutations"], f"{what}: the mutated buffers", len(want["mutations"]))
    names = []
    for k, m in enumerate(muts):
        pair = replies.list_of(m, f"{what}: mutation {k}", 2)
        names.append(replies.string(pair[0], f"{what}: mutation {k}'s name"))
    want_names = [k for k, _ in want["mutations"]]
    assert names == want_names, f"{what}: the mutated buffers should be {want_names} in this order, got {names}"
    for (name, value), m in zip(want["mutations"], muts, strict=True):
        check_tensor(m[1], value, f"{what}: the new value of buffer {name!r}")
    ins = replies.list_of(got["inputs"], f"{what}: the user inputs after the call", len(want["inputs"]))
    for k, (g, w) in enumerate(zip(ins, want["inputs"], strict=True)):
        check_tensor(g, w, f"{what}: user input {k} after the call")


# -- part checkpoint: P0's own writer --------------------------------------------------------------------------
STORAGE_CLASS = {torch.float64: "DoubleStorage", torch.float32: "FloatStorage", torch.float16: "HalfStorage",
                 torch.bfloat16: "BFloat16Storage", torch.int64: "LongStorage", torch.int32: "IntStorage",
                 torch.int16: "ShortStorage", torch.int8: "CharStorage", torch.uint8: "ByteStorage",
                 torch.bool: "BoolStorage"}


class _Ref:
    def __init__(self, cls, key, numel):
        self.cls, self.key, self.numel = cls, key, numel


class Forbidden:
    """An object that pickles as a call of `fn(*args)`: fn is the global the file names."""

    def __init__(self, fn, args=()):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


class BadPid:
    """Writers whose persistent ids break the lab's rule in one way each (the storage members stay in place)."""

    @staticmethod
    def writer(kind):
        class Writer(_Writer):
            def persistent_id(self, obj):
                pid = super().persistent_id(obj)
                if pid is None:
                    return None
                if kind == "int key":
                    return (pid[0], pid[1], int(pid[2]), pid[3], pid[4])
                if kind == "list":
                    return list(pid)
                return ("module", *pid[1:])
        return Writer


class _Writer(pickle.Pickler):
    def __init__(self, file, name_key):
        super().__init__(file, protocol=2)
        self.name_key = name_key
        self.storages = {}  # (data_ptr, nbytes, dtype) -> (key, storage)
        self.index = []

    def persistent_id(self, obj):
        if isinstance(obj, _Ref):
            return ("storage", getattr(torch, obj.cls), obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if not isinstance(obj, torch.Tensor) or type(obj) is not torch.Tensor:
            return NotImplemented
        st = obj.untyped_storage()
        item = obj.element_size()
        ident = (st.data_ptr(), st.nbytes(), obj.dtype) if st.nbytes() else ("empty", id(obj))
        if ident not in self.storages:
            self.storages[ident] = (self.name_key(len(self.storages)), st, obj.dtype)
        key = self.storages[ident][0]
        size, stride, offset = tuple(obj.shape), tuple(obj.stride()), obj.storage_offset()
        self.index.append({"key": key, "dtype": str(obj.dtype).replace("torch.", ""), "offset": offset,
                           "size": list(size), "stride": list(stride)})
        ref = _Ref(STORAGE_CLASS[obj.dtype], key, st.nbytes() // item)
        return (torch._utils._rebuild_tensor_v2, (ref, offset, size, stride, obj.requires_grad, collections.OrderedDict()))


class WithMetadata(_Writer):
    """torch.save's layout with the seventh argument of _rebuild_tensor_v2 (metadata, an empty dict here) that the
    statement says may follow; torch.load accepts it."""

    def reducer_override(self, obj):
        reduced = super().reducer_override(obj)
        return reduced if reduced is NotImplemented else (reduced[0], (*reduced[1], {}))


def rewrite_members(data, rename):
    """The archive `data` with every member renamed by rename(name)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            dst.writestr(rename(name), src.read(name))
    return out.getvalue()


def storage_bytes(st, dtype, big):
    u8 = torch.empty(0, dtype=torch.uint8)
    u8.set_(st, 0, (st.nbytes(),), (1,))
    data = u8.numpy().tobytes()
    item = torch.empty((), dtype=dtype).element_size()
    if big and item > 1:
        data = np.frombuffer(data, np.uint8).reshape(-1, item)[:, ::-1].tobytes()
    return data


def write_archive(obj, keys=None, big=False, folder="archive", change=None, order=None, writer_class=None):
    """(archive bytes, index as the writer made it). keys(k) names the k-th storage (default str(k));
    change(member, bytes) -> bytes or None edits a member (None drops it); order (a numpy Generator) shuffles the
    members (torch.save writes data.pkl first; nothing requires it)."""
    buf = io.BytesIO()
    writer = (writer_class or _Writer)(buf, keys or str)
    writer.dump(obj)
    members = [("data.pkl", buf.getvalue()), (".format_version", b"1"), (".storage_alignment", b"64"),
               ("byteorder", b"big" if big else b"little")]
    for key, st, dtype in writer.storages.values():
        members.append((f"data/{key}", storage_bytes(st, dtype, big)))
    members += [("version", b"3\n"), (".data/serialization_id", b"0" * 40)]
    if order is not None:
        members = [members[int(i)] for i in order.permutation(len(members))]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for member, data in members:
            data = change(member, data) if change else data
            if data is not None:
                z.writestr(f"{folder}/{member}", data)
    return out.getvalue(), writer.index


def torch_archive(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def as_wire(data):
    return np.frombuffer(data, dtype=np.uint8).copy()


# -- part checkpoint: drawn objects ---------------------------------------------------------------------------
DTYPES = list(STORAGE_CLASS)


def random_tensor(rng, dtype=None, shape=None):
    dtype = DTYPES[int(rng.integers(len(DTYPES)))] if dtype is None else dtype
    shape = tuple(int(rng.integers(0 if rng.random() < 0.1 else 1, 5)) for _ in range(int(rng.integers(0, 4)))) \
        if shape is None else shape
    if dtype == torch.bool:
        return torch.from_numpy(np.asarray(rng.random(shape) < 0.5))
    if dtype.is_floating_point:
        return torch.from_numpy(np.asarray(rng.standard_normal(shape) * 10, np.float32)).to(dtype)
    info = torch.iinfo(dtype)
    return torch.from_numpy(np.asarray(rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, size=shape))).to(dtype)


def views_of(rng, base):
    """Views that keep base's storage: transposes, slices with offsets, steps, expansions, a 0-d element."""
    out = [base]
    if base.dim() >= 2:
        out.append(base.t() if base.dim() == 2 else base.transpose(0, -1))
        if base.shape[0] > 1:
            out.append(base[1:])
    if base.dim() >= 1 and base.shape[-1] > 1:
        out.append(base[..., ::2])
        out.append(base.select(-1, int(rng.integers(base.shape[-1]))))
    if base.dim() == 2:
        out.append(base[:, :1].expand(base.shape[0], 3))  # stride 0 along the expanded dimension
    return out


def random_object(rng, depth=0):
    """A nested object of the kinds the lab allows: OrderedDict, dict, list, tuple, scalars, tensors and views."""
    kinds = ["tensor", "views", "scalar", "list", "tuple", "dict", "odict"] if depth < 2 else ["tensor", "scalar"]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "tensor":
        t = random_tensor(rng)
        return t.requires_grad_(True) if t.dtype.is_floating_point and rng.random() < 0.3 else t
    if kind == "views":
        base = random_tensor(rng, shape=(int(rng.integers(2, 5)), int(rng.integers(2, 5))))
        vs = views_of(rng, base)
        return [vs[int(i)] for i in rng.permutation(len(vs))]
    if kind == "scalar":
        return [None, True, int(rng.integers(-9, 10)), float(np.round(rng.standard_normal(), 3)), "w" + str(int(rng.integers(99)))][
            int(rng.integers(5))]
    n = int(rng.integers(0, 4))
    items = [random_object(rng, depth + 1) for _ in range(n)]
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    keys = [f"k{int(rng.integers(1000))}_{i}" for i in range(n)]
    return (collections.OrderedDict if kind == "odict" else dict)(zip(keys, items, strict=True))


def random_state_dict(rng):
    """A model's state_dict (OrderedDict of tensors, a shared weight, an int64 counter) with a bfloat16 half."""
    model = nn.Sequential(nn.Linear(int(rng.integers(2, 6)), 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    model[2].weight = nn.Parameter(model[2].weight.detach().clone())
    sd = model.state_dict()
    sd["tied"] = sd["0.weight"][:, :2]  # a view of another entry: one storage, an offset-free slice
    if rng.random() < 0.5:
        sd["2.weight"] = sd["2.weight"].to(torch.bfloat16)
    return sd


def random_keys(rng):
    """Storage key names drawn from rng: never simply 0, 1, 2, ..."""
    prefix = ["k", "w", "s", "blob", ""][int(rng.integers(5))]
    base = int(rng.integers(3, 500))
    step = int(rng.integers(1, 9))
    return lambda k: f"{prefix}{base + k * step}"


# -- part checkpoint: encoding and comparing ------------------------------------------------------------------
def encode(o):
    """The safe-data form of a loaded object (the scenarios encode the learner's objects the same way)."""
    if isinstance(o, torch.Tensor):
        t = o.detach()
        values = t.to(torch.float32) if t.dtype in (torch.bfloat16, torch.float16) else t
        return {"tensor": values.contiguous().numpy().copy(), "dtype": str(t.dtype).replace("torch.", ""),
                "size": list(t.shape), "stride": list(t.stride()), "offset": int(t.storage_offset()),
                "requires_grad": bool(o.requires_grad)}
    if isinstance(o, collections.OrderedDict):
        return {"odict": [[encode(k), encode(v)] for k, v in o.items()]}
    if isinstance(o, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in o.items()]}
    if isinstance(o, list):
        return {"list": [encode(v) for v in o]}
    if isinstance(o, tuple):
        return {"tuple": [encode(v) for v in o]}
    if o is None or isinstance(o, (bool, int, float, str)):
        return {"value": o}
    return {"other": type(o).__name__}


def storage_groups(o):
    """For each tensor leaf in traversal order: the number of the first leaf sharing its storage (-1: empty)."""
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


def expected_load(data):
    obj = torch.load(io.BytesIO(data), weights_only=True)
    return {"obj": encode(obj), "groups": storage_groups(obj)}


def compare_encoded(got, want, where):
    """got (from P1) against want (P0's encoding): the first difference as a sentence naming the place."""
    if not isinstance(got, dict) or len(got) == 0:
        raise AssertionError(f"{where}: expected an encoded value, got {replies.describe(got)}")
    (kind,) = want.keys() - {"dtype", "size", "stride", "offset", "requires_grad"}
    if kind not in got:
        raise AssertionError(f"{where}: expected a {_kind_name(kind)}, got {_kind_name(_kind(got))}")
    if kind == "tensor":
        replies.dict_of(got, {"tensor", "dtype", "size", "stride", "offset", "requires_grad"}, where)
        for field in ("dtype", "size", "stride", "offset", "requires_grad"):
            assert got[field] == want[field], f"{where}: the tensor's {field} differs from torch.load's"
        values = replies.array(got["tensor"], where)
        assert tuple(values.shape) == tuple(want["tensor"].shape) and np.array_equal(
            values, want["tensor"], equal_nan=want["tensor"].dtype.kind == "f"), f"{where}: the tensor's values differ from torch.load's"
        return
    if kind == "value":
        g, w = got["value"], want["value"]
        assert type(g) is type(w) and (g == w or (isinstance(w, float) and np.isnan(w) and np.isnan(g))), \
            f"{where}: a {type(w).__name__} differs from torch.load's ({replies.describe(g)})"
        return
    items = replies.list_of(got[kind], f"{where} ({_kind_name(kind)})", len(want[kind]))
    for k, (g, w) in enumerate(zip(items, want[kind], strict=True)):
        if kind in ("dict", "odict"):
            pair = replies.list_of(g, f"{where} item {k}", 2)
            compare_encoded(pair[0], w[0], f"{where} key {k}")
            compare_encoded(pair[1], w[1], f"{where}[{w[0].get('value')!r}]")
        else:
            compare_encoded(g, w, f"{where}[{k}]")


def _kind(enc):
    return next(iter(k for k in enc if k in ("tensor", "odict", "dict", "list", "tuple", "value", "other")), "?")


def _kind_name(kind):
    return {"tensor": "tensor", "odict": "OrderedDict", "dict": "dict", "list": "list", "tuple": "tuple",
            "value": "scalar", "other": "other object", "?": "something else"}.get(kind, kind)


def check_index(got, want, what):
    items = replies.list_of(got, f"{what}: the index", len(want))
    for k, (g, w) in enumerate(zip(items, want, strict=True)):
        g = replies.dict_of(g, {"key", "dtype", "offset", "size", "stride"}, f"{what}: index entry {k}")
        for field in ("key", "dtype", "offset", "size", "stride"):
            assert g[field] == w[field], f"{what}: index entry {k} has the wrong {field}"


def check_load(got, data, index, what):
    """A load reply against torch.load of the same bytes, and the index against the writer's record."""
    error = replies.error_reply(got, what)
    if error is not None:
        raise AssertionError(f"{what}: raised {error['error']}: {error.get('message', '')[:200]}")
    got = replies.dict_of(got, {"obj", "index", "groups"}, what)
    want = expected_load(data)
    compare_encoded(got["obj"], want["obj"], f"{what}: obj")
    groups = replies.int_list(got["groups"], f"{what}: storage sharing", len(want["groups"]))
    assert groups == want["groups"], f"{what}: tensors that share a storage in the file should share one after loading (and only those)"
    if index is not None:
        check_index(got["index"], index, what)


def expect_error(got, error, what, needle=None):
    err = replies.error_reply(got, what)
    assert err is not None, f"{what}: should raise {error}, returned a result"
    assert err["error"] == error, f"{what}: should raise {error}, raised {err['error']}"
    if needle is not None:
        assert needle in err["message"], f"{what}: the {error}'s message should name {needle!r}"


ALLOWED = {("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"),
           *(("torch", name) for name in STORAGE_CLASS.values())}


def first_forbidden(data):
    """'module.name' of the first global outside the allow-list that the archive's pickle names, or None."""
    import pickletools
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    for op, arg, _ in pickletools.genops(pkl):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            if (module, name) not in ALLOWED:
                return f"{module}.{name}"
    return None


def forbidden_objects():
    """(object, the global its pickle names) for files the allow-list refuses; torch.load(weights_only=True)
    accepts the torch ones."""
    import builtins
    return [(torch.Size([2, 3]), "torch.Size"), (torch.float32, "torch.float32"), (torch.device("cpu"), "torch.device"),
            (nn.Parameter(torch.ones(2)), "torch._utils._rebuild_parameter"),
            (Forbidden(os.system, ("true",)), f"{os.system.__module__}.system"),
            (Forbidden(builtins.eval, ("1+1",)), "__builtin__.eval"),  # protocol 2 writes Python 2's module name
            (collections.Counter("aab"), "collections.Counter"), ({1, 2}, "__builtin__.set"),
            (Forbidden(torch.cuda.FloatStorage), "torch.cuda.FloatStorage")]  # a storage class outside torch.<S>
