"""Part `shape_prop`: ShapeRecorder vs torch.fx's ShapeProp (run here, in P0) on the same graph and inputs."""
import pytest

from autograder.labs.lab06 import oracle

MODELS = {"resnet": "the ResNet-style model", "transformer": "the transformer (int64 token input)",
          "dtypes": "a model with float64, bool, int32 and int64 values, an int node and a tuple-valued node",
          "channels_last": "the ResNet-style model on a channels_last input (strides!)",
          "methods": "a model with size/view/permute/contiguous"}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_meta_matches_shapeprop(student, name):
    got, want = student.run("shapes", name), oracle.shape_prop(name)
    what = f"ShapeRecorder on {MODELS[name]}"
    assert got["is_interpreter"], f"{what}: ShapeRecorder should subclass torch.fx.Interpreter"
    oracle.close(got["outs"], want["outs"], f"{what}: run() should return what the graph returns")
    for node, meta in want["nodes"].items():
        mine = got["nodes"].get(node)
        for key in ("shape", "dtype", "stride", "requires_grad"):
            assert mine is not None and mine[key] == meta[key], (
                f"{what}: node {node!r} should have meta[{key!r}] = {meta[key]} "
                f"({'not set: its value is not a tensor' if meta[key] is None else 'like ShapeProp'}), got {None if mine is None else mine[key]}")


@pytest.mark.parametrize("name", ["transformer", "dtypes"])
def test_activation_bytes(student, name):
    got, want = student.run("shapes", name), oracle.shape_prop(name)
    assert got["bytes"] == want["bytes"], f"activation_bytes on {MODELS[name]} should be {want['bytes']}, got {got['bytes']}"

# IPT-CANARY lab06 test_shape_prop.py: hidden grading text, never shown to learners
