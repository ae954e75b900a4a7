"""What the command line does: grade submissions, run self-tests."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from rich.console import Console
from rich.table import Table

from autograder.authoring.generate import render, solution_notebook
from autograder.engine import selftest as selftest_mod
from autograder.engine.pipeline import Options, fingerprint, grade as grade_one, parse
from autograder.paths import REPO, LabPaths, all_labs, build_dir, lab_paths

console = Console(highlight=False, width=max(120, shutil.get_terminal_size().columns))


def example_submissions(lab: str) -> list[Path]:
    """The reference, the blank release and the bundled partial attempts of a lab."""
    paths = lab_paths(lab)
    folder = build_dir("examples", paths.lab)
    reference = folder / "reference.ipynb"
    reference.write_text(render(solution_notebook(paths.solution.read_text())))
    blank = folder / "blank.ipynb"
    blank.write_bytes(paths.release_notebook.read_bytes())
    return [reference, blank, *sorted(paths.examples.glob("*.ipynb"))]


def expand(items: list[Path]) -> list[Path]:
    found = []
    for item in items:
        if item.is_dir():
            found += sorted(p for p in item.iterdir() if p.suffix in (".ipynb", ".zip"))
        else:
            found.append(item)
    return found


def _folder_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", path.stem) or "submission"


def score_table(lab: str, rows: list[tuple[Path, dict]]) -> Table:
    table = Table(title=f"{lab}: {len(rows)} submission(s)")
    table.add_column("submission")
    parts = rows[0][1]["extra_data"]["parts"] if rows else {}
    for part, info in parts.items():
        table.add_column(f"{part}\n/{info['max_score']:g}", justify="right")
    table.add_column("total", justify="right")
    for path, data in rows:
        extra = data["extra_data"]
        total = f"{data['score']:g}/{data['max_score']:g}" + (" [red](internal error)[/]" if extra["internal_errors"] else "")
        table.add_row(path.name, *(f"{extra['parts'][p]['score']:g}" for p in parts), total)
    return table


def _already_graded(path: Path, target: Path, fingerprint: str) -> bool:
    """Resumable batches: same submission bytes, same graders -> keep the earlier result."""
    try:
        extra = json.loads((target / "results.json").read_text())["extra_data"]
        return extra["submission_sha256"] == parse(path).sha256 and extra["graders_sha256"] == fingerprint
    except (OSError, KeyError, ValueError, TypeError):
        return False


def learner_of(path: Path) -> tuple[str, str | None]:
    """(learner, submitted_at) from a `make submit` zip's manifest; a bare notebook is known by its file name."""
    if path.suffix == ".zip":
        try:
            manifest = parse(path).manifest or {}
        except Exception:  # noqa: BLE001 - an unreadable zip is graded (and explained) by the engine
            manifest = {}
        user = manifest.get("user")
        if isinstance(user, str) and user:
            stamp = manifest.get("submitted_at")
            return user, stamp if isinstance(stamp, str) else None
    return path.stem, None


def _utc(text: str) -> "datetime":
    from datetime import datetime, timezone
    text = re.sub(r"^(\d{4}-\d\d-\d\d)T", r"\1 ", text.strip().removesuffix(" UTC").removesuffix("Z"))
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"not a UTC date and time: {text!r} (e.g. '2026-12-01 23:59')")


def late_penalty(submitted_at: str | None, due: str | None, percent_per_day: float) -> tuple[int, float]:
    """(days late, penalty in percent): every started day after `due` costs `percent_per_day`, at most 100."""
    import math
    if not due or not submitted_at:
        return 0, 0.0
    seconds = (_utc(submitted_at) - _utc(due)).total_seconds()
    days = math.ceil(seconds / 86400) if seconds > 0 else 0
    return days, min(100.0, days * percent_per_day)


def classroom_rows(rows: list[tuple[Path, dict]], due: str | None, percent_per_day: float) -> list[dict]:
    """One record per submission: learner (manifest's user), raw score, lateness, final score."""
    records = []
    for path, data in rows:
        learner, stamp = learner_of(path)
        days, penalty = late_penalty(stamp, due, percent_per_day)
        records.append({"learner": learner, "submission": path.name, "submitted_at": stamp or "",
                        "raw_score": data["score"], "days_late": days, "penalty_percent": penalty,
                        "score": round(data["score"] * (1 - penalty / 100), 4), "max_score": data["max_score"]})
    return records


def counted_submissions(records: list[dict]) -> set[int]:
    """Which submission counts for each learner: the latest by its manifest's `submitted_at`; a learner
    whose submissions carry no time stamp has the last of them by name counted."""
    best: dict[str, tuple] = {}
    for index, record in enumerate(records):
        try:
            stamp = _utc(record["submitted_at"]).timestamp() if record["submitted_at"] else float("-inf")
        except ValueError:
            stamp = float("-inf")
        key = (stamp, record["submission"], index)
        if record["learner"] not in best or key > best[record["learner"]]:
            best[record["learner"]] = key
    return {key[2] for key in best.values()}


def read_roster(path: Path) -> list[str]:
    """Learner ids from a roster: a CSV with a `learner` column, or one id per line (first column)."""
    text = path.read_text().splitlines()
    rows = [r for r in csv.reader(text) if r and r[0].strip() and not r[0].lstrip().startswith("#")]
    if rows and "learner" in [c.strip().lower() for c in rows[0]]:
        column = [c.strip().lower() for c in rows[0]].index("learner")
        return [r[column].strip() for r in rows[1:] if len(r) > column and r[column].strip()]
    return [r[0].strip() for r in rows]


def write_gradebook(out: Path, records: list[dict], roster: list[str] | None) -> Path:
    """gradebook.csv: one row per learner with the score of the submission that counts (the latest).
    With a roster, every learner on it has a row (no submission: 0), and a submission from someone not on
    it is flagged rather than dropped."""
    counted = [records[i] for i in sorted(counted_submissions(records))]
    by_learner = {r["learner"]: r for r in counted}
    max_score = records[0]["max_score"] if records else 0
    learners = list(roster or []) + sorted(set(by_learner) - set(roster or []))
    file = out / "gradebook.csv"
    with file.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "score", "max_score", "submission", "submitted_at", "days_late", "submissions",
                         "status"])
        for learner in learners:
            record = by_learner.get(learner)
            count = sum(1 for r in records if r["learner"] == learner)
            if record is None:
                writer.writerow([learner, 0, max_score, "", "", 0, 0, "no submission"])
                continue
            status = "not on the roster" if roster is not None and learner not in roster else "graded"
            writer.writerow([learner, record["score"], record["max_score"], record["submission"], record["submitted_at"],
                             record["days_late"], count, status])
    return file


def write_class_csv(out: Path, rows: list[tuple[Path, dict]], targets: list[Path] | None = None,
                    due: str | None = None, percent_per_day: float = 0.0, roster: list[str] | None = None) -> Path:
    """class.csv: every submission, keyed by learner, `counts` marking the one that counts (the learner's
    latest); gradebook.csv: one row per learner (and per roster entry). Each graded folder also gets
    classroom.json (read by `make report`)."""
    file = out / "class.csv"
    parts = list(rows[0][1]["extra_data"]["parts"]) if rows else []
    records = classroom_rows(rows, due, percent_per_day)
    counted = counted_submissions(records)
    for index, record in enumerate(records):
        record["counts"] = index in counted
    with file.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "submission", "submitted_at", *parts, "raw_score", "days_late", "penalty_percent",
                         "score", "max_score", "counts", "feedback", "sandbox", "internal_errors", "sha256"])
        for index, ((path, data), record) in enumerate(zip(rows, records, strict=True)):
            extra = data["extra_data"]
            target = targets[index] if targets else out / _folder_name(path)
            feedback = (target / "feedback.md").relative_to(out) if (target / "feedback.md").is_relative_to(out) else ""
            writer.writerow([record["learner"], path.name, record["submitted_at"],
                             *(extra["parts"][p]["score"] for p in parts), data["score"], record["days_late"],
                             record["penalty_percent"], record["score"], data["max_score"],
                             "yes" if record["counts"] else "no (a later submission counts)", feedback,
                             extra["sandbox"], len(extra["internal_errors"]), extra["submission_sha256"]])
            if target.is_dir():
                (target / "classroom.json").write_text(json.dumps(record, indent=1))
    write_gradebook(out, records, roster)
    return file


def grade(lab, submissions: list[Path], out: Path | None, jobs: int, sandbox: str, force: bool = False,
          due: str | None = None, percent_per_day: float | None = None, roster: Path | None = None) -> int:
    """Grade submissions (notebooks, `make submit` zips, folders of them); batches write class.csv keyed
    by learner, with late penalties when a deadline is given (DUE= / PENALTY= in make, or IPT_DUE /
    IPT_LATE_PENALTY), and gradebook.csv, one row per learner (ROSTER= / IPT_ROSTER: every learner on the
    roster gets a row)."""
    paths = lab_paths(lab)
    roster = roster or (Path(os.environ["IPT_ROSTER"]) if os.environ.get("IPT_ROSTER") else None)
    if roster is not None and not roster.is_file():
        console.print(f"[red]ROSTER:[/] no such file: {roster}")
        return 2
    learners = read_roster(roster) if roster is not None else None
    due = due if due is not None else (os.environ.get("IPT_DUE") or None)
    if percent_per_day is None:
        percent_per_day = float(os.environ.get("IPT_LATE_PENALTY") or 0)
    if due:
        try:
            late_penalty(due, due, percent_per_day)
        except ValueError as exc:
            console.print(f"[red]DUE:[/] {exc}")
            return 2
    items = expand(submissions) if submissions else example_submissions(paths.lab)
    missing = [p for p in items if not p.exists()]
    if missing:
        console.print(f"[red]no such submission:[/] {', '.join(map(str, missing))}")
        return 2
    out = out or (REPO / "grading" / paths.lab)
    single = len(submissions) == 1 and submissions[0].is_file()
    targets = [out if single else out / _folder_name(p) for p in items]
    if len(set(targets)) != len(targets):
        console.print("[red]two submissions share a name; rename one[/]")
        return 2
    options, stamp = Options(sandbox), fingerprint(paths)
    todo = [(p, t) for p, t in zip(items, targets, strict=True) if force or not _already_graded(p, t, stamp)]
    if len(todo) < len(items):
        console.print(f"{len(items) - len(todo)} submission(s) already graded with these graders: kept (--force regrades)")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        work = pool.map(lambda pt: grade_one(paths, pt[0], pt[1], options), todo)
        list(tqdm(work, total=len(todo), desc=f"grading {paths.lab}", unit="sub", disable=len(todo) < 2))
    rows = [(p, json.loads((t / "results.json").read_text())) for p, t in zip(items, targets, strict=True)]
    console.print(score_table(paths.lab, rows))
    if not single:
        console.print(f"class table: {write_class_csv(out, rows, targets, due, percent_per_day, learners)}"
                      f" (every submission); gradebook: {out / 'gradebook.csv'} (one row per learner, latest submission)")
    console.print(f"results in {out}" + ("" if single else "/<submission>/") + " (results.json, feedback.md)")
    return 0


def selftest(labs: list[str], jobs: int, sandbox: str, quick: bool | None = None, under_load: bool = False) -> int:
    chosen = [lab_paths(lab).lab for lab in labs] or [p.lab for p in all_labs()]
    return max((selftest_mod.run(lab, jobs, sandbox, quick, under_load) for lab in chosen), default=0)


def try_variant(lab: str, which: str, parts: list[str], mutant: str | None, attempt: str | None, twin: bool,
                sandbox: str, seed: int | None = None) -> int:
    """Grade one variant (reference, stub, a notebook, a mutant, an attempt or its twin) and print it all."""
    import nbformat

    from autograder.authoring.generate import solution_notebook
    from autograder.engine import mutation, variants
    from autograder.engine.pipeline import Options
    from autograder.engine.pipeline import grade as grade_one
    paths = lab_paths(lab)
    folder = build_dir("try", paths.lab)
    if mutant:
        hand = {m["name"]: m for m in variants.hand_mutants(paths)}
        text = paths.solution.read_text()
        if mutant in hand:
            nb = solution_notebook(text.replace(hand[mutant]["find"], hand[mutant]["replace"]))
        else:
            found = [m for m in mutation.generate(text) if m.id == mutant]
            if not found:
                console.print(f"no hand-written mutant or machine mutant id {mutant!r}")
                return 2
            console.print(found[0].describe(), markup=False)
            nb = mutation.notebook(paths, found[0])
    elif attempt:
        found = [a for a in variants.attempts(paths) if a.name == attempt]
        if not found:
            console.print(f"no adversarial attempt {attempt!r}")
            return 2
        nb = (variants.twin_notebook if twin else variants.attempt_notebook)(paths, found[0])
    elif which == "reference":
        nb = variants.reference(paths)
    elif which == "stub":
        nb = variants.stub(paths)
    else:
        nb = None
    if nb is not None:
        path = folder / "variant.ipynb"
        path.write_text(nbformat.writes(nb))
    else:
        path = Path(which)
    result = grade_one(paths, path, folder / "result", Options(sandbox, parts=tuple(parts), seed=seed))
    for part in result.parts:
        if parts and part.id not in parts:
            continue
        console.print(f"[bold]{part.id}[/]: {part.score:g}/{part.points:g} ({part.passed}/{part.total} tests)")
        for failure in part.failures:
            console.print(f"    - {failure}", markup=False)
        for line in part.internal:
            console.print(f"    [red]internal[/] {line[:1500]}", markup=False)
    for note in result.notes:
        console.print(f"note: {note[:500]}", markup=False)
    if result.error:
        console.print(f"[red]grading error[/]: {result.error[:3000]}", markup=False)
    console.print(f"total {result.score:g}/{result.max_score:g} in {result.seconds:.1f} s")
    return 0


def nbgrader_grade(lab: str, course: Path) -> int:
    """`nbgrader autograde LAB` in the course directory (hidden graders inside), then the gradebook's scores."""
    from autograder.bridges.nbgrader import grade_course
    paths = lab_paths(lab)
    if not (course / "nbgrader_config.py").is_file():
        console.print(f"[red]{course} is not an nbgrader course directory[/]: run `make nbgrader` first")
        return 2
    try:
        graded = grade_course(paths, course)
    except RuntimeError as exc:
        console.print(str(exc), markup=False)
        return 1
    for student, score in graded:
        console.print(f"{student}: {score:g}")
    console.print(f"{len(graded)} submission(s) autograded into {course / 'gradebook.db'}; "
                  f"next: make nbgrader-feedback LAB={paths.lab}")
    return 0


def report(lab: str, folder: Path | None) -> int:
    from autograder.report import build
    paths = lab_paths(lab)
    console.print(f"class report: {build(paths.lab, folder or REPO / 'grading' / paths.lab)}")
    return 0


def fuzz(labs: list[str], examples: int) -> int:
    """Run each lab's differential fuzzer (reference vs PyTorch) with a large budget."""
    chosen = [lab_paths(lab) for lab in labs] or [p for p in all_labs() if (p.hidden / "fuzz.py").exists()]
    status = 0
    for paths in chosen:
        cases, failure = selftest_mod.run_fuzz(paths, examples)
        if failure:
            status = 1
            console.print(f"[red]{paths.lab}[/]: {failure}", markup=True)
        else:
            console.print(f"{paths.lab}: {cases} cases agree with PyTorch")
    return status


EXAMPLES_BEGIN = "<!-- BEGIN EXAMPLES: written by `python -m autograder examples LAB --write` -->"
EXAMPLES_END = "<!-- END EXAMPLES -->"


def stale_examples(paths: LabPaths) -> list[str]:
    """Example notebooks whose graded code no longer matches their recipe (examples/recipes.toml)."""
    from labkit.notebook import assemble, read_notebook

    from autograder.engine import variants
    release = read_notebook(paths.release_notebook)
    stale = []
    for recipe in variants.recipes(paths):
        committed = paths.examples / recipe.notebook
        try:
            wanted = assemble(release, variants.example_notebook(paths, recipe)).cells
        except ValueError as exc:
            stale.append(str(exc))
            continue
        if not committed.exists() or assemble(release, read_notebook(committed)).cells != wanted:
            stale.append(f"{recipe.notebook} differs from its recipe: `python -m autograder examples {paths.lab} --write`")
    return stale


def examples(lab: str, write: bool, jobs: int = 2) -> int:
    """Check (or with --write: rebuild, grade and tabulate) a lab's example submissions from their recipes."""
    import nbformat

    from autograder.engine import variants
    paths = lab_paths(lab)
    chosen = variants.recipes(paths)
    if not chosen:
        console.print(f"{paths.lab} has no examples/recipes.toml: its examples are written by hand")
        return 0
    if not write:
        stale = stale_examples(paths)
        for line in stale:
            console.print(f"[red]stale[/] {line}", markup=True)
        console.print(f"{len(chosen) - len(stale)}/{len(chosen)} examples match their recipes")
        return 1 if stale else 0
    for recipe in chosen:
        (paths.examples / recipe.notebook).write_text(nbformat.writes(variants.example_notebook(paths, recipe)))
    folder = build_dir("examples", paths.lab, "recipes")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda r: grade_one(paths, paths.examples / r.notebook, folder / Path(r.notebook).stem,
                                                     Options()), chosen))
    rows = ["| notebook | what it is | score |", "|---|---|---|"]
    for recipe, result in zip(chosen, results, strict=True):
        parts = ", ".join(f"{p.id} {p.score:g}" for p in result.parts if p.score)
        rows.append(f"| `{recipe.notebook}` | {recipe.description} | {result.score:g} / {result.max_score:g}"
                    + (f" ({parts})" if parts else "") + " |")
        console.print(f"{recipe.notebook}: {result.score:g}/{result.max_score:g}")
    readme = paths.examples / "README.md"
    text = readme.read_text() if readme.exists() else f"# {paths.lab} example submissions\n\n{EXAMPLES_BEGIN}\n{EXAMPLES_END}\n"
    if EXAMPLES_BEGIN not in text:
        text += f"\n{EXAMPLES_BEGIN}\n{EXAMPLES_END}\n"
    head, _, rest = text.partition(EXAMPLES_BEGIN)
    _, _, tail = rest.partition(EXAMPLES_END)
    readme.write_text(head + EXAMPLES_BEGIN + "\n" + "\n".join(rows) + "\n" + EXAMPLES_END + tail)
    console.print(f"wrote {readme}")
    return 0


def grade_mutant_file(lab: str, file: Path, jobs: int = 2) -> int:
    """Grade the mutants of a TOML file (mutants.toml's format: [[mutant]] name, description, find, replace)
    written by someone who never saw the graders: each is CAUGHT when it loses a point. Survivors are the
    graders' holes; exit status 1 when any survives."""
    import tomllib

    import nbformat

    from autograder.engine import variants
    paths = lab_paths(lab)
    text = paths.solution.read_text()
    entries = tomllib.loads(file.read_text()).get("mutant", [])
    folder = build_dir("blind", paths.lab)
    jobs_list, problems = [], []
    for entry in entries:
        name = entry.get("name", "?")
        if text.count(entry.get("find", "\0")) != 1:
            problems.append(f"{name}: its `find` text occurs {text.count(entry.get('find', chr(0)))} times in {paths.solution.name} (must be once)")
            continue
        nb = solution_notebook(text.replace(entry["find"], entry["replace"]))
        path = folder / f"{name}.ipynb"
        path.write_text(nbformat.writes(nb))
        jobs_list.append((name, entry.get("description", ""), path, Options(parts=variants.home_first(paths, nb))))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(lambda j: grade_one(paths, j[2], folder / "results" / j[0], j[3]), jobs_list))
    survivors = 0
    for (name, description, _, _), result in zip(jobs_list, results, strict=True):
        lost = [f"{p.id} {p.score:g}/{p.points:g}" for p in result.parts if p.score < p.points]
        caught = result.score < result.max_score
        survivors += not caught
        console.print(("[green]CAUGHT  [/]" if caught else "[red]SURVIVED[/]") + f" {name}: {description[:90]}"
                      + (f"  ({', '.join(lost)})" if lost else ""), highlight=False)
    for problem in problems:
        console.print(f"[yellow]skipped[/] {problem}", highlight=False)
    console.print(f"{len(results) - survivors}/{len(results)} caught")
    return 1 if survivors else 0
