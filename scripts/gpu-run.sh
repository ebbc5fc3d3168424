#!/usr/bin/env bash
# bundle/run.sh (made by scripts/gpu-bundle): runs on the GPU machine, in ONE call:
#   bash bundle/run.sh
# Groups, each in its own log under $OUT (or bundle/out when OUT is unset), every group runs
# even when an earlier one fails, within an overall time budget (BILSTM_RUN_BUDGET_S, 560 s by
# default: the device tool stops a command at 600 s):
#   env          nvidia-smi, the NVRTC / compute-sanitizer found
#   device       GPU tests: device facts, kernel resources vs core occupancy, schedules
#   accuracy     GPU tests: vs the f64 reference (batches 1..64 at 589 frames, frames 1/2/17), vs CPU
#   determinism  GPU tests: repeated runs, dirty workspaces, both projection tiles, all schedules
#   errors       GPU tests: bad input, lost partner -> PartnerLost, NaN/Inf inputs
#   sanitize     GPU test for the sanitizers (batch 2, 17 frames), plain
#   bench        bench --batches 1,32,256 (JSON lines) and, right after, cudnn_baseline.py
#   memcheck / synccheck / racecheck   compute-sanitizer on the sanitize test
#   cpu-tests    the library's unit tests and the NVRTC compile test (ptxas if found)
# Then a summary: one line per group (status, seconds, log) plus the bench and cuDNN figures.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$here/bin"
out="${OUT:-$here/out}"
mkdir -p "$out"
budget="${BILSTM_RUN_BUDGET_S:-560}"
start_all="$(date +%s)"
summary=()
failed=0

elapsed() { echo $(($(date +%s) - start_all)); }
remaining() { echo $((budget - $(elapsed))); }

note() { printf '%s\n' "$*" | tee -a "$out/run.log"; }

# run_group NAME MAX_SECONDS FILTER_REGEX COMMAND...: runs COMMAND with a timeout of at most
# MAX_SECONDS (less if the budget is nearly spent), logs everything to $out/NAME.log, prints the
# log lines matching FILTER_REGEX (at most 40) and records the outcome.
run_group() {
    local name="$1" max="$2" filter="$3"
    shift 3
    local left
    left="$(remaining)"
    if [ "$left" -lt 15 ]; then
        summary+=("$(printf '%-12s SKIPPED (time budget spent)' "$name")")
        note "=== $name: skipped, the time budget is spent"
        return
    fi
    local limit=$((max < left - 5 ? max : left - 5))
    note "=== $name (limit ${limit}s): $*"
    local t0 rc
    t0="$(date +%s)"
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    local took=$(($(date +%s) - t0))
    grep -E "$filter" "$out/$name.log" | head -n 40
    local status="ok"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status="TIMEOUT"
    elif [ "$rc" -ne 0 ]; then
        status="FAILED (rc $rc)"
    fi
    if [ "$status" != "ok" ]; then
        failed=$((failed + 1))
        note "--- $name: $status; last lines of $out/$name.log:"
        tail -n 15 "$out/$name.log"
    fi
    summary+=("$(printf '%-12s %-16s %4ss  %s' "$name" "$status" "$took" "$out/$name.log")")
}

tests_filter='^test |test result|panicked|rel L2|max abs|batch .*tile height|stall at|registers|schedules seen|worst|spin timeout|GPU vs CPU|f64 reference|NVRTC|skipping|^sm_'

# --- env -------------------------------------------------------------------------------
{
    date -u
    nvidia-smi || echo "nvidia-smi failed"
    echo "bundle: $(cat "$here/COMMIT" 2>/dev/null | head -n 1)"
} >"$out/env.log" 2>&1
head -n 25 "$out/env.log"

# NVRTC: the device's CUDA toolkit (13.0), found by file name; cudarc looks for libnvrtc.so.13.
nvrtc_dir=""
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-13.0/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/local/cuda-13*/lib64; do
    if [ -e "$d/libnvrtc.so.13" ]; then nvrtc_dir="$d"; break; fi
done
if [ -z "$nvrtc_dir" ]; then
    found="$(find /usr /opt -maxdepth 7 -name 'libnvrtc.so.13' 2>/dev/null | head -n 1)"
    [ -n "$found" ] && nvrtc_dir="$(dirname "$found")"
fi
if [ -n "$nvrtc_dir" ]; then
    export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    note "NVRTC: $nvrtc_dir/libnvrtc.so.13"
else
    note "NVRTC: libnvrtc.so.13 not found; relying on the default library path"
fi
cuda_bin=""
for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin /usr/local/cuda-13*/bin; do
    if [ -x "$d/compute-sanitizer" ] || [ -x "$d/ptxas" ]; then cuda_bin="$d"; break; fi
done
[ -n "$cuda_bin" ] && export PATH="$PATH:$cuda_bin"
sanitizer="$(command -v compute-sanitizer || true)"
note "compute-sanitizer: ${sanitizer:-not found}; ptxas: $(command -v ptxas || echo 'not found')"
# A fresh, writable PTX cache for this run (the first backend compiles, the rest reuse it).
export BILSTM_CACHE_DIR="$out/ptx-cache"
export RUST_BACKTRACE=1

gpu_flags=(--include-ignored --test-threads=1 --nocapture)

# --- GPU tests -------------------------------------------------------------------------
run_group device 90 "$tests_filter" "$bin/gpu_device" "${gpu_flags[@]}"
if grep -q "core occupancy disagrees\|OccupancyMismatch\|occupancy of bilstm" "$out/device.log"; then
    export BILSTM_OCCUPANCY_CHECK=warn
    note "!!! core occupancy disagrees with the driver: later groups run with BILSTM_OCCUPANCY_CHECK=warn"
fi
run_group accuracy 200 "$tests_filter" "$bin/gpu_accuracy" "${gpu_flags[@]}"
run_group determinism 150 "$tests_filter" "$bin/gpu_determinism" "${gpu_flags[@]}"
run_group errors 120 "$tests_filter" "$bin/gpu_errors" "${gpu_flags[@]}"
run_group sanitize 60 "$tests_filter" "$bin/gpu_sanitize" "${gpu_flags[@]}"

# --- bench and cuDNN, in the same call ---------------------------------------------------
run_group bench 120 '^\{' "$bin/bench" --batches 1,32,256 --iters 30 --warmup 5
grep -E '^\{' "$out/bench.log" >"$out/bench.jsonl" 2>/dev/null
if command -v python3 >/dev/null 2>&1; then
    run_group cudnn 150 '^\{|^torch|Error|error' python3 "$here/cudnn_baseline.py" --batches 1,32,256 --maths fp32 \
        --json "$out/cudnn.json"
else
    summary+=("cudnn        SKIPPED (no python3)")
fi

# --- compute-sanitizer --------------------------------------------------------------------
if [ -n "$sanitizer" ]; then
    for tool in memcheck synccheck racecheck; do
        run_group "$tool" 150 'ERROR SUMMARY|RACECHECK SUMMARY|test result|Invalid|Race|Barrier|error' \
            env BILSTM_SPIN_TIMEOUT_MS=120000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
            "$bin/gpu_sanitize" "${gpu_flags[@]}"
    done
else
    summary+=("sanitizers   SKIPPED (compute-sanitizer not found)")
fi

# --- CPU-side tests, cheap, last ---------------------------------------------------------
run_group cpu-unit 60 'test result|panicked' "$bin/bilstm_cuda_unit" --test-threads=2
run_group nvrtc 90 "$tests_filter" env BILSTM_REQUIRE_NVRTC=1 "$bin/nvrtc_compile" --nocapture
run_group unavailable 30 "$tests_filter" "$bin/unavailable" --nocapture

# --- summary -------------------------------------------------------------------------------
{
    echo
    echo "=================== summary ($(elapsed)s, $failed group(s) not ok) ==================="
    for line in "${summary[@]}"; do echo "$line"; done
    echo "--- bench (bilstm-cuda, forward_device, CUDA events):"
    grep -E '^\{"bench' "$out/bench.log" 2>/dev/null | sed -E 's/.*"batch":([0-9]+).*"median_ms":([0-9.]+).*"us_per_step":([0-9.]+).*"tile_height":([0-9]+).*"concurrent":([a-z]+).*/  batch \1: \2 ms (\3 us\/step, tile height \4, concurrent \5)/'
    echo "--- cuDNN (same call):"
    grep -E '^\{' "$out/cudnn.log" 2>/dev/null | sed -E 's/.*"math": "([a-z0-9]+)", "batch": ([0-9]+).*"ms": ([0-9.]+).*"graph_ms": ([0-9.a-zA-Z]+).*/  \1 batch \2: \3 ms (graph \4)/'
    if command -v python3 >/dev/null 2>&1 && [ -s "$out/bench.jsonl" ] && [ -s "$out/cudnn.log" ]; then
        python3 - "$out/bench.jsonl" "$out/cudnn.log" <<'PY' || true
import json, sys
ours = {}
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if "median_ms" in d:
        ours[d["batch"]] = d["median_ms"]
for line in open(sys.argv[2]):
    if not line.startswith("{"):
        continue
    try:
        d = json.loads(line)
    except ValueError:
        continue
    b = d.get("batch")
    if d.get("math") == "fp32" and b in ours and d.get("ms"):
        print("  ratio batch %d: cuDNN FP32 %.3f ms / bilstm %.3f ms = %.2fx" % (b, d["ms"], ours[b], d["ms"] / ours[b]))
PY
    fi
    echo "logs: $out"
} | tee "$out/summary.txt"

exit "$failed"
