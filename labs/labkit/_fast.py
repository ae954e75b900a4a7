"""Start-up speed: imported by labkit.labs, before anything of labkit imports nbformat."""
import sys

# jsonschema (pulled in by nbformat) imports the optional IRI checker rfc3987_syntax, which builds a
# grammar at import time (~1.8 s here, paid by every check() and status worker). Notebook schemas use
# no IRI formats, so nothing of ours needs it: make its import fail fast, as if it were not installed.
# requirements.txt pins jsonschema 4.24.1, which never imports it; this covers an environment where a
# newer jsonschema is installed anyway (a learner's own venv).
sys.modules.setdefault("rfc3987_syntax", None)
