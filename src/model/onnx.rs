//! ONNX models: the `LSTM` nodes of a graph, their attributes checked, their `W`, `R`, `B`
//! read from initializers, `Constant` nodes or external data.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use bilstm_core::geometry::{GATES, HIDDEN};
use bilstm_core::layout::Tensor;
use bilstm_core::owned::{OwnedDirection, OwnedLayer, OwnedStack};
use bilstm_core::shape::MAX_LAYERS;
use bilstm_core::{GateOrder, StackShape};
use prost::Message;

use super::error::{ModelError, NodeRef, TensorProblem};
use super::proto::{
    AttributeProto, DATA_LOCATION_EXTERNAL, DATA_TYPE_FLOAT, ModelProto, NodeProto, TensorProto,
};
use super::{LoadedModel, ModelFormat, ONNX_BYTES, pyannote_frames};
use crate::Error;

/// Gate rows per direction: `4 * 128`.
const ROWS: usize = GATES * HIDDEN;
/// Output width of every layer: forward then reverse units.
const LAYER_OUT: usize = 2 * HIDDEN;
/// The most values a stored `initial_h` / `initial_c` may declare: `[2, 1024, 128]` (1 MiB).
/// A stored initial state has a fixed batch (torch computes it from the input instead); 1024
/// windows is an estimate of the largest a real export stores, not a measurement.
const MAX_STORED_STATE_VALUES: usize = 2 * 1024 * HIDDEN;

/// The activations bilstm runs, per direction, in ONNX's order `f, g, h` (the default).
const DEFAULT_ACTIVATIONS: [&str; 3] = ["Sigmoid", "Tanh", "Tanh"];

/// Decodes an ONNX model and reads its LSTM stack (see [`super::load_onnx_bytes`]).
pub(super) fn parse(
    bytes: &[u8],
    base_dir: Option<&Path>,
    origin: &str,
) -> Result<LoadedModel, Error> {
    let model = ModelProto::decode(bytes).map_err(|source| ModelError::Decode {
        origin: origin.to_owned(),
        source,
    })?;
    let graph = model.graph.as_ref().ok_or_else(|| ModelError::NoGraph {
        origin: origin.to_owned(),
    })?;

    refuse_duplicates(graph, origin)?;
    let store = Store::new(&graph.initializer, &graph.node, base_dir);
    let lstms: Vec<(usize, &NodeProto)> = graph
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| n.op_type == "LSTM" && is_default_domain(&n.domain))
        .collect();
    if lstms.is_empty() {
        return Err(ModelError::NoLstm {
            origin: origin.to_owned(),
        }
        .into());
    }
    // The same LSTM node twice (identical inputs) would run as two layers: refused.
    for (k, &(_, a)) in lstms.iter().enumerate() {
        if let Some(&(index, b)) = lstms[..k].iter().find(|(_, b)| b.input == a.input) {
            return Err(ModelError::Duplicate {
                origin: origin.to_owned(),
                what: "LSTM node inputs",
                name: format!(
                    "{} (graph nodes {index} and {}: {:?} and {:?})",
                    a.input.join(", "),
                    lstms[k].0,
                    b.name,
                    a.name
                ),
            }
            .into());
        }
    }
    if lstms.len() > MAX_LAYERS {
        return Err(ModelError::LayerCount {
            found: lstms.len(),
            max: MAX_LAYERS,
        }
        .into());
    }

    let mut shape = StackShape {
        features: 0,
        hidden: HIDDEN,
        layers: lstms.len(),
        frames: pyannote_frames(),
    };
    let mut layers = Vec::with_capacity(lstms.len());
    let mut names = Vec::with_capacity(lstms.len());
    for (layer, &(graph_index, node)) in lstms.iter().enumerate() {
        let at = NodeRef {
            layer,
            graph_index,
            name: node.name.clone(),
        };
        check_attributes(node, &at)?;
        check_optional_inputs(node, &at, &store)?;
        let width = read_width(node, &at, &store, layer)?;
        if layer == 0 {
            shape.features = width;
            // Refuses a feature count above MAX_FEATURES before any data is read.
            shape.validate()?;
        }
        layers.push(read_layer(node, &at, &store, width)?);
        names.push(if node.name.is_empty() {
            format!("#{layer}")
        } else {
            node.name.clone()
        });
    }

    let stack = OwnedStack {
        shape,
        order: GateOrder::Onnx,
        layers,
    };
    stack.weights()?;
    let listed = match names.as_slice() {
        [one] => one.clone(),
        [first, .., last] => format!("{first}..{last}"),
        [] => String::new(),
    };
    let label = if origin == ONNX_BYTES {
        origin.to_owned()
    } else {
        format!("ONNX model {origin}")
    };
    let description = format!(
        "{label}: {} LSTM node{} {listed}, {} features, hidden {}",
        shape.layers,
        if shape.layers == 1 { "" } else { "s" },
        shape.features,
        shape.hidden,
    );
    Ok(LoadedModel {
        format: ModelFormat::Onnx,
        stack,
        description,
    })
}

/// Refuses a graph that names one value twice: two initializers of one name, or two node
/// outputs of one name (ONNX graphs are in single static assignment form; a loader that
/// silently took the first would run weights the exporter may not have meant).
fn refuse_duplicates(graph: &super::proto::GraphProto, origin: &str) -> Result<(), ModelError> {
    let dup = |what: &'static str, name: &str| ModelError::Duplicate {
        origin: origin.to_owned(),
        what,
        name: name.to_owned(),
    };
    let mut initializers = std::collections::HashSet::new();
    for t in &graph.initializer {
        if !initializers.insert(t.name.as_str()) {
            return Err(dup("initializer name", &t.name));
        }
    }
    let mut outputs = std::collections::HashSet::new();
    for n in &graph.node {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if !outputs.insert(out.as_str()) || initializers.contains(out.as_str()) {
                return Err(dup("value name (node output)", out));
            }
        }
    }
    Ok(())
}

/// `""` and `"ai.onnx"` both name the default operator domain.
fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// Refuses every attribute value bilstm does not run.
fn check_attributes(node: &NodeProto, at: &NodeRef) -> Result<(), ModelError> {
    let refuse = |attribute: &str, found: String, needed: &'static str| ModelError::Attribute {
        node: at.clone(),
        attribute: attribute.to_owned(),
        found,
        needed,
    };
    let mut direction_seen = false;
    for a in &node.attribute {
        match a.name.as_str() {
            "hidden_size" => {
                if a.i != HIDDEN as i64 {
                    return Err(refuse("hidden_size", a.i.to_string(), "128"));
                }
            }
            "direction" => {
                direction_seen = true;
                if a.s != b"bidirectional" {
                    return Err(refuse("direction", quoted(&a.s), "\"bidirectional\""));
                }
            }
            "activations" => {
                let ok = a.strings.len() == 2 * DEFAULT_ACTIVATIONS.len()
                    && a.strings.iter().enumerate().all(|(k, s)| {
                        s.eq_ignore_ascii_case(DEFAULT_ACTIVATIONS[k % 3].as_bytes())
                    });
                if !ok {
                    let list: Vec<String> = a.strings.iter().map(|s| quoted(s)).collect();
                    return Err(refuse(
                        "activations",
                        format!("[{}]", list.join(", ")),
                        "the default Sigmoid, Tanh, Tanh for both directions",
                    ));
                }
            }
            "activation_alpha" | "activation_beta" => {
                if !a.floats.is_empty() {
                    return Err(refuse(
                        &a.name,
                        format!("{:?}", a.floats),
                        "none: the default activations take no parameters",
                    ));
                }
            }
            "clip" => {
                return Err(refuse("clip", a.f.to_string(), "no clip"));
            }
            "input_forget" => {
                if a.i != 0 {
                    return Err(refuse("input_forget", a.i.to_string(), "0 or absent"));
                }
            }
            "layout" => {
                if a.i != 0 {
                    return Err(refuse(
                        "layout",
                        a.i.to_string(),
                        "0 or absent (X as [seq, batch, features])",
                    ));
                }
            }
            _ => {
                return Err(refuse(
                    &a.name,
                    describe_attribute(a),
                    "only the attributes of the ONNX LSTM operator",
                ));
            }
        }
    }
    if !direction_seen {
        return Err(refuse(
            "direction",
            "absent (the default, \"forward\")".to_owned(),
            "\"bidirectional\"",
        ));
    }
    Ok(())
}

/// A string attribute for a message: quoted, lossy UTF-8, shortened, control characters
/// escaped.
fn quoted(s: &[u8]) -> String {
    format!("\"{}\"", crate::npy::shorten(&String::from_utf8_lossy(s)))
}

/// Some text for an unknown attribute's value.
fn describe_attribute(a: &AttributeProto) -> String {
    if !a.s.is_empty() {
        quoted(&a.s)
    } else if !a.ints.is_empty() {
        format!("{:?}", a.ints)
    } else if !a.floats.is_empty() {
        format!("{:?}", a.floats)
    } else if a.f != 0.0 {
        a.f.to_string()
    } else {
        a.i.to_string()
    }
}

/// The name wired to optional input `index`, if any (an empty name means omitted).
fn optional_input(node: &NodeProto, index: usize) -> Option<&str> {
    node.input
        .get(index)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Refuses `sequence_lens`, peepholes and a stored non-zero initial state.
///
/// `initial_h` / `initial_c` computed by other nodes are accepted: `torch.onnx.export` builds
/// them from a zero-filled `ConstantOfShape`/`Expand` sized by the batch, and bilstm starts
/// every window from `h0 = c0 = 0` (DESIGN §1). Stored ones must hold only zeros.
fn check_optional_inputs(node: &NodeProto, at: &NodeRef, store: &Store<'_>) -> Result<(), Error> {
    let refuse = |input: &'static str, name: &str, reason: &'static str| ModelError::Input {
        node: at.clone(),
        input,
        name: name.to_owned(),
        reason,
    };
    if let Some(name) = optional_input(node, 4) {
        return Err(refuse(
            "sequence_lens",
            name,
            "is set; bilstm runs every window at its full length",
        )
        .into());
    }
    for (index, input) in [(5, "initial_h"), (6, "initial_c")] {
        let Some(name) = optional_input(node, index) else {
            continue;
        };
        let Some(tensor) = store.stored(name) else {
            continue;
        };
        // Judged by its declared dims before any data is read: `[2, batch, 128]` of at most
        // MAX_STORED_STATE_VALUES values.
        let count = match tensor.dims.as_slice() {
            [2, _, h] if *h == HIDDEN as i64 => element_count(&tensor.dims)
                .filter(|&n| n <= MAX_STORED_STATE_VALUES)
                .unwrap_or(usize::MAX),
            _ => usize::MAX,
        };
        if count == usize::MAX {
            return Err(refuse(
                input,
                name,
                "is stored with dims other than [2, batch, 128] (batch up to 1024); bilstm \
                 starts every window from h0 = c0 = 0",
            )
            .into());
        }
        let zeros = store
            .values(tensor, count)
            .map(|v| v.iter().all(|&x| x == 0.0))
            .unwrap_or(false);
        if !zeros {
            return Err(refuse(
                input,
                name,
                "is stored with values other than FLOAT zeros; bilstm starts every window \
                 from h0 = c0 = 0",
            )
            .into());
        }
    }
    if let Some(name) = optional_input(node, 7) {
        return Err(refuse("P", name, "is set; peephole connections are not supported").into());
    }
    Ok(())
}

/// Checks `W`'s dims and returns the layer's input width (`features` for layer 0, 256 after).
fn read_width(
    node: &NodeProto,
    at: &NodeRef,
    store: &Store<'_>,
    layer: usize,
) -> Result<usize, ModelError> {
    let (name, tensor) = store.input(node, at, 1, Tensor::W)?;
    let fail = |problem| ModelError::Tensor {
        node: at.clone(),
        tensor: Tensor::W,
        name: name.to_owned(),
        problem,
    };
    let dims = &tensor.dims;
    let width = match dims.as_slice() {
        [2, rows, width] if *rows == ROWS as i64 && *width >= 1 => *width,
        _ => {
            return Err(fail(TensorProblem::Dims {
                expected: if layer == 0 {
                    format!("[2, {ROWS}, features]")
                } else {
                    format!("[2, {ROWS}, {LAYER_OUT}]")
                },
                found: dims.clone(),
            }));
        }
    };
    if layer > 0 && width != LAYER_OUT as i64 {
        return Err(fail(TensorProblem::Width {
            layer,
            expected: LAYER_OUT as i64,
            found: width,
        }));
    }
    // Any positive i64 fits usize on the 64-bit hosts bilstm runs on; layer 0's width is
    // then checked against the feature limit by `StackShape::validate`.
    Ok(usize::try_from(width).unwrap_or(usize::MAX))
}

/// Reads one node's `W`, `R` and `B` and splits them into the two directions.
fn read_layer(
    node: &NodeProto,
    at: &NodeRef,
    store: &Store<'_>,
    width: usize,
) -> Result<OwnedLayer, ModelError> {
    let w = store.read(node, at, 1, Tensor::W, &[2, ROWS, width])?;
    let r = store.read(node, at, 2, Tensor::R, &[2, ROWS, HIDDEN])?;
    // B is optional in ONNX and then means zeros (ONNX operator spec, LSTM).
    let b = if optional_input(node, 3).is_some() {
        store.read(node, at, 3, Tensor::B, &[2, 2 * ROWS])?
    } else {
        vec![0.0; 4 * ROWS]
    };
    let (w0, w1) = w.split_at(ROWS * width);
    let (r0, r1) = r.split_at(ROWS * HIDDEN);
    let direction = |w: &[f32], r: &[f32], b: &[f32]| OwnedDirection {
        weight_ih: w.to_vec(),
        weight_hh: r.to_vec(),
        bias_ih: b[..ROWS].to_vec(),
        bias_hh: b[ROWS..2 * ROWS].to_vec(),
    };
    Ok(OwnedLayer {
        forward: direction(w0, r0, &b[..2 * ROWS]),
        reverse: direction(w1, r1, &b[2 * ROWS..]),
    })
}

/// `dims`' element count, or `None` for a negative dim or an overflow.
fn element_count(dims: &[i64]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    })
}

/// The graph's stored tensors by name, and which node computes each other value.
struct Store<'a> {
    stored: HashMap<&'a str, &'a TensorProto>,
    producers: HashMap<&'a str, &'a NodeProto>,
    base_dir: Option<&'a Path>,
}

impl<'a> Store<'a> {
    fn new(
        initializers: &'a [TensorProto],
        nodes: &'a [NodeProto],
        base_dir: Option<&'a Path>,
    ) -> Self {
        let mut stored = HashMap::new();
        for t in initializers {
            stored.entry(t.name.as_str()).or_insert(t);
        }
        let mut producers = HashMap::new();
        for n in nodes {
            for out in &n.output {
                producers.entry(out.as_str()).or_insert(n);
            }
            // A `Constant` node's `value` tensor is as good as an initializer.
            let constant = n.op_type == "Constant" && is_default_domain(&n.domain);
            if let (true, Some(out)) = (constant, n.output.first()) {
                let value = n.attribute.iter().find(|a| a.name == "value");
                if let Some(t) = value.and_then(|a| a.t.as_ref()) {
                    stored.entry(out.as_str()).or_insert(t);
                }
            }
        }
        Store {
            stored,
            producers,
            base_dir,
        }
    }

    /// The stored tensor of that name, if any.
    fn stored(&self, name: &str) -> Option<&'a TensorProto> {
        self.stored.get(name).copied()
    }

    /// The stored tensor wired to input `index` of `node`, with its value name.
    fn input<'n>(
        &self,
        node: &'n NodeProto,
        at: &NodeRef,
        index: usize,
        tensor: Tensor,
    ) -> Result<(&'n str, &'a TensorProto), ModelError> {
        let name = optional_input(node, index).unwrap_or("");
        if let Some(t) = self.stored(name) {
            return Ok((name, t));
        }
        let problem = match self.producers.get(name) {
            Some(p) => TensorProblem::Computed {
                op_type: p.op_type.clone(),
                node: p.name.clone(),
            },
            None => TensorProblem::Missing,
        };
        Err(ModelError::Tensor {
            node: at.clone(),
            tensor,
            name: name.to_owned(),
            problem,
        })
    }

    /// Reads input `index` of `node` as f32 values of exactly `dims`, all finite.
    fn read(
        &self,
        node: &NodeProto,
        at: &NodeRef,
        index: usize,
        tensor: Tensor,
        dims: &[usize],
    ) -> Result<Vec<f32>, ModelError> {
        let (name, t) = self.input(node, at, index, tensor)?;
        let fail = |problem| ModelError::Tensor {
            node: at.clone(),
            tensor,
            name: name.to_owned(),
            problem,
        };
        let want: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        if t.dims != want {
            return Err(fail(TensorProblem::Dims {
                expected: format!("{want:?}"),
                found: t.dims.clone(),
            }));
        }
        let count = dims.iter().product();
        let values = self.values(t, count).map_err(fail)?;
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(fail(TensorProblem::NonFinite { index, value }));
        }
        Ok(values)
    }

    /// The `count` f32 values of `t`, from `raw_data`, `float_data` or external data.
    fn values(&self, t: &TensorProto, count: usize) -> Result<Vec<f32>, TensorProblem> {
        if t.data_type != DATA_TYPE_FLOAT {
            return Err(TensorProblem::DataType { found: t.data_type });
        }
        let expected_bytes = (count as u64).saturating_mul(4);
        let external = t.data_location == DATA_LOCATION_EXTERNAL || !t.external_data.is_empty();
        let sources = [external, !t.raw_data.is_empty(), !t.float_data.is_empty()];
        if sources.iter().filter(|&&s| s).count() > 1 {
            // The ONNX spec stores a tensor's values in one field; which one a reader should
            // take when several are set is undefined, so none is guessed.
            return Err(TensorProblem::SeveralSources);
        }
        if external {
            let bytes = self.external(t, expected_bytes)?;
            return Ok(le_f32(&bytes));
        }
        if !t.raw_data.is_empty() {
            if t.raw_data.len() as u64 != expected_bytes {
                return Err(TensorProblem::ByteCount {
                    field: "raw_data",
                    expected: expected_bytes,
                    found: t.raw_data.len() as u64,
                });
            }
            return Ok(le_f32(&t.raw_data));
        }
        if t.float_data.is_empty() && count > 0 {
            return Err(TensorProblem::NoData);
        }
        if t.float_data.len() != count {
            return Err(TensorProblem::ValueCount {
                expected: count,
                found: t.float_data.len(),
            });
        }
        Ok(t.float_data.clone())
    }

    /// Reads `expected_bytes` of external data described by `t.external_data`.
    ///
    /// `location` is relative to the model's directory; absolute locations and any `..`
    /// are refused (lexically: a symbolic link inside the directory is followed, as in a
    /// Hugging Face cache snapshot).
    fn external(&self, t: &TensorProto, expected_bytes: u64) -> Result<Vec<u8>, TensorProblem> {
        let base = self.base_dir.ok_or(TensorProblem::ExternalNoBaseDir)?;
        let mut location = None;
        let mut offset = 0u64;
        let mut length = None;
        for entry in &t.external_data {
            let number = || {
                entry
                    .value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| TensorProblem::ExternalKey {
                        key: entry.key.clone(),
                        value: entry.value.clone(),
                    })
            };
            match entry.key.as_str() {
                "location" => location = Some(entry.value.as_str()),
                "offset" => offset = number()?,
                "length" => length = Some(number()?),
                // "checksum" and unknown keys carry nothing needed to read the data.
                _ => {}
            }
        }
        let location = location.ok_or(TensorProblem::ExternalNoLocation)?;
        let relative = Path::new(location);
        let inside = !location.is_empty()
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(TensorProblem::ExternalEscapes {
                location: location.to_owned(),
            });
        }
        let path: PathBuf = base.join(relative);
        let io = |source| TensorProblem::ExternalIo {
            path: path.clone(),
            source,
        };
        let (mut file, file_bytes) = crate::fsio::open_regular(&path).map_err(io)?;
        let length = length.unwrap_or_else(|| file_bytes.saturating_sub(offset));
        let end = offset.saturating_add(length);
        if end > file_bytes {
            return Err(TensorProblem::ExternalRange {
                path: path.clone(),
                offset,
                end,
                file_bytes,
            });
        }
        if length != expected_bytes {
            return Err(TensorProblem::ByteCount {
                field: "external data",
                expected: expected_bytes,
                found: length,
            });
        }
        let len = usize::try_from(length).map_err(|_| TensorProblem::ByteCount {
            field: "external data",
            expected: expected_bytes,
            found: length,
        })?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut bytes = vec![0u8; len];
        file.read_exact(&mut bytes).map_err(io)?;
        Ok(bytes)
    }
}

/// Little-endian f32 values of `bytes` (whose length is a multiple of 4).
fn le_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_counts_refuse_negative_and_overflowing_dims() {
        assert_eq!(element_count(&[2, 512, 60]), Some(61_440));
        assert_eq!(element_count(&[]), Some(1));
        assert_eq!(element_count(&[2, -1]), None);
        assert_eq!(element_count(&[i64::MAX, i64::MAX]), None);
    }

    #[test]
    fn little_endian_floats() {
        let bytes = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
        assert_eq!(le_f32(&bytes), [1.0, -2.0]);
    }
}
