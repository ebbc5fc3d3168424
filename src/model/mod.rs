//! Model loading: a pyannote-style LSTM stack from an ONNX model or a PyTorch state dict in
//! safetensors, into an [`OwnedStack`] whose [`OwnedStack::weights`] every backend packs.
//!
//! # Formats
//!
//! **ONNX** ([`load_onnx`], [`load_onnx_bytes`]): what `torch.onnx.export` writes for an
//! `nn.LSTM`, one `LSTM` node per layer with other operators (`Transpose`, `Reshape`, ...)
//! around them. The `LSTM` nodes of the default domain are taken in graph order as layers
//! 0, 1, ...; nothing else in the graph is read or run (the loader does not check that the
//! nodes are wired into a stack: that is how torch exports one). Each node's `W [2, 512, in]`,
//! `R [2, 512, 128]` and `B [2, 1024]` come from initializers or `Constant` nodes, stored
//! as `raw_data` (little-endian f32), `float_data`, or external data in a file beside the
//! model (`location`, `offset`, `length`; locations that are absolute or contain `..` are
//! refused). The tensors keep ONNX's gate order (`i, o, f, c`): the stack's
//! [`OwnedStack::order`] is [`GateOrder::Onnx`](bilstm_core::GateOrder::Onnx) and packing
//! maps the gates, as for every other source.
//!
//! Every node must describe exactly what bilstm runs, or the model is refused with an error
//! naming the node and the attribute or tensor ([`ModelError::Attribute`],
//! [`ModelError::Input`], [`ModelError::Tensor`]):
//!
//! - `hidden_size` = 128 (or absent, with `R`'s dims saying 128);
//! - `direction` = `"bidirectional"` (absent means forward: refused);
//! - `activations` absent or `Sigmoid, Tanh, Tanh` for both directions; no
//!   `activation_alpha` / `activation_beta` values; no `clip`; `input_forget` absent or 0;
//!   `layout` absent or 0; no other attribute;
//! - no `sequence_lens`, no peepholes `P`; `initial_h` / `initial_c` either computed by
//!   other nodes (torch exports zeros built from the batch size; bilstm starts from zeros)
//!   or stored as zeros;
//! - `W`, `R`, `B` of `data_type` FLOAT with the dims above, all values finite; layer 0's
//!   width gives the feature count (1 to 1024), every later layer's must be 256 (the widths
//!   chain); `B` may be omitted, which ONNX defines as zeros;
//! - 1 to 8 `LSTM` nodes (4 in pyannote segmentation-3.0).
//!
//! **safetensors** ([`load_safetensors`], [`load_safetensors_bytes`]): the state dict of an
//! `nn.LSTM`, PyTorch names under any common prefix (`lstm.` for pyannote's model, the
//! empty prefix for a bare `nn.LSTM`): `<prefix>weight_ih_l{k}`, `weight_hh_l{k}`,
//! `bias_ih_l{k}`, `bias_hh_l{k}`, each also with `_reverse`, for layers `0..n` without a
//! gap. The prefix is what comes before the one name ending in `weight_ih_l0`; several such
//! prefixes are refused ([`ModelError::LstmPrefixes`]). Other tensors (the rest of the
//! network) are ignored. F32 only; every shape checked. A file without any bias tensor
//! (`nn.LSTM(bias=False)`) runs with zero biases. The stack keeps PyTorch's gate order.
//!
//! [`load`] picks the format by extension (`.onnx`, `.safetensors`, any case), else by the
//! first bytes.
//!
//! The loaded stack's shape has [`StackShape::pyannote`]'s 589 frames; callers running
//! other window lengths use `stack.shape.with_frames(..)`.
//!
//! ```
//! # #[cfg(not(feature = "onnx"))] fn main() {}
//! # #[cfg(feature = "onnx")]
//! # fn main() -> Result<(), bilstm::Error> {
//! use bilstm::model;
//! use prost::Message;
//! use bilstm::owned::OwnedStack;
//! use bilstm::StackShape;
//!
//! // A one-layer ONNX model built in memory from seeded weights.
//! let shape = StackShape { layers: 1, ..StackShape::pyannote() };
//! let onnx = OwnedStack::random(&shape, 7, 0.3).to_onnx()?;
//! let tensor = |name: &str, dims: Vec<i64>, data: &[f32]| model::proto::TensorProto {
//!     name: name.into(), dims, data_type: 1, float_data: data.to_vec(), ..Default::default()
//! };
//! let layer = &onnx.layers[0];
//! let graph = model::proto::GraphProto {
//!     node: vec![model::proto::NodeProto {
//!         op_type: "LSTM".into(),
//!         name: "lstm_0".into(),
//!         input: vec!["x".into(), "W".into(), "R".into(), "B".into()],
//!         output: vec!["y".into()],
//!         attribute: vec![
//!             model::proto::AttributeProto { name: "hidden_size".into(), i: 128, r#type: 2, ..Default::default() },
//!             model::proto::AttributeProto { name: "direction".into(), s: b"bidirectional".to_vec(), r#type: 3, ..Default::default() },
//!         ],
//!         ..Default::default()
//!     }],
//!     initializer: vec![
//!         tensor("W", vec![2, 512, 60], &layer.w),
//!         tensor("R", vec![2, 512, 128], &layer.r),
//!         tensor("B", vec![2, 1024], &layer.b),
//!     ],
//!     ..Default::default()
//! };
//! let bytes = model::proto::ModelProto { ir_version: 8, graph: Some(graph), ..Default::default() }.encode_to_vec();
//! let loaded = model::load_onnx_bytes(&bytes, None)?;
//! assert_eq!(loaded.format, model::ModelFormat::Onnx);
//! assert_eq!(loaded.stack.shape, shape);
//! println!("{}", loaded.description); // ONNX bytes: 1 LSTM node lstm_0, 60 features, hidden 128
//! # Ok(()) }
//! ```
//!
//! # Errors
//! Every function returns [`crate::Error::Model`] with a [`ModelError`] for a file that
//! cannot be read or does not describe a stack bilstm runs, and [`crate::Error::Core`] for a
//! shape core refuses (more than 1024 features).

mod error;
#[cfg(feature = "onnx")]
mod onnx;
#[cfg(feature = "onnx")]
pub mod proto;
#[cfg(feature = "safetensors")]
mod safetensors;

/// Without the `onnx` feature: every ONNX model is refused, saying why.
#[cfg(not(feature = "onnx"))]
mod onnx {
    use super::{Error, LoadedModel, ModelError, Path};
    pub(super) fn parse(_: &[u8], _: Option<&Path>, origin: &str) -> Result<LoadedModel, Error> {
        Err(ModelError::NotBuilt {
            origin: origin.to_owned(),
            feature: "onnx",
        }
        .into())
    }
}

/// Without the `safetensors` feature: every safetensors file is refused, saying why.
#[cfg(not(feature = "safetensors"))]
mod safetensors {
    use super::{Error, LoadedModel, ModelError};
    pub(super) fn parse(_: &[u8], origin: &str) -> Result<LoadedModel, Error> {
        Err(ModelError::NotBuilt {
            origin: origin.to_owned(),
            feature: "safetensors",
        }
        .into())
    }
}

use std::fmt;
use std::path::Path;

use bilstm_core::StackShape;
use bilstm_core::geometry::{GATES, HIDDEN, MAX_FEATURES};
use bilstm_core::owned::OwnedStack;
use bilstm_core::shape::MAX_LAYERS;

pub use error::{ModelError, NodeRef, TensorProblem};

use crate::Error;

/// The origin named in messages for [`load_onnx_bytes`].
const ONNX_BYTES: &str = "ONNX bytes";
/// The origin named in messages for [`load_safetensors_bytes`].
const SAFETENSORS_BYTES: &str = "safetensors bytes";

/// A model file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelFormat {
    /// An ONNX model (`.onnx`): `LSTM` nodes with `W`, `R`, `B`.
    Onnx,
    /// A PyTorch state dict in safetensors (`.safetensors`).
    Safetensors,
}

impl fmt::Display for ModelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelFormat::Onnx => "ONNX",
            ModelFormat::Safetensors => "safetensors",
        })
    }
}

/// A loaded model: the stack's weights and where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedModel {
    /// The file format the model was read from.
    pub format: ModelFormat,
    /// The weights, in the source's gate order ([`GateOrder::Onnx`](bilstm_core::GateOrder)
    /// for ONNX, [`GateOrder::Torch`](bilstm_core::GateOrder) for safetensors), with a shape
    /// of 589 frames.
    pub stack: OwnedStack,
    /// One line for humans, e.g.
    /// `ONNX model seg.onnx: 4 LSTM nodes lstm_0..lstm_3, 60 features, hidden 128`.
    pub description: String,
}

/// The frame count every loaded stack's shape carries (pyannote's 10 s window).
#[cfg_attr(not(any(feature = "onnx", feature = "safetensors")), allow(dead_code))]
fn pyannote_frames() -> usize {
    StackShape::pyannote().frames
}

/// Loads `path` as ONNX if its name ends in `.onnx`, as safetensors if in `.safetensors`
/// (any case), else by its first bytes.
///
/// # Errors
/// [`ModelError::Io`] naming the path when it cannot be read; [`ModelError::UnknownFormat`]
/// when neither the name nor the bytes tell the format; otherwise as [`load_onnx`] or
/// [`load_safetensors`].
pub fn load(path: &Path) -> Result<LoadedModel, Error> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("onnx") => return load_onnx(path),
        Some("safetensors") => return load_safetensors(path),
        _ => {}
    }
    let bytes = read(path)?;
    let origin = path.display().to_string();
    if looks_like_safetensors(&bytes) {
        safetensors::parse(&bytes, &origin)
    } else if looks_like_onnx(&bytes) {
        onnx::parse(&bytes, Some(model_dir(path)), &origin)
    } else {
        Err(ModelError::UnknownFormat {
            path: path.to_path_buf(),
        }
        .into())
    }
}

/// Loads an ONNX model file; external data is looked for in the file's directory.
///
/// # Errors
/// [`ModelError::Io`] naming the path when it cannot be read; as [`load_onnx_bytes`]
/// otherwise, messages naming the path.
pub fn load_onnx(path: &Path) -> Result<LoadedModel, Error> {
    let bytes = read(path)?;
    onnx::parse(&bytes, Some(model_dir(path)), &path.display().to_string())
}

/// Loads an ONNX model from memory. `base_dir` is the directory external data is read from
/// (the model file's directory); without it a model with external data is refused.
///
/// # Errors
/// `ModelError::Decode` for bytes that are not an ONNX protobuf (truncated, corrupt);
/// [`ModelError::NoGraph`], [`ModelError::NoLstm`], [`ModelError::LayerCount`];
/// [`ModelError::Attribute`] or [`ModelError::Input`] naming the node and what it sets that
/// bilstm does not run; [`ModelError::Tensor`] naming the node and the tensor (`W`, `R`, `B`)
/// that is missing, computed, not FLOAT, of the wrong dims or data length, not finite, or
/// whose external data cannot be read; [`crate::Error::Core`] for a feature count above 1024.
pub fn load_onnx_bytes(bytes: &[u8], base_dir: Option<&Path>) -> Result<LoadedModel, Error> {
    onnx::parse(bytes, base_dir, ONNX_BYTES)
}

/// Loads a safetensors file holding a PyTorch `nn.LSTM` state dict (any prefix).
///
/// # Errors
/// [`ModelError::Io`] naming the path when it cannot be read; as [`load_safetensors_bytes`]
/// otherwise, messages naming the path.
pub fn load_safetensors(path: &Path) -> Result<LoadedModel, Error> {
    let bytes = read(path)?;
    safetensors::parse(&bytes, &path.display().to_string())
}

/// Loads a safetensors state dict from memory.
///
/// # Errors
/// `ModelError::Safetensors` for bytes that are not a safetensors file;
/// [`ModelError::NoLstmTensors`], [`ModelError::LstmPrefixes`], [`ModelError::LayerCount`];
/// [`ModelError::MissingTensor`], [`ModelError::Dtype`], [`ModelError::Shape`],
/// [`ModelError::UnsupportedTensor`], [`ModelError::NonFinite`] naming the tensor;
/// [`crate::Error::Core`] for a feature count above 1024.
pub fn load_safetensors_bytes(bytes: &[u8]) -> Result<LoadedModel, Error> {
    safetensors::parse(bytes, SAFETENSORS_BYTES)
}

/// The most bytes of weights a stack bilstm runs can hold: `W`, `R` and both biases of
/// [`MAX_LAYERS`] layers, the first [`MAX_FEATURES`] wide, f32 (15.8 MB).
pub const MAX_STACK_BYTES: u64 = {
    const fn per_direction(width: u64) -> u64 {
        let rows = (GATES * HIDDEN) as u64;
        rows * width + rows * HIDDEN as u64 + 2 * rows
    }
    let first = 2 * per_direction(MAX_FEATURES as u64);
    let later = 2 * per_direction(2 * HIDDEN as u64);
    4 * (first + (MAX_LAYERS as u64 - 1) * later)
};

/// The largest model file read: 64 times [`MAX_STACK_BYTES`] (1 GiB), room for the rest of a
/// network around the LSTM (pyannote's whole segmentation model is 5.9 MB). Larger files,
/// and anything that is not a regular file (`/dev/zero`, a FIFO), are refused before
/// reading.
pub const MAX_MODEL_FILE_BYTES: u64 = 64 * MAX_STACK_BYTES;

/// Reads a whole model file (a regular file of at most [`MAX_MODEL_FILE_BYTES`]), naming it on
/// failure.
fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    crate::fsio::read_capped(path, MAX_MODEL_FILE_BYTES).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The directory external data is relative to: the model file's own.
fn model_dir(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// safetensors: an 8-byte little-endian header length, then a JSON object that fits.
fn looks_like_safetensors(bytes: &[u8]) -> bool {
    let Some((len, rest)) = bytes.split_first_chunk::<8>() else {
        return false;
    };
    let header = u64::from_le_bytes(*len);
    header >= 2 && header <= rest.len() as u64 && rest.first() == Some(&b'{')
}

/// ONNX: a `ModelProto` starts with field 1 (`ir_version`, a varint: tag byte `0x08`), as
/// every ONNX writer (protobuf serialises in field order) produces.
fn looks_like_onnx(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x08)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes() {
        let mut st = 2u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{}");
        assert!(looks_like_safetensors(&st));
        assert!(!looks_like_safetensors(&st[..9]));
        assert!(!looks_like_safetensors(b"\x08\x07"));
        assert!(looks_like_onnx(b"\x08\x07"));
        assert!(!looks_like_onnx(b""));
        assert_eq!(ModelFormat::Onnx.to_string(), "ONNX");
        assert_eq!(ModelFormat::Safetensors.to_string(), "safetensors");
    }
}
