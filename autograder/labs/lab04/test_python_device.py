"""Part `python_device`: NumpyTensor, a __torch_dispatch__ wrapper subclass, trains an MLP like the CPU."""
import numpy as np
import pytest

from autograder.labs.lab04 import oracle


def data(seed, n, sizes):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, sizes[0])).astype(np.float32), rng.standard_normal((n, sizes[-1])).astype(np.float32)


def check_training(student, sizes, seed, lr, momentum=0.0, steps=1):
    x, y = data(seed, 8, sizes)
    got = student.run("device_sgd", sizes, seed, x, y, lr, momentum, steps)
    want = oracle.cpu_sgd(sizes, seed, x, y, lr, momentum, steps)
    what = f"MLP {sizes}, SGD lr={lr} momentum={momentum}, {steps} step(s)"
    assert all(t == "NumpyTensor" for t in got["param_types"]) and all(t == "ndarray" for t in got["payload_types"]), (
        f"{what}: after module_to_device every parameter should be a NumpyTensor with a numpy payload, "
        f"got {got['param_types']} with payloads {got['payload_types']}")
    assert all(got["subclass"]), f"{what}: the parameters should dispatch through NumpyTensor.__torch_dispatch__"
    assert all(t == "NumpyTensor" for t in got["grad_types"]), f"{what}: the gradients should live on your device too, got {got['grad_types']}"
    assert got["cpu_types"] == ["Tensor"] * len(got["cpu_types"]), f"to_cpu should give plain tensors, got {got['cpu_types']}"
    oracle.close(got["losses"], want["losses"], f"{what}: the loss", 1e-5, 1e-6)
    for name, value in want["params"].items():
        oracle.close(got["params"][name], value, f"{what}: parameter {name} after training", 1e-5, 1e-6)


@pytest.mark.weight(3)
def test_one_sgd_step(student):
    check_training(student, [4, 8, 2], 0, 0.1)


@pytest.mark.weight(3)
@pytest.mark.parametrize("sizes,seed,lr,momentum,steps", [([3, 5, 5, 1], 1, 0.05, 0.0, 1), ([6, 4, 3], 2, 0.2, 0.9, 3)])
def test_more_training(student, sizes, seed, lr, momentum, steps):
    check_training(student, sizes, seed, lr, momentum, steps)


@pytest.mark.weight(2)
def test_ops_and_inplace(student):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    got = student.run("device_ops", a, b)
    assert got["type"] == "NumpyTensor" and got["payload"] == "ndarray", f"to_device should give a NumpyTensor over an ndarray, got {got['type']} / {got['payload']}"
    assert got["shape"] == [3, 4] and got["dtype"] == "torch.float64", f"a NumpyTensor should have its array's shape and dtype, got {got['shape']} {got['dtype']}"
    assert got["mm_type"] == "NumpyTensor", f"an op on NumpyTensors should return a NumpyTensor, got {got['mm_type']}"
    oracle.close(got["mm"], a @ b.T, "a @ b.t() on your device")
    oracle.close(got["exp_sum"], np.exp(a).sum(0), "torch.exp(a).sum(dim=0) on your device")
    assert got["inplace_same_object"] is True, "t.mul_(2.0) on a NumpyTensor should return t itself"
    oracle.close(got["inplace_payload"], 2 * a, "the payload after t.mul_(2.0)")
    assert got["to_device_copies"] is True, "to_device(t) should copy: changing the NumpyTensor changed the CPU tensor"

# IPT-CANARY lab04 test_python_device.py: hidden grading text, never shown to learners
