# The two commands of the README:
#   make demo   set up, then run the main job (Pre-LN vs Post-LN on Tiny Shakespeare) and its report
#   make test   set up, then run lint, the import contracts, the type check (mypy over src) and the test suite
# Set NORMLAB_DATA_DIR to a directory holding tinyshakespeare.txt to work offline.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch is pinned first: this exact version is the CPU build pip finds locally; a bare
# "torch" would pull a multi-GB CUDA build. The package itself then asks for torch>=2.6.
TORCH  ?= torch==2.13.0
# all = every optional extra of pyproject.toml; EXTRAS=dev,hf (say) installs fewer.
EXTRAS ?= dev,all
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)-$(EXTRAS)

.PHONY: setup demo test lint clean browser

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(STAMP)
	$(VENV)/bin/normlab demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The report tests open pages in Debian's headless Chromium; install it when we can (root).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "note: chromium not installed; browser tests will be skipped"

# The suite runs on TEST_WORKERS pytest-xdist workers (one per core of a 2-core machine; each
# sets one torch thread, tests/conftest.py). loadgroup keeps each xdist_group on one worker and
# --no-loadscope-reorder keeps the suite's order (long tests first); then the 15 slowest tests.
TEST_WORKERS ?= 2
# The suite's temporary files (every run, store and checkpoint it writes) go to tmpfs when the
# machine has one with room: each checkpoint is fsynced file by file, and on a disk a smoke trial
# spends much of its time waiting for those writes. Nothing there outlives the session.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && df -Pk /dev/shm | awk 'NR == 2 && $$4 > 2000000 {print "/dev/shm"}')

test: $(STAMP) browser
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports   # the layers of pyproject.toml [tool.importlinter]
	$(VENV)/bin/mypy
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	  --durations=15

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
