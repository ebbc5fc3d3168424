#!/usr/bin/env python3
"""A real `torch.onnx.export` of pyannote's LSTM stack, checked against PyTorch itself.

Needs PyTorch and numpy (the GPU machine has both; this development machine cannot install
PyTorch). Not part of CI. pyannote's segmentation-3.0 runs `nn.LSTM(60, 128, num_layers=4,
bidirectional=True, batch_first=True)` between its SincNet front end and its linear layers;
this script builds that module (or one with fewer layers) with seeded weights, puts a linear layer after it (so the
exported graph holds other operators too, as pyannote's does), and writes:

  OUT/model.onnx     torch.onnx.export(..., opset_version=17, dynamo=False): the TorchScript
                     exporter, one LSTM node per layer (what the README tells users to run)
  OUT/x.npy          standard-normal float32 input [batch, frames, 60]
  OUT/y_f64.npy      the LSTM stack's output [batch, frames, 256] computed by PyTorch in float64
                     on the CPU (the reference)
  OUT/y_torch32.npy  the same in float32 on the CPU
  OUT/y_cudnn.npy    the same in float32 through cuDNN, when a GPU is present

Then `bilstm run --model OUT/model.onnx --input OUT/x.npy --output OUT/y_bilstm_cpu.npy
--backend cpu` (and `--backend cuda`) and

  python3 scripts/torch-export-check.py compare OUT/y_bilstm_cpu.npy OUT/y_f64.npy

prints the relative L2 error (float64) and the largest absolute difference, and exits 1 above
--max (default 1e-5, the CPU budget of bilstm_core::accuracy).

Usage:
  torch-export-check.py make OUT [--batch 2] [--frames 589] [--seed 7] [--layers 4]
  torch-export-check.py compare GOT.npy WANT.npy [--max 1e-5]
"""

import argparse
import os
import sys

import numpy as np


def make(out, batch, frames, seed, layers):
    import torch

    torch.manual_seed(seed)

    class Stack(torch.nn.Module):
        """pyannote's LSTM stack followed by a linear layer (as in PyanNet)."""

        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(
                60, 128, num_layers=layers, bidirectional=True, batch_first=True,
                dropout=0.5 if layers > 1 else 0.0,
            )
            self.linear = torch.nn.Linear(256, 128)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.linear(y)

    model = Stack().eval()
    os.makedirs(out, exist_ok=True)
    x = torch.randn(batch, frames, 60)
    np.save(os.path.join(out, "x.npy"), x.numpy().astype(np.float32))
    path = os.path.join(out, "model.onnx")
    torch.onnx.export(
        model,
        x,
        path,
        input_names=["features"],
        output_names=["scores"],
        dynamic_axes={"features": {0: "batch"}, "scores": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    print(f"torch {torch.__version__}: exported {path} ({os.path.getsize(path)} bytes)")
    with torch.no_grad():
        y64, _ = model.lstm.double()(x.double())
        np.save(os.path.join(out, "y_f64.npy"), y64.numpy())
        y32, _ = model.lstm.float()(x)
        np.save(os.path.join(out, "y_torch32.npy"), y32.numpy())
        if torch.cuda.is_available():
            lstm = model.lstm.cuda()
            yg, _ = lstm(x.cuda())
            np.save(os.path.join(out, "y_cudnn.npy"), yg.cpu().numpy())
            print(f"cuDNN {torch.backends.cudnn.version()} on {torch.cuda.get_device_name(0)}")
    for name in ["y_torch32", "y_cudnn"]:
        p = os.path.join(out, name + ".npy")
        if os.path.exists(p):
            report(name, np.load(p), y64.numpy())


def report(name, got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        print(f"{name}: shape {got.shape} != {want.shape}")
        return float("inf")
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"{name}: relative L2 {rel:.3e}, max |diff| {np.max(np.abs(got - want)):.3e}")
    return rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--batch", type=int, default=2)
    m.add_argument("--frames", type=int, default=589)
    m.add_argument("--seed", type=int, default=7)
    m.add_argument("--layers", type=int, default=4)
    c = sub.add_parser("compare")
    c.add_argument("got")
    c.add_argument("want")
    c.add_argument("--max", type=float, default=1e-5)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.out, a.batch, a.frames, a.seed, a.layers)
        return 0
    rel = report(os.path.basename(a.got), np.load(a.got), np.load(a.want))
    return 0 if rel <= a.max else 1


if __name__ == "__main__":
    sys.exit(main())
