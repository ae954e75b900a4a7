"""Part `conv_bn_fold`: BatchNorm2d folded into the Conv2d before it; modules left and outputs vs eager.
Every model also has Linear + BatchNorm1d and Conv1d + BatchNorm1d side paths, which this lab leaves
alone (fx's `fuse` folds them)."""
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab06 import oracle

MODELS = {
    "resnet": "the ResNet-style model (eval)",
    "fold_shared_out": "a model where one conv's output feeds its BN and a residual addition",
    "fold_conv_twice": "a model calling one conv module at two places (once before a BN) and a BN after a ReLU",
    "fold_odd": "convs without bias, with groups/stride/dilation, BNs with affine=False, other eps, no running stats",
    "fold_shared_conv": "a model with a BN after an nn.ReLU module, then one conv module called three times, each call followed by its own BN (eps 1e-5, 0.1, 0.5)",
}
SIDE = " (with Linear+BatchNorm1d and Conv1d+BatchNorm1d side paths)"


def check_fold(got, name, seed=0, spec=None):
    what = (MODELS[name] if spec is None else fold_text(spec)) + SIDE
    want = oracle.fold_expect(name, seed, spec)
    got = replies.dict_of(got, {"outs", "eager_after", "modules"}, "the fold scenario")
    oracle.close(got["outs"], want["outs"], f"the folded graph of {what}", rtol=1e-4, atol=1e-5)
    oracle.close(got["eager_after"], want["outs"], f"{what}: the original model after folding (modules must not be changed in place)",
                 rtol=1e-6, atol=1e-7)
    kinds = replies.list_of(got["modules"], f"{what}: the module calls left")
    assert kinds == want["modules"], (
        f"{what}: the module calls should go from {want['before']} to {want['modules']} (only a BatchNorm2d whose input "
        f"is a Conv2d call with no other user folds), got {kinds}")
    return got


@pytest.mark.weight(2)
@pytest.mark.parametrize("name", list(MODELS))
def test_fold(student, name):
    check_fold(student.run("fold", name), name)


TRAINING = {"train": "a model in training mode (model.train())",
            "train_root": "a GraphModule whose own flag says training (gm.training = True; its BNs in eval)",
            "train_one_bn": "an eval model with one BatchNorm2d in training mode"}


def test_training_mode_refused(student):
    got = check_fold(student.run("fold", "fold_conv_twice", 0, True), "fold_conv_twice")
    for key, what in TRAINING.items():
        err = replies.dict_of(got.get(key), {"error"}, f"fold_conv_bn on {what}")
        assert err["error"] == "ValueError", f"fold_conv_bn on {what} should raise ValueError, got {err['error']}"

def fold_text(spec):
    after = {"bn": "BatchNorm2d", "bn_eps": "BatchNorm2d(eps=0.1)", "bn_noaffine": "BatchNorm2d(affine=False)",
             "bn_nostats": "BatchNorm2d(track_running_stats=False)", "relu_bn": "ReLU, BatchNorm2d",
             "module_bn": "nn.ReLU module, BatchNorm2d", "shared": "BatchNorm2d(y) + y", "none": "nothing"}
    blocks = [f"Conv2d(-> {b['cout']}, k={b['k']}, stride={b['stride']}, dilation={b['dil']}, groups={b['groups']}, "
              f"bias={b['bias']}) then {after[b['kind']]}" for b in spec["blocks"]]
    return f"a generated chain on {spec['cin']} input channels: " + "; ".join(blocks) + " (a ReLU between blocks)"


@pytest.mark.weight(4)
def test_generated_chains(student):
    """Three conv chains drawn from this submission's grading seed, with random BatchNorm statistics."""
    rng = case_rng(64)
    for k in range(3):
        spec, seed = oracle.generated_fold_spec(rng), case_seed(640 + k)
        check_fold(student.run("fold", "fold_program", seed, False, spec), "fold_program", seed, spec)


# IPT-CANARY lab06 test_conv_bn_fold.py: hidden grading text, never shown to learners
