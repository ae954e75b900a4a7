"""hypothesis strategies for lab02: random expression DAGs (shared subexpressions, diamonds,
broadcasting) as programs for autograder/labs/lab02/scenarios.py.

Values are drawn from a numpy generator seeded by hypothesis, so every example is deterministic.
Each value tracks its shape and whether it is strictly positive (log, div and fractional powers
only take positive operands).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

ELEMENTWISE = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "tanh", "sigmoid", "relu"]
REDUCTIONS = ["sum", "mean", "reshape", "transpose", "matmul", "sum_to_size"]
SOFTMAX = ["softmax", "log_softmax", "max"]
POSITIVE_KEEPING = {"sum", "mean", "reshape", "transpose", "sum_to_size", "max"}


def _broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _factor_shape(draw, n):
    sizes = []
    while n > 1:
        for p in (2, 3, 5, 7):
            if n % p == 0:
                break
        else:
            p = n
        if sizes and draw(st.booleans()):
            sizes[-1] *= p
        else:
            sizes.append(p)
        n //= p
    if draw(st.integers(0, 3)) == 0:
        sizes.insert(draw(st.integers(0, len(sizes))), 1)
    return draw(st.permutations(sizes)) if sizes else []


@st.composite
def programs(draw, ops=tuple(ELEMENTWISE), min_steps=2, max_steps=7, max_inputs=3, given=False, broadcast=True,
             backward=True):
    """A program whose last value is backwarded (a scalar root, or a random gradient)."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    ndim = draw(st.integers(1, 3))
    base = [draw(st.integers(2, 4)) for _ in range(ndim)]
    inputs, env = [], []  # env: (name, shape, positive)

    def new_input(shape, positive, requires_grad=True):
        name = "xyzwuv"[len(inputs)] if len(inputs) < 6 else f"in{len(inputs)}"
        value = rng.uniform(0.5, 2.0, size=shape) if positive else rng.normal(size=shape)
        inputs.append([name, np.round(value, 3), requires_grad])
        env.append((name, tuple(shape), positive))
        return env[-1]

    n_inputs = draw(st.integers(1, max_inputs))
    for i in range(n_inputs):
        k = draw(st.integers(0, ndim)) if i and broadcast else ndim
        shape = [1 if broadcast and draw(st.integers(0, 3)) == 0 else n for n in base[ndim - k:]]
        new_input(shape, draw(st.booleans()), requires_grad=(i == 0 or draw(st.integers(0, 3)) > 0))

    steps = []
    n_steps = draw(st.integers(min_steps, max_steps))
    attempts = 0
    while len(steps) < n_steps and attempts < 60:
        attempts += 1
        op = draw(st.sampled_from(list(ops)))
        # favour recent values, but reuse earlier ones (shared subexpressions, diamonds)
        pick = draw(st.integers(0, len(env) - 1))
        if draw(st.booleans()):
            pick = len(env) - 1
        a_name, a_shape, a_pos = env[pick]
        name = f"v{len(steps) + 1}"
        out_shape, out_pos, args = None, False, None
        if op in ("add", "sub", "mul", "div"):
            if draw(st.integers(0, 4)) == 0:
                b = draw(st.sampled_from((2.0, -0.5, 3.0, 0.25)))
                if op == "div" and b < 0:
                    b = 2.0
                args, out_shape = [a_name, b], a_shape
                out_pos = a_pos and (b > 0 or op in ("add",) and False)
                if draw(st.booleans()) and op != "div":
                    args = [b, a_name]
            else:
                b_name, b_shape, b_pos = env[draw(st.integers(0, len(env) - 1))]
                if op == "div" and not b_pos:
                    continue
                out_shape = _broadcast(a_shape, b_shape)
                if out_shape is None:
                    continue
                args = [a_name, b_name]
                out_pos = a_pos and b_pos and op in ("add", "mul", "div")
        elif op in ("neg", "exp", "tanh", "sigmoid", "relu"):
            args, out_shape, out_pos = [a_name], a_shape, op in ("exp", "sigmoid")
        elif op == "log":
            if not a_pos:
                continue
            args, out_shape = [a_name], a_shape
        elif op == "pow":
            p = draw(st.sampled_from((2.0, 3.0, 0.5, -1.0, 1.5, 0.0)))
            if p not in (2.0, 3.0, 0.0) and not a_pos:
                continue
            args, out_shape, out_pos = [a_name, p], a_shape, a_pos
        elif op in ("sum", "mean"):
            keepdim = draw(st.booleans())
            choice = draw(st.integers(0, 2))
            if choice == 0 or not a_shape:
                dim, out_shape = None, ()
                keepdim = False
            else:
                dims = sorted(set(draw(st.lists(st.integers(0, len(a_shape) - 1), min_size=1, max_size=2))))
                dim = dims[0] - len(a_shape) if (len(dims) == 1 and draw(st.booleans())) else (dims[0] if len(dims) == 1 else dims)
                out_shape = tuple(1 if d in dims else n for d, n in enumerate(a_shape)) if keepdim else \
                    tuple(n for d, n in enumerate(a_shape) if d not in dims)
            args = [a_name, dim, keepdim]
        elif op == "reshape":
            shape = _factor_shape(draw, int(np.prod(a_shape)))
            args, out_shape = [a_name, list(shape)], tuple(shape)
        elif op == "transpose":
            if len(a_shape) < 2:
                continue
            d0, d1 = draw(st.sampled_from(((0, 1), (-1, -2), (0, -1))))
            s = list(a_shape)
            s[d0], s[d1] = s[d1], s[d0]
            args, out_shape = [a_name, d0, d1], tuple(s)
        elif op == "matmul":
            if len(a_shape) < 2:
                continue
            m = draw(st.integers(1, 3))
            batch = list(a_shape[:-2])
            if batch and draw(st.booleans()):
                # a size-1 batch dim of `a` may meet a larger one of `b` (grad_a sums it back to 1)
                batch = [1 if draw(st.booleans()) else (draw(st.sampled_from((1, 2))) if n == 1 else n)
                         for n in batch][draw(st.integers(0, len(batch))):]
            elif not batch and draw(st.integers(0, 3)) == 0:
                batch = [2]
            b = new_input(batch + [a_shape[-1], m], draw(st.booleans()))
            args = [a_name, b[0]]
            out_shape = _broadcast(a_shape[:-2], tuple(batch)) + (a_shape[-2], m)
        elif op == "sum_to_size":
            if not a_shape:
                continue
            drop = draw(st.integers(0, len(a_shape) - 1))
            shape = [1 if draw(st.booleans()) else n for n in a_shape[drop:]]
            args, out_shape, out_pos = [a_name, shape], tuple(shape), a_pos
        elif op in ("softmax", "log_softmax"):
            if not a_shape:
                continue
            dim = draw(st.integers(-len(a_shape), len(a_shape) - 1))
            args, out_shape, out_pos = [a_name, dim], a_shape, op == "softmax"
        elif op == "max":
            if not a_shape:
                continue
            dim = draw(st.integers(-len(a_shape), len(a_shape) - 1))
            keepdim = draw(st.booleans())
            d = dim % len(a_shape)
            out_shape = tuple(1 if i == d else n for i, n in enumerate(a_shape)) if keepdim else \
                tuple(n for i, n in enumerate(a_shape) if i != d)
            args = [a_name, dim, keepdim]
        if op in POSITIVE_KEEPING:
            out_pos = a_pos
        steps.append(["let", name, op] + args)
        env.append((name, tuple(out_shape), bool(out_pos)))
    if not steps:
        steps.append(["let", "v1", "mul", env[0][0], 2.0])
        env.append(("v1", env[0][1], False))
    # sometimes fold an earlier value into the root: another diamond
    last_name, last_shape, _ = env[-1]
    if len(steps) > 1 and draw(st.booleans()):
        other = steps[draw(st.integers(0, len(steps) - 2))]
        other_shape = [s for n, s, _ in env if n == other[1]][0]
        shape = _broadcast(last_shape, other_shape)
        if shape is not None:
            steps.append(["let", "out", "add", last_name, other[1]])
            last_name, last_shape = "out", shape
    if last_shape == () or draw(st.booleans()):
        if last_shape != ():
            steps.append(["let", "loss", "sum", last_name, None, False])
            last_name = "loss"
        gradient = None
    else:
        gradient = np.round(rng.normal(size=last_shape), 3)
    if backward:
        steps.append(["backward", last_name, gradient, False])
    else:
        steps.append(["graph", last_name])
    return {"inputs": inputs, "given": given, "ops": steps}


# ---------------------------------------------------------------------------------------------
# the edge domain (catalogue.toml): 0-d and size-0 tensors, size-1 broadcasting (also against 0),
# dims in every spelling (negative, tuple, (), keepdim, duplicates, out of range), reflected number
# operands, pow with negative bases, ties under max, relu at 0, second backwards, retain_graph,
# hooks and retain_grad (twice) around them, accumulation, zero_grad, no_grad, errors then success.

EDGE_SHAPES = {
    "0-d": [()],
    "size-0": [(0,), (0, 3), (2, 0), (3, 0, 2)],
    "size-1": [(1,), (1, 3), (3, 1), (2, 1, 3), (1, 1)],
    "plain": [(3,), (2, 3), (2, 2, 3)],
}
EDGE_UNARY = ["neg", "exp", "tanh", "sigmoid", "relu", "pow", "log"]
EDGE_BINARY = ["add", "sub", "mul", "div"]
EDGE_SHAPE_OPS = ["sum", "mean", "max", "softmax", "log_softmax", "transpose", "reshape", "sum_to_size"]


def _partner_shape(draw, shape):
    """A shape that broadcasts with `shape`: trailing dims, some set to 1 (1 also meets 0), or 0-d."""
    k = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.integers(0, 2)) == 0 else n for n in shape[len(shape) - k:])


def _dim_spelling(draw, ndim):
    """A valid `dim` argument for sum/mean: None, (), an int (maybe negative), or a tuple of distinct dims."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return None
    if choice == 1:
        return []
    n = max(ndim, 1)
    if choice == 2 or ndim <= 1:
        d = draw(st.integers(0, n - 1))
        return d - n if draw(st.booleans()) else d
    dims = sorted(set(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim))))
    return [d - ndim if draw(st.booleans()) else d for d in draw(st.permutations(dims))]


def _reduced_shape(shape, dim, keepdim):
    ndim = len(shape)
    if dim is None or dim == []:
        dims = set(range(ndim))
        keepdim = keepdim and dim == []
    else:
        dims = {d % max(ndim, 1) for d in ([dim] if isinstance(dim, int) else dim)} if ndim else set()
    if keepdim:
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _values(rng, shape, kind):
    if kind == "ints":  # small integers: ties under max, exact zeros under relu, negative bases
        return rng.integers(-2, 3, size=shape).astype(np.float64)
    if kind == "positive":
        return np.round(rng.uniform(0.5, 2.0, size=shape), 3)
    return np.round(rng.normal(size=shape), 3)


EDGE_ALL = tuple(EDGE_UNARY + EDGE_BINARY + EDGE_SHAPE_OPS)


@st.composite
def edge_programs(draw, ops=EDGE_ALL, given=False, errors=True, hooks=True, second=True, end="backward"):
    """A program over the edge domain (see catalogue.toml) using only `ops`; with given=True, add/mul/sum
    are the lab's given ops (no broadcasting but against 0-d, full sums only), so the program tests the
    graph, the engine and the hooks alone. Ends in backwards (with hooks and retain_grad around them when
    `hooks`, repeated with retain_graph when `second`), or in a look at the graph (end="graph")."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    klass = draw(st.sampled_from(sorted(EDGE_SHAPES)))
    shape = tuple(draw(st.sampled_from(EDGE_SHAPES[klass])))
    kind = draw(st.sampled_from(("ints", "positive", "normal")))
    inputs = [["x", _values(rng, shape, kind), True]]
    env = [("x", shape, kind == "positive")]
    if draw(st.booleans()):
        other = (shape if draw(st.booleans()) else ()) if given else _partner_shape(draw, shape)
        okind = draw(st.sampled_from(("ints", "positive", "normal")))
        inputs.append(["y", _values(rng, other, okind), draw(st.integers(0, 3)) > 0])
        env.append(("y", other, okind == "positive"))
    steps = []
    n_steps = draw(st.integers(1, 4))
    attempts = 0
    ops = list(ops)
    while len(steps) < n_steps and attempts < 40:
        attempts += 1
        a_name, a_shape, a_pos = env[-1] if draw(st.booleans()) else env[draw(st.integers(0, len(env) - 1))]
        name = f"v{len(steps) + 1}"
        op = draw(st.sampled_from(ops))
        out_pos = False
        if op in EDGE_UNARY:
            args, out_shape = [a_name], a_shape
            if op == "pow":
                p = draw(st.sampled_from((2.0, 3.0, -1.0, 0.0, 0.5, 1.5, 1.0)))
                if p in (0.5, 1.5, -1.0) and not a_pos:
                    continue
                args, out_pos = [a_name, p], a_pos
            elif op == "log" and not a_pos:
                continue
            out_pos = out_pos or op in ("exp", "sigmoid")
        elif op in EDGE_BINARY:
            if draw(st.integers(0, 2)) == 0:
                number = draw(st.sampled_from((2.0, -0.5, 3.0)))
                args = [number, a_name] if draw(st.booleans()) else [a_name, number]
                if op == "div" and args[0] == number and not a_pos:
                    continue
                out_shape = a_shape
                out_pos = a_pos and number > 0 and op in ("add", "mul", "div")
            else:
                b_name, b_shape, b_pos = env[draw(st.integers(0, len(env) - 1))]
                if op == "div" and not b_pos:
                    continue
                out_shape = _broadcast(a_shape, b_shape)
                if out_shape is None or given and a_shape != b_shape and a_shape and b_shape:
                    continue
                args = [a_name, b_name] if draw(st.booleans()) or op == "div" else [b_name, a_name]
                out_pos = a_pos and b_pos and op in ("add", "mul", "div")
        else:
            ndim = len(a_shape)
            out_pos = a_pos
            if op in ("sum", "mean"):
                dim, keepdim = (None if given else _dim_spelling(draw, ndim)), draw(st.booleans())
                if op == "mean" and 0 in a_shape:
                    continue  # torch's mean over nothing is nan
                args, out_shape = [a_name, dim, keepdim], _reduced_shape(a_shape, dim, keepdim)
                if dim is None:
                    args[2], out_shape = False, ()
            elif op == "max":
                d = draw(st.integers(-max(ndim, 1), max(ndim, 1) - 1))
                if ndim and a_shape[d] == 0:
                    continue
                keepdim = draw(st.booleans())
                args, out_shape = [a_name, d, keepdim], _reduced_shape(a_shape, d, keepdim) if ndim else ()
            elif op in ("softmax", "log_softmax"):
                args, out_shape = [a_name, draw(st.integers(-max(ndim, 1), max(ndim, 1) - 1))], a_shape
                out_pos = op == "softmax"
            elif op == "transpose":
                n = max(ndim, 1)
                d0, d1 = draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1))
                s = list(a_shape)
                if ndim:
                    s[d0], s[d1] = s[d1], s[d0]
                args, out_shape = [a_name, d0, d1], tuple(s)
            elif op == "reshape":
                total = int(np.prod(a_shape))
                options = [[-1], [1, -1], [total, 1]] + ([[]] if total == 1 else [])
                new = draw(st.sampled_from(options))
                out_shape = tuple(total if n == -1 else n for n in new)
                args = [a_name, new]
            else:  # sum_to_size
                if not a_shape:
                    continue
                drop = draw(st.integers(0, len(a_shape)))
                target = [1 if draw(st.booleans()) else n for n in a_shape[drop:]]
                args, out_shape = [a_name, target], tuple(target)
        steps.append(["let", name, op] + args)
        env.append((name, tuple(out_shape), bool(out_pos)))
    if not steps:
        steps.append(["let", "v1", "mul", "x", 2.0])
        env.append(("v1", shape, False))
    if errors and draw(st.booleans()):
        step = _error_step(draw, env, [o for o in ops if not given or o in EDGE_BINARY])
        if step:
            steps.append(step)
    last, last_shape, _ = env[-1]
    if end == "graph":
        steps.append(["graph", last])
        return {"inputs": inputs, "given": given, "ops": steps, "ties": kind == "ints"}
    if hooks:
        lets = [s[1] for s in steps if s[0] == "let"]
        if len(lets) > 1 and draw(st.booleans()):
            target = draw(st.sampled_from(lets[:-1]))
            at = [k for k, s in enumerate(steps) if s[0] == "let" and s[1] == target][0]
            steps.insert(at + 1, ["hook", target, 1, draw(st.sampled_from((None, 2.0, "shift")))])
        if draw(st.booleans()):
            target = draw(st.sampled_from(lets))
            steps.append(["retain_grad", target])
            if draw(st.booleans()):
                steps.append(["retain_grad", target])
        if draw(st.booleans()):
            steps.append(["hook", "x", 2, draw(st.sampled_from((None, -1.0, "shift")))])
    if last_shape == () or int(np.prod(last_shape)) == 1 and draw(st.booleans()):
        gradient = None
    else:
        if draw(st.booleans()):
            steps.append(["backward", last, None, False])  # non-scalar without gradient: an error first
        gradient = np.round(rng.normal(size=last_shape), 3)
    again = draw(st.integers(0, 3)) if second else 0
    steps.append(["backward", last, gradient, again > 0])
    if again >= 2:
        steps.append(["zero_grad", "x"])
    if again:
        steps.append(["backward", last, gradient, False])
    if again == 3:
        steps.append(["backward", last, gradient, False])  # freed, unless nothing on the way saved values
    return {"inputs": inputs, "given": given, "ops": steps, "ties": kind == "ints"}


def _error_step(draw, env, ops):
    """An op that raises in torch (an "attempt" step) among `ops`: the error type is the answer."""
    name, shape, _ = env[draw(st.integers(0, len(env) - 1))]
    ndim = len(shape)
    n = max(ndim, 1)
    options = []
    if "sum" in ops or "mean" in ops:
        op = "sum" if "sum" in ops else "mean"
        options.append(["attempt", "e", op, name, draw(st.sampled_from((n, -n - 1))), False])
        if ndim:
            d = draw(st.integers(0, ndim - 1))
            options.append(["attempt", "e", op, name, [d, d - ndim], draw(st.booleans())])
    clash = [m for m, sh, _ in env if _broadcast(sh, shape) is None]
    binary = [o for o in ops if o in EDGE_BINARY]
    if clash and binary:
        options.append(["attempt", "e", draw(st.sampled_from(binary)), name, clash[0]])
    if "reshape" in ops:
        options.append(["attempt", "e", "reshape", name, [int(np.prod(shape)) + 1]])
    if "transpose" in ops:
        options.append(["attempt", "e", "transpose", name, 0, draw(st.sampled_from((n, -n - 1)))])
    if "max" in ops:
        options.append(["attempt", "e", "max", name, draw(st.sampled_from((n, -n - 1))), False])
        if 0 in shape:
            options.append(["attempt", "e", "max", name, shape.index(0), draw(st.booleans())])
    for op in ("softmax", "log_softmax"):
        if op in ops:
            options.append(["attempt", "e", op, name, draw(st.sampled_from((n, -n - 1)))])
    if "sum_to_size" in ops and ndim:
        options.append(["attempt", "e", "sum_to_size", name, [s + 2 for s in shape]])
    return draw(st.sampled_from(options)) if options else None

# IPT-CANARY lab02 strategies.py: hidden grading text, never shown to learners
