"""Part `keysets`: DispatchKeySet algebra, priority order, TLS include/exclude, compute_keyset."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.labs.lab04.oracle import key_names, reference

KEY = st.integers(1, 12)
KEYLIST = st.lists(KEY, max_size=6)


def compare(got, want, what):
    for field, value in want.items():
        mine = got.get(field)
        if field in ("a", "b", "or", "and", "sub", "add", "remove", "below", "from_bits", "before", "after_error", "other_thread"):
            shown = (key_names(mine), key_names(value))
        elif field in ("inside", "unwound", "local_before", "local_inside", "local_after") and isinstance(mine, list):
            shown = ([key_names(b) for b in mine], [key_names(b) for b in value])
        else:
            shown = (mine, value)
        assert mine == value, f"{what}: `{field}` should be {shown[1]}, got {shown[0]}"


def test_basic_algebra(student):
    got = student.run("keyset_algebra", [1, 8, 9], [1, 5], 8)
    compare(got, reference("keyset_algebra", [1, 8, 9], [1, 5], 8), "keysets {CPU, AutogradCPU, Tracer} and {CPU, Python}")


@pytest.mark.weight(4)
@settings(max_examples=25)
@given(a=KEYLIST, b=KEYLIST, key=KEY)
def test_generated_algebra(student, a, b, key):
    compare(student.run("keyset_algebra", a, b, key), reference("keyset_algebra", a, b, key),
            f"keysets of keys {a} and {b}, key {key}")


def test_empty_set_highest_is_undefined(student):
    got = student.run("keyset_algebra", [], [2], 3)
    assert got["highest"] == 0 and got["len"] == 0 and got["bool"] is False and got["iter"] == [], (
        f"an empty DispatchKeySet should have highest() Undefined, len 0, be falsy and iterate over nothing; got {got}")


def test_undefined_has_no_bit(student):
    got = student.run("keyset_algebra", [0, 1], [0], 0)
    assert got["a"] == 2 and got["b"] == 0, (
        f"DispatchKey.Undefined is not stored: DispatchKeySet([Undefined, CPU]).bits should be 2, got {got['a']}")


@pytest.mark.weight(2)
def test_nested_guards(student):
    guards = [["include", [9]], ["exclude", [8, 7]], ["include", [5]], ["exclude", [9]]]
    tensors = [[1, 7, 8], [[1, 3]]]
    compare(student.run("tls_keyset", tensors, guards), reference("tls_keyset", tensors, guards),
            "nested IncludeKeys(Tracer) / ExcludeKeys(AutogradCPU, ADInplaceOrView) / IncludeKeys(Python) / ExcludeKeys(Tracer)")


@pytest.mark.weight(2)
def test_tls_is_thread_local(student):
    got = student.run("tls_keyset", [[1]], [["include", [10]], ["exclude", [1]]])
    assert got["other_thread"] == 2, (
        f"guards entered in one thread must not change compute_keyset in another: the other thread saw "
        f"{key_names(got['other_thread'])}, expected {{CPU}}")


@pytest.mark.weight(2)
def test_guard_restores_after_exception(student):
    got = student.run("tls_keyset", [[1, 8]], [["exclude", [8]]])
    assert got["after_error"] == got["before"] and got["local_after"] == [0, 0], (
        "an exception raised inside `with ExcludeKeys(...)` must still restore the thread's excluded set")


@pytest.mark.weight(4)
@settings(max_examples=20)
@given(tensors=st.lists(st.one_of(KEYLIST, st.lists(KEYLIST, min_size=1, max_size=3)), max_size=3),
       guards=st.lists(st.tuples(st.sampled_from(["include", "exclude"]), KEYLIST), max_size=4))
def test_generated_tls(student, tensors, guards):
    guards = [list(g) for g in guards]
    compare(student.run("tls_keyset", tensors, guards), reference("tls_keyset", tensors, guards),
            f"compute_keyset of tensors with keys {tensors} under guards {guards}")

# IPT-CANARY lab04 test_keysets.py: hidden grading text, never shown to learners
