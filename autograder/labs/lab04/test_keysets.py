"""Part `keysets`: DispatchKeySet algebra, priority order, TLS include/exclude, compute_keyset."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.engine import replies
from autograder.labs.lab04.checks import compare_fields
from autograder.labs.lab04.oracle import key_names, reference

KEY = st.integers(1, 12)
ANYKEY = st.integers(0, 12)          # Undefined (0) included: it has no bit
KEYLIST = st.lists(ANYKEY, max_size=6)


def algebra(student, a, b, key, show):
    what = f"DispatchKeySet of keys {a} and of keys {b}, key {key}"
    compare_fields(student.run("keyset_algebra", a, b, key), reference("keyset_algebra", a, b, key), what, show)


def test_basic_algebra(student):
    algebra(student, [1, 8, 9], [1, 5], 8, True)
    algebra(student, [12, 1], [12, 11, 10], 12, True)   # the top key, a key not in the set


@pytest.mark.weight(2)
def test_empty_and_full_sets(student):
    algebra(student, [], [2], 3, True)                  # empty: highest() Undefined, len 0, falsy, no iteration
    algebra(student, list(range(13)), [], 1, True)      # every key (Undefined ignored); below(CPU) is empty
    algebra(student, [5, 5, 0, 5], [5], 5, True)        # duplicates and Undefined; remove the only key
    algebra(student, [0, 1], [0], 0, True)              # add/remove/has/below(Undefined)


@pytest.mark.weight(4)
@settings(max_examples=30)
@given(a=KEYLIST, b=KEYLIST, key=ANYKEY)
def test_generated_algebra(student, a, b, key):
    algebra(student, a, b, key, False)


def tls(student, tensors, guards, show, **kw):
    what = f"compute_keyset of tensors with keys {tensors} under the guards {guards}"
    compare_fields(student.run("tls_keyset", tensors, guards, **kw), reference("tls_keyset", tensors, guards, **kw), what, show)


@pytest.mark.weight(2)
def test_nested_guards(student):
    tls(student, [[1, 7, 8], [[1, 3]]], [["include", [9]], ["exclude", [8, 7]], ["include", [5]], ["exclude", [9]]], True)


@pytest.mark.weight(2)
def test_same_key_nested(student):
    # the inner guard's exit must put back the outer guard's state, not remove its keys
    tls(student, [[1]], [["include", [9]], ["include", [9, 5]]], True)
    tls(student, [[1, 8, 7]], [["exclude", [8]], ["exclude", [8]], ["include", [8]]], True)
    tls(student, [[1]], [["exclude", [9]], ["include", [9]]], True)   # excluded wins over included


@pytest.mark.weight(2)
def test_tensor_lists_tuples_and_plain_args(student):
    tls(student, [[1], [[5], [9, 1]], {"tuple": [[11], [2]]}, [[]]], [], True, plain_args=(2.5, "t", None, [1, 2], {"k": 3}))
    tls(student, [[], [[3]]], [["include", [0, 6]]], True)            # no keys at all; Undefined in a guard


@pytest.mark.weight(2)
def test_tls_is_thread_local(student):
    got = replies.dict_of(student.run("tls_keyset", [[1]], [["include", [10]], ["exclude", [1]]]),
                          {"other_thread", "other_fresh", "other_own_guard", "after_other_thread", "inside"}, "tls_keyset")
    assert got["other_thread"] == 2 and got["other_fresh"] == [0, 0], (
        f"guards entered in one thread must not change another thread's state: a new thread saw local_keysets() "
        f"{got['other_fresh']} and compute_keyset {key_names(got['other_thread'])}, expected [0, 0] and {{CPU}}")
    want = reference("tls_keyset", [[1]], [["include", [10]], ["exclude", [1]]])
    assert got["other_own_guard"] == want["other_own_guard"] and got["after_other_thread"] == want["after_other_thread"], (
        "guards entered in another thread must work there and leave this thread's keyset unchanged: "
        f"got {got['other_own_guard']} / {key_names(got['after_other_thread'])}")


@pytest.mark.weight(2)
def test_guard_restores_after_exception(student):
    # raised at the innermost level and in the middle of two guards; the error must propagate
    tls(student, [[1, 8]], [["exclude", [8]]], True)
    tls(student, [[1, 8, 9]], [["exclude", [8]], ["include", [5]], ["exclude", [9]]], True, raise_at=1)


@pytest.mark.weight(5)
@settings(max_examples=25)
@given(tensors=st.lists(st.one_of(KEYLIST, st.lists(KEYLIST, min_size=0, max_size=3),
                                  st.builds(lambda ks: {"tuple": ks}, st.lists(KEYLIST, max_size=2))), max_size=3),
       guards=st.lists(st.tuples(st.sampled_from(("include", "exclude")), KEYLIST), max_size=4),
       raise_at=st.none() | st.integers(0, 4))
def test_generated_tls(student, tensors, guards, raise_at):
    guards = [list(g) for g in guards]
    tls(student, tensors, guards, False, raise_at=raise_at)

# IPT-CANARY lab04 test_keysets.py: hidden grading text, never shown to learners
