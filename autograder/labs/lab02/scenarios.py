"""lab02 scenarios: run on the student side (P1), against the learner's module `sub`.

numpy only (torch is denied in this lab). The heart is `interpret(api, prog)`, a tiny program
interpreter that speaks PyTorch's API (`x.sum(dim, keepdim=...)`, `x @ y`, `t.backward(...)`,
`t.register_hook`, `no_grad()`); P0 imports this same file and runs the same program with a torch
`api` (autograder/labs/lab02/oracle.py), so both sides execute one identical script.

A program (plain data):
    {"inputs": [[name, array, requires_grad], ...], "given": bool, "ops": [op, ...]}
ops, applied in order (an operand is a value name or a number):
    ["let", name, opname, *args]      a value: add sub mul div neg pow exp log tanh sigmoid relu
                                      matmul sum mean reshape transpose sum_to_size softmax
                                      log_softmax max (stores name and name + ".indices") detach
    ["backward", root, gradient_or_None, retain_graph]
    ["hook", target, tag, factor_or_None]   the hook logs ["hook", tag, grad] and returns grad * factor
                                         (factor "shift": returns grad + 1, which tells one call with the
                                         total from several calls with parts, by values alone)
    ["attempt", name, opname, *args]     like let, but an error is the answer: logs ["error", i, type,
                                         message] or ["ok", i]
    ["remove_hook", tag]    ["retain_grad", target]    ["zero_grad", input]
    ["no_grad_begin"]    ["no_grad_end"]    ["grad_enabled"]
    ["no_grad_raises"]                   a no_grad block left by an exception (grad mode logged inside and after)
    ["decorated", name, target, factor]  name = target * factor inside a @no_grad()-decorated function
    ["graph", name]                      the graph behind a value, as [label, [child index or -1]] rows, and
                                         the gradients of its inputs found by walking that graph (a ones
                                         gradient): on the learner side by a small engine here that runs the
                                         locked given nodes, so a graph is judged by what it computes
With "given": true, add/mul/sum (full) use the lab's given_add/given_mul/given_sum, whose backward
formulas are locked, so the graph/engine/hooks parts do not depend on the learner's op formulas.
"""
import numpy as np

BINARY = {"add", "sub", "mul", "div", "matmul"}


def _error(exc):
    return {"error": type(exc).__name__, "message": str(exc)[:500]}


def _safe(arr):
    """A 0-d array crosses the boundary as a plain number (the wire flattens 0-d arrays to shape (1,))."""
    return arr.item() if arr.ndim == 0 else arr


class LearnerAPI:
    """The learner's module, seen through PyTorch's names."""

    def __init__(self, sub, given=False):
        self.sub, self.given = sub, given

    def tensor(self, value, requires_grad):
        return self.sub.Tensor(np.array(value, dtype=np.float64), requires_grad=requires_grad)

    def numpy(self, t):
        if not isinstance(t, self.sub.Tensor):
            raise TypeError(f"expected a Tensor, got a {type(t).__name__}")
        return _safe(np.array(t.data, dtype=np.float64))

    def grad(self, t):
        g = t.grad
        return None if g is None else self.numpy(g)

    def no_grad(self):
        return self.sub.no_grad()

    def is_grad_enabled(self):
        return bool(self.sub.is_grad_enabled())

    def binary(self, op, a, b):
        if self.given and op in ("add", "mul"):
            if isinstance(a, float):  # `2.0 * t` is t.__rmul__(2.0) in torch: the tensor comes first
                a, b = b, a
            return getattr(self.sub, "given_" + op)(a, b)
        return _binary(op, a, b)

    def full_sum(self, a):
        return self.sub.given_sum(a) if self.given else a.sum()

    def node_name(self, node):
        return type(node).__name__

    def graph_grads(self, env, inputs, t):
        """Input gradients of sum(t) found by walking the learner's recorded graph (not the learner's engine)."""
        out = {n: None for n in inputs}
        root = t.grad_fn
        if root is None:
            return out
        seen, order, stack = {}, [], [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen[id(node)] = node
            stack.append((node, True))
            for child, _ in node.next_functions:
                if child is not None and id(child) not in seen:
                    stack.append((child, False))
        buffers = {id(root): np.ones(np.shape(t.data))}
        for node in reversed(order):
            grad = buffers.pop(id(node), None)
            if grad is None:
                continue
            if type(node).__name__ == "AccumulateGrad":
                owner = [n for n in inputs if env[n] is node.variable]
                if owner:
                    out[owner[0]] = grad if out[owner[0]] is None else out[owner[0]] + grad
                continue
            grads = node.apply(grad)
            for k, (child, _) in enumerate(node.next_functions):
                if child is not None:
                    g = np.asarray(grads[k], dtype=np.float64)
                    buffers[id(child)] = g if id(child) not in buffers else buffers[id(child)] + g
        return {n: None if g is None else _safe(np.array(g, dtype=np.float64)) for n, g in out.items()}


def _binary(op, a, b):
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    return a @ b


def _shape(args):
    return tuple(args)


def _let(api, env, opname, args):
    def val(x):
        return env[x] if isinstance(x, str) else float(x)

    if opname in BINARY:
        return api.binary(opname, val(args[0]), val(args[1]))
    a = env[args[0]]
    if opname == "neg":
        return -a
    if opname == "pow":
        return a ** float(args[1])
    if opname in ("exp", "log", "tanh", "sigmoid", "relu"):
        return getattr(a, opname)()
    if opname in ("sum", "mean"):
        dim, keepdim = args[1], args[2]
        if dim is None:
            return api.full_sum(a) if opname == "sum" else a.mean()
        dim = dim if isinstance(dim, int) else tuple(dim)
        return getattr(a, opname)(dim, keepdim=keepdim)
    if opname == "reshape":
        return a.reshape(_shape(args[1]))
    if opname == "transpose":
        return a.transpose(args[1], args[2])
    if opname == "sum_to_size":
        return a.sum_to_size(_shape(args[1]))
    if opname in ("softmax", "log_softmax"):
        return getattr(a, opname)(args[1])
    if opname == "detach":
        return a.detach()
    if opname == "max":
        values, indices = a.max(args[1], keepdim=args[2])
        return values, indices
    raise ValueError(f"unknown op {opname!r}")  # a grader bug, not the learner's


def _graph(api, env, inputs, t):
    """The graph behind t: rows [label, [child row or -1 for None]] in breadth-first order (an edge whose output
    number is not 0 shows as the text "output <nr>")."""
    root = t.grad_fn
    if root is None:
        return []
    keep, index, rows, queue = [root], {id(root): 0}, [], [root]
    while queue:
        node = queue.pop(0)
        if api.node_name(node) == "AccumulateGrad":
            owner = [n for n in inputs if env[n] is node.variable]
            label = "AccumulateGrad:" + (owner[0] if owner else "?")
        else:
            label = "op"
        if not isinstance(node.next_functions, tuple) or not all(isinstance(e, tuple) for e in node.next_functions):
            label += " whose next_functions is not a tuple of (node, 0) tuples"  # as the notebook and torch have it
        children = []
        for child, nr in node.next_functions:
            if nr != 0:  # every op of this lab (and torch's ops here) has one output: edges end at output 0
                children.append(f"output {nr!r}")
                continue
            if child is None:
                children.append(-1)
                continue
            if id(child) not in index:
                index[id(child)] = len(keep)
                keep.append(child)
                queue.append(child)
            children.append(index[id(child)])
        rows.append([label, children])
    return rows


def interpret(api, prog):
    env, values, flags, log = {}, {}, {}, []
    inputs = [name for name, _, _ in prog["inputs"]]
    for name, value, requires_grad in prog["inputs"]:
        env[name] = api.tensor(value, bool(requires_grad))
    hooks, retained, contexts = {}, [], []

    def make_hook(tag, factor):
        def hook(grad):
            log.append(["hook", tag, api.numpy(grad)])
            if factor is None:
                return None
            # through api.binary: in given programs the lab's given ops, so hooks never need part 4's classes
            return api.binary("add", grad, 1.0) if factor == "shift" else api.binary("mul", grad, float(factor))
        return hook

    def snapshot():
        return {"grads": {n: api.grad(env[n]) for n in inputs},
                "retained": {n: api.grad(env[n]) for n in retained}}

    for i, op in enumerate(prog["ops"]):
        kind = op[0]
        if kind in ("let", "attempt"):
            name, opname, args = op[1], op[2], op[3:]
            if kind == "attempt":
                try:
                    out = _let(api, env, opname, args)
                except Exception as exc:  # noqa: BLE001 - the error is the answer
                    log.append(["error", i, type(exc).__name__, str(exc)[:300]])
                    continue
                log.append(["ok", i])
            else:
                out = _let(api, env, opname, args)
            if opname == "max":
                out, indices = out
                values[name + ".indices"] = _safe(np.array(indices.numpy() if hasattr(indices, "numpy") else indices,
                                                           dtype=np.int64))
            env[name] = out
            values[name] = api.numpy(out)
            flags[name] = [bool(out.requires_grad), bool(out.is_leaf), out.grad_fn is not None]
        elif kind == "backward":
            root, gradient, retain_graph = op[1], op[2], op[3]
            try:
                grad = None if gradient is None else api.tensor(gradient, False)
                env[root].backward(grad, retain_graph=retain_graph)
                log.append(["backward", i, snapshot()])
            except Exception as exc:  # noqa: BLE001 - the error is the answer
                log.append(["error", i, type(exc).__name__, str(exc)[:300], snapshot()])
        elif kind == "hook":
            target, tag, factor = op[1], op[2], op[3]
            try:
                hooks[tag] = env[target].register_hook(make_hook(tag, factor))
                log.append(["hooked", i])
            except Exception as exc:  # noqa: BLE001
                log.append(["error", i, type(exc).__name__, str(exc)[:300]])
        elif kind == "remove_hook":
            hooks[op[1]].remove()
        elif kind == "retain_grad":
            try:
                env[op[1]].retain_grad()
                if op[1] not in retained:
                    retained.append(op[1])
                log.append(["retained", i])
            except Exception as exc:  # noqa: BLE001
                log.append(["error", i, type(exc).__name__, str(exc)[:300]])
        elif kind == "zero_grad":
            env[op[1]].grad = None
        elif kind == "no_grad_begin":
            ctx = api.no_grad()
            ctx.__enter__()
            contexts.append(ctx)
        elif kind == "no_grad_end":
            contexts.pop().__exit__(None, None, None)
        elif kind == "grad_enabled":
            log.append(["grad_enabled", i, api.is_grad_enabled()])
        elif kind == "no_grad_raises":
            try:
                with api.no_grad():
                    log.append(["grad_enabled", i, api.is_grad_enabled()])
                    raise KeyError("inside no_grad")
            except KeyError:
                pass
            log.append(["grad_enabled", i, api.is_grad_enabled()])
        elif kind == "decorated":
            name, target, factor = op[1], op[2], op[3]

            @api.no_grad()
            def scaled(t):
                return api.binary("mul", t, factor)

            out = scaled(env[target])
            env[name] = out
            values[name] = api.numpy(out)
            flags[name] = [bool(out.requires_grad), bool(out.is_leaf), out.grad_fn is not None]
            log.append(["grad_enabled", i, api.is_grad_enabled()])
        elif kind == "graph":
            log.append(["graph", i, _graph(api, env, inputs, env[op[1]]), api.graph_grads(env, inputs, env[op[1]])])
        else:
            raise ValueError(f"unknown program step {kind!r}")  # a grader bug
    while contexts:
        contexts.pop().__exit__(None, None, None)
    return {"values": values, "flags": flags, "log": log}


def program(sub, prog):
    """Run a program on the learner's engine (see the module docstring)."""
    return interpret(LearnerAPI(sub, prog.get("given", False)), prog)


def perturbed_outputs(sub, prog, input_name, eps):
    """Finite differences with the learner's own forward: the program's last value (summed against
    the gradient in prog["fd_weight"]) at input +- eps for every element of one input."""
    base = {name: np.array(value, dtype=np.float64) for name, value, _ in prog["inputs"]}
    weight = np.asarray(prog["fd_weight"], dtype=np.float64)
    lets = [op for op in prog["ops"] if op[0] == "let"]
    out = np.zeros(base[input_name].shape)
    for idx in np.ndindex(*base[input_name].shape):
        f = []
        for sign in (1.0, -1.0):
            inputs = [[n, v.copy(), False] for n, v in base.items()]
            for item in inputs:
                if item[0] == input_name:
                    item[1][idx] += sign * eps
            env_prog = {"inputs": inputs, "given": prog.get("given", False), "ops": lets}
            result = interpret(LearnerAPI(sub, env_prog["given"]), env_prog)
            f.append(float((result["values"][lets[-1][1]] * weight).sum()))
        out[idx] = (f[0] - f[1]) / (2 * eps)
    return _safe(out)


def deep_chain(sub, n, given):
    """x -> x * 1.0001 ... (n nodes) -> backward; returns x.grad."""
    api = LearnerAPI(sub, given)
    x = api.tensor(np.array([1.0, 2.0]), True)
    y = x
    for _ in range(n):
        y = api.binary("mul", y, 1.0001)
    y.backward(api.tensor(np.array([1.0, 1.0]), False))
    return api.grad(x)


def ladder(sub, n, given):
    """n diamonds in a row (2**n paths): y <- y * 0.5 + y * 0.75; returns x.grad (1.25 ** n)."""
    api = LearnerAPI(sub, given)
    x = api.tensor(np.array([1.0, -1.0, 3.0]), True)
    y = x
    for _ in range(n):
        y = api.binary("add", api.binary("mul", y, 0.5), api.binary("mul", y, 0.75))
    y.backward(api.tensor(np.ones(3), False))
    return api.grad(x)


def unstable_softmax(sub, logits, dim):
    """softmax_forward and log_softmax_forward on extreme logits (values only)."""
    logits = np.array(logits, dtype=np.float64)
    return {"softmax": np.asarray(sub.softmax_forward(logits, dim), dtype=np.float64),
            "log_softmax": np.asarray(sub.log_softmax_forward(logits, dim), dtype=np.float64)}


def sum_to_size(sub, shape_in, shape_out, seed):
    grad = np.random.default_rng(seed).normal(size=tuple(shape_in))
    return _safe(np.asarray(sub.sum_to_size(grad, tuple(shape_out)), dtype=np.float64))


def train_mlp(sub, w1, b1, w2, b2, x, target, lr, steps):
    model = sub.MLP(w1, b1, w2, b2)
    losses = sub.train(model, np.array(x, dtype=np.float64), np.array(target, dtype=np.int64), lr, steps)
    return {"losses": [float(v) for v in losses],
            "params": [np.array(p.data, dtype=np.float64) for p in model.parameters()],
            "grads_cleared": [p.grad is None for p in model.parameters()]}


def cross_entropy(sub, logits, target):
    """Value and gradient of the learner's cross_entropy on given logits."""
    t = sub.Tensor(np.array(logits, dtype=np.float64), requires_grad=True)
    loss = sub.cross_entropy(t, np.array(target, dtype=np.int64))
    loss.backward()
    return {"loss": float(loss.data), "grad": np.array(t.grad.data, dtype=np.float64)}


def linear(sub, w, b, x):
    layer = sub.Linear(w, b)
    xt = sub.Tensor(np.array(x, dtype=np.float64))
    out = layer(xt)
    out.backward(sub.Tensor(np.ones(out.data.shape)))
    return {"out": np.array(out.data, dtype=np.float64), "w_grad": np.array(layer.weight.grad.data),
            "b_grad": np.array(layer.bias.grad.data)}

# IPT-CANARY lab02 lab02.py: hidden grading text, never shown to learners
