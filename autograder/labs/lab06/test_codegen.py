"""Part `codegen`: python_code + MiniGraphModule on graphs converted from real fx traces; outputs vs eager."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab06 import oracle
from autograder.labs.lab06.scenarios import PROGRAM_OPS

NAMES = ["resnet", "transformer", "branchy", "twice", "tied", "kwargs", "constants", "nested", "methods"]


def check_run(student, name, program=None, what=None):
    what = what or f"MiniGraphModule of the '{name}' model"
    got = student.run("codegen_run", name, 0, program)
    want, structure = oracle.eager(name, 0, program)
    assert got["is_module"], f"{what}: MiniGraphModule should be an nn.Module"
    assert got["has_def"], f"{what}: .code should be the generated source, a str containing 'def forward'"
    assert got["structure"] == structure, f"{what}: the result should have the structure {structure} (T = a tensor), got {got['structure']}"
    oracle.close(got["outs"], want, what)
    return got


@pytest.mark.parametrize("name", NAMES)
def test_outputs_equal_eager(student, name):
    check_run(student, name)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["tied", "nested", "twice", "resnet"])
def test_holds_what_the_graph_uses(student, name):
    got, want = student.run("codegen_run", name), oracle.fx_state_dict(name)
    assert got["state_dict"] == want, (
        f"MiniGraphModule of the '{name}' model: state_dict() keys should be those of torch.fx.GraphModule {want}, got {got['state_dict']}")


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["branchy", "nested"])
def test_shares_the_roots_tensors(student, name):
    got = student.run("codegen_run", name, 0, None, True)
    want, _ = oracle.eager(name, 0, None, bump=True)
    oracle.close(got["bumped"], want, f"'{name}' model: after scaling the root's parameters in place, MiniGraphModule "
                                      "(which should hold the same parameter objects, not copies)")


@st.composite
def programs(draw):
    n = draw(st.integers(2, 9))
    return [[draw(st.sampled_from(PROGRAM_OPS)), draw(st.integers(0, 20)), draw(st.integers(0, 20)),
             draw(st.sampled_from([0.5, 2.0, -3.0, 1]))] for _ in range(n)]


@pytest.mark.weight(3)
@settings(max_examples=6, deadline=None)
@given(program=programs())
def test_generated_programs(student, program):
    check_run(student, "program", program, f"MiniGraphModule of a generated program {program}")

# IPT-CANARY lab06 test_codegen.py: hidden grading text, never shown to learners
