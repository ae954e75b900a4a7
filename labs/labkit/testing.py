"""Helpers for public tests."""
import contextlib

import pytest


@contextlib.contextmanager
def raises(exc_type, what):
    """Like pytest.raises, but for exactly `exc_type` (a NotImplementedError is a RuntimeError too,
    so a stub must not pass a test that expects torch's RuntimeError)."""
    try:
        yield
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - the type is the point of the test
        if type(exc) is not exc_type:
            pytest.fail(f"{what} should raise {exc_type.__name__} like torch, but yours raised "
                        f"{type(exc).__name__}: {exc}", pytrace=False)
        return
    pytest.fail(f"{what} should raise {exc_type.__name__} like torch, but yours returned without an error", pytrace=False)


def quant_primitives():
    """torchao's quantization primitives, imported quietly (its GPU-only extensions cannot load on a CPU
    build and say so): lab08's public tests use them as the oracle. Your own code may not import torchao."""
    import logging
    import warnings
    logging.getLogger("torchao").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization import quant_primitives as primitives
    return primitives


def torchao_qparams(x, block_size, qmin, qmax, symmetric):
    """torchao's (scale, zero_point) for x, shaped as the block grid, with lab08's eps (float32's)."""
    import torch
    ao = quant_primitives()
    mapping = ao.MappingType.SYMMETRIC if symmetric else ao.MappingType.ASYMMETRIC
    return ao.choose_qparams_affine(x, mapping, block_size, torch.int32, qmin, qmax, eps=torch.finfo(torch.float32).eps,
                                    zero_point_dtype=torch.int32, keepdim=True)
