"""Leak scan: nothing of the solutions or the hidden graders may reach a learner.

`python -m autograder.authoring.leakscan DIR...` (exit 1 on any leak) finds in every file under DIR:

- `canary`: the string IPT-CANARY (planted in every solution region and in hidden grader files),
  in text or, for files that are not text, in their bytes;
- `solution`: a distinctive line of a solution region (`### BEGIN SOLUTION` .. `### END SOLUTION`)
  of solutions/*.py that the lab's own released text does not also contain;
- `hidden`: a distinctive line of autograder/labs/ (graders, scenarios, mutants, examples) that the public labs
  (public tests and generated lab notebooks) do not legitimately contain.

Lines are compared without any whitespace, and a pattern also matches inside a longer line, so
reindented code, a JSON-encoded notebook line and a syntax-highlighted HTML line are all found.
"Distinctive" means: at least MIN_CHARS characters without whitespace, at least one identifier that
is not a Python keyword, builtin or everyday name, and not an import of an ordinary module.
"""
from __future__ import annotations

import argparse
import builtins
import html
import json
import keyword
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from autograder.paths import REPO

CANARY = "IPT-CANARY"
MIN_CHARS = 24
HIDDEN_DIRS = ("autograder/labs",)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
TEXT_SUFFIXES = {
    ".ipynb", ".py", ".pyi", ".md", ".markdown", ".rst", ".txt", ".html", ".htm", ".xml", ".svg", ".js", ".mjs",
    ".map", ".json", ".css", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".csv", ".tex", ".sh", ".in", ".lark", "",
}
MAX_TEXT_BYTES = 50 * 1024 * 1024
COMMON_NAMES = {
    "self", "cls", "args", "kwargs", "np", "numpy", "torch", "pytest", "math", "result", "value", "values",
    "return", "item", "items", "index", "name", "names", "data", "your", "code", "here", "none", "true", "false",
    "YOUR", "CODE", "HERE", "BEGIN", "END", "SOLUTION", "HIDDEN", "TESTS",
}
GENERIC = set(keyword.kwlist) | set(dir(builtins)) | COMMON_NAMES
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLAIN_IMPORT = re.compile(r"^\s*(import\s+[\w.]+(\s+as\s+\w+)?(\s*,\s*[\w.]+(\s+as\s+\w+)?)*|from\s+[\w.]+\s+import\s+.*)\s*$")
PRIVATE_MODULES = ("autograder", "solutions")
TAG = re.compile(r"<[^>]*>")
WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, order=True)
class Leak:
    path: str
    line: int
    kind: str      # canary | solution | hidden
    origin: str    # where the leaked text comes from

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.origin}"


def normalize(line: str) -> str:
    return WHITESPACE.sub("", line)


def strip_comment(line: str) -> str:
    """The code before a trailing `#` comment (a rough cut: a `#` inside a string also cuts)."""
    return line.split("#", 1)[0] if "#" in line else line


def is_distinctive(line: str) -> bool:
    text = line.strip()
    if len(normalize(text)) < MIN_CHARS or CANARY in text or BEGIN in text or END in text:
        return False
    if PLAIN_IMPORT.match(text) and not any(m in text for m in PRIVATE_MODULES):
        return False
    return any(len(word) >= 3 and word not in GENERIC for word in IDENTIFIER.findall(text))


def _trie_regex(words: list[str]) -> str:
    """A regex matching any of `words`, as a trie of nested alternations (fast in `re`)."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if "" in node:
            return ""
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


class Matcher:
    """Which known lines (whitespace removed) occur inside a line; `re` does the scanning."""

    def __init__(self, patterns: dict[str, str]):
        self.patterns = patterns  # normalized line -> origin
        self.index: dict[str, list[str]] = {}
        for key in patterns:
            self.index.setdefault(key[:MIN_CHARS], []).append(key)
        self.regex = re.compile("(?=(" + _trie_regex(sorted(self.index)) + "))") if self.index else None

    def __len__(self) -> int:
        return len(self.patterns)

    def find(self, normalized: str) -> list[str]:
        if self.regex is None or len(normalized) < MIN_CHARS:
            return []
        found = []
        for match in self.regex.finditer(normalized):
            pos = match.start()
            found += [key for key in self.index[match.group(1)] if normalized.startswith(key, pos)]
        return found


def line_variants(line: str, suffix: str) -> set[str]:
    """The readings of one physical line: as is, as JSON strings' content, as HTML without tags."""
    variants = {line}
    if suffix in (".ipynb", ".json") and "\\" in line:  # escapes hide text only where there is a backslash
        for literal in re.findall(r'"(?:[^"\\]|\\.)*"', line):
            if "\\" in literal:
                try:
                    variants.update(json.loads(literal).splitlines())
                except ValueError:
                    pass
    if "<" in line or "&" in line:
        variants.add(html.unescape(TAG.sub("", line)))
    return variants


# ---- what must not leak -------------------------------------------------------------------------

def solution_regions(text: str):
    """(line number, line) of every line between BEGIN and END SOLUTION markers."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        elif inside:
            yield number, line


def outside_regions(text: str) -> str:
    """The text a lab releases: everything but its solution regions."""
    kept, inside = [], False
    for line in text.splitlines():
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def text_lines(path: Path):
    """(line number, line) of a hidden file: notebook cell sources, TOML string values, or plain lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return
    if path.suffix == ".toml":
        try:
            for value in _strings(tomllib.loads(text)):
                for line in value.splitlines():
                    yield 0, line
            return
        except tomllib.TOMLDecodeError:
            pass
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
            for cell in cells:
                source = cell.get("source", "")
                for line in ("".join(source) if isinstance(source, list) else str(source)).splitlines():
                    yield 0, line
            return
        except (ValueError, AttributeError):
            pass
    yield from enumerate(text.splitlines(), 1)


def _add(patterns: dict[str, str], line: str, origin: str) -> None:
    for candidate in (line, strip_comment(line)):
        if is_distinctive(candidate):
            patterns.setdefault(normalize(candidate), origin)


def _found_in(matcher: Matcher, texts) -> set[str]:
    hits = set()
    for text in texts:
        for line in text.splitlines():
            hits.update(matcher.find(normalize(line)))
    return hits


def _public_texts(repo: Path):
    """Authored public material (labs/: notebooks, public tests, labkit; course/: lecture notebooks and
    their helpers): a line found there is public by authorship, not a leak. Course code and lab code
    share idioms (`ctx.save_for_backward(x)`, an Adam optimizer line) that must not count as leaks."""
    for folder in ("labs", "course"):
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".ipynb", ".md", ".txt"):
                yield "\n".join(line for _, line in text_lines(path))


@dataclass
class Patterns:
    solution: Matcher = field(default_factory=lambda: Matcher({}))
    hidden: Matcher = field(default_factory=lambda: Matcher({}))

    @classmethod
    def from_repo(cls, repo: Path = REPO) -> "Patterns":
        repo = Path(repo)
        solution: dict[str, str] = {}
        released = []
        for path in sorted((repo / "solutions").glob("*.py")):
            text = path.read_text(encoding="utf-8")
            released.append(outside_regions(text))
            for number, line in solution_regions(text):
                _add(solution, line, f"solution line {path.relative_to(repo)}:{number}")
        solution_matcher = Matcher(solution)
        for key in _found_in(solution_matcher, [*released, *_public_texts(repo)]):  # public elsewhere: legitimate
            solution.pop(key, None)

        hidden: dict[str, str] = {}
        for folder in HIDDEN_DIRS:
            for path in sorted((repo / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix in TEXT_SUFFIXES:
                    for number, line in text_lines(path):
                        _add(hidden, line, f"hidden line {path.relative_to(repo)}" + (f":{number}" if number else ""))
        hidden_matcher = Matcher(hidden)
        for key in _found_in(hidden_matcher, [*_public_texts(repo), *released]):
            hidden.pop(key, None)
        return cls(Matcher(solution), Matcher(hidden))


# ---- scanning ------------------------------------------------------------------------------------

def scan_text(text: str, label: str, patterns: Patterns, suffix: str = ".txt") -> list[Leak]:
    """Leaks in one text (a file's content, a feedback message); `label` names it in the report."""
    leaks = []
    for number, line in enumerate(text.splitlines(), 1):
        if CANARY in line:
            leaks.append(Leak(label, number, "canary", f"the canary string {CANARY}"))
        seen: set[str] = set()
        for variant in line_variants(line, suffix):
            normalized = normalize(variant)
            for kind, matcher in (("solution", patterns.solution), ("hidden", patterns.hidden)):
                for key in matcher.find(normalized):
                    if key not in seen:
                        seen.add(key)
                        leaks.append(Leak(label, number, kind, matcher.patterns[key]))
    return leaks


def scan_file(path: Path, patterns: Patterns, label: str | None = None) -> list[Leak]:
    label = label or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [Leak(label, 0, "unreadable", f"cannot read: {exc.strerror}")]
    text = None
    if (path.suffix.lower() in TEXT_SUFFIXES or path.name == "Makefile") and len(data) <= MAX_TEXT_BYTES and b"\0" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is None:  # not text to us: at least the canary must not be in its bytes
        return [Leak(label, 0, "canary", f"the canary string {CANARY} (in binary content)")] if CANARY.encode() in data else []
    return scan_text(text, label, patterns, path.suffix.lower())


def scan(paths, patterns: Patterns | None = None, repo: Path = REPO) -> list[Leak]:
    """Every leak in the files under `paths` (files or folders), sorted by file and line."""
    patterns = patterns or Patterns.from_repo(repo)
    leaks: list[Leak] = []
    for root in map(Path, paths):
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        for path in files:
            leaks += scan_file(path, patterns)
    return sorted(set(leaks))


def report(leaks: list[Leak], limit: int = 200) -> str:
    lines = [str(leak) for leak in leaks[:limit]]
    if len(leaks) > limit:
        lines.append(f"... and {len(leaks) - limit} more")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.authoring.leakscan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", help="folders or files to scan (missing ones are skipped with a note)")
    parser.add_argument("--repo", default=str(REPO), help="the repository whose solutions and graders must not leak")
    args = parser.parse_args(argv)
    patterns = Patterns.from_repo(Path(args.repo))
    present = [d for d in args.dirs if Path(d).exists()]
    for missing in sorted(set(args.dirs) - set(present)):
        print(f"leakscan: {missing} does not exist, skipped", file=sys.stderr)
    leaks = scan(present, patterns)
    print(f"leakscan: {len(patterns.solution)} solution and {len(patterns.hidden)} hidden patterns, "
          f"{len(leaks)} leak(s) in {', '.join(present) or 'nothing'}")
    if leaks:
        print(report(leaks))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
