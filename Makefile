# parlab: `make run` runs the default suite and writes reports/evidence.md;
# `make test` runs every test. Both install what is missing first (ci/setup.sh).

SHELL := /bin/bash
VENV := $(CURDIR)/.venv
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
export LIBTORCH_USE_PYTORCH := 1
# torch-sys checks the venv's torch against the version tch was made for (any value of
# LIBTORCH_BYPASS_VERSION_CHECK, 0 included, would skip that check: it is left unset).
unexport LIBTORCH_BYPASS_VERSION_CHECK
export PARLAB_PYTHON := $(VENV)/bin/python
BIN := target/release/parlab
SETUP_STAMP := .parlab/setup.ok

.PHONY: all setup build run report test lint bench clean-results

all: build

$(SETUP_STAMP): ci/setup.sh
	bash ci/setup.sh
	@mkdir -p .parlab && touch $(SETUP_STAMP)

# Set up again when the venv's torch is gone (a deleted or broken .venv), whatever the stamp says.
setup:
	@ls -d $(VENV)/lib/python3*/site-packages/torch >/dev/null 2>&1 || rm -f $(SETUP_STAMP)
	@$(MAKE) -s --no-print-directory $(SETUP_STAMP)

build: setup
	cargo build --release

run: build
	$(BIN) run experiments

report: build
	$(BIN) report

test: build lint
	cargo test --release --no-fail-fast -- --test-threads=1
	bash ci/slurm.sh test
	$(VENV)/bin/python tests/hf_crosscheck.py

# Formatting (rustfmt.toml) and lints; clippy shares the release profile's dependency builds.
lint: setup
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

bench: build
	bash ci/bench.sh

clean-results:
	rm -rf manifests/* reports/evidence.md reports/figures reports/tables
