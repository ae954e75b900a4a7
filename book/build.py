#!/usr/bin/env python3
"""Build the Inside PyTorch book: ``python book/build.py`` (what ``make book`` runs).

0. Read committed sources only: in a git checkout, ``git archive HEAD`` of ``book/``, ``course/`` and
   ``labs/`` goes to ``build/book_committed/`` and everything below reads from there, so edits in the
   working copy (a solution typed into a lab notebook, outputs of a run) never reach the site.
   Outside git (the student release) the working copy is used and the build says so;
   ``--working-copy`` forces that in a checkout too (authors previewing uncommitted pages).
1. Stage the sources into ``build/book_src/`` by *copying only*: the pages and config under
   ``book/``, the course notebooks ``course/**/*.ipynb`` with the helper ``.py`` modules beside
   them, and the student lab handouts ``labs/lab*/lab*.ipynb``. Nothing is ever read from
   ``solutions/`` or ``autograder/``, so no solution or hidden test can reach the book; a canary
   scan of the staged tree double-checks it.
2. Complete the table of contents: every course notebook goes under its stage
   (``course/NN_name/`` belongs to ``book/stages/NN_name.md``) and every lab handout under the
   stage that owns the lab. The stage pages' "Material" blocks are rewritten to link what exists
   and to mark the rest *in preparation*.
3. Vendor MathJax 3 for offline use: ``npm pack mathjax@3`` into ``build/vendor/`` (cached
   across runs), copied into the site under ``_vendor/mathjax/`` (not ``_static/``), with
   ``mathjax_path`` pointing there. The site then makes no request to a CDN and works from
   ``file://``.
4. Build with Jupyter Book 1 into ``book/_build/html``. Course notebooks are executed
   (``execute_notebooks: force``); a failing cell fails the build (``nb_execution_raise_on_error``),
   and so does any Sphinx warning (``-W --keep-going``; ``--no-strict`` relaxes that). Lab
   handouts are shown, never executed: their stubs raise ``NotImplementedError``. Each notebook's kernel is a
   fresh process forked from a zygote that has imported torch (``book/warm_kernel.py``; Linux only).

Exit status is non-zero on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

import warm_kernel  # book/warm_kernel.py, beside this file (the script's folder is first on sys.path)

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = ROOT / "build"
SRC = BUILD / "book_src"
VENDOR = BUILD / "vendor"
OUTPUT = BOOK / "_build"  # jupyter-book writes html/ (and .doctrees) below this
COMMITTED = BUILD / "book_committed"
SOURCE = ROOT       # where book/, course/ and labs/ are read from (main() points it at COMMITTED)

MATHJAX_SPEC = "mathjax@3"
MATHJAX_SITE_DIR = "_vendor/mathjax"  # inside the built site, next to index.html
# mathjax_path is relative to _static/ for Sphinx; "../" leaves it for the vendored folder.
MATHJAX_PATH = f"../{MATHJAX_SITE_DIR}/tex-chtml.js"
# what the tex-chtml component loads on demand: TeX extensions, fonts, menu, accessibility
MATHJAX_KEEP = ["tex-chtml.js", "input/tex/extensions", "output/chtml", "ui", "a11y", "sre",
                "adaptors"]

# The curriculum (COURSE_SPEC.md): lab id -> (stage slug, short title).
LABS = {
    "lab01": ("01_tensors", "strided tensors"),
    "lab02": ("02_autograd", "autograd engine"),
    "lab03": ("02_autograd", "extending autograd"),
    "lab04": ("03_dispatcher", "dispatcher"),
    "lab05": ("04_memory", "memory"),
    "lab06": ("05_fx", "fx"),
    "lab07": ("06_compile", "compile"),
    "lab08": ("07_quantization", "quantization"),
    "lab09": ("08_distributed", "collectives"),
    "lab10": ("08_distributed", "parallel training"),
    "lab11": ("09_deploy", "export and deploy"),
}
# Strings that only exist in solutions/ and hidden graders; none may reach the book.
LEAK_MARKERS = ["IPT-" + "CANARY", "### BEGIN " + "SOLUTION", "### BEGIN " + "HIDDEN TESTS"]  # split: this file is released
BEGIN_MATERIALS = re.compile(r"<!-- BEGIN MATERIALS.*?-->.*?<!-- END MATERIALS -->", re.S)
SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", "_build"}


def log(msg: str) -> None:
    print(f"[book] {msg}", flush=True)


class BuildError(RuntimeError):
    pass


# --------------------------------------------------------------------------- discovery
def _visible(path: Path, base: Path) -> bool:
    return not any(part in SKIP_DIRS or part.startswith(".") for part in
                   path.relative_to(base).parts)


def course_notebooks() -> dict[str, list[Path]]:
    """course/<stage>/... notebooks, grouped by the stage folder name."""
    found: dict[str, list[Path]] = {}
    course = SOURCE / "course"
    if course.is_dir():
        for nb in sorted(course.glob("*/**/*.ipynb")):
            if _visible(nb, course):
                found.setdefault(nb.relative_to(course).parts[0], []).append(nb)
    return found


def lab_notebooks() -> dict[str, Path]:
    """lab id -> labs/labNN_slug/labNN_slug.ipynb (the generated student handout)."""
    found = {}
    for nb in sorted((SOURCE / "labs").glob("lab*/lab*.ipynb")):
        if nb.stem == nb.parent.name and re.match(r"lab\d+", nb.stem):
            found[re.match(r"lab\d+", nb.stem).group(0)] = nb
    return found


def lab_title(lab: str, nb: Path) -> str:
    meta = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {})
    title = (meta.get("inside_pytorch") or {}).get("title") or LABS.get(lab, ("", lab))[1]
    return f"Lab {lab[3:]} · {title}"


# --------------------------------------------------------------------------- committed sources
def committed_sources(root: Path = ROOT, dest: Path = COMMITTED) -> Path | None:
    """`git archive HEAD book course labs` unpacked into `dest`; None when `root` is not a git checkout."""
    probe = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
                           capture_output=True, text=True)
    top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if probe.returncode or top.returncode or Path(top.stdout.strip()).resolve() != root.resolve():
        return None
    present = [name for name in ("book", "course", "labs")
               if subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"HEAD:{name}"]).returncode == 0]
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", "HEAD", *present],
                             capture_output=True)
    if archive.returncode:
        raise BuildError("git archive failed: " + archive.stderr.decode(errors="replace")[-500:])
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    import io
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


# --------------------------------------------------------------------------- staging
def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)


def stage_sources(courses: dict[str, list[Path]], labs: dict[str, Path]) -> None:
    if SRC.exists():
        shutil.rmtree(SRC)
    SRC.mkdir(parents=True)
    # book pages and config (not build.py, not _build/)
    book = SOURCE / "book"
    for path in sorted(book.rglob("*")):
        if path.is_file() and _visible(path, book) and path.name != "build.py" and \
                path.suffix in {".md", ".yml", ".png", ".svg", ".jpg", ".css", ".bib"}:
            _copy(path, SRC / path.relative_to(book))
    # course notebooks and their helper modules (same folder)
    for notebooks in courses.values():
        for nb in notebooks:
            _copy(nb, SRC / nb.relative_to(SOURCE))
            for helper in nb.parent.glob("*.py"):
                _copy(helper, SRC / helper.relative_to(SOURCE))
    # lab handouts: the generated student notebook only, with a note and execution off
    for lab, nb in labs.items():
        data = json.loads(nb.read_text(encoding="utf-8"))
        data.setdefault("metadata", {})["mystnb"] = {"execution_mode": "off"}
        note = {
            "cell_type": "markdown", "metadata": {}, "id": "ipt-book-handout-note",
            "source": [
                ":::{note}\n",
                f"This is the **handout** of {lab}, shown here to read. To work on it, open\n",
                f"`{nb.relative_to(SOURCE).as_posix()}` in JupyterLab (`make lab`), replace each\n",
                "`raise NotImplementedError()` with your code and run `check(\"part\")` as you go.\n",
                ":::\n",
            ],
        }
        cells = data.get("cells", [])
        first_title = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"
                            and "".join(c.get("source", "")).lstrip().startswith("# ")), None)
        cells.insert(0 if first_title is None else first_title + 1, note)
        dest = SRC / nb.relative_to(SOURCE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    # defence in depth: nothing staged may carry solution or hidden-test markers
    for path in SRC.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            for marker in LEAK_MARKERS:
                if marker in text:
                    raise BuildError(f"leak guard: {marker!r} found in staged "
                                     f"{path.relative_to(SRC)}; refusing to build")


# --------------------------------------------------------------------------- toc + pages
def stage_slugs(toc: dict) -> list[str]:
    slugs = []
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            if chapter.get("file", "").startswith("stages/"):
                slugs.append(chapter["file"].split("/", 1)[1])
    return slugs


def materials_block(slug: str, courses: dict[str, list[Path]], labs: dict[str, Path]) -> str:
    lines = ["## Course notebooks", ""]
    notebooks = courses.get(slug, [])
    if notebooks:
        for nb in notebooks:
            doc = nb.relative_to(SOURCE).with_suffix("").as_posix()
            lines.append(f"- {{doc}}`/{doc}` (executed when this book was built)")
    else:
        lines.append("- *In preparation.*")
    lines += ["", "## Labs", ""]
    for lab, (lab_stage, name) in LABS.items():
        if lab_stage != slug:
            continue
        if lab in labs:
            doc = labs[lab].relative_to(SOURCE).with_suffix("").as_posix()
            lines.append(f"- {{doc}}`{lab_title(lab, labs[lab])} </{doc}>`: the handout "
                         "(to work on it, open it in JupyterLab with `make lab`).")
        else:
            lines.append(f"- Lab {lab[3:]} · {name}: *in preparation*.")
    return "\n".join(lines)


def complete_toc_and_pages(courses: dict[str, list[Path]], labs: dict[str, Path]) -> None:
    toc = yaml.safe_load((SOURCE / "book" / "_toc.yml").read_text(encoding="utf-8"))
    slugs = stage_slugs(toc)
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            if not chapter.get("file", "").startswith("stages/"):
                continue
            slug = chapter["file"].split("/", 1)[1]
            sections = [{"file": nb.relative_to(SOURCE).with_suffix("").as_posix()}
                        for nb in courses.get(slug, [])]
            sections += [{"file": labs[lab].relative_to(SOURCE).with_suffix("").as_posix(),
                          "title": f"{lab_title(lab, labs[lab])} (handout)"}
                         for lab, (stage, _) in LABS.items() if stage == slug and lab in labs]
            if sections:
                chapter["sections"] = sections
            page = SRC / "stages" / f"{slug}.md"
            text = page.read_text(encoding="utf-8")
            if not BEGIN_MATERIALS.search(text):
                raise BuildError(f"book/stages/{slug}.md lacks the MATERIALS markers")
            block = materials_block(slug, courses, labs)
            page.write_text(BEGIN_MATERIALS.sub(lambda _: block, text), encoding="utf-8")

    # anything that does not belong to a stage still gets a page, in a last part
    extra = []
    for folder, notebooks in courses.items():
        if folder not in slugs:
            log(f"warning: course/{folder}/ has no stage page; listed under 'Other material'")
            extra += [{"file": nb.relative_to(SOURCE).with_suffix("").as_posix()}
                      for nb in notebooks]
    for lab, nb in labs.items():
        if lab not in LABS:
            log(f"note: {lab} is not in the curriculum; listed under 'Other material'")
            extra.append({"file": nb.relative_to(SOURCE).with_suffix("").as_posix(),
                          "title": f"{lab_title(lab, nb)} (handout)"})
    if extra:
        toc["parts"].append({"caption": "Other material", "chapters": extra})
    (SRC / "_toc.yml").write_text(
        "# generated by book/build.py from book/_toc.yml, course/ and labs/\n"
        + yaml.safe_dump(toc, sort_keys=False, allow_unicode=True), encoding="utf-8")


# --------------------------------------------------------------------------- MathJax
def mathjax_tarball() -> Path:
    VENDOR.mkdir(parents=True, exist_ok=True)
    cached = sorted(VENDOR.glob("mathjax-3.*.tgz"))
    if cached:
        return cached[-1]
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError("MathJax is vendored from the npm package mathjax@3, but npm is not "
                         f"installed. Install npm, or put mathjax-3.x.y.tgz into {VENDOR}.")
    log(f"fetching {MATHJAX_SPEC} with npm pack (cached in {VENDOR.relative_to(ROOT)}/)")
    result = subprocess.run([npm, "pack", MATHJAX_SPEC, "--silent"], cwd=VENDOR,
                            capture_output=True, text=True)
    cached = sorted(VENDOR.glob("mathjax-3.*.tgz"))
    if result.returncode != 0 or not cached:
        raise BuildError(f"npm pack {MATHJAX_SPEC} failed:\n{result.stdout}\n{result.stderr}")
    return cached[-1]


def vendor_mathjax() -> None:
    tgz = mathjax_tarball()
    unpacked = VENDOR / tgz.name.replace(".tgz", "")
    if not (unpacked / "package" / "es5" / "tex-chtml.js").is_file():
        if unpacked.exists():
            shutil.rmtree(unpacked)
        with tarfile.open(tgz) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse unsafe members
                tar.extractall(unpacked, filter="data")
            else:
                tar.extractall(unpacked)
    es5 = unpacked / "package" / "es5"
    dest = SRC / "_extra" / MATHJAX_SITE_DIR
    for item in MATHJAX_KEEP:
        src = es5 / item
        if src.is_dir():
            shutil.copytree(src, dest / item)
        else:
            _copy(src, dest / item)
    _copy(unpacked / "package" / "LICENSE", dest / "LICENSE")


def write_config() -> None:
    config = yaml.safe_load((SOURCE / "book" / "_config.yml").read_text(encoding="utf-8"))
    sphinx_config = config.setdefault("sphinx", {}).setdefault("config", {}) or {}
    config["sphinx"]["config"] = sphinx_config
    sphinx_config["mathjax_path"] = MATHJAX_PATH
    sphinx_config["html_extra_path"] = ["_extra"]
    (SRC / "_config.yml").write_text(
        "# generated by book/build.py from book/_config.yml\n"
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")


# --------------------------------------------------------------------------- build
def build_env() -> dict[str, str]:
    env = dict(os.environ)
    tmp = BUILD / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update({
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(BUILD / "inductor-cache"),
        "TORCH_EXTENSIONS_DIR": str(BUILD / "torch-extensions"),
        "MPLCONFIGDIR": str(BUILD / "mplconfig"),
        "IPYTHONDIR": str(BUILD / "ipython"),
    })
    return env


# Each course notebook runs in a kernel of its own, which the build stops once the last cell has replied. By default
# nbclient asks the kernel to shut down and waits for it to exit: 1.3-2.5 s here per notebook (of 6-20 s), most of
# it Python tearing down the objects torch, Dynamo and Inductor made. Every output has arrived by then, so the
# build ends the kernel at once instead (nbclient's `shutdown_kernel = "immediate"`; myst-nb has no option for it,
# so the trait's default is set before Jupyter Book starts). Checked on the notebooks that start processes
# (Inductor, DataLoader workers, process groups): none outlives its kernel.
KERNEL_SHUTDOWN = "import nbclient; nbclient.NotebookClient.shutdown_kernel.default_value = 'immediate'; "


@contextlib.contextmanager
def warm_kernels(env: dict[str, str]):
    """Start book/warm_kernel.py's zygote and point the `python3` kernelspec at it (through JUPYTER_PATH in env):
    every notebook still runs in a fresh process of its own, forked after torch is imported instead of importing
    it again. Where that is not available (no pidfd: not Linux), or IPT_BOOK_COLD_KERNELS=1, kernels start cold."""
    if not warm_kernel.available() or env.get("IPT_BOOK_COLD_KERNELS") == "1":
        yield
        return
    folder = BUILD / "book-kernels"
    folder.mkdir(parents=True, exist_ok=True)
    short = None if len(str(folder / "zygote.sock")) <= 100 else tempfile.mkdtemp(prefix="ipt-book-")
    path = Path(short or folder) / "zygote.sock"   # a Unix socket's path has at most 107 bytes
    zygote = subprocess.Popen([sys.executable, str(BOOK / "warm_kernel.py"), "serve", str(path)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        if zygote.stdout.readline().strip() != "ready":
            log("warm kernels: the zygote did not start; kernels start cold")
            yield
            return
        warm_kernel.kernelspec(folder, sys.executable, str(path))
        env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(folder), env.get("JUPYTER_PATH", "")) if p)
        log("kernels fork from a zygote that has imported torch (book/warm_kernel.py)")
        yield
    finally:
        zygote.kill()
        zygote.wait()
        if short:
            shutil.rmtree(short, ignore_errors=True)


def run_jupyter_book(strict: bool) -> None:
    for sub in ("html", ".doctrees", "jupyter_execute"):
        if (OUTPUT / sub).exists():
            shutil.rmtree(OUTPUT / sub)
    cmd = [sys.executable, "-c", KERNEL_SHUTDOWN + "from jupyter_book.cli.main import main; main()",
           "build", str(SRC), "--path-output", str(BOOK), "--builder", "html", "--all"]
    if strict:
        cmd += ["-W", "--keep-going"]
    log("running jupyter-book" + (" (warnings are errors)" if strict else ""))
    env = build_env()
    with warm_kernels(env):
        result = subprocess.run(cmd, cwd=ROOT, env=env)
    if result.returncode != 0:
        raise BuildError(f"jupyter-book failed with exit status {result.returncode}; "
                         "see the messages above")


def landing_page() -> None:
    """Make index.html the landing page itself (Jupyter Book writes a redirect to intro.html)."""
    html = OUTPUT / "html"
    index, intro = html / "index.html", html / "intro.html"
    if intro.is_file() and (not index.is_file() or "http-equiv" in index.read_text()[:200]):
        shutil.copy2(intro, index)


INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>\s*", re.S)
CONST_DECL = re.compile(r"(?:^|[;{\s])(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=")


def dedupe_inline_scripts() -> int:
    """Drop repeated inline <script> blocks. sphinx-thebe adds its config block once per read phase, and
    Jupyter Book runs two, so every page declared `const THEBE_JS_URL` twice: a SyntaxError in the browser."""
    changed = 0
    for page in (OUTPUT / "html").rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        seen: set[str] = set()

        def keep_first(match: re.Match) -> str:
            body = match.group(1).strip()
            if body in seen:
                return ""
            seen.add(body)
            return match.group(0)

        new = INLINE_SCRIPT.sub(keep_first, html)
        if new != html:
            page.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def redeclared_constants(html: str) -> list[str]:
    """Names that two inline scripts of one page both declare with const/let (a browser SyntaxError)."""
    seen, twice = set(), []
    for body in INLINE_SCRIPT.findall(html):
        for name in set(CONST_DECL.findall(body)):
            (twice.append(name) if name in seen else seen.add(name))
    return twice


def check_output() -> None:
    html = OUTPUT / "html"
    if not (html / "index.html").is_file():
        raise BuildError(f"{html / 'index.html'} was not written")
    if not (html / MATHJAX_SITE_DIR / "tex-chtml.js").is_file():
        raise BuildError("vendored MathJax is missing from the site")
    remote = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
    offenders = [p.relative_to(html).as_posix() for p in html.rglob("*.html")
                 if remote.search(p.read_text(encoding="utf-8", errors="replace"))]
    if offenders:
        raise BuildError("remote <script>/<link> references in: " + ", ".join(offenders[:10]))
    twice = [f"{p.relative_to(html).as_posix()} ({', '.join(names)})" for p in html.rglob("*.html")
             if (names := redeclared_constants(p.read_text(encoding="utf-8", errors="replace")))]
    if twice:
        raise BuildError("inline scripts declare the same constant twice in: " + "; ".join(twice[:10]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-strict", action="store_true",
                        help="do not turn Sphinx warnings into errors (notebook errors still fail)")
    parser.add_argument("--working-copy", action="store_true",
                        help="build from the working copy instead of the last commit (a local preview)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    global SOURCE
    try:
        committed = None if args.working_copy else committed_sources()
        SOURCE = committed or ROOT
        if committed:
            head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "book", "course", "labs"],
                                   capture_output=True, text=True).stdout.strip()
            log(f"building from commit {head} (git archive)" +
                (": uncommitted changes in book/, course/ or labs/ are not in the book" if dirty else ""))
        else:
            log("building from the working copy" + ("" if args.working_copy else " (not a git checkout)"))
        courses, labs = course_notebooks(), lab_notebooks()
        log(f"course notebooks: {sum(map(len, courses.values()))}, lab handouts: {len(labs)}")
        stage_sources(courses, labs)
        complete_toc_and_pages(courses, labs)
        vendor_mathjax()
        write_config()
        run_jupyter_book(strict=not args.no_strict)
        landing_page()
        dedupe_inline_scripts()
        check_output()
    except BuildError as err:
        log(f"FAILED after {time.monotonic() - start:.0f} s: {err}")
        return 1
    log(f"built {OUTPUT.relative_to(ROOT) / 'html' / 'index.html'} "
        f"in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
