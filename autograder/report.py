"""`make report LAB=labNN`: an HTML class report from a graded batch (grading/labNN/*/).

Score histogram, mean score per part, the hidden tests most often failed, by name, and one row per
learner (from the submission's manifest) with lateness, final score and a link to their feedback. Figures
are matplotlib PNGs embedded in the page, so the report is one self-contained file.
"""
from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(folder: Path) -> list[tuple[str, dict, list[dict]]]:
    rows = []
    for results in sorted(folder.glob("*/results.json")):
        outcomes = results.parent / "outcomes.json"
        rows.append((results.parent.name, json.loads(results.read_text()),
                     json.loads(outcomes.read_text()) if outcomes.exists() else []))
    return rows


def classroom(folder: Path) -> dict:
    """The learner, lateness and final score `make grade` recorded beside results.json (if any)."""
    try:
        return json.loads((folder / "classroom.json").read_text())
    except (OSError, ValueError):
        return {}


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def histogram(scores: list[float], max_score: float) -> str:
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.hist(scores, bins=min(20, max(5, len(scores))), range=(0, max_score), color="#4C72B0", edgecolor="white")
    ax.set_xlabel(f"score (out of {max_score:g})")
    ax.set_ylabel("submissions")
    ax.set_title("Score distribution")
    return _png(fig)


def part_means(parts: dict[str, list[float]], maxima: dict[str, float]) -> str:
    names = list(parts)
    means = [100 * sum(parts[n]) / (len(parts[n]) * maxima[n]) if maxima[n] else 0 for n in names]
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(names) + 1))
    ax.barh(names[::-1], means[::-1], color="#55A868")
    ax.set_xlim(0, 100)
    ax.set_xlabel("mean score (% of the part's points)")
    ax.set_title("Parts")
    for y, value in enumerate(means[::-1]):
        ax.text(min(value + 1, 90), y, f"{value:.0f}%", va="center")
    return _png(fig)


def build(lab: str, folder: Path) -> Path:
    rows = load(folder)
    if not rows:
        raise SystemExit(f"no graded submissions under {folder}: run `make grade LAB={lab} SUB=...` first")
    max_score = rows[0][1]["max_score"]
    scores = [data["score"] for _, data, _ in rows]
    parts: dict[str, list[float]] = {}
    maxima: dict[str, float] = {}
    for _, data, _ in rows:
        for part, info in data["extra_data"]["parts"].items():
            parts.setdefault(part, []).append(info["score"])
            maxima[part] = info["max_score"]
    failed = Counter(o["id"] for _, _, outcomes in rows for o in outcomes if o["outcome"] != "passed")
    internal = [(name, e) for name, data, _ in rows for e in data["extra_data"].get("internal_errors", [])]

    mean = sum(scores) / len(scores)
    median = sorted(scores)[len(scores) // 2]
    page = [f"<!doctype html><meta charset=utf-8><title>{lab} class report</title>",
            "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
            "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left}</style>",
            f"<h1>{html.escape(lab)}: class report</h1>",
            f"<p>{len(rows)} submissions · mean {mean:.1f} · median {median:g} · max {max(scores):g} / {max_score:g}</p>",
            f'<img alt="score histogram" src="data:image/png;base64,{histogram(scores, max_score)}">',
            f'<img alt="mean score per part" src="data:image/png;base64,{part_means(parts, maxima)}">',
            "<h2>Hidden tests most often failed</h2><table><tr><th>test</th><th>failed by</th></tr>"]
    page += [f"<tr><td><code>{html.escape(test)}</code></td><td>{count} of {len(rows)}</td></tr>"
             for test, count in failed.most_common(15)]
    page.append("</table>")
    if internal:
        page.append("<h2>Internal grading errors</h2><ul>")
        page += [f"<li>{html.escape(name)}: <code>{html.escape(e[:300])}</code></li>" for name, e in internal]
        page.append("</ul>")
    page.append("<h2>Learners</h2><table><tr><th>learner</th><th>submission</th>"
                + "".join(f"<th>{html.escape(p)}</th>" for p in parts)
                + "<th>raw</th><th>late</th><th>score</th><th>feedback</th></tr>")
    for name, data, _ in rows:
        record = classroom(folder / name)
        cells = "".join(f"<td>{data['extra_data']['parts'][p]['score']:g}</td>" for p in parts)
        late = f"{record['days_late']} d, −{record['penalty_percent']:g} %" if record.get("days_late") else ""
        link = f'<a href="{html.escape(quote(name))}/feedback.md">feedback</a>' if (folder / name / "feedback.md").is_file() else ""
        superseded = " (a later submission counts)" if record.get("counts") is False else ""
        page.append(f"<tr><td>{html.escape(str(record.get('learner', name)))}</td><td>{html.escape(name + superseded)}</td>{cells}"
                    f"<td>{data['score']:g}</td><td>{late}</td><td>{record.get('score', data['score']):g}</td><td>{link}</td></tr>")
    page.append("</table>")
    target = folder / "report.html"
    target.write_text("\n".join(page))
    return target
