#!/usr/bin/env python3
"""ONNX Runtime's LSTM stack against `bilstm bench --backend cpu`, alternating, one run.

Called by scripts/cpu-vs-ort (which builds the CLI and provides onnxruntime) and by the
bundle's cpu-run.sh (scripts/cpu-run.sh). Each round runs every case once on both sides, back
to back: ORT (warm-up, then --iters timed passes, median) and the bilstm CLI (`bench --json`,
same counts, BILSTM_CPU_THREADS set), once per instruction set of --isa (BILSTM_CPU_ISA set).
The thread counts are set on both sides (ORT's intra-op threads, BILSTM_CPU_THREADS); nothing
is pinned with taskset. The table gives the median over rounds of each side's per-round
median and the ratios the targets of issue 15 are stated in: batch 1 time ratio bilstm/ORT
(targets <= 0.7 on 2 threads, <= 0.9 on 1) and batch 32 throughput ratio bilstm/ORT
(target >= 1.25, 2 threads), headed by the CPU model and its SIMD flags.

Without onnx on the machine: build the model elsewhere with --save-model FILE (needs onnx,
writes the graph and exits), then pass --model FILE; --ort-path DIR puts DIR first on
sys.path (an unpacked onnxruntime package), so nothing needs installing.
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

FRAMES = 589
FEATURES = 60
LAYERS = 4
# (batch, threads, target kind, target value)
CASES = [(1, 2, "time", 0.7), (1, 1, "time", 0.9), (32, 2, "throughput", 1.25)]
WEIGHT_SEED = 1
WEIGHT_SCALE = 0.3


def load_ort_check():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("ort_check", os.path.join(here, "ort-check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sessions(model_bytes):
    import onnxruntime as ort

    out = {}
    for threads in sorted({t for _, t, _, _ in CASES}):
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        o.inter_op_num_threads = 1
        o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        out[threads] = ort.InferenceSession(model_bytes, o, providers=["CPUExecutionProvider"])
    return out


def time_ort(session, x, iters, warmup):
    name = session.get_inputs()[0].name
    for _ in range(warmup):
        session.run(None, {name: x})
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        session.run(None, {name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def build_model():
    """The 4-LSTM-node graph of scripts/ort-check.py (needs onnx): (bytes, LSTM node count)."""
    oc = load_ort_check()
    sd = oc.seeded_state_dict(LAYERS, FEATURES, WEIGHT_SEED, WEIGHT_SCALE)
    model = oc.build_model([oc.onnx_tensors(sd, k) for k in range(LAYERS)], FEATURES,
                           torch_style_state=False)
    lstm_nodes = sum(n.op_type == "LSTM" for n in model.graph.node)
    return model.SerializeToString(), lstm_nodes


def time_bilstm(binary, batch, threads, iters, warmup, isa):
    env = dict(os.environ, BILSTM_CPU_THREADS=str(threads))
    if isa:
        env["BILSTM_CPU_ISA"] = isa
    cmd = [binary, "bench", "--backend", "cpu", "--json", "--batches", str(batch),
           "--iters", str(iters), "--warmup", str(warmup)]
    r = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    line = json.loads(r.stdout.strip().splitlines()[-1])
    return line["ms"], line["kernel"]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def simd_flags():
    """The host's AVX2/FMA/AVX-512 flags from /proc/cpuinfo, space separated."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    keep = [x for x in flags if x in ("avx2", "fma") or x.startswith("avx512")]
                    return " ".join(sorted(keep)) or "no avx2/avx512"
    except OSError:
        pass
    return "unknown flags"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bilstm", help="path of the release bilstm binary (required to time)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10, help="timed passes per batch-1 case")
    p.add_argument("--iters32", type=int, default=4, help="timed passes per batch-32 case")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--isa", default="",
                   help="comma-separated BILSTM_CPU_ISA values to time bilstm with, each against "
                        "the same ORT figures (e.g. avx2,avx512vl,avx512); default: the "
                        "detected set")
    p.add_argument("--model", help="a prebuilt model (from --save-model): no onnx needed")
    p.add_argument("--save-model", metavar="FILE",
                   help="write the benchmark's ONNX model to FILE and exit (needs onnx)")
    p.add_argument("--ort-path", help="a folder holding the onnxruntime package, put first on "
                                      "sys.path")
    p.add_argument("--out", help="also write the table (markdown) to this file")
    args = p.parse_args()

    if args.save_model:
        data, _ = build_model()
        with open(args.save_model, "wb") as f:
            f.write(data)
        print(f"wrote {args.save_model} ({len(data)} bytes)")
        return
    if not args.bilstm:
        p.error("--bilstm is required (except with --save-model)")
    if args.ort_path:
        sys.path.insert(0, os.path.abspath(args.ort_path))
    import onnxruntime as ort

    if args.model:
        with open(args.model, "rb") as f:
            model_bytes = f.read()
        lstm_nodes = model_bytes.count(b"LSTM")
        lstm_nodes = f"{lstm_nodes} 'LSTM' strings in {os.path.basename(args.model)}"
    else:
        model_bytes, lstm_nodes = build_model()
        lstm_nodes = f"{lstm_nodes} LSTM nodes"
    isas = [i.strip() for i in args.isa.split(",") if i.strip()] or [""]
    sess = sessions(model_bytes)
    rng = np.random.default_rng(2)
    inputs = {b: rng.standard_normal((b, FRAMES, FEATURES)).astype(np.float32)
              for b in sorted({b for b, _, _, _ in CASES})}

    head = (f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
            f"{os.cpu_count()} logical CPUs ({simd_flags()}); onnxruntime {ort.__version__} "
            f"({lstm_nodes}, {FRAMES} frames); {args.rounds} rounds, alternating ORT / bilstm "
            f"per case; bilstm ISA: {', '.join(i or 'detected' for i in isas)}")
    print(head, flush=True)
    ort_ms = {c: [] for c in CASES}
    our_ms = {(c, i): [] for c in CASES for i in isas}
    kernel = {}
    for rnd in range(args.rounds):
        for case in CASES:
            batch, threads, _, _ = case
            iters = args.iters if batch == 1 else args.iters32
            ort_ms[case].append(time_ort(sess[threads], inputs[batch], iters, args.warmup))
            line = (f"round {rnd + 1}: batch {batch:>2}, {threads} thread(s): ORT "
                    f"{ort_ms[case][-1]:8.2f} ms")
            for isa in isas:
                ms, kernel[(case, isa)] = time_bilstm(args.bilstm, batch, threads, iters,
                                                     args.warmup, isa)
                our_ms[(case, isa)].append(ms)
                line += f", bilstm {isa or 'detected'} {ms:8.2f} ms"
            print(line, flush=True)

    lines = [head, "",
             "| case | bilstm ISA | ORT ms (median) | bilstm ms (median) | bilstm/ORT time "
             "| ORT windows/s | bilstm windows/s | bilstm/ORT windows/s | target | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for case in CASES:
        batch, threads, kind, goal = case
        o = statistics.median(ort_ms[case])
        for isa in isas:
            b = statistics.median(our_ms[(case, isa)])
            t_ratio, w_ratio = b / o, o / b
            met = t_ratio <= goal if kind == "time" else w_ratio >= goal
            target = f"time <= {goal}x" if kind == "time" else f"windows/s >= {goal}x"
            lines.append(
                f"| batch {batch}, {threads} thread{'s' if threads > 1 else ''} "
                f"| {kernel[(case, isa)]} | {o:.2f} | {b:.2f} | {t_ratio:.3f} "
                f"| {batch * 1e3 / o:.1f} | {batch * 1e3 / b:.1f} | {w_ratio:.2f} | {target} "
                f"| {'yes' if met else 'NO'} |")
    print()
    print("\n".join(lines[2:]))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
