"""Part `conv_bn_fold`: BatchNorm2d folded into the Conv2d before it; node counts and outputs vs eager."""
import pytest

from autograder.labs.lab06 import oracle

MODELS = {
    "resnet": "the ResNet-style model (eval)",
    "fold_shared_out": "a model where one conv's output feeds its BN and a residual addition",
    "fold_conv_twice": "a model calling one conv module at two places (once before a BN) and a BN after a ReLU",
    "fold_odd": "convs without bias, with groups/stride/dilation, BNs with affine=False, other eps, no running stats",
}


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_fold(student, name):
    what = MODELS[name]
    got, want = student.run("fold", name), oracle.fold_expect(name)
    assert "error" not in got, f"fold_conv_bn on {what} raised {got.get('error')}: {got.get('message')}"
    oracle.close(got["outs"], want["outs"], f"the folded graph of {what}", rtol=1e-4, atol=1e-5)
    oracle.close(got["eager_after"], want["outs"], f"{what}: the original model after folding (modules must not be changed in place)",
                 rtol=1e-6, atol=1e-7)
    assert got["bn_left"] == want["bn_left"], (
        f"{what}: {want['bn_before']} BatchNorm2d calls before folding, {want['bn_left']} should remain "
        f"(only a BN whose input is a Conv2d call with no other user folds), got {got['bn_left']}")
    assert got["convs"] == want["convs"], f"{what}: the number of Conv2d calls should stay {want['convs']}, got {got['convs']}"


def test_training_mode_refused(student):
    got = student.run("fold", "resnet", 0, True)
    assert got.get("error") == "ValueError", (
        f"fold_conv_bn on a model in training mode should raise ValueError, got {got.get('error') or 'no error'}")

# IPT-CANARY lab06 test_conv_bn_fold.py: hidden grading text, never shown to learners
