"""Part `shape_prop`: ShapeRecorder vs a trusted recorder run here (P0) on the same graph and inputs."""
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab06 import oracle
from autograder.labs.lab06.scenarios import META_KEYS

MODELS = {"resnet": "the ResNet-style model", "transformer": "the transformer (int64 token input, slices of qkv: storage offsets)",
          "dtypes": "a model with float64, bool, int32 and int64 values, an int node and a tuple-valued node",
          "channels_last": "the ResNet-style model on a channels_last input (strides!)",
          "methods": "a model with size/view/permute/contiguous"}
_cache = {}


def run(student, name, program=None):
    key = (name, repr(program))
    if key not in _cache:
        _cache[key] = replies.dict_of(student.run("shapes", name, 0, program), {"nodes", "outs", "is_interpreter", "bytes"},
                                      "the shapes scenario")
    return _cache[key]


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_meta_matches(student, name):
    check_meta(student, name)


def check_meta(student, name, program=None):
    got, want = run(student, name, program), oracle.shape_prop(name, 0, program)
    what = f"ShapeRecorder on {MODELS[name] if program is None else oracle.program_text(program)}"
    assert replies.boolean(got["is_interpreter"], "is_interpreter"), f"{what}: ShapeRecorder should subclass torch.fx.Interpreter"
    oracle.close(got["outs"], want["outs"], f"{what}: run() should return what the graph returns")
    nodes = replies.dict_of(got["nodes"], set(want["nodes"]), f"{what}: the node metadata")
    for node, meta in want["nodes"].items():
        mine = replies.dict_of(nodes[node], set(META_KEYS), f"{what}: metadata of node {node!r}")
        for key in META_KEYS:
            assert mine[key] == meta[key], (
                f"{what}: node {node!r} should have meta[{key!r}] = {meta[key]} "
                f"({'not set: its value is not a tensor' if meta[key] is None else 'as the tensor it computes'}), got {mine[key]}")
    return got, want


@pytest.mark.parametrize("name", ["transformer", "dtypes"])
def test_activation_bytes(student, name):
    got, want = check_meta(student, name)        # activation_bytes reads the recorded metadata
    sizes = replies.dict_of(got["bytes"], set(), f"activation_bytes on {MODELS[name]}")
    assert sizes == want["bytes"], f"activation_bytes on {MODELS[name]} should be {want['bytes']}, got {sizes}"

@pytest.mark.weight(4)
def test_generated_programs(student):
    """Two programs drawn from this submission's grading seed (views, slices, comparisons, matmuls, a Linear):
    every node's metadata, and the activation bytes read from it."""
    rng = case_rng(63)
    for _ in range(2):
        program = oracle.generated_program(rng, int(rng.integers(3, 10)))
        got, want = check_meta(student, "program", program)
        sizes = replies.dict_of(got["bytes"], set(), "activation_bytes on a generated program")
        assert sizes == want["bytes"], (f"activation_bytes on {oracle.program_text(program)} should be {want['bytes']}, "
                                        f"got {sizes}")


# IPT-CANARY lab06 test_shape_prop.py: hidden grading text, never shown to learners
