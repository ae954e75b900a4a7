# IPT-CANARY lab11 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases of lab11 (export and deploy), run against the reference solution in P0.

The cases are our own, written as small functions. They are *modelled on* public test suites written by
others, and the oracle of each case is PyTorch itself (no code or prose of those suites is copied; each group
names the tests that gave the idea):

* PyTorch `test/export/test_export.py` (`test_basic`, `test_buffer_util` / tests of modules that mutate their
  buffers in forward, `test_mutate_input` style user-input mutation, `test_export_dynamic_dim_range` style
  `Dim(min=, max=)` constraints and their guard errors, `test_multiple_outputs` / tuple outputs,
  `test_constant_tensor` lifted constants, `test_export_with_kwargs`-style keyword operators) and
  `test/export/test_unflatten.py`'s runs of `ep.module()`: run_program and check_inputs against `ep.module()`;
* PyTorch `test/test_serialization.py` (`test_serialization_offset`, `test_serialization_storage_slice`-style
  views sharing one storage, `test_empty_storage`-style size-0 tensors, `test_serialization_byteorder_mark`
  and the big-endian archives of `test_serialization_load_bom_data_*`, `test_weights_only_assert` (a pickle
  that calls os.system / eval is refused), `test_serialization_dtypes`-style every-dtype round trips,
  `test_serialization_zipfile` with file objects and paths, `test_meta_serialization`-free CPU cases):
  load_checkpoint against `torch.load(weights_only=True)`;
* PyTorch `test/test_dataloader.py` (`test_sequential_batch` / `test_shuffle_batch_workers`: the sampler's order
  with workers, `test_drop_last`-style counts, `test_sampler` with a custom list of indices,
  `test_random_sampler_len_with_replacement`, `test_default_collate_dtype` / dict samples collated per key,
  `test_error_workers` / `test_error_in_init`-style errors raised in the main process, `test_segfault`-style
  a worker that dies (an error, not a hang), `test_partial_workers`: workers stop once iteration stops,
  `test_worker_seed`: workers draw different numbers): Loader against `DataLoader` with the same sampler;
* PyTorch `test/test_custom_ops.py` and `test/test_cpp_extensions_jit.py` (opcheck over sample inputs, fake
  kernels against real ones, keyword-only arguments, torch.compile(fullgraph=True)), and divide_no_nan-style
  cases: the C++ operator built from the reference's source;
* PyTorch `test/onnx/exporter/test_api.py` (custom translation tables for custom ops, `dynamic_shapes` with
  named `Dim`s, models with several inputs and outputs) and onnxscript's torch_lib op tests (a translation run in
  onnxruntime against eager, per dtype): log_cosh_onnx and export_onnx run in onnxruntime against eager.

Where the lab's spec deliberately differs from PyTorch (ep.module() lets a size below a lower bound of 2 or
less through; torch.load accepts torch.Size, dtypes, devices, Parameters, sets and Counters; DataLoader seeds
each worker once with base_seed + worker_id, raises the dataset's own exception and goes on after it; torch.div
gives inf and NaN where the lab's operator gives its fill value; torch's own ONNX translations round a float64
model's Python scalars to float32 and export logaddexp unstably), the case asserts the library's own behaviour
as a fact of torch 2.13 beside the lab's, so a change in torch shows up here.

    run()   # -> number of cases; raises AssertionError listing every disagreement
"""
from __future__ import annotations

import collections
import functools
import io
import os
import tempfile
import warnings

import torch
from torch import nn
from torch.export import Dim, export

from autograder.engine.peer_suite import Suite

SUITE = Suite("lab11")
CASES, case, reference = SUITE.cases, SUITE.case, SUITE.reference


def _export(model, args, dynamic_shapes=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(model, args, dynamic_shapes=dynamic_shapes).run_decompositions()


def _same(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: output {k} {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        assert torch.allclose(g.double(), w.double(), atol=1e-6), f"{what}: output {k} values"


def _vs_module(ref, ep, args, what):
    """run_program (first, with ep's untouched state) against ep.module() (which then mutates ep.state_dict)."""
    mine = [a.clone() for a in args]
    with torch.no_grad():
        outputs, mutations = ref.run_program(ep, tuple(mine))
        module = ep.module()
        want = module(*args)
    want = want if isinstance(want, tuple) else (want,)
    _same(outputs, want, what)
    for fqn, value in mutations.items():
        assert torch.allclose(value.double(), module.get_buffer(fqn).double()), f"{what}: buffer {fqn}"
    for g, w in zip(mine, args, strict=True):
        assert torch.equal(g, w), f"{what}: a user input after the call"
    return mutations


def _guard(ref, ep, args, what):
    try:
        ref.check_inputs(ep, tuple(args))
    except ref.GuardError:
        return
    raise AssertionError(f"{what}: check_inputs accepted it")


# =================================================================================================
# Part export. Modelled on test_export.py: test_basic (one call of a plain function), buffers mutated in
# forward, user-input mutation, Dim(min, max) ranges and their failures, several outputs, lifted constants,
# keyword-argument operators; ep.module() is the oracle.
# =================================================================================================
class _Basic(nn.Module):
    def forward(self, x, y):
        return x.sin() + y.cos()


@case("export", "a plain function of two inputs (test_basic): outputs, no mutations")
def _check(ref):
    args = (torch.randn(3, 4), torch.randn(3, 4))
    ep = _export(_Basic(), args)
    assert _vs_module(ref, ep, args, "basic") == {}, "basic: a program that mutates nothing reports mutations"


class _Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("running", torch.zeros(4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.calls.add_(1)
        self.running.mul_(0.9).add_(x.mean(0) * 0.1)
        return self.lin(x) - self.running


@case("export", "buffers mutated in forward, an int64 counter among them: the new values in output order")
def _check(ref):
    torch.manual_seed(0)
    args = (torch.randn(5, 4),)
    ep = _export(_Counter(), args, ({0: Dim("b", min=3, max=10)},))
    mutations = _vs_module(ref, ep, args, "counter")
    order = [s.target for s in ep.graph_signature.output_specs if s.kind.name == "BUFFER_MUTATION"]
    assert list(mutations) == order, f"counter: mutations in {list(mutations)}, the output tuple has {order}"
    _guard(ref, ep, (torch.randn(2, 4),), "counter with a batch of 2 (min 3)")
    _guard(ref, ep, (torch.randn(11, 4),), "counter with a batch of 11 (max 10)")
    for bad in (torch.randn(2, 4), torch.randn(11, 4)):  # min 3 > 2: ep.module() checks both ends here
        try:
            ep.module()(bad)
        except AssertionError:
            continue
        raise AssertionError(f"ep.module() ran a batch of {bad.shape[0]} outside [3, 10]")


class _Inplace(nn.Module):
    def forward(self, x, y):
        x.add_(y)
        y.mul_(2)
        return x * y


@case("export", "two user inputs mutated in place (test_mutate_input style): written back to the caller's tensors")
def _check(ref):
    args = (torch.randn(2, 3), torch.randn(2, 3))
    ep = _export(_Inplace(), tuple(a.clone() for a in args))
    _vs_module(ref, ep, [a.clone() for a in args], "in place")


class _Ranges(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], 0).relu().sum(0, keepdim=True), x.shape[0] * y


@case("export", "Dim ranges on two inputs: ends accepted, every violation refused; ep.module() skips lower bounds <= 2")
def _check(ref):
    ep = _export(_Ranges(), (torch.randn(3, 4), torch.randn(2, 4)),
                 ({0: Dim("a", min=2, max=6)}, {0: Dim("c", min=1, max=5)}))
    for a, c in ((2, 1), (6, 5), (4, 3)):
        _vs_module(ref, ep, (torch.randn(a, 4), torch.randn(c, 4)), f"ranges at ({a}, {c})")
    for a, c in ((7, 2), (3, 6), (1, 2), (3, 0)):
        _guard(ref, ep, (torch.randn(a, 4), torch.randn(c, 4)), f"ranges at ({a}, {c})")
    _guard(ref, ep, (torch.randn(3, 5), torch.randn(2, 4)), "a static size changed")
    with torch.no_grad():  # the documented difference: ep.module() does not check lower bounds of 2 or less
        ep.module()(torch.randn(1, 4), torch.randn(2, 4))
        ep.module()(torch.randn(3, 4), torch.randn(0, 4))


class _Consts(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.arange(6.0).reshape(2, 3)
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        vals, idx = torch.max(x @ self.w + self.table, dim=-1)
        return vals, idx, torch.full_like(x, 2.0, dtype=torch.float64).sum()


@case("export", "a lifted constant, a multi-result operator (getitem), keyword arguments, int64 and float64 outputs")
def _check(ref):
    torch.manual_seed(1)
    args = (torch.randn(2, 3),)
    ep = _export(_Consts(), args)
    assert ep.graph_signature.inputs_to_lifted_tensor_constants, "the model should have a lifted constant"
    _vs_module(ref, ep, args, "constants")
    state = {**ep.state_dict, **ep.constants}
    state = {k: v + 1 for k, v in state.items()}
    with torch.no_grad():
        outputs, _ = ref.run_program(ep, args, state)
        want = torch.max(args[0] @ state["w"] + state["table"], dim=-1)
    assert torch.allclose(outputs[0], want.values) and torch.equal(outputs[1], want.indices), "constants with the caller's state"


class _Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        return self.bn(x).flatten(1).softmax(-1)


@case("export", "BatchNorm2d in training mode, dynamic batch: running statistics and the tracked-batch counter")
def _check(ref):
    torch.manual_seed(2)
    model = _Norm().train()
    ep = _export(model, (torch.randn(4, 3, 2, 2),), ({0: Dim("n", min=2, max=8)},))
    mutations = _vs_module(ref, ep, (torch.randn(5, 3, 2, 2),), "batchnorm")
    assert set(mutations) == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}, list(mutations)


# =================================================================================================
# Part checkpoint. Modelled on test_serialization.py: offsets and storage slices, empty storages, every dtype,
# byte-order marks and big-endian archives, weights_only refusals, paths vs file objects; torch.load is the
# oracle.
# =================================================================================================
def _path(data, name="f.pt"):
    path = os.path.join(tempfile.mkdtemp(), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _tree_equal(got, want, where="obj"):
    assert type(got) is type(want), f"{where}: {type(got).__name__} vs {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert (got.dtype, got.shape, got.stride(), got.storage_offset(), got.requires_grad) == (
            want.dtype, want.shape, want.stride(), want.storage_offset(), want.requires_grad), f"{where}: layout"
        assert torch.equal(got, want) or (got.is_floating_point() and torch.equal(got.isnan(), want.isnan())), f"{where}: values"
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys"
        for k in want:
            _tree_equal(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{where}: length"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _tree_equal(g, w, f"{where}[{k}]")
    else:
        assert got == want, f"{where}: {got!r} vs {want!r}"


def _vs_load(ref, obj, what):
    data = _saved(obj)
    got, index = ref.load_checkpoint(_path(data))
    _tree_equal(got, torch.load(io.BytesIO(data), weights_only=True), what)
    return got, index


@case("checkpoint", "storage offsets and slices (test_serialization_offset / storage slices): views keep their offsets")
def _check(ref):
    base = torch.arange(20.0)
    got, index = _vs_load(ref, [base[3:9], base[10:].view(2, 5), 7, base[::3]], "offsets")
    assert [e["offset"] for e in index] == [3, 10, 0], [e["offset"] for e in index]
    assert len({e["key"] for e in index}) == 1, "three views of one tensor should share one storage key"
    got[0][0] = -1.0
    assert got[3][1] == -1.0, "base[3] is shared by base[3:9] and base[::3] after loading"


@case("checkpoint", "empty storages and 0-d tensors (test_empty_storage style)")
def _check(ref):
    _vs_load(ref, {"empty": torch.zeros(0), "matrix": torch.ones(0, 5, dtype=torch.int32), "scalar": torch.tensor(2.5),
                   "flag": torch.tensor(True)}, "empty")


@case("checkpoint", "every storage dtype round-trips (test_serialization_dtypes style), NaN and infinities included")
def _check(ref):
    values = [torch.tensor([1.5, float("nan"), float("inf"), -0.0], dtype=d) for d in
              (torch.float64, torch.float32, torch.float16, torch.bfloat16)]
    values += [torch.tensor([-3, 0, 7], dtype=d) for d in (torch.int64, torch.int32, torch.int16, torch.int8)]
    values += [torch.tensor([0, 255], dtype=torch.uint8), torch.tensor([True, False])]
    _vs_load(ref, values, "dtypes")


@case("checkpoint", "a module's state_dict (an OrderedDict), tied weights sharing one storage")
def _check(ref):
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5))
    model[1].weight = model[0].weight  # tied, as language models tie input and output embeddings
    got, index = _vs_load(ref, model.state_dict(), "state_dict")
    assert isinstance(got, collections.OrderedDict), "a state_dict loads as an OrderedDict"
    assert got["0.weight"].untyped_storage().data_ptr() == got["1.weight"].untyped_storage().data_ptr(), "tied weights"


@case("checkpoint", "big-endian archives (test_serialization_load_bom_data style): values as written on a big-endian machine")
def _check(ref):
    from autograder.labs.lab11 import oracle
    obj = [torch.tensor([1.0, -2.5], dtype=torch.float64), torch.tensor([1, -2], dtype=torch.int32),
           torch.tensor([0.5], dtype=torch.bfloat16), torch.tensor([True])]
    data, _ = oracle.write_archive(obj, big=True)
    got, _ = ref.load_checkpoint(_path(data))
    _tree_equal(got, torch.load(io.BytesIO(data), weights_only=True), "big-endian")
    _tree_equal(got, obj, "big-endian vs the saved tensors")


@case("checkpoint", "a pickle that calls os.system or eval is refused (test_weights_only_assert), as torch.load refuses it")
def _check(ref):
    import builtins

    class Bad:
        def __init__(self, fn, arg):
            self.fn, self.arg = fn, arg

        def __reduce__(self):
            return (self.fn, (self.arg,))
    for fn, arg in ((os.system, "true"), (builtins.eval, "1")):
        data = _saved({"x": Bad(fn, arg)})
        try:
            ref.load_checkpoint(_path(data))
        except ref.UnsafeCheckpointError:
            pass
        else:
            raise AssertionError(f"{fn.__name__}: loaded")
        try:
            torch.load(io.BytesIO(data), weights_only=True)
        except Exception:  # noqa: BLE001 - torch refuses it too
            continue
        raise AssertionError(f"torch.load(weights_only=True) accepted {fn.__name__}")


@case("checkpoint", "globals torch.load's allow-list has and the lab's does not: Size, dtype, device, Parameter")
def _check(ref):
    for obj, name in ((torch.Size([1, 2]), "torch.Size"), (torch.int8, "torch.int8"), (torch.device("cpu"), "torch.device"),
                      (nn.Parameter(torch.ones(1)), "torch._utils._rebuild_parameter")):
        data = _saved({"x": obj})
        torch.load(io.BytesIO(data), weights_only=True)  # the library accepts it
        try:
            ref.load_checkpoint(_path(data))
        except ref.UnsafeCheckpointError as exc:
            assert name in str(exc), f"{name} not named in {exc}"
        else:
            raise AssertionError(f"{name}: loaded")


@case("checkpoint", "a file saved to a path keeps its folder name (the file's stem), not archive/")
def _check(ref):
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "weights_v2.pt")
    torch.save({"w": torch.ones(2, 2)}, path)
    import zipfile
    with zipfile.ZipFile(path) as z:
        assert any(n.startswith("weights_v2/") for n in z.namelist()), z.namelist()
    got, _ = ref.load_checkpoint(path)
    _tree_equal(got, torch.load(path, weights_only=True), "path")


# -- part loader ----------------------------------------------------------------------------------------------------
class _Items:
    """Sample i: {"x": a float tensor, "label": an int, "pair": (i, -i)}; `fail` raises, `die` exits the worker,
    `draw` adds a torch.rand draw and the worker info."""

    def __init__(self, ref, n, fail=(), die=(), draw=False):
        self.ref, self.n, self.fail, self.die, self.draw = ref, n, set(fail), set(die), draw

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.fail:
            raise KeyError(f"no sample {i}")
        if i in self.die:
            os._exit(7)
        item = {"x": torch.full((3,), float(i)), "label": i % 4, "pair": (i, -i)}
        if self.draw:
            info = self.ref.get_worker_info()
            item.update(noise=torch.rand(()), worker=info.id, seed=info.seed, pid=os.getpid())
        return item


def _same_batches(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} batches, DataLoader {len(want)}"
    for b, (g, w) in enumerate(zip(got, want, strict=True)):
        for key in ("x", "label"):
            assert g[key].dtype == w[key].dtype and torch.equal(g[key], w[key]), f"{what}, batch {b}: {key}"
        assert all(torch.equal(p, q) for p, q in zip(g["pair"], w["pair"], strict=True)), f"{what}, batch {b}: pair"


@case("loader", "the sampler's order with workers, shuffled and sequential (test_sequential_batch, test_shuffle_batch_workers)")
def _check(ref):
    from torch.utils.data import DataLoader, RandomSampler
    for workers in (1, 2, 3):
        for size in (1, 3, 5):
            sampler = RandomSampler(range(13), generator=torch.Generator().manual_seed(workers * 10 + size))
            again = RandomSampler(range(13), generator=torch.Generator().manual_seed(workers * 10 + size))
            loader = ref.Loader(_Items(ref, 13), size, sampler, num_workers=workers)
            oracle = DataLoader(_Items(ref, 13), batch_size=size, sampler=again)
            for epoch in range(2):
                _same_batches(list(loader), list(oracle), f"{workers} workers, batches of {size}, epoch {epoch}")
    _same_batches(list(ref.Loader(_Items(ref, 7), 2, range(7))), list(DataLoader(_Items(ref, 7), batch_size=2)), "sequential")


@case("loader", "drop_last, a custom list sampler with repeats, RandomSampler with replacement (test_drop_last, test_sampler)")
def _check(ref):
    from torch.utils.data import DataLoader, RandomSampler
    for drop in (False, True):
        for n, size in ((10, 3), (9, 3), (2, 4), (0, 2)):
            got = list(ref.Loader(_Items(ref, max(n, 1)), size, range(n), drop_last=drop))
            want = list(DataLoader(_Items(ref, max(n, 1)), batch_size=size, sampler=range(n), drop_last=drop))
            _same_batches(got, want, f"n={n}, batch_size={size}, drop_last={drop}")
    order = [5, 5, 0, 3, 9, 0, 1]
    _same_batches(list(ref.Loader(_Items(ref, 10), 3, order)), list(DataLoader(_Items(ref, 10), batch_size=3, sampler=order)),
                  "a list with repeats")
    rs = [RandomSampler(range(6), replacement=True, num_samples=11, generator=torch.Generator().manual_seed(4)) for _ in range(2)]
    _same_batches(list(ref.Loader(_Items(ref, 6), 4, rs[0])), list(DataLoader(_Items(ref, 6), batch_size=4, sampler=rs[1])),
                  "with replacement")


@case("loader", "default_collate of dict and tuple samples, ints to int64 (test_default_collate_dtype)")
def _check(ref):
    (batch,) = list(ref.Loader(_Items(ref, 4), 4, range(4)))
    assert set(batch) == {"x", "label", "pair"} and batch["label"].dtype == torch.int64, batch
    assert batch["x"].shape == (4, 3) and isinstance(batch["pair"], list) and batch["pair"][1].tolist() == [0, -1, -2, -3]


@case("loader", "an exception in a worker is raised in the main process in batch order (test_error_workers); "
                "the lab's WorkerError ends the epoch, DataLoader's iterator goes on")
def _check(ref):
    from torch.utils.data import DataLoader
    it = iter(ref.Loader(_Items(ref, 12, fail={5}), 2, range(12), num_workers=2))
    got = []
    try:
        for batch in it:
            got.append(batch)
    except ref.WorkerError as exc:
        assert (exc.index, exc.worker_id) == (5, 0) and "KeyError" in str(exc), (exc.index, exc.worker_id, str(exc))
    else:
        raise AssertionError("no WorkerError")
    assert len(got) == 2 and next(it, None) is None, (len(got), "the epoch ends at the error")
    theirs = iter(DataLoader(_Items(ref, 12, fail={5}), batch_size=2, num_workers=2))
    seen, errors = 0, 0
    while True:
        try:
            next(theirs)
            seen += 1
        except KeyError:
            errors += 1
        except StopIteration:
            break
    assert (seen, errors) == (5, 1), f"DataLoader (a fact of torch 2.13): {seen} batches and {errors} KeyError"


@case("loader", "a worker that dies is an error, not a hang (test_segfault); the lab delivers the batches before it first")
def _check(ref):
    import time
    it = iter(ref.Loader(_Items(ref, 8, die={2}), 2, range(8), num_workers=2))
    started = time.monotonic()
    first = next(it)
    try:
        next(it)
    except ref.WorkerError as exc:
        assert exc.index is None and exc.worker_id == 1, (exc.index, exc.worker_id)
    else:
        raise AssertionError("no WorkerError for a dead worker")
    assert first["label"].tolist() == [0, 1] and time.monotonic() - started < 30


@case("loader", "workers stop when the epoch ends and when iteration stops early (test_partial_workers)")
def _check(ref):
    def running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            return False
    it = iter(ref.Loader(_Items(ref, 12, draw=True), 2, range(12), num_workers=3))
    pids = {int(p) for _ in range(3) for p in next(it)["pid"]}
    assert len(pids) == 3 and all(map(running, pids)) and os.getpid() not in pids, pids
    it.close()
    assert not any(map(running, pids)), "close() leaves workers running"
    it = iter(ref.Loader(_Items(ref, 6, draw=True), 2, range(6), num_workers=2))
    pids = {int(p) for batch in it for p in batch["pid"]}
    assert len(pids) == 2 and not any(map(running, pids)), "workers still running after StopIteration"


@case("loader", "random draws per batch (test_worker_seed: workers draw different numbers); the lab's seeds do not depend "
                "on num_workers, DataLoader's do")
def _check(ref):
    from torch.utils.data import DataLoader
    draws = {w: [b["noise"].tolist() for b in ref.Loader(_Items(ref, 8, draw=True), 2, range(8), num_workers=w, seed=9)]
             for w in (1, 2, 3)}
    assert draws[1] == draws[2] == draws[3], draws
    assert len({x for batch in draws[1] for x in batch}) == 8, "every sample draws another number"
    theirs = {w: [b.tolist() for b in DataLoader(_Noise(), batch_size=2, num_workers=w,
                                                  generator=torch.Generator().manual_seed(9))] for w in (1, 2)}
    assert theirs[1][0] == theirs[2][0] and theirs[1][1] != theirs[2][1], \
        f"DataLoader (a fact of torch 2.13): worker 0 draws batch 0 alike, batch 1 changes with num_workers: {theirs}"


class _Noise:
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.rand(())
# -- part cpp: modelled on PyTorch's test/test_custom_ops.py (opcheck over sample inputs, fake-tensor metadata
# against the real kernel's, autograd registration), test/test_cpp_extensions_jit.py (load_inline of a
# TORCH_LIBRARY source, is_python_module=False) and TensorFlow's divide_no_nan tests (zero where the denominator
# is zero, its gradient there, broadcasting). The oracle is torch: where(b == 0, fill, a / b) and its derivative.
@functools.cache
def _safe_div():
    ref = SUITE.reference()
    from autograder.labs.lab11 import oracle_cpp
    torch.ops.load_library(oracle_cpp.reference_library())   # the graders' cache entry of the reference source
    ref.register_python_parts(ref.fresh_library())
    return torch.ops.lab11_cpp.safe_div


def _want(a, b, fill=0.0):
    a2, b2 = torch.broadcast_tensors(a, b)
    zero = b2 == 0
    return torch.where(zero, torch.full_like(a2, fill), a2 / torch.where(zero, torch.ones_like(b2), b2))


@case("cpp", "divide_no_nan style: zero where the denominator is zero, a / b elsewhere, broadcasting")
def _check(ref):
    op = _safe_div()
    for dtype in (torch.float32, torch.float64):
        a = torch.tensor([[1.0, 2.0, 0.0], [-3.0, float("inf"), float("nan")]], dtype=dtype)
        b = torch.tensor([0.0, 4.0, -0.0], dtype=dtype)
        got = op(a, b)
        assert torch.equal(got, _want(a, b)), got
        assert torch.equal(got[:, 1], torch.div(a, b)[:, 1]), "a / b where b != 0"


@case("cpp", "divide_no_nan style: the gradient where the denominator is zero is zero, not NaN")
def _check(ref):
    op = _safe_div()
    a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.0, 2.0, -1.0], dtype=torch.float64, requires_grad=True)
    ga, gb = torch.autograd.grad(op(a, b).sum(), [a, b])
    assert torch.equal(ga, torch.tensor([0.0, 0.5, -1.0], dtype=torch.float64)), ga
    assert torch.equal(gb, torch.tensor([0.0, -0.5, -3.0], dtype=torch.float64)), gb
    a2, b2 = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    torch.where(b2 == 0, 0.0, a2 / b2).sum().backward()
    assert torch.isnan(a2.grad[0]) and torch.isnan(b2.grad[0]), "autograd through torch.where gives NaN there"


@case("cpp", "test_custom_ops style: opcheck over sample inputs (schema, autograd registration, fake tensor, aot dispatch)")
def _check(ref):
    op = _safe_div()
    samples = [((torch.randn(3, 4, dtype=torch.float64, requires_grad=True), torch.tensor([1.0, 0.0, 2.0, -1.0], dtype=torch.float64)), {}),
               ((torch.randn(2, 1), torch.randn(1, 3, requires_grad=True)), {"fill": 2.5}),
               ((torch.randn(0, 3), torch.randn(3)), {}),
               ((torch.randn(4, 3).t(), torch.zeros(())), {"fill": -1.0})]
    for args, kwargs in samples:
        report = torch.library.opcheck(op, args, kwargs)
        assert all(v == "SUCCESS" for v in report.values()), report


@case("cpp", "test_custom_ops style: the fake kernel's metadata equals the real kernel's (shape, strides, dtype)")
def _check(ref):
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = _safe_div()
    for a, b in ((torch.randn(4, 3).t(), torch.randn(4)), (torch.randn(2, 1, 3, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)),
                 (torch.randn(()), torch.randn(0)), (torch.randn(6)[::2], torch.randn(1))):
        real = op(a, b)
        with FakeTensorMode() as mode:
            fake = op(mode.from_tensor(a), mode.from_tensor(b))
        assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype), (fake, real)
        assert real.is_contiguous() and torch.equal(real, _want(a, b))


@case("cpp", "test_custom_ops style: errors for mixed, integer and half dtypes and shapes that do not broadcast (torch.div promotes)")
def _check(ref):
    op = _safe_div()
    assert torch.div(torch.ones(2), torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    for a, b in ((torch.ones(2), torch.ones(2, dtype=torch.float64)), (torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64)),
                 (torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.float16)), (torch.ones(2), torch.ones(3))):
        try:
            op(a, b)
        except RuntimeError:
            continue
        raise AssertionError(f"{a.dtype} {tuple(a.shape)} / {b.dtype} {tuple(b.shape)} returned")


@case("cpp", "test_cpp_extensions_jit style: the keyword-only argument and its default, torch.compile(fullgraph=True)")
def _check(ref):
    op = _safe_div()
    a, b = torch.tensor([2.0, 3.0]), torch.tensor([0.0, 3.0])
    assert torch.equal(op(a, b), torch.tensor([0.0, 1.0])) and torch.equal(op(b=b, a=a, fill=5.0), torch.tensor([5.0, 1.0]))
    try:
        op(a, b, 5.0)
    except RuntimeError:
        pass
    else:
        raise AssertionError("fill passed positionally was accepted")
    f = torch.compile(lambda x, y: op(x.sin(), y, fill=1.0).sum(), fullgraph=True, backend="aot_eager", dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, 2, requires_grad=True)
        y = torch.tensor([0.0, 2.0])
        out = f(x, y)
        out.backward()
        assert torch.allclose(out, _want(x.sin(), y, 1.0).sum()), out
        assert torch.allclose(x.grad, torch.tensor([0.0, 0.5]) * x.cos()), x.grad
# -- part onnx -------------------------------------------------------------------------------------------------
def _onnx(data, *arrays):
    import onnxruntime
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session, session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), arrays, strict=True)})


def _onnx_export(model, args, table=None, dynamic=True):
    import logging
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    batch = torch.export.Dim("batch", min=1, max=1024)
    return torch.onnx.export(model, args, dynamo=True, verbose=False, custom_translation_table=table,
                             dynamic_shapes=tuple({0: batch} for _ in args) if dynamic else None)


class _Twice(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.inner, self.outer = nn.Linear(4, 6, dtype=dtype), nn.Linear(6, 2, dtype=dtype)

    def forward(self, x):
        h = torch.ops.lab11.log_cosh(self.inner(x), 0.25)
        return self.outer(torch.ops.lab11.log_cosh(h, 0.25) - torch.ops.lab11.log_cosh(h, 5.0))


@case("onnx", "a custom operator without a translation does not export; with export_onnx's table it runs in onnxruntime")
def _check(ref):
    from torch.onnx._internal.exporter._errors import ConversionError
    torch.manual_seed(3)
    model = _Twice(torch.float32).eval()
    try:
        _onnx_export(model, (torch.randn(3, 4),))
    except ConversionError:
        pass
    else:
        raise AssertionError("torch.onnx.export translated lab11::log_cosh without a table")
    data = ref.export_onnx(model, (torch.randn(3, 4),))
    x = torch.randn(9, 4) * 40
    _, got = _onnx(data, x)
    with torch.no_grad():
        want = model(x)
    assert torch.allclose(torch.from_numpy(got[0]), want, rtol=1e-4, atol=1e-4), "float32 values"


@case("onnx", "float64: export_onnx is exact where torch's own translation of x / 0.3 rounds 0.3 to float32")
def _check(ref):
    torch.manual_seed(4)
    model = _Twice(torch.float64).eval()
    x = torch.randn(5, 4, dtype=torch.float64) * 100
    _, got = _onnx(ref.export_onnx(model, (x[:2],)), x)
    with torch.no_grad():
        want = model(x)
    assert torch.allclose(torch.from_numpy(got[0]), want, rtol=1e-10, atol=1e-10), "float64 values"

    class Div(nn.Module):
        def forward(self, x):
            return x / 0.3

    _, got = _onnx(_onnx_export(Div(), (x[:2],)).model_proto.SerializeToString(), x)
    err = (torch.from_numpy(got[0]) - x / 0.3).abs().max().item()
    assert err > 1e-9, f"torch's translation of x / 0.3 in float64 is now exact ({err}): the notebook's claim changed"


@case("onnx", "torch.logaddexp is finite in eager and overflows in torch's ONNX translation; log_cosh_onnx does not")
def _check(ref):
    class Lse(nn.Module):
        def forward(self, x):
            return torch.logaddexp(x, -x)

    class One(nn.Module):
        def forward(self, x):
            return torch.ops.lab11.log_cosh(x, 1.0)

    x = torch.tensor([[1e3, -1e3, 0.5]])
    _, got = _onnx(_onnx_export(Lse(), (x.repeat(2, 1),)).model_proto.SerializeToString(), x)
    assert torch.isfinite(torch.logaddexp(x, -x)).all() and not torch.isfinite(torch.from_numpy(got[0])).all(), \
        "torch_lib's logaddexp no longer overflows: the notebook's claim changed"
    program = _onnx_export(One(), (x.repeat(2, 1),), {torch.ops.lab11.log_cosh.default: ref.log_cosh_onnx})
    _, got = _onnx(program.model_proto.SerializeToString(), x)
    assert torch.allclose(torch.from_numpy(got[0]), torch.ops.lab11.log_cosh(x, 1.0), rtol=1e-6), "log_cosh at +-1e3"


@case("onnx", "two inputs, a 3-d one, two outputs: one shared dim_param 'batch', static other dims, any batch")
def _check(ref):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 2), nn.Linear(5, 2)

        def forward(self, x, y):
            return torch.ops.lab11.log_cosh(self.a(x), 0.5), torch.ops.lab11.log_cosh(self.b(y), 2.0).sum(1)

    import onnx
    torch.manual_seed(5)
    model = Two().eval()
    data = ref.export_onnx(model, (torch.randn(2, 3), torch.randn(2, 4, 5)))
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in onnx.load_from_string(data).graph.input]
    assert dims == [["batch", 3], ["batch", 4, 5]], dims
    for n in (1, 13):
        x, y = torch.randn(n, 3) * 50, torch.randn(n, 4, 5)
        _, got = _onnx(data, x, y)
        with torch.no_grad():
            want = model(x, y)
        for g, w in zip(got, want, strict=True):
            assert torch.allclose(torch.from_numpy(g), w, rtol=1e-4, atol=1e-4), f"batch {n}"


def run() -> int:
    """Every case against the reference; raises AssertionError listing every disagreement."""
    return SUITE.run()


if __name__ == "__main__":
    print(run(), "peer cases agree")
