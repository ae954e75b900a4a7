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
TEST_J ?= 3   # pytest-xdist workers for `make test` (0: one process); 3 on 2 cores: many units wait (timeouts, ranks, kernels)

export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export OMP_NUM_THREADS ?= 1
export TORCHINDUCTOR_CACHE_DIR := $(CURDIR)/build/inductor-cache
export TORCH_EXTENSIONS_DIR := $(CURDIR)/build/torch-extensions
export TMPDIR := $(CURDIR)/build/tmp
export PYTHONDONTWRITEBYTECODE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# torch: the CPU build of 2.13.0. A wheel pip can already reach without an index (a local find-links
# folder, as on the course machines) is taken first, so nothing waits on the network; otherwise Linux
# gets PyTorch's CPU wheel index (PyPI's Linux wheel is the CUDA build, ~4.8 GB), macOS gets PyPI's wheel.
TORCH_PIN       := torch==2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
UV_PIN          := uv==0.13.9

.PHONY: help setup test lab labs labs-check status submit release book grade selftest mutation fuzz gradescope nbgrader nbgrader-release nbgrader-collect nbgrader-grade nbgrader-feedback report bench bench-grader bench-status clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

setup: $(STAMP)  ## create .venv with the pinned environment (idempotent)

$(STAMP): requirements.txt requirements-torch.txt
	@mkdir -p build/tmp
	@# an existing venv is kept: re-creating it with another python3.11 found on PATH would break it
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# uv installs in parallel and compiles the bytecode on both cores (a fresh setup here: ~75 s, with pip ~130 s);
	@# where uv cannot be installed, pip runs the same steps.
	$(PY) -m pip install -q $(UV_PIN) || echo "setup: uv could not be installed; pip installs instead (slower)"
	@# torch: kept when 2.13.0 is installed (a rerun must not reinstall it under running processes); else a wheel pip
	@# already has locally (a course machine's wheel folder) is installed from that very file; else PyTorch's CPU
	@# index on Linux (the public index would bring the CUDA build), PyPI on macOS
	install="$(PY) -m pip install -q"; \
	if $(PY) -m uv --version >/dev/null 2>&1; then install="$(PY) -m uv pip install -q --compile-bytecode --python $(PY)"; fi; \
	rm -rf build/wheels/torch; \
	if $(PY) -c "import importlib.metadata as m, sys; sys.exit(not m.version('torch').startswith('2.13.0'))" 2>/dev/null; then \
	  echo "setup: torch 2.13.0 is installed"; \
	elif $(PY) -m pip download -q --no-deps --no-index $(TORCH_PIN) -d build/wheels/torch >/dev/null 2>&1; then \
	  $$install build/wheels/torch/*.whl; \
	elif [ "$$(uname -s)" = Linux ]; then $$install $(TORCH_PIN) --index-url $(TORCH_CPU_INDEX); \
	else $$install -r requirements-torch.txt; fi && \
	$$install -r requirements.txt
	$(PY) -c "import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'inside_pytorch.pth').write_text('$(CURDIR)\n$(CURDIR)/labs\n')"
	$(PY) -m pip check
	@# torchao's quant primitives are the oracle of lab08: fail here, loudly, if they do not import and compute
	$(PY) -c "import logging; logging.disable(logging.WARNING); import torch; from torchao.quantization.quant_primitives import quantize_affine as q; assert q(torch.tensor([[0.25, 0.75]]), (1, 2), torch.tensor([0.5]), torch.tensor([0]), torch.int8).tolist() == [[0, 2]], 'torchao quantize_affine gives wrong numbers'"
	@touch $@

test: setup  ## set up, then run the whole suite (tooling, lab self-tests, notebooks, release, book)
	@mkdir -p build/tmp
	$(PY) -m pytest autograder/tests -v --durations=25 -n $(TEST_J)

lab: setup  ## JupyterLab at the course home, with the instructor tools (formgrader, Create Assignment)
	$(PY) -m labkit lab

labs: setup  ## regenerate the student notebooks from solutions/ (never over a notebook with learner edits)
	$(PY) -m autograder.authoring.generate $(if $(FORCE),--force)

labs-check: setup  ## fail if a committed student notebook is stale
	$(PY) -m autograder.authoring.generate --check

status: setup  ## every lab's parts with their public-test status
	$(PY) -m labkit status

submit: setup  ## package a lab for submission: make submit LAB=lab01
	$(PY) -m labkit submit $(LAB)

release: setup  ## build dist/student (no solutions, no hidden graders) and scan it for leaks
	$(PY) -m autograder.authoring.release

book: setup  ## build the course book from committed sources into book/_build/html (needs npm for MathJax)
	@command -v npm >/dev/null || { echo "make book needs npm (Node.js) to vendor MathJax: apt-get install npm, or brew install node"; exit 2; }
	$(PY) book/build.py

grade: setup  ## grade: make grade LAB=lab01 [SUB=file|folder] [DUE='2026-12-01 23:59' PENALTY=10] [ROSTER=class.txt] (no SUB: the examples)
	@test -n "$(LAB)" || { echo "which lab? e.g.  make grade LAB=lab01  (the bundled examples), or  make grade LAB=lab01 SUB=submissions/"; exit 2; }
	IPT_DUE="$(DUE)" IPT_LATE_PENALTY="$(PENALTY)" IPT_ROSTER="$(ROSTER)" $(PY) -m autograder grade $(LAB) $(SUB) -j $(J)

selftest: setup  ## prove the graders (every hand mutant, a machine sample, attempts vs twins): make selftest [LAB=lab01]
	$(PY) -m autograder selftest $(LAB)

mutation: setup  ## grade every machine-made mutant of a lab; survivors are run through the lab's peer suite: make mutation LAB=lab01
	$(PY) -m autograder mutation $(or $(LAB),$(error say which lab: make mutation LAB=lab01)) --run --peers

fuzz: setup  ## differential fuzzing of the references against PyTorch, large budget: make fuzz [LAB=lab01]
	$(PY) -m autograder fuzz $(LAB)

report: setup  ## HTML class report of grading/LAB: make report LAB=lab01
	$(PY) -m autograder report $(LAB)

bench: setup  ## speed of a reference solution vs its baselines: make bench LAB=lab07 (or lab08, lab09, lab10)
	$(PY) -m autograder.benchmarks $(or $(LAB),lab07)

bench-status: setup  ## how long make status takes on a finished course: every lab fresh, none changed, one edited
	$(PY) -m autograder.benchmarks status

bench-grader: setup  ## our confined grader vs nbgrader autograde, per lab: make bench-grader [LAB=lab01] (default: every lab)
	$(PY) -m autograder bench-grader $(LAB)

gradescope: setup  ## Gradescope autograder zip: make gradescope LAB=lab01 -> dist/gradescope/lab01.zip
	$(PY) -m autograder.bridges.gradescope build $(LAB)

NBGRADER_COURSE := build/nbgrader
NBGRADER = cd $(NBGRADER_COURSE) && $(CURDIR)/$(VENV)/bin/nbgrader
need-lab = @test -n "$(LAB)" || { echo "which lab? e.g.  make $@ LAB=lab01"; exit 2; }

nbgrader: setup  ## nbgrader course directory in build/nbgrader (LATE=zero: late submissions score 0)
	$(PY) -m autograder.bridges.nbgrader build --course $(NBGRADER_COURSE) $(if $(LATE),--late-penalty $(LATE))

nbgrader-release: setup  ## nbgrader generate_assignment + release_assignment: make nbgrader-release LAB=lab01
	$(need-lab)
	$(NBGRADER) generate_assignment $(LAB) --force
	$(NBGRADER) release_assignment $(LAB) --force

nbgrader-collect: setup  ## nbgrader collect: make nbgrader-collect LAB=lab01
	$(need-lab)
	$(NBGRADER) collect $(LAB)

nbgrader-grade: setup  ## nbgrader autograde with the hidden graders: make nbgrader-grade LAB=lab01
	$(need-lab)
	$(PY) -m autograder nbgrader-grade $(LAB) --course $(NBGRADER_COURSE)

nbgrader-feedback: setup  ## nbgrader generate_feedback + release_feedback + export (grades.csv): make nbgrader-feedback LAB=lab01
	$(need-lab)
	$(NBGRADER) generate_feedback $(LAB)
	$(NBGRADER) release_feedback $(LAB)
	$(NBGRADER) export --to grades.csv

clean:  ## remove build outputs (keeps .venv)
	rm -rf build dist book/_build grading
