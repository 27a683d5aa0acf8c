#!/usr/bin/env bash
# scripts/bench_shared.sh [BUILD_DIR]: throughput on a shared machine (BENCHMARKS.md "A shared
# machine"). Each workload runs on 1 and 2 threads, alone and then beside one busy process
# in another session (`setsid`: Linux's autogroup scheduling gives each session an equal share of
# the cores whatever the nice level, so the busy loop takes a core from us). Workloads:
#   lab        posenc lab, rope, default model, 40 steps: training tokens/s
#   attention  posenc attention, S 2048, D 64, 8 heads, causal: forward and backward GFLOP/s
#   rope       bench_rope BM_rope_qk (q and k [1, 4096, 32, 128] in place): GB/s
# Prints a Markdown table: alone, loaded, loaded / alone, and loaded 2 threads / loaded 1 thread.
# BUILD_DIR (default build/release) lets an older build be measured the same way; both OpenMP's
# and posenc's thread variables are set, so builds before the pool (OpenMP) obey them too.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
posenc=$build/tools/posenc
bench_rope=$build/bench/bench_rope
./scripts/prepare_corpus.sh
tmp=$(mktemp -d)
busy_pid=""
cleanup() { [ -z "$busy_pid" ] || kill "$busy_pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

busy_start() {
  setsid bash -c 'echo $$ > "$0"; while :; do :; done' "$tmp/busy.pid" </dev/null >/dev/null 2>&1 &
  sleep 1
  busy_pid=$(cat "$tmp/busy.pid")
}
busy_stop() { kill "$busy_pid"; busy_pid=""; sleep 1; }

# run WORKLOAD THREADS: prints the figure(s), space-separated.
run() {
  local threads=$2
  export OMP_NUM_THREADS=$threads POSENC_NUM_THREADS=$threads
  case $1 in
    lab)
      rm -rf "$tmp/lab"
      "$posenc" lab --encodings rope --rope-eval none --steps 40 --eval-lengths 64 --eval-tokens 2048 \
        --threads "$threads" --progress none --out "$tmp/lab" >/dev/null
      python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f" % r["runs"][0]["train_tokens_per_second"])' \
        "$tmp/lab/results.json" ;;
    attention)
      "$posenc" attention --seq 2048 --dim 64 --heads 8 --causal --backward --repeat 5 --format json |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f %.1f" % (r["forward_gflops"], r["backward_gflops"]))' ;;
    rope)
      "$bench_rope" --benchmark_filter='BM_rope_qk/T:4096' --benchmark_min_time=1 --benchmark_format=json 2>/dev/null |
        python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print("%.1f" % b["GBps"])' ;;
  esac
}

declare -A alone loaded
for w in lab attention rope; do
  for t in 1 2; do alone[$w,$t]=$(run $w $t); done
done
busy_start
for w in lab attention rope; do
  for t in 1 2; do loaded[$w,$t]=$(run $w $t); done
done
busy_stop

echo "| workload | threads | alone | beside a busy process | loaded / alone | loaded 2 thr / loaded 1 thr |"
echo "|---|---|---|---|---|---|"
row() {  # row LABEL WORKLOAD FIELD
  for t in 1 2; do
    local a l a1 l1
    a=$(echo "${alone[$2,$t]}" | cut -d' ' -f"$3"); l=$(echo "${loaded[$2,$t]}" | cut -d' ' -f"$3")
    l1=$(echo "${loaded[$2,1]}" | cut -d' ' -f"$3")
    python3 -c 'import sys; a,l,l1,t=map(float,sys.argv[2:6]); print("| %s | %d | %g | %g | %.2f | %s |" % (sys.argv[1], t, a, l, l/a, "%.2f" % (l/l1) if t == 2 else ""))' \
      "$1" "$a" "$l" "$l1" "$t"
  done
}
row "lab training (tokens/s)" lab 1
row "attention forward (GFLOP/s)" attention 1
row "attention backward (GFLOP/s)" attention 2
row "RoPE q+k in place (GB/s)" rope 1
