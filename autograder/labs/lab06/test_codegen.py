"""Part `codegen`: python_code + MiniGraphModule on graphs converted from real fx traces; outputs vs eager,
and the generated source read back here (one assignment per node, in order: not torch.fx's layout)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab06 import oracle
from autograder.labs.lab06.scenarios import PROGRAM_OPS

NAMES = ["resnet", "transformer", "branchy", "twice", "tied", "kwargs", "constants", "nested", "methods", "defaults"]
KEYS = {"outs", "code", "source", "globals", "names", "ops", "is_module", "state_dict", "structure"}
_cache = {}


def run(student, name, program=None, bump=False):
    key = (name, repr(program), bump)
    if key not in _cache:
        _cache[key] = replies.dict_of(student.run("codegen_run", name, 0, program, bump), KEYS, "the codegen scenario")
    return _cache[key]


def check_run(student, name, program=None, what=None):
    what = what or f"MiniGraphModule of the '{name}' model"
    got = run(student, name, program)
    want, structure = oracle.eager(name, 0, program)
    assert replies.boolean(got["is_module"], "is_module"), f"{what}: MiniGraphModule should be an nn.Module"
    code = got["code"]
    assert isinstance(code, str) and "def forward" in code, f"{what}: .code should be the generated source, a str containing 'def forward'"
    assert got["structure"] == structure, f"{what}: the result should have the structure {structure} (T = a tensor), got {got['structure']}"
    oracle.close(got["outs"], want, what)
    names = replies.list_of(got["names"], "the graph's node names")
    ops = replies.list_of(got["ops"], "the graph's opcodes", len(names))
    oracle.check_source(got["source"], names, ops, f"python_code of the '{name}' graph" if program is None else what,
                        oracle.graph_floats(name, program))
    assert code == got["source"], f"{what}: .code should be the source python_code(graph) returns"
    return got


@pytest.mark.parametrize("name", NAMES)
def test_outputs_equal_eager(student, name):
    check_run(student, name)


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["tied", "nested", "twice", "resnet"])
def test_holds_what_the_graph_uses(student, name):
    got, want = run(student, name), oracle.fx_state_dict(name)
    keys = replies.list_of(got["state_dict"], f"state_dict() keys of MiniGraphModule ('{name}')")
    assert keys == want, (
        f"MiniGraphModule of the '{name}' model: state_dict() keys should be those of torch.fx.GraphModule {want}, got {keys}")
    want_out, _ = oracle.eager(name)
    oracle.close(got["outs"], want_out, f"MiniGraphModule of the '{name}' model")


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", ["branchy", "nested"])
def test_shares_the_roots_tensors(student, name):
    got = replies.dict_of(run(student, name, None, True), {"bumped"}, "the codegen scenario")
    want, _ = oracle.eager(name, 0, None, bump=True)
    before, _ = oracle.eager(name, 0, None)
    oracle.close(got["outs"], before, f"MiniGraphModule of the '{name}' model")
    oracle.close(got["bumped"], want, f"'{name}' model: after scaling the root's parameters in place, MiniGraphModule "
                                      "(which should hold the same parameter objects, not copies)")


NEGATIVE_CONSTANT_PROGRAMS = [[["rpow", 0, 0, -3.0], ["rpow", 1, 0, -0.5], ["add", 2, 3, 1]],
                              [["rsub", 0, 0, -2.0], ["rpow", 2, 1, -1.5], ["rpow", 0, 0, 2.0]]]


@pytest.mark.parametrize("program", NEGATIVE_CONSTANT_PROGRAMS, ids=["pow_neg_base", "mixed"])
def test_negative_constant_operands(student, program):
    check_run(student, "program", program, "MiniGraphModule of a program with a negative constant as the left operand of ** "
                                           "((-3.0) ** t: written without parentheses it reads -(3.0 ** t))")


@st.composite
def programs(draw):
    n = draw(st.integers(2, 9))
    return [[draw(st.sampled_from(PROGRAM_OPS)), draw(st.integers(0, 20)), draw(st.integers(0, 20)),
             draw(st.sampled_from((0.5, 2.0, -3.0, 1)))] for _ in range(n)]


@pytest.mark.weight(3)
@settings(max_examples=6, deadline=None)
@given(program=programs())
def test_generated_programs(student, program):
    check_run(student, "program", program, f"MiniGraphModule of a generated program {program}")

# IPT-CANARY lab06 test_codegen.py: hidden grading text, never shown to learners
