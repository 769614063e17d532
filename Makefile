# The two commands of the README:
#   make demo   set up, then run the main job (Pre-LN vs Post-LN on Tiny Shakespeare) and its report
#   make test   set up, then run lint and the test suite
# Set NORMLAB_DATA_DIR to a directory holding tinyshakespeare.txt to work offline.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch is pinned first: this exact version is the CPU build pip finds locally; a bare
# "torch" would pull a multi-GB CUDA build. The package itself then asks for torch>=2.4.
TORCH  ?= torch==2.13.0
EXTRAS ?= dev,hf
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)-$(EXTRAS)

.PHONY: setup demo test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(STAMP)
	$(VENV)/bin/normlab demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

test: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
