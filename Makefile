# Two entry points, both start from a fresh clone:
#   make run   set up .venv and run the main job (pitstop bench on its built-in workload)
#   make test  set up .venv with dev extras, then ruff, mypy on src/, pytest
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Which torch to install first: pitstop itself never depends on torch (docs/install.md),
# so this is the only place a torch is chosen. torch==2.13.0 resolves to the CPU build
# kept on the project's own machines; never a bare `torch`, which makes pip pick a
# multi-GB CUDA build. On a GPU box name the build for its driver (`pitstop bench`
# prints it), e.g. make run TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.pitstop-installed

.PHONY: setup run test lint typecheck pytest docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/pitstop bench

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts examples

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

docs: setup
	$(BIN)/python -m pitstop.docsgen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
