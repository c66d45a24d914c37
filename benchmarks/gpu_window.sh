#!/usr/bin/env bash
# One call on a GPU machine: the paper-rate benchmark of every training path (bench_paper_rate.py), then the budgeted
# GPU window (python -m repro_lib window) with the fastest path the benchmark validated, for the rest of the budget.
#
#   bash benchmarks/gpu_window.sh OUT [TOTAL_S] [BENCH_S]
#
# OUT: the folder for every file the call writes (results_paper_rate_<gpu>.json, profile_paper_rate_<gpu>.txt,
# records.tar.gz, checkpoints.tar.gz when small enough, window.json, and the two logs); TOTAL_S (default 510): wall
# seconds for both, from this script's start; BENCH_S (default 230): the benchmark's budget (0: no benchmark, the
# window takes the rates committed under benchmarks/, else the paper path with estimated rates). Run from the
# repository root with gpu_data/ beside it (python -m repro_lib window --pack-data). Needs only torch and the
# repository: no network, no notebook tooling. benchmarks/README.md says what to do with OUT afterwards.
# BENCH_ARGS / WINDOW_ARGS (environment): further options, appended (the last of a repeated option wins; the tests
# run this script at smoke size on a CPU with them).
set -u
OUT=${1:?usage: bash benchmarks/gpu_window.sh OUT [TOTAL_S] [BENCH_S]}
TOTAL=${2:-510}
BENCH=${3:-230}
T0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
mkdir -p "$OUT"

if [ "$BENCH" -gt 0 ]; then
  # the benchmark stops itself at its budget; the hard limit only guards against a hung device call
  timeout -k 10 $((BENCH + 40)) "$PY" benchmarks/bench_paper_rate.py --out "$OUT" --budget-s "$BENCH" --epochs 4 \
    --paths paper onegraph streams plain --precisions fp32 bf16 --members 1 8 ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench_log.txt"
  echo "benchmark: exit ${PIPESTATUS[0]} after $(( $(date +%s) - T0 )) s"
fi

LEFT=$(( TOTAL - ($(date +%s) - T0) ))
if [ "$LEFT" -lt 60 ]; then
  echo "window: only $LEFT s left of $TOTAL s; not started"
  exit 0
fi
RATES=""
if [ "$BENCH" -gt 0 ]; then RATES="--rates $OUT"; fi
"$PY" -m repro_lib window --budget-s "$LEFT" --store reports --out "$OUT" --data-root gpu_data --engine auto \
  $RATES ${WINDOW_ARGS:-} 2>&1 | tee "$OUT/window_log.txt"
echo "window: exit ${PIPESTATUS[0]}; whole call $(( $(date +%s) - T0 )) s"
