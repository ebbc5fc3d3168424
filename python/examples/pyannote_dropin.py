"""Swap bilstm into a PyanNet-shaped model (pyannote's segmentation network after SincNet:
nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True), then linear layers),
compare the outputs and time both. No pyannote needed.

    python python/examples/pyannote_dropin.py [--batch 32] [--device cuda] [--reps 20]
"""

import argparse
import copy
import time

import torch
from torch import nn

import bilstm.torch


class PyanNetLike(nn.Module):
    """What pyannote's PyanNet runs after SincNet, with its attribute names."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True)
        self.linear = nn.ModuleList([nn.Linear(256, 128), nn.Linear(128, 128)])
        self.classifier = nn.Linear(128, 7)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.lstm(features)  # exactly pyannote's call
        for linear in self.linear:
            outputs = nn.functional.leaky_relu(linear(outputs))
        return torch.log_softmax(self.classifier(outputs), dim=-1)


def time_ms(model: nn.Module, x: torch.Tensor, reps: int) -> float:
    """Median milliseconds per forward pass."""
    times = []
    with torch.inference_mode():
        for i in range(reps + 3):
            if x.is_cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(x)
            if x.is_cuda:
                torch.cuda.synchronize()
            if i >= 3:
                times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--frames", type=int, default=589)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    reference = PyanNetLike().eval().to(args.device)
    swapped = copy.deepcopy(reference)
    bilstm.torch.replace_lstm(swapped)  # swapped.lstm is now bilstm, on the same device
    print(f"bilstm: {swapped.lstm.model.backend} ({swapped.lstm.model.backend_reason})")

    x = torch.randn(args.batch, args.frames, 60, device=args.device)
    with torch.inference_mode():
        want, got = reference(x), swapped(x)
        lstm_want, _ = reference.lstm(x)
        lstm_got, _ = swapped.lstm(x)
    print(f"max |difference|: LSTM output {(lstm_got - lstm_want).abs().max().item():.3e}, "
          f"model output {(got - want).abs().max().item():.3e}")

    theirs = time_ms(reference, x, args.reps)
    ours = time_ms(swapped, x, args.reps)
    print(f"batch {args.batch} x {args.frames} frames on {args.device}: nn.LSTM model "
          f"{theirs:.3f} ms, bilstm model {ours:.3f} ms, speed-up {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
