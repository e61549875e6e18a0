#!/usr/bin/env bash
# The concurrency table of issue #40 on a GPU, in one command (budget: under 8 minutes on one GPU).
#
#   benchmarks/gpu_concurrency.sh prepare            here, with PyPI: fill .gpu/ with what the GPU machine lacks
#   benchmarks/gpu_concurrency.sh stage              there: keep the model parts this call carried in $GPU_MODEL_STAGE
#   benchmarks/gpu_concurrency.sh build              there: build the CUDA pair and install the wheels
#   benchmarks/gpu_concurrency.sh [run] [-- ARGS]    there: build (unless built), record the table (ARGS go to
#                                                    python -m benchmarks.gpu_concurrency, e.g. --seconds 15)
#   benchmarks/gpu_concurrency.sh --dry-run [ACTION]  print each step, run none
#
# NOT RUN ON A GPU YET: written on a machine without one and checked there only as far as it can be
# (--dry-run, shellcheck, tests/benchmarks/test_gpu_concurrency.py). Its first run on a GPU is the test of the
# rest; docs/benchmarks.md says how to run it and where its figures go.
#
# The CUDA pair: llama.cpp compiled from the sources llama-cpp-python vendors, with the Makefile's own
# LLAMA_SERVER_ARGS and LLAMA_CMAKE_ARGS plus -DGGML_CUDA=on, into .gpu/llama.cpp/bin (llama-server,
# libllama.so, libggml*.so with libggml-cuda.so), and the bindings built with LLAMA_BUILD=OFF (no native
# code) loading that libllama.so through LLAMA_CPP_LIB_PATH: the layout of the GPU image.
#
# A GPU machine lent to a session reaches no registry, takes at most 64 MiB per transfer and runs
# another Python (3.12). So `prepare` writes, under .gpu/ (ignored by git):
#   src/llama.cpp.tar.xz  the vendored llama.cpp sources without models, docs, tests and git history
#   wheels/               the run-time packages such an image lacks (container/requirements.lock's versions,
#                         boto3's from this venv) for CPython 3.12 manylinux x86-64, and the bindings' wheel
#   model/part-*          the embedded GGUF in parts small enough to travel, and model/SHA256SUMS
# With the device tool (64 MiB a call; the machine keeps what a call left only while it stays warm), in
# calls that follow each other at once:
#   1. carry .gpu/src .gpu/wheels .gpu/model/part-aa:   benchmarks/gpu_concurrency.sh stage build
#   2. carry .gpu/model/part-ab .gpu/model/part-ac:     benchmarks/gpu_concurrency.sh stage
#   3. carry .gpu/model/part-ad .gpu/model/SHA256SUMS:  benchmarks/gpu_concurrency.sh run
# `run` joins the parts from .gpu/model and GPU_MODEL_STAGE (default /tmp/gpu-model) and checks their sum.
# On a GPU machine with the whole checkout, `prepare` there (or copy .gpu/) and `run` alone do it all.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU_DIR="$ROOT/.gpu"
STAGE="${GPU_MODEL_STAGE:-/tmp/gpu-model}"
CUDA_ARCH="${GPU_CUDA_ARCH:-90}"          # the H100/H200's compute capability; "native" where CMake can ask
PART_SIZE="${GPU_MODEL_PART_SIZE:-25M}"  # 4 parts: each call in the header stays under 64 MiB
TABLE_TIMEOUT_S="${GPU_TABLE_TIMEOUT_S:-300}"
PYTHON_HERE="${PYTHON:-$ROOT/.venv/bin/python}"
PYTHON_THERE="${GPU_PYTHON:-python3}"
DRY_RUN=0
ACTIONS=()
PY_ARGS=()

while (($#)); do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    prepare | stage | build | run) ACTIONS+=("$1") ;;
    --) shift; PY_ARGS=("$@"); break ;;
    -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_concurrency.sh: unknown argument '$1' (use prepare, stage, build, run, --dry-run or -- ARGS)" >&2
       exit 2 ;;
  esac
  shift
done

# One step: printed, then run unless --dry-run.
step() {
  printf '+ %s\n' "$*"
  if ((DRY_RUN == 0)); then "$@"; fi
}

make_var() {  # a variable of the Makefile, so the CUDA build keeps its flags in step with `make llama-cpp`
  sed -n "s/^$1 := //p" "$ROOT/Makefile"
}

LLAMA_VERSION="$(make_var LLAMA_CPP_PYTHON)"
SDIST="$ROOT/.wheels/llama_cpp_python-$LLAMA_VERSION.tar.gz"

prepare() {
  local lock_names=(annotated-types blinker diskcache flask gunicorn itsdangerous pydantic pydantic-core
    typing-extensions typing-inspection werkzeug)
  local pins=() name version
  for name in "${lock_names[@]}"; do
    version="$(sed -n "s/^$name==\([^ ]*\).*/\1/p" "$ROOT/container/requirements.lock")"
    [[ -n "$version" ]] || { echo "no pin for $name in container/requirements.lock" >&2; exit 1; }
    pins+=("$name==$version")
  done
  for name in boto3 botocore s3transfer jmespath; do
    version="$("$PYTHON_HERE" -c "import importlib.metadata as m; print(m.version('$name'))")"
    pins+=("$name==$version")
  done
  step mkdir -p "$GPU_DIR/src" "$GPU_DIR/wheels" "$GPU_DIR/model"
  step "$PYTHON_HERE" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$GPU_DIR/wheels" "${pins[@]}"
  step cp "$ROOT"/.wheels/llama-cpp-python-bindings-"$LLAMA_VERSION"-*/llama_cpp_python-*.whl "$GPU_DIR/wheels/"
  step mkdir -p "$GPU_DIR/src/sdist"
  step tar -C "$GPU_DIR/src/sdist" -xzf "$SDIST" --strip-components=1 "llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp"
  step tar -C "$GPU_DIR/src/sdist/vendor" -cJf "$GPU_DIR/src/llama.cpp.tar.xz" \
    --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/tests --exclude=llama.cpp/benches \
    --exclude=llama.cpp/.git llama.cpp
  step rm -rf "$GPU_DIR/src/sdist"
  local gguf
  gguf="$("$PYTHON_HERE" -c 'from workshop_lib.models import embedded_gguf_path; print(embedded_gguf_path())')"
  step rm -f "$GPU_DIR"/model/part-*
  step split -b "$PART_SIZE" "$gguf" "$GPU_DIR/model/part-"
  if ((DRY_RUN == 0)); then
    (cd "$(dirname "$gguf")" && sha256sum "$(basename "$gguf")") > "$GPU_DIR/model/SHA256SUMS"
    du -sh "$GPU_DIR"/src "$GPU_DIR"/wheels "$GPU_DIR"/model/part-*
  fi
  echo "carry .gpu/src, .gpu/wheels and parts in calls of at most 64 MiB; start each call with: benchmarks/gpu_concurrency.sh stage"
}

stage() {
  step mkdir -p "$STAGE"
  local file
  for file in "$GPU_DIR"/model/part-* "$GPU_DIR/model/SHA256SUMS"; do
    if [[ -f "$file" ]]; then step cp "$file" "$STAGE/"; fi
  done
}

built() {
  [[ -x "$GPU_DIR/llama.cpp/bin/llama-server" && -f "$GPU_DIR/llama.cpp/bin/libggml-cuda.so" \
    && -d "$GPU_DIR/site/llama_cpp" ]]
}

build() {
  if ((DRY_RUN == 0)); then
    command -v nvcc > /dev/null || { echo "no nvcc: the CUDA compiler is needed to build llama.cpp" >&2; exit 1; }
    [[ -f "$GPU_DIR/src/llama.cpp.tar.xz" ]] \
      || { echo "no .gpu/src: run '$0 prepare' where PyPI is reachable, and carry .gpu/" >&2; exit 1; }
  fi
  local started=$SECONDS
  build_cuda
  python_env
  echo "build and install: $((SECONDS - started)) s"
}

build_cuda() {
  local src="$GPU_DIR/build/llama.cpp" build="$GPU_DIR/build/cuda" bin="$GPU_DIR/llama.cpp/bin"
  local server_args cmake_args
  read -r -a server_args <<< "$(make_var LLAMA_SERVER_ARGS)"
  read -r -a cmake_args <<< "$(make_var LLAMA_CMAKE_ARGS)"
  step mkdir -p "$GPU_DIR/build" "$bin"
  step tar -C "$GPU_DIR/build" -xJf "$GPU_DIR/src/llama.cpp.tar.xz"
  step cmake -S "$src" -B "$build" "${server_args[@]}" "${cmake_args[@]}" -DGGML_CUDA=on \
    "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN"
  step cmake --build "$build" --target llama-server -j "$(nproc)"
  step cp -P "$build/bin/llama-server" "$build"/bin/lib*.so* "$bin/"
}

python_env() {
  local site="$GPU_DIR/site"
  step "$PYTHON_THERE" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$site" \
    "$GPU_DIR"/wheels/*.whl
  step rm -rf "$site/llama_cpp/lib"
  step ln -s "$GPU_DIR/llama.cpp/bin" "$site/llama_cpp/lib"  # the bindings' other loaders look there
}

join_model() {
  local parts="$GPU_DIR/model/joined" name
  stage
  step mkdir -p "$parts"
  name="$(awk '{print $2}' "$STAGE/SHA256SUMS" 2> /dev/null || echo SmolLM2-135M-Instruct.Q4_1.gguf)"
  if ((DRY_RUN == 0)); then
    cat "$STAGE"/part-* > "$parts/$name"
    (cd "$parts" && sha256sum --check --quiet "$STAGE/SHA256SUMS") \
      || { echo "the model's parts do not add up to it: carry every .gpu/model/part-* (see the header)" >&2; exit 1; }
  else
    echo "+ cat $STAGE/part-* > $parts/$name && sha256sum --check $STAGE/SHA256SUMS"
  fi
  GGUF="$parts/$name"
}

run() {
  local started=$SECONDS
  if ((DRY_RUN == 0)); then
    command -v nvidia-smi > /dev/null || { echo "no nvidia-smi: this is not a GPU machine" >&2; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  fi
  join_model
  if ((DRY_RUN == 1)) || ! built; then build; fi
  step env PYTHONPATH="$GPU_DIR/site:$ROOT:$ROOT/container" LLAMA_CPP_LIB_PATH="$GPU_DIR/llama.cpp/bin" \
    WORKSHOP_LLAMA_SERVER="$GPU_DIR/llama.cpp/bin/llama-server" PYTHONUNBUFFERED=1 \
    timeout --kill-after=20 "$TABLE_TIMEOUT_S" "$PYTHON_THERE" -m benchmarks.gpu_concurrency --gguf "$GGUF" \
    "${PY_ARGS[@]}"
  echo "whole run: $((SECONDS - started)) s"
}

cd "$ROOT"
((${#ACTIONS[@]})) || ACTIONS=(run)
for action in "${ACTIONS[@]}"; do
  "$action"
done
