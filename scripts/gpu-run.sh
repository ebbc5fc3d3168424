#!/usr/bin/env bash
# bundle/run.sh (made by scripts/gpu-bundle): runs on the GPU machine, in ONE call:
#   bash bundle/run.sh
# Groups, each in its own log under $OUT (or bundle/out when OUT is unset), every group runs
# even when an earlier one fails, in this order (most important first), within an overall time
# budget (BILSTM_RUN_BUDGET_S, 470 s by default: the device tool stops a command at 600 s; the
# whole run takes about 6 minutes on the H200); BILSTM_RUN_ONLY="kernels bench ..." runs only
# the groups named (the groups marked "not in the default run" below run only so):
#   env          nvidia-smi, the NVRTC / compute-sanitizer found
#   device       GPU tests: device facts, every kernel's resources vs core occupancy (also at
#                other block sizes and the resident kernel's dynamic shared bytes), plans
#   state        GPU tests: final states (h_n, c_n) of every kind, forward_foreign on caller buffers
#   kernels      GPU tests: wide vs tiled vs resident bit identity (batches 1..64, 589 frames),
#                both projection tiles, accuracy per kind, dirty workspaces, schedules, graph
#                replay vs eager, overrides
#   numerics     GPU test: today's gate math vs the previous one on all 2^32 floats (same bits)
#   bench        bench: each recurrence kind forced at batches 1,2,8,9,32,64,128,256,1024 (FP32),
#                both FP32 projection tiles, and TF32 math (JSON lines; eager and graph replay);
#                then --phases at batches 1 and 32 (per-layer projection / recurrence ms)
#   phases       GPU test: per-phase timing is positive, fits in the pass, survives capture
#   cudnn        cudnn_baseline.py at the same batches, FP32 and TF32, right after the bench
#   python       the wheel (bilstm.torch) with the machine's torch: python/tests (drop-in vs
#                nn.LSTM in float64 and vs cuDNN FP32, zero copy, stream order, speed-up at
#                batches 1, 32, 256) and python/examples/pyannote_dropin.py
#   memcheck / synccheck / racecheck   compute-sanitizer on gpu_sanitize (a small pass of each
#                recurrence kernel, wide, tiled, resident, and a graph replay) and on the TF32
#                projection's small pass when its test binary exists
#   host         the CLI end to end on .npy files (fresh / warm PTX cache, wall time, peak RSS)
#                and `bilstm bench --host` (issue 11)
#   contract     the facade's Backend contract suite on CUDA and Auto (tests/gpu_backend_contract.rs)
#   pipeline     GPU tests: chunked host forwards give the unsplit bits; a lost partner in
#                any chunk is reported
#   errors       GPU tests: bad input, lost partner -> PartnerLost (wide and tiled), NaN/Inf
#   accuracy     GPU tests: vs the f64 reference (batches 1..64 at 589 frames, frames 1/2/17), vs CPU
#   determinism  GPU tests: repeated runs, dirty workspaces, both projection tiles, wide schedules
#   tf32         GPU tests of the TF32 projection (when built)
#   tf32x3       GPU tests of the 3xTF32 (FP32-accurate) projection (when built)
#   fixed        GPU tests of the fixed-point recurrences (TF32 mode's section 9 on 9.0:
#                tensor-core fixed8* and fixed4*, integer-pipe fixed1c*, the plan's pick and
#                `auto`; each kernel forced through the test hook; compute-sanitizer runs their
#                small pass too)
#   cpu-unit / nvrtc / unavailable   the library's unit tests, NVRTC compile + ptxas, no-GPU test
#   abbits       (with bin/bilstm-old, from gpu-bundle's BILSTM_BUNDLE_AB=REV) CLI checksums of
#                this tree against the other at batches 1, 33, 256, 1024, FP32 and TF32; fails on
#                any difference; `ab` (not in the default run) times every bin/bench-*
# Then a summary: one line per group (status, seconds, log), the timing table per kernel and
# batch with cuDNN's figures from the same call and the ratios.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$here/bin"
out="${OUT:-$here/out}"
mkdir -p "$out"
budget="${BILSTM_RUN_BUDGET_S:-470}"
only="${BILSTM_RUN_ONLY:-}"
# The groups documented as "not in the default run": they run only where BILSTM_RUN_ONLY names
# them.
optional=" phasetiles ab clusters x3bench latency cudnnfp32 ncux3 ncux3s ncurec ncuquad ncuproj hosttrace hosttrace2 hostab "
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
    if [ -n "$only" ]; then
        if ! printf ' %s ' "$only" | grep -q " $name "; then
            return
        fi
    elif printf '%s' "$optional" | grep -q " $name "; then
        return
    fi
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
    # The host CPU (the CPU backend's figures on this machine name it).
    echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs visible;" \
        "AVX-512: $(grep -o 'avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    echo "python: $(python3 -V 2>&1)"
} >"$out/env.log" 2>&1
head -n 25 "$out/env.log"
grep -E '^(host CPU|python):' "$out/env.log"

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

# --- GPU tests, most important first -----------------------------------------------------
run_group device 60 "$tests_filter" "$bin/gpu_device" "${gpu_flags[@]}"
if grep -q "core occupancy disagrees\|OccupancyMismatch\|occupancy of bilstm\|driver .*, core" "$out/device.log" 2>/dev/null; then
    export BILSTM_OCCUPANCY_CHECK=warn
    note "!!! core occupancy disagrees with the driver: later groups run with BILSTM_OCCUPANCY_CHECK=warn"
fi
run_group kernels 240 "$tests_filter|wide|tiled|resident" "$bin/gpu_kernels" "${gpu_flags[@]}"
run_group numerics 60 "$tests_filter|mismatches|sweep of" "$bin/gpu_numerics" "${gpu_flags[@]}"
run_group state 90 "$tests_filter|rel L2|foreign" bash -c "'$bin/gpu_state' --include-ignored --test-threads=1 --nocapture && '$bin/gpu_foreign' --include-ignored --test-threads=1 --nocapture"

# --- bench and cuDNN, in the same call ---------------------------------------------------
sweep=1,2,8,9,32,64,128,256,1024
run_group bench 330 '"error"|^Error' bash -c "
    '$bin/bench' --batches $sweep --kinds auto,resident,cluster2,cluster4,cluster2w2,wide,tiled --tiles auto --maths fp32 --iters 20 --case-ms 700 &&
    '$bin/bench' --batches $sweep --kinds auto --tiles small,3xtf32,3xtf32s,3xtf32wg --maths fp32 --iters 20 --case-ms 700 --no-graph &&
    '$bin/bench' --batches $sweep --kinds auto --tiles auto --maths tf32 --iters 20 --case-ms 700 &&
    '$bin/bench' --batches 1,32 --kinds auto --tiles auto --maths fp32 --iters 20 --case-ms 700 --no-graph --phases"
# phasetiles (not in the default run): per-layer projection and recurrence times with each
# FP32 projection tile forced, at the latency batches.
run_group phasetiles 200 'layer|batch' "$bin/bench" --batches 1,8,32,64 --kinds auto \
    --tiles small,large,3xtf32,3xtf32s,3xtf32wg --maths fp32 --iters 10 --case-ms 300 --no-graph --phases
# ab (not in the default run; needs at least one bin/bench-<name>, another tree's bench, e.g.
# bench-old): every bench in turn (the others by name, then bench), three rounds,
# device-resident at the latency batches (AB_BATCHES) with the tiles AB_TILES (auto) and the
# maths AB_MATHS (fp32).
if ls "$bin"/bench-* >/dev/null 2>&1; then
    run_group ab 240 'round' bash -c "
        cd '$bin'
        variants=\"\$(ls bench-* | tr '\\n' ' ') bench\"
        for r in 1 2 3; do
            for v in \$variants; do
                echo \"round \$r \$v\"
                ./\$v --batches ${AB_BATCHES:-1,8,32,64} --kinds auto --tiles ${AB_TILES:-auto} --maths ${AB_MATHS:-fp32} --iters 20 --case-ms 500
            done
        done"
fi
# abbits (runs whenever bin/bilstm-old exists, e.g. from BILSTM_BUNDLE_AB=REV): whether this
# tree's output bits equal the other tree's, `bilstm run --backend cuda` checksums of the
# built-in model at AB_BITS_BATCHES (1,33,256,1024) in FP32 and TF32; fails on any difference.
if [ -x "$bin/bilstm-old" ]; then
    run_group abbits 120 'SAME|DIFF' bash -c "
        rc=0
        for m in fp32 tf32; do
            for b in \$(echo '${AB_BITS_BATCHES:-1,33,256,1024}' | tr ',' ' '); do
                o=\$('$bin/bilstm-old' run --backend cuda --math \$m --batch \$b 2>/dev/null | tail -1)
                n=\$('$bin/bilstm' run --backend cuda --math \$m --batch \$b 2>/dev/null | tail -1)
                if [ -n \"\$n\" ] && [ \"\$o\" = \"\$n\" ]; then s=SAME; else s=DIFF; rc=1; fi
                echo \"\$m batch \$b: \$s (this tree: \$n; other: \$o)\"
            done
        done
        exit \$rc"
fi
# clusters (not in the default run): every cluster shape forced (CLUSTER_KINDS), per-layer
# phases, at batches around the wave boundaries (CLUSTER_BATCHES; the plan's cluster rules).
run_group clusters 240 'batch|layer' "$bin/bench" --batches ${CLUSTER_BATCHES:-1,8,16,24,31,32,33,48,64,65,128,256,1024} \
    --kinds ${CLUSTER_KINDS:-cluster2,cluster4,cluster2w2} --tiles auto --maths fp32 --iters 10 --case-ms 300 --no-graph --phases
# x3bench (not in the default run; BILSTM_RUN_ONLY="x3bench cudnn ..."): the FP32 projection
# tiles against each other with the plan's recurrence, eager and graph, and --phases with each
# 3xTF32 tile forced at batches 1, 8 and 32.
run_group x3bench 240 '"error"|^Error' bash -c "
    '$bin/bench' --batches $sweep --kinds auto --tiles auto,small,3xtf32,3xtf32s,3xtf32wg --maths fp32 --iters 20 --case-ms 700 &&
    '$bin/bench' --batches 1,8,32 --kinds auto --tiles 3xtf32,3xtf32s --maths fp32 --iters 20 --case-ms 700 --no-graph --phases"
cat "$out/bench.log" "$out/x3bench.log" 2>/dev/null | grep -E '^\{' >"$out/bench.jsonl"
# latency (not in the default run): the auto plan's figures at the issue tables' batches, FP32
# (1-1024) and TF32 (1-1024), eager and graph, for a short final call; cudnnfp32 is cuDNN FP32
# and TF32 at the same batches. Then --phases (per-layer projection and recurrence, device
# events): FP32 at batches 1, 32, 64, 128, 256 and 1024, TF32 at 256 and 1024.
run_group latency 200 '"error"|^Error' bash -c "
    '$bin/bench' --batches 1,8,32,64,128,256,1024 --kinds auto --tiles auto --maths fp32 --iters 20 --case-ms 500 &&
    '$bin/bench' --batches 1,8,32,128,256,1024 --kinds auto --tiles auto --maths tf32 --iters 20 --case-ms 500 &&
    '$bin/bench' --batches 1,32,64,128,256,1024 --kinds auto --tiles auto --maths fp32 --iters 20 --case-ms 500 --no-graph --phases &&
    '$bin/bench' --batches 256,1024 --kinds auto --tiles auto --maths tf32 --iters 20 --case-ms 500 --no-graph --phases"
if command -v python3 >/dev/null 2>&1; then
    run_group cudnnfp32 150 '^torch|Error|error|batch' python3 "$here/cudnn_baseline.py" \
        --batches 1,8,32,64,128,256,1024 --maths fp32,tf32 --reps 20 --json "$out/cudnnfp32.json"
fi
run_group phases 60 "$tests_filter|batch .*pass|layer|all " "$bin/gpu_phases" "${gpu_flags[@]}"
if command -v python3 >/dev/null 2>&1; then
    run_group cudnn 150 '^torch|Error|error' python3 "$here/cudnn_baseline.py" --batches "$sweep" --maths fp32,tf32 \
        --reps 20 --json "$out/cudnn.json"
else
    summary+=("cudnn        SKIPPED (no python3)")
fi

# --- the Python package and the PyTorch drop-in (issue 13) --------------------------------
# The wheel from gpu-bundle goes into a private folder (no index, nothing fetched); pytest from
# the bundle's wheels when the machine has none; then python/tests with the machine's torch
# (accuracy vs float64 and cuDNN, zero copy, stream order, speed-up at batches 1/32/256) and
# the pyannote example.
pysite="${TMPDIR:-/tmp}/bilstm-pysite"
if ls "$here"/*.whl >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
    run_group python 180 'passed|failed|skipped|FAILED|SKIPPED|error|Error|rel L2|speed-up|zero copy|bilstm:|max \|' bash -c "
        set -e
        rm -rf '$pysite'
        unpack() { python3 -m pip install --quiet --no-index --no-deps --target '$pysite' \"\$@\" ||
            for w in \"\$@\"; do python3 -m zipfile -e \"\$w\" '$pysite'; done; }
        unpack '$here'/*.whl
        python3 -c 'import pytest' 2>/dev/null || unpack '$here'/wheels/*.whl
        export PYTHONPATH='$pysite'
        cd '$here/python'
        python3 -c 'import bilstm, torch; print(\"bilstm\", bilstm.__version__, \"torch\", torch.__version__, torch.cuda.is_available())'
        python3 -m pytest -v -s -p no:cacheprovider tests
        python3 examples/pyannote_dropin.py --batch 32"
else
    summary+=("python       SKIPPED (no wheel in the bundle, or no python3)")
fi

# --- compute-sanitizer --------------------------------------------------------------------
if [ -n "$sanitizer" ]; then
    sanitize_bins=("$bin/gpu_sanitize")
    for tool in memcheck synccheck racecheck; do
        run_group "$tool" 120 'ERROR SUMMARY|RACECHECK SUMMARY|test result|Invalid|Race|Barrier|error' \
            env BILSTM_SPIN_TIMEOUT_MS=120000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
            "$bin/gpu_sanitize" "${gpu_flags[@]}"
        if [ -x "$bin/gpu_tf32" ]; then
            run_group "$tool-tf32" 150 'ERROR SUMMARY|RACECHECK SUMMARY|test result|Invalid|Race|Barrier|error' \
                env BILSTM_SPIN_TIMEOUT_MS=120000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
                "$bin/gpu_tf32" "${gpu_flags[@]}" small_tf32_pass_for_sanitizers
        fi
        if [ -x "$bin/gpu_fixed" ]; then
            run_group "$tool-fixed" 150 'ERROR SUMMARY|RACECHECK SUMMARY|test result|Invalid|Race|Barrier|error' \
                env BILSTM_SPIN_TIMEOUT_MS=120000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
                "$bin/gpu_fixed" "${gpu_flags[@]}" small_fixed_pass_for_sanitizers
        fi
        if [ -x "$bin/gpu_tf32x3" ]; then
            run_group "$tool-tf32x3" 60 'ERROR SUMMARY|RACECHECK SUMMARY|test result|Invalid|Race|Barrier|error' \
                env BILSTM_SPIN_TIMEOUT_MS=120000 "$sanitizer" --tool "$tool" --error-exitcode 1 \
                "$bin/gpu_tf32x3" "${gpu_flags[@]}" small_tf32x3_pass_for_sanitizers
        fi
    done
else
    summary+=("sanitizers   SKIPPED (compute-sanitizer not found)")
fi

# --- the remaining GPU tests ---------------------------------------------------------------
run_group errors 90 "$tests_filter|stall" "$bin/gpu_errors" "${gpu_flags[@]}"
run_group pipeline 90 "$tests_filter" "$bin/gpu_pipeline" "${gpu_flags[@]}"
# batches: every window of batches 33..1024 (589 frames; host chunked and unsplit, device-resident,
# each kind) against the window run alone, and the CLI's 128- and 256-window passes (issue 14).
run_group batches 300 "$tests_filter|windows differ" "$bin/gpu_batches" "${gpu_flags[@]}"
if [ -x "$bin/bilstm" ] && command -v python3 >/dev/null 2>&1; then
    # End to end (issue 11): the CLI on .npy files (fresh and warm PTX cache), wall time and peak
    # memory of the whole command, then the host-slice forward beside the device-resident one.
    run_group host 240 'wall|bilstm: ran|compiled|prepare|batch|host|trace' bash -c "
        python3 -c \"import numpy as np; r = np.random.default_rng(1)
for n in (32, 1024):
    np.save('/tmp/x%d.npy' % n, r.standard_normal((n, 589, 60)).astype('<f4'))\" &&
        timed() { python3 -c \"import resource, subprocess, sys, time
t = time.time(); rc = subprocess.run(sys.argv[1:]).returncode
print('wall %.3f s, peak RSS %.0f MB, rc %d: %s' % (time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, rc, ' '.join(sys.argv[2:])))\" \"\$@\"; } &&
        export BILSTM_CACHE_DIR=/tmp/bilstm-ptx-fresh BILSTM_HOST_TRACE=1 && rm -rf \$BILSTM_CACHE_DIR &&
        timed '$bin/bilstm' run --input /tmp/x32.npy --output /tmp/y32.npy &&
        timed '$bin/bilstm' run --input /tmp/x32.npy --output /tmp/y32.npy &&
        timed '$bin/bilstm' run --input /tmp/x1024.npy --output /tmp/y1024.npy &&
        timed '$bin/bilstm' run --input /tmp/x1024.npy --output /tmp/y1024b.npy --batch 256 &&
        python3 -c \"import numpy as np; a = np.load('/tmp/y1024.npy'); b = np.load('/tmp/y1024b.npy')
d = (a.view(np.uint32) != b.view(np.uint32)).reshape(a.shape[0], -1).any(axis=1) if a.shape == b.shape else None
print('host: 128-window and 256-window passes give the same bits:', d is not None and not d.any(), '' if d is None else '(%d windows differ, first %s)' % (d.sum(), np.flatnonzero(d)[:8]))\" &&
        timed '$bin/bilstm' run --input /tmp/x1024.npy --output /tmp/y1024.npy --batch 32 &&
        unset BILSTM_HOST_TRACE &&
        '$bin/bilstm' bench --backend cuda --batches 1,8,32,64,256,1024 --iters 10 --host &&
        echo 'host zero copy off' && BILSTM_ZERO_COPY=0 '$bin/bilstm' bench --backend cuda --batches 1,8,32,64 --iters 10 --host &&
        for c in 0 128; do echo \"host chunk \$c\"; BILSTM_HOST_CHUNK=\$c '$bin/bilstm' bench --backend cuda --batches 256,1024 --iters 10 --host; done"
fi
# ncux3 (not in the default run): ncu's stall sampling and pipe figures for the 3xTF32 large
# tile's layer-1 launch at batch 32.
if command -v ncu >/dev/null 2>&1 || [ -x "${cuda_bin:-/nonexistent}/ncu" ]; then
    run_group ncux3 150 'Duration|Throughput|Stall|stall|Warp Cycles|Issued|Pipe|%' \
        "$(command -v ncu || echo "$cuda_bin/ncu")" --clock-control none --kernel-name bilstm_projection_tf32x3 \
        --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SourceCounters --section InstructionStats --section ComputeWorkloadAnalysis \
        "$bin/bench" --batches 32 --kinds auto --tiles 3xtf32 --maths fp32 --iters 1 --warmup 0 --no-graph
fi
# ncux3s (not in the default run): the 3xTF32 tile's stall reasons (cycles per issued
# instruction by reason) and its SASS with per-instruction stall samples (CSV, ncux3s-sass.csv).
if command -v ncu >/dev/null 2>&1 || [ -x "${cuda_bin:-/nonexistent}/ncu" ]; then
    ncu_bin="$(command -v ncu || echo "$cuda_bin/ncu")"
    run_group ncux3s 200 'stalled|Duration' bash -c "
        '$ncu_bin' --clock-control none --kernel-name bilstm_projection_tf32x3 --launch-skip 1 --launch-count 1 \\
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio' --section SpeedOfLight \\
            '$bin/bench' --batches 32 --kinds auto --tiles 3xtf32 --maths fp32 --iters 1 --warmup 0 --no-graph &&
        '$ncu_bin' --clock-control none --kernel-name bilstm_projection_tf32x3 --launch-skip 1 --launch-count 1 \\
            --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \\
            '$bin/bench' --batches 32 --kinds auto --tiles 3xtf32 --maths fp32 --iters 1 --warmup 0 --no-graph \\
            > '$out/ncux3s-sass.csv'"
fi
# ncurec (not in the default run): the 2-CTA cluster recurrence at batch 32 (the second launch:
# layer 1): stall reasons, then its SASS with per-instruction stall samples (ncurec-sass.csv).
if command -v ncu >/dev/null 2>&1 || [ -x "${cuda_bin:-/nonexistent}/ncu" ]; then
    ncu_bin="$(command -v ncu || echo "$cuda_bin/ncu")"
    run_group ncurec 200 'stalled|Duration|Throughput|issued' bash -c "
        '$ncu_bin' --clock-control none --kernel-name bilstm_recurrence_cluster2 --launch-skip 1 --launch-count 1 \\
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active' --section SpeedOfLight \\
            '$bin/bench' --batches 32 --kinds cluster2 --tiles auto --maths fp32 --iters 1 --warmup 0 --no-graph;
        '$ncu_bin' --clock-control none --kernel-name bilstm_recurrence_cluster2 --launch-skip 1 --launch-count 1 \\
            --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \\
            '$bin/bench' --batches 32 --kinds cluster2 --tiles auto --maths fp32 --iters 1 --warmup 0 --no-graph \\
            > '$out/ncurec-sass.csv'"
fi
# ncuquad (not in the default run): the register-quad recurrence (bilstm_recurrence_cluster2w8)
# at batch 256, layer 1: issue activity, stall reasons per issued instruction, instructions by
# pipe, and the speed-of-light section (bench/NOTES.md, session 10), once per math mode in
# NCU_MATHS (fp32; "fp32 tf32" for both: TF32 mode's gate activations differ).
if command -v ncu >/dev/null 2>&1 || [ -x "${cuda_bin:-/nonexistent}/ncu" ]; then
    ncu_bin="$(command -v ncu || echo "$cuda_bin/ncu")"
    run_group ncuquad 200 'stalled|Duration|Throughput|issue_active|inst_executed|^math' bash -c "
        for m in ${NCU_MATHS:-fp32}; do
            echo \"math \$m\"
            '$ncu_bin' --clock-control none --kernel-name bilstm_recurrence_cluster2w8 --launch-skip 1 --launch-count 1 \\
                --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_lsu.sum' \\
                --section SpeedOfLight \\
                '$bin/bench' --batches 256 --kinds auto --tiles auto --maths \$m --iters 1 --warmup 0 --no-graph
        done"
fi
# ncuproj (not in the default run): the resident TF32 projection (bilstm_projection_tf32_resident)
# at batch 1024, TF32: layer 0 (K = 60, the first launch) and layer 1 (K = 256, the second):
# speed of light, memory workload (L2 / DRAM throughput and hit rate), the tensor pipe, warp
# stalls (bench/NOTES.md, session 22).
if command -v ncu >/dev/null 2>&1 || [ -x "${cuda_bin:-/nonexistent}/ncu" ]; then
    ncu_bin="$(command -v ncu || echo "$cuda_bin/ncu")"
    run_group ncuproj 200 'Duration|Throughput|Hit Rate|Clock|Pipe|pipe|stalled|Busy|Bandwidth|launch' bash -c "
        for skip in 0 1; do
            echo \"launch-skip \$skip\"
            '$ncu_bin' --clock-control none --kernel-name bilstm_projection_tf32_resident --launch-skip \$skip --launch-count 1 \\
                --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \\
                --section WarpStateStats \\
                '$bin/bench' --batches 1024 --kinds auto --tiles auto --maths tf32 --iters 1 --warmup 0 --no-graph
        done"
fi
# hosttrace (not in the default run; BILSTM_RUN_ONLY="hosttrace ..."): where an unsplit host
# pass's time goes (BILSTM_HOST_TRACE=1 phases, medians over the passes) with the input staging
# on and off, beside the bench's own host and device-resident figures.
# The median total of each batch's BILSTM_HOST_TRACE=1 lines in a file (hosttrace2, hostab).
cat >"$out/trace-totals.py" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'bilstm host trace: batch (\d+): (.*), total ([0-9.]+) ms', line)
    if m:
        rows.setdefault(int(m.group(1)), []).append(float(m.group(3)))
for b, ts in sorted(rows.items()):
    print('median total of %d passes, batch %d: %.3f ms' % (len(ts), b, statistics.median(ts)))
PY
if [ -x "$bin/bilstm" ] && command -v python3 >/dev/null 2>&1; then
    # hosttrace2 (not in the default run): the copy threads and the progressive copy, each
    # case's batch-32 and 64 medians.
    run_group hosttrace2 200 'median|batch|case' bash -c "
        for c in 'BILSTM_COPY_THREADS=8' 'BILSTM_COPY_THREADS=12' 'BILSTM_COPY_THREADS=16' 'BILSTM_HOST_PROGRESSIVE=0' 'BILSTM_HOST_PROGRESSIVE=0 BILSTM_COPY_THREADS=12'; do
            echo \"case \$c\"
            env \$c BILSTM_HOST_TRACE=1 '$bin/bilstm' bench --backend cuda --batches 32,64 --iters 20 --host 2>\"$out/ht2.txt\" >/dev/null
            grep 'batch 32:' \"$out/ht2.txt\" | tail -n 2
            python3 '$out/trace-totals.py' \"$out/ht2.txt\"
        done"
    run_group hosttrace 150 'median|batch|staging' bash -c "
        for s in 1 0 p; do
            echo \"staging \$s (p: staging on, progressive copy off)\"
            BILSTM_HOST_PROGRESSIVE=\$([ \$s = p ] && echo 0 || echo 1) BILSTM_HOST_STAGING=\$([ \$s = 0 ] && echo 0 || echo 1) BILSTM_HOST_TRACE=1 '$bin/bilstm' bench --backend cuda \\
                --batches 1,8,32,64 --iters 20 --host 2>\"$out/hosttrace-\$s.txt\"
            python3 -c \"import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'bilstm host trace: batch (\\d+): (.*), total ([0-9.]+) ms', line)
    if m:
        d = dict((k, float(v)) for k, v in (p.rsplit(' ', 1) for p in m.group(2).split(', ')))
        d['total'] = float(m.group(3))
        rows.setdefault(int(m.group(1)), []).append(d)
for b, ds in sorted(rows.items()):
    ks = list(ds[0])
    print('median of %d passes, batch %d: ' % (len(ds), b) + ', '.join('%s %.3f' % (k, statistics.median(d[k] for d in ds)) for k in ks))
\" \"$out/hosttrace-\$s.txt\"
            grep 'batch 32:' \"$out/hosttrace-\$s.txt\" | tail -n 2
        done"
fi
# hostab (not in the default run; needs bin/bilstm-old, another tree's CLI): the host path of
# both CLIs in turn, three rounds, BILSTM_HOST_TRACE=1 median totals at batches 1, 8, 32, 64
# beside each bench's device-resident and host figures.
if [ -x "$bin/bilstm-old" ] && command -v python3 >/dev/null 2>&1; then
    run_group hostab 200 'round|median|^ *[0-9]' bash -c "
        for r in 1 2 3; do
            for v in bilstm-old bilstm; do
                echo \"round \$r \$v\"
                BILSTM_HOST_TRACE=1 '$bin/'\$v bench --backend cuda --batches 1,8,32,64 --iters 30 --host 2>\"$out/hostab.txt\" | head -n 12
                python3 '$out/trace-totals.py' \"$out/hostab.txt\"
            done
        done"
fi
if [ -x "$bin/gpu_backend_contract" ]; then
    run_group contract 120 "$tests_filter|Auto|cuda" "$bin/gpu_backend_contract" "${gpu_flags[@]}"
fi
run_group accuracy 120 "$tests_filter" "$bin/gpu_accuracy" "${gpu_flags[@]}"
run_group determinism 120 "$tests_filter" "$bin/gpu_determinism" "${gpu_flags[@]}"
if [ -x "$bin/gpu_tf32" ]; then
    run_group tf32 90 "$tests_filter|tf32" "$bin/gpu_tf32" "${gpu_flags[@]}"
fi
if [ -x "$bin/gpu_fixed" ]; then
    run_group fixed 240 "$tests_filter|fixed" "$bin/gpu_fixed" "${gpu_flags[@]}"
fi
if [ -x "$bin/gpu_tf32x3" ]; then
    run_group tf32x3 150 "$tests_filter|3xtf32" "$bin/gpu_tf32x3" "${gpu_flags[@]}"
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
    if command -v python3 >/dev/null 2>&1 && [ -s "$out/bench.jsonl" ]; then
        python3 - "$out/bench.jsonl" "$out/cudnn.log" <<'PY' || true
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        rows.append(json.loads(line))
    except ValueError:
        pass
cudnn = {}
try:
    for line in open(sys.argv[2]):
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            cudnn[(d.get("math"), d.get("batch"))] = d
except OSError:
    pass
def ms(d, key="median_ms"):
    return "%.3f" % d[key] if d and d.get(key) is not None else "-"
cases = {}
for r in rows:
    if "batch" not in r or r.get("phases"):
        continue  # the --phases passes are timed apart; their rows would shadow the plain ones
    key = (r["math"], r["kind"], r["tile"], r["batch"])
    cases[key] = r
    if "error" in r:
        print("  ERROR %s %s %s batch %d: %s" % key + (r["error"],))
batches = sorted({k[3] for k in cases})
kinds = ("auto", "resident", "cluster2", "cluster4", "cluster2w2", "wide", "tiled")
def cell(r):
    return "%s [%s]" % (ms(r), ms(r, "graph_median_ms")) if r else "-"
print("--- FP32 ms per forward (forward_device, median; graph replay in brackets), each kind forced; auto = the plan's choice:")
print("  %5s | " % "batch" + " ".join("%-17s" % k for k in kinds))
for b in batches:
    print("  %5d | " % b + " ".join("%-17s" % cell(cases.get(("fp32", k, "auto", b))) for k in kinds))
print("--- projection tiles (auto recurrence, no graph), TF32 mode, and cuDNN in the same call; ratios = cuDNN / ours (auto plan):")
print("  %5s | %-8s %-8s %-8s | %-17s | %-15s %-15s | %s" % (
    "batch", "fp32 64", "3xtf32", "3xtf32s", "tf32 auto", "cuDNN fp32", "cuDNN tf32", "fp32 eager, fp32 graph, tf32 eager"))
for b in batches:
    small = cases.get(("fp32", "auto", "small", b))
    large = cases.get(("fp32", "auto", "3xtf32", b))
    x3 = cases.get(("fp32", "auto", "3xtf32s", b))
    auto = cases.get(("fp32", "auto", "auto", b))
    tf = cases.get(("tf32", "auto", "auto", b))
    c32 = cudnn.get(("fp32", b))
    c16 = cudnn.get(("tf32", b))
    def ratio(c, ckey, r, rkey):
        try:
            return "%.2fx" % (c[ckey] / r[rkey])
        except (TypeError, KeyError, ZeroDivisionError):
            return "-"
    print("  %5d | %-8s %-8s %-8s | %-17s | %-15s %-15s | %s, %s, %s" % (
        b, ms(small), ms(large), ms(x3), cell(tf),
        "%s [%s]" % (ms(c32, "ms"), ms(c32, "graph_ms")) if c32 else "-",
        "%s [%s]" % (ms(c16, "ms"), ms(c16, "graph_ms")) if c16 else "-",
        ratio(c32, "ms", auto, "median_ms"), ratio(c32, "graph_ms", auto, "graph_median_ms"),
        ratio(c16, "ms", tf, "median_ms")))
for r in rows:
    if r.get("phases"):
        print("  phases %s %s %s batch %d (ms per layer, projection / recurrence): %s" % (
            r["math"], r.get("recurrence", r["kind"]), r.get("tile", ""), r["batch"], "  ".join(
                "L%d %.3f / %.3f" % (p["layer"], p["projection_ms"], p["recurrence_ms"])
                for p in r["phases"])))
for b in batches:
    r = cases.get(("fp32", "auto", "auto", b))
    if r and "us_per_step" in r:
        print("  auto batch %d: %.3f us/step, %s" % (b, r["us_per_step"], r.get("schedule", "")[:110]))
PY
    fi
    echo "logs: $out"
} | tee "$out/summary.txt"

exit "$failed"
