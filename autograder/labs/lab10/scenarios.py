# IPT-CANARY lab10 scenarios.py: hidden grading text, never shown to learners
"""lab10 scenarios: the rank programs of each part, run on the student side (P1) with the learner's
module `sub`, and by P0's referee rank (roles.py) with P0's own implementation (oracle.py).

`world(sub, port, world, seat, part, spec, arrays, timeout, group)` forks one process per learner rank
(every rank but `seat`, where the referee sits; seat None: all ranks are the learner's). Each joins the
gloo group through the TCPStore the referee serves on 127.0.0.1:port (or a FileStore in /tmp), runs
`PROGRAMS[part](sub, spec, arrays[rank], group)` and hands back the values it produced, as numpy.

Trust: a program builds the model and the data from P0's spec and arrays, calls the implementation and
returns what it produced. P0 compares those values, and what its referee rank saw, with its own oracle;
nothing here reports how a value was computed. This file imports nothing of the course (P1 gets it as
source text).
"""
import datetime
import os
import pickle
import select
import tempfile
import time

import numpy as np

STORE_TIMEOUT = 30.0   # the rendezvous; gloo's own operations get `timeout`


def ready(sub):
    return True


def _np(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy().copy()
    if isinstance(value, (list, tuple)):
        return [_np(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(type(value).__name__)


def _t(array):
    import torch
    return torch.from_numpy(np.array(array, copy=True))


def _error(exc):
    return {"error": type(exc).__name__[:80], "message": str(exc)[:200]}


# ---------------------------------------------------------------- part ddp
def build_net(spec, arrays, group=None, probe=True):
    """The DDP model: square-or-chained Linear blocks with tanh between, run in spec["order"], an output
    scale buffer, and optionally a `spare` Linear that forward never uses, registered first or last.
    spec["probe"]: before the last registered block, a layer whose backward makes a collective of its own (as a
    tensor-parallel layer inside DDP would), so that a bucket ready before it must have been launched
    before it (probe=False: without it, for P0's single process)."""
    import torch
    from torch import nn

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            import torch.distributed as dist
            dist.all_reduce(torch.ones(1), group=group)
            return grad

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            if spec.get("spare") == "first":
                self.spare = nn.Linear(2, 2)
            self.blocks = nn.ModuleList(nn.Linear(i, o, bias=b) for i, o, b in spec["blocks"])
            if spec.get("spare") == "last":
                self.spare = nn.Linear(2, 2)
            self.register_buffer("scale", torch.ones(spec["blocks"][spec["order"][-1]][1]))

        def forward(self, x):
            for n, k in enumerate(spec["order"]):
                if probe and spec.get("probe") and k == len(spec["blocks"]) - 1:   # the block of the last parameter
                    x = Probe.apply(x)
                x = self.blocks[k](x)
                if n < len(spec["order"]) - 1:
                    x = torch.tanh(x)
            return x * self.scale

    net = Net()
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(_t(arrays[f"p{i}"]))
        net.scale.copy_(_t(arrays["scale"]))
    for i, p in enumerate(net.parameters()):
        p.requires_grad_(i not in spec["frozen"])
    return net


def ddp_program(impl, spec, arrays, group):
    import torch
    net = build_net(spec, arrays, group)
    model = impl.BucketedDDP(net, group=group, bucket_cap=spec["cap"], first_bucket_cap=spec["first_cap"])
    out = {"buckets": _np([list(b) for b in model.buckets])}
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.SGD(trainable, lr=spec["lr"])
    try:   # an exception inside no_sync must not leave the model in no_sync
        with model.no_sync():
            raise KeyError("raised inside no_sync by the graders")
    except KeyError:
        pass
    for s, micro in enumerate(spec["steps"]):
        opt.zero_grad()
        rows = sum(micro)
        for b in range(len(micro)):
            x, y = _t(arrays[f"x{s}_{b}"]), _t(arrays[f"y{s}_{b}"])
            x.requires_grad_(bool(spec.get("probe")))   # the probe's backward runs even when its block comes first
            if b < len(micro) - 1:
                with model.no_sync():
                    if b == 0:
                        with model.no_sync():   # a nested no_sync: communication resumes at the outermost exit
                            pass
                    ((model(x) - y) ** 2).sum().div(rows).backward()
            else:
                ((model(x) - y) ** 2).sum().div(rows).backward()
        opt.step()
    out["grads"] = [_np(p.grad) if p.grad is not None else None for p in trainable]
    out["params"] = [_np(p) for p in net.parameters()]
    out["scale"] = _np(net.scale)
    return out


def ddp_dtypes_program(impl, spec, arrays, group):
    """Trainable parameters of two dtypes: ValueError; a frozen parameter of another dtype: accepted."""
    from torch import nn
    out = {}
    for key, frozen in (("mixed", False), ("frozen_other", True)):
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).double().requires_grad_(not frozen))
        try:
            impl.BucketedDDP(net, group=group)
            out[key] = "accepted"
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            out[key] = type(exc).__name__
    return out


# ---------------------------------------------------------------- part zero
def zero_program(impl, spec, arrays, group):
    params = [_t(arrays[f"init{i}"]) for i in range(len(spec["shapes"]))]
    opt = impl.ZeroAdamW(params, group=group, lr=spec["lr"], betas=tuple(spec["betas"]), eps=spec["eps"],
                         weight_decay=spec["wd"])
    missing = {tuple(x) for x in spec["none"]}
    for s in range(spec["steps"]):
        for i, p in enumerate(params):
            p.grad = None if (s, i) in missing else _t(arrays[f"g{s}_{i}"])
        opt.step()
    state = opt.state_shard()
    opt.zero_grad()
    return {"params": [_np(p) for p in params], "state": _np(list(state)) if isinstance(state, (list, tuple)) else _np(state),
            "cleared": all(p.grad is None for p in params)}


# ---------------------------------------------------------------- part fsdp
def fsdp_program(impl, spec, arrays, group):
    import torch
    given = [(_t(arrays[f"w{k}"]), _t(arrays[f"b{k}"]) if b else None) for k, (i, o, b) in enumerate(spec["layers"])]
    layers = [impl.ShardedLinear(w, b, group) for w, b in given]
    out = {"init": [_np(layer.shard) for layer in layers]}
    opt = torch.optim.SGD([layer.shard for layer in layers], lr=spec["lr"])
    losses = []
    for t in range(spec["steps"]):
        opt.zero_grad()
        h = _t(arrays[f"x{t}"])
        for k, layer in enumerate(layers):
            h = layer(h)
            if k < len(layers) - 1:
                h = torch.tanh(h)
        loss = ((h - _t(arrays[f"y{t}"])) ** 2).mean()
        loss.backward()
        losses.append(float(loss))
        opt.step()
    out["shards"] = [_np(layer.shard) for layer in layers]
    out["losses"] = losses
    out["given"] = [[_np(w), _np(b)] for w, b in given]   # training the shards must leave the full tensors alone
    return out


# ---------------------------------------------------------------- part tp
def tp_program(impl, spec, arrays, group):
    import torch
    import torch.nn.functional as F
    out = {}
    # f and g on their own: g sums, its backward passes the gradient; f copies, its backward sums
    a = _t(arrays["a"]).requires_grad_(True)
    summed = impl.reduce_from_tp(a, group)
    (summed * _t(arrays["ca"])).sum().backward()
    b = _t(arrays["b"]).requires_grad_(True)
    copied = impl.copy_to_tp(b, group)
    out["copied_is_input"] = copied is b
    (copied * _t(arrays["cb"])).sum().backward()
    out.update(g=_np(summed), a=_np(a), a_grad=_np(a.grad), f=_np(copied), b_grad=_np(b.grad))
    # a split that does not divide: ValueError before any communication
    try:
        impl.ColumnParallelLinear(_t(arrays["bad_w"]), _t(arrays["bad_b"]), group)
        out["bad_column"] = "returned"
    except ValueError:
        out["bad_column"] = "ValueError"
    try:
        impl.RowParallelLinear(_t(arrays["bad_w"]).T.contiguous(), _t(arrays["bad_b"])[:arrays["bad_w"].shape[1]], group)
        out["bad_row"] = "returned"
    except ValueError:
        out["bad_row"] = "ValueError"
    # the MLP block
    w1, b1, w2, b2 = (_t(arrays[k]) for k in ("w1", "b1", "w2", "b2"))
    x = _t(arrays["x"])
    if spec.get("transposed"):
        x = _t(np.ascontiguousarray(np.swapaxes(arrays["x"], -1, -2))).transpose(-1, -2)
    x.requires_grad_(True)
    up, down = impl.ColumnParallelLinear(w1, b1, group), impl.RowParallelLinear(w2, b2, group)
    y = down(F.gelu(up(x)))
    (y * _t(arrays["gy"])).sum().backward()
    out.update(y=_np(y), x_grad=_np(x.grad), up_w=_np(up.weight), up_b=_np(up.bias), up_w_grad=_np(up.weight.grad),
               up_b_grad=_np(up.bias.grad), down_w=_np(down.weight), down_b=_np(down.bias),
               down_w_grad=_np(down.weight.grad), down_b_grad=_np(down.bias.grad))
    with torch.no_grad():   # training the slices must leave the full tensors alone
        up.weight.add_(1.0)
        down.weight.add_(1.0)
        down.bias.add_(1.0)
    out.update(w1_after=_np(w1), w2_after=_np(w2), b2_after=_np(b2))
    return out


# ---------------------------------------------------------------- part pipeline
def build_stage(spec, arrays, s):
    from torch import nn
    layers = []
    if s == 0 and spec.get("vocab"):   # a first stage that embeds integer token ids
        embed = nn.Embedding(spec["vocab"], spec["stages"][0][0][0])
        embed.weight.data.copy_(_t(arrays["emb"]))
        layers.append(embed)
    for k, (i, o) in enumerate(spec["stages"][s]):
        linear = nn.Linear(i, o)
        linear.weight.data.copy_(_t(arrays[f"w{s}_{k}"]))
        linear.bias.data.copy_(_t(arrays[f"b{s}_{k}"]))
        layers.append(linear)
        if not (s == len(spec["stages"]) - 1 and k == len(spec["stages"][s]) - 1):
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def pipeline_program(impl, spec, arrays, group):
    import torch.distributed as dist
    import torch.nn.functional as F
    s = dist.get_rank(group)
    stage = build_stage(spec, arrays, s)
    m = spec["m"]
    last = s == len(spec["stages"]) - 1
    inputs = list(_t(arrays["x"]).chunk(m)) if s == 0 else None
    targets = list(_t(arrays["y"]).chunk(m)) if last else None
    in_shape = tuple(spec["in_shapes"][s])
    actions = [tuple(a) for a in spec["schedule"][s]]
    losses = impl.run_stage(stage, actions, inputs, targets, F.mse_loss if last else None, in_shape, group)
    losses = [float(v) for v in losses] if isinstance(losses, (list, tuple)) else _np(losses)
    return {"losses": losses, "grads": [_np(p.grad) if p.grad is not None else None for p in stage.parameters()]}


PROGRAMS = {"ddp": ddp_program, "ddp_dtypes": ddp_dtypes_program, "zero": zero_program, "fsdp": fsdp_program, "tp": tp_program,
            "pipeline": pipeline_program}


# ---------------------------------------------------------------- the learner's world
def _rank(sub, rank, world, port, folder, part, spec, arrays, timeout, group_ranks):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    delta, patience = datetime.timedelta(seconds=timeout), datetime.timedelta(seconds=STORE_TIMEOUT)
    if port is not None:
        store = dist.TCPStore("127.0.0.1", port, world, False, timeout=patience)
    else:
        store = dist.FileStore(os.path.join(folder, "store"), world)
        store.set_timeout(patience)
    dist.init_process_group("gloo", store=dist.PrefixStore("pg", store), rank=rank, world_size=world, timeout=delta)
    group = dist.new_group(group_ranks) if group_ranks else None    # every rank calls it, members or not
    failed = True
    try:
        if group_ranks and rank not in group_ranks:
            failed = False
            return {}
        try:
            answer = PROGRAMS[part](sub, spec, arrays, group)
            failed = False
            return answer
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            return _error(exc)
    finally:
        store.add("done", 1)   # leave together (the referee too): a rank that leaves early closes links its peers still read
        deadline = time.monotonic() + (0 if failed else STORE_TIMEOUT)   # a failed rank's world is lost anyway: no waiting
        try:
            while int(store.add("done", 0)) < world and time.monotonic() < deadline:
                time.sleep(0.005)
        except Exception:  # noqa: BLE001 - the referee serving the store left once everyone was done
            pass
        if not failed:   # a failed rank's world is lost, and tearing its group down where a peer has died (gloo
            dist.destroy_process_group()   # aborts a rank on a collective mismatch) spins at full CPU for 5 s


def world(sub, port, world, seat, part, spec, arrays, timeout, group=None):
    """arrays: {str(rank): {name: array}} for every learner rank. Returns {str(rank): values or error}."""
    folder = tempfile.mkdtemp(prefix="world-")
    return _forked({key: (lambda key=key: _rank(sub, int(key), world, port, folder, part, spec, arrays[key], timeout, group))
                    for key in arrays}, STORE_TIMEOUT + 4 * timeout + 5)


def untouched(sub):
    """Which parts' first call into the learner's code is still the release's stub: each called once, outside any
    world (no process group), in a forked child so that nothing it does stays in this process. {part: the
    exception (type and message), or None when it returned}. P0 skips the worlds of a part whose first call
    raised NotImplementedError here (they would fail the same way), so a false answer only loses points."""
    import torch
    from torch import nn
    calls = {"ddp": lambda: sub.BucketedDDP(nn.Linear(2, 2), group=None, bucket_cap=1 << 20, first_bucket_cap=None),
             "zero": lambda: sub.ZeroAdamW([torch.zeros(2, requires_grad=True)], group=None),
             "fsdp": lambda: sub.ShardedLinear(torch.zeros(2, 2), torch.zeros(2), None),
             "tp": lambda: sub.reduce_from_tp(torch.zeros(2, requires_grad=True), None),
             "pipeline": lambda: sub.run_stage(nn.Linear(2, 2), [], [torch.zeros(1, 2)], None, None, (1, 2), None)}

    def probe():
        results = _each([(call,) for call in calls.values()], lambda call: (call(), None)[1])
        return {name: (r if "error" in r else None) for name, r in zip(calls, results, strict=True)}
    answer = _forked({"probe": probe}, 10).get("probe")
    return answer if isinstance(answer, dict) and "error" not in answer else {}


def _forked(jobs, seconds):
    """Run each job (key -> function) in a forked child, at most `seconds` in all: {key: what it returned, or
    an error dict}."""
    children = {}
    for key, job in jobs.items():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                answer = job()
            except BaseException as exc:  # noqa: BLE001
                answer = _error(exc)
            with os.fdopen(write, "wb") as f:
                f.write(pickle.dumps(answer))
            os._exit(0)
        os.close(write)
        children[read] = (key, pid, [])
    deadline = time.monotonic() + seconds
    open_fds = set(children)
    while open_fds and time.monotonic() < deadline:
        for fd in select.select(list(open_fds), [], [], 0.05)[0]:
            chunk = os.read(fd, 1 << 20)
            children[fd][2].append(chunk) if chunk else open_fds.discard(fd)
    replies = {}
    for fd, (key, pid, chunks) in children.items():
        if fd in open_fds:
            os.kill(pid, 9)
        os.close(fd)
        os.waitpid(pid, 0)
        try:
            replies[key] = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001
            replies[key] = {"error": "Timeout" if fd in open_fds else "Crash",
                            "message": "the rank did not finish" if fd in open_fds else "the rank died"}
    return replies


# ---------------------------------------------------------------- pure functions
def _each(cases, fn):
    results = []
    for case in cases:
        try:
            results.append({"value": _np(fn(*case))})
        except Exception as exc:  # noqa: BLE001 - the learner's error is a value here
            results.append(_error(exc))
    return results


def buckets(sub, cases):
    """[(sizes, cap, first_cap)] -> the plans."""
    return _each(cases, lambda sizes, cap, first: [list(b) for b in sub.plan_buckets(list(sizes), cap, first)])


def bounds(sub, cases):
    return _each(cases, lambda n, w: list(sub.shard_bounds(n, w)))


def schedules(sub, cases):
    """[(kind, m, p)] -> per stage, the action list as [kind, i] pairs."""
    def one(kind, m, p):
        fn = sub.gpipe if kind == "gpipe" else sub.one_f_one_b
        return [[list(a) for a in stage] for stage in fn(m, p)]
    return _each(cases, one)
