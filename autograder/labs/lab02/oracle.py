"""lab02 oracles (P0): the same program interpreter as the student side (autograder/labs/lab02/scenarios.py),
run on torch.autograd, plus comparisons that write learner-readable messages.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, settings

from autograder.engine import replies
from autograder.labs.lab02 import scenarios as interp

RTOL, ATOL = 1e-6, 1e-9

# errors whose message the notebook states: a learner's message must carry the same phrase as torch's
STATED_MESSAGES = ("does not require grad", "implicitly created only for scalar outputs", "Mismatch in shape",
                   "backward through the graph a second time")


def examples(n: int) -> settings:
    """Hypothesis settings for a grader: the cases are drawn from the grading seed (one per submission,
    the same on a regrade); no database, no deadline."""
    return settings(max_examples=n, deadline=None, database=None, print_blob=False,
                    suppress_health_check=list(HealthCheck))


class TorchAPI:
    given = False

    def tensor(self, value, requires_grad):
        return torch.tensor(np.array(value, dtype=np.float64), dtype=torch.float64, requires_grad=requires_grad)

    def numpy(self, t):
        return interp._safe(t.detach().numpy().copy())

    def grad(self, t):
        return None if t.grad is None else interp._safe(t.grad.detach().numpy().copy())

    def no_grad(self):
        return torch.no_grad()

    def is_grad_enabled(self):
        return torch.is_grad_enabled()

    def binary(self, op, a, b):
        return interp._binary(op, a, b)

    def full_sum(self, a):
        return a.sum()

    def node_name(self, node):
        return type(node).__name__

    def graph_grads(self, env, inputs, t):
        out = {n: None for n in inputs}
        leaves = [n for n in inputs if env[n].requires_grad]
        if t.grad_fn is None or not leaves:
            return out
        grads = torch.autograd.grad(t, [env[n] for n in leaves], grad_outputs=torch.ones_like(t), allow_unused=True,
                                    retain_graph=True)
        for n, g in zip(leaves, grads, strict=True):
            out[n] = None if g is None else self.numpy(g)
        return out


def torch_program(prog):
    return interp.interpret(TorchAPI(), prog)


def call(student, context: str, target: str, *args, within: float | None = None, **kwargs):
    """student.run (student.run_within `within` seconds when given), turning an uncaught learner error into a
    failure that says where it happened."""
    try:
        if within is not None:
            return student.run_within(within, target, *args, **kwargs)
        return student.run(target, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - only StudentError (and subclasses) become failures
        if any(cls.__name__ == "StudentError" for cls in type(exc).__mro__):
            # an AssertionError is a learner-side failure for the engine (pytest.fail counts as internal)
            raise AssertionError(f"{context}: {exc}") from None
        raise


# ---------------------------------------------------------------------------------------------
# describing programs to a learner


def _operand(x):
    return x if isinstance(x, str) else repr(float(x))


def _fmt_dim(d):
    return str(d) if isinstance(d, int) else str(tuple(d))


def expr(op) -> str:
    """`name = ...` for a let step, in PyTorch syntax."""
    name, opname, args = op[1], op[2], op[3:]
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
    if opname in sym:
        rhs = f"{_operand(args[0])} {sym[opname]} {_operand(args[1])}"
    elif opname == "neg":
        rhs = f"-{args[0]}"
    elif opname == "pow":
        rhs = f"{args[0]} ** {args[1]}"
    elif opname in ("sum", "mean"):
        if args[1] is None:
            rhs = f"{args[0]}.{opname}()"
        else:
            rhs = f"{args[0]}.{opname}({_fmt_dim(args[1])}, keepdim={args[2]})"
    elif opname in ("reshape", "sum_to_size"):
        rhs = f"{args[0]}.{opname}{tuple(args[1])}"
    elif opname == "transpose":
        rhs = f"{args[0]}.transpose({args[1]}, {args[2]})"
    elif opname in ("softmax", "log_softmax"):
        rhs = f"{args[0]}.{opname}({args[1]})"
    elif opname == "max":
        rhs = f"{args[0]}.max({args[1]}, keepdim={args[2]}).values"
    else:
        rhs = f"{args[0]}.{opname}()"
    return f"{name} = {rhs}"


def describe(prog, upto=None) -> str:
    """The program as one line of PyTorch, with the inputs' shapes."""
    ins = ", ".join(f"{n}{'*' if rg else ''} {tuple(np.shape(v))}" for n, v, rg in prog["inputs"])
    steps = []
    for i, op in enumerate(prog["ops"]):
        if upto is not None and i > upto:
            break
        kind = op[0]
        if kind == "let":
            steps.append(expr(op))
        elif kind == "attempt":
            steps.append(expr(op) + "  # may raise")
        elif kind == "backward":
            args = []
            if op[2] is not None:
                args.append(f"gradient of shape {tuple(np.shape(op[2]))}")
            if op[3]:
                args.append("retain_graph=True")
            steps.append(f"{op[1]}.backward({', '.join(args)})")
        elif kind == "hook":
            what = ("records grad" if op[3] is None else "returns grad + 1" if op[3] == "shift"
                    else f"returns grad * {op[3]}")
            steps.append(f"{op[1]}.register_hook(h{op[2]})  # h{op[2]} {what}")
        elif kind == "remove_hook":
            steps.append(f"handle_h{op[1]}.remove()")
        elif kind == "retain_grad":
            steps.append(f"{op[1]}.retain_grad()")
        elif kind == "zero_grad":
            steps.append(f"{op[1]}.grad = None")
        elif kind == "no_grad_begin":
            steps.append("enter no_grad()")
        elif kind == "no_grad_end":
            steps.append("exit no_grad()")
        elif kind == "grad_enabled":
            steps.append("is_grad_enabled()")
        elif kind == "no_grad_raises":
            steps.append("a no_grad() block that raises")
        elif kind == "decorated":
            steps.append(f"{op[1]} = f({op[2]}) with f decorated by @no_grad() computing {op[2]} * {op[3]}")
        elif kind == "graph":
            steps.append(f"inspect {op[1]}.grad_fn")
    return f"inputs {ins} (* = requires_grad); " + "; ".join(steps)


def fmt_index(idx) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _array_reply(got, what):
    """A learner reply that should be numbers: an array of numbers or a plain number; else a message."""
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (np.ndarray, int, float, np.integer, np.floating)):
        return f"{what} should be an array of numbers, got {replies.describe(got)}"
    if isinstance(got, np.ndarray) and got.dtype.kind not in "fiu":
        return f"{what} should hold numbers, got {replies.describe(got)}"
    return None


def compare_array(got, want, what, rtol=RTOL, atol=ATOL, show_expected=True):
    """None when got matches want (shape and values), else a message. `got` is a learner reply."""
    if want is None:
        if got is None:
            return None
        return f"{what} should be None (as in torch), got {replies.describe(got)}"
    want = np.asarray(want)
    if got is None:
        return f"{what} is None, expected an array of shape {tuple(want.shape)}"
    bad = _array_reply(got, what)
    if bad:
        return bad
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    got = got.astype(np.float64)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    idx = np.argwhere(~close)[0]
    if not show_expected:  # hidden generated cases: no expected values to harvest
        return f"{what} differs from torch at {fmt_index(idx)}: got {got[tuple(idx)].item()!r}"
    return (f"{what} differs from torch at {fmt_index(idx)}: got {got[tuple(idx)].item()!r}, "
            f"expected {want[tuple(idx)].item()!r}")


FLAG_FIELDS = ("requires_grad", "is_leaf", "grad_fn is not None")


def _event(e, where):
    """A log event from the learner side: a non-empty list starting with its kind (a string)."""
    if not isinstance(e, (list, tuple)) or not e or not isinstance(e[0], str) or len(e) < 2:
        raise AssertionError(f"{where}: the program's event log holds {replies.describe(e)}, expected an event")
    return list(e)


def _split_log(log, where):
    """(events, hook calls before each event and after the last): hook calls between two events may come in
    any order across tags (the engine's order is free), in order within one tag."""
    events, segments = [], [[]]
    for e in replies.list_of(log, f"{where}: the event log"):
        e = _event(e, where)
        if e[0] == "hook":
            segments[-1].append(e)
        else:
            events.append(e)
            segments.append([])
    return events, segments


def _compare_hooks(got, want, context, when, show_expected):
    by_tag = {}
    for e in want:
        by_tag.setdefault(e[1], [[], []])[1].append(e)
    for e in got:
        if len(e) != 3 or e[1] not in by_tag:
            tag = e[1] if len(e) > 1 and isinstance(e[1], int) and not isinstance(e[1], bool) else "?"
            return f"For `{context}`: hook h{tag} ran {when}, torch does not call it there"
        by_tag[e[1]][0].append(e)
    for tag, (g, w) in sorted(by_tag.items()):
        if len(g) != len(w):
            return (f"For `{context}`: hook h{tag} should run {len(w)} time(s) {when} (once per backward, with "
                    f"the total gradient), ran {len(g)} time(s)")
        for k, (ge, we) in enumerate(replies.pairs(g, w, "hook calls")):
            msg = compare_array(ge[2], we[2], f"the gradient passed to hook h{tag} (call {k + 1}) {when}",
                                show_expected=show_expected)
            if msg:
                return f"For `{context}`: {msg}"
    return None


def compare_runs(got, want, prog, show_expected=True) -> str | None:
    """Compare a learner run of `prog` (a reply, validated here) with torch's; None or the first
    difference, explained."""
    context = describe(prog)
    if not isinstance(got, dict) or not {"values", "flags", "log"} <= set(got):
        return f"For `{context}`: the program's reply should be a dict with values, flags and log, got {replies.describe(got)}"
    if not isinstance(got["values"], dict) or not isinstance(got["flags"], dict):
        return f"For `{context}`: the program's reply is malformed ({replies.describe(got['values'])})"
    for name, w in want["values"].items():
        msg = compare_array(got["values"].get(name), w, f"the value of {name}", show_expected=show_expected)
        if msg:
            return f"For `{context}`: {msg}"
    for name, w in want["flags"].items():
        g = got["flags"].get(name)
        if not isinstance(g, (list, tuple)) or len(g) != 3 or not all(isinstance(b, (bool, np.bool_)) for b in g):
            return f"For `{context}`: {name}: requires_grad / is_leaf / grad_fn should be {w}, got {replies.describe(g)}"
        if list(g) != list(w):
            detail = ", ".join(f"{FLAG_FIELDS[k]} should be {w[k]}" for k in range(3) if bool(g[k]) != bool(w[k]))
            return f"For `{context}`: {name}: {detail}"
    try:
        g_events, g_hooks = _split_log(got["log"], f"For `{context}`")
    except AssertionError as exc:
        return str(exc)
    w_events, w_hooks = _split_log(want["log"], "torch")
    for k, w in enumerate(w_events):
        g = g_events[k] if k < len(g_events) else None
        when = f"before `{step_text(prog, w[1])}` completes" if w[0] in ("backward", "error") else \
            f"before step {w[1] + 1}"
        msg = _compare_hooks(g_hooks[k] if k < len(g_hooks) else [], w_hooks[k], context, when, show_expected)
        if msg:
            return msg
        if g is None:
            return f"For `{context}`: {event_text(w, prog)} expected, but the program stopped earlier"
        if g[0] != w[0] or g[1] != w[1]:
            return f"For `{context}`: {event_text(w, prog)} expected, but {event_text(g, prog)}"
        if w[0] == "error":
            if len(g) != len(w) or not isinstance(g[2], str) or not isinstance(g[3], str):
                return f"For `{context}`: a malformed error report at `{step_text(prog, w[1])}`"
            if g[2] != w[2]:
                return f"For `{context}`: at `{step_text(prog, w[1])}` torch raises {w[2]}: {w[3][:120]}; you raised {g[2]}: {g[3][:160]}"
            stated = next((phrase for phrase in STATED_MESSAGES if phrase in w[3]), None)
            if stated and stated not in g[3]:  # the notebook gives these messages, and the order of the checks
                return (f"For `{context}`: at `{step_text(prog, w[1])}` torch raises {w[2]}: {w[3][:120]}; yours raised "
                        f"{g[2]} but says: {g[3][:160]}")
            # the state after an error found midway (freed saved values) depends on the engine's order,
            # which the lab leaves free: only errors found before any node runs have a fixed state
            midway = "second time" in w[3]
            msg = _compare_snapshot(g[4], w[4], f"after `{step_text(prog, w[1])}` (which raised)", show_expected) \
                if len(w) > 4 and not midway else None
            if msg:
                return f"For `{context}`: {msg}"
        elif w[0] == "backward":
            if len(g) != 3:
                return f"For `{context}`: a malformed backward report at step {w[1] + 1}"
            msg = _compare_snapshot(g[2], w[2], f"after `{step_text(prog, w[1])}` (step {w[1] + 1})", show_expected)
            if msg:
                return f"For `{context}`: {msg}"
        elif w[0] == "grad_enabled":
            if len(g) != 3 or not isinstance(g[2], (bool, np.bool_)) or bool(g[2]) != w[2]:
                return f"For `{context}`: is_grad_enabled() should be {w[2]} at step {w[1] + 1}, got {replies.describe(g[2:])}"
        elif w[0] == "graph":
            name = prog["ops"][w[1]][1]
            if len(g) != 4 or g[2] != w[2]:
                return f"For `{context}`: the graph behind {name} differs from torch's: {graph_diff(g[2:3], w[2])}"
            if not isinstance(g[3], dict):
                return f"For `{context}`: malformed gradients for the graph behind {name}: {replies.describe(g[3])}"
            for leaf, want_grad in w[3].items():
                msg = compare_array(g[3].get(leaf), want_grad, f"d(sum({name}))/d{leaf} found by walking your graph of {name}",
                                    show_expected=show_expected)
                if msg:
                    return f"For `{context}`: {msg}"
    msg = _compare_hooks(g_hooks[len(w_events)] if len(g_hooks) > len(w_events) else [], w_hooks[-1], context,
                         "after the last step", show_expected)
    if msg:
        return msg
    if len(g_events) != len(w_events):
        extra = g_events[len(w_events)]
        return f"For `{context}`: {event_text(extra, prog)}, which torch does not do"
    return None


def step_text(prog, i):
    return describe({"inputs": [], "ops": [prog["ops"][i]]}).split("; ", 1)[1]


def event_text(e, prog):
    if e[0] == "hook":
        return f"a call of hook h{e[1]}"
    if e[0] == "error":
        return f"`{step_text(prog, e[1])}` raised {e[2]}: {e[3][:160]}"
    if e[0] == "backward":
        return f"`{step_text(prog, e[1])}` completing"
    if e[0] in ("hooked", "retained", "ok"):
        return f"`{step_text(prog, e[1])}` succeeding"
    return f"{e[0]} at step {e[1] + 1}"


def _compare_snapshot(g, w, when, show_expected=True):
    if not isinstance(g, dict) or not isinstance(g.get("grads"), dict) or not isinstance(g.get("retained"), dict):
        return f"the gradients reported {when} should be a dict of grads, got {replies.describe(g)}"
    for name, want in w["grads"].items():
        msg = compare_array(g["grads"].get(name), want, f"{name}.grad {when}", show_expected=show_expected)
        if msg:
            return msg.replace(f"{name}.grad {when} differs", f"{name}.grad (d/d{name}) {when} differs")
    for name, want in w["retained"].items():
        msg = compare_array(g["retained"].get(name), want, f"{name}.grad (retained) {when}", show_expected=show_expected)
        if msg:
            return msg
    return None


def graph_diff(got, want):
    def show(rows):
        if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 2 and isinstance(r[1], list)
                                                 for r in rows):
            return replies.describe(rows)
        return "; ".join(f"{i}: {label} -> {['None' if c == -1 else c for c in kids]}" for i, (label, kids) in enumerate(rows))
    got = got[0] if got else None
    return (f"got [{show(got)}], expected [{show(want)}] (nodes in breadth-first order from grad_fn, edges to node "
            f"numbers; every edge is (node, 0))")


def check_program(student, prog, target="lab02.scenarios:program"):
    """Run prog on both sides and fail with a readable message when they differ."""
    want = torch_program(prog)
    got = call(student, f"For `{describe(prog)}`", target, prog)
    msg = compare_runs(got, want, prog)
    assert msg is None, msg


def check_generated(student, prog):
    """A hypothesis-generated program: skip unusable ones (non-finite values, ties), compare with torch."""
    from hypothesis import assume
    want = torch_program(prog)
    assume(usable(prog, want))
    got = call(student, f"For `{describe(prog)}`", "lab02.scenarios:program", prog)
    msg = compare_runs(got, want, prog, show_expected=False)
    assert msg is None, msg


def finite(result) -> bool:
    """All values and gradients of a torch run are finite and of moderate size."""
    arrays = list(result["values"].values())
    for e in result["log"]:
        if e[0] == "backward" or e[0] == "error" and len(e) > 4:
            snap = e[2] if e[0] == "backward" else e[4]
            arrays += [a for a in snap["grads"].values() if a is not None]
    arrays = [np.asarray(a) for a in arrays]
    return all(np.all(np.isfinite(a)) and np.all(np.abs(a) < 1e6) for a in arrays if a.dtype.kind == "f")


def numel(shape) -> int:
    return math.prod(shape)


def usable(prog, want, allow_nonfinite=False) -> bool:
    """A generated program is a fair test: finite, moderate values, and no ties under a max
    (programs marked "ties": true keep them: torch and this lab both pick the first maximum)."""
    if not allow_nonfinite and not finite(want):
        return False
    if prog.get("ties"):
        return True
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v, _ in prog["inputs"]}
    arrays.update({n: np.asarray(v) for n, v in want["values"].items()})
    for op in prog["ops"]:
        if op[0] == "let" and op[2] == "max" and np.ndim(arrays[op[3]]) and np.size(arrays[op[3]]):
            x = np.sort(arrays[op[3]], axis=op[4])
            if x.shape[op[4]] > 1:
                gap = np.diff(np.take(x, [-2, -1], axis=op[4]), axis=op[4])
                if np.any(gap < 1e-6):
                    return False
        if op[0] == "let" and op[2] == "relu":
            if np.any(np.abs(arrays[op[3]]) < 1e-9) and not np.all(arrays[op[3]] == 0):
                return False
    return True

# IPT-CANARY lab02 oracle.py: hidden grading text, never shown to learners
