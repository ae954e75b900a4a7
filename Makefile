# Inside PyTorch: every target that needs Python depends on `setup`, so a fresh clone needs only `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LAB    ?=
SUB    ?=
J      ?= 2

export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export OMP_NUM_THREADS ?= 1
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/build/inductor-cache
export TORCH_EXTENSIONS_DIR := $(CURDIR)/build/torch-extensions
export TMPDIR := $(CURDIR)/build/tmp
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help setup test lab labs labs-check status submit release book grade selftest mutation fuzz gradescope nbgrader report bench bench-grader clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

setup: $(STAMP)  ## create .venv with the pinned environment (idempotent)

$(STAMP): requirements.txt requirements-torch.txt
	@mkdir -p build/tmp
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-torch.txt
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'inside_pytorch.pth').write_text('$(CURDIR)\n$(CURDIR)/labs\n')"
	$(PY) -m pip check
	@touch $@

test: setup  ## set up, then run the whole suite (tooling, lab self-tests, notebooks, release, book)
	@mkdir -p build/tmp
	$(PY) -m pytest autograder/tests -v --durations=25

lab: setup  ## JupyterLab at the course home (nbgrader + jupytext extensions)
	$(PY) -m labkit lab

labs: setup  ## regenerate the student notebooks from solutions/
	$(PY) -m autograder.authoring.generate

labs-check: setup  ## fail if a committed student notebook is stale
	$(PY) -m autograder.authoring.generate --check

status: setup  ## every lab's parts with their public-test status
	$(PY) -m labkit status

submit: setup  ## package a lab for submission: make submit LAB=lab01
	$(PY) -m labkit submit $(LAB)

release: setup  ## build dist/student (no solutions, no hidden graders) and scan it for leaks
	$(PY) -m autograder.authoring.release

book: setup  ## build the course book into book/_build/html
	$(PY) book/build.py

grade: setup  ## grade: make grade LAB=lab01 [SUB=file|folder] (no SUB: the bundled examples)
	$(PY) -m autograder grade $(LAB) $(SUB) -j $(J)

selftest: setup  ## prove the graders (every hand mutant, a machine sample, attempts vs twins): make selftest [LAB=lab01]
	$(PY) -m autograder selftest $(LAB)

mutation: setup  ## grade every machine-made mutant of a lab and list survivors: make mutation LAB=lab01
	$(PY) -m autograder mutation $(or $(LAB),$(error say which lab: make mutation LAB=lab01)) --run

fuzz: setup  ## differential fuzzing of the references against PyTorch, large budget: make fuzz [LAB=lab01]
	$(PY) -m autograder fuzz $(LAB)

report: setup  ## HTML class report of grading/LAB: make report LAB=lab01
	$(PY) -m autograder report $(LAB)

bench: setup  ## speed of a reference solution vs its baselines: make bench LAB=lab07
	$(PY) -m autograder.benchmarks $(or $(LAB),lab07)

bench-grader: setup  ## our confined grader vs nbgrader autograde, per lab: make bench-grader [LAB=lab01] (default: every lab)
	$(PY) -m autograder bench-grader $(LAB)

gradescope: setup  ## Gradescope autograder zip: make gradescope LAB=lab01 -> dist/gradescope/lab01.zip
	$(PY) -m autograder.bridges.gradescope build $(LAB)

nbgrader: setup  ## nbgrader course directory in build/nbgrader (then: python -m autograder nbgrader-grade labNN)
	$(PY) -m autograder.bridges.nbgrader build

clean:  ## remove build outputs (keeps .venv)
	rm -rf build dist book/_build grading
