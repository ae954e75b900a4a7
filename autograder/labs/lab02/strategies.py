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
                b = draw(st.sampled_from([2.0, -0.5, 3.0, 0.25]))
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
            p = draw(st.sampled_from([2.0, 3.0, 0.5, -1.0, 1.5, 0.0]))
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
            d0, d1 = draw(st.sampled_from([(0, 1), (-1, -2), (0, -1)]))
            s = list(a_shape)
            s[d0], s[d1] = s[d1], s[d0]
            args, out_shape = [a_name, d0, d1], tuple(s)
        elif op == "matmul":
            if len(a_shape) < 2:
                continue
            m = draw(st.integers(1, 3))
            batch = list(a_shape[:-2])
            if batch and draw(st.booleans()):
                batch = [1 if draw(st.booleans()) else n for n in batch][draw(st.integers(0, len(batch))):]
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

# IPT-CANARY lab02 strategies.py: hidden grading text, never shown to learners
