# The two set-up-to-result commands (see README): `make demo` and `make test`; `make lint` runs the static gates.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch's CPU build, from PyTorch's CPU index; where that index cannot be reached, the public
# index's torch 2.13.0 (a CUDA build, about 2.7 GB with its NVIDIA wheels, which brings its own
# Triton) is installed instead. A CPU torch brings no Triton: the suite's interpreter runs use TRITON.
TORCH ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TRITON ?= triton==3.6.0

.PHONY: demo test test-fast lint install bench matrix clean

$(BIN)/kernlock: pyproject.toml requirements-dev.txt requirements-docs.txt $(shell git ls-files kernlock fixtures 2>/dev/null)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --retries 0 --timeout 20 --index-url $(TORCH_INDEX) "$(TORCH)" \
	  || $(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/pip install --quiet "$(TRITON)"
	$(BIN)/pip install --quiet ".[test]"
	touch $@

install: $(BIN)/kernlock

## lock -> verify -> a tiny training step under kernlock.apply(), on the bundled test Hub
demo: install
	PATH="$(abspath $(BIN)):$$PATH" scripts/demo.sh

## the test suite but its `slow` tests (make test-slow), spread over the cores by pytest-xdist (pytest exit 5, "no tests collected", fails too);
## the OCI tests need the CNCF registry (Debian's docker-registry; .ci/run installs it) and skip without it
test: install
	@command -v docker-registry >/dev/null || command -v registry >/dev/null \
	  || echo "make test: the OCI registry tests skip: no CNCF registry (apt-get install docker-registry)"
	$(BIN)/python -m pytest -q -n auto -m "not slow"

## the slow end-to-end tests alone (`slow` marker: each starts training runs, a fresh venv or a browser); .ci/run runs them after `make test`
test-slow: install
	$(BIN)/python -m pytest -q -n auto -m slow

## the unit tests alone (tests/unit: no HTTP, no subprocesses), in one process
test-fast: install
	$(BIN)/python -m pytest -q tests/unit

## the static gates, as .pre-commit-config.yaml runs them: ruff over the whole repository ([tool.ruff]), the
## package's layout (`ruff format` lays out kernlock/ alone) and mypy over the package and its tests ([tool.mypy])
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check kernlock
	$(BIN)/mypy kernlock tests

## the version matrix (noxfile.py): every kernels/Transformers/huggingface_hub cell, then the support table (docs/reference/supported-versions.md)
matrix: install
	$(BIN)/pip install --quiet nox
	$(BIN)/nox -s matrix "matrix(trl)" support_table

## the benchmarks against the anchors; refreshes the figures in docs/ (docs/explanation/benchmarks.md cites them)
bench: install
	$(BIN)/pip install --quiet ".[bench]"
	$(BIN)/python -m benchmarks --json docs/benchmarks.json --markdown docs/benchmarks.md --plot docs/benchmarks.png

clean:
	rm -rf $(VENV) .pytest_cache .nox
