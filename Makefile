# The two commands of the README:
#   make demo   set up, then run the main job (Pre-LN vs Post-LN on Tiny Shakespeare) and its report
#   make test   set up, then run lint, the import contracts, the type check (mypy over src) and the test suite
# Set NORMLAB_DATA_DIR to a directory holding tinyshakespeare.txt to work offline.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The lock (requirements/lock.txt, pip-compile --generate-hashes): the exact version and hashes of
# everything the two commands and CI install, torch's CPU build and every extra included. The
# package's own ranges (pyproject.toml) stay open for users who install it as a library; the lock
# is what the suite last passed with. `make lock` refreshes it, `make test-latest` tries the
# newest versions in range without touching it.
LOCK   := requirements/lock.txt
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | cksum | cut -d' ' -f1)

.PHONY: setup demo test test-latest lock lint clean browser

setup: $(STAMP)

# what `make test` and `make demo` set up first (test-latest sets up its own venv and empties it)
SETUP ?= $(STAMP)

# --require-hashes: a file that is not the one locked is refused. normlab itself is installed
# editable on top, without its dependencies (the lock has them all) and without build isolation
# (the lock's setuptools builds it, so no unlocked build backend is fetched).
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	rm -f $(VENV)/.installed-*
	touch $@

# The tool that writes the lock, pinned like everything else; it lives in a venv of its own.
PIP_TOOLS ?= pip-tools==7.7.0
# torch==2.13.0 (requirements/torch.in) is the CPU build pip finds locally; a bare "torch" would
# pull a multi-GB CUDA build.
# The "all" extra names normlab itself, which pip-compile writes as a path: the package is
# installed from the checkout, so that line (and its warning) leaves the lock.
lock:
	test -x .venv-lock/bin/pip-compile || { $(PYTHON) -m venv .venv-lock && .venv-lock/bin/pip install -q "$(PIP_TOOLS)"; }
	.venv-lock/bin/pip-compile -q --upgrade --generate-hashes --allow-unsafe --strip-extras \
	  --extra dev --extra all --no-emit-index-url --no-emit-find-links -o $(LOCK) pyproject.toml requirements/torch.in
	sed -i -e '/^normlab @ /,/^    # via normlab/d' \
	  -e '/^# WARNING: pip install will require/,/^# Consider using a hashable URL/d' $(LOCK)
	$(MAKE) test

# The newest versions in range, in a venv of their own (.venv-latest): what a user who installs
# normlab today gets. It prints what differs from the lock, then runs the same suite; CI runs the
# locked one. The venv is made anew each time, so nothing an earlier resolve left hides. torch stays at requirements/torch.in's pin (-c): the newest torch in range on the
# index is a multi-GB CUDA build, and the CPU build of the pin is the one the machines here have.
test-latest:
	rm -rf .venv-latest && $(PYTHON) -m venv .venv-latest   # fresh: nothing left from an earlier resolve
	.venv-latest/bin/python -m pip install -q --upgrade -c requirements/torch.in "$$(grep -m1 '^torch==' requirements/torch.in)"
	.venv-latest/bin/python -m pip install -q --upgrade --upgrade-strategy eager -c requirements/torch.in -e ".[dev,all]"
	.venv-latest/bin/python requirements/drift.py $(LOCK)
	$(MAKE) test VENV=.venv-latest SETUP=

demo: $(SETUP)
	$(VENV)/bin/normlab demo

lint: $(SETUP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The report tests open pages in Debian's headless Chromium; install it when we can (root).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "note: chromium not installed; browser tests will be skipped"

# The suite runs on TEST_WORKERS pytest-xdist workers, one more than the machine has cores (each
# sets one torch thread, tests/conftest.py): its tests wait on the processes they start, on Ray
# and on fsync about a fifth of the time, and a third worker fills that (measured on 2 idle cores,
# make test with mypy beside it: 8 min 28 s on 2 workers, 7 min 24 s on 3). loadgroup keeps each
# xdist_group on one worker and --no-loadscope-reorder keeps the suite's order (long tests first);
# then the 15 slowest tests.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
# The suite's temporary files (every run, store and checkpoint it writes) go to tmpfs when the
# machine has one with room: each checkpoint is fsynced file by file, and on a disk a smoke trial
# spends much of its time waiting for those writes. Nothing there outlives the session.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && df -Pk /dev/shm | awk 'NR == 2 && $$4 > 2000000 {print "/dev/shm"}')

test: $(SETUP) browser
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports   # the layers of pyproject.toml [tool.importlinter]
	@# mypy (one core for about half a minute on a fresh clone) runs beside the suite, whose two
	@# workers leave about a fifth of two cores idle; its report follows the suite's, and either failing fails
	@echo "mypy: runs beside the suite; its report follows the suite's"
	@$(VENV)/bin/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	  --durations=15; rc=$$?; \
	wait $$mypy; mrc=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$mrc

clean:
	rm -rf $(VENV) .venv-latest .venv-lock .pytest_cache .ruff_cache .mypy_cache
