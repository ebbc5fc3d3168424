"""A drop-in for pyannote's ``nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True)``.

Importing this module imports torch (``import bilstm`` alone does not).

    >>> import bilstm.torch
    >>> bilstm.torch.replace_lstm(model)          # pyannote's PyanNet: swaps model.lstm in place
    >>> output, (h_n, c_n) = model.lstm(x)       # as nn.LSTM returns

:func:`from_lstm` reads an ``nn.LSTM``'s weights into a :class:`BilstmLSTM`, an inference-only
``nn.Module`` whose ``forward(x)`` returns ``(output, (h_n, c_n))`` like ``nn.LSTM``:

* CUDA tensors on the model's GPU are used in place: the kernels read ``x`` and write outputs
  allocated with ``torch.empty`` on that device, by address, after the work queued on
  PyTorch's current stream (no host copy; the call returns when the pass is done).
* CPU tensors go through the numpy API (no copy for a contiguous float32 tensor).
* A tensor on another device, not float32, not ``[batch, frames, 60]``, or requiring grad is an
  error (``RuntimeError``, ``TypeError``, ``ValueError``) with a message saying what to do.
  Initial states ``(h_0, c_0)`` other than zeros are refused: bilstm starts from zeros, as
  pyannote does.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import nn

from ._bilstm import Model

__all__ = ["BilstmLSTM", "from_lstm", "replace_lstm", "lstm_state"]

#: The one ``nn.LSTM`` configuration bilstm runs: pyannote's segmentation stack.
EXPECTED = dict(
    input_size=60,
    hidden_size=128,
    num_layers=4,
    bidirectional=True,
    batch_first=True,
    proj_size=0,
)


def _check_lstm(lstm: Any) -> None:
    if not isinstance(lstm, nn.LSTM):
        raise TypeError(f"expected a torch.nn.LSTM, got {type(lstm).__name__}")
    wrong = [
        f"{name}={getattr(lstm, name, None)!r} (bilstm runs {want!r})"
        for name, want in EXPECTED.items()
        if getattr(lstm, name, want) != want
    ]
    if wrong:
        raise ValueError(
            "bilstm runs nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True) "
            "only; this one has " + ", ".join(wrong)
        )


def lstm_state(lstm: "nn.LSTM") -> dict:
    """The ``nn.LSTM``'s state dict as float32 numpy arrays (copies on the host).

    Raises:
        TypeError: a parameter that is not float32 (convert the module with ``.float()``).
    """
    state = {}
    for name, tensor in lstm.state_dict().items():
        if tensor.dtype != torch.float32:
            raise TypeError(
                f"nn.LSTM parameter {name} is {tensor.dtype}, bilstm takes float32 weights: "
                "convert with lstm.float()"
            )
        state[name] = tensor.detach().cpu().numpy()
    return state


class BilstmLSTM(nn.Module):
    """An inference-only stand-in for pyannote's ``nn.LSTM``, running on bilstm.

    Build it with :func:`from_lstm`. ``forward(x)`` takes float32 ``[batch, frames, 60]`` on
    the CPU or on the model's GPU and returns ``(output, (h_n, c_n))``: ``output``
    ``[batch, frames, 256]``, ``h_n`` and ``c_n`` ``[8, batch, 128]`` (row ``2 * layer +
    direction``), on the input's device. It holds no parameters (the weights live in
    bilstm's backend), so ``.to()`` / ``.cuda()`` do not move it: build it for the device it
    will run on.
    """

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model
        # What nn.LSTM exposes and callers read.
        self.input_size = model.features
        self.hidden_size = model.hidden
        self.num_layers = model.layers
        self.bidirectional = True
        self.batch_first = True
        self.proj_size = 0

    def extra_repr(self) -> str:
        where = f"cuda:{self.model.device}" if self.model.device is not None else "cpu"
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
            f"bidirectional=True, batch_first=True, bilstm backend={where}, "
            f"math={self.model.math}"
        )

    def _check(self, x: Any, hx: Optional[Tuple[Any, Any]]) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype != torch.float32:
            raise TypeError(
                f"input is {x.dtype}, bilstm takes float32 (no silent cast): use x.float()"
            )
        if x.dim() != 3 or x.shape[2] != self.input_size:
            raise ValueError(
                f"input of shape {list(x.shape)}: expected [batch, frames, {self.input_size}] "
                "(batch_first=True)"
            )
        if x.requires_grad:
            raise RuntimeError(
                "input requires grad: bilstm runs inference only; call it under "
                "torch.no_grad() or torch.inference_mode(), or pass x.detach()"
            )
        if hx is not None:
            h0, c0 = hx
            if bool(torch.any(h0 != 0)) or bool(torch.any(c0 != 0)):
                raise ValueError(
                    "initial states (h_0, c_0) other than zeros are not supported: bilstm "
                    "starts every window from zero states"
                )

    def forward(
        self, x: torch.Tensor, hx: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Runs the stack; returns ``(output, (h_n, c_n))`` like ``nn.LSTM``."""
        self._check(x, hx)
        if x.device.type == "cuda":
            return self._forward_cuda(x)
        if x.device.type != "cpu":
            raise RuntimeError(
                f"input on {x.device}: bilstm runs CPU tensors and CUDA tensors only"
            )
        out, h_n, c_n = self.model.forward_with_state(x.detach().numpy())
        return torch.from_numpy(out), (torch.from_numpy(h_n), torch.from_numpy(c_n))

    def _forward_cuda(
        self, x: torch.Tensor
    ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        ordinal = self.model.device
        if ordinal is None:
            raise RuntimeError(
                f"input on {x.device}, but this bilstm model runs on the CPU "
                f"({self.model.backend_reason}); move the input with x.cpu() or build the "
                "model with backend='cuda'"
            )
        if x.device.index != ordinal:
            raise RuntimeError(
                f"input on {x.device}, but this bilstm model runs on cuda:{ordinal}; move the "
                f"input with x.to('cuda:{ordinal}') or build the model with device={x.device.index}"
            )
        x = x.detach().contiguous()  # a device-side copy only when x is strided
        batch, frames, _ = x.shape
        layers, hidden = self.num_layers, self.hidden_size
        opts = dict(device=x.device, dtype=torch.float32)
        out = torch.empty((batch, frames, 2 * hidden), **opts)
        h_n = torch.empty((2 * layers, batch, hidden), **opts)
        c_n = torch.empty((2 * layers, batch, hidden), **opts)
        if batch == 0:
            return out, (h_n, c_n)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        self.model._forward_cuda(
            x.data_ptr(),
            out.data_ptr(),
            h_n.data_ptr(),
            c_n.data_ptr(),
            batch,
            frames,
            stream,
        )
        return out, (h_n, c_n)


def from_lstm(
    lstm: "nn.LSTM",
    *,
    backend: Optional[str] = None,
    math: str = "fp32",
    device: Optional[int] = None,
) -> BilstmLSTM:
    """A :class:`BilstmLSTM` with ``lstm``'s weights.

    ``lstm`` must be ``nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True)``
    with float32 parameters. By default the model runs where ``lstm`` lives: parameters on
    ``cuda:N`` give ``backend="cuda"`` on GPU N, parameters on the CPU give ``backend="auto"``
    (CUDA on GPU 0 when usable). ``backend`` / ``device`` override that; ``math="tf32"``
    allows TF32 projections.

    Raises:
        TypeError: not an ``nn.LSTM``, or parameters that are not float32.
        ValueError: any other shape or option (``proj_size``, ``batch_first=False``, ...).
        bilstm.BilstmError: the backend cannot be opened (``backend="cuda"`` with no GPU).
    """
    _check_lstm(lstm)
    params = list(lstm.parameters())
    where = params[0].device if params else torch.device("cpu")
    if backend is None:
        backend = "cuda" if where.type == "cuda" else "auto"
    if device is None:
        device = where.index if where.type == "cuda" and where.index is not None else 0
    model = Model.from_torch_state(
        lstm_state(lstm), backend=backend, math=math, device=device
    )
    return BilstmLSTM(model)


def replace_lstm(model: nn.Module, attr: str = "lstm", **kwargs: Any) -> BilstmLSTM:
    """Swaps ``model.<attr>`` (pyannote's PyanNet keeps its stack in ``model.lstm``) for a
    :class:`BilstmLSTM` built by :func:`from_lstm` (``kwargs`` go to it), in place; returns it.

    Raises:
        AttributeError: ``model`` has no such attribute.
        TypeError, ValueError: as :func:`from_lstm`.
    """
    lstm = getattr(model, attr)
    replacement = from_lstm(lstm, **kwargs)
    setattr(model, attr, replacement)
    return replacement

