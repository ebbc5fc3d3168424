"""bilstm: pyannote's 4-layer bidirectional LSTM stack, fast and bit-reproducible, from Python.

The stack (input 60, hidden 128 per direction, 4 layers, pyannote's 589-frame windows) runs on
NVIDIA GPUs through bilstm's CUDA kernels and on any host through its CPU backend.

    >>> import numpy as np, bilstm
    >>> model = bilstm.Model()                      # built-in model; or Model("seg.onnx")
    >>> y = model(np.zeros((2, 589, 60), np.float32))
    >>> y.shape, y.dtype
    ((2, 589, 256), dtype('float32'))

* :class:`Model` loads ONNX, safetensors or the built-in model, or takes a PyTorch state dict
  (:meth:`Model.from_torch_state`); runs float32 numpy ``[batch, frames, 60]`` arrays with the
  GIL released and returns float32 ``[batch, frames, 256]`` (and the final states with
  :meth:`Model.forward_with_state`).
* :mod:`bilstm.torch` (imports torch when imported) is a drop-in for ``nn.LSTM``:
  ``bilstm.torch.replace_lstm(pyannote_model)``.
* :class:`BilstmError` is raised for models that cannot be loaded and backend or device
  failures; bad inputs raise ``ValueError`` / ``TypeError``.
"""

from ._bilstm import BilstmError, Model, __version__

__all__ = ["BilstmError", "Model", "__version__"]
