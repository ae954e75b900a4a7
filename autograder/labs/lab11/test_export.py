# IPT-CANARY lab11 test_export.py: hidden grading text, never shown to learners
"""Part `export`: run_program and check_inputs on four programs P0 exported (an MLP with a buffer it accumulates
and a lifted constant; BatchNorm in training mode; a user input mutated in place; static shapes with
multi-result operators), with weights, inputs and kernel tables drawn from the grading seed.

Trust: values only. Every test holds cases with the caller's own weights in float64, and all but
test_without_kernels and test_guards hold kernel tables; the guard test also holds lower bounds of 2 or less
(which ep.module() does not check): handing the work to ep.module() loses every test. The expected values come from torch.fx.Interpreter over the program's graph module in P0.
"""
import numpy as np
import pytest

from autograder.engine import replies
from autograder.engine.plugin import case_rng
from autograder.labs.lab11 import oracle

NAMES = list(oracle.PROGRAMS)


def run_cases(student, name, cases, what):
    got = replies.list_of(student.run("lab11.scenarios:run_program", oracle.program_bytes(name), cases),
                          f"run_program's results on the {name} program", len(cases))
    for k, (case, reply) in enumerate(zip(cases, got, strict=True)):
        want = oracle.expected_run(name, case["args"], case.get("state"), case.get("kernels") or [])
        label = f"{what} (the {name} program, case {k + 1}: {describe(case)})"
        if case.get("twice"):
            runs = replies.list_of(reply, label, 2) if replies.error_reply(reply, label) is None else [reply, reply]
            oracle.check_run(runs[0], want, f"{label}, first run")
            oracle.check_run(runs[1], want, f"{label}, second run with the same state")
        else:
            oracle.check_run(reply, want, label)


def describe(case):
    shapes = [list(np.shape(a)) for a in case["args"]]
    wide = any(np.asarray(a).dtype == np.float64 for a in case["args"])
    parts = [f"{'float64 ' if wide else ''}inputs of shapes {shapes}",
             "its own weights" if case.get("state") is None else f"the caller's {'float64 ' if wide else ''}weights"]
    if case.get("kernels"):
        parts.append("a kernel table for " + ", ".join(op for op, _, _ in case["kernels"]))
    return "; ".join(parts)


@pytest.mark.weight(4)
@pytest.mark.parametrize("name", NAMES)
def test_programs(student, name):
    """Outputs, buffer mutations (names in order, values) and mutated user inputs, with and without kernels."""
    rng = case_rng(100 + NAMES.index(name))
    cases = [{"args": oracle.inputs_of(name, rng, oracle.distinct_sizes(name, rng)), "state": oracle.state_of(name, rng),
              "kernels": oracle.kernels_of(name, rng, 2)},
             {"args": oracle.inputs_of(name, rng), "state": None, "kernels": oracle.kernels_of(name, rng, 1)},
             {"args": oracle.inputs_of(name, rng), "state": oracle.state_of(name, rng), "kernels": []},
             {"args": oracle.inputs_of(name, rng, wide=True), "state": oracle.state_of(name, rng, wide=True),
              "kernels": oracle.kernels_of(name, rng, 1)}]
    # a kernel for one overload of an operator the program also calls through another overload
    cases += [{"args": oracle.inputs_of(name, rng), "state": oracle.state_of(name, rng), "kernels": table}
              for table in oracle.sibling_kernels(name, rng)]
    run_cases(student, name, cases, "run_program")


@pytest.mark.weight(2)
def test_without_kernels(student, grading_seed):
    """No kernel table: the caller's float32 and float64 weights, the program's own weights twice."""
    for name in NAMES:
        rng = np.random.default_rng((grading_seed, 150 + NAMES.index(name)))
        cases = [{"args": oracle.inputs_of(name, rng), "state": oracle.state_of(name, rng), "kernels": []},
                 {"args": oracle.inputs_of(name, rng, wide=True), "state": oracle.state_of(name, rng, wide=True),
                  "kernels": []},
                 {"args": oracle.inputs_of(name, rng), "state": None, "kernels": [], "twice": True}]
        run_cases(student, name, cases, "run_program")


@pytest.mark.weight(2)
def test_boundaries_and_state_left_alone(student):
    """Sizes at both ends of each range; the same state twice (run_program must not write into it)."""
    rng = case_rng(200)
    for name in NAMES:
        spec = oracle.PROGRAMS[name][3]
        symbols = {d[0]: d for _, dims in spec for d in dims if not isinstance(d, int)}
        ends = [{s: (lo if end == 0 else (hi if hi is not None else oracle.UNBOUNDED_CAP)) for s, (_, lo, hi) in symbols.items()}
                for end in (0, 1)]
        cases = [{"args": oracle.inputs_of(name, rng, sizes), "state": oracle.state_of(name, rng),
                  "kernels": oracle.kernels_of(name, rng, 1)} for sizes in ends]
        cases.append({"args": oracle.inputs_of(name, rng), "state": oracle.state_of(name, rng),
                      "kernels": oracle.kernels_of(name, rng, 1), "twice": True})
        cases.append({"args": oracle.inputs_of(name, rng), "state": None, "kernels": oracle.kernels_of(name, rng, 1),
                      "twice": True})
        run_cases(student, name, cases, "run_program")


@pytest.mark.weight(4)
@pytest.mark.parametrize("name", NAMES)
def test_guards(student, name):
    """Every kind of out-of-range input the program has raises GuardError naming the input, from check_inputs and
    from run_program; in-range inputs pass check_inputs (None) and run_program gives the right values."""
    rng = case_rng(300 + NAMES.index(name))
    bad = oracle.bad_shapes(name, rng)
    arrays = [oracle.arrays_for(name, shapes, rng) for shapes, _ in bad]
    good = [oracle.inputs_of(name, rng, oracle.distinct_sizes(name, rng)), oracle.inputs_of(name, rng, wide=True)]
    plain = int(rng.integers(len(good[0])))   # this input arrives as nested Python lists, not a tensor
    data = oracle.program_bytes(name)
    cases = [{"args": a} for a in arrays + good] + [{"args": good[0], "as_list": plain}]
    checked = replies.list_of(student.run("lab11.scenarios:check_inputs", data, cases),
                              f"check_inputs's results on the {name} program", len(cases))
    spec_names = [n for n, _ in oracle.PROGRAMS[name][3]]
    oracle.expect_error(checked[-1], "GuardError", f"check_inputs of the {name} program with input "
                        f"{spec_names[plain]} given as a Python list instead of a tensor", spec_names[plain])
    checked = checked[:-1]
    ran = replies.list_of(student.run("lab11.scenarios:run_program", data,
                                      [{"args": a, "kernels": oracle.kernels_of(name, rng, 1)} for a in arrays]),
                          f"run_program's results on the {name} program", len(arrays))
    for (shapes, what), a, c, r in zip(bad, arrays, checked[:len(bad)], ran, strict=True):
        assert oracle.guard_violation(name, shapes) is not None, "internal: a bad case fits the spec"
        needle = oracle.guard_violation(name, shapes) or None
        label = f"the {name} program with inputs of shapes {shapes} ({what})"
        oracle.expect_error(c, "GuardError", f"check_inputs of {label}", needle)
        oracle.expect_error(r, "GuardError", f"run_program of {label}", needle)
    for a, c in zip(good, checked[len(bad):], strict=True):
        label = f"check_inputs of the {name} program with in-range inputs of shapes {[list(x.shape) for x in a]}"
        err = replies.error_reply(c, label)
        assert err is None, f"{label}: raised {err and err['error']}: {err and err['message'][:200]}"
        c = replies.dict_of(c, {"returned"}, label)
        assert c["returned"] is None, f"{label}: should return None, returned {c['returned']}"
    # no kernel table here (a guard is a skill of its own): the caller's float32 and float64 weights
    run_cases(student, name, [{"args": a, "state": oracle.state_of(name, rng, wide=a[0].dtype == np.float64),
                               "kernels": []} for a in good], "run_program")
