#!/usr/bin/env bash
# Nsight Compute profiles of the scale kernel where issues 20 and 21 miss their targets, each next to a
# copy kernel of the same bytes (bench/device/README.md, "Profiles"):
#   the 256-expert MoE layer in one batched call, and each of its two expert groups alone;
#   one (57344, 8192) and one (8192, 28672) swizzled weight; the 80-layer model (320 weights, one call);
#   the TP-8 shard of the model that bench/reshard.py exports (PROFILE_RESHARD_LAYERS layers, default 8).
#   OUT=dir bash bench/device/profile_kernels.sh [build-dir]      (after the CUDA build; default build-gpu)
# Writes $OUT/profile.json (bench/device/ncu_summary.py: a few KB), $OUT/profile_csv.tar.gz (ncu's raw CSVs, to
# summarize again without a device), $OUT/profile_ncu.log (the end of each ncu log). Fails soft: without
# ncu, or when ncu cannot read the counters, profile.json still has the CUDA-event timings of every case
# (call, copy kernel, cudaMemcpyAsync), and the log says why. Stays within PROFILE_BUDGET_S seconds
# (default 170). PROFILE_RESHARD=0 skips the reshard case; PROFILE_RESHARD_ENV="MXFP8_COPY_ENGINE_MIN_BYTES=0"
# sends every byte of the shard through the kernel (by default large value runs go to cudaMemcpyAsync,
# which ncu does not see).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${1:-build-gpu}
OUT=${OUT:-bench/results/run}
LOGS=${LOGS:-/tmp/profile-kernels}
budget=${PROFILE_BUDGET_S:-170}
mkdir -p "$OUT" "$LOGS" && OUT=$(cd "$OUT" && pwd) && LOGS=$(cd "$LOGS" && pwd) || exit 1
rm -f "$LOGS"/*.csv "$LOGS"/*.ncu-rep "$LOGS"/cases-*.json "$LOGS"/ncu-*.log
bench=$build/bench/bench_scales
left() { echo $((budget - SECONDS)); }
note() { echo "profile_kernels: $*" | tee -a "$OUT/profile_ncu.log"; }
: >"$OUT/profile_ncu.log"

if [ ! -x "$bench" ]; then
  note "no $bench (build with CUDA first): nothing profiled"
  exit 0
fi

# 1. Timings without the profiler (also the whole result when ncu is missing or cannot count).
timeout 60 "$bench" --profile --out "$LOGS/timing.json" >"$LOGS/timing.log" 2>&1 ||
  note "the timing run failed (exit $?): $(tail -2 "$LOGS/timing.log" | tr '\n' ' ')"

# 2. ncu, if there is one that can read the counters.
ncu=$(command -v ncu)
for candidate in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/nsight-compute*/ncu; do
  [ -z "$ncu" ] && [ -x "$candidate" ] && ncu=$candidate
done
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy
          --section WarpStateStats --section SchedulerStats)
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
metrics+=,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum
# L2 write sectors from the SMs (the cost of uncoalesced stores), warp instructions, shared-memory
# wavefronts and bank conflicts (the cost of the staging): dropped first if this ncu lacks one.
extra=lts__t_sectors_srcunit_tex_op_write.sum,smsp__inst_executed.sum
extra+=,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
extra+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
use_metrics=2   # 2: metrics and extra, 1: metrics, 0: the sections alone
ncu_ok=1
runs=()   # --run CASES CSV --why TEXT, for ncu_summary.py
if [ -z "$ncu" ]; then
  note "ncu not found: timings only"
  ncu_ok=0
else
  note "$("$ncu" --version 2>&1 | tail -1)"
fi

# profile NAME TIMEOUT CMD...: one ncu process over CMD's profiler ranges -> $LOGS/NAME.csv
profile() {
  local name=$1 limit=$2
  shift 2
  local why=""
  if [ "$ncu_ok" != 1 ]; then
    why="ncu unavailable"
  elif [ "$(left)" -lt 20 ]; then
    why="skipped: the time budget (${budget} s) was spent"
  else
    [ "$limit" -gt "$(left)" ] && limit=$(left)
    for _ in 1 2 3; do  # all metrics, the core ones, the sections alone
      local requested=()
      [ "$use_metrics" = 2 ] && requested=(--metrics "$metrics,$extra")
      [ "$use_metrics" = 1 ] && requested=(--metrics "$metrics")
      rm -f "$LOGS/$name.ncu-rep"
      timeout "$limit" "$ncu" --profile-from-start off --clock-control none --cache-control all --replay-mode kernel \
        "${sections[@]}" "${requested[@]}" -f -o "$LOGS/$name" --log-file "$LOGS/ncu-$name.log" "$@" >"$LOGS/$name.app.log" 2>&1
      local rc=$?
      { echo "=== $name (exit $rc)"; grep -E "==(ERROR|WARNING)==" "$LOGS/ncu-$name.log" | head -8; tail -3 "$LOGS/ncu-$name.log"; } \
        >>"$OUT/profile_ncu.log" 2>/dev/null
      if grep -q "ERR_NVGPUCTRPERM" "$LOGS/ncu-$name.log" 2>/dev/null; then
        why="ncu cannot read the performance counters here (ERR_NVGPUCTRPERM)"
        ncu_ok=0
      elif [ "$use_metrics" -gt 0 ] && grep -qiE "metric.*(not found|invalid|failed to find)|failed to find metric" "$LOGS/ncu-$name.log" 2>/dev/null; then
        use_metrics=$((use_metrics - 1))
        note "$name: a requested metric is unknown to this ncu; again with $([ $use_metrics = 1 ] && echo "fewer metrics" || echo "the sections alone")"
        [ "$limit" -gt "$(left)" ] && limit=$(left)
        continue
      elif [ $rc = 124 ]; then
        why="ncu ran past ${limit} s (timeout)"
      elif [ ! -s "$LOGS/$name.ncu-rep" ]; then
        why="ncu wrote no report (exit $rc): $(grep -E '==ERROR==' "$LOGS/ncu-$name.log" 2>/dev/null | head -1)"
      fi
      break
    done
    if [ -z "$why" ] && [ -s "$LOGS/$name.ncu-rep" ]; then
      "$ncu" --import "$LOGS/$name.ncu-rep" --csv --page raw --print-units base >"$LOGS/$name.csv" 2>>"$LOGS/ncu-$name.log" ||
        why="ncu --import failed"
    fi
  fi
  [ -n "$why" ] && note "$name: $why"
  runs+=(--run "$LOGS/cases-$name.json" "$LOGS/$name.csv" --why "${why:-}")
}

# One ncu process per group, so a group that runs long loses only its own report. Each case: marker,
# the call, the copy kernel, cudaMemcpyAsync; kernel replay, caches flushed before every pass (cold).
profile moe 70 "$bench" --profile --no-timing --cases moe,moe_1536x4096,moe_4096x768 --out "$LOGS/cases-moe.json"
profile weights 50 "$bench" --profile --no-timing --cases weight_57344x8192,weight_8192x28672 --out "$LOGS/cases-weights.json"
profile model 60 "$bench" --profile --no-timing --cases model --out "$LOGS/cases-model.json"
if [ "${PROFILE_RESHARD:-1}" = 1 ]; then
  if python3 -c "import torch, mxfp8; assert torch.cuda.is_available() and mxfp8._mxfp8.with_cuda" 2>/dev/null; then
    # shellcheck disable=SC2086  # PROFILE_RESHARD_ENV is a list of NAME=VALUE words
    profile reshard 70 env ${PROFILE_RESHARD_ENV:-} python3 bench/reshard.py --profile-out "$LOGS/cases-reshard.json" \
      --layers "${PROFILE_RESHARD_LAYERS:-8}"
  else
    note "reshard: skipped (needs torch with CUDA and the mxfp8 package built with CUDA)"
  fi
fi

# 3. The summary, and the CSVs for summarizing again elsewhere.
timing=()
[ -s "$LOGS/timing.json" ] && timing=(--timing "$LOGS/timing.json")
python3 bench/device/ncu_summary.py "${runs[@]}" "${timing[@]}" --out "$OUT/profile.json" 2>&1 | tee -a "$OUT/profile_ncu.log"
(cd "$LOGS" && find . -maxdepth 1 \( -name '*.csv' -o -name 'cases-*.json' -o -name timing.json \) -print |
  tar -czf "$OUT/profile_csv.tar.gz" -T -) || true
note "done in ${SECONDS} s: $OUT/profile.json"
exit 0
