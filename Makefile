# The README's two commands: `make demo` and `make test`. Both set up .venv from the project's
# own files first, so they work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robustkit-installed
NLTK_DATA ?= $(abspath ../shared/nltk_data)
export NLTK_DATA

.PHONY: setup demo test bench clean

setup: $(STAMP)

# torch first and alone: its pin resolves to the local CPU wheel; installing it inside the
# larger resolve could let another package's range pull the CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: $(STAMP)
	$(PY) -m robustkit demo

test: $(STAMP)
	$(PY) -m robustkit assets fetch
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/train.py

clean:
	rm -rf $(VENV) .pytest_cache
