#!/usr/bin/env bash
# One phase of a GPU session (benchmarks/README.md, "A GPU session"): each phase is one command
# on the lent machine, under its 10-minute limit, writing what it measured into $OUT.
#
#   OUT=/some/folder bash benchmarks/gpu_session.sh PHASE
#
# A device run brings back at most 8 files from $OUT, so a phase leaves two there:
#   results.tar.gz   every file the phase wrote (the names below), packed again every
#                    PACK_EVERY seconds (30) while it runs and once at its end, so a run cut off
#                    at its limit still returns what it had finished
#   summary.md       what a person reads first: versions, each check's verdict, failures, the
#                    timed rows so far
# The files themselves are written into WORK (a temporary folder unless set), outside $OUT.
#
# PHASE, in the order a session runs them (nothing is timed before every check passes):
#   env       versions, GPU and driver                          -> env.txt
#   stress    back-to-back launches, two streams, CUDA graphs, offsets past 2**31, torch.compile
#                                                               -> check_stress.txt
#   dense     scans and reductions, every function, six dtypes  -> check_dense.txt
#   segments  segmented ops and the DSL's tuple states          -> check_segments.txt
#   bench     the benchmark suite against torch eager           -> bench/ (CSV, JSON, PNG)
#   scatter   the suite's scatter entries alone (GNN aggregation, index_add, bincount) against
#             torch's atomics, its deterministic mode and torch_scatter, the sort timed apart
#                                                               -> scatter/ (CSV, JSON, PNG)
#   host      warm per-call host time                           -> host_overhead.txt
# and two that save device minutes:
#   checks    stress, dense, segments and the scatter ops' checks at once, one process per check
#             and dtype (their first launches compile for minutes on one core each; the machine
#             has 16)                                           -> check_*.txt, checks.txt
#   all       env, checks, then host and bench in the time left, timing only if every check
#             passed (TIME_ANYWAY=1 times regardless)           -> all of the above
#
# Exit status: the phase's own (a check that fails or hangs is non-zero; a hang prints "HANG in").
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the results go to}"
# The tuner's import name, as an installed tritonml has it (pyproject maps it to autotune/), from a
# link in a folder of its own: nothing is written into the checkout.
links=$(mktemp -d)
ln -s "$PWD/autotune" "$links/tritonml_autotune"
export PYTHONPATH="$PWD:$links${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${WORK:-}" ]; then mkdir -p "$WORK"; else WORK=$(mktemp -d); made_work=1; fi
export PYTHONUNBUFFERED=1
DTYPES=${DTYPES:-float32,float16,bfloat16,int32,int64,uint8}
PY=${PYTHON:-python3}   # the GPU machine's own Python (torch and Triton installed)
LIMIT=${LIMIT:-560}   # seconds: under the machine's 10 minutes a command

phase=${1:?name a phase: env, stress, dense, segments, bench, scatter, host, checks or all}
SCATTER_CASES=scatter-gnn-scatter-f1,scatter-gnn-scatter-f16,scatter-gnn-scatter-f64,\
scatter-gnn-segment_coo-f1,scatter-gnn-segment_coo-f16,scatter-gnn-segment_coo-f64,\
scatter-embedding-grad,scatter-bincount-weights
START=$SECONDS

# check LIMIT OPS DTYPES NAME: one gpu_check run, bounded, into check_NAME.txt.
check() {
  timeout "$1" "$PY" -m benchmarks.gpu_check --ops "$2" --dtypes "$3" > "$WORK/check_$4.txt" 2>&1
}

# checks: every check in its own process, all at once, under one deadline; a summary line per
# process in checks.txt (its exit status and last line). Returns 0 only if all passed.
run_checks() {
  local limit=$1 names=() pids=() d i status=0 code
  check "$limit" stress float32,int32 stress &
  names+=(stress); pids+=($!)
  for d in ${DTYPES//,/ }; do
    check "$limit" scan,reduce "$d" "dense_$d" &
    names+=("dense_$d"); pids+=($!)
    check "$limit" segment,dsl "$d" "segments_$d" &
    names+=("segments_$d"); pids+=($!)
    check "$limit" scatter "$d" "scatter_$d" &
    names+=("scatter_$d"); pids+=($!)
  done
  : > "$WORK/checks.txt"
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; code=$?
    [ "$code" -eq 0 ] || status=1
    printf '%-20s exit %3d  %s\n' "${names[$i]}" "$code" \
      "$(tail -n 1 "$WORK/check_${names[$i]}.txt" 2>/dev/null)" >> "$WORK/checks.txt"
  done
  return "$status"
}

left() { echo $(( LIMIT - (SECONDS - START) )); }

# The timed rows of a bench output folder: its table once written, else the rows so far.
rows() {
  if [ -f "$1/bench.md" ]; then head -n 80 "$1/bench.md"
  elif [ -f "$1/bench_rows.jsonl" ]; then
    echo "$(wc -l < "$1/bench_rows.jsonl") rows so far (bench_rows.jsonl), the last:"
    tail -n 5 "$1/bench_rows.jsonl"
  fi
}

summarize() {
  echo "# GPU session: phase $phase"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - START)) s into the phase. Every file is in"
  echo "results.tar.gz: $(cd "$WORK" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
  if [ -f "$WORK/env.txt" ]; then
    echo; echo "## Machine"; echo; echo '```'
    grep -E '^(python|torch|triton|tritonml) |^[0-9a-f]{40}$|NVIDIA H|CUDA Version' \
      "$WORK/env.txt" | head -n 12
    echo '```'
  fi
  if [ -f "$WORK/checks.txt" ]; then
    echo; echo "## Checks (exit status and last line of each process)"; echo; echo '```'
    cat "$WORK/checks.txt"; echo '```'
  fi
  if ls "$WORK"/check_*.txt > /dev/null 2>&1; then
    echo; echo "## Failures and hangs (the first 40 lines)"; echo; echo '```'
    grep -h -E '^(FAIL|HANG|AssertionError|SKIPPED)' "$WORK"/check_*.txt | head -n 40
    echo '```'
  fi
  for folder in bench scatter; do
    if [ -d "$WORK/$folder" ]; then
      echo; echo "## $folder"; echo; rows "$WORK/$folder"
    fi
  done
  if [ -f "$WORK/host_overhead.txt" ]; then
    echo; echo "## Host time"; echo; echo '```'; tail -n 30 "$WORK/host_overhead.txt"; echo '```'
  fi
}

# summary.md and results.tar.gz into $OUT, each written whole before it replaces the last.
pack() {
  summarize > "$OUT/.summary.md" 2>/dev/null && mv "$OUT/.summary.md" "$OUT/summary.md"
  tar -czf "$OUT/.results.tar.gz" -C "$WORK" . 2>/dev/null \
    && mv "$OUT/.results.tar.gz" "$OUT/results.tar.gz"
}

finish() {
  kill "$packer" 2>/dev/null
  wait "$packer" 2>/dev/null
  pack
  rm -rf "$links"
  [ -n "${made_work:-}" ] && rm -rf "$WORK"
}
( while sleep "${PACK_EVERY:-30}"; do pack; done ) > /dev/null 2>&1 &
packer=$!
trap finish EXIT
trap 'exit 143' TERM INT

phase_env() {
  { date -u +%Y-%m-%dT%H:%M:%SZ; git rev-parse HEAD 2>/dev/null; nvidia-smi
    "$PY" -c 'import torch, triton, sys; print("python", sys.version.split()[0]);
print("torch", torch.__version__, "cuda", torch.version.cuda); print("triton", triton.__version__);
print(torch.cuda.get_device_name(), torch.cuda.get_device_properties(0))'
    "$PY" -m tritonml_cli info; } > "$WORK/env.txt" 2>&1
}

case "$phase" in
  env)
    phase_env ;;
  stress)
    check "$LIMIT" stress float32,int32 stress ;;
  dense)
    check "$LIMIT" scan,reduce "$DTYPES" dense ;;
  segments)
    check "$LIMIT" segment,dsl "$DTYPES" segments ;;
  bench)
    timeout "$LIMIT" "$PY" -m tritonml_cli bench --no-compile --output "$WORK/bench" \
      ${CASES:+--cases "$CASES"} > "$WORK/bench.txt" 2>&1 ;;
  scatter)
    timeout "$LIMIT" "$PY" -m tritonml_cli bench --no-compile --output "$WORK/scatter" \
      --cases "$SCATTER_CASES" > "$WORK/scatter.txt" 2>&1 ;;
  host)
    timeout "$LIMIT" "$PY" -m benchmarks.host_overhead > "$WORK/host_overhead.txt" 2>&1 ;;
  checks)
    run_checks "$LIMIT" ;;
  all)
    # The checks get at most CHECKS_LIMIT seconds; host and bench share what is left.
    phase_env
    run_checks "${CHECKS_LIMIT:-330}"
    status=$?
    if [ "$status" -eq 0 ] || [ -n "${TIME_ANYWAY:-}" ]; then
      timeout 60 "$PY" -m benchmarks.host_overhead > "$WORK/host_overhead.txt" 2>&1
      [ "$(left)" -gt 30 ] && timeout "$(left)" "$PY" -m tritonml_cli bench --no-compile \
        --output "$WORK/bench" ${CASES:+--cases "$CASES"} > "$WORK/bench.txt" 2>&1
    else
      echo "gpu_session.sh: a check failed: nothing timed (checks.txt)" >&2
    fi
    cat "$WORK/checks.txt"
    exit "$status" ;;
  *)
    echo "gpu_session.sh: unknown phase '$phase' (env, stress, dense, segments, bench, scatter," \
      "host, checks, all)" >&2
    exit 2 ;;
esac
status=$?
[ "$status" -eq 124 ] && echo "gpu_session.sh: phase $phase ran past ${LIMIT}s" >&2
tail -n 5 "$WORK"/*.txt 2>/dev/null | tail -n 40
exit "$status"
