"""The labkit command line: `python -m labkit status | submit LAB | lab [JUPYTER ARGS...]`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.labs import LABS_ROOT, LabNotFound, find_lab
from labkit.notebook import NotebookError


def _status(args) -> int:
    from labkit import status

    return status.main(Path(args.labs), args.timeout, args.verbose, args.only or None, fresh=args.fresh)


def _submit(args) -> int:
    from labkit import status
    from labkit.submission import SubmissionError, make_submission

    try:
        labdir = find_lab(args.lab, root=args.labs)
        path = make_submission(labdir, args.user, Path(args.out) if args.out else None,
                               Path(args.notebook) if args.notebook else None)
    except (LabNotFound, NotebookError, SubmissionError, OSError) as exc:
        print(f"cannot submit: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    print("(it holds the notebook as last saved: save it in JupyterLab first if you changed it since)")
    if not args.no_tests:
        status.render([status.collect(labdir, args.timeout)])
    return 0


def _lab(args) -> int:
    from labkit import jupyter

    return jupyter.main(args.jupyter_args)


def main(argv: list[str] | None = None) -> int:
    from labkit.status import DEFAULT_TIMEOUT

    parser = argparse.ArgumentParser(prog="python -m labkit", description="Inside PyTorch lab tools.")
    parser.add_argument("--labs", default=str(LABS_ROOT), help="the labs folder (default: %(default)s)")
    commands = parser.add_subparsers(dest="command", required=True)

    status_cmd = commands.add_parser("status", help="public tests of every lab against its notebook, as a table")
    status_cmd.add_argument("only", nargs="*", help="lab ids to show (default: all)")
    status_cmd.add_argument("-v", "--verbose", action="store_true", help="list every failing test")
    status_cmd.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per lab")
    status_cmd.add_argument("--fresh", action="store_true",
                            help="run every lab's tests, also those unchanged since the last status")
    status_cmd.set_defaults(run=_status)

    submit_cmd = commands.add_parser("submit", help="zip a lab notebook with a manifest into submissions/")
    submit_cmd.add_argument("lab", help="lab id, e.g. lab01")
    submit_cmd.add_argument("--user", help="your user name (default: $LABKIT_USER or your login)")
    submit_cmd.add_argument("--notebook", help="submit this notebook instead of the lab's own")
    submit_cmd.add_argument("--out", help="folder for the zip (default: submissions/ at the course home)")
    submit_cmd.add_argument("--no-tests", action="store_true", help="skip the public-test summary")
    submit_cmd.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds for the public tests")
    submit_cmd.set_defaults(run=_submit)

    lab_cmd = commands.add_parser("lab", help="start JupyterLab at the course home (extra args go to Jupyter)")
    lab_cmd.set_defaults(run=_lab)

    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.jupyter_args = extra
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
