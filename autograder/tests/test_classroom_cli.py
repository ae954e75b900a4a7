"""The CLI classroom path: class.csv and the class report keyed by the learner named in each `make submit`
manifest, a due date with a late penalty per started day, and a link from the report to every feedback."""
from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pytest

from autograder import commands, report


def submit_zip(folder: Path, user: str, submitted_at: str) -> Path:
    path = folder / f"lab00-{user}.zip"
    nb = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    import hashlib
    manifest = {"lab": "lab00", "notebook": "lab00_toy.ipynb", "sha256": hashlib.sha256(nb).hexdigest(),
                "submitted_at": submitted_at, "user": user}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("lab00_toy.ipynb", nb)
    return path


def results(score: float) -> dict:
    return {"score": score, "max_score": 15, "extra_data": {
        "parts": {"add": {"score": min(score, 10), "max_score": 10}, "scale": {"score": max(0, score - 10), "max_score": 5}},
        "sandbox": "rlimits", "internal_errors": [], "submission_sha256": "0" * 64}}


def test_late_penalty_per_started_day():
    due = "2026-12-01 23:59"
    assert commands.late_penalty("2026-12-01T23:00:00Z", due, 10) == (0, 0)
    assert commands.late_penalty("2026-12-02T00:00:00Z", due, 10) == (1, 10)
    assert commands.late_penalty("2026-12-04T00:00:00Z", due, 10) == (3, 30)
    assert commands.late_penalty("2026-12-30T00:00:00Z", due, 10) == (29, 100)
    assert commands.late_penalty("2026-11-23 18:58:32.110655 UTC", "2026-11-23 12:00", 25) == (1, 25)
    assert commands.late_penalty(None, due, 10) == (0, 0)
    with pytest.raises(ValueError, match="not a UTC date"):
        commands.late_penalty("2026-12-02T00:00:00Z", "next friday", 10)


def test_class_csv_and_report_are_keyed_by_learner_with_links_to_feedback(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "grading"
    subs.mkdir()
    items = [submit_zip(subs, "ada", "2026-12-01T20:00:00Z"), submit_zip(subs, "grace", "2026-12-03T08:00:00Z"),
             subs / "loose-notebook.ipynb"]
    rows = []
    for path, score in zip(items, (15, 10, 5), strict=True):
        target = out / commands._folder_name(path)
        target.mkdir(parents=True)
        (target / "results.json").write_text(json.dumps(results(score)))
        (target / "feedback.md").write_text(f"feedback of {path.name}\n")
        rows.append((path, results(score)))
    targets = [out / commands._folder_name(p) for p in items]
    table = commands.write_class_csv(out, rows, targets, due="2026-12-01 23:59", percent_per_day=10)
    by_learner = {r["learner"]: r for r in csv.DictReader(table.open())}
    assert set(by_learner) == {"ada", "grace", "loose-notebook"}
    assert (by_learner["ada"]["days_late"], float(by_learner["ada"]["score"])) == ("0", 15)
    assert (by_learner["grace"]["days_late"], float(by_learner["grace"]["penalty_percent"])) == ("2", 20)
    assert float(by_learner["grace"]["raw_score"]) == 10 and float(by_learner["grace"]["score"]) == 8
    assert by_learner["ada"]["feedback"] == "lab00-ada/feedback.md"

    page = report.build("lab00", out).read_text()
    for learner, folder in (("ada", "lab00-ada"), ("grace", "lab00-grace")):
        assert f"<td>{learner}</td>" in page and f'<a href="{folder}/feedback.md">feedback</a>' in page
    assert "2 d, −20 %" in page and "<td>8</td>" in page
    for link in ("lab00-ada/feedback.md", "lab00-grace/feedback.md", "loose-notebook/feedback.md"):
        assert (out / link).is_file(), link


def test_gradebook_counts_each_learners_latest_submission_and_lists_the_roster(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "grading"
    (subs / "early").mkdir(parents=True)
    items = [submit_zip(subs / "early", "ada", "2026-12-01T10:00:00Z"), submit_zip(subs, "ada", "2026-12-01T20:00:00Z"),
             submit_zip(subs, "grace", "2026-12-01T09:00:00Z"), submit_zip(subs, "mallory", "2026-12-01T09:00:00Z")]
    items[0] = items[0].rename(subs / "early" / "lab00-ada-first.zip")
    rows = [(path, results(score)) for path, score in zip(items, (15, 6, 10, 3), strict=True)]
    targets = [out / commands._folder_name(p) for p in items]
    for target, (_, data) in zip(targets, rows, strict=True):
        target.mkdir(parents=True)
        (target / "results.json").write_text(json.dumps(data))
    roster = tmp_path / "roster.csv"
    roster.write_text("learner,name\nada,Ada L.\ngrace,Grace H.\nbarbara,Barbara L.\n")
    commands.write_class_csv(out, rows, targets, roster=commands.read_roster(roster))

    every = list(csv.DictReader((out / "class.csv").open()))
    assert [(r["learner"], r["counts"][:3]) for r in every] == [("ada", "no "), ("ada", "yes"), ("grace", "yes"), ("mallory", "yes")]
    book = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert list(book) == ["ada", "grace", "barbara", "mallory"], "roster order first, then learners not on it"
    assert float(book["ada"]["score"]) == 6 and book["ada"]["submissions"] == "2", "the latest submission counts, even when lower"
    assert (book["barbara"]["status"], float(book["barbara"]["score"])) == ("no submission", 0)
    assert book["mallory"]["status"] == "not on the roster"
    assert "(a later submission counts)" in report.build("lab00", out).read_text()


def test_a_roster_is_one_id_per_line_or_a_learner_column(tmp_path):
    plain, table = tmp_path / "plain.txt", tmp_path / "table.csv"
    plain.write_text("# lab01 section A\nada\n\ngrace\n")
    table.write_text("name,learner\nAda,ada\nGrace,grace\n")
    assert commands.read_roster(plain) == commands.read_roster(table) == ["ada", "grace"]
