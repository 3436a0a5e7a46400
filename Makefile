# Two entry points: `make demo` (set up, then train on the built-in task) and
# `make test` (set up, then run every test). Both are idempotent.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := plugins/backend_fsdp plugins/backend_megatron plugins/ppo plugins/grpo plugins/remax plugins/safe_rlhf
STAMP := $(VENV)/.hfsdk-installed
ALGO ?= grpo

.PHONY: setup demo test lint clean

setup: $(STAMP)

# torch first, pinned, so nothing later pulls a CUDA build; then every
# distribution of the repo, editable, with the dev tools.
$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]" $(addprefix -e ,$(PLUGINS))
	touch $@

demo: setup
	$(BIN)/hfsdk run --algo $(ALGO)

test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
