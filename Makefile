# Each target sets itself up from nothing: a virtual environment in .venv with the project and its
# dev tools, rebuilt when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo eval test test-slow lint bench

# A download corrupted in transit fails pip's hash check, which pip does not retry: the install tries once more,
# bypassing pip's cache.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' \
	  || $(VENV)/bin/python -m pip install -q --disable-pip-version-check --no-cache-dir -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/harness ask "review the code in examples/sample_project"

# The example eval: review tasks over the sample project, scored offline (a real model with HARNESS_MODEL).
eval: $(STAMP)
	$(VENV)/bin/harness eval examples/evals/review.yaml

# The default tier: everything but tests marked `slow` (pyproject.toml deselects them), in two worker
# processes (pytest-xdist): the tests are CPU-bound and independent (each its own store, ports and directories).
test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 --durations=15

# The slow tier only (every crash moment, staggered kills, the large generated soundness corpus), in two
# worker processes as the default tier; exit status 5 means it holds no test.
test-slow: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -m slow || [ $$? -eq 5 ]

lint: $(STAMP)
	$(VENV)/bin/ruff check harness subagents tools tests examples benchmarks
	$(VENV)/bin/ruff format --check harness subagents tools tests examples benchmarks
	$(VENV)/bin/ty check

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/run.py
	$(VENV)/bin/python benchmarks/extra.py
	$(VENV)/bin/python benchmarks/bench_wait32.py
