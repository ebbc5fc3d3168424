#!/usr/bin/env python3
"""ONNX Runtime's LSTM stack against `bilstm bench --backend cpu`, alternating, one run.

Called by scripts/cpu-vs-ort (which builds the CLI and provides onnxruntime). Each round
runs every case once on both sides, back to back: ORT (warm-up, then --iters timed passes,
median) and the bilstm CLI (`bench --json`, same counts, BILSTM_CPU_THREADS set). The table
gives the median over rounds of each side's per-round median and the ratios the targets of
issue 6 are stated in: batch 1 time ratio bilstm/ORT (target <= 0.6, 2 and 1 threads) and
batch 32 throughput ratio bilstm/ORT (target >= 1.2, 2 threads).
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import time

import numpy as np

FRAMES = 589
FEATURES = 60
LAYERS = 4
# (batch, threads, target kind, target value)
CASES = [(1, 2, "time", 0.6), (1, 1, "time", 0.6), (32, 2, "throughput", 1.2)]


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


def time_bilstm(binary, batch, threads, iters, warmup):
    env = dict(os.environ, BILSTM_CPU_THREADS=str(threads))
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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bilstm", required=True, help="path of the release bilstm binary")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=10, help="timed passes per batch-1 case")
    p.add_argument("--iters32", type=int, default=4, help="timed passes per batch-32 case")
    p.add_argument("--warmup", type=int, default=1)
    args = p.parse_args()

    import onnxruntime as ort

    oc = load_ort_check()
    sd = oc.seeded_state_dict(LAYERS, FEATURES, 1, 0.3)
    model = oc.build_model([oc.onnx_tensors(sd, k) for k in range(LAYERS)], FEATURES,
                           torch_style_state=False)
    lstm_nodes = sum(n.op_type == "LSTM" for n in model.graph.node)
    sess = sessions(model.SerializeToString())
    rng = np.random.default_rng(2)
    inputs = {b: rng.standard_normal((b, FRAMES, FEATURES)).astype(np.float32)
              for b in sorted({b for b, _, _, _ in CASES})}

    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
          f"{os.cpu_count()} logical CPUs; onnxruntime {ort.__version__} ({lstm_nodes} LSTM "
          f"nodes, {FRAMES} frames); {args.rounds} rounds, alternating ORT / bilstm per case",
          flush=True)
    ort_ms = {c: [] for c in CASES}
    our_ms = {c: [] for c in CASES}
    kernel = {}
    for rnd in range(args.rounds):
        for case in CASES:
            batch, threads, _, _ = case
            iters = args.iters if batch == 1 else args.iters32
            ort_ms[case].append(time_ort(sess[threads], inputs[batch], iters, args.warmup))
            ms, kernel[case] = time_bilstm(args.bilstm, batch, threads, iters, args.warmup)
            our_ms[case].append(ms)
            print(f"round {rnd + 1}: batch {batch:>2}, {threads} thread(s): ORT "
                  f"{ort_ms[case][-1]:8.2f} ms, bilstm {ms:8.2f} ms", flush=True)

    print()
    print("| case | ORT ms (median) | bilstm ms (median) | bilstm/ORT time | ORT windows/s "
          "| bilstm windows/s | bilstm/ORT windows/s | target | met |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for case in CASES:
        batch, threads, kind, goal = case
        o = statistics.median(ort_ms[case])
        b = statistics.median(our_ms[case])
        t_ratio, w_ratio = b / o, o / b
        met = t_ratio <= goal if kind == "time" else w_ratio >= goal
        target = f"time <= {goal}x" if kind == "time" else f"windows/s >= {goal}x"
        print(f"| batch {batch}, {threads} thread{'s' if threads > 1 else ''} | {o:.2f} | {b:.2f} "
              f"| {t_ratio:.3f} | {batch * 1e3 / o:.1f} | {batch * 1e3 / b:.1f} | {w_ratio:.2f} "
              f"| {target} | {'yes' if met else 'NO'} |")
    print()
    print("bilstm kernel: " + "; ".join(f"batch {c[0]} x{c[1]}: {k}" for c, k in kernel.items()))


if __name__ == "__main__":
    main()
