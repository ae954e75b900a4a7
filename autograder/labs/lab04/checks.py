"""lab04 grader helpers (P0): reply validation and comparison against the reference model.

Every reply of the mini-dispatcher scenarios is validated in shape (replies.*) before it is compared,
and compared field by field with what the reference model (oracle.py) computes for the same inputs.
Expected values are shown only for the fixed cases (`show_expected=True`, cases like the public ones);
for generated cases the message names the input, the field and what the submission gave.
"""
from __future__ import annotations

from typing import Any

from autograder.engine import replies
from autograder.labs.lab04.oracle import key_names

BITSET_FIELDS = {"a", "b", "or", "and", "sub", "add", "remove", "add_b", "remove_b", "below", "below_b", "from_bits",
                 "chain", "before", "after_error", "other_thread", "after_other_thread"}
BITSET_LIST_FIELDS = {"inside", "unwound", "local_before", "local_after", "error_inside", "tls_after", "tls", "other_fresh",
                      "other_own_guard"}


def shown(field: str, value: Any) -> Any:
    if field in BITSET_FIELDS and replies.is_int(value):
        return key_names(int(value))
    if field in BITSET_LIST_FIELDS and isinstance(value, list):
        return [key_names(int(v)) if replies.is_int(v) else v for v in value]
    return value


def same(got: Any, want: Any) -> bool:
    """Structural equality that does not let bool pass for int (True == 1) or int for float where it matters."""
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(want, dict):
        return isinstance(got, dict) and set(got) == set(want) and all(same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(want) and all(same(got[i], want[i]) for i in range(len(want)))
    if isinstance(want, float) and replies.is_int(got):
        return False
    if isinstance(want, (int, float)) and not isinstance(got, (int, float)):
        return False
    return got == want


def compare_fields(got: Any, want: dict, what: str, show_expected: bool, fields=None) -> None:
    got = replies.dict_of(got, want.keys() if fields is None else fields, what)
    for field in (fields or want):
        mine, ref = got[field], want[field]
        if not same(mine, ref):
            if show_expected:
                raise AssertionError(f"{what}: `{field}` should be {shown(field, ref)}, got {shown(field, mine)}")
            raise AssertionError(f"{what}: `{field}` is wrong (got {shown(field, mine)})")

# IPT-CANARY lab04 checks.py: hidden grading text, never shown to learners
