//! `bilstm._bilstm`: the Python extension module behind the `bilstm` package (python/bilstm/).
//!
//! One class, `Model`: a loaded stack (ONNX, safetensors, a PyTorch state dict, or the
//! built-in model) prepared on a backend ([`bilstm::Auto`]: `auto`, `cpu` or `cuda`), run on
//! float32 numpy arrays `[batch, frames, features]` with the GIL released. Errors keep the
//! command line's messages: `ValueError` / `TypeError` for the input, [`BilstmError`] for model
//! and device failures. The PyTorch drop-in (python/bilstm/torch.py) drives CUDA tensors through
//! `Model._forward_cuda`, which hands their device addresses to
//! [`bilstm_cuda::CudaBackend::forward_foreign`].

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use bilstm::owned::{BUILTIN_SCALE, BUILTIN_SEED, OwnedStack};
use bilstm::{Auto, Backend, BackendConfig, BackendError, ErrorKind, MathMode, StackShape};
use numpy::{
    PyArray3, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods, dtype as np_dtype,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

pyo3::create_exception!(
    bilstm,
    BilstmError,
    PyRuntimeError,
    "A model that cannot be loaded or a backend that failed (no usable GPU for backend='cuda', \
     a driver error, a lost partner block). The message is the command line's."
);

/// The backend asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// CUDA when usable, else the CPU (and the reason is kept).
    Auto,
    /// The CPU backend.
    Cpu,
    /// CUDA on the given GPU, no fallback.
    Cuda(usize),
}

/// Why a call failed before it became a Python exception (built with the GIL released).
enum Failure {
    /// The library's error: mapped by [`library_error`].
    Library(bilstm::Error),
    /// A backend or device problem found here (CUDA asked for and not used): `BilstmError`.
    Backend(String),
}

impl From<bilstm::Error> for Failure {
    fn from(e: bilstm::Error) -> Self {
        Failure::Library(e)
    }
}

impl From<bilstm::CoreError> for Failure {
    fn from(e: bilstm::CoreError) -> Self {
        Failure::Library(e.into())
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Library(e) => library_error(&e),
            Failure::Backend(msg) => BilstmError::new_err(msg),
        }
    }
}

/// A library error as Python sees it: model files and backends are [`BilstmError`], other
/// invalid input (a shape the library refuses) is `ValueError`.
fn library_error(e: &bilstm::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        bilstm::Error::Model(_) => BilstmError::new_err(msg),
        _ if e.kind() == ErrorKind::InvalidInput => PyValueError::new_err(msg),
        _ => BilstmError::new_err(msg),
    }
}

/// The backend and what it was last prepared for.
struct State {
    /// The backend (CUDA or CPU), prepared at construction for one window.
    backend: Auto,
    /// The batch of the last forward pass (the plan [`Model::plan`] reports).
    last_batch: usize,
}

/// A bilstm stack prepared on a backend.
///
/// `Model(path=None, *, backend="auto", math="fp32", device=0)` loads `path` (ONNX or
/// safetensors; None: the built-in model). `backend`: "auto" (CUDA when usable, else the CPU),
/// "cpu", or "cuda" (GPU `device`, no fallback). `math`: "fp32" or "tf32" (TF32 projections
/// where the plan allows, and with them cheaper gate activations and recurrent dots on the
/// GPU). `model(x)` runs float32 `[batch, frames, features]` and returns float32
/// `[batch, frames, 256]`, the GIL released. Raises `BilstmError` for a model or
/// backend that fails, `ValueError` / `TypeError` for bad arguments and inputs. Full
/// documentation: the stubs, python/bilstm/_bilstm.pyi.
#[pyclass(module = "bilstm", name = "Model", frozen)]
struct Model {
    /// The weights (kept to prepare again for other frame counts or larger batches).
    stack: OwnedStack,
    /// One line about the model.
    description: String,
    /// The backend asked for.
    choice: Choice,
    /// The arithmetic asked for.
    math: MathMode,
    /// The backend; locked with the GIL released, so a second thread waits without it.
    state: Mutex<State>,
}

/// Parses `backend=`.
fn parse_choice(backend: &str, device: usize) -> PyResult<Choice> {
    match backend {
        "auto" => Ok(Choice::Auto),
        "cpu" => Ok(Choice::Cpu),
        "cuda" => Ok(Choice::Cuda(device)),
        other => Err(PyValueError::new_err(format!(
            "backend must be 'auto', 'cpu' or 'cuda', got {other:?}"
        ))),
    }
}

/// Parses `math=`.
fn parse_math(math: &str) -> PyResult<MathMode> {
    match math {
        "fp32" => Ok(MathMode::Fp32),
        "tf32" => Ok(MathMode::Tf32),
        other => Err(PyValueError::new_err(format!(
            "math must be 'fp32' or 'tf32', got {other:?}"
        ))),
    }
}

/// The description of the built-in model (as `bilstm run` words it).
fn builtin_description(stack: &OwnedStack) -> String {
    let s = stack.shape;
    format!(
        "built-in model: {} layers, {} features, hidden {} per direction, seeded weights \
         U(-{BUILTIN_SCALE}, {BUILTIN_SCALE}) (seed {BUILTIN_SEED:#x}), not trained",
        s.layers, s.features, s.hidden
    )
}

/// Formats a shape as `[a, b, c]`, as the command line does.
fn dims(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl Model {
    /// Opens the backend and prepares it for one window of the stack's frames, so the
    /// selection (and any fallback) is known at construction.
    fn open(
        stack: OwnedStack,
        description: String,
        choice: Choice,
        math: MathMode,
    ) -> Result<Self, Failure> {
        let backend = match choice {
            Choice::Auto => Auto::new()?,
            Choice::Cpu => Auto::cpu(),
            Choice::Cuda(ordinal) => Auto::cuda_on(ordinal)?,
        };
        let model = Model {
            stack,
            description,
            choice,
            math,
            state: Mutex::new(State {
                backend,
                last_batch: 1,
            }),
        };
        {
            let mut state = model.lock();
            let frames = model.stack.shape.frames;
            model.ensure_prepared(&mut state, frames, 1)?;
        }
        Ok(model)
    }

    /// The state, even if a thread panicked while holding it (nothing here panics; the
    /// backend stays usable since every pass starts from its inputs).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Prepares the backend for `frames` frames and at least `batch` windows unless it
    /// already is (a larger batch, or other frames, prepares again; batches only grow).
    fn ensure_prepared(
        &self,
        state: &mut State,
        frames: usize,
        batch: usize,
    ) -> Result<(), Failure> {
        let shape = self.stack.shape.with_frames(frames);
        let max_batch = match state.backend.config() {
            Some(c) if c.shape == shape && c.math == self.math => {
                if c.max_batch >= batch {
                    return Ok(());
                }
                batch.max(c.max_batch)
            }
            _ => batch,
        }
        .max(1);
        let weights = self.stack.weights()?;
        state.backend.prepare(
            &weights,
            &BackendConfig {
                shape,
                max_batch,
                math: self.math,
            },
        )?;
        if matches!(self.choice, Choice::Cuda(_)) && state.backend.name() != "cuda" {
            return Err(Failure::Backend(format!(
                "backend='cuda' asked for, but {}",
                state.backend.selection().reason
            )));
        }
        Ok(())
    }

    /// Runs `input` (`batch` windows of `frames` frames) into `output` and, when given, the
    /// final states; prepares first when needed. Called with the GIL released.
    fn run(
        &self,
        input: &[f32],
        [batch, frames]: [usize; 2],
        output: &mut [f32],
        states: Option<(&mut [f32], &mut [f32])>,
    ) -> Result<(), Failure> {
        let mut state = self.lock();
        self.ensure_prepared(&mut state, frames, batch)?;
        state.last_batch = batch;
        match states {
            Some((h_n, c_n)) => state
                .backend
                .forward_with_state(input, batch, output, h_n, c_n)?,
            None => state.backend.forward(input, batch, output)?,
        }
        Ok(())
    }

    /// Checks a numpy input and returns its shape `[batch, frames]` and its values in C order
    /// (borrowed when C-contiguous, copied otherwise).
    fn check_input<'a>(
        &self,
        x: &'a Bound<'_, PyAny>,
    ) -> PyResult<(numpy::PyReadonlyArray3<'a, f32>, [usize; 2])> {
        let py = x.py();
        let features = self.stack.shape.features;
        let arr = x.cast::<PyUntypedArray>().map_err(|_| {
            let ty = x
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            PyTypeError::new_err(format!(
                "input: expected a numpy.ndarray of float32 [batch, frames, {features}], got {ty}"
            ))
        })?;
        let dtype = arr.dtype();
        if !dtype.is_equiv_to(&np_dtype::<f32>(py)) {
            let found = dtype
                .str()
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "?".into());
            return Err(PyTypeError::new_err(format!(
                "input: dtype {found} is not float32; convert with x.astype(np.float32) \
                 (bilstm does not cast silently)"
            )));
        }
        let shape = arr.shape().to_vec();
        if shape.len() != 3 {
            return Err(PyValueError::new_err(format!(
                "input: array of shape {} has rank {}, expected rank 3 [batch, frames, {features}]",
                dims(&shape),
                shape.len()
            )));
        }
        if shape[2] != features {
            return Err(PyValueError::new_err(format!(
                "input: array of shape {} has {} values per frame, the model takes {features}",
                dims(&shape),
                shape[2]
            )));
        }
        if shape[1] == 0 && shape[0] > 0 {
            return Err(PyValueError::new_err(format!(
                "input {} has no frames: a window needs at least one",
                dims(&shape)
            )));
        }
        let typed = arr.cast::<PyArray3<f32>>()?;
        let readonly = typed
            .try_readonly()
            .map_err(|e| PyValueError::new_err(format!("input: cannot be read now ({e})")))?;
        Ok((readonly, [shape[0], shape[1]]))
    }

    /// The whole pass from numpy: checks, output allocation, run with the GIL released.
    fn forward_numpy<'py>(
        &self,
        x: &Bound<'py, PyAny>,
        with_state: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = x.py();
        let (input, [batch, frames]) = self.check_input(x)?;
        let shape = self.stack.shape.with_frames(frames.max(1));
        let width = shape.output_width();
        let state_rows = 2 * shape.layers;
        let out = PyArray3::<f32>::zeros(py, [batch, frames, width], false);
        let h = PyArray3::<f32>::zeros(py, [state_rows, batch, shape.hidden], false);
        let c = PyArray3::<f32>::zeros(py, [state_rows, batch, shape.hidden], false);
        if batch > 0 {
            // In place only when C-contiguous (`as_slice` also accepts Fortran order, whose
            // memory order is not the stack's); otherwise one copy in logical (C) order.
            let borrowed = if input.is_c_contiguous() {
                input.as_slice().ok()
            } else {
                None
            };
            let data: Cow<'_, [f32]> = match borrowed {
                Some(slice) => Cow::Borrowed(slice),
                None => Cow::Owned(input.as_array().iter().copied().collect()),
            };
            let mut out_rw = out.readwrite();
            let mut h_rw = h.readwrite();
            let mut c_rw = c.readwrite();
            let out_slice = out_rw.as_slice_mut()?;
            let states = if with_state {
                Some((h_rw.as_slice_mut()?, c_rw.as_slice_mut()?))
            } else {
                None
            };
            py.detach(|| self.run(&data, [batch, frames], out_slice, states))?;
        }
        let items: Vec<Bound<'py, PyAny>> = if with_state {
            vec![out.into_any(), h.into_any(), c.into_any()]
        } else {
            vec![out.into_any()]
        };
        PyTuple::new(py, items)
    }

    /// Opens a model from safetensors bytes (a PyTorch state dict), GIL released.
    fn from_safetensors_in(
        py: Python<'_>,
        data: &[u8],
        choice: Choice,
        math: MathMode,
    ) -> PyResult<Self> {
        Ok(py.detach(|| -> Result<Self, Failure> {
            let loaded = bilstm::model::load_safetensors_bytes(data)?;
            Self::open(loaded.stack, loaded.description, choice, math)
        })?)
    }
}

/// A safetensors file (header and data) built from `(name, shape, values)` tensors, all F32.
fn safetensors_bytes(tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, shape, values) in tensors {
        let end = offset + values.len() * 4;
        header.insert(
            name.clone(),
            serde_json::json!({ "dtype": "F32", "shape": shape, "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    let mut json = serde_json::Value::Object(header).to_string().into_bytes();
    // The data that follows starts 8-byte aligned, as safetensors writers do.
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let mut bytes = Vec::with_capacity(8 + json.len() + offset);
    bytes.extend_from_slice(&(json.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&json);
    for (_, _, values) in tensors {
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    bytes
}

#[pymethods]
impl Model {
    /// Loads a model file (ONNX or safetensors), or the built-in model when `path` is None.
    #[new]
    #[pyo3(signature = (path=None, *, backend="auto", math="fp32", device=0))]
    fn new(
        py: Python<'_>,
        path: Option<PathBuf>,
        backend: &str,
        math: &str,
        device: usize,
    ) -> PyResult<Self> {
        let choice = parse_choice(backend, device)?;
        let math = parse_math(math)?;
        Ok(py.detach(|| -> Result<Self, Failure> {
            let (stack, description) = match path {
                Some(path) => {
                    let loaded = bilstm::model::load(&path)?;
                    (loaded.stack, loaded.description)
                }
                None => {
                    let stack = OwnedStack::builtin();
                    let description = builtin_description(&stack);
                    (stack, description)
                }
            };
            Self::open(stack, description, choice, math)
        })?)
    }

    /// A model from the bytes of a safetensors file holding an `nn.LSTM` state dict.
    #[staticmethod]
    #[pyo3(signature = (data, *, backend="auto", math="fp32", device=0))]
    fn from_safetensors_bytes(
        py: Python<'_>,
        data: &[u8],
        backend: &str,
        math: &str,
        device: usize,
    ) -> PyResult<Self> {
        let choice = parse_choice(backend, device)?;
        let math = parse_math(math)?;
        Self::from_safetensors_in(py, data, choice, math)
    }

    /// A model from a PyTorch `nn.LSTM` state dict of float32 numpy arrays.
    #[staticmethod]
    #[pyo3(signature = (weights, *, backend="auto", math="fp32", device=0))]
    fn from_torch_state(
        py: Python<'_>,
        weights: &Bound<'_, PyDict>,
        backend: &str,
        math: &str,
        device: usize,
    ) -> PyResult<Self> {
        let choice = parse_choice(backend, device)?;
        let math = parse_math(math)?;
        let mut tensors = Vec::with_capacity(weights.len());
        for (key, value) in weights.iter() {
            let name: String = key.extract().map_err(|_| {
                PyTypeError::new_err("weights: every key must be a str (a state dict name)")
            })?;
            let arr = value.cast::<PyUntypedArray>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "weights['{name}']: expected a numpy.ndarray of float32"
                ))
            })?;
            if !arr.dtype().is_equiv_to(&np_dtype::<f32>(py)) {
                let found = arr
                    .dtype()
                    .str()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|_| "?".into());
                return Err(PyTypeError::new_err(format!(
                    "weights['{name}']: dtype {found} is not float32; convert with \
                     .astype(np.float32)"
                )));
            }
            let typed = arr.cast::<PyArrayDyn<f32>>()?;
            let ro = typed.try_readonly().map_err(|e| {
                PyValueError::new_err(format!("weights['{name}']: cannot be read now ({e})"))
            })?;
            let shape = ro.shape().to_vec();
            let values: Vec<f32> = ro.as_array().iter().copied().collect();
            tensors.push((name, shape, values));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        let bytes = safetensors_bytes(&tensors);
        Self::from_safetensors_in(py, &bytes, choice, math)
    }

    /// Runs the stack: float32 `[batch, frames, features]` in, float32 `[batch, frames, 256]`
    /// out.
    fn forward<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let tuple = self.forward_numpy(x, false)?;
        tuple.get_item(0)
    }

    /// Same as [`Model::forward`].
    fn __call__<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.forward(x)
    }

    /// Runs the stack and returns `(output, h_n, c_n)`, the states `[layers * 2, batch, 128]`.
    fn forward_with_state<'py>(&self, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        self.forward_numpy(x, true)
    }

    /// `"cuda"` or `"cpu"`: the backend that runs.
    #[getter]
    fn backend(&self) -> &'static str {
        self.lock().backend.name()
    }

    /// Why that backend runs (the GPU, or why CUDA was not usable).
    #[getter]
    fn backend_reason(&self) -> String {
        self.lock().backend.selection().reason.clone()
    }

    /// The CUDA device ordinal the model runs on, None on the CPU.
    #[getter]
    fn device(&self) -> Option<usize> {
        self.lock()
            .backend
            .cuda_backend()
            .map(bilstm_cuda::CudaBackend::device_ordinal)
    }

    /// One line about the model (the file, its nodes or tensors, its shape).
    #[getter]
    fn description(&self) -> String {
        self.description.clone()
    }

    /// `"fp32"` or `"tf32"`.
    #[getter]
    fn math(&self) -> &'static str {
        match self.math {
            MathMode::Tf32 => "tf32",
            _ => "fp32",
        }
    }

    /// Input values per frame (60 for pyannote).
    #[getter]
    fn features(&self) -> usize {
        self.stack.shape.features
    }

    /// LSTM layers (4 for pyannote).
    #[getter]
    fn layers(&self) -> usize {
        self.stack.shape.layers
    }

    /// Hidden units per direction (128).
    #[getter]
    fn hidden(&self) -> usize {
        self.stack.shape.hidden
    }

    /// The CUDA plan of the last pass's batch (one line per decision), None on the CPU.
    #[getter]
    fn plan(&self) -> PyResult<Option<Vec<String>>> {
        let state = self.lock();
        let batch = state.last_batch;
        self.plan_lines(&state, batch)
    }

    /// The CUDA plan for `batch` windows, None on the CPU.
    fn plan_for(&self, batch: usize) -> PyResult<Option<Vec<String>>> {
        let state = self.lock();
        self.plan_lines(&state, batch)
    }

    fn __repr__(&self) -> String {
        let state = self.lock();
        format!(
            "bilstm.Model({}; backend {}; math {})",
            self.description,
            state.backend.selection(),
            self.math()
        )
    }

    /// The zero-copy CUDA pass of `bilstm.torch`: device addresses of float32 tensors on this
    /// model's GPU (`h_n` / `c_n` may be 0), ordered after the work queued on `stream` (a
    /// `CUstream` handle of this GPU, 0 for the legacy default stream). Private: the caller
    /// vouches for `stream` (python/bilstm/torch.py passes PyTorch's current stream).
    #[pyo3(signature = (input, output, h_n, c_n, batch, frames, stream))]
    #[allow(clippy::too_many_arguments)]
    fn _forward_cuda(
        &self,
        py: Python<'_>,
        input: u64,
        output: u64,
        h_n: u64,
        c_n: u64,
        batch: usize,
        frames: usize,
        stream: u64,
    ) -> PyResult<()> {
        if batch == 0 {
            return Ok(());
        }
        if frames == 0 {
            return Err(PyValueError::new_err(format!(
                "input {} has no frames: a window needs at least one",
                dims(&[batch, frames, self.stack.shape.features])
            )));
        }
        let bufs = bilstm_cuda::ForeignBuffers {
            input,
            output,
            h_n,
            c_n,
        };
        Ok(py.detach(|| -> Result<(), Failure> {
            let mut state = self.lock();
            self.ensure_prepared(&mut state, frames, batch)?;
            state.last_batch = batch;
            let Some(cuda) = state.backend.cuda_backend_mut() else {
                return Err(Failure::Backend(format!(
                    "CUDA tensors need the CUDA backend; this model runs on {}",
                    state.backend.selection()
                )));
            };
            // SAFETY: forward_foreign checks every address with the driver (device memory of
            // this GPU, long enough, input and output apart) before queuing work. What it
            // cannot check is `stream`: python/bilstm/torch.py passes
            // `torch.cuda.current_stream(device).cuda_stream` for the tensors' device, after
            // checking that device is this model's, so it is a live stream of this GPU's
            // primary context (PyTorch's); the tensors are held by the Python caller, which
            // is blocked in this call, until the pass has finished (forward_foreign returns
            // when it is done).
            unsafe { cuda.forward_foreign(&bufs, batch, stream) }
                .map_err(|e| Failure::Library(e.into()))
        })?)
    }
}

impl Model {
    /// The plan's lines for `batch` on CUDA, None on the CPU.
    fn plan_lines(&self, state: &State, batch: usize) -> PyResult<Option<Vec<String>>> {
        let Some(cuda) = state.backend.cuda_backend() else {
            return Ok(None);
        };
        let plan = cuda
            .plan(batch.max(1))
            .map_err(|e| library_error(&e.into()))?;
        Ok(Some(plan.explain().iter().map(|l| l.to_string()).collect()))
    }
}

/// The module: `Model`, `BilstmError` and the library's version.
#[pymodule]
fn _bilstm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add("BilstmError", m.py().get_type::<BilstmError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "PYANNOTE_SHAPE",
        (
            StackShape::pyannote().features,
            StackShape::pyannote().hidden,
            StackShape::pyannote().layers,
        ),
    )?;
    Ok(())
}
