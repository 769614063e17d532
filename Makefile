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

test: $(STAMP) browser
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports   # the layers of pyproject.toml [tool.importlinter]
	$(VENV)/bin/mypy
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
