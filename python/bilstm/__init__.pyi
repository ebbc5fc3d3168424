from ._bilstm import BilstmError as BilstmError
from ._bilstm import Model as Model
from ._bilstm import __version__ as __version__

__all__ = ["BilstmError", "Model", "__version__"]
