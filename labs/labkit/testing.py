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
