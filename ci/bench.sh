#!/usr/bin/env bash
# parlab benchmarks (`make bench`). Timing lives here, never in pass/fail tests.
# One function per section; append new sections below and add them to the list at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PARLAB_BIN:-$PWD/target/release/parlab}
PY=${PARLAB_PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ROOT_FLAG=""
[ "$(id -u)" = 0 ] && ROOT_FLAG="--allow-run-as-root"

section() { printf '\n== %s\n' "$*"; }

# Open MPI transport flags of a parlab link (as harness/launch/command.rs builds them).
mca() {
  case "$1" in
    mpi-tcp) echo "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo" ;;
    *) echo "--mca pml ob1 --mca btl self,vader" ;;
  esac
}

# A field of the only manifest in a folder: json_field DIR 'python expression on m'.
json_field() {
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys, glob
m = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
print(eval(sys.argv[2]))
PYEOF
}

# --- Section: collectives. parlab's all-reduce timing vs an independent C program (MPI_Wtime).
# Both: barrier, then MPI_Wtime around each call; the median over iterations of the slowest
# rank. parlab pools 3 repetitions of 1000 iterations; the C program runs 3 times and the
# median of its 3 medians is taken, so one noisy moment on a busy machine weighs less.
bench_collectives() {
  local bytes=3072 iters=1000 warm=100
  section "collectives: all-reduce of $bytes B between 2 ranks (median of the slowest rank, 3 x $iters iterations)"
  mpicc -O2 -o "$WORK/allreduce" tests/bench/allreduce.c
  printf '%-8s %14s %14s %8s\n' link parlab independent ratio
  for link in mpi-shm mpi-tcp; do
    local runs=()
    for _ in 1 2 3; do
      # shellcheck disable=SC2046
      runs+=("$(mpirun $ROOT_FLAG -np 2 $(mca "$link") "$WORK/allreduce" "$bytes" "$iters" "$warm")")
    done
    cat > "$WORK/ar-$link.yaml" <<YAML
name: bench-allreduce-$link
kind: collectives
world: 2
link: $link
threads: 1
ops: [all-reduce]
sizes: [$bytes]
iterations: $iters
warmup: $warm
repetitions: 3
YAML
    PARLAB_MANIFESTS="$WORK/m-$link" "$BIN" run "$WORK/ar-$link.yaml" --no-report --force 2>/dev/null
    local ours independent
    ours=$(json_field "$WORK/m-$link" 'm["summary"]["collectives"][0]["time_s"]["median"]')
    independent=$(IFS=,; echo "${runs[*]}")
    "$PY" -c "import statistics as s; o = $ours; i = s.median([$independent]); print(f'{\"$link\":<8} {o*1e6:11.2f} us {i*1e6:11.2f} us {o/i:8.2f}')"
  done
}

# --- Section: parlab's own overhead per run (launch -> first timed iteration; last iteration -> manifest).
bench_overhead() {
  section "overhead: a 2-rank all-reduce run (4 B, 5 iterations), timeline of one run"
  cat > "$WORK/tiny.yaml" <<YAML
name: bench-overhead
kind: collectives
world: 2
threads: 1
ops: [all-reduce]
sizes: [4]
iterations: 5
warmup: 1
YAML
  local start end
  start=$("$PY" -c 'import time; print(time.time())')
  PARLAB_MANIFESTS="$WORK/m-tiny" "$BIN" run "$WORK/tiny.yaml" --no-report --force 2>/dev/null
  end=$("$PY" -c 'import time; print(time.time())')
  "$PY" - "$WORK/m-tiny" "$start" "$end" <<'PYEOF'
import glob, os, sys
d, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
manifest = glob.glob(d + "/*.json")[0]
run_dir = manifest[:-5]
t = dict(l.split() for l in open(run_dir + "/timeline.txt"))
t = {k: float(v) for k, v in t.items()}
written = os.stat(manifest).st_mtime
rows = [
    ("parlab run, whole command (gates probe included)", end - start),
    ("launch -> first timed iteration (mpirun start, MPI_Init)", t["first_timed_start_unix"] - t["launch_start_unix"]),
    ("last timed iteration -> MPI_Finalize done (rank 0)", t["rank_finalized_unix"] - t["last_timed_end_unix"]),
    ("last timed iteration -> launcher exited", t["launch_end_unix"] - t["last_timed_end_unix"]),
    ("last timed iteration -> manifest written", written - t["last_timed_end_unix"]),
]
for name, s in rows:
    print(f"{name:<58} {s:8.3f} s")
over = (t["first_timed_start_unix"] - t["launch_start_unix"]) + (written - t["last_timed_end_unix"])
print(f"{'parlab overhead per run (the two spans above)':<58} {over:8.3f} s  (aim < 0.5 s)")
PYEOF
}

# --- Section: report. The evidence register rendered from 10,000 synthetic manifests
# (harness/report/synth.rs) by `report::render_all`; aim: under 2 s, modest memory.
bench_report() {
  section "report: render_all of 10,000 synthetic manifests (aim < 2 s)"
  cargo test --release --test integration report::bench_render_10000_manifests -- --ignored --nocapture --test-threads=1 2>/dev/null | grep -o 'bench:.*'
}

# --- Section: decode (harness/rank/decode.rs). parlab's world-1 GPT-2 decode step against
# (a) the memory-bandwidth bound: streamed weight bytes / bandwidth of a 1-process membw run
# with the same threads, and (b) Hugging Face transformers' own decode step on the same seeded
# checkpoint, prompt and thread count (tests/bench/hf_decode_step.py).
bench_decode() {
  local threads=${DECODE_THREADS:-2} tokens=16 reps=3
  section "decode: GPT-2 (seeded checkpoint) world 1, $threads threads, $tokens tokens, $reps repetitions"
  local state="$WORK/decode-state"
  cat > "$WORK/membw1.yaml" <<YAML
name: bench-membw-1
kind: membw
world: 1
threads: $threads
buffer: 512MiB
repetitions: 5
warmup: 1
YAML
  cat > "$WORK/decode1.yaml" <<YAML
name: bench-decode-1
kind: decode
model: gpt2
strategy: tensor
world: 1
threads: $threads
prompt: {length: 32, seed: 1}
new_tokens: $tokens
repetitions: $reps
warmup: 1
YAML
  PARLAB_MANIFESTS="$WORK/m-membw1" "$BIN" run "$WORK/membw1.yaml" --no-report --force 2>/dev/null
  PARLAB_STATE="$state" PARLAB_MANIFESTS="$WORK/m-decode1" "$BIN" run "$WORK/decode1.yaml" --no-report --force 2>/dev/null
  local bw step streamed answer ckpt hf
  bw=$(json_field "$WORK/m-membw1" 'm["summary"]["membw"]["aggregate_Bps"]["median"]')
  step=$(json_field "$WORK/m-decode1" 'm["summary"]["decode"]["step_s"]["median"]')
  streamed=$(json_field "$WORK/m-decode1" 'm["summary"]["decode"]["streamed_bytes"]')
  answer=$(json_field "$WORK/m-decode1" 'm["answer_id"]')
  ckpt=$(ls -d "$state"/checkpoints/gpt2-seed*)
  hf=$("$PY" tests/bench/hf_decode_step.py "$ckpt" "$state/reference/$answer.json" "$threads" "$tokens" "$reps" 2>/dev/null)
  "$PY" - "$step" "$streamed" "$bw" "$hf" <<'PYEOF'
import sys
step, streamed, bw, hf = (float(x) for x in sys.argv[1:])
bound = streamed / bw
print(f"parlab decode step (median)          {step*1e3:9.2f} ms")
print(f"streamed weight bytes per step       {streamed/1e6:9.1f} MB")
print(f"memory bandwidth (membw, 1 process)  {bw/1e9:9.2f} GB/s")
print(f"bandwidth bound = bytes / bandwidth  {bound*1e3:9.2f} ms   ratio parlab/bound = {step/bound:.2f}")
print(f"transformers decode step (median)    {hf*1e3:9.2f} ms   ratio parlab/transformers = {step/hf:.2f}")
PYEOF
}

SECTIONS=(bench_collectives bench_overhead bench_report bench_decode)
# `bash ci/bench.sh bench_collectives` runs only the sections named.
[ "$#" -gt 0 ] && SECTIONS=("$@")
for s in "${SECTIONS[@]}"; do "$s"; done
