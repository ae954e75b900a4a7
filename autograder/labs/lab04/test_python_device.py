"""Part `python_device`: NumpyTensor, a __torch_dispatch__ wrapper subclass, trains an MLP like the CPU.

Verdicts rest on values: P0 chooses start weights that the scenario writes *through each parameter's
payload*, the data and the optimiser settings; the losses, gradients, parameters (read back with to_cpu and
straight from the payloads) are compared with the same training that P0 runs on the CPU.
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng, case_seed
from autograder.labs.lab04 import oracle

KEYS = {"param_types", "payload_types", "subclass", "grad_types", "cpu_types", "losses", "params", "payloads", "grads"}


def data(seed, n, sizes):
    rng = np.random.default_rng(seed)     # seed: case_seed(...), this submission's own
    return rng.standard_normal((n, sizes[0])).astype(np.float32), rng.standard_normal((n, sizes[-1])).astype(np.float32)


def check_training(student, sizes, seed, lr, momentum=0.0, steps=1, n=8, frozen=(), tie=False):
    seed = case_seed(seed)
    x, y = data(seed, n, sizes)
    weights = oracle.start_weights(sizes, seed, tie)
    got = replies.dict_of(student.run("device_sgd", sizes, seed, x, y, lr, momentum, steps, weights, frozen=list(frozen),
                                      tie=tie), KEYS, "device_sgd")
    want = oracle.cpu_sgd(sizes, seed, x, y, lr, momentum, steps, weights, frozen=list(frozen), tie=tie)
    what = f"MLP {sizes}, SGD lr={lr} momentum={momentum}, {steps} step(s)"
    if tie:
        what += " (the last Linear shares the first one's weight: one parameter, as nn.Module.to keeps it)"
    if frozen:
        what += f", frozen parameter(s) {list(frozen)}"
        flags = replies.list_of(got.get("requires_grad"), "requires_grad flags", len(want["requires_grad"]))
        assert flags == want["requires_grad"], (
            f"{what}: after module_to_device the parameters' requires_grad should be {want['requires_grad']} "
            f"(a frozen parameter must stay frozen on the device), got {flags}")
    count = len(want["params"])
    found = len(replies.list_of(got["param_types"], "parameter types"))
    assert found == count, f"{what}: after module_to_device the model should have {count} parameters (as on the CPU), got {found}"
    types = replies.list_of(got["param_types"], "parameter types", count)
    payloads = replies.list_of(got["payload_types"], "payload types", count)
    assert all(t == "NumpyTensor" for t in types) and all(t == "ndarray" for t in payloads), (
        f"{what}: after module_to_device every parameter should be a NumpyTensor with a numpy payload, "
        f"got {types} with payloads {payloads}")
    assert all(v is True for v in replies.list_of(got["subclass"], "subclass flags", count)), (
        f"{what}: the parameters should dispatch through NumpyTensor.__torch_dispatch__")
    grad_types = replies.list_of(got["grad_types"], "gradient types", count)
    want_types = ["NumpyTensor" if flag else "NoneType" for flag in want["requires_grad"]]
    assert grad_types == want_types, (f"{what}: the gradients should live on your device too (and a frozen parameter "
                                      f"gets none): expected {want_types}, got {grad_types}")
    cpu_types = replies.list_of(got["cpu_types"], "to_cpu types", count)
    assert cpu_types == ["Tensor"] * count, f"to_cpu should give plain tensors, got {cpu_types}"
    oracle.close(got["losses"], want["losses"], f"{what}: the loss at each step", 1e-5, 1e-6)
    for field, label in (("grads", "the last gradient of"), ("params", "parameter (read with to_cpu)"),
                         ("payloads", "the payload of parameter")):
        expected = want["grads" if field == "grads" else "params"]
        values = replies.dict_of(got[field], expected.keys(), f"{what}: {field}")
        for name in expected:
            ref = want["grads" if field == "grads" else "params"][name]
            oracle.close(values[name], ref, f"{what}: {label} {name} after training", 1e-5, 1e-6, dtype=np.float32)


@pytest.mark.weight(3)
def test_one_sgd_step(student):
    check_training(student, [4, 8, 2], 0, 0.1)


@pytest.mark.weight(3)
@pytest.mark.parametrize("sizes,seed,lr,momentum,steps,n", [([3, 5, 5, 1], 1, 0.05, 0.0, 1, 8), ([6, 4, 3], 2, 0.2, 0.9, 3, 8),
                                                             ([2, 1], 3, 0.5, 0.5, 2, 1)])
def test_more_training(student, sizes, seed, lr, momentum, steps, n):
    check_training(student, sizes, seed, lr, momentum, steps, n)


@pytest.mark.weight(2)
def test_frozen_parameters(student):
    # a frozen parameter keeps requires_grad=False on the device: no gradient, SGD leaves it alone, like on the CPU
    check_training(student, [3, 6, 2], 4, 0.2, 0.5, 2, frozen=("0.weight", "2.bias"))


@pytest.mark.weight(2)
def test_shared_parameter(student):
    check_training(student, [5, 5, 5], 5, 0.3, 0.5, 2, tie=True)


@pytest.mark.weight(3)
def test_ops_and_inplace(student):
    rng = case_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    got = replies.dict_of(student.run("device_ops", a, b), {"type", "payload", "shape", "dtype", "mm", "mm_type", "exp_sum",
                          "int_ops", "zero_d", "size_0", "after_payload_write", "inplace_same_object", "inplace_payload",
                          "inplace_cpu", "view_inplace", "to_device_copies", "moved"}, "device_ops")
    assert got["type"] == "NumpyTensor" and got["payload"] == "ndarray", f"to_device should give a NumpyTensor over an ndarray, got {got['type']} / {got['payload']}"
    assert got.get("subclass") is True, "to_device should give a tensor subclass with its own __torch_dispatch__"
    assert got["shape"] == [3, 4] and got["dtype"] == "torch.float64", f"a NumpyTensor should have its array's shape and dtype, got {got['shape']} {got['dtype']}"
    assert got["mm_type"] == "NumpyTensor", f"an op on NumpyTensors should return a NumpyTensor, got {got['mm_type']}"
    oracle.close(got["mm"], a @ b.T, "a @ b.t() on your device", dtype=np.float64)
    oracle.close(got["exp_sum"], np.exp(a).sum(0), "torch.exp(a).sum(dim=0) on your device", dtype=np.float64)
    oracle.close(got["int_ops"], (np.arange(6).reshape(2, 3) * 3) // 2, "(int64 tensor * 3) // 2 on your device", dtype=np.int64)
    oracle.close(got["zero_d"], np.asarray(2.5 * a[0, 0]), "a 0-d NumpyTensor times a[0, 0]", dtype=np.float64)
    assert got["size_0"] == [0, 5], f"a (0, 4) NumpyTensor @ b.t() should have shape [0, 5], got {got['size_0']}"
    written = a.copy()
    written[0, 0] = 100.0
    oracle.close(got["after_payload_write"], written.sum(1), "t.sum(dim=1) after writing into t.payload (the payload should be the tensor's data)", dtype=np.float64)
    assert got["inplace_same_object"] is True, "t.mul_(2.0) on a NumpyTensor should return t itself"
    oracle.close(got["inplace_payload"], 2 * a, "the payload after t.mul_(2.0)", dtype=np.float64)
    oracle.close(got["inplace_cpu"], 2 * a, "to_cpu(t) after t.mul_(2.0)", dtype=np.float64)
    view = 2 * a
    view[1] += 1.0
    oracle.close(got["view_inplace"], view, "t[1].add_(1.0) should write into t (a view shares its base's payload)", dtype=np.float64)
    assert got["to_device_copies"] is True, "to_device(t) should copy: changing the NumpyTensor changed the CPU tensor"
    oracle.close(got["moved"], a + 1.0, "to_device(t).add_(1.0)", dtype=np.float64)
    oracle.close(got.get("after_cpu_write"), a + 1.0, "a NumpyTensor after to_cpu(t).mul_(0.0): to_cpu should copy the payload, "
                 "not share it", dtype=np.float64)

# IPT-CANARY lab04 test_python_device.py: hidden grading text, never shown to learners
