"""lab06 scenarios: run on the student side (P1), against the learner's module `sub`.

torch is allowed in this lab. The trusted side (P0) imports this module too, for the model builders
and `describe` (the same description of a graph on both sides), so nothing here has side effects at
import. Nothing here enforces anything: the learner's code runs first in this process and could undo it.
Where the lab forbids the ready-made fx pass, the models carry cases on which that pass and the lab's
rules disagree (harness modules below), and P0 compares values with its own oracle.
"""
# IPT-CANARY lab06 scenarios.py: hidden grading text, never shown to learners
import math
import operator

import numpy as np
import torch
import torch.fx
import torch.nn.functional as F
from torch import nn


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:300]}


def _np(t):
    return t.detach().numpy().copy()


def _seed(n):
    """torch.manual_seed(n) for the CPU generator, the only one here: torch.manual_seed also queues a seeding
    of CUDA for later and records the Python stack with it (0.7 ms in a grader's deep stack), CUDA or not."""
    torch.random.default_generator.manual_seed(int(n))


def _flat(out):
    """The tensors of a (nested) result as numpy arrays, in a deterministic order."""
    if isinstance(out, torch.Tensor):
        return [_np(out)]
    if isinstance(out, (tuple, list)):
        return [a for x in out for a in _flat(x)]
    if isinstance(out, dict):
        return [a for k in sorted(out) for a in _flat(out[k])]
    return []


# -- describing a graph (real fx or the learner's) as plain data ------------------------------------
def target_str(t):
    if isinstance(t, str):
        return t
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    mod = getattr(t, "__module__", None) or ""
    mod = "operator" if mod == "_operator" else mod
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or repr(t)
    return f"{mod}.{name}" if mod else name


def _arg(a, index):
    if type(a).__name__ == "Node" and hasattr(a, "op") and hasattr(a, "target"):
        return {"node": index.get(id(a), -1)}
    if isinstance(a, tuple):
        return {"tuple": [_arg(x, index) for x in a]}
    if isinstance(a, list):
        return [_arg(x, index) for x in a]
    if isinstance(a, dict):
        return {"dict": {str(k): _arg(v, index) for k, v in a.items()}}
    if isinstance(a, slice):
        return {"slice": [_arg(a.start, index), _arg(a.stop, index), _arg(a.step, index)]}
    if a is Ellipsis:
        return {"ellipsis": True}
    if a is None or isinstance(a, (bool, int, float, str)):
        return a
    if isinstance(a, torch.dtype):
        return {"dtype": str(a)}
    return {"object": type(a).__name__}


def describe(nodes):
    nodes = list(nodes)
    index = {id(n): i for i, n in enumerate(nodes)}
    return [{"op": str(n.op), "target": target_str(n.target), "args": _arg(tuple(n.args), index),
             "kwargs": _arg(dict(n.kwargs), index)} for n in nodes]


# -- models -----------------------------------------------------------------------------------------
def _randomize_bn(model, seed):
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)) and m.track_running_stats:
                m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_var[0] = 1e-3   # a nearly dead channel, as trained nets have: there eps matters
                if m.affine:
                    m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                    m.bias.copy_(torch.rand(m.num_features, generator=g) - 0.5)
    return model


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=20, dim=16, seq=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        self.dim = dim

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        qkv = self.qkv(self.ln1(x))
        q, k, v = qkv[..., :self.dim], qkv[..., self.dim:2 * self.dim], qkv[..., 2 * self.dim:]
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dim), dim=-1)
        x = x + self.proj(att @ v)
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


class Branchy(nn.Module):
    """Two branches, reflected operators, **, /, //-free arithmetic, cat, negation."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 5), nn.Linear(6, 5)
        self.scale = nn.Parameter(torch.rand(5) + 0.5)

    def forward(self, x, y):
        left = torch.tanh(self.a(x)) * self.scale
        right = 1.5 - self.b(y) / 2
        both = torch.cat([left, -right, left ** 2], dim=1)
        return 2 * both + (left @ right.transpose(0, 1)).sum(dim=1, keepdim=True)


class Twice(nn.Module):
    """The same Linear and ReLU modules called at several places."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)
        self.act = nn.ReLU()
        self.norm = nn.LayerNorm(5)

    def forward(self, x):
        h = self.act(self.lin(x))
        h = self.act(self.lin(self.norm(h)))
        return self.lin(h) + h


class Tied(nn.Module):
    """A parameter shared by two modules (tied embedding/head), read directly, and read twice."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 8)
        self.head = nn.Linear(8, 12, bias=False)
        self.head.weight = self.emb.weight
        self.gain = nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, tokens):
        h = self.emb(tokens) * self.gain
        h = h + self.gain
        return F.linear(h, self.head.weight), self.head(h)


class KwargsModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        p = F.softmax(self.lin(x), dim=0)
        s = torch.sum(p, dim=1, keepdim=True)
        q = F.layer_norm(x, (8,), eps=1e-3)
        r = x.transpose(dim0=0, dim1=1)
        t = torch.clamp(q, min=-0.5, max=0.75)
        return F.dropout(t + s, p=0.3, training=False), r.mean(dim=-1)


class Constants(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        a = x * 0.1234567891234 + 3
        b = a.to(torch.float64).clamp(min=-1e-7)
        c = b[..., None, 1:3].float()
        d = self.lin(x)[:, ::2]
        e = torch.where(x > 0.25, x, torch.zeros_like(x))
        f = x.clamp(min=float("-inf"), max=float("inf"))   # infinities are spelled in the generated code
        g = f.to(device=torch.device("cpu")) + x.new_zeros(4, device=torch.device("cpu"))  # a device argument
        return {"c": c, "d": d - 1e-9, "e": (e / 7, None, "tag"), "g": g}


class Inner(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.register_buffer("shift", torch.linspace(-1, 1, dim))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.shift


class Nested(nn.Module):
    """Non-leaf modules inside ModuleList / ModuleDict / Sequential, buffers, BatchNorm1d."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Inner(6), nn.Sequential(Inner(6), nn.Tanh())])
        self.heads = nn.ModuleDict({"mean": nn.Linear(6, 2), "logvar": nn.Linear(6, 2)})
        self.norm = nn.BatchNorm1d(6)
        self.register_buffer("scale", torch.rand(6) + 0.5)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        x = self.norm(x) * self.scale
        return self.heads["mean"](x), self.heads["logvar"](x).exp()


class Methods(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        h = self.conv(x).relu()
        n = h.size(0)
        flat = h.view(n, 4, -1).permute(0, 2, 1).contiguous()
        m = flat.softmax(-1).reshape(n, -1)
        return m.unsqueeze(1).transpose(1, 2)[:, :10], flat.mean(dim=1)


class Defaults(nn.Module):
    """Inputs with default values: torch.fx keeps each default as its placeholder's argument, and the
    generated forward takes them as defaults (the model is called with x only)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, scale=0.5, shift=-1.25, note=None):
        return self.lin(x) * scale + shift


PROGRAM_OPS = ["add", "sub", "mul", "rsub", "rmul", "neg", "relu", "tanh", "sigmoid", "softmax", "cat_slice",
               "matmul", "linear", "param", "div", "getitem", "eq", "ne", "floordiv", "mod", "pow", "rdiv", "lt_reflected",
               "shape", "T", "kw_method", "sum_kw", "where", "pos"]
PROBE_OPS = [op for op in PROGRAM_OPS if op not in ("linear", "param")]


class Program(nn.Module):
    """A generated straight-line program over values of shape (4, 6)."""

    def __init__(self, program):
        super().__init__()
        self.program = [list(step) for step in program]
        self.lin = nn.Linear(6, 6)
        self.w = nn.Parameter(torch.rand(6) + 0.5)

    def forward(self, x, y):
        vals = [x, y]
        for op, i, j, c in self.program:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if op == "add":
                v = a + b
            elif op == "sub":
                v = a - b
            elif op == "mul":
                v = a * b
            elif op == "rsub":
                v = c - a
            elif op == "rmul":
                v = c * a
            elif op == "neg":
                v = -a
            elif op == "relu":
                v = a.relu()
            elif op == "tanh":
                v = torch.tanh(a)
            elif op == "sigmoid":
                v = torch.sigmoid(a)
            elif op == "softmax":
                v = F.softmax(a, dim=-1)
            elif op == "cat_slice":
                v = torch.cat([a, b], dim=1)[:, 3:9]
            elif op == "matmul":
                v = torch.tanh((a @ b.transpose(0, 1)) @ a)
            elif op == "linear":
                v = self.lin(a)
            elif op == "param":
                v = a * self.w
            elif op == "div":
                v = a / (c + 2.0)
            elif op == "eq":
                v = (a == b) * c + a
            elif op == "ne":
                v = a * (a != c)
            elif op == "floordiv":
                v = a // (c + 3.5)
            elif op == "mod":
                v = a % 1.5
            elif op == "pow":
                v = a ** 2
            elif op == "rdiv":
                v = c / (a * a + 1)
            elif op == "lt_reflected":
                v = (c < a) * a
            elif op == "shape":
                v = a * a.shape[0] + a.size(1)
            elif op == "T":
                v = (a.T @ b)[:4]
            elif op == "kw_method":
                v = a.transpose(dim0=0, dim1=1).transpose(0, 1)
            elif op == "sum_kw":
                v = a - a.sum(dim=1, keepdim=True)
            elif op == "where":
                v = torch.where(a > b, a, b)
            elif op == "pos":
                v = +a - b
            elif op == "rpow":                # not drawn by the generators: fixed programs only
                v = c ** (a.abs().round() + 1) + a
            elif op == "silu_l":              # the silu spellings below: only the rewrite part's programs
                v = a * torch.sigmoid(a)
            elif op == "silu_r":
                v = torch.sigmoid(a) * a
            elif op == "silu_m":
                v = a.mul(a.sigmoid())
            elif op == "silu_near":
                v = a * torch.sigmoid(b)
            elif op == "silu_add":            # not a match: an add, not a mul
                v = a + torch.sigmoid(a)
            else:
                v = a[1:3].repeat(2, 1)
            vals.append(v)
        return vals[-1], vals[len(vals) // 2]


class FoldProgram(nn.Module):
    """A generated chain of conv blocks (P0 draws the spec, a dict with "cin" and "blocks"). Each block is a
    Conv2d (kernel, stride, dilation, groups, bias drawn) followed by one of: a BatchNorm2d ("bn"; "bn_eps",
    "bn_noaffine" variants), a BatchNorm2d without running statistics ("bn_nostats"), a ReLU and then a
    BatchNorm2d ("relu_bn"; "module_bn": the ReLU is an nn.ReLU module), a BatchNorm2d whose conv output is
    also used again ("shared"), nothing ("none")."""

    def __init__(self, spec):
        super().__init__()
        self.kinds = []
        convs, bns = [], []
        c = spec["cin"]
        for b in spec["blocks"]:
            groups = b["groups"] if c % b["groups"] == 0 and b["cout"] % b["groups"] == 0 else 1
            convs.append(nn.Conv2d(c, b["cout"], b["k"], stride=b["stride"], padding=b["dil"] * (b["k"] // 2),
                                   dilation=b["dil"], groups=groups, bias=b["bias"]))
            kind = b["kind"]
            bn = {"bn_eps": lambda n: nn.BatchNorm2d(n, eps=0.1), "bn_noaffine": lambda n: nn.BatchNorm2d(n, affine=False),
                  "bn_nostats": lambda n: nn.BatchNorm2d(n, track_running_stats=False)}.get(kind, nn.BatchNorm2d)(b["cout"])
            bns.append(bn if kind != "none" else nn.Identity())
            self.kinds.append(kind)
            c = b["cout"]
        self.convs, self.bns = nn.ModuleList(convs), nn.ModuleList(bns)
        self.acts = nn.ModuleList(nn.ReLU() for _ in convs)   # called by "module_bn" blocks only

    def forward(self, x):
        outs = []
        for conv, bn, act, kind in zip(self.convs, self.bns, self.acts, self.kinds, strict=True):
            y = conv(x)
            if kind == "none":
                x = y
            elif kind == "relu_bn":
                x = bn(torch.relu(y))
            elif kind == "module_bn":
                x = bn(act(y))
            elif kind == "shared":
                x = bn(y) + y
            else:
                x = bn(y)
            outs.append(x)
            x = torch.relu(x)
        return x, outs[0]


def build(name, seed=0, program=None):
    """(model, inputs) for a model name; the same weights and inputs in P0 and P1."""
    _seed(seed)
    if name == "resnet":
        return _randomize_bn(TinyResNet(), seed).eval(), (torch.randn(2, 3, 16, 16),)
    if name == "transformer":
        return TinyTransformer().eval(), (torch.randint(0, 20, (2, 6)),)
    if name == "branchy":
        return Branchy(), (torch.randn(3, 6), torch.randn(3, 6))
    if name == "twice":
        return Twice(), (torch.randn(4, 5),)
    if name == "tied":
        return Tied(), (torch.randint(0, 12, (3, 5)),)
    if name == "kwargs":
        return KwargsModel(), (torch.randn(5, 8),)
    if name == "constants":
        return Constants(), (torch.randn(3, 4),)
    if name == "nested":
        return _randomize_bn(Nested(), seed).eval(), (torch.randn(5, 6),)
    if name == "methods":
        return Methods(), (torch.randn(2, 3, 5, 5),)
    if name == "defaults":
        return Defaults(), (torch.randn(3, 6),)
    if name == "program":
        return Program(program), (torch.randn(4, 6), torch.randn(4, 6))
    if name == "fold_program":
        return _randomize_bn(FoldProgram(program), seed).eval(), (torch.randn(2, program["cin"], 12, 12),)
    if name in FOLD_MODELS:
        return FOLD_MODELS[name](seed)
    if name in CLEAN_MODELS:
        _seed(seed)
        model = CLEAN_MODELS[name]()
        return model.eval(), (torch.randn(4, 6),)
    if name in SILU_MODELS:
        _seed(seed)
        return SILU_MODELS[name](), (torch.randn(4, 6),)
    if name in SHAPE_MODELS:
        return SHAPE_MODELS[name](seed)
    if name == "heavy":
        return Heavy(), (torch.randn(8, 8),)
    raise KeyError(name)


# part conv_bn_fold models
class SharedOut(nn.Module):
    """conv1's output feeds its BN and a residual: not foldable; conv2 -> bn2 is."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6)
        self.conv2, self.bn2 = nn.Conv2d(6, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6, eps=1e-2)

    def forward(self, x):
        y = self.conv1(x)
        z = self.bn1(y) + y
        return self.bn2(self.conv2(z))


class ConvTwice(nn.Module):
    """One conv module called at two places, one of them followed by BN; a BN after a ReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.bn_after_relu = nn.BatchNorm2d(4)

    def forward(self, x):
        a = self.bn(self.conv(x))
        b = self.conv(torch.relu(a))
        return self.bn_after_relu(torch.relu(b)) + b


class SharedConv(nn.Module):
    """A BatchNorm2d after a ReLU *module* first (a call_module that is not a conv: it stays, and the folds
    after it still happen), then one conv module called at three places, each call followed by its own
    BatchNorm2d: three folded copies of one conv, each under a name of its own."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()
        self.bn_after_act = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.bns = nn.ModuleList(nn.BatchNorm2d(3, eps=eps) for eps in (1e-5, 0.1, 0.5))

    def forward(self, x):
        x = self.bn_after_act(self.act(x))
        outs = []
        for bn in self.bns:
            x = bn(self.conv(x))
            outs.append(x)
        return outs[0] + outs[2], outs[1]


class OddConvs(nn.Module):
    """No bias, affine=False, other eps, groups, stride, dilation."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2, bias=False)
        self.b1 = nn.BatchNorm2d(8, affine=False, eps=1e-3)
        self.c2 = nn.Conv2d(8, 8, 1)
        self.b2 = nn.BatchNorm2d(8, eps=0.1)
        self.c3 = nn.Conv2d(8, 2, 3, padding=1)
        self.b3 = nn.BatchNorm2d(2, track_running_stats=False)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = self.b2(self.c2(x))
        return self.b3(self.c3(x)), x


FOLD_MODELS = {
    "fold_shared_out": lambda seed: (_randomize_bn(SharedOut(), seed).eval(), (torch.randn(2, 3, 8, 8),)),
    "fold_conv_twice": lambda seed: (_randomize_bn(ConvTwice(), seed).eval(), (torch.randn(2, 4, 6, 6),)),
    "fold_odd": lambda seed: (_randomize_bn(OddConvs(), seed).eval(), (torch.randn(2, 4, 9, 9),)),
    "fold_shared_conv": lambda seed: (_randomize_bn(SharedConv(), seed).eval(), (torch.randn(2, 3, 7, 7),)),
}


# part dce_cse models
class DeadChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.weight = nn.Parameter(torch.rand(6))

    def forward(self, x):
        w = self.weight                      # read, never used
        a = x.relu()
        b = a * 2
        c = b.sum(dim=0)                     # a dead chain of three
        d = self.lin(x)                      # a dead module call
        e = torch.cat([x, x], dim=1)[:, :3]  # dead getitem of a dead cat
        return x + 1


class DeadImpure(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        t = x.clone()
        t.add_(1)                             # in-place, result unused: stays
        torch.sigmoid_(t)                     # an in-place *function* (name ends in _): stays
        noise = torch.rand_like(x)            # random, unused: stays
        u = self.lin(x)
        self.act(u)                           # in-place module: stays
        F.relu(x * 3, inplace=True)           # inplace=True: stays (and its input)
        torch._assert(x.sum() > -1e9, "finite")
        dead = (t * 2).abs()
        return t + u


class Dups(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        r1, r2 = torch.relu(x), torch.relu(x)
        a, b = r1 + 1, r2 + 1                  # equal once r1/r2 are merged
        c, d = x[:, 1:3], x[:, 1:3]
        e, f = torch.cat([a, c], dim=1), torch.cat([b, d], dim=1)
        g, h = self.lin(x), self.lin(x)
        s1, s2 = torch.sum(x, dim=1), torch.sum(x, dim=0)
        k1, k2 = F.softmax(x, dim=-1), F.softmax(x, dim=0)
        m1, m2 = x.mean(dim=1, keepdim=True), x.mean(dim=1, keepdim=False)
        return e + f, g * h, s1.sum() + s2.sum(), k1 + k2, m1.sum() + m2.sum()


class NoMerge(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        n1, n2 = torch.rand_like(x), torch.rand_like(x)
        p, q, r = x + 1, x + 1.0, x + True     # different constant types
        a = x * 2
        a.add_(1)
        a.add_(1)                              # two equal in-place ops: both run
        s1, s2 = self.act(x * 3), self.act(x * 3)
        t1, t2 = x - 2, x - 2                  # these merge
        return a + p + q + r + t1 + t2 + s1 + s2 + (n1 - n2) * 0


CLEAN_MODELS = {"dead_chain": DeadChain, "dead_impure": DeadImpure, "dups": Dups, "no_merge": NoMerge}


# part rewrite models
class SiluNone(nn.Module):
    def forward(self, x):
        return x * torch.tanh(x) + torch.sigmoid(x)


class SiluOne(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class SiluMany(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 6)

    def forward(self, x):
        h = self.a(x)
        h = torch.sigmoid(h) * h
        h = self.b(h)
        h = torch.mul(h, h.sigmoid())
        g = self.c(h)
        return g.sigmoid() * g * 2 + (x * torch.sigmoid(x)).mul(torch.sigmoid(h))


class SiluNear(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)

    def forward(self, x):
        y = self.a(x)
        p = x * torch.sigmoid(y)               # different operand
        s = torch.sigmoid(x)
        q = x * s + s                          # the sigmoid has another user
        r = torch.sigmoid(y) * torch.sigmoid(y)
        t = (y + 0) * torch.sigmoid(y)         # a different node that happens to equal y
        u = y * torch.sigmoid(y)               # a real match
        v = y.add(y.sigmoid())                 # a method that is not a mul
        w = y.mul(y.tanh())                    # a mul of a method that is not a sigmoid
        return p + q + r + t + u + v + w


class SiluMixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])

    def forward(self, x):
        skip = []
        for lin in self.blocks:
            x = lin(x)
            s = x.sigmoid()
            skip.append(s)
            x = x * torch.sigmoid(x)
        return x + sum(skip[1:], skip[0])


SILU_MODELS = {"silu_none": SiluNone, "silu_one": SiluOne, "silu_many": SiluMany, "silu_near": SiluNear, "silu_mixed": SiluMixed}


# part shape_prop models
class Dtypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3).double()

    def forward(self, x, idx):
        h = self.lin(x.double())
        n = h.size(0)
        best = torch.max(h, dim=1)
        mask = best.values > 0
        picked = h[idx]
        counts = mask.to(torch.int32).sum()
        return picked.float().t(), counts, best.indices, n


SHAPE_MODELS = {
    "dtypes": lambda seed: (Dtypes(), (torch.randn(4, 5), torch.tensor([2, 0, 3]))),
    "channels_last": lambda seed: (_randomize_bn(TinyResNet(), seed).eval(),
                                   (torch.randn(2, 3, 12, 12).to(memory_format=torch.channels_last),)),
}


class Heavy(nn.Module):
    """One node about 100x heavier than all the others together."""

    def __init__(self):
        super().__init__()
        self.A = nn.Parameter(torch.randn(512, 512) / 23, requires_grad=False)

    def forward(self, x):
        h = x
        for _ in range(6):
            h = torch.tanh(h) + 1
        big = torch.matmul(self.A, self.A)
        return h + big[:8, :8]


# -- harnesses: the lab's rules where the ready-made fx pass follows others ------------------------
class TraceHarness(nn.Module):
    """Wraps a model with what the lab traces differently from torch.fx (a buffer read once and used twice,
    a plain tensor attribute, an unregistered module) and what the old reference got wrong (==, !=,
    attributes used as values)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, 3))
        self.k = torch.tensor([0.5, 2.0, -1.0])      # a plain attribute: neither parameter nor buffer
        self.loose = [nn.Tanh()]                      # not registered: traced through

    def extra(self, out):
        s = self.shift
        t = self.loose[0](s * self.k) + s
        flag = (s == 0.0) != (t > 0)
        tt = t.T                              # one attribute used twice: one getattr node
        return out, tt * s.shape[0] + tt - self.shift, flag


class TraceHarness1(TraceHarness):
    def forward(self, x):
        return self.extra(self.inner(x))


class TraceHarness2(TraceHarness):
    def forward(self, x, y):
        return self.extra(self.inner(x, y))


class TraceHarnessDefaults(TraceHarness):
    def forward(self, x, scale=0.5, shift=-1.25, note=None):
        return self.extra(self.inner(x, scale, shift, note))


class FoldHarness(nn.Module):
    """Side paths fx's `fuse` folds and this lab does not: Linear + BatchNorm1d, Conv1d + BatchNorm1d."""

    def __init__(self, inner, channels):
        super().__init__()
        self.inner = inner
        self.lin, self.lbn = nn.Linear(channels, 4), nn.BatchNorm1d(4)
        self.c1d, self.cbn = nn.Conv1d(channels, 3, 1), nn.BatchNorm1d(3)

    def forward(self, x):
        flat = x.flatten(2)
        return self.inner(x), self.lbn(self.lin(flat.mean(-1))), self.cbn(self.c1d(flat))


class CleanHarness(nn.Module):
    """Mutations fx's default purity does not see, a value read before and after an in-place op, and
    constants of different types (fx's CSEPass merges x + 2 and x + 2.0 and ignores mutations)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return _clean_tail(self.inner(x), x)


def _clean_tail(out, x):
    """CleanHarness's own nodes after the inner model's (fx traces through this plain function)."""
    t = x.clone()
    v1 = t * 3
    t.mul_(2)                      # result unused, but it changes t
    v2 = t * 3                     # not the same value as v1
    w = x * 0.5
    F.relu(w, inplace=True)        # changes w
    a1, a2 = x + 2, x + 2.0
    r1, r2 = x.abs(), x.abs()       # after the last barrier: these merge
    dead = (w - 1).sum()           # noqa: F841
    dead2 = torch.cat([x, w], dim=1)[:, ::2].relu()  # noqa: F841
    picked = x[[0, 0]] * x[0, 0]   # a list index and a tuple index: two different reads, never merged
    return out, v1 + v2 + w + a1 * a2 + r1 * r2 + picked.sum()


class SiluHarness(nn.Module):
    """A spelling one replace_pattern pattern does not cover: methods, sigmoid first."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x), x.sigmoid().mul(x)


class SiluHarness2(SiluHarness):
    def forward(self, x, y):
        return self.inner(x, y), x.sigmoid().mul(x)


class CleanHarness2(CleanHarness):
    """CleanHarness around a model of two inputs (a generated program)."""

    def forward(self, x, y):
        return _clean_tail(self.inner(x, y), x)


class ShapeHarness(nn.Module):
    """Adds views that start inside their storage (storage offsets ShapeProp does not record)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x), x.flatten()[1:], x.reshape(-1)[3:].view(1, -1), x[:0] * 2   # a size-0 value: 0 bytes


class ShapeHarness2(ShapeHarness):
    def forward(self, x, y):
        return self.inner(x, y), x.flatten()[1:], x.reshape(-1)[3:].view(1, -1), x[:0] * 2   # a size-0 value: 0 bytes


FOLD_CHANNELS = {"resnet": 3, "fold_shared_out": 3, "fold_conv_twice": 4, "fold_odd": 4, "fold_shared_conv": 3}


def harnessed(part, name, seed=0, program=None):
    """(model, inputs) of a part's graded model: the plain model inside the part's harness."""
    model, inputs = build(name, seed, program)
    _seed(seed + 7)
    if part == "tracer":
        if name == "defaults":
            return TraceHarnessDefaults(model), inputs
        return (TraceHarness1 if len(inputs) == 1 else TraceHarness2)(model), inputs
    if part == "fold":
        channels = program["cin"] if name == "fold_program" else FOLD_CHANNELS[name]
        return _randomize_bn(FoldHarness(model, channels), seed).eval(), inputs
    if part == "clean":
        return (CleanHarness if len(inputs) == 1 else CleanHarness2)(model).eval(), inputs
    if part == "silu":
        return (SiluHarness if len(inputs) == 1 else SiluHarness2)(model), inputs
    if part == "shapes":
        return (ShapeHarness if len(inputs) == 1 else ShapeHarness2)(model).eval(), inputs
    raise KeyError(part)


def stale_scale(graph, factor=3.0):
    """Edit a graph WITHOUT recompiling: its first output becomes `first * factor` (call_function
    operator.mul); a GraphModule's generated code no longer matches its graph."""
    out = next(n for n in graph.nodes if n.op == "output")
    ret = out.args[0]
    first = ret[0] if isinstance(ret, (tuple, list)) else ret
    with graph.inserting_before(out):
        scaled = graph.call_function(operator.mul, (first, factor))
    if isinstance(ret, (tuple, list)):
        out.args = (type(ret)([scaled, *ret[1:]]),)
    else:
        out.args = (scaled,)
    return scaled


# -- part tracer ------------------------------------------------------------------------------------
class _ProbeSelf:
    def __init__(self, program):
        self.program = program


def probe_run(x, y, program):
    """A straight-line program run directly on two proxies (the learner's, or torch.fx's in P0)."""
    return Program.forward(_ProbeSelf([list(step) for step in program]), x, y)


def probe(sub, program):
    """The learner's Proxy and MiniTracer.create_proxy used directly, without mini_trace."""
    tracer = sub.MiniTracer()
    tracer.graph = sub.Graph()
    x = tracer.create_proxy("placeholder", "x", (), {})
    y = tracer.create_proxy("placeholder", "y", (), {})
    out = probe_run(x, y, program)
    tracer.graph.output(sub.map_aggregate(out, lambda a: a.node if isinstance(a, sub.Proxy) else a))
    return describe(tracer.graph.nodes)


def trace_model(sub, name, seed=0, program=None, probe_program=None):
    model, _ = harnessed("tracer", name, seed, program)
    graph = sub.mini_trace(model)
    out = {"graph": describe(graph.nodes)}
    if probe_program is not None:
        out["probe"] = probe(sub, probe_program)
    return out


def trace_errors(sub, probe_program=None):
    """Control flow on a traced value must raise TraceError; nn.Module works again afterwards (an eager
    call and a second trace)."""
    class Branch(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    class Compare(nn.Module):
        def forward(self, x, y):
            return x if x == y else y

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            _seed(5)
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return [v for v in self.lin(x)]

    out = {}
    loop = Loop()
    for name, model in (("branch", Branch()), ("compare", Compare()), ("iterate", loop)):
        try:
            sub.mini_trace(model)
            out[name] = "no error"
        except Exception as exc:  # noqa: BLE001
            out[name] = type(exc).__name__
    _seed(3)
    lin = nn.Linear(3, 2)
    x = torch.arange(6.0).reshape(2, 3)
    for key, module in (("eager_after", lin), ("eager_traced_leaf", loop.lin)):   # a fresh Linear, and the one the
        try:                                                                     # failed trace had named
            out[key] = _flat(module(x))
        except Exception as exc:  # noqa: BLE001
            out[key] = _error(exc)
    model, _ = harnessed("tracer", "twice")
    out["graph_after"] = describe(sub.mini_trace(model).nodes)
    if probe_program is not None:
        out["probe"] = probe(sub, probe_program)
    return out


# -- part codegen -----------------------------------------------------------------------------------
def codegen_run(sub, name, seed=0, program=None, bump=False):
    model, inputs = build(name, seed, program)
    graph = sub.from_fx(torch.fx.symbolic_trace(model))
    mini = sub.MiniGraphModule(model, graph)
    code = mini.code
    src, glob = sub.python_code(graph)
    first = mini(*inputs)
    result = {"outs": _flat(first), "code": code if isinstance(code, str) else None,
              "source": src if isinstance(src, str) else None,
              "globals": sorted(str(k) for k in glob) if isinstance(glob, dict) else None,
              "names": [n.name for n in graph.nodes], "ops": [n.op for n in graph.nodes],
              "is_module": isinstance(mini, nn.Module),
              "state_dict": sorted(mini.state_dict().keys()) if isinstance(mini, nn.Module) else None,
              "structure": _structure(first)}
    if bump:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
        result["bumped"] = _flat(mini(*inputs))
    return result


def _structure(out):
    if isinstance(out, torch.Tensor):
        return "T"
    if isinstance(out, tuple):
        return {"tuple": [_structure(x) for x in out]}
    if isinstance(out, list):
        return [_structure(x) for x in out]
    if isinstance(out, dict):
        return {"dict": {str(k): _structure(v) for k, v in out.items()}}
    return out if out is None or isinstance(out, (bool, int, float, str)) else type(out).__name__


# -- part shape_prop --------------------------------------------------------------------------------
META_KEYS = ("shape", "dtype", "stride", "storage_offset", "requires_grad")


def _meta_plain(m):
    def get(key, conv):
        return conv(m[key]) if key in m else None
    return {"shape": get("shape", lambda v: [int(x) for x in v]), "dtype": get("dtype", str),
            "stride": get("stride", lambda v: [int(x) for x in v]), "storage_offset": get("storage_offset", int),
            "requires_grad": get("requires_grad", bool)}


def shapes(sub, name, seed=0, program=None):
    model, inputs = harnessed("shapes", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    rec = sub.ShapeRecorder(gm)
    result = rec.run(*inputs)
    sizes = sub.activation_bytes(gm)
    nodes = {n.name: _meta_plain(n.meta) for n in gm.graph.nodes}
    return {"nodes": nodes, "outs": _flat(result), "is_interpreter": isinstance(rec, torch.fx.Interpreter),
            "bytes": {str(k): int(v) for k, v in dict(sizes).items()}}


# -- part conv_bn_fold ------------------------------------------------------------------------------
def _count_modules(gm, cls):
    return sum(1 for n in gm.graph.nodes if n.op == "call_module" and isinstance(gm.get_submodule(n.target), cls))


def _module_kinds(gm):
    return [type(gm.get_submodule(n.target)).__name__ for n in gm.graph.nodes if n.op == "call_module"]


def fold(sub, name, seed=0, train=False, program=None):
    """Folds the eval model; with train=True also tries the same model in training mode afterwards."""
    model, inputs = harnessed("fold", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    out = sub.fold_conv_bn(gm)
    with torch.no_grad():
        got = _flat(out(*inputs))
        after = _flat(model(*inputs))
    result = {"outs": got, "eager_after": after, "modules": _module_kinds(out)}
    if train:
        # training anywhere is refused: the whole model, only the GraphModule's own flag, only one BatchNorm2d
        for key in ("train", "train_root", "train_one_bn"):
            model2, _ = harnessed("fold", name, seed, program)
            model2.train(key == "train")
            if key == "train_one_bn":
                next(m for m in model2.modules() if isinstance(m, nn.BatchNorm2d)).train()
            gm2 = torch.fx.symbolic_trace(model2)
            if key == "train_root":
                gm2.training = True
            try:
                sub.fold_conv_bn(gm2)
                result[key] = {"error": "no error"}
            except Exception as exc:  # noqa: BLE001
                result[key] = _error(exc)
    return result


# -- part dce_cse -----------------------------------------------------------------------------------
def clean(sub, name, which, seed=0, program=None):
    model, inputs = harnessed("clean", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    removed = {}
    for step in which:
        removed[step] = int(sub.cse(gm) if step == "cse" else sub.dead_code_elimination(gm))
    _seed(seed)
    with torch.no_grad():
        outs = _flat(gm(*inputs))
    return {"removed": removed, "nodes": [f"{n.op}:{target_str(n.target)}" for n in gm.graph.nodes], "outs": outs}


def impurity(sub, name, seed=0, program=None):
    model, _ = harnessed("clean", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    return {n.name: bool(sub.is_impure(n)) for n in gm.graph.nodes}


# -- part rewrite -----------------------------------------------------------------------------------
def silu(sub, name, seed=0, program=None):
    model, inputs = harnessed("silu", name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    count = sub.fuse_silu(gm)
    with torch.no_grad():
        outs = _flat(gm(*inputs))
    return {"count": int(count), "outs": outs, "graph": describe(gm.graph.nodes)}


# -- part profiler ----------------------------------------------------------------------------------
def profile(sub, name, seed=0, runs=3, top=5, edit=False, inject=None, program=None):
    """profile_graph on a graph P0 chose (optionally edited without recompiling); with `inject` = a node
    index, also one ProfilingInterpreter.run with that node's value given in initial_env (ones)."""
    model, inputs = build(name, seed, program)
    gm = torch.fx.symbolic_trace(model)
    if edit:
        stale_scale(gm.graph)
    report = sub.profile_graph(gm, *inputs, runs=runs)
    nodes = {str(k): {"seconds": float(v["seconds"]), "calls": int(v["calls"])} for k, v in dict(report["nodes"]).items()}
    summary = sub.profile_summary(report, top=top)
    out = {"nodes": nodes, "total": float(report["total"]), "runs": int(report["runs"]),
           "outs": _flat(report["result"]), "summary": str(summary),
           "is_interpreter": isinstance(sub.ProfilingInterpreter(gm), torch.fx.Interpreter),
           "graph_nodes": [n.name for n in gm.graph.nodes]}
    if inject is not None:
        node = list(gm.graph.nodes)[inject]
        shape = _node_shape(gm, inputs, node)
        interp = sub.ProfilingInterpreter(gm)
        res = interp.run(*inputs, initial_env={node: torch.ones(shape)})
        out["injected"] = {"outs": _flat(res), "nodes": {str(k): int(v["calls"]) for k, v in dict(interp.stats).items()}}
    return out


def profile_pause(sub, runs, pause):
    """profile_graph on x -> pause(x) -> + 1, where pause sleeps `pause` seconds per call (time.sleep waits at
    least that long, however busy the machine): the node's seconds must add up over the runs."""
    import operator
    import time

    def pause_node(x):
        time.sleep(pause)
        return x

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(operator.add, (graph.call_function(pause_node, (x,)), 1.0)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    report = sub.profile_graph(gm, torch.ones(3), runs=runs)
    return {str(k): {"seconds": float(v["seconds"]), "calls": int(v["calls"])} for k, v in dict(report["nodes"]).items()}


def summary_of(sub, nodes, total, runs, top):
    """profile_summary on a report P0 made up: total deliberately larger than the sum of the node times
    (as the interpreter's own overhead makes it), so a share must be seconds / report['total']."""
    report = {"nodes": {k: {"seconds": float(v[0]), "calls": int(v[1])} for k, v in nodes.items()},
              "total": float(total), "runs": int(runs), "result": None}
    return str(sub.profile_summary(report, top=top))


def _node_shape(gm, inputs, node):
    seen = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if n is node:
                seen["shape"] = tuple(value.shape)
            return value
    Rec(gm).run(*inputs)
    return seen["shape"]


# -- part decompose ---------------------------------------------------------------------------------
def dotted_graph(seed=0):
    """(gm, input) of a hand-built graph whose get_attr targets are dotted ("blocks.0.scale"): a buffer and
    a parameter of nested submodules, aten.mul(x, scale) then aten.add(., shift), and then the add edited
    into aten.sub in gm.graph without a recompile (gm's code still adds: a runner must walk the graph)."""
    g = torch.Generator().manual_seed(seed)
    root = nn.Module()
    root.blocks = nn.ModuleList([nn.Module(), nn.Module()])
    root.blocks[0].register_buffer("scale", torch.rand(5, generator=g) + 0.5)
    root.blocks[1].shift = nn.Parameter(torch.randn(5, generator=g))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    scale, shift = graph.get_attr("blocks.0.scale"), graph.get_attr("blocks.1.shift")
    y = graph.call_function(torch.ops.aten.mul.Tensor, (x, scale))
    last = graph.call_function(torch.ops.aten.add.Tensor, (y, shift))
    graph.output(last)
    gm = torch.fx.GraphModule(root, graph)
    last.target = torch.ops.aten.sub.Tensor  # in the graph only: gm.recompile() is not called
    return gm, torch.randn(3, 5, generator=g)


def run_graph_dotted(sub, seed=0):
    gm, inp = dotted_graph(seed)
    with torch.no_grad():
        return _flat(sub.run_graph(gm, inp))


def fn_mlp(x, w, b):
    return F.layer_norm(F.gelu(F.linear(x, w, b)), (x.shape[-1],)).softmax(-1)


def fn_conv(x, w, b):
    y = F.conv2d(x, w, b, padding=1)
    return F.avg_pool2d(F.silu(y), 2).flatten(1).log_softmax(-1)


def fn_attention(q, k, v):
    att = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    return att @ v, att.mean(dim=(0, 1))


def fn_misc(x, y, z):
    h = F.hardswish(x) + torch.where(y > 0, y, z).clamp(-0.5, 0.5)
    return h.var(dim=0, correction=0), F.leaky_relu(h, 0.2).addcmul(x, y, value=0.5)


DECOMPOSE = {
    "mlp": (fn_mlp, [(4, 8), (8, 8), (8,)]),
    "conv": (fn_conv, [(2, 3, 6, 6), (4, 3, 3, 3), (4,)]),
    "attention": (fn_attention, [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 4)]),
    "misc": (fn_misc, [(3, 7), (3, 7), (3, 7)]),
}


def decompose_inputs(name, seed):
    fn, shapes_ = DECOMPOSE[name]
    g = torch.Generator().manual_seed(seed)
    return fn, [torch.randn(*s, generator=g) for s in shapes_]


def decompose(sub, name, seed=0):
    fn, args = decompose_inputs(name, seed)
    gm = sub.to_core_aten(fn, *args)
    graph = describe(gm.graph.nodes)
    hist = {str(k): int(v) for k, v in dict(sub.op_histogram(gm)).items()}
    ran = sub.run_graph(gm, *args)                      # the graph as traced
    scaled = stale_scale(gm.graph)                      # edited, not recompiled: gm's code is stale
    ran_edited = sub.run_graph(gm, *args)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        gm.graph.call_method("neg", (scaled,))          # an opcode run_graph must refuse
    try:
        sub.run_graph(gm, *args)
        method = {"error": "no error"}
    except Exception as exc:  # noqa: BLE001
        method = _error(exc)
    return {"graph": graph, "histogram": hist, "outs": _flat(ran), "edited": _flat(ran_edited), "method": method}
