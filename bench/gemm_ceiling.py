#!/usr/bin/env python3
"""What the GPU can do for one layer's input projection, measured with the machine's PyTorch.

The projection of a layer is a GEMM: rows = batch * frames activations of width K (64 for
layer 0, the 60 inputs padded; 256 for layers 1-3) times the 1,024 x K input weights of both
directions, 1,024 FP32 outputs a row. This script times, with CUDA events (warm-up, medians of
`--iters`, random inputs), for each batch:
  write   out.fill_(x): writing the projection's output bytes alone (the DRAM write ceiling)
  copy    out.copy_(src): reading and writing that many bytes
  tf32    torch.mm with TF32 allowed (cuBLAS): the layer's projection by the vendor library
  fp32    torch.mm in FP32 (cuBLAS SGEMM)
and prints one JSON line per (batch, K, case) with ms and GB/s or TFLOP/s, so the projection
kernels' phase times (`bench --phases`) can be set against them.

    python3 bench/gemm_ceiling.py --batches 256,1024 --iters 20
"""
import argparse
import json

import torch

FRAMES = 589
GATES = 1024


def time_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="256,1024")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(7)
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    for batch in [int(b) for b in args.batches.split(",")]:
        rows = batch * FRAMES
        out = torch.empty(rows, GATES, device=dev)
        src = torch.randn(rows, GATES, device=dev)
        nbytes = out.numel() * 4
        ms = time_ms(lambda: out.fill_(0.5), args.iters)
        print(json.dumps({"batch": batch, "case": "write", "ms": round(ms, 4), "GB/s": round(nbytes / ms / 1e6, 1)}))
        ms = time_ms(lambda: out.copy_(src), args.iters)
        print(json.dumps({"batch": batch, "case": "copy", "ms": round(ms, 4), "GB/s": round(2 * nbytes / ms / 1e6, 1)}))
        del src
        for k in (64, 256):
            a = torch.randn(rows, k, device=dev)
            w = torch.randn(k, GATES, device=dev) * 0.1
            flops = 2.0 * rows * k * GATES
            for mode in ("tf32", "fp32"):
                torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
                ms = time_ms(lambda: torch.mm(a, w, out=out), args.iters)
                print(json.dumps({"batch": batch, "K": k, "case": mode, "ms": round(ms, 4),
                                  "TFLOP/s": round(flops / ms / 1e9, 1), "out GB/s": round(nbytes / ms / 1e6, 1)}))
            del a, w
        del out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
