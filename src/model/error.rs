//! [`ModelError`]: why a model file could not be loaded.

use std::fmt;
use std::path::PathBuf;

use bilstm_core::layout::Tensor;
use bilstm_core::{BackendError, ErrorKind};

/// Which ONNX `LSTM` node an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// Position among the graph's `LSTM` nodes, in graph order: the stack layer it becomes.
    pub layer: usize,
    /// Position among all the graph's nodes.
    pub graph_index: usize,
    /// The node's `name` (may be empty).
    pub name: String,
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.is_empty() {
            write!(
                f,
                "unnamed LSTM node (layer {}, graph node {})",
                self.layer, self.graph_index
            )
        } else {
            let name = crate::npy::shorten(&self.name);
            write!(f, "LSTM node \"{name}\" (layer {})", self.layer)
        }
    }
}

/// What is wrong with one of an ONNX `LSTM` node's weight tensors (see [`ModelError::Tensor`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TensorProblem {
    /// No initializer and no `Constant` node has that name, and no node computes it.
    #[error("no initializer or Constant node of that name")]
    Missing,
    /// Another node computes the tensor; bilstm reads stored weights only.
    #[error(
        "computed by {op_type} node \"{node}\", not stored as an initializer \
         (export with constant folding)"
    )]
    Computed {
        /// The producing node's operator.
        op_type: String,
        /// The producing node's name.
        node: String,
    },
    /// An element type other than FLOAT.
    #[error("data_type {} ({found}); bilstm reads FLOAT (1) only", data_type_name(*found))]
    DataType {
        /// The `data_type` found.
        found: i32,
    },
    /// The dims differ from what the node needs.
    #[error("dims {found:?}, expected {expected}")]
    Dims {
        /// The dims required, as text (`"[2, 512, 128]"`, `"[2, 512, features]"`).
        expected: String,
        /// The dims found.
        found: Vec<i64>,
    },
    /// Layer `layer`'s input width is not the previous layer's output width.
    #[error(
        "input width {found}, but layer {} outputs {expected} values per frame: \
         the LSTM widths do not chain", layer - 1
    )]
    Width {
        /// The layer (at least 1).
        layer: usize,
        /// The width required: `2 * hidden`.
        expected: i64,
        /// The width found in `W`'s dims.
        found: i64,
    },
    /// `float_data` holds the wrong number of values.
    #[error("float_data holds {found} values, dims need {expected}")]
    ValueCount {
        /// Values the dims need.
        expected: usize,
        /// Values found.
        found: usize,
    },
    /// `raw_data` or the external data holds the wrong number of bytes.
    #[error("{field} holds {found} bytes, dims need {expected} (4 per f32)")]
    ByteCount {
        /// `"raw_data"` or `"external data"`.
        field: &'static str,
        /// Bytes the dims need.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// More than one of `raw_data`, `float_data` and external data is set: refused rather
    /// than guessing which one holds the values.
    #[error("sets more than one of raw_data, float_data and external data")]
    SeveralSources,
    /// Neither `raw_data`, `float_data` nor external data holds the values.
    #[error("holds no data (no raw_data, float_data or external data)")]
    NoData,
    /// A weight is NaN or infinite.
    #[error("value {index} is not finite ({value})")]
    NonFinite {
        /// Index in the whole tensor, row-major.
        index: usize,
        /// The value.
        value: f32,
    },
    /// External data, but the model was given as bytes without a directory.
    #[error("stored as external data, but no model directory was given to find it in")]
    ExternalNoBaseDir,
    /// External data without a `location` key.
    #[error("external data has no \"location\"")]
    ExternalNoLocation,
    /// An `offset` or `length` that is not a non-negative integer.
    #[error("external data key \"{key}\" = \"{value}\" is not a byte count")]
    ExternalKey {
        /// The key.
        key: String,
        /// Its value.
        value: String,
    },
    /// A `location` that is absolute or climbs out of the model's directory.
    #[error(
        "external data location \"{location}\" leaves the model's directory \
         (absolute or with \"..\"): refused"
    )]
    ExternalEscapes {
        /// The location as written in the model.
        location: String,
    },
    /// The external-data file could not be read.
    #[error("cannot read external data {}: {source}", path.display())]
    ExternalIo {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `offset + length` lies past the end of the external-data file.
    #[error(
        "external data {}: bytes {offset}..{end} asked for, the file holds {file_bytes}",
        path.display()
    )]
    ExternalRange {
        /// The file.
        path: PathBuf,
        /// First byte asked for.
        offset: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The file's length.
        file_bytes: u64,
    },
}

/// The name of an ONNX `TensorProto.DataType` value, for messages.
fn data_type_name(data_type: i32) -> &'static str {
    match data_type {
        0 => "UNDEFINED",
        1 => "FLOAT",
        2 => "UINT8",
        3 => "INT8",
        4 => "UINT16",
        5 => "INT16",
        6 => "INT32",
        7 => "INT64",
        8 => "STRING",
        9 => "BOOL",
        10 => "FLOAT16",
        11 => "DOUBLE",
        12 => "UINT32",
        13 => "UINT64",
        14 => "COMPLEX64",
        15 => "COMPLEX128",
        16 => "BFLOAT16",
        _ => "unknown",
    }
}

/// Why a model could not be loaded. Every message names the file, node, attribute or tensor
/// at fault; [`ModelError::kind`] says whether the model is malformed
/// ([`ErrorKind::InvalidInput`]) or well-formed but outside what bilstm runs
/// ([`ErrorKind::Unsupported`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The model file could not be read (missing, unreadable).
    #[error("cannot read model {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Neither the extension nor the first bytes say ONNX or safetensors.
    #[error(
        "{}: unknown model format (the name ends neither in .onnx nor in .safetensors, \
         and the first bytes match neither format)", path.display()
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The model's format is not compiled into this build (its cargo feature is off).
    #[error("{origin}: this build of bilstm reads no such models (the `{feature}` feature is off)")]
    NotBuilt {
        /// The file's path, or the bytes' label.
        origin: String,
        /// The cargo feature that reads the format (`"onnx"`, `"safetensors"`).
        feature: &'static str,
    },
    /// The bytes are not a valid ONNX protobuf (truncated or corrupt).
    #[cfg(feature = "onnx")]
    #[error("{origin}: not a valid ONNX model (truncated or corrupt protobuf): {source}")]
    Decode {
        /// The file's path, or `"ONNX bytes"`.
        origin: String,
        /// prost's decode error.
        source: prost::DecodeError,
    },
    /// The ONNX model has no graph.
    #[error("{origin}: the ONNX model has no graph")]
    NoGraph {
        /// The file's path, or `"ONNX bytes"`.
        origin: String,
    },
    /// The ONNX graph has no `LSTM` node.
    #[error("{origin}: the ONNX graph has no LSTM node (op_type \"LSTM\", default domain)")]
    NoLstm {
        /// The file's path, or `"ONNX bytes"`.
        origin: String,
    },
    /// The graph names one value twice (two initializers of one name, two node outputs of one
    /// name, or one `LSTM` node's inputs twice): ONNX graphs name each value once.
    #[error("{origin}: {what} \"{name}\" appears twice; refused (ONNX names each value once)")]
    Duplicate {
        /// The file's path, or `"ONNX bytes"`.
        origin: String,
        /// What is duplicated.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// More layers than bilstm runs.
    #[error("{found} LSTM layers found; bilstm runs stacks of 1 to {max}")]
    LayerCount {
        /// Layers found.
        found: usize,
        /// The most bilstm runs ([`bilstm_core::shape::MAX_LAYERS`]).
        max: usize,
    },
    /// An `LSTM` attribute with a value bilstm does not run.
    #[error("{node}: attribute {attribute} = {found} is not supported (bilstm needs {needed})")]
    Attribute {
        /// The node.
        node: NodeRef,
        /// The attribute's name.
        attribute: String,
        /// Its value, as found.
        found: String,
        /// What bilstm runs.
        needed: &'static str,
    },
    /// An optional `LSTM` input bilstm does not run (`sequence_lens`, `P`, non-zero
    /// `initial_h` / `initial_c`).
    #[error("{node}: input {input} (\"{name}\") {reason}")]
    Input {
        /// The node.
        node: NodeRef,
        /// The input's ONNX name (`"sequence_lens"`, `"P"`, ...).
        input: &'static str,
        /// The value name wired to it.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// One of an `LSTM` node's weight tensors (`W`, `R` or `B`) is missing or wrong.
    #[error("{node}: {tensor} (\"{name}\"): {problem}")]
    Tensor {
        /// The node.
        node: NodeRef,
        /// Which input of the node: `W`, `R` or `B`.
        tensor: Tensor,
        /// The value name wired to it.
        name: String,
        /// What is wrong.
        problem: TensorProblem,
    },
    /// The bytes are not a valid safetensors file.
    #[cfg(feature = "safetensors")]
    #[error("{origin}: not a valid safetensors file: {source}")]
    Safetensors {
        /// The file's path, or `"safetensors bytes"`.
        origin: String,
        /// The safetensors crate's error.
        source: safetensors::SafeTensorError,
    },
    /// No tensor name ends in `weight_ih_l0`.
    #[error(
        "{origin}: no PyTorch LSTM weights (no tensor name ends in \"weight_ih_l0\"; \
         found {found} tensors)"
    )]
    NoLstmTensors {
        /// The file's path, or `"safetensors bytes"`.
        origin: String,
        /// How many tensors the file holds.
        found: usize,
    },
    /// Several LSTM stacks (several prefixes with a `weight_ih_l0`).
    #[error("several LSTM prefixes {prefixes:?}; bilstm loads one stack per file")]
    LstmPrefixes {
        /// The prefixes, sorted.
        prefixes: Vec<String>,
    },
    /// A tensor the stack needs is missing.
    #[error("missing tensor \"{name}\"{detail}")]
    MissingTensor {
        /// The full name looked for.
        name: String,
        /// More context (empty, or starting with `": "`).
        detail: String,
    },
    /// A tensor of another element type than F32.
    #[error("tensor \"{name}\" is {dtype}; bilstm reads F32 only")]
    Dtype {
        /// The tensor.
        name: String,
        /// Its dtype, as safetensors names it (`F16`, `BF16`, ...).
        dtype: String,
    },
    /// A tensor of the wrong shape.
    #[error("tensor \"{name}\" has shape {found:?}, expected {expected:?}")]
    Shape {
        /// The tensor.
        name: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
    },
    /// A tensor that belongs to an LSTM variant bilstm does not run (`weight_hr`: projections).
    #[error("tensor \"{name}\": {reason}")]
    UnsupportedTensor {
        /// The tensor.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A safetensors weight is NaN or infinite.
    #[error("tensor \"{name}\": value {index} is not finite ({value})")]
    NonFinite {
        /// The tensor.
        name: String,
        /// Index in the tensor, row-major.
        index: usize,
        /// The value.
        value: f32,
    },
}

impl BackendError for ModelError {
    fn kind(&self) -> ErrorKind {
        match self {
            ModelError::LayerCount { .. }
            | ModelError::Attribute { .. }
            | ModelError::Input { .. }
            | ModelError::UnsupportedTensor { .. }
            | ModelError::LstmPrefixes { .. }
            | ModelError::NotBuilt { .. } => ErrorKind::Unsupported,
            ModelError::Tensor {
                problem: TensorProblem::DataType { .. },
                ..
            }
            | ModelError::Dtype { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::InvalidInput,
        }
    }
}
