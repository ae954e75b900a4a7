"""The course book: `python book/build.py` builds a complete, offline, leak-free site.

The build runs once per module. The checks read the static HTML, then load pages in headless
Chromium (the flags that work offline as root, see PLATFORM_NOTES) and look at the rendered DOM:
navigation, figures, MathJax typeset from the vendored copy, lab handouts.

Without Chromium the browser checks skip, except under CI (the CI variable set), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "book" / "_build" / "html"
STAGES = ["01_tensors", "02_autograd", "03_dispatcher", "04_memory", "05_fx", "06_compile",
          "07_quantization", "08_distributed", "09_deploy"]
LAB01 = ROOT / "labs" / "lab01_strided" / "lab01_strided.ipynb"
LEAK_MARKERS = ["IPT-CANARY", "### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"]
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //cdn...
# attributes that make the browser fetch something (plain <a href> hyperlinks are fine)
FETCHING = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"),
            ("source", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
            ("object", "data"), ("img", "srcset"), ("source", "srcset")}


def _course_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "course").glob("**/*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts)


def _lab_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "labs").glob("lab*/lab*.ipynb") if p.stem == p.parent.name)


def _page(source: Path) -> Path:
    return HTML / source.relative_to(ROOT).with_suffix(".html")


def _stage_titles() -> dict[str, str]:
    titles = {}
    for slug in STAGES:
        first = (ROOT / "book" / "stages" / f"{slug}.md").read_text(encoding="utf-8")
        titles[slug] = next(line[2:].strip() for line in first.splitlines()
                            if line.startswith("# "))
    return titles


class _Tags(HTMLParser):
    """Collects start tags (with attributes), <a> links with their text and nav membership."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.links: list[dict] = []
        self.text: list[str] = []
        self._nav = 0
        self._link: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = {k: (v or "") for k, v in attrs}
        self.tags.append((tag, attrs))
        if tag == "nav":
            self._nav += 1
        elif tag == "a":
            self._link = {"href": attrs.get("href", ""), "text": "", "in_nav": self._nav > 0}
            self.links.append(self._link)

    def handle_endtag(self, tag):
        if tag == "nav" and self._nav:
            self._nav -= 1
        elif tag == "a":
            self._link = None

    def handle_data(self, data):
        self.text.append(data)
        if self._link is not None:
            self._link["text"] += data


def _parse(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    return parser


def _words(page: _Tags) -> str:
    """The page's text with whitespace normalised (inline code is split into many spans)."""
    return " ".join(" ".join(page.text).split())


# --------------------------------------------------------------------------- the build
@pytest.fixture(scope="module")
def book(book_build) -> Path:
    """The site built by book/build.py (the session's `book_build`, shared with test_course_notebooks)."""
    if not book_build.ok:
        pytest.fail(f"book/build.py failed after {book_build.seconds:.0f} s: {book_build.output[-6000:]}",
                    pytrace=False)
    print(f"book built in {book_build.seconds:.0f} s")
    return book_build.html


def test_index_and_stage_pages_exist(book):
    assert (book / "index.html").is_file()
    for slug in STAGES:
        assert (book / "stages" / f"{slug}.html").is_file(), f"no page for stage {slug}"


def test_index_is_the_landing_page(book):
    page = _parse((book / "index.html").read_text(encoding="utf-8"))
    text = _words(page)
    assert "Curriculum" in text and "make lab" in text and "make grade" in text
    for lab in range(1, 12):
        assert f"lab{lab:02d}" in text, f"lab{lab:02d} missing from the curriculum table"


def test_every_course_notebook_is_an_executed_page(book):
    notebooks = _course_notebooks()
    assert notebooks, "no course notebooks under course/"
    with_figures = set()
    for nb in notebooks:
        page = _page(nb)
        assert page.is_file(), f"{nb.relative_to(ROOT)} has no page"
        for tag, attrs in _parse(page.read_text(encoding="utf-8")).tags:
            if tag == "img" and "_images/" in attrs.get("src", ""):
                assert (page.parent / attrs["src"]).resolve().is_file(), attrs["src"]
                with_figures.add(nb.parent.name)
    folders = {nb.parent.name for nb in notebooks}
    assert folders <= with_figures, f"course folders without any executed figure: " \
                                    f"{sorted(folders - with_figures)}"


def test_every_lab_handout_is_a_page(book):
    for nb in _lab_notebooks():
        page = _page(nb)
        assert page.is_file(), f"{nb.relative_to(ROOT)} has no handout page"
        html = page.read_text(encoding="utf-8")
        assert "handout" in html
        # shown, never executed: no error output from the stubs
        assert "output traceback" not in html, f"{page.name} shows an error output"


def test_stage_pages_mark_unpublished_material(book):
    labs = {re.match(r"lab\d+", p.stem).group(0) for p in _lab_notebooks()}
    stage_of = {"lab01": "01_tensors", "lab02": "02_autograd", "lab03": "02_autograd",
                "lab04": "03_dispatcher", "lab05": "04_memory", "lab06": "05_fx",
                "lab07": "06_compile", "lab08": "07_quantization", "lab09": "08_distributed",
                "lab10": "08_distributed", "lab11": "09_deploy"}
    for lab, slug in stage_of.items():
        text = _words(_parse((book / "stages" / f"{slug}.html").read_text(encoding="utf-8")))
        title = f"Lab {lab[3:]}"
        assert title in text, f"{slug} page does not mention {title}"
        if lab not in labs:
            assert "in preparation" in text, f"{slug}: unpublished {lab} not marked"


def test_no_remote_scripts_or_styles(book):
    offenders = []
    for page in book.rglob("*.html"):
        for tag, attrs in _parse(page.read_text(encoding="utf-8", errors="replace")).tags:
            for attr in (a for t, a in FETCHING if t == tag):
                value = attrs.get(attr, "").strip()
                if value and REMOTE.match(value.split(",")[0].strip()):
                    offenders.append(f"{page.relative_to(book)}: <{tag} {attr}={value!r}>")
    for css in book.rglob("*.css"):
        for url in re.findall(r"(?:url\(|@import\s+)['\"]?((?:https?:)?//[^'\")\s]+)",
                              css.read_text(encoding="utf-8", errors="replace")):
            offenders.append(f"{css.relative_to(book)}: {url}")
    assert not offenders, "remote resources:\n" + "\n".join(offenders[:20])


def test_mathjax_is_vendored(book):
    page = _page(_course_notebooks()[0])
    scripts = [a.get("src", "") for t, a in _parse(page.read_text(encoding="utf-8")).tags
               if t == "script"]
    local = [s for s in scripts if "_vendor/mathjax/tex-chtml.js" in s]
    assert local, f"MathJax not loaded from the vendored copy: {scripts}"
    assert (page.parent / urlsplit(local[0]).path).resolve().is_file()
    assert not any("mathjax" in s.lower() and REMOTE.match(s) for s in scripts)


def test_no_solution_text_in_the_book(book):
    """Structural: only book/, course/ and labs/ handouts are staged; this checks the result."""
    for path in book.rglob("*"):
        rel = path.relative_to(book).as_posix()
        assert not rel.startswith(("solutions", "autograder")), rel
        if path.is_file() and path.suffix in {".html", ".ipynb", ".txt", ".js", ".md", ".py"} \
                and "_vendor" not in path.parts:
            text = path.read_text(encoding="utf-8", errors="replace")
            for marker in LEAK_MARKERS:
                assert marker not in text, f"{marker!r} found in {rel}"


# --------------------------------------------------------------------------- the browser
def _dump_dom(chromium: str, page: Path, tmp_path: Path) -> str:
    assert page.is_file(), page
    profile = tmp_path / f"chromium-profile-{page.stem}"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-quic", "--no-first-run", f"--user-data-dir={profile}",
           "--virtual-time-budget=15000", "--dump-dom", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert "<html" in proc.stdout, f"no DOM from chromium: {proc.stderr[-2000:]}"
    return proc.stdout


def _remote_fetches(dom: _Tags) -> list[str]:
    """Fetching tags in the rendered DOM (including ones scripts added) that leave the site."""
    return [f"<{tag} {attr}={attrs[attr]!r}>" for tag, attrs in dom.tags
            for t, attr in FETCHING if t == tag and REMOTE.match(attrs.get(attr, "").strip())]


def test_browser_index_lists_every_stage(book, chromium, tmp_path):
    dom = _parse(_dump_dom(chromium, book / "index.html", tmp_path))
    assert not _remote_fetches(dom), _remote_fetches(dom)
    nav = {urlsplit(link["href"]).path: " ".join(link["text"].split())
           for link in dom.links if link["in_nav"]}
    for slug, title in _stage_titles().items():
        href = f"stages/{slug}.html"
        assert href in nav, f"navigation lacks {href}; it has {sorted(nav)}"
        assert nav[href] == title, f"{href} is labelled {nav[href]!r}, expected {title!r}"


def test_browser_course_page_renders(book, chromium, tmp_path):
    nb = next(p for p in _course_notebooks() if p.parent.name == "01_tensors")
    page = _page(nb)
    dom_html = _dump_dom(chromium, page, tmp_path)
    dom = _parse(dom_html)
    images = [a["src"] for t, a in dom.tags if t == "img" and "_images/" in a.get("src", "")]
    assert images, "no executed figure on the course page"
    assert any("_vendor/mathjax/tex-chtml.js" in a.get("src", "")
               for t, a in dom.tags if t == "script"), "MathJax not loaded from _vendor/"
    assert "<mjx-container" in dom_html, "MathJax did not typeset the page's math"
    assert not _remote_fetches(dom), _remote_fetches(dom)
    assert "output traceback" not in dom_html, "the course page shows an error output"


def test_browser_lab_handout_renders(book, chromium, tmp_path):
    if not LAB01.is_file():
        pytest.skip(f"{LAB01.relative_to(ROOT)} does not exist yet")
    dom_html = _dump_dom(chromium, _page(LAB01), tmp_path)
    dom = _parse(dom_html)
    assert any(t == "h1" for t, _ in dom.tags), "no title on the lab handout page"
    assert any(t == "div" and "cell" in a.get("class", "").split() for t, a in dom.tags), \
        "no notebook cells on the lab handout page"
    text = _words(dom)
    assert "NotImplementedError" in text, "the handout should show the stubs to fill in"
    assert "handout" in text
    nb = json.loads(LAB01.read_text(encoding="utf-8"))
    title = (nb.get("metadata", {}).get("inside_pytorch") or {}).get("title")
    if title:
        assert title.split()[0] in text


# --------------------------------------------------------------------------- page errors and search
def _console_errors(chromium: str, url: str, tmp_path: Path) -> tuple[str, list[str]]:
    """(DOM, uncaught JS errors) of one page: chromium logs console messages to stderr."""
    profile = tmp_path / f"chromium-profile-{abs(hash(url))}"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000",
           "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    errors = [line for line in proc.stderr.splitlines()
              if "CONSOLE" in line and ("Uncaught" in line or "SyntaxError" in line or "Error:" in line)]
    return proc.stdout, errors


def test_no_page_declares_a_script_constant_twice(book):
    """Every page: no two inline scripts declare the same const (THEBE_JS_URL was declared twice)."""
    sys.path.insert(0, str(ROOT / "book"))
    try:
        import build as book_build
    finally:
        sys.path.pop(0)
    twice = {p.relative_to(book).as_posix(): names for p in book.rglob("*.html")
             if (names := book_build.redeclared_constants(p.read_text(encoding="utf-8", errors="replace")))}
    assert not twice, twice


def test_browser_pages_raise_no_javascript_errors(book, chromium, tmp_path):
    pages = [book / "index.html", _page(LAB01), book / "search.html"]
    pages += sorted(book.glob("stages/*.html"))[:1] + sorted(book.glob("course/*/*.html"))[:1]
    for page in pages:
        _, errors = _console_errors(chromium, page.resolve().as_uri(), tmp_path)
        assert not errors, f"{page.relative_to(book)}: {errors[:3]}"


def test_browser_search_works_offline(book, chromium, tmp_path):
    """Search from file:// lists the matching pages. (Sphinx then fetches each page for a text snippet;
    browsers refuse fetch() on file://, so offline results come without snippets: README says so.)"""
    dom, errors = _console_errors(chromium, (book / "search.html").resolve().as_uri() + "?q=stride", tmp_path)
    errors = [e for e in errors if not ("Failed to fetch" in e and "searchtools.js" in e)]
    assert not errors, errors[:3]
    assert re.search(r'<ul class="search"[^>]*>\s*<li', dom), "searching 'stride' from file:// found no page"


# --------------------------------------------------------------------------- warm kernels
PROBE = """
import json, os, random, signal, subprocess, sys
import matplotlib
print(json.dumps({"cwd": os.getcwd(), "argv0": os.path.basename(sys.argv[0]), "path0": sys.path[0],
                  "sigchld_default": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
                  "subprocess": subprocess.run(["true"]).returncode, "backend": matplotlib.get_backend(),
                  "probe": os.environ.get("IPT_PROBE"), "random": random.random(), "pid": os.getpid(),
                  "torch_preloaded": "torch" in sys.modules}))
"""


def test_warm_kernels_behave_as_fresh_ones(tmp_path, monkeypatch):
    """book/warm_kernel.py: a notebook's kernel forked from the zygote starts where and as a fresh ipykernel does
    (its folder, its environment, ipykernel_launcher's argv, the inline backend, default SIGCHLD, its own random
    seed), and it is gone once Jupyter has killed it."""
    import time

    import nbformat
    from nbclient import NotebookClient

    monkeypatch.syspath_prepend(str(ROOT / "book"))
    import build
    import warm_kernel
    if not warm_kernel.available():
        pytest.skip("warm kernels need Linux's pidfd")
    monkeypatch.setattr(build, "BUILD", tmp_path / "build")
    env = dict(os.environ)
    seen = []
    with build.warm_kernels(env):
        assert "JUPYTER_PATH" in env, "the zygote did not start"
        monkeypatch.setenv("JUPYTER_PATH", env["JUPYTER_PATH"])
        monkeypatch.setenv("IPT_PROBE", "passed through")
        for k in range(2):
            folder = tmp_path / f"nb{k}"
            folder.mkdir()
            nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
            NotebookClient(nb, kernel_name="python3", timeout=120, shutdown_kernel="immediate",
                           resources={"metadata": {"path": str(folder)}}).execute()
            seen.append((folder, json.loads(nb.cells[0].outputs[0]["text"])))
        deadline = time.monotonic() + 10   # the zygote reaps its kernels: a killed one leaves /proc
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{got['pid']}") for _, got in seen):
            time.sleep(0.1)
        alive = [got["pid"] for _, got in seen if os.path.exists(f"/proc/{got['pid']}")]
    assert not alive, "a kernel outlived Jupyter's kill"
    for folder, got in seen:
        assert got["torch_preloaded"], "the kernel did not come from the zygote"
        assert got["cwd"] == got["path0"] == str(folder), got
        assert got["argv0"] == "ipykernel_launcher.py" and got["probe"] == "passed through", got
        assert got["sigchld_default"] and got["subprocess"] == 0, got
        assert "inline" in got["backend"], got
    assert seen[0][1]["random"] != seen[1][1]["random"], "forked kernels share Python's random seed"
