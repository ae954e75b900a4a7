"""Part `tracer`: the mini symbolic tracer, node by node against torch.fx run here (P0) with the lab's
stated rules (oracle.LabTracer). Every model sits in a harness holding the cases where those rules and
torch.fx differ, so handing the work to torch.fx cannot pass."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab06 import oracle
from autograder.labs.lab06.scenarios import PROGRAM_OPS

HARNESS = (" (inside a wrapper that reads a buffer once and uses it twice, uses a plain tensor attribute, "
           "calls an unregistered nn.Tanh, compares with == and !=, and uses .T and .shape[0])")
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
    "defaults": "a model whose forward has inputs with default values (scale=0.5, shift=-1.25, note=None)",
}


@pytest.mark.parametrize("name", list(MODELS))
def test_same_graph_as_the_lab_rules(student, name):
    program = oracle.probe_program(name)
    got = replies.dict_of(student.run("trace_model", name, 0, None, program), {"graph", "probe"}, "the tracer scenario")
    oracle.compare_graphs(got["graph"], oracle.fx_graph(name), f"mini_trace of {MODELS[name]}{HARNESS}")
    check_probe(got["probe"], program)


def check_probe(got, program):
    oracle.compare_graphs(got, oracle.fx_probe(program),
                          f"your Proxy used directly (MiniTracer().create_proxy placeholders x, y, then the program {program})")


@pytest.mark.weight(2)
def test_control_flow_raises_and_restores(student):
    program = oracle.probe_program("errors")
    got = replies.dict_of(student.run("trace_errors", program), {"branch", "compare", "iterate", "eager_after", "eager_traced_leaf",
                                                                 "graph_after", "probe"},
                          "the control-flow scenario")
    check_probe(got["probe"], program)
    for key, code in (("branch", "`if x.sum() > 0:`"), ("compare", "`x if x == y else y`"), ("iterate", "`[v for v in x]`")):
        kind = replies.string(got[key], f"the error of {code}")
        assert kind == "TraceError", f"{code} on traced values should raise TraceError, got {kind}"
    import torch
    x = torch.arange(6.0).reshape(2, 3)
    torch.manual_seed(3)
    lin = torch.nn.Linear(3, 2)
    torch.manual_seed(5)
    traced_leaf = torch.nn.Linear(3, 3)     # the Linear inside the model whose trace failed on `[v for v in x]`
    for key, module, what in (("eager_after", lin, "a new nn.Linear"),
                              ("eager_traced_leaf", traced_leaf, "the nn.Linear of the model whose trace just failed")):
        with torch.no_grad():
            want = [module(x).numpy()]
        assert replies.error_reply(got[key], "eager call") is None, (
            f"after a failed trace, calling {what} eagerly should work again (nn.Module.__call__ and __getattr__ "
            f"restored, even when forward raised), but it raised {got[key].get('error')}")
        oracle.close(got[key], want, f"after a failed trace, an eager call of {what} (nn.Module restored even when forward raised?)")
    oracle.compare_graphs(got["graph_after"], oracle.fx_graph("twice"),
                          "after failed traces, mini_trace of a model calling modules twice" + HARNESS)


@st.composite
def programs(draw):
    n = draw(st.integers(2, 9))
    return [[draw(st.sampled_from(PROGRAM_OPS)), draw(st.integers(0, 20)), draw(st.integers(0, 20)),
             draw(st.sampled_from((0.5, 2.0, -3.0, 1)))] for _ in range(n)]


@pytest.mark.weight(4)
@settings(max_examples=8, deadline=None)
@given(program=programs())
def test_generated_programs(student, program):
    probe = [step for step in program if step[0] in oracle.shared.PROBE_OPS] or [["add", 0, 1, 1]]
    got = replies.dict_of(student.run("trace_model", "program", 0, program, probe), {"graph", "probe"}, "the tracer scenario")
    oracle.compare_graphs(got["graph"], oracle.fx_graph("program", 0, program), f"mini_trace of a generated program {program}{HARNESS}")
    check_probe(got["probe"], probe)

# IPT-CANARY lab06 test_tracer.py: hidden grading text, never shown to learners
