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
--backend cpu` (and `--backend cuda`), and compare any output with the reference using
ort-check.py's comparison (numpy only; 1e-5 is the CPU budget of bilstm_core::accuracy):

  python3 scripts/ort-check.py compare OUT/y_bilstm_cpu.npy OUT/y_f64.npy --max 1e-5

Usage:
  torch-export-check.py OUT [--batch 2] [--frames 589] [--seed 7] [--layers 4]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--frames", type=int, default=589)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    make(a.out, a.batch, a.frames, a.seed, a.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
