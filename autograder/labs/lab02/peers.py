# IPT-CANARY lab02 peers.py: hidden grading text, never shown to learners
"""Peer-suite cases for lab02: case lists written for this lab, modelled on public gradient suites.

Every case is a program in the lab's program format (autograder/labs/lab02/scenarios.py), run once on the
reference solution (assembled as grading assembles a submission) and once on torch.autograd through the same
interpreter (oracle.torch_program), then compared with oracle.compare_runs: values, flags, hook calls, error
types, gradients. The groups are modelled on (facts and ideas only, no code copied):

* PyTorch's OpInfo sample inputs, torch/testing/_internal/common_methods_invocations.py and opinfo/core.py
  (v2.13.0): sample_inputs_elementwise_binary, generate_elementwise_binary_broadcasting_tensors,
  generate_elementwise_binary_with_scalar_samples, sample_inputs_elementwise_unary, sample_inputs_reduction
  (_generate_reduction_inputs / _generate_reduction_kwargs), sample_inputs_max_min_reduction_with_dim,
  sample_inputs_softmax_variant (opinfo/definitions/_masked.py), sample_inputs_matmul, sample_inputs_mm,
  sample_inputs_bmm, sample_inputs_transpose_swapdims, sample_inputs_view_reshape / reference_inputs_view_reshape
  / error_inputs_view_reshape, sample_inputs_sum_to_size / error_inputs_sum_to_size, sample_inputs_linear,
  sample_inputs_cross_entropy, and the repeated-dim errors of error_inputs_aminmax_amax_amin;
* PyTorch's test/test_autograd.py: test_hooks, test_retain_grad, test_accumulate_grad,
  test_backward_twice_with_saved_values, test_backward_twice_retained_graph_with_saved_values,
  test_backward_twice_without_saved_values, test_backward_twice_retained_graph_without_saved_values,
  test_duplicate_backward_root, test_backward_no_grad, test_next_functions, test_no_grad, test_set_grad_enabled,
  test_requires_grad, test_detach;
* karpathy/micrograd test/test_engine.py: test_sanity_check, test_more_ops (and the tanh/exp points of the
  unary checks found in some copies of that file).

Sizes are scaled down (S=3, M=4, XS=2 instead of OpInfo's 5/10/3) so that the whole list runs in seconds.
Where the lab deliberately differs from PyTorch (its matmul needs both operands at least 2-D), the cases check
the lab's stated behaviour on the reference alone (SPEC).

    run() -> number of cases; raises AssertionError listing every disagreement.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from autograder.labs.lab02 import oracle, scenarios

S, M, XS, L = 3, 4, 2, 5
_RNG = np.random.default_rng(20130)


def _val(shape, kind="any"):
    """Fixed values for a case: "any" normal, "pos" in [0.5, 2), "away" normal but at least 0.5 from 0."""
    shape = tuple(shape)
    if kind == "pos":
        return np.round(_RNG.uniform(0.5, 2.0, size=shape), 4)
    if kind == "away":
        return np.round(_RNG.uniform(0.5, 2.0, size=shape) * _RNG.choice([-1.0, 1.0], size=shape), 4)
    return np.round(_RNG.normal(size=shape), 4)


def _out_shape(prog, name):
    """The shape of value `name` of a program without its backward (torch computes it, at build time)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = oracle.torch_program({"inputs": prog["inputs"], "given": prog.get("given", False),
                                    "ops": [op for op in prog["ops"] if op[0] != "backward"]})
    return np.shape(run["values"][name])


def _with_backward(prog, root, retain=False):
    """Append a backward of `root`: implicit ones for a 0-d root, else a fixed random gradient of its shape."""
    shape = _out_shape(prog, root)
    gradient = None if shape == () else _val(shape)
    prog["ops"].append(["backward", root, gradient, retain])
    return prog


def _prog(inputs, ops, root=None, given=False, **extra):
    """A program; `root` (a name or a list of names of separate graphs) gets a backward each."""
    prog = {"inputs": [list(i) for i in inputs], "given": given, "ops": [list(op) for op in ops], **extra}
    for r in ([] if root is None else [root] if isinstance(root, str) else root):
        _with_backward(prog, r)
    return prog


CASES: list[tuple[str, dict]] = []   # (label, program): compared with torch
SPEC: list[tuple[str, dict, str]] = []  # (label, program, expected error type): the lab's own rule, reference only


def case(label, prog):
    CASES.append((label, prog))


# ---------------------------------------------------------------------------------------------------------
# OpInfo: sample_inputs_elementwise_binary (add, sub, mul, div): the nine lhs/rhs shape pairs, 0-d and
# size-0 included, one case per pair with each op backwarded on its own; div's rhs kept away from zero
# (OpInfo's rhs exclude_zero).

BINARY_SHAPES = [((), ()), ((S,), ()), ((S, 1), (S,)), ((M, S), ()), ((S, M, S), (M, S)), ((S, M, S), (S, M, S)),
                 ((M, 1, S), (M, S)), ((M, 1, S), (1, M, S)), ((0, 1, XS), (0, M, XS))]
for lhs, rhs in BINARY_SHAPES:
    case(f"opinfo binary add/sub/mul/div {lhs} with {rhs}",
         _prog([["a", _val(lhs), True], ["b", _val(rhs, "away"), True]],
               [["let", f"r_{op}", op, "a", "b"] for op in ("add", "sub", "mul", "div")],
               root=[f"r_{op}" for op in ("add", "sub", "mul", "div")]))

# OpInfo: generate_elementwise_binary_broadcasting_tensors: eleven broadcasting pairs, all four ops in one
# program; only the rhs requires grad in every other pair (OpInfo checks each input's gradient).
BROADCAST_SHAPES = [((1,), ()), ((2,), ()), ((1,), (2,)), ((2, 1), (2,)), ((1, 2), (2,)), ((3, 2), (2,)),
                    ((1, 3, 2), (2,)), ((1, 3, 2), (3, 2)), ((3, 1, 2), (3, 2)), ((2, 3, 2), ()),
                    ((3, 1, 2), (1, 3, 2))]
for k, (lhs, rhs) in enumerate(BROADCAST_SHAPES):
    ops = [["let", "p", "add", "a", "b"], ["let", "q", "sub", "a", "b"], ["let", "m", "mul", "a", "b"],
           ["let", "d", "div", "a", "b"], ["let", "t1", "add", "p", "q"], ["let", "t2", "add", "m", "d"],
           ["let", "r", "mul", "t1", "t2"]]
    case(f"opinfo broadcasting {lhs} with {rhs}",
         _prog([["a", _val(lhs), k % 2 == 0], ["b", _val(rhs, "away"), True]], ops, root="r"))

# A size-1 dim meeting a size-0 one (numpy/PyTorch broadcasting, stated in the notebook): the size-1 side's
# gradient is a sum over nothing, 0, of its own shape.
for lhs, rhs in (((1,), (0,)), ((2, 1), (2, 0)), ((1, 1, S), (0, 1, 1))):
    case(f"broadcasting size-1 {lhs} against size-0 {rhs}",
         _prog([["a", _val(lhs), True], ["b", _val(rhs, "away"), True]],
               [["let", "p", "add", "a", "b"], ["let", "m", "mul", "a", "b"], ["let", "r", "sub", "p", "m"]],
               root="r"))

# OpInfo: generate_elementwise_binary_with_scalar_samples: a Python number on the right, then on the left
# (reflected + - * /), over the shapes (), (3,), (5, 3), (0, 1, 3), (1, 5).
for shape in ((), (S,), (L, S), (0, 1, S), (1, L)):
    ops = [["let", "p", "add", "a", 1.25], ["let", "q", "sub", "a", -0.5], ["let", "m", "mul", "a", 3.0],
           ["let", "d", "div", "a", -2.0], ["let", "rp", "add", 0.75, "a"], ["let", "rq", "sub", 2.0, "a"],
           ["let", "rm", "mul", -1.5, "a"], ["let", "rd", "div", 4.0, "a"],
           ["let", "s1", "mul", "p", "q"], ["let", "s2", "mul", "m", "d"], ["let", "s3", "mul", "rp", "rq"],
           ["let", "s4", "add", "rm", "rd"], ["let", "s5", "add", "s1", "s2"], ["let", "s6", "add", "s3", "s4"],
           ["let", "r", "add", "s5", "s6"]]
    case(f"opinfo scalar operands on {shape}", _prog([["a", _val(shape, "away"), True]], ops, root="r"))

# ---------------------------------------------------------------------------------------------------------
# OpInfo: sample_inputs_elementwise_unary: shapes (L,), (1, 0, 3), () and a 2-D one, inside each op's domain
# (log on positive values), for neg exp log tanh sigmoid relu: one case per op, one graph per shape.
UNARY_SHAPES = ((L,), (1, 0, S), (), (S, M))
for op in ("neg", "exp", "log", "tanh", "sigmoid", "relu"):
    case(f"opinfo unary {op} on {UNARY_SHAPES}",
         _prog([[f"a{k}", _val(shape, "pos" if op == "log" else "any"), True] for k, shape in enumerate(UNARY_SHAPES)],
               [["let", f"r{k}", op, f"a{k}"] for k in range(len(UNARY_SHAPES))],
               root=[f"r{k}" for k in range(len(UNARY_SHAPES))]))

# pow with a number exponent (OpInfo pow's rhs-scalar samples): integer exponents on any base, fractional
# exponents on positive bases, and exponent 0 (PyTorch's gradient is 0 there).
for p in (2.0, 3.0, -1.0, -2.0, 1.0, 0.0):
    case(f"opinfo pow any base ** {p}", _prog([["a", _val((S, M), "away"), True]], [["let", "r", "pow", "a", p]],
                                              root="r"))
for p in (0.5, -0.5, 1.5, 2.5):
    case(f"opinfo pow positive base ** {p}", _prog([["a", _val((S, M), "pos"), True]],
                                                   [["let", "r", "pow", "a", p]], root="r"))
# at exactly 0: 0 ** 0 (gradient 0), 0 ** 2 (0), 0 ** 1 (1), 0 ** 1.5 (0)
for p in (0.0, 2.0, 1.0, 1.5):
    case(f"pow at zero ** {p}", _prog([["a", np.array([0.0, -1.5, 2.0]), True]], [["let", "r", "pow", "a", p]],
                                      root="r"))
# relu at exactly 0 takes gradient 0 (PyTorch's threshold_backward), also under an infinite incoming gradient
case("relu at zero", _prog([["a", np.array([[-1.0, 0.0, 2.0], [0.0, 3.0, -0.5]]), True]],
                           [["let", "r", "relu", "a"]], root="r"))
case("relu at zero feeding sqrt", _prog([["a", np.array([-1.0, 0.0, 2.0]), True]],
                                        [["let", "r", "relu", "a"], ["let", "p", "pow", "r", 0.5],
                                         ["let", "s", "sum", "p", None, False]], root="s"))

# ---------------------------------------------------------------------------------------------------------
# OpInfo: sample_inputs_reduction for sum and mean: inputs of shapes (), (2,), (3, 5), (3, 2, 1, 2) with the
# dim/keepdim spellings of _generate_reduction_kwargs (default, (0, keepdim), -1, the middle dim, every dim as
# a tuple, (0, -1) keepdim, every other dim).


def reduction_kwargs(ndim):
    yield None, False
    yield 0, True
    yield -1, False
    if ndim > 2:
        yield ndim // 2, True
    yield list(range(ndim)), False
    if ndim > 1:
        yield [0, -1], True
    if ndim > 3:
        yield list(range(1, ndim, 2)), False


for shape in ((), (2,), (3, 5), (3, 2, 1, 2)):
    for dim, keepdim in reduction_kwargs(len(shape)):
        case(f"opinfo sum and mean {shape} dim={dim} keepdim={keepdim}",
             _prog([["a", _val(shape), True]], [["let", "r", "sum", "a", dim, keepdim],
                                                ["let", "m", "mean", "a", dim, keepdim]], root=["r", "m"]))
for op in ("sum", "mean"):
    # size-0 inputs (a sum over nothing is 0; a mean over nothing is nan, with an empty gradient)
    case(f"{op} over a size-0 dim", _prog([["a", np.zeros((0, S)), True]], [["let", "r", op, "a", 0, False]],
                                          root="r"))
    case(f"{op} of a size-0 tensor, other dim", _prog([["a", np.zeros((0, S)), True]],
                                                      [["let", "r", op, "a", 1, True]], root="r"))

# Repeated dims (error_inputs_aminmax_amax_amin: (0, 0) and (0, -4) on a 4-D tensor) and an out-of-range dim,
# each followed by the same reduction that works.
for op in ("sum", "mean"):
    for bad in ([0, 0], [0, -4], 4):
        case(f"{op} dim={bad} on 4-D raises", _prog(
            [["a", _val((2, 1, S, 2)), True]],
            [["attempt", "e", op, "a", bad, False], ["let", "r", op, "a", [0, -1], False]], root="r"))

# ---------------------------------------------------------------------------------------------------------
# OpInfo: sample_inputs_max_min_reduction_with_dim: (S, S, S) over dim 1 with and without keepdim, and a 0-d
# tensor over dim 0; plus negative dims, a tie (the first maximum takes the gradient) and a size-0 dim (error).
for shape, dim, keepdim in (((S, S, S), 1, False), ((S, S, S), 1, True), ((), 0, False), ((), 0, True),
                            ((S, M), -1, False), ((S, M, 2), -3, True), ((), -1, False)):
    case(f"opinfo max {shape} dim={dim} keepdim={keepdim}",
         _prog([["a", _val(shape), True]], [["let", "v", "max", "a", dim, keepdim]], root="v"))
case("max with ties", _prog([["a", np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]]), True]],
                            [["let", "v", "max", "a", 1, False]], root="v", ties=True))
case("max over a size-0 dim raises", _prog([["a", np.zeros((S, 0)), True]],
                                           [["attempt", "e", "max", "a", 1, False],
                                            ["let", "v", "max", "a", 0, False]], root="v"))

# OpInfo: sample_inputs_softmax_variant for softmax and log_softmax: ((S,), 0), ((S, S), 0), ((S, S), 1),
# ((S, S), -1), ((S, M, S), 2), ((S, 0, 0), -1), ((), 0); plus extreme logits (the stable forward).
for op in ("softmax", "log_softmax"):
    for shape, dim in (((S,), 0), ((S, S), 0), ((S, S), 1), ((S, S), -1), ((S, M, S), 2), ((S, 0, 0), -1),
                       ((), 0)):
        case(f"opinfo {op} {shape} dim={dim}",
             _prog([["a", _val(shape), True]], [["let", "r", op, "a", dim]], root="r"))
    case(f"{op} of extreme logits", _prog([["a", np.array([[1000.0, 0.0, -1000.0], [-800.0, -801.0, 700.0],
                                                          [-1000.0, -999.0, -1001.0]]), True]],
                                          [["let", "r", op, "a", 1]], root="r"))
    case(f"{op} dim out of range raises", _prog([["a", _val((S, S)), True]],
                                                [["attempt", "e", op, "a", 2], ["let", "r", op, "a", -2]], root="r"))

# ---------------------------------------------------------------------------------------------------------
# OpInfo: sample_inputs_matmul (the pairs where both sides are at least 2-D), sample_inputs_mm, sample_inputs_bmm.
for lhs, rhs in (((S, M), (M, S)), ((S, 0), (0, M)), ((S, S, M), (M, S)), ((S, S, 0), (0, S)), ((S, M), (S, M, S)),
                 ((0, 0), (S, 0, 0)), ((S, S, M, M), (S, S, M, S)), ((S, S, S), (1, S, S)), ((2, S, M), (2, M, S))):
    case(f"opinfo matmul {lhs} @ {rhs}",
         _prog([["a", _val(lhs), True], ["b", _val(rhs), True]], [["let", "r", "matmul", "a", "b"]], root="r"))
case("matmul shapes that do not fit raise", _prog([["a", _val((S, M)), True], ["b", _val((S, M)), True]],
                                                  [["attempt", "e", "matmul", "a", "b"],
                                                   ["let", "t", "transpose", "b", 0, 1],
                                                   ["let", "r", "matmul", "a", "t"]], root="r"))
# The lab's stated rule (a deliberate difference): matmul needs both sides at least 2-D; OpInfo's 1-D pairs raise.
for lhs, rhs in (((L,), (L,)), ((S, M), (M,)), ((M,), (M, S)), ((S, S, M), (M,)), ((M,), (S, M, S)),
                 ((S, S, M, M), (M,)), ((M,), (S, S, M, S))):
    SPEC.append((f"lab rule: matmul {lhs} @ {rhs} (a 1-D side)",
                 _prog([["a", _val(lhs), True], ["b", _val(rhs), True]], [["attempt", "r", "matmul", "a", "b"]]),
                 "RuntimeError"))

# OpInfo: sample_inputs_transpose_swapdims: negative and repeated dims, 0-d and 1-element tensors.
for shape, d0, d1 in (((1, 2, 3), -1, -2), ((1, 2, 3), -1, 2), ((1, 2, 3), 1, -2), ((1, 2, 3), 1, 2), ((), 0, 0),
                      ((1,), 0, 0), ((M, M), 0, 1), ((S, S, S), 2, 0)):
    case(f"opinfo transpose {shape} ({d0}, {d1})",
         _prog([["a", _val(shape), True]], [["let", "r", "transpose", "a", d0, d1]], root="r"))

# OpInfo: sample_inputs_view_reshape and reference_inputs_view_reshape (-1 inferred, 0-d, size-0, size-1 dims),
# and error_inputs_view_reshape (another numel, no valid inference, two -1, 0 elements with -1).
for a, b in (((S, S, S), (S * S, S)), ((S * S, S), (S, S, S)), ((S * S, S), (S, -1, S)), ((S * S * 2, S), (S, -1)),
             ((S,), (S,)), ((), ()), ((), (1,)), ((1,), ()), ((25,), (5, 5)), ((1, 5, 1, 5), (25, 1)),
             ((2, 1, 0, 3, 1), (5, 0)), ((), (-1,)), ((4, 3, 1, 1), (1, 4, 3, -1))):
    case(f"opinfo reshape {a} -> {b}",
         _prog([["a", _val(a), True]], [["let", "r", "reshape", "a", list(b)]], root="r"))
for a, b in (((2,), ()), ((1, 3, 0), ()), ((4, 3), (4, 2)), ((1, 3, 5), (5, 2, 2)), ((1, 3, 5), (5, -1, 2)),
             ((1, 3, 5), (5, -1, -1)), ((1,), (0, -1)), ((0, 5), (0, -1))):
    case(f"opinfo reshape error {a} -> {b}",
         _prog([["a", _val(a), True]], [["attempt", "e", "reshape", "a", list(b)],
                                        ["let", "r", "reshape", "a", [-1]]], root="r"))

# OpInfo: sample_inputs_sum_to_size and error_inputs_sum_to_size (differentiable x.sum_to_size(*shape)).
for a, b in (((), ()), ((S,), (1,)), ((S, S), (1, 1)), ((S, S), (1, S)), ((S, S), (S, S)), ((S, S, S), (S, 1, S)),
             ((2, S, S), (S,)), ((2, S, 1), (1, 1))):
    case(f"opinfo sum_to_size {a} -> {b}",
         _prog([["a", _val(a), True]], [["let", "m", "mul", "a", 2.0], ["let", "r", "sum_to_size", "m", list(b)]],
               root="r"))
for a, b in (((M, S, M), (M, M)), ((M + 1, S, S, M), (M + 1, 1))):
    case(f"opinfo sum_to_size error {a} -> {b}",
         _prog([["a", _val(a), True]], [["attempt", "e", "sum_to_size", "a", list(b)],
                                        ["let", "r", "sum_to_size", "a", [1] * len(b)]], root="r"))

# ---------------------------------------------------------------------------------------------------------
# test/test_autograd.py behaviours.
ONES23 = np.ones((2, 3))
X23, Y23 = _val((2, 3)), _val((2, 3))
G23 = _val((2, 3))

# test_hooks: z = x**2 + x*2 + x*y + y; recording hooks on a leaf and a result over three backwards with
# retain_graph, one removed, then a hook that doubles the gradient on z, then one on the leaf y as well.
case("test_hooks", _prog(
    [["x", ONES23, True], ["y", ONES23 * 4, True]],
    [["let", "x2", "pow", "x", 2.0], ["let", "xm", "mul", "x", 2.0], ["let", "xy", "mul", "x", "y"],
     ["let", "z1", "add", "x2", "xm"], ["let", "z2", "add", "z1", "xy"], ["let", "z", "add", "z2", "y"],
     ["hook", "x", 1, None], ["hook", "z", 2, None],
     ["backward", "z", ONES23, True],
     ["hook", "z", 3, None],
     ["backward", "z", ONES23, True],
     ["remove_hook", 3],
     ["backward", "z", ONES23, True],
     ["remove_hook", 2], ["hook", "z", 4, 2.0], ["zero_grad", "y"],
     ["backward", "z", ONES23, True],
     ["hook", "y", 5, 2.0], ["zero_grad", "y"],
     ["backward", "z", ONES23, False]]))
# test_hooks, given-op version (the graph/engine parts' locked ops), with a shifting hook on a shared value:
# called once per backward with the total gradient.
case("test_hooks (given ops, shift on a shared value)", _prog(
    [["x", X23, True], ["y", Y23, True]],
    [["let", "a", "mul", "x", "y"], ["let", "b", "mul", "a", "a"], ["let", "c", "add", "b", "a"],
     ["hook", "a", 1, "shift"], ["hook", "x", 2, None], ["let", "s", "sum", "c", None, False],
     ["backward", "s", None, True], ["backward", "s", None, False]], given=True))

# test_retain_grad: retain_grad twice on h1 = input * 3, two retained backwards accumulate, then the leaf's
# retain_grad (a no-op) twice and a last backward.
case("test_retain_grad", _prog(
    [["input", _val((1, 3), "pos"), True]],
    [["let", "h1", "mul", "input", 3.0], ["let", "sq", "mul", "h1", "h1"], ["let", "out", "sum", "sq", None, False],
     ["retain_grad", "h1"], ["retain_grad", "h1"],
     ["backward", "out", None, True], ["backward", "out", None, True],
     ["zero_grad", "input"], ["retain_grad", "input"], ["retain_grad", "input"],
     ["backward", "out", None, False]]))
# retain_grad with a modifying hook on the same tensor (.grad shows the hooked gradient) and on a constant
case("test_retain_grad with a hook", _prog(
    [["x", X23, True], ["c", Y23, False]],
    [["let", "a", "mul", "x", "c"], ["retain_grad", "a"], ["hook", "a", 1, 3.0], ["let", "b", "mul", "a", "a"],
     ["let", "k", "mul", "c", 2.0], ["retain_grad", "k"], ["let", "s", "sum", "b", None, False],
     ["backward", "s", None, False]]))

# test_accumulate_grad: y = x + 2 backwarded twice (retain_graph first): x.grad doubles.
case("test_accumulate_grad", _prog([["x", X23, True]],
                                   [["let", "y", "add", "x", 2.0], ["backward", "y", ONES23, True],
                                    ["backward", "y", ONES23, False]]))
case("accumulation across two graphs", _prog(
    [["x", X23, True]],
    [["let", "a", "sum", "x", None, False], ["backward", "a", None, False],
     ["let", "b", "mul", "x", "x"], ["let", "c", "sum", "b", None, False], ["backward", "c", None, False]]))

# test_backward_twice_*: saved values freed after a backward without retain_graph (error), kept with it;
# nodes that save nothing can run twice.
B3 = _val((3,))
case("test_backward_twice_with_saved_values", _prog(
    [["b", B3, True]], [["let", "c", "mul", "b", "b"], ["backward", "c", np.ones(3), False],
                        ["backward", "c", np.ones(3), False]]))
case("test_backward_twice_retained_graph_with_saved_values", _prog(
    [["b", B3, True]], [["let", "c", "mul", "b", "b"], ["backward", "c", np.ones(3), True],
                        ["backward", "c", np.ones(3), False]]))
case("test_backward_twice_without_saved_values", _prog(
    [["b", B3, True]], [["let", "c", "add", "b", 1.0], ["backward", "c", np.ones(3), False],
                        ["backward", "c", np.ones(3), False]]))
case("test_backward_twice_retained_graph_without_saved_values", _prog(
    [["b", B3, True]], [["let", "c", "add", "b", 1.0], ["backward", "c", np.ones(3), True],
                        ["backward", "c", np.ones(3), False]]))
case("backward twice through exp/tanh/softmax saved values", _prog(
    [["b", B3, True]], [["let", "e", "exp", "b"], ["let", "t", "tanh", "e"], ["let", "p", "softmax", "t", 0],
                        ["let", "s", "sum", "p", None, False], ["backward", "s", None, True],
                        ["backward", "s", None, False], ["backward", "s", None, False]]))

# test_duplicate_backward_root: the same root twice (here as two backward calls) gives twice the gradient
G23b = _val((2, 3))
case("test_duplicate_backward_root", _prog(
    [["a", X23, True], ["b", Y23, True]],
    [["let", "x", "mul", "a", "b"], ["backward", "x", G23b, True], ["backward", "x", G23b, False]]))

# test_backward_no_grad: a non-scalar root without a gradient raises; the same root with one works.
case("test_backward_no_grad", _prog(
    [["a", X23, True]], [["let", "b", "add", "a", 2.0], ["backward", "b", None, False],
                         ["backward", "b", G23, False]]))

# Backward's arguments (torch.autograd.backward's checks): a gradient of another shape raises even with the same
# number of elements ((1,) for a 0-d root, (3, 2) for a (2, 3) root), then the right shape works; a leaf as the
# root sends its gradient straight to its AccumulateGrad (hooks on it included).
case("backward gradient (1,) for a 0-d root", _prog(
    [["a", X23, True]], [["let", "s", "sum", "a", None, False], ["backward", "s", np.ones(1), True],
                         ["backward", "s", np.array(1.5), False]]))
case("backward gradient (3, 2) for a (2, 3) root", _prog(
    [["a", X23, True]], [["let", "m", "mul", "a", "a"], ["backward", "m", np.ones((3, 2)), True],
                         ["backward", "m", G23, False]]))
case("backward on a leaf root", _prog(
    [["x", X23, True]], [["hook", "x", 1, 2.0], ["backward", "x", G23, False], ["backward", "x", G23, False]]))
case("backward on a 0-d leaf root without gradient", _prog(
    [["x", np.array(3.0), True]], [["backward", "x", None, False], ["let", "y", "mul", "x", "x"],
                                   ["backward", "y", None, False]]))

# test_next_functions: a + b has two AccumulateGrad edges; (a + b) + 5 has the first node and a None edge.
case("test_next_functions", _prog(
    [["x", X23, True], ["y", Y23, True]],
    [["let", "a", "add", "x", "y"], ["graph", "a"], ["let", "b", "add", "a", 5.0], ["graph", "b"]]))
case("test_next_functions (given ops, leaf used twice)", _prog(
    [["x", X23, True], ["c", Y23, False]],
    [["let", "a", "mul", "x", "x"], ["graph", "a"], ["let", "b", "add", "a", "c"], ["let", "d", "mul", "b", "a"],
     ["graph", "d"]], given=True))

# test_no_grad: results under no_grad do not require grad and have no grad_fn; backward through one raises;
# the decorator form; nesting restores the outer mode (test_set_grad_enabled); a block left by an exception
# restores it as well.
case("test_no_grad", _prog(
    [["x", ONES23, True], ["y", ONES23 * 4, False]],
    [["no_grad_begin"], ["grad_enabled"], ["let", "w", "add", "x", "y"], ["no_grad_end"], ["grad_enabled"],
     ["backward", "w", ONES23, False],
     ["decorated", "z", "x", 2.0],
     ["let", "v", "add", "x", "y"], ["backward", "v", ONES23, False]]))
case("test_set_grad_enabled (nested no_grad, exception)", _prog(
    [["x", np.array([1.0]), True]],
    [["no_grad_begin"], ["no_grad_begin"], ["let", "a", "mul", "x", 2.0], ["no_grad_end"], ["grad_enabled"],
     ["let", "b", "mul", "x", 3.0], ["no_grad_end"], ["grad_enabled"], ["no_grad_raises"],
     ["let", "c", "mul", "x", 4.0], ["backward", "c", None, False]]))

# test_requires_grad: a result of inputs that need no grad needs none (backward raises); mixing in one
# that does makes the result require grad.
case("test_requires_grad", _prog(
    [["x", X23, False], ["y", Y23, False], ["z", G23, True]],
    [["let", "a", "add", "x", "y"], ["backward", "a", ONES23, False], ["let", "b", "add", "a", "z"],
     ["backward", "b", ONES23, False]]))

# test_detach: a detached value is a leaf outside the graph; only the direct path reaches x.
case("test_detach", _prog(
    [["x", X23, True]],
    [["let", "y", "add", "x", 2.0], ["let", "yd", "detach", "y"], ["let", "z", "mul", "yd", 4.0],
     ["let", "y2", "mul", "x", 2.0], ["let", "y2d", "detach", "y2"], ["let", "w", "add", "x", "y2d"],
     ["let", "s", "sum", "w", None, False], ["backward", "s", None, False]]))

# ---------------------------------------------------------------------------------------------------------
# micrograd test/test_engine.py: test_sanity_check and test_more_ops, on one-element tensors (as micrograd
# compares with torch.Tensor([v])) and on 0-d tensors; and the tanh/exp points of its unary checks.


def sanity_check(shape):
    x = np.full(shape, -4.0)
    return _prog([["x", x, True]], [
        ["let", "t1", "mul", 2.0, "x"], ["let", "t2", "add", "t1", 2.0], ["let", "z", "add", "t2", "x"],
        ["let", "zr", "relu", "z"], ["let", "zx", "mul", "z", "x"], ["let", "q", "add", "zr", "zx"],
        ["let", "zz", "mul", "z", "z"], ["let", "h", "relu", "zz"], ["let", "qx", "mul", "q", "x"],
        ["let", "y1", "add", "h", "q"], ["let", "y", "add", "y1", "qx"], ["backward", "y", None, False]])


def more_ops(shape):
    a, b = np.full(shape, -4.0), np.full(shape, 2.0)
    return _prog([["a", a, True], ["b", b, True]], [
        ["let", "c", "add", "a", "b"],
        ["let", "ab", "mul", "a", "b"], ["let", "b3", "pow", "b", 3.0], ["let", "d", "add", "ab", "b3"],
        ["let", "c1", "add", "c", "c"], ["let", "c2", "add", "c1", 1.0],            # c = c + c + 1
        ["let", "c3", "add", 1.0, "c2"], ["let", "c4", "add", "c3", "c2"], ["let", "na", "neg", "a"],
        ["let", "c5", "add", "c4", "na"],                                           # c = c + 1 + c + (-a)
        ["let", "d2", "mul", "d", 2.0], ["let", "ba", "add", "b", "a"], ["let", "bar", "relu", "ba"],
        ["let", "d3", "add", "d", "d2"], ["let", "d4", "add", "d3", "bar"],         # d = d + d * 2 + (b + a).relu()
        ["let", "d5", "mul", 3.0, "d4"], ["let", "bma", "sub", "b", "a"], ["let", "bmar", "relu", "bma"],
        ["let", "d6", "add", "d4", "d5"], ["let", "d7", "add", "d6", "bmar"],       # d = d + 3 * d + (b - a).relu()
        ["let", "e", "sub", "c5", "d7"], ["let", "f", "pow", "e", 2.0], ["let", "g1", "div", "f", 2.0],
        ["let", "g2", "div", 10.0, "f"], ["let", "g", "add", "g1", "g2"], ["backward", "g", None, False]])


for shape in ((1,), ()):
    case(f"micrograd test_sanity_check {shape}", sanity_check(shape))
    case(f"micrograd test_more_ops {shape}", more_ops(shape))
for op in ("tanh", "exp"):
    for v in (-1.0, 0.123, 2.0):
        case(f"micrograd unary {op}({v})", _prog([["x", np.array([v]), True]],
                                                 [["let", "y", op, "x"], ["backward", "y", None, False]]))

# ---------------------------------------------------------------------------------------------------------
# The mlp part, through its scenarios, against torch.nn.functional: OpInfo sample_inputs_linear (features
# (3, 4) and (8, 8); batch shapes (0,), (8,), (2, 3); the 5-D input; the lab's Linear always has a bias and
# needs a batch dim) and sample_inputs_cross_entropy (class targets, mean reduction: the lab's cross_entropy).
MLP_CASES: list[tuple[str, str, tuple]] = []
for (n_in, n_out), batch in [((3, 4), (0,)), ((3, 4), (8,)), ((3, 4), (2, 3)), ((8, 8), (8,)), ((8, 8), (2, 3)),
                             ((2, 4), (2, 1, 2, 1))]:
    MLP_CASES.append((f"opinfo linear in={n_in} out={n_out} batch={batch}", "linear",
                      (np.round(_RNG.uniform(-2, 2, size=(n_out, n_in)), 4), np.round(_RNG.uniform(-2, 2, size=n_out), 4),
                       np.round(_RNG.uniform(-2, 2, size=batch + (n_in,)), 4))))
for shape, scale in (((2, 3), 1.0), ((1, 3), 1.0), ((5, 4), 3.0), ((4, 2), 300.0)):
    MLP_CASES.append((f"opinfo cross_entropy {shape} x{scale}", "cross_entropy",
                      (np.round(_RNG.normal(size=shape) * scale, 4), _RNG.integers(0, shape[1], size=shape[0]))))


# SGD training of the lab's MLP (Linear -> tanh -> Linear) against the same loop in torch, as in micrograd's
# demo.ipynb (an MLP trained by plain SGD with gradients zeroed every step): several steps, and a single one.
for seed, lr, steps in ((3, 0.5, 6), (4, 0.2, 1)):
    n, d_in, hidden, classes = 10, 2, 5, 3
    MLP_CASES.append((f"micrograd-style SGD training seed={seed} lr={lr} steps={steps}", "train_mlp",
                      (np.round(_RNG.normal(size=(hidden, d_in)) * 0.7, 4), np.round(_RNG.normal(size=hidden) * 0.1, 4),
                       np.round(_RNG.normal(size=(classes, hidden)) * 0.7, 4), np.round(_RNG.normal(size=classes) * 0.1, 4),
                       np.round(_RNG.normal(size=(n, d_in)), 4), _RNG.integers(0, classes, size=n), lr, steps)))


def _torch_mlp(kind, args):
    if kind == "train_mlp":
        *params, x, target, lr, steps = args
        p = [torch.tensor(v, requires_grad=True) for v in params]
        losses = []
        for _ in range(steps):
            loss = F.cross_entropy(torch.tanh(torch.tensor(x) @ p[0].T + p[1]) @ p[2].T + p[3], torch.tensor(target))
            losses.append(loss.item())
            loss.backward()
            with torch.no_grad():
                for q in p:
                    q -= lr * q.grad
                    q.grad = None
        return {"losses": np.array(losses), "params": [q.detach().numpy() for q in p],
                "grads_cleared": [True] * len(p)}
    if kind == "linear":
        w, b, x = (torch.tensor(v, requires_grad=i < 2) for i, v in enumerate(args))
        out = F.linear(x, w, b)
        out.backward(torch.ones_like(out))
        return {"out": out.detach().numpy(), "w_grad": w.grad.numpy(), "b_grad": b.grad.numpy()}
    logits = torch.tensor(args[0], requires_grad=True)
    loss = F.cross_entropy(logits, torch.tensor(args[1]))
    loss.backward()
    return {"loss": loss.item(), "grad": logits.grad.numpy()}


# ---------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def reference():
    """The reference solution as a module (its exported cells, as grading runs them)."""
    from autograder.engine.variants import reference_module
    return reference_module("lab02")


def _run_reference(prog):
    return scenarios.interpret(scenarios.LearnerAPI(reference(), prog.get("given", False)), prog)


def run() -> int:
    """Run every case on the reference with torch as the oracle; the number of cases. Raises AssertionError
    listing every disagreement."""
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, prog in CASES:
            want = oracle.torch_program(prog)
            try:
                got = _run_reference(prog)
            except Exception as exc:  # noqa: BLE001 - a crash of the reference is a disagreement too
                failures.append(f"{label}: the reference raised {type(exc).__name__}: {exc}")
                continue
            msg = oracle.compare_runs(got, want, prog)
            if msg is not None:
                failures.append(f"{label}: {msg}")
        for label, prog, error in SPEC:
            try:
                log = _run_reference(prog)["log"]
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{label}: the reference raised {type(exc).__name__}: {exc}")
                continue
            kinds = [e[2] for e in log if e[0] == "error"]
            if kinds != [error]:
                failures.append(f"{label}: the lab's rule says {error}, the reference logged {log}")
        for label, kind, args in MLP_CASES:
            want = _torch_mlp(kind, args)
            try:
                got = getattr(scenarios, kind)(reference(), *args)
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{label}: the reference raised {type(exc).__name__}: {exc}")
                continue
            for key, w in want.items():
                if key == "grads_cleared":
                    if got[key] != w:
                        failures.append(f"{label}: sgd_step should leave every .grad at None, got {got[key]}")
                    continue
                for k, (g1, w1) in enumerate(zip(got[key], w, strict=True) if key == "params" else [(got[key], w)]):
                    msg = oracle.compare_array(np.asarray(g1), w1, f"{kind} {key}" + (f" {k}" if key == "params" else ""))
                    if msg is not None:
                        failures.append(f"{label}: {msg}")
    assert not failures, f"{len(failures)} peer case(s) disagree with torch:\n" + "\n".join(failures)
    return len(CASES) + len(SPEC) + len(MLP_CASES)


if __name__ == "__main__":
    print(run(), "peer cases agree with torch")
