# Each target sets itself up from nothing: a virtual environment in .venv with the project and its
# dev tools, rebuilt when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/harness ask "review the code in examples/sample_project"

test: $(STAMP)
	$(VENV)/bin/python -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check harness subagents tools tests examples benchmarks
	$(VENV)/bin/ty check

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run.py
	$(VENV)/bin/python benchmarks/extra.py
	$(VENV)/bin/python benchmarks/bench_wait32.py
