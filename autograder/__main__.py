"""Command line: `python -m autograder grade|selftest ...` (see --help)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import commands
from labkit.quickexit import at_exit_skip_final_gc


def main(argv=None) -> int:
    at_exit_skip_final_gc()  # the command imports torch to grade: its exit skips a long final collection
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Inside PyTorch's grading engine")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade submissions of a lab")
    g.add_argument("lab", help="lab id, e.g. lab01")
    g.add_argument("submissions", nargs="*", type=Path,
                   help=".ipynb files, `make submit` zips, or folders of them (default: the bundled examples)")
    g.add_argument("--out", type=Path, help="results folder (default: grading/<lab>)")
    g.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded in parallel")
    g.add_argument("--sandbox", default="auto", help="auto, namespaces, uid or rlimits")
    g.add_argument("--force", action="store_true", help="regrade submissions already graded with the same graders")
    g.add_argument("--roster", type=Path, help="CSV with a `learner` column (or one id per line): every learner gets a gradebook row")

    s = sub.add_parser("selftest", help="prove a lab's graders: reference full, stub zero, mutants caught")
    s.add_argument("labs", nargs="*", help="lab ids (default: all)")
    s.add_argument("-j", "--jobs", type=int, default=2)
    s.add_argument("--sandbox", default="auto")
    s.add_argument("--quick", action="store_true", help="CI's proof: a fixed sample of the mutants (IPT_SELFTEST=quick)")
    s.add_argument("--under-load", action="store_true", help="grade while every core runs a spinning process")

    t = sub.add_parser("try", help="grade one variant of a lab and print every part's score and failures")
    t.add_argument("lab")
    t.add_argument("notebook", nargs="?", default="reference", help="reference, stub, or a path to a notebook")
    t.add_argument("--parts", default="", help="comma-separated part ids (default: every part)")
    t.add_argument("--mutant", help="a hand-written mutant's name, or a machine mutant's id")
    t.add_argument("--attempt", help="an adversarial attempt's name")
    t.add_argument("--twin", action="store_true", help="with --attempt: grade its honest twin instead")
    t.add_argument("--sandbox", default="auto")
    t.add_argument("--seed", type=int, help="grade with this grading seed (another draw of the generated cases)")

    m = sub.add_parser("mutation", help="machine-made mutants of a lab's solution, graded through the real grader")
    m.add_argument("lab")
    m.add_argument("--list", action="store_true", help="list the mutants (id, line, change) without grading")
    m.add_argument("--run", action="store_true", help="grade them (the default when --list is not given)")
    m.add_argument("--limit", type=int, help="grade a fixed sample of this many")
    m.add_argument("--ids", default="", help="comma-separated mutant ids")
    m.add_argument("--survivors", action="store_true", help="regrade only the survivors of the last run")
    m.add_argument("--peers", action="store_true", help="run the lab's peer suite on every survivor (kills show holes in the graders)")
    m.add_argument("-j", "--jobs", type=int, default=2)

    n = sub.add_parser("nbgrader-grade", help="grade an nbgrader course's collected submissions into its gradebook")
    n.add_argument("lab")
    n.add_argument("--course", type=Path, default=Path("build/nbgrader"), help="nbgrader course directory")

    r = sub.add_parser("report", help="HTML class report of a graded batch")
    r.add_argument("lab")
    r.add_argument("--results", type=Path, help="graded batch folder (default: grading/<lab>)")

    b = sub.add_parser("bench-grader", help="our grader vs nbgrader autograde on the same submissions")
    b.add_argument("lab", nargs="?", default=None, help="one lab (default: every lab)")
    b.add_argument("--rounds", type=int, default=2)

    b = sub.add_parser("mutant-file", help="grade the mutants of a TOML file (mutants.toml's format), e.g. bugs written blind")
    b.add_argument("lab")
    b.add_argument("file", type=Path)
    b.add_argument("-j", "--jobs", type=int, default=2)

    e = sub.add_parser("examples", help="check a lab's example submissions against their recipes (--write: rebuild, grade, tabulate)")
    e.add_argument("lab")
    e.add_argument("--write", action="store_true")

    f = sub.add_parser("fuzz", help="differential fuzzing of a lab's reference against PyTorch")
    f.add_argument("labs", nargs="*", help="lab ids (default: all with a fuzzer)")
    f.add_argument("--examples", type=int, default=2000)

    args = parser.parse_args(argv)
    if args.command == "mutant-file":
        return commands.grade_mutant_file(args.lab, args.file, args.jobs)
    if args.command == "examples":
        return commands.examples(args.lab, args.write)
    if args.command == "fuzz":
        return commands.fuzz(args.labs, args.examples)
    if args.command == "try":
        return commands.try_variant(args.lab, args.notebook, [p for p in args.parts.split(",") if p], args.mutant,
                                    args.attempt, args.twin, args.sandbox, args.seed)
    if args.command == "mutation":
        from autograder.engine import mutation
        return mutation.main(args.lab, args.list, args.limit, [i for i in args.ids.split(",") if i], args.jobs,
                             args.survivors, args.peers)
    if args.command == "bench-grader":
        from autograder import bench
        return bench.run(args.lab, args.rounds)
    if args.command == "report":
        return commands.report(args.lab, args.results)
    if args.command == "nbgrader-grade":
        return commands.nbgrader_grade(args.lab, args.course)
    if args.command == "grade":
        return commands.grade(args.lab, args.submissions, args.out, args.jobs, args.sandbox, args.force, roster=args.roster)
    return commands.selftest(args.labs, args.jobs, args.sandbox, args.quick or None, args.under_load)


if __name__ == "__main__":
    sys.exit(main())
