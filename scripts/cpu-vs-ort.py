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
(target >= 1.25, 2 threads), headed by the CPU model and its SIMD flags. --compare PATH[,PATH...]
times more bilstm binaries (say, the previous commit's) right after the first in every case and
ISA, on rows of their own: an A/B in one run.

With --sweep-tiles LIST (scripts/cpu-run.sh's CPU_RUN_SWEEP=1) it times the variants of the
512-bit kernels' register tiles (BILSTM_CPU_TILES, comma-separated LIST, each variant one
`+`-joined set of tokens) instead of instruction sets: --rounds rounds, each running every case
for every variant (the order rotated per round), ORT once per case for reference, then a table
of the medians (and min..max over rounds) per variant and case against ORT and the first
variant. A host without the 512-bit kernels gets a note and only the first variant.

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


def time_bilstm(binary, batch, threads, iters, warmup, isa, tiles=None, frames=None):
    env = dict(os.environ, BILSTM_CPU_THREADS=str(threads))
    if isa:
        env["BILSTM_CPU_ISA"] = isa
    if tiles:
        env["BILSTM_CPU_TILES"] = tiles.replace("+", ",")
    cmd = [binary, "bench", "--backend", "cpu", "--json", "--batches", str(batch),
           "--iters", str(iters), "--warmup", str(warmup)]
    if frames:
        cmd += ["--frames", str(frames)]
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


def sweep_tiles(args, variants, sess, inputs, lstm_nodes, ort_version):
    """Times each BILSTM_CPU_TILES variant (see the module docs); returns the table lines."""
    # Which variants this host runs: the label names the tiles only on the 512-bit kernels.
    labels = {}
    for v in variants:
        _, labels[v] = time_bilstm(args.bilstm, 1, 1, 1, 0, "", tiles=v, frames=8)
    want = {v: "tiles " + v.replace("+", ",") for v in variants}
    if "tiles " not in labels[variants[0]]:
        print(f"NOTE: no 512-bit kernels on this host (bilstm runs: {labels[variants[0]]}); the "
              f"tile variants do not apply here, so only '{variants[0]}' is timed (the sweep "
              f"is meant for the AVX-512 host)", flush=True)
        variants = variants[:1]
    else:
        def tokens(x):
            return set(x.replace("+", ",").split(","))

        bad = [v for v in variants
               if tokens(labels[v].rsplit("tiles ", 1)[-1]) != tokens(v)]
        for v in bad:
            print(f"NOTE: BILSTM_CPU_TILES={v.replace('+', ',')} gives '{labels[v]}' (expected "
                  f"'{want[v]}'): skipped", flush=True)
        variants = [v for v in variants if v not in bad]
    head = (f"# tile sweep, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
            f"{cpu_model()}, {os.cpu_count()} logical CPUs ({simd_flags()}); onnxruntime "
            f"{ort_version} ({lstm_nodes}, {FRAMES} frames), ORT once per case; {args.rounds} "
            f"rounds, variants alternating per case (order rotated per round); "
            f"{args.iters} passes at batch 1, {args.iters32} at batch 32, {args.warmup} warm-up")
    print(head, flush=True)
    ort_ms = {}
    for case in CASES:
        batch, threads, _, _ = case
        iters = args.iters if batch == 1 else args.iters32
        if sess is None:
            ort_ms[case] = float("nan")
            continue
        ort_ms[case] = time_ort(sess[threads], inputs[batch], iters, args.warmup)
        print(f"ORT batch {batch:>2}, {threads} thread(s): {ort_ms[case]:8.2f} ms", flush=True)
    ms = {(c, v): [] for c in CASES for v in variants}
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for case in CASES:
            batch, threads, _, _ = case
            iters = args.iters if batch == 1 else args.iters32
            line = f"round {rnd + 1}: batch {batch:>2}, {threads} thread(s):"
            for v in order:
                t, _ = time_bilstm(args.bilstm, batch, threads, iters, args.warmup, "", tiles=v)
                ms[(case, v)].append(t)
                line += f" {v} {t:.2f}"
            print(line, flush=True)
    lines = [head, "",
             "| variant (BILSTM_CPU_TILES) | case | ms (median) | min..max | vs first variant "
             "| bilstm/ORT time | bilstm/ORT windows/s | target | met |",
             "|---|---|---:|---|---:|---:|---:|---|---|"]
    for case in CASES:
        o = ort_ms[case]
        base = statistics.median(ms[(case, variants[0])])
        for v in variants:
            xs = ms[(case, v)]
            b = statistics.median(xs)
            label, target, met = verdict(case, o, b)
            lines.append(
                f"| {v.replace('+', ',')} | {label} | {b:.2f} | {min(xs):.2f}..{max(xs):.2f} "
                f"| {b / base:.3f} | {b / o:.3f} | {o / b:.2f} | {target} | {met} |")
    return lines


def verdict(case, ort, ours):
    """The table cells every report shares for `case` with ORT's and bilstm's median ms: the
    case's label, its target and whether bilstm meets it ("n/a" without an ORT figure)."""
    batch, threads, kind, goal = case
    label = f"batch {batch}, {threads} thread{'s' if threads > 1 else ''}"
    target = f"time <= {goal}x" if kind == "time" else f"windows/s >= {goal}x"
    if ort != ort:
        return label, target, "n/a"
    met = ours / ort <= goal if kind == "time" else ort / ours >= goal
    return label, target, "yes" if met else "NO"


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
    p.add_argument("--sweep-tiles", default="",
                   help="comma-separated BILSTM_CPU_TILES variants to time against each other "
                        "instead of --isa (tokens of one variant joined by '+', e.g. "
                        "default,p12x32,q256p+r8x32); the first is the reference")
    p.add_argument("--compare", metavar="PATH[,PATH...]",
                   help="more bilstm binaries (say, the previous commit's), each timed right "
                        "after the first for each ISA and case, on table rows of their own")
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
    for path in [args.bilstm] + [c.strip() for c in (args.compare or "").split(",") if c.strip()]:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            p.error(f"{path}: not an executable file (--bilstm / --compare)")
    if args.ort_path:
        sys.path.insert(0, os.path.abspath(args.ort_path))
    try:
        import onnxruntime as ort
    except ImportError as e:
        if not args.sweep_tiles:
            raise
        # The sweep compares bilstm's variants; ORT is only a reference.
        print(f"NOTE: onnxruntime does not load here ({e}); the sweep runs without ORT "
              f"figures", flush=True)
        ort = None

    if args.model:
        with open(args.model, "rb") as f:
            model_bytes = f.read()
        lstm_nodes = model_bytes.count(b"LSTM")
        lstm_nodes = f"{lstm_nodes} 'LSTM' strings in {os.path.basename(args.model)}"
    else:
        model_bytes, lstm_nodes = build_model()
        lstm_nodes = f"{lstm_nodes} LSTM nodes"
    isas = [i.strip() for i in args.isa.split(",") if i.strip()] or [""]
    sess = sessions(model_bytes) if ort else None
    rng = np.random.default_rng(2)
    inputs = {b: rng.standard_normal((b, FRAMES, FEATURES)).astype(np.float32)
              for b in sorted({b for b, _, _, _ in CASES})}

    if args.sweep_tiles:
        variants = [v.strip() for v in args.sweep_tiles.split(",") if v.strip()]
        lines = sweep_tiles(args, variants, sess, inputs, lstm_nodes,
                            ort.__version__ if ort else "not loaded")
        print()
        print("\n".join(lines[2:]))
        if args.out:
            with open(args.out, "w") as f:
                f.write("\n".join(lines) + "\n")
        return

    head = (f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
            f"{os.cpu_count()} logical CPUs ({simd_flags()}); onnxruntime {ort.__version__} "
            f"({lstm_nodes}, {FRAMES} frames); {args.rounds} rounds, alternating ORT / bilstm "
            f"per case; bilstm ISA: {', '.join(i or 'detected' for i in isas)}")
    print(head, flush=True)
    ort_ms = {c: [] for c in CASES}
    compared = [c.strip() for c in (args.compare or "").split(",") if c.strip()]
    binaries = [("", args.bilstm)] + [(c, c) for c in compared]
    rows = [(i, b) for i in isas for b, _ in binaries]
    our_ms = {(c, r): [] for c in CASES for r in rows}
    kernel = {}
    for rnd in range(args.rounds):
        for case in CASES:
            batch, threads, _, _ = case
            iters = args.iters if batch == 1 else args.iters32
            ort_ms[case].append(time_ort(sess[threads], inputs[batch], iters, args.warmup))
            line = (f"round {rnd + 1}: batch {batch:>2}, {threads} thread(s): ORT "
                    f"{ort_ms[case][-1]:8.2f} ms")
            for isa in isas:
                for tag, binary in binaries:
                    ms, kernel[(case, (isa, tag))] = time_bilstm(binary, batch, threads, iters,
                                                                 args.warmup, isa)
                    our_ms[(case, (isa, tag))].append(ms)
                    line += f", bilstm{' ' + tag if tag else ''} {isa or 'detected'} {ms:8.2f} ms"
            print(line, flush=True)

    lines = [head, "",
             "| case | bilstm ISA | ORT ms (median) | bilstm ms (median) | bilstm/ORT time "
             "| ORT windows/s | bilstm windows/s | bilstm/ORT windows/s | target | met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for case in CASES:
        batch = case[0]
        o = statistics.median(ort_ms[case])
        for row in rows:
            b = statistics.median(our_ms[(case, row)])
            label, target, met = verdict(case, o, b)
            name = kernel[(case, row)] + (f" (compared: {row[1]})" if row[1] else "")
            lines.append(
                f"| {label} | {name} | {o:.2f} | {b:.2f} | {b / o:.3f} "
                f"| {batch * 1e3 / o:.1f} | {batch * 1e3 / b:.1f} | {o / b:.2f} | {target} "
                f"| {met} |")
    print()
    print("\n".join(lines[2:]))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
