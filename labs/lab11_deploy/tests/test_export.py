"""Public tests of part `export` (run them with check("export"))."""
import functools
import warnings

import pytest
import torch
from torch import nn
from torch.export import Dim, export


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("seen", torch.zeros(3))
        self.scale = torch.tensor([1.0, 2.0, 3.0])

    def forward(self, x, y):
        h = torch.relu(self.lin(x)) * self.scale
        self.seen.add_(h.sum(0))
        y.add_(1.0)  # a user input mutated in place
        return h + y, h.mean()


@functools.cache
def program():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        batch = Dim("batch", min=2, max=8)
        return export(Scaled(), (torch.randn(3, 4), torch.randn(3, 3)),
                      dynamic_shapes=({0: batch}, {0: batch})).run_decompositions()


def guard_error(lab, fn, what, names=None):
    try:
        fn()
    except NotImplementedError:
        raise
    except lab.GuardError as exc:
        assert names is None or names in str(exc), f"{what}: the GuardError's message should name the input {names!r}, got {exc}"
        return
    except Exception as exc:  # noqa: BLE001 - the type is the point
        pytest.fail(f"{what} should raise GuardError, got {type(exc).__name__}: {exc}", pytrace=False)
    pytest.fail(f"{what} should raise GuardError, but returned", pytrace=False)


def test_same_as_the_module(lab):
    ep = program()
    torch.manual_seed(1)
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    y_mine, y_module = y.clone(), y.clone()
    outputs, mutations = lab.run_program(ep, (x, y_mine))
    module = ep.module()  # shares its buffers with ep.state_dict: run it after yours, which must not write there
    want = module(x, y_module)
    assert isinstance(outputs, tuple) and len(outputs) == 2, f"outputs should be a tuple of 2 tensors, got {type(outputs).__name__}"
    for k in range(2):
        assert torch.allclose(outputs[k], want[k], atol=1e-6), f"user output {k} differs from ep.module()'s"
    assert list(mutations) == ["seen"], f"mutations should have the one key 'seen', got {list(mutations)}"
    assert torch.allclose(mutations["seen"], module.seen, atol=1e-6), "the new value of 'seen' differs from ep.module()'s"
    assert torch.equal(y_mine, y_module) and torch.equal(y_mine, y + 1), "y should be mutated in place (y + 1) as eager mode would"


def test_state_is_the_callers_and_is_left_alone(lab):
    ep = program()
    torch.manual_seed(2)
    state = {"lin.weight": torch.randn(3, 4), "lin.bias": torch.randn(3), "seen": torch.ones(3),
             "scale": torch.tensor([0.5, -1.0, 2.0])}
    before = {k: v.clone() for k, v in state.items()}
    x, y = torch.randn(4, 4), torch.randn(4, 3)
    first = lab.run_program(ep, (x, y.clone()), state)
    second = lab.run_program(ep, (x, y.clone()), state)
    for k, v in state.items():
        assert torch.equal(v, before[k]), f"run_program wrote into state[{k!r}]: it must leave the caller's state alone"
    h = torch.relu(x @ state["lin.weight"].T + state["lin.bias"]) * state["scale"]
    assert torch.allclose(first[0][0], h + y + 1, atol=1e-5), "the output does not use the weights given in `state`"
    assert torch.allclose(first[1]["seen"], 1 + h.sum(0), atol=1e-5), "the new 'seen' should be state['seen'] + h.sum(0)"
    assert torch.allclose(second[1]["seen"], first[1]["seen"]), "a second run with the same state should give the same new 'seen'"


def test_kernel_table(lab):
    ep = program()
    torch.manual_seed(3)
    x, y = torch.randn(3, 4), torch.randn(3, 3)
    leaky = {torch.ops.aten.relu.default: lambda t: torch.where(t > 0, t, 0.25 * t)}
    outputs, _ = lab.run_program(ep, (x, y.clone()), kernels=leaky)
    lin = ep.state_dict
    z = x @ lin["lin.weight"].T + lin["lin.bias"]
    h = torch.where(z > 0, z, 0.25 * z) * ep.constants["scale"]
    assert torch.allclose(outputs[0], h + y + 1, atol=1e-5), "a relu node should run kernels[aten.relu.default] instead"


def test_guards(lab):
    ep = program()
    assert lab.check_inputs(ep, (torch.randn(2, 4), torch.randn(2, 3))) is None, "a batch of 2 is in [2, 8]: no error"
    assert lab.check_inputs(ep, (torch.randn(8, 4), torch.randn(8, 3))) is None, "a batch of 8 is in [2, 8]: no error"
    guard_error(lab, lambda: lab.run_program(ep, (torch.randn(9, 4), torch.randn(9, 3))), "a batch of 9 (range [2, 8])", "x")
    guard_error(lab, lambda: lab.run_program(ep, (torch.randn(1, 4), torch.randn(1, 3))), "a batch of 1 (range [2, 8])", "x")
    guard_error(lab, lambda: lab.run_program(ep, (torch.randn(4, 5), torch.randn(4, 3))), "x with 5 columns (exported for 4)", "x")
    guard_error(lab, lambda: lab.check_inputs(ep, (torch.randn(4, 4), torch.randn(4, 3, 1))), "y with an extra dimension", "y")
    guard_error(lab, lambda: lab.run_program(ep, (torch.randn(4, 4), torch.randn(5, 3))), "x and y with batches 4 and 5 (one Dim)")
    guard_error(lab, lambda: lab.run_program(ep, (torch.randn(4, 4),)), "one input to a program of two")


def test_float64_state_runs_in_float64(lab):
    ep = program()
    torch.manual_seed(4)
    state = {"lin.weight": torch.randn(3, 4, dtype=torch.float64), "lin.bias": torch.randn(3, dtype=torch.float64),
             "seen": torch.zeros(3, dtype=torch.float64), "scale": torch.ones(3, dtype=torch.float64)}
    x, y = torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    (out, mean), mutations = lab.run_program(ep, (x, y.clone()), state)
    want = torch.relu(x @ state["lin.weight"].T + state["lin.bias"]) + y + 1
    assert out.dtype == torch.float64, f"float64 weights and inputs should give a float64 output, got {out.dtype}"
    assert torch.allclose(out, want), "the float64 output differs from the operators run on the given tensors"
