#!/usr/bin/env bash
# The GPU check. CI has no GPU; a session lent a GPU machine runs this in two halves:
#
#   bash ci/gpu-check.sh build [TORCH]   here: builds parlab against torch TORCH (default 2.11.0,
#                                        the GPU machine's) into .parlab/gpu-dist/ (a stripped,
#                                        gzipped binary, < 60 MiB; no libtorch: the GPU machine's own is used)
#   bash ci/gpu-check.sh run [SPEC...]   there, from the checkout's root: the GPU suite (ci/gpu-suite/),
#                                        the register, `parlab audit`, and ci/gpu_check.py's checks
#                                        against transformers on the same GPU; everything under $OUT.
#                                        With SPECs, only those runs and the checks they allow (a short rerun)
#
# tch pins one libtorch per release (tch 0.24: torch 2.11; tch 0.26: torch 2.13), so a binary
# must be built against the torch of the machine it runs on. The build copies the sources to
# .parlab/gpu-build/src, pins tch there, and builds with LIBTORCH pointing at the unpacked wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=${PARLAB_GPU_DIST:-$ROOT/.parlab/gpu-dist}

tch_for() {
  case "$1" in
    2.11.*) echo 0.24.0 ;;
    2.13.*) echo 0.26.0 ;;
    *) echo "gpu-check: no known tch release for torch $1 (known: 2.11.x -> 0.24.0, 2.13.x -> 0.26.0)" >&2; exit 2 ;;
  esac
}

build() {
  local torch=${1:-2.11.0}
  local tch
  tch=$(tch_for "$torch")
  local wheels=$ROOT/.parlab/torch-$torch
  if [ ! -e "$wheels/torch/lib/libtorch_cpu.so" ]; then
    mkdir -p "$wheels"
    echo "gpu-check: downloading the torch $torch wheel (large, once)"
    .venv/bin/pip download -q --no-deps --disable-pip-version-check "torch==$torch" -d "$wheels"
    (cd "$wheels" && python3 -m zipfile -e torch-"$torch"-*.whl . >/dev/null && rm -f torch-"$torch"-*.whl)
  fi
  local build=$ROOT/.parlab/gpu-build
  mkdir -p "$build/src"
  # The tracked and untracked-but-not-ignored sources, as the working tree has them.
  git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$build/src"
  sed -i -e "s/^tch = .*/tch = \"=$tch\"/" -e "s/^torch-sys = .*/torch-sys = \"=$tch\"/" "$build/src/Cargo.toml"
  # Start from this checkout's release build: only tch, torch-sys and parlab itself recompile.
  if [ ! -d "$build/target/release" ] && [ -d target/release ]; then
    mkdir -p "$build/target" && cp -a target/release "$build/target/"
  fi
  (
    cd "$build/src"
    unset LIBTORCH_USE_PYTORCH
    export LIBTORCH=$wheels/torch LIBTORCH_CXX11_ABI=1 LIBTORCH_BYPASS_VERSION_CHECK=0 CARGO_TARGET_DIR=$build/target
    # The CUDA graph shim compiles against the project venv's CUDA 13 runtime headers (the torch
    # wheel alone has none); the build says so if they are missing and leaves graphs out.
    export PARLAB_CUDA_INCLUDE=$("$ROOT/.venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "cu13", "include"))')
    cargo build --release --bin parlab
  )
  mkdir -p "$DIST"
  local graph
  # Neither line (a build script that said nothing of graphs) is "unknown", not a failed build.
  graph=$(grep -h "PARLAB_CUDA_GRAPH_ABSENT\|rustc-cfg=parlab_cuda_graph" "$(ls -td "$build"/target/release/build/parlab-*/output | head -1)" 2>/dev/null || true)
  echo "gpu-check: CUDA graph capture: ${graph:-unknown}"
  strip -o "$DIST/parlab" "$build/target/release/parlab"
  gzip -f -9 "$DIST/parlab"
  echo "$torch" >"$DIST/torch-version"
  echo "$(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- harness ci models build.rs Cargo.toml Cargo.lock 2>/dev/null || echo ' with uncommitted changes to the sources')" >"$DIST/commit"
  ls -l "$DIST"
  local size
  size=$(du -sm "$DIST" | cut -f1)
  [ "$size" -le 60 ] || { echo "gpu-check: $DIST is $size MiB, over the 60 MiB a device call carries" >&2; exit 1; }
}

# The suite's order: what the issue anchors first (the GPU memory roofline, the host-device link,
# the GPT-2 and llama-gqa-small decode on CUDA beside their CPU reference), then NCCL, then
# TinyLlama (its 4.4 GB seeded checkpoint is written on the host first): a suite cut off by its
# time limit loses the last.
SUITE=(gpu-memory host-device-link decode-cuda-reference decode-cuda nccl-collectives decode-nccl decode-llama)

# Archives what the run left under $OUT (a device call brings back a few files: the register
# beside one archive), whatever stopped it, and says how it ended.
finish() {
  local rc=$?
  [ -z "${ARCHIVED:-}" ] || return 0
  ARCHIVED=1
  cp "$OUT/report/evidence.md" "$OUT/evidence.md" 2>/dev/null || true
  local kept=()
  for d in manifests report; do [ -d "$OUT/$d" ] && kept+=("$d"); done
  # The folders go only once archived: a failed archive (a full disk) leaves them where they are.
  if [ ${#kept[@]} -gt 0 ]; then
    if tar czf "$OUT/gpu-run.tgz" -C "$OUT" "${kept[@]}"; then
      rm -rf "$OUT/manifests" "$OUT/report"
    else
      echo "gpu-check: archiving ${kept[*]} failed; left in $OUT"
    fi
  fi
  echo "gpu-check: exit ${RC:-$rc}"
  # Let tee write the last lines before the call returns: at most 5 s (a leftover process
  # holding the pipe open must not hold the device call).
  exec 1>&- 2>&-
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 "${TEE_PID:-0}" 2>/dev/null || break
    sleep 0.5
  done
}

# Records step WHAT's exit code RC in RC unless an earlier step already failed (the first failure
# is the script's exit); a step cut by its LIMIT (timeout's 124, or 137 after the grace) is exit
# 5, never 124, which the device tool reads as its own time limit.
first_failure() {
  local what=$1 limit=$2 rc=$3
  [ "$rc" -ne 0 ] || return 0
  if [ "$limit" -gt 0 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
    echo "gpu-check: $what reached its ${limit} s limit (exit $rc); what it had not finished is recorded failed or absent"
    rc=5
  fi
  [ "$RC" -ne 0 ] || RC=$rc
}

run() {
  OUT=${OUT:-/tmp/parlab-gpu-check}
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.txt") 2>&1
  TEE_PID=$!
  trap finish EXIT
  local py=${PARLAB_GPU_PYTHON:-python3}
  local torchlib
  torchlib=$("$py" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  echo "gpu-check: torch $("$py" -c 'import torch; print(torch.__version__)') from $torchlib; binary built for $(cat "$DIST/torch-version") from $(cat "$DIST/commit" 2>/dev/null || echo 'an unknown commit')"
  # The binary and the state (gates, seeded checkpoints) outside the checkout; PARLAB_GPU_WORK
  # moves them (a test of this script keeps them in its own folder).
  local work=${PARLAB_GPU_WORK:-/tmp/parlab-gpu}
  local bin=$work/parlab
  mkdir -p "$work"
  gunzip -c "$DIST/parlab.gz" >"$bin" && chmod +x "$bin"
  export LD_LIBRARY_PATH=$torchlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PARLAB_PYTHON=$(command -v "$py") PARLAB_MANIFESTS=$OUT/manifests PARLAB_STATE=$work/state
  nvidia-smi -L || true
  ldd "$bin" | grep -E 'torch_cuda|not found' || true
  "$bin" gates
  RC=0
  local specs=("$@")
  if [ ${#specs[@]} -eq 0 ]; then
    for name in "${SUITE[@]}"; do specs+=("ci/gpu-suite/$name.yaml"); done
  fi
  # Past the limit parlab is interrupted as Ctrl-C would: the launch in progress is ended and
  # recorded failed, every manifest written before is kept, and the checks below still run.
  # The limits (300 s + 20 s grace, the checks 90 s + 10 s, with the gates, report and audit
  # about a minute) keep the whole call near 7.5 minutes at worst, under the device tool's 600 s
  # per command, so the archive is always made.
  local limit=${PARLAB_GPU_SUITE_LIMIT:-300} rc=0
  timeout -s INT -k 20 "$limit" "$bin" run "${specs[@]}" --no-report || rc=$?
  first_failure "the suite" "$limit" "$rc"
  rc=0
  "$bin" report --manifests "$OUT/manifests" --out "$OUT/report" || rc=$?
  first_failure "the register" 0 "$rc"
  "$bin" audit --manifests "$OUT/manifests" || echo "gpu-check: audit exit $?"
  local only=()
  [ $# -eq 0 ] || only=(--subset)
  rc=0
  timeout -k 10 "${PARLAB_GPU_CHECK_LIMIT:-90}" "$py" ci/gpu_check.py --parlab "$bin" --manifests "$OUT/manifests" --state "$PARLAB_STATE" "${only[@]}" || rc=$?
  first_failure "the checks" "${PARLAB_GPU_CHECK_LIMIT:-90}" "$rc"
  return $RC
}

case "${1:-}" in
  build) build "${2:-2.11.0}" ;;
  run) shift; run "$@" ;;
  *) echo "usage: ci/gpu-check.sh build [TORCH_VERSION] | run [SPEC...]" >&2; exit 2 ;;
esac
