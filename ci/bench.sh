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

# --- Section: collectives. parlab's all-reduce against tests/bench/allreduce.c, which times the
# same buffers by two established methods in one launch: nccl-tests' (one barrier, the
# iterations back to back timed as one loop, per-rank loop / iterations averaged over ranks:
# the op's own time, the quantity parlab's op_time_s stands for) and the OSU micro-benchmarks'
# osu_allreduce (per call a barrier, MPI_Wtime around the call, per-rank mean averaged over
# ranks: holds half the barrier's exit skew at 2 ranks), plus osu_allreduce's method with the
# receive buffer written before each call (parlab's per-iteration timing poisons it).
# At 2 ranks over mpi-shm and mpi-tcp, 4 B, 1 KiB, 4 KiB, 64 KiB and 1 MiB, interleaved A B A B
# over $COLL_PAIRS pairs; per size each pair's ratios, and their median, min and max. Many pairs
# (15 of 1000 calls): on a 2-vCPU VM one launch's small-message latency differs from the next
# launch's by up to 1.6x, so a pair's ratio is noisy and only the median over many pairs says
# how the two agree; shorter loops let one interruption inflate the comparators' means (both
# established methods average one loop, where parlab takes the median over blocks).
bench_collectives() {
  local iters=${COLL_ITERS:-1000} warm=${COLL_WARMUP:-100} pairs=${COLL_PAIRS:-15}
  local sizes=(4 1024 4096 65536 1048576)
  section "collectives: all-reduce, 2 ranks, $iters iterations ($warm warm-up), $pairs interleaved pairs (comparators, parlab)"
  mpicc -O2 -o "$WORK/allreduce" tests/bench/allreduce.c -lm
  for link in mpi-shm mpi-tcp; do
    cat > "$WORK/ar-$link.yaml" <<YAML
name: bench-allreduce-$link
kind: collectives
world: 2
link: $link
threads: 1
ops: [all-reduce]
sizes: [$(IFS=,; echo "${sizes[*]}")]
iterations: $iters
warmup: $warm
repetitions: 1
timeout: 10m
YAML
    : > "$WORK/pairs-$link.txt"
    for p in $(seq "$pairs"); do
      # shellcheck disable=SC2046
      mpirun $ROOT_FLAG -np 2 $(mca "$link") "$WORK/allreduce" "$iters" "$warm" "${sizes[@]}" > "$WORK/ref-$link-$p.txt"
      rm -rf "$WORK/m-$link"
      PARLAB_MANIFESTS="$WORK/m-$link" "$BIN" run "$WORK/ar-$link.yaml" --no-report --force 2>/dev/null
      "$PY" - "$WORK/m-$link" "$WORK/ref-$link-$p.txt" >> "$WORK/pairs-$link.txt" <<'PYEOF'
import glob, json, sys
m = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
ref = {int(l.split()[0]): l.split() for l in open(sys.argv[2])}
for e in m["summary"]["collectives"]["rows"]:
    osu, nccl, poisoned = (ref[e["size_bytes"]][i] for i in (1, 4, 5))
    print(e["size_bytes"], e["op_time_s"]["median"], e["time_s"]["median"], nccl, osu, poisoned)
PYEOF
    done
    "$PY" - "$link" "$WORK/pairs-$link.txt" <<'PYEOF'
import statistics as st, sys
link, rows = sys.argv[1], [l.split() for l in open(sys.argv[2])]
sizes = sorted({int(r[0]) for r in rows})
at = lambda size: [[float(x) for x in r[1:]] for r in rows if int(r[0]) == size]
summ = lambda v: f"{st.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]"
print(f"{link}: per size, times are medians over pairs; ratios are taken within each pair, then median [min, max]")
print(f"{'size':>9} {'parlab op':>10} {'nccl-tests':>10} {'op/nccl-tests':>22} {'best/best':>9} {'OSU':>9} {'op/OSU':>22} "
      f"{'slowest':>9} {'OSU poisoned/OSU':>22}")
for size in sizes:
    rs = at(size)
    op, slow, nccl, osu, poisoned = (st.median(x[i] for x in rs) for i in range(5))
    best = min(x[0] for x in rs) / min(x[2] for x in rs)
    print(f"{size:>9} {op*1e6:>7.2f} us {nccl*1e6:>7.2f} us {summ([x[0] / x[2] for x in rs]):>22} {best:>9.3f} {osu*1e6:>6.2f} us "
          f"{summ([x[0] / x[3] for x in rs]):>22} {slow*1e6:>6.2f} us {summ([x[4] / x[3] for x in rs]):>22}")
print("  best/best: parlab's lowest op time over the pairs / nccl-tests' method's lowest (each side's quietest launch)")
print("  op/nccl-tests pair by pair:", "; ".join(
    f"{s}: " + " ".join(f"{x[0] / x[2]:.3f}" for x in at(s)) for s in sizes))
PYEOF
  done
}

# The one-run spec the overhead and start-up sections time: a 2-rank all-reduce of 4 B, 5 iterations.
tiny_spec() {
  cat <<YAML
name: bench-overhead
kind: collectives
world: 2
threads: 1
ops: [all-reduce]
sizes: [4]
iterations: 5
warmup: 1
YAML
}

# --- Section: parlab's own overhead per run (launch -> first timed iteration; last iteration -> manifest).
bench_overhead() {
  section "overhead: a 2-rank all-reduce run (4 B, 5 iterations), timeline of one run"
  tiny_spec > "$WORK/tiny.yaml"
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

# --- Section: start-up (harness/gates/cache.rs). A one-run `parlab run` of the overhead section's
# spec with the gates cache cold (A: `--reprobe`, every probe runs, one imports torch in Python)
# and warm (B: the probes cached for this machine and boot), interleaved A B A B over
# $START_PAIRS pairs. Per launch: the whole command's wall time, the run's own recorded time
# (timeline.txt: launch start -> launcher exited) and their difference, what parlab spends
# around the run (process start, spec, gates, manifest); per pair the ratios B / A; then their
# median, min and max.
bench_start() {
  local pairs=${START_PAIRS:-5} rounds="$WORK/start-rounds.txt"
  section "start-up: one-run \`parlab run\` (2-rank all-reduce, 4 B), gates cache cold (A, --reprobe) against warm (B), $pairs interleaved pairs (aim: warm < 1 s beyond the run)"
  tiny_spec > "$WORK/start.yaml"
  : > "$rounds"
  for p in $(seq "$pairs"); do
    local line=""
    for cache in cold warm; do
      local t0 t1 reprobe=()
      [ "$cache" = cold ] && reprobe=(--reprobe)
      rm -rf "$WORK/m-start"
      t0=$(date +%s.%N)
      PARLAB_STATE="$WORK/start-state" PARLAB_MANIFESTS="$WORK/m-start" "$BIN" run "$WORK/start.yaml" --no-report --force "${reprobe[@]}" 2>/dev/null
      t1=$(date +%s.%N)
      line="$line $t0 $t1 $(awk '/^launch_start_unix/ {s = $2} /^launch_end_unix/ {e = $2} END {printf "%.6f", e - s}' "$WORK"/m-start/*/timeline.txt)"
    done
    echo "$line" >> "$rounds"
  done
  "$PY" - "$rounds" <<'PYEOF'
import statistics as st, sys
rows = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
summ = lambda v: f"{st.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]"
# per launch: (wall, run, beyond the run)
launch = lambda t0, t1, run: (t1 - t0, run, t1 - t0 - run)
pairs = [(launch(*r[0:3]), launch(*r[3:6])) for r in rows]
print(f"{'pair':>4} {'A wall':>8} {'A run':>7} {'A beyond':>9} {'B wall':>8} {'B run':>7} {'B beyond':>9} {'wall B/A':>9} {'beyond B/A':>11}")
for i, (a, b) in enumerate(pairs):
    print(f"{i+1:>4} {a[0]:>6.3f} s {a[1]:>5.3f} s {a[2]:>7.3f} s {b[0]:>6.3f} s {b[1]:>5.3f} s {b[2]:>7.3f} s {b[0]/a[0]:>9.3f} {b[2]/a[2]:>11.3f}")
print(f"whole command, cold cache (A):          {summ([a[0] for a, _ in pairs])} s")
print(f"whole command, warm cache (B):          {summ([b[0] for _, b in pairs])} s")
print(f"beyond the run, cold cache (A):         {summ([a[2] for a, _ in pairs])} s")
print(f"beyond the run, warm cache (B):         {summ([b[2] for _, b in pairs])} s  (aim < 1 s)")
print(f"whole command, warm / cold:             {summ([b[0] / a[0] for a, b in pairs])}")
print(f"beyond the run, warm / cold:            {summ([b[2] / a[2] for a, b in pairs])}")
PYEOF
}

# --- Section: report. The evidence register rendered from 10,000 synthetic manifests
# (tests/integration/synth.rs) by `report::render_all`; aim: under 1 s, modest memory.
bench_report() {
  section "report: render_all of 10,000 synthetic manifests (aim < 1 s)"
  cargo test --release --test integration report::bench_render_10000_manifests -- --ignored --nocapture --test-threads=1 2>/dev/null | grep -o 'bench:.*'
}

# The world-1 decode spec the decode sections time: world1_decode_spec NAME THREADS TOKENS REPETITIONS [MODEL].
world1_decode_spec() {
  cat <<YAML
name: $1
kind: decode
model: ${5:-gpt2}
strategy: tensor
world: 1
threads: $2
prompt: {length: 32, seed: 1}
new_tokens: $3
repetitions: $4
warmup: 1
YAML
}

# --- Section: decode (harness/rank/decode.rs). parlab's world-1 GPT-2 decode step against
# (a) the memory-bandwidth bound: streamed weight bytes / the roofline of a 1-process membw run
# with the same threads (the higher of parlab's STREAM-class read and libtorch's sum; both are
# shown), and (b) Hugging Face transformers' own decode step on the same seeded checkpoint,
# prompt and thread count (tests/bench/hf_decode_step.py). The three are interleaved
# (membw, parlab, transformers; membw, parlab, transformers; ...) over $DECODE_PAIRS rounds and
# every ratio is taken within its round, then summarised as median [min, max].
# PARLAB_MATVEC_KERNEL, if set, forces parlab's kernel (bench_decode_avx2 sets it to avx2).
# DECODE_MODEL (default gpt2) is any model parlab and transformers' AutoModelForCausalLM both load;
# bench_decode_llama sets it to TinyLlama-1.1B's shape.
bench_decode() {
  local model=${DECODE_MODEL:-gpt2} threads=${DECODE_THREADS:-2} tokens=${DECODE_TOKENS:-16} reps=3 pairs=${DECODE_PAIRS:-5}
  local kernel=${PARLAB_MATVEC_KERNEL:-best}
  section "decode: $model (seeded checkpoint) world 1, $threads threads, $tokens tokens, $reps repetitions, $pairs interleaved rounds, kernel $kernel"
  printf 'CPU: %s\n' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  printf 'CPU SIMD flags: %s\n' "$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx2|fma|sse2|asimd|neon|sve)$' | sort -u | tr '\n' ' ')"
  local state="$WORK/decode-state-$model" rounds="$WORK/decode-rounds-$model-$kernel.txt"
  cat > "$WORK/membw1.yaml" <<YAML
name: bench-membw-1
kind: membw
world: 1
threads: $threads
buffer: 512MiB
repetitions: 5
warmup: 1
YAML
  world1_decode_spec bench-decode-1 "$threads" "$tokens" "$reps" "$model" > "$WORK/decode1.yaml"
  : > "$rounds"
  for p in $(seq "$pairs"); do
    rm -rf "$WORK/m-membw1" "$WORK/m-decode1"
    PARLAB_MANIFESTS="$WORK/m-membw1" "$BIN" run "$WORK/membw1.yaml" --no-report --force 2>/dev/null
    PARLAB_STATE="$state" PARLAB_MANIFESTS="$WORK/m-decode1" "$BIN" run "$WORK/decode1.yaml" --no-report --force 2>/dev/null
    local answer ckpt hf
    answer=$(json_field "$WORK/m-decode1" 'm["answer_id"] + "-" + m["parlab"]["model"][:12]')
    ckpt=$(ls -d "$state"/checkpoints/*-seed* | head -1)
    hf=$("$PY" tests/bench/hf_decode_step.py "$ckpt" "$state/reference/$answer.json" "$threads" "$tokens" "$reps" 2>/dev/null)
    "$PY" - "$WORK/m-membw1" "$WORK/m-decode1" "$hf" >> "$rounds" <<'PYEOF'
import glob, json, sys
bw = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))["summary"]["membw"]
d = json.load(open(glob.glob(sys.argv[2] + "/*.json")[0]))["summary"]["decode"]
print(d["step_s"]["median"], d["streamed_bytes"], bw["per_process_Bps"]["median"],
      bw["stream"]["per_process_Bps"]["median"], bw["stream"]["per_process_Bps"]["max"], sys.argv[3],
      d.get("matvec_kernel", "?"), bw["stream"].get("kernel", "?"))
PYEOF
  done
  "$PY" - "$rounds" <<'PYEOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
f = lambda i: [float(r[i]) for r in rows]
step, streamed, torch_bw, stream_bw, stream_best, hf = (f(i) for i in range(6))
roof = [max(a, b) for a, b in zip(torch_bw, stream_bw)]
which = ["stream" if b > a else "torch-sum" for a, b in zip(torch_bw, stream_bw)]
summ = lambda v: f"{st.median(v):7.3f} [{min(v):.3f}, {max(v):.3f}]"
print(f"parlab matvec kernel: {rows[0][6]}; membw read kernel: {rows[0][7]}; streamed bytes per step {streamed[0]/1e6:.1f} MB")
print(f"{'round':>5} {'parlab step':>12} {'torch sum':>10} {'STREAM':>10} {'bound':>9} {'HF step':>9} {'parlab/bound':>13} {'parlab/HF':>10} {'STREAM/torch':>13}")
for i in range(len(rows)):
    bound = streamed[i] / roof[i]
    print(f"{i+1:>5} {step[i]*1e3:>9.2f} ms {torch_bw[i]/1e9:>5.2f} GB/s {stream_bw[i]/1e9:>5.2f} GB/s {bound*1e3:>6.2f} ms {hf[i]*1e3:>6.2f} ms "
          f"{step[i]/bound:>13.3f} {step[i]/hf[i]:>10.3f} {stream_bw[i]/torch_bw[i]:>13.3f}")
print(f"parlab / bound (roofline = higher of STREAM and torch sum: {', '.join(sorted(set(which)))}): {summ([s * r / b for s, r, b in zip(step, roof, streamed)])}")
print(f"parlab / transformers:                   {summ([s / h for s, h in zip(step, hf)])}")
print(f"STREAM-class / torch sum bandwidth:      {summ([b / a for a, b in zip(torch_bw, stream_bw)])}")
print(f"STREAM-class best repetition:            {max(stream_best)/1e9:.2f} GB/s")
PYEOF
}

# --- Section: decode with the AVX2+FMA kernel forced (measures the AVX2 path on an AVX-512 machine).
bench_decode_avx2() {
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    PARLAB_MATVEC_KERNEL=avx2 bench_decode
  else
    section "decode with the AVX2 kernel forced: skipped, this CPU has no AVX2+FMA"
  fi
}

# --- Section: decode of the Llama family at a real shape: TinyLlama-1.1B's (22 layers, width 2048,
# 32 heads over 4 KV heads; seeded, 4.4 GB in float32) against the same memory bound and
# transformers' LlamaForCausalLM, 8 tokens, $DECODE_LLAMA_PAIRS (default 3) interleaved rounds.
bench_decode_llama() {
  DECODE_MODEL=tinyllama-1.1b DECODE_TOKENS=8 DECODE_PAIRS=${DECODE_LLAMA_PAIRS:-3} bench_decode
}

# --- Section: matvec kernels (harness/model/matvec.rs). Every kernel this CPU supports, its
# matvec over a 512 MiB matrix against parlab's STREAM-class read of as many bytes, interleaved
# A B A B; prints the bandwidth ratio pair by pair and its median, min and max.
bench_matvec() {
  section "matvec: every supported kernel against the STREAM-class read, 512 MiB, ${DECODE_THREADS:-2} threads"
  BENCH_THREADS=${DECODE_THREADS:-2} cargo test --release --lib model::matvec::tests::bench_kernels_against_the_read -- --ignored --nocapture --test-threads=1 2>/dev/null | grep -o 'bench:.*'
}

# --- Section: all-reduces overlapped with compute (`overlap:`). The same 2-rank tensor split
# (512-token prompt, 8 tokens) with blocking all-reduces (A) and with each cut into
# $OVERLAP_PIECES pieces started non-blocking (B), interleaved A B A B over $OVERLAP_PAIRS pairs;
# per pair: prefill and decode-step time B / A, and per phase the hidden share of the blocking
# all-reduce time, (A comm - B comm) / A comm; then their median, min and max.
bench_overlap() {
  local pairs=${OVERLAP_PAIRS:-5} pieces=${OVERLAP_PIECES:-4} rounds="$WORK/overlap-rounds.txt"
  section "overlap: tensor world 2, 512-token prompt, blocking against $pieces pieces, $pairs interleaved pairs"
  for o in 0 "$pieces"; do
    cat > "$WORK/overlap$o.yaml" <<YAML
name: bench-overlap-$o
kind: decode
model: gpt2
strategy: tensor
world: 2
overlap: $o
prompt: {length: 512, seed: 3}
new_tokens: 8
repetitions: 2
warmup: 1
YAML
  done
  : > "$rounds"
  for p in $(seq "$pairs"); do
    for o in 0 "$pieces"; do
      rm -rf "$WORK/m-overlap$o"
      PARLAB_STATE="$WORK/overlap-state" PARLAB_MANIFESTS="$WORK/m-overlap$o" "$BIN" run "$WORK/overlap$o.yaml" --no-report --force 2>/dev/null
    done
    "$PY" - "$WORK/m-overlap0" "$WORK/m-overlap$pieces" >> "$rounds" <<'PYEOF'
import glob, json, sys
a, b = (json.load(open(glob.glob(d + "/*.json")[0]))["summary"]["decode"] for d in sys.argv[1:3])
total = lambda d, phase: next(x["total_s"]["median"] for x in d["all_reduces"] if x["phase"] == phase)
print(b["prefill_s"]["median"] / a["prefill_s"]["median"], b["step_s"]["median"] / a["step_s"]["median"],
      *[(total(a, ph) - total(b, ph)) / total(a, ph) for ph in ("prefill", "decode")])
PYEOF
  done
  "$PY" - "$rounds" <<'PYEOF'
import statistics as st, sys
rows = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
print(f"{'pair':>4} {'prefill B/A':>12} {'step B/A':>9} {'hidden prefill':>15} {'hidden decode':>14}")
for i, r in enumerate(rows):
    print(f"{i+1:>4} {r[0]:>12.3f} {r[1]:>9.3f} {r[2]:>+15.1%} {r[3]:>+14.1%}")
for j, name in enumerate(["prefill time overlapped / blocking", "decode step overlapped / blocking", "hidden share of prefill all-reduce time", "hidden share of decode all-reduce time"]):
    v = [r[j] for r in rows]
    print(f"{name}: {st.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]")
PYEOF
}

# --- Section: this build against an earlier one (PARLAB_BASELINE_REV, default 8875c2c: the last
# commit before the device seam and the libtorch_cuda link). The earlier build is made once in
# .parlab/baseline-REV/ (from a copy of this checkout's release build: only parlab recompiles).
# The same world-1 GPT-2 decode spec is run by each, interleaved A B A B over $BASELINE_PAIRS
# pairs; per pair the step median B / A and the whole `parlab run` command's wall time B / A
# (process start, gates and the ranks' library loading included), then their median, min, max.
bench_baseline() {
  local rev=${PARLAB_BASELINE_REV:-8875c2c} pairs=${BASELINE_PAIRS:-7} threads=${DECODE_THREADS:-2}
  local dir=$PWD/.parlab/baseline-$rev rounds="$WORK/baseline-rounds.txt"
  section "baseline: this build (B) against $rev (A), world-1 decode, $threads threads, $pairs interleaved pairs"
  # The stamp is written only after the baseline's build succeeded: the dependency builds are
  # copied from this one (with its parlab, removed), so a build cut short never leaves this
  # build's binary to be compared with itself.
  if [ ! -f "$dir/built" ] || [ ! -x "$dir/target/release/parlab" ]; then
    rm -rf "$dir/src" "$dir/built" && mkdir -p "$dir/src" "$dir/target"
    git archive "$rev" | tar -x -C "$dir/src"
    [ -d "$dir/target/release" ] || cp -a target/release "$dir/target/"
    rm -f "$dir/target/release/parlab"
    (cd "$dir/src" && CARGO_TARGET_DIR="$dir/target" cargo build --release --bin parlab 2>&1 | tail -1)
    [ -x "$dir/target/release/parlab" ] || { echo "bench: the baseline $rev did not build" >&2; return 1; }
    touch "$dir/built"
  fi
  world1_decode_spec bench-baseline-decode "$threads" 16 3 > "$WORK/base-decode.yaml"
  : > "$rounds"
  for p in $(seq "$pairs"); do
    local line=""
    for bin in "$dir/target/release/parlab" "$BIN"; do
      rm -rf "$WORK/m-base"
      local t0 t1
      t0=$("$PY" -c 'import time; print(time.time())')
      PARLAB_STATE="$WORK/base-state" PARLAB_MANIFESTS="$WORK/m-base" "$bin" run "$WORK/base-decode.yaml" --no-report --force 2>/dev/null
      t1=$("$PY" -c 'import time; print(time.time())')
      line="$line $(json_field "$WORK/m-base" 'm["summary"]["decode"]["step_s"]["median"]') $("$PY" -c "print($t1 - $t0)")"
    done
    echo "$line" >> "$rounds"
  done
  "$PY" - "$rounds" <<'PYEOF'
import statistics as st, sys
rows = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
summ = lambda v: f"{st.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]"
print(f"{'pair':>4} {'step A':>9} {'step B':>9} {'B/A':>6} {'run A':>7} {'run B':>7} {'B/A':>6}")
for i, (sa, ra, sb, rb) in enumerate(rows):
    print(f"{i+1:>4} {sa*1e3:>6.2f} ms {sb*1e3:>6.2f} ms {sb/sa:>6.3f} {ra:>5.2f} s {rb:>5.2f} s {rb/ra:>6.3f}")
print(f"decode step, this build / baseline:       {summ([r[2] / r[0] for r in rows])}")
print(f"whole `parlab run`, this build / baseline: {summ([r[3] / r[1] for r in rows])}")
PYEOF
}

SECTIONS=(bench_collectives bench_overhead bench_start bench_report bench_matvec bench_decode bench_decode_avx2 bench_decode_llama bench_overlap bench_baseline)
# `bash ci/bench.sh bench_collectives` runs only the sections named.
[ "$#" -gt 0 ] && SECTIONS=("$@")
for s in "${SECTIONS[@]}"; do "$s"; done
