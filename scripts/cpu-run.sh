#!/usr/bin/env bash
# The CPU backend on the GPU machine's host CPU (issue 15: AVX-512), from the bundle that
# scripts/gpu-bundle builds. It is bundle/cpu-run.sh there; run from the repository root:
#
#   bash bundle/cpu-run.sh            (device tool: carry ["bundle"]; about 2 minutes)
#
# Needs only python3 with numpy (no pip, no network, no Rust). In order:
#   1. the CPU model, its AVX2/FMA/AVX-512 flags and the instruction sets bilstm detects;
#   2. the bilstm-cpu release test binaries (bundle/cpu/tests/*): unit tests, contract
#      (bit identity across every ISA the host has and thread counts 1 and 2, the 512-bit
#      kernels included), accuracy against the f64 reference (each prints its relative L2),
#      final states; on a host without AVX-512F the avx512 tests print "skipped: no avx512f";
#      then the unit binary's ignored phase_timings (batch 1, one thread: projection, recurrent
#      product and gate math per direction and layer, for each ISA, and on the 512-bit kernels
#      for each BILSTM_CPU_TILES variant of bilstm-cpu's Tiles::SWEEP) and phase_timings_batch
#      (one layer-direction at K = 256 as the backend runs it, batch CPU_RUN_PHASE_BATCH,
#      default 32, in chunks of CPU_RUN_PHASE_CHUNKS frames, default 6: projection and
#      recurrence times and FLOP rates, same ISAs and variants; CPU_RUN_PHASES32=0 skips it);
#   3. ONNX Runtime 1.32 (a trimmed copy of the cp312 manylinux wheel's package, unpacked into
#      a temporary folder and put on sys.path) against `bin/bilstm bench --backend cpu` on the
#      prebuilt model bundle/cpu/ort-lstm4.onnx: batch 1 on 2 and on 1 thread, batch 32 on 2
#      threads, for each of BILSTM_CPU_ISA = avx2, avx512vl, avx512 the host has, all against
#      the same ORT figures, alternating per case (scripts/cpu-vs-ort.py). Thread counts are set
#      on both sides (ORT intra-op threads, BILSTM_CPU_THREADS); nothing is pinned (taskset is
#      not used: the script's method does not need it on an otherwise idle machine).
# Everything goes to stdout and, when OUT is set, to $OUT/cpu-run.log (plus $OUT/cpu-vs-ort.md,
# the table). Options (environment): CPU_RUN_ROUNDS (default 5), CPU_RUN_ITERS (batch-1 timed
# passes, default 10), CPU_RUN_ITERS32 (batch-32 timed passes, default 3), CPU_RUN_SKIP_TESTS=1.
#
# The tile sweep (CPU_RUN_SWEEP=1; off by default): step 3 then times the variants of the
# 512-bit kernels' register tiles (BILSTM_CPU_TILES, see bilstm-cpu's `Tiles`) instead of the
# instruction sets: for each variant, `bin/bilstm bench --backend cpu --json` at batch 1 on 2
# and 1 threads and batch 32 on 2 threads, variants alternating per case for
# CPU_RUN_SWEEP_ROUNDS (default 3) rounds of CPU_RUN_SWEEP_ITERS / CPU_RUN_SWEEP_ITERS32 timed
# passes (default 20 / 3), ORT once per case; a median table per variant
# ($OUT/cpu-tiles-sweep.md). CPU_RUN_SWEEP_TILES overrides the variant list (comma-separated,
# the tokens of one variant joined by '+'; the first is the reference). CPU_RUN_ISAS (e.g.
# avx512) limits the per-ISA comparison to those caps; CPU_RUN_COMPARE=PATH[,PATH...] (say, the
# previous commit's bin/bilstm copied into the bundle) times those binaries right after
# bin/bilstm in every case, on rows of their own (an A/B in one run). Step 2's phase_timings
# also prints a line per variant. The whole run with CPU_RUN_SKIP_TESTS=1 takes about 2
# minutes on the AVX-512 host:
#
#   CPU_RUN_SWEEP=1 CPU_RUN_SKIP_TESTS=1 bash bundle/cpu-run.sh
#
# On a host without AVX-512F the variants do not apply: the sweep says so and times the default
# only.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
log=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    log="$OUT/cpu-run.log"
fi
exec > >(tee -a "$log") 2>&1
status=0
start=$SECONDS

echo "== host"
grep -m1 "model name" /proc/cpuinfo || true
echo "logical CPUs: $(nproc)"
echo "SIMD flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*)$' | sort | tr '\n' ' ')"
uname -srm
python3 --version
git_commit="$(cat COMMIT 2>/dev/null | head -1)"
echo "bundle commit: ${git_commit:-unknown}"
./bin/bilstm devices 2>&1 | grep -i "cpu" || true

tmp="$(mktemp -d "${TMPDIR:-/tmp}/bilstm-cpu-run.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

if [ "${CPU_RUN_SKIP_TESTS:-0}" != 1 ]; then
    echo
    echo "== bilstm-cpu tests (release)"
    for t in unit contract accuracy final_state; do
        bin="cpu/tests/$t"
        [ -x "$bin" ] || { echo "missing $bin"; status=1; continue; }
        echo "-- $t"
        # --nocapture: the skipped lines, the ISAs compared and the measured errors.
        "$bin" --include-ignored --nocapture --test-threads 2 >"$tmp/$t.txt" 2>&1
        rc=$?
        grep -E "^(test |test result|available|avx512|skipped|.*relative L2)" "$tmp/$t.txt"
        if [ "$rc" -ne 0 ]; then
            echo "FAILED: $t (exit $rc); the end of its output:"
            tail -n 60 "$tmp/$t.txt"
            status=1
        fi
        [ -n "${OUT:-}" ] && cp "$tmp/$t.txt" "$OUT/cpu-test-$t.txt"
    done
fi

echo
echo "== where a batch-1 forward's time goes (one thread, per ISA; unit test phase_timings)"
if [ -x cpu/tests/unit ]; then
    cpu/tests/unit --ignored --nocapture --test-threads 1 --exact simd::kernels::tests::phase_timings 2>&1 | grep -o "phase timings.*" ||
        echo "phase_timings did not run"
fi

echo
echo "== where a batch-32 layer-direction's time goes (one thread; unit test phase_timings_batch)"
if [ -x cpu/tests/unit ] && [ "${CPU_RUN_PHASES32:-1}" = 1 ]; then
    BILSTM_PHASE_BATCH="${CPU_RUN_PHASE_BATCH:-32}" BILSTM_PHASE_CHUNKS="${CPU_RUN_PHASE_CHUNKS:-6}" \
        cpu/tests/unit --ignored --nocapture --test-threads 1 phase_timings_batch 2>&1 |
        grep -o "phase timings.*" || echo "phase_timings_batch did not run"
fi

echo
echo "== ONNX Runtime vs bilstm (CPU)"
ort_tar="$(ls cpu/onnxruntime-*.tar.xz 2>/dev/null | head -1)"
if [ -z "$ort_tar" ]; then
    echo "no cpu/onnxruntime-*.tar.xz in the bundle"
    exit 1
fi
mkdir -p "$tmp/ort"
python3 - "$ort_tar" "$tmp/ort" <<'PY' || { echo "unpacking $ort_tar failed"; exit 1; }
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:
        t.extractall(sys.argv[2])
PY
if [ "${CPU_RUN_SWEEP:-0}" = 1 ]; then
    echo "(CPU_RUN_SWEEP=1: the tile sweep instead of the per-ISA comparison)"
    tiles="${CPU_RUN_SWEEP_TILES:-default,p6x32,p12x32,r6x64,r12x32,s128,q128,q256,malloc,p6x32+r6x64+s128+malloc}"
    table=()
    [ -n "${OUT:-}" ] && table=(--out "$OUT/cpu-tiles-sweep.md")
    python3 cpu/cpu-vs-ort.py --bilstm ./bin/bilstm --model cpu/ort-lstm4.onnx \
        --ort-path "$tmp/ort" --sweep-tiles "$tiles" --rounds "${CPU_RUN_SWEEP_ROUNDS:-3}" \
        --iters "${CPU_RUN_SWEEP_ITERS:-20}" --iters32 "${CPU_RUN_SWEEP_ITERS32:-3}" \
        "${table[@]}" || status=1
    echo
    echo "cpu-run.sh: done in $((SECONDS - start)) s, status $status"
    exit $status
fi
isas=""
seen=""
for isa in avx2 avx512vl avx512; do
    # The kernel each cap gives; keep the caps that select distinct kernels.
    got="$(BILSTM_CPU_ISA=$isa ./bin/bilstm bench --backend cpu --json --batches 1 --iters 1 --warmup 0 --frames 8 2>/dev/null |
        python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["kernel"])' 2>/dev/null)"
    echo "BILSTM_CPU_ISA=$isa -> ${got:-?}"
    case " $seen " in *" $got "*) continue ;; esac
    seen="$seen $got"
    isas="${isas:+$isas,}$isa"
done
echo "timing bilstm with BILSTM_CPU_ISA in: $isas"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
    ! grep -q "512bit" <<<"$seen"; then
    echo "WARNING: this CPU has AVX-512F/VL but bin/bilstm runs no 512-bit kernel:" \
        "it predates them (rebuild the bundle with scripts/gpu-bundle)"
    status=1
fi
[ -n "${CPU_RUN_ISAS:-}" ] && isas="$CPU_RUN_ISAS" && echo "CPU_RUN_ISAS: timing only $isas"
table=()
[ -n "${OUT:-}" ] && table=(--out "$OUT/cpu-vs-ort.md")
compare=()
if [ -n "${CPU_RUN_COMPARE:-}" ]; then
    compare=(--compare "$CPU_RUN_COMPARE")
    echo "CPU_RUN_COMPARE: also timing $CPU_RUN_COMPARE"
fi
python3 cpu/cpu-vs-ort.py --bilstm ./bin/bilstm --model cpu/ort-lstm4.onnx --ort-path "$tmp/ort" \
    "${compare[@]}" --isa "$isas" --rounds "${CPU_RUN_ROUNDS:-5}" --iters "${CPU_RUN_ITERS:-10}" \
    --iters32 "${CPU_RUN_ITERS32:-3}" "${table[@]}" || status=1

echo
echo "cpu-run.sh: done in $((SECONDS - start)) s, status $status"
exit $status
