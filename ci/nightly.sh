#!/usr/bin/env bash
# Nightly: keep last night's manifests as the baseline, measure everything again,
# render the register, and compare. Exit codes: 0 fine, 1 a run failed,
# 2 nothing comparable, 3 a layout (or a new night) changed an answer, 4 a figure
# regressed or a run went missing; 130/143 when interrupted.
set -uo pipefail
cd "$(dirname "$0")/.."
make build >/dev/null
BASELINE=.parlab/baseline-manifests
rm -rf "$BASELINE" && mkdir -p "$BASELINE"
cp manifests/*.json "$BASELINE"/ 2>/dev/null || true
target/release/parlab run --force experiments
run_rc=$?
if ! ls "$BASELINE"/*.json >/dev/null 2>&1; then
  echo "nightly: first night (no baseline manifests); tonight's manifests are the next night's baseline"
  exit "$run_rc"
fi
target/release/parlab nightly --baseline "$BASELINE" --manifests manifests
nightly_rc=$?
[ "$nightly_rc" -ne 0 ] && exit "$nightly_rc"
exit "$run_rc"
