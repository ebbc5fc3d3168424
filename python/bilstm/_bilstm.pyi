"""Type stubs of the extension module ``bilstm._bilstm`` (re-exported by ``bilstm``)."""

from os import PathLike
from typing import Dict, List, Literal, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
PYANNOTE_SHAPE: Tuple[int, int, int]
"""``(features, hidden, layers)`` of pyannote's stack: ``(60, 128, 4)``."""

Backend = Literal["auto", "cpu", "cuda"]
Math = Literal["fp32", "tf32"]

class BilstmError(RuntimeError):
    """A model that cannot be loaded, or a backend that failed (``backend="cuda"`` without a
    usable GPU, a driver error, a lost partner block). The message is the command line's."""

class Model:
    """A bilstm stack prepared on a backend.

    ``Model(path=None, *, backend="auto", math="fp32", device=0)`` loads ``path``: an ONNX
    export of the LSTM stack (``.onnx``) or a PyTorch state dict in safetensors
    (``.safetensors``); without a path, the built-in model (pyannote's shape, seeded weights,
    not trained). ``backend="auto"`` runs CUDA when a driver, a GPU and NVRTC are usable, else
    the CPU (:attr:`backend_reason` says why); ``"cuda"`` is CUDA on GPU ``device`` or a
    :class:`BilstmError`; ``"cpu"`` the CPU backend. ``math="tf32"`` allows TF32 tensor-core
    input projections where the plan does, and with them the GPU recurrences' cheaper gate
    activations and 8-chain recurrent dot (errors far below TF32's; the CPU runs FP32).

    Calls are thread-safe: passes on one model run one at a time, each with the GIL released.

    Raises:
        BilstmError: the model cannot be loaded (the message names the file and what is
            wrong), or the backend cannot be opened or prepared.
        ValueError: an unknown ``backend`` or ``math``.
    """

    def __init__(
        self,
        path: Union[str, "PathLike[str]", None] = None,
        *,
        backend: Backend = "auto",
        math: Math = "fp32",
        device: int = 0,
    ) -> None: ...
    @staticmethod
    def from_safetensors_bytes(
        data: bytes, *, backend: Backend = "auto", math: Math = "fp32", device: int = 0
    ) -> "Model":
        """A model from the bytes of a safetensors file holding an ``nn.LSTM`` state dict
        (PyTorch names under any prefix)."""
    @staticmethod
    def from_torch_state(
        weights: Dict[str, npt.NDArray[np.float32]],
        *,
        backend: Backend = "auto",
        math: Math = "fp32",
        device: int = 0,
    ) -> "Model":
        """A model from an ``nn.LSTM`` state dict as float32 numpy arrays:
        ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, each also
        with ``_reverse``, under any common prefix (``lstm.`` for pyannote), e.g.
        ``{k: v.detach().cpu().numpy() for k, v in lstm.state_dict().items()}``. Other
        entries are ignored.

        Raises:
            TypeError: a value that is not a float32 numpy array, a key that is not a str.
            BilstmError: names, shapes or values that do not describe a stack bilstm runs.
        """
    def forward(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Runs the stack on float32 ``x`` ``[batch, frames, features]`` (any strides; a
        C-contiguous array is read in place) and returns a new float32 C-contiguous
        ``[batch, frames, 256]`` array (columns 0..127 forward, 128..255 reverse). The GIL is
        released while it runs; ``x`` must not be written meanwhile.

        Raises:
            TypeError: ``x`` is not a numpy array or not float32 (no silent cast).
            ValueError: ``x`` is not rank 3, has the wrong width, or windows of no frames.
            BilstmError: the backend failed.
        """
    def __call__(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Same as :meth:`forward`."""
    def forward_with_state(
        self, x: npt.NDArray[np.float32]
    ) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """As :meth:`forward`, and also the final hidden and cell states: returns
        ``(output, h_n, c_n)``, ``h_n`` and ``c_n`` float32 ``[layers * 2, batch, 128]``,
        row ``2 * layer + direction`` (``nn.LSTM``'s layout)."""
    def plan_for(self, batch: int) -> Optional[List[str]]:
        """The CUDA plan for ``batch`` windows at the prepared frame count, one line per
        decision (``"recurrence: ..."``); None on the CPU."""
    @property
    def backend(self) -> Literal["cpu", "cuda"]:
        """The backend that runs."""
    @property
    def backend_reason(self) -> str:
        """Why it runs: the GPU (``"NVIDIA H200 (device 0, ...)"``), ``"asked for the CPU"``,
        or why CUDA was not usable."""
    @property
    def device(self) -> Optional[int]:
        """The CUDA device ordinal, None on the CPU."""
    @property
    def description(self) -> str:
        """One line about the model (file, nodes or tensors, shape)."""
    @property
    def math(self) -> Math:
        """The arithmetic asked for."""
    @property
    def features(self) -> int:
        """Input values per frame (60 for pyannote)."""
    @property
    def layers(self) -> int:
        """LSTM layers (4 for pyannote)."""
    @property
    def hidden(self) -> int:
        """Hidden units per direction (128)."""
    @property
    def plan(self) -> Optional[List[str]]:
        """The CUDA plan of the last pass's batch (batch 1 before any pass), one line per
        decision; None on the CPU."""
    def _forward_cuda(
        self,
        input: int,
        output: int,
        h_n: int,
        c_n: int,
        batch: int,
        frames: int,
        stream: int,
    ) -> None:
        """Private (used by :mod:`bilstm.torch`): the pass on device addresses of this GPU,
        ordered after the work queued on ``stream``."""
