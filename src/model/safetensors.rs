//! safetensors files holding a PyTorch `nn.LSTM` state dict, under any common prefix.

use std::collections::BTreeSet;

use ::safetensors::{Dtype, SafeTensors};
use bilstm_core::geometry::{GATES, HIDDEN};
use bilstm_core::owned::{OwnedDirection, OwnedLayer, OwnedStack};
use bilstm_core::shape::MAX_LAYERS;
use bilstm_core::{GateOrder, StackShape};

use super::error::ModelError;
use super::{LoadedModel, ModelFormat, SAFETENSORS_BYTES, pyannote_frames};
use crate::Error;

/// Gate rows per direction: `4 * 128`.
const ROWS: usize = GATES * HIDDEN;
/// The name that marks a stack: its prefix is what comes before it.
const MARKER: &str = "weight_ih_l0";

/// Parses a safetensors file and reads its LSTM stack (see [`super::load_safetensors`]).
pub(super) fn parse(bytes: &[u8], origin: &str) -> Result<LoadedModel, Error> {
    let file = SafeTensors::deserialize(bytes).map_err(|source| ModelError::Safetensors {
        origin: origin.to_owned(),
        source,
    })?;
    let names = file.names();
    let prefixes: BTreeSet<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix(MARKER))
        .collect();
    let prefix = match prefixes.len() {
        0 => {
            return Err(ModelError::NoLstmTensors {
                origin: origin.to_owned(),
                found: names.len(),
            }
            .into());
        }
        1 => prefixes.first().copied().unwrap_or_default(),
        _ => {
            return Err(ModelError::LstmPrefixes {
                prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
            }
            .into());
        }
    };

    // Layer k exists when `weight_ih_l{k}` does; they must run 0..n without a gap.
    let mut layer_ids = BTreeSet::new();
    for name in &names {
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        if rest.starts_with("weight_hr_l") {
            return Err(ModelError::UnsupportedTensor {
                name: (*name).to_owned(),
                reason: "LSTM projections (proj_size > 0) are not supported",
            }
            .into());
        }
        let id = rest
            .strip_prefix("weight_ih_l")
            .and_then(|k| k.parse::<usize>().ok());
        if let Some(k) = id {
            layer_ids.insert(k);
        }
    }
    let layers = (0..).take_while(|k| layer_ids.contains(k)).count();
    if let Some(&last) = layer_ids.last()
        && last >= layers
    {
        return Err(ModelError::MissingTensor {
            name: format!("{prefix}weight_ih_l{layers}"),
            detail: format!(": layers are numbered from 0 without gaps, and layer {last} exists"),
        }
        .into());
    }
    if layers > MAX_LAYERS {
        return Err(ModelError::LayerCount {
            found: layers,
            max: MAX_LAYERS,
        }
        .into());
    }
    // `nn.LSTM(bias=False)` saves no bias at all: that stack runs with zero biases.
    let has_bias = names.iter().any(|n| {
        n.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("bias_ih_l") || rest.starts_with("bias_hh_l"))
    });

    let reader = Reader {
        file: &file,
        prefix,
    };
    let features = reader.features()?;
    let shape = StackShape {
        features,
        hidden: HIDDEN,
        layers,
        frames: pyannote_frames(),
    };
    shape.validate()?;
    let mut owned = Vec::with_capacity(layers);
    for layer in 0..layers {
        let width = shape.layer_input_width(layer);
        let direction = |suffix: &str| -> Result<OwnedDirection, ModelError> {
            let bias = |kind: &str| {
                if has_bias {
                    reader.read(&format!("bias_{kind}_l{layer}{suffix}"), &[ROWS])
                } else {
                    Ok(vec![0.0; ROWS])
                }
            };
            Ok(OwnedDirection {
                weight_ih: reader.read(&format!("weight_ih_l{layer}{suffix}"), &[ROWS, width])?,
                weight_hh: reader.read(&format!("weight_hh_l{layer}{suffix}"), &[ROWS, HIDDEN])?,
                bias_ih: bias("ih")?,
                bias_hh: bias("hh")?,
            })
        };
        owned.push(OwnedLayer {
            forward: direction("")?,
            reverse: direction("_reverse")?,
        });
    }
    let stack = OwnedStack {
        shape,
        order: GateOrder::Torch,
        layers: owned,
    };
    stack.weights()?;
    let label = if origin == SAFETENSORS_BYTES {
        origin.to_owned()
    } else {
        format!("safetensors {origin}")
    };
    let description = format!(
        "{label}: {layers} LSTM layer{} under prefix \"{prefix}\", {features} \
         features, hidden {HIDDEN}{}",
        if layers == 1 { "" } else { "s" },
        if has_bias { "" } else { ", no biases (zeros)" },
    );
    Ok(LoadedModel {
        format: ModelFormat::Safetensors,
        stack,
        description,
    })
}

/// Reads the stack's tensors by their name after the prefix.
struct Reader<'f, 'd> {
    file: &'f SafeTensors<'d>,
    prefix: &'f str,
}

impl Reader<'_, '_> {
    /// Layer 0's input width, from `weight_ih_l0`'s shape `[512, features]`.
    fn features(&self) -> Result<usize, ModelError> {
        let name = format!("{}{MARKER}", self.prefix);
        let view = self
            .file
            .tensor(&name)
            .map_err(|_| ModelError::MissingTensor {
                name: name.clone(),
                detail: String::new(),
            })?;
        match view.shape() {
            [rows, features] if *rows == ROWS && *features >= 1 => Ok(*features),
            found => Err(ModelError::Shape {
                expected: vec![ROWS, found.get(1).copied().filter(|&f| f >= 1).unwrap_or(1)],
                found: found.to_vec(),
                name,
            }),
        }
    }

    /// Tensor `<prefix><suffix_name>` as f32 values of exactly `shape`, all finite.
    fn read(&self, suffix_name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let name = format!("{}{suffix_name}", self.prefix);
        let view = self
            .file
            .tensor(&name)
            .map_err(|_| ModelError::MissingTensor {
                name: name.clone(),
                detail: String::new(),
            })?;
        if view.dtype() != Dtype::F32 {
            return Err(ModelError::Dtype {
                name,
                dtype: view.dtype().to_string(),
            });
        }
        if view.shape() != shape {
            return Err(ModelError::Shape {
                name,
                expected: shape.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        // The safetensors crate has checked that the data length matches dtype and shape.
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(ModelError::NonFinite { name, index, value });
        }
        Ok(values)
    }
}
