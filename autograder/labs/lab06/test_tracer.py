"""Part `tracer`: the mini symbolic tracer, node by node against torch.fx.symbolic_trace (run here, in P0)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab06 import oracle
from autograder.labs.lab06.scenarios import PROGRAM_OPS

MODELS = {
    "resnet": "the ResNet-style model (nested Sequentials, qualified names like layer1.0.conv1)",
    "transformer": "the transformer-style model (slices, @, F.softmax with kwargs, a parameter read directly)",
    "branchy": "a model with two branches, reflected operators (1.5 - y, 2 * x), **, / and torch.cat",
    "twice": "a model that calls the same Linear/ReLU modules at several places",
    "tied": "a model whose embedding and head share one weight, read directly and read twice",
    "kwargs": "a model calling torch functions and methods with keyword arguments",
    "constants": "a model full of constants (floats, None, slices, ..., torch.float64, comparisons)",
    "nested": "a model with non-leaf modules inside ModuleList/ModuleDict/Sequential, buffers and BatchNorm1d",
    "methods": "a model calling tensor methods (size, view, permute, contiguous, softmax, reshape, unsqueeze)",
}


@pytest.mark.parametrize("name", list(MODELS))
def test_same_graph_as_torch_fx(student, name):
    got, want = student.run("trace_model", name), oracle.fx_graph(name)
    oracle.compare_graphs(got, want, f"mini_trace of {MODELS[name]}")


@pytest.mark.weight(2)
def test_control_flow_raises_and_restores(student):
    got = student.run("trace_errors")
    assert got["branch"] == "TraceError", f"`if x.sum() > 0:` on a traced value should raise TraceError, got {got['branch']}"
    assert got["iterate"] == "TraceError", f"iterating over a traced value should raise TraceError, got {got['iterate']}"
    assert got["restored"], "after tracing (also after an error) nn.Module.__call__ and __getattr__ must be the originals again"


@st.composite
def programs(draw):
    n = draw(st.integers(2, 9))
    return [[draw(st.sampled_from(PROGRAM_OPS)), draw(st.integers(0, 20)), draw(st.integers(0, 20)),
             draw(st.sampled_from([0.5, 2.0, -3.0, 1]))] for _ in range(n)]


@pytest.mark.weight(4)
@settings(max_examples=8, deadline=None)
@given(program=programs())
def test_generated_programs(student, program):
    got, want = student.run("trace_model", "program", 0, program), oracle.fx_graph("program", 0, program)
    oracle.compare_graphs(got, want, f"mini_trace of a generated program {program}")

# IPT-CANARY lab06 test_tracer.py: hidden grading text, never shown to learners
