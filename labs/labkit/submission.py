"""Submissions: `python -m labkit submit lab01` zips the notebook with a manifest; the grader reads it back.

A submission is `submissions/<lab>-<user>.zip` holding the notebook and `manifest.json`
(lab, notebook file name, its sha256, UTC time, labkit version). `read_submission` never extracts
to disk and bounds everything it reads, because the file comes from someone else.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path

from labkit import __version__
from labkit.labs import COURSE_HOME, LabDir
from labkit.notebook import MAX_NOTEBOOK_BYTES, read_notebook

MANIFEST = "manifest.json"
MAX_MEMBERS = 16
MAX_MANIFEST_BYTES = 64 * 1024
MAX_TOTAL_BYTES = MAX_NOTEBOOK_BYTES + 1024 * 1024
MAX_ZIP_BYTES = MAX_TOTAL_BYTES + 1024 * 1024
REQUIRED = {"lab": str, "notebook": str, "sha256": str}


class SubmissionError(ValueError):
    """A submission that cannot be accepted; the message says why, for the learner and the grader."""


def current_user(user: str | None = None) -> str:
    """`user`, else LABKIT_USER, else the login name, as a safe file-name fragment."""
    name = user or os.environ.get("LABKIT_USER") or getpass.getuser()
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    if not cleaned:
        raise SubmissionError(f"cannot make a file name from the user name {name!r}; pass --user")
    return cleaned[:64]


def make_submission(labdir: LabDir, user: str | None = None, out_dir: Path | None = None,
                    notebook: Path | None = None) -> Path:
    """Write `<out_dir>/<lab>-<user>.zip` from the lab's working notebook; return its path."""
    notebook = Path(notebook or labdir.notebook)
    data = notebook.read_bytes()
    read_notebook(data)  # a notebook that does not parse cannot be graded: say so now (NotebookError)
    manifest = {
        "lab": labdir.id,
        "notebook": notebook.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "submitted_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "labkit_version": __version__,
        "user": current_user(user),
    }
    out_dir = Path(out_dir or COURSE_HOME / "submissions")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{labdir.id}-{manifest['user']}.zip"
    partial = target.with_suffix(".zip.part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        zf.writestr(notebook.name, data)
    partial.replace(target)
    return target


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        raise SubmissionError(f"{info.filename} in the submission is larger than {limit >> 10} KiB")
    with zf.open(info) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise SubmissionError(f"{info.filename} in the submission is larger than {limit >> 10} KiB")
    return data


def read_submission(path: str | os.PathLike) -> tuple[bytes, dict]:
    """(notebook bytes, manifest) of a submission zip, after checking its shape, sizes and hash."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_ZIP_BYTES:
            raise SubmissionError(f"{path.name} is larger than {MAX_ZIP_BYTES >> 20} MiB")
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise SubmissionError(f"{path.name} holds {len(infos)} files; a submission holds the notebook and {MANIFEST}")
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise SubmissionError(f"{path.name} holds the same file name twice")
            if sum(i.file_size for i in infos) > MAX_TOTAL_BYTES:
                raise SubmissionError(f"{path.name} unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")
            for info in infos:
                if info.flag_bits & 0x1:
                    raise SubmissionError(f"{info.filename} in {path.name} is encrypted")
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise SubmissionError(f"{info.filename} in {path.name} uses an unsupported compression")
            by_name = {i.filename: i for i in infos}
            if MANIFEST not in by_name:
                raise SubmissionError(f"{path.name} has no {MANIFEST}: make it with `make submit LAB=...`")
            try:
                manifest = json.loads(_read_member(zf, by_name[MANIFEST], MAX_MANIFEST_BYTES))
            except (UnicodeDecodeError, ValueError):
                raise SubmissionError(f"{MANIFEST} in {path.name} is not valid JSON") from None
            _check_manifest(manifest, path.name)
            name = manifest["notebook"]
            if name not in by_name:
                raise SubmissionError(f"{path.name} does not hold the notebook {name!r} its manifest names")
            notebook = _read_member(zf, by_name[name], MAX_NOTEBOOK_BYTES)
    except SubmissionError:
        raise
    except FileNotFoundError:
        raise SubmissionError(f"no such submission: {path}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError, RuntimeError) as exc:
        raise SubmissionError(f"{path.name} is not a readable zip file ({exc})") from None
    digest = hashlib.sha256(notebook).hexdigest()
    if digest != manifest["sha256"].lower():
        raise SubmissionError(f"the sha256 of {name} does not match the manifest of {path.name} "
                              f"({digest[:12]}... vs {manifest['sha256'][:12]}...): the notebook was changed "
                              "after `make submit`; submit again")
    return notebook, manifest


def _check_manifest(manifest, zip_name: str) -> None:
    if not isinstance(manifest, dict):
        raise SubmissionError(f"{MANIFEST} in {zip_name} is not a JSON object")
    for key, kind in REQUIRED.items():
        if not isinstance(manifest.get(key), kind):
            raise SubmissionError(f"{MANIFEST} in {zip_name} lacks a {kind.__name__} {key!r}")
    name = manifest["notebook"]
    if "/" in name or "\\" in name or not name.endswith(".ipynb") or name.startswith("."):
        raise SubmissionError(f"{MANIFEST} in {zip_name} names {name!r}, which is not a notebook file name")
    if not re.fullmatch(r"[0-9a-fA-F]{64}", manifest["sha256"]):
        raise SubmissionError(f"{MANIFEST} in {zip_name} has a malformed sha256")
