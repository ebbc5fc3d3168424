//! Shared by the `model_*` tests: builds ONNX models (prost messages) and PyTorch-named
//! safetensors files from seeded weights, and runs stacks on the CPU and the f64 reference.
// Each test file uses its own part of this module.
#![allow(dead_code)]
// Test helpers: a failure here is a failed test, so unwrap and panic say where it failed
// (clippy's allow-unwrap-in-tests covers `#[test]` functions, not their helpers).
#![allow(clippy::unwrap_used, clippy::panic)]

use bilstm::model::proto::{
    AttributeProto, DATA_LOCATION_EXTERNAL, DATA_TYPE_FLOAT, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, StringStringEntryProto, TensorProto, ValueInfoProto, attribute_type,
};
use bilstm::model::{LoadedModel, ModelError};
use bilstm::owned::{OwnedStack, random_input};
use bilstm::{Backend, BackendConfig, CpuBackend, MathMode, StackShape};
use bilstm_core::reference::{forward_f64, workspace_len};
use prost::Message;
use safetensors::tensor::{Dtype, TensorView};

/// `OwnedStack::random` weights of pyannote's shape with `layers` layers and `features`
/// inputs, uniform in ±0.3, PyTorch order.
pub fn stack(layers: usize, features: usize, seed: u64) -> OwnedStack {
    let shape = StackShape {
        features,
        layers,
        ..StackShape::pyannote()
    };
    OwnedStack::random(&shape, seed, 0.3)
}

/// Where an ONNX tensor keeps its values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Storage {
    /// `raw_data`, little-endian bytes.
    Raw,
    /// `float_data`.
    Float,
    /// A file beside the model (`location` = the given name), 4096-aligned offsets.
    External(&'static str),
}

/// An ONNX model and, for [`Storage::External`], the bytes of its data file.
pub struct Built {
    pub model: ModelProto,
    pub external: Vec<u8>,
}

impl Built {
    pub fn bytes(&self) -> Vec<u8> {
        self.model.encode_to_vec()
    }

    pub fn graph(&mut self) -> &mut GraphProto {
        self.model.graph.as_mut().unwrap()
    }

    /// The `k`-th LSTM node.
    pub fn lstm(&mut self, k: usize) -> &mut NodeProto {
        self.graph()
            .node
            .iter_mut()
            .filter(|n| n.op_type == "LSTM")
            .nth(k)
            .unwrap()
    }

    /// The initializer named `name`.
    pub fn initializer(&mut self, name: &str) -> &mut TensorProto {
        self.graph()
            .initializer
            .iter_mut()
            .find(|t| t.name == name)
            .unwrap()
    }
}

pub fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i,
        r#type: attribute_type::INT,
        ..Default::default()
    }
}

pub fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f,
        r#type: attribute_type::FLOAT,
        ..Default::default()
    }
}

pub fn str_attr(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        s: s.as_bytes().to_vec(),
        r#type: attribute_type::STRING,
        ..Default::default()
    }
}

pub fn strings_attr(name: &str, list: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        strings: list.iter().map(|s| s.as_bytes().to_vec()).collect(),
        r#type: attribute_type::STRINGS,
        ..Default::default()
    }
}

pub fn ints_attr(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: ints.to_vec(),
        r#type: attribute_type::INTS,
        ..Default::default()
    }
}

/// Replaces the attribute of the same name, or adds it.
pub fn set_attr(node: &mut NodeProto, attr: AttributeProto) {
    node.attribute.retain(|a| a.name != attr.name);
    node.attribute.push(attr);
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: inputs.iter().map(|s| (*s).into()).collect(),
        output: outputs.iter().map(|s| (*s).into()).collect(),
        ..Default::default()
    }
}

/// An int64 initializer (shapes for `Reshape`, `ConstantOfShape`).
pub fn int64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![values.len() as i64],
        data_type: 7,
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// An f32 tensor stored as `storage` says; external bytes are appended to `file`.
pub fn f32_tensor(
    name: &str,
    dims: &[i64],
    values: &[f32],
    storage: Storage,
    file: &mut Vec<u8>,
) -> TensorProto {
    let mut t = TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DATA_TYPE_FLOAT,
        ..Default::default()
    };
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    match storage {
        Storage::Raw => t.raw_data = bytes,
        Storage::Float => t.float_data = values.to_vec(),
        Storage::External(location) => {
            file.resize(file.len().next_multiple_of(4096), 0);
            let entry = |key: &str, value: String| StringStringEntryProto {
                key: key.into(),
                value,
            };
            t.external_data = vec![
                entry("location", location.into()),
                entry("offset", file.len().to_string()),
                entry("length", bytes.len().to_string()),
            ];
            t.data_location = DATA_LOCATION_EXTERNAL;
            file.extend_from_slice(&bytes);
        }
    }
    t
}

/// The ONNX graph `torch.onnx.export` makes of a batch-first `nn.LSTM` stack: `x [batch,
/// frames, F]` → Transpose → per layer `LSTM` (initial state from a `ConstantOfShape`) →
/// Transpose → Reshape → ... → Transpose → `y [batch, frames, 256]`. The LSTM nodes are
/// named `lstm_0`, `lstm_1`, ...; their tensors `W_k`, `R_k`, `B_k`.
pub fn onnx_model(stack: &OwnedStack, storage: Storage) -> Built {
    let onnx = stack.to_onnx().unwrap();
    let shape = stack.shape;
    let mut file = Vec::new();
    let mut nodes = vec![
        node("ConstantOfShape", "zeros", &["state_shape"], &["h0"]),
        node("Transpose", "to_time_major", &["x"], &["x_0"]),
    ];
    nodes[1].attribute.push(ints_attr("perm", &[1, 0, 2]));
    let mut initializers = vec![
        int64_tensor("state_shape", &[2, 1, 128]),
        int64_tensor("merge_dirs", &[0, 0, -1]),
    ];
    for (k, layer) in onnx.layers.iter().enumerate() {
        let width = shape.layer_input_width(k) as i64;
        let (x, w, r, b) = (
            format!("x_{k}"),
            format!("W_{k}"),
            format!("R_{k}"),
            format!("B_{k}"),
        );
        let (y, yt, next) = (format!("y_{k}"), format!("yt_{k}"), format!("x_{}", k + 1));
        let mut lstm = node(
            "LSTM",
            &format!("lstm_{k}"),
            &[&x, &w, &r, &b, "", "h0", "h0"],
            &[&y],
        );
        lstm.attribute = vec![
            int_attr("hidden_size", 128),
            str_attr("direction", "bidirectional"),
        ];
        nodes.push(lstm);
        let mut transpose = node("Transpose", &format!("transpose_{k}"), &[&y], &[&yt]);
        transpose.attribute.push(ints_attr("perm", &[0, 2, 1, 3]));
        nodes.push(transpose);
        nodes.push(node(
            "Reshape",
            &format!("reshape_{k}"),
            &[&yt, "merge_dirs"],
            &[&next],
        ));
        initializers.push(f32_tensor(
            &w,
            &[2, 512, width],
            &layer.w,
            storage,
            &mut file,
        ));
        initializers.push(f32_tensor(&r, &[2, 512, 128], &layer.r, storage, &mut file));
        initializers.push(f32_tensor(&b, &[2, 1024], &layer.b, storage, &mut file));
    }
    let last = format!("x_{}", onnx.layers.len());
    let mut out = node("Transpose", "to_batch_major", &[&last], &["y"]);
    out.attribute.push(ints_attr("perm", &[1, 0, 2]));
    nodes.push(out);
    let graph = GraphProto {
        node: nodes,
        name: "lstm_stack".into(),
        initializer: initializers,
        input: vec![ValueInfoProto { name: "x".into() }],
        output: vec![ValueInfoProto { name: "y".into() }],
    };
    Built {
        model: ModelProto {
            ir_version: 8,
            graph: Some(graph),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
        },
        external: file,
    }
}

/// The stack's tensors under PyTorch names with `prefix`, as a safetensors file. The stack
/// must be in PyTorch gate order.
pub fn torch_safetensors(stack: &OwnedStack, prefix: &str) -> Vec<u8> {
    safetensors_with(stack, prefix, |_, _| {})
}

/// As [`torch_safetensors`], letting `edit` change each `(name, tensor)` before writing;
/// `extra` tensors are added as given.
pub fn safetensors_with(
    stack: &OwnedStack,
    prefix: &str,
    mut edit: impl FnMut(&str, &mut RawTensor),
) -> Vec<u8> {
    let mut tensors = torch_tensors(stack, prefix);
    for (name, t) in &mut tensors {
        edit(name, t);
    }
    write_safetensors(&tensors)
}

/// A tensor about to be written: dtype, shape, bytes.
#[derive(Clone)]
pub struct RawTensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl RawTensor {
    pub fn f32(shape: &[usize], values: &[f32]) -> Self {
        RawTensor {
            dtype: Dtype::F32,
            shape: shape.to_vec(),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }
}

/// `(name, tensor)` for every tensor of a PyTorch-order stack.
pub fn torch_tensors(stack: &OwnedStack, prefix: &str) -> Vec<(String, RawTensor)> {
    assert_eq!(stack.order, bilstm::GateOrder::Torch);
    let mut out = Vec::new();
    for (k, layer) in stack.layers.iter().enumerate() {
        let width = stack.shape.layer_input_width(k);
        for (suffix, d) in [("", &layer.forward), ("_reverse", &layer.reverse)] {
            let mut add = |base: &str, shape: &[usize], v: &[f32]| {
                out.push((
                    format!("{prefix}{base}_l{k}{suffix}"),
                    RawTensor::f32(shape, v),
                ))
            };
            add("weight_ih", &[512, width], &d.weight_ih);
            add("weight_hh", &[512, 128], &d.weight_hh);
            add("bias_ih", &[512], &d.bias_ih);
            add("bias_hh", &[512], &d.bias_hh);
        }
    }
    out
}

/// Serialises `(name, tensor)` pairs with the safetensors crate.
pub fn write_safetensors(tensors: &[(String, RawTensor)]) -> Vec<u8> {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                TensorView::new(t.dtype, t.shape.clone(), &t.bytes).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

/// The CPU backend's output for `stack` on `batch` windows of `frames` frames (input seed 3).
pub fn run_cpu(stack: &OwnedStack, frames: usize, batch: usize) -> Vec<f32> {
    let shape = stack.shape.with_frames(frames);
    let weights = stack.weights().unwrap();
    let mut cpu = CpuBackend::new();
    cpu.prepare(
        &weights,
        &BackendConfig {
            shape,
            max_batch: batch,
            math: MathMode::Fp32,
        },
    )
    .unwrap();
    let input = random_input(&shape, batch, 3);
    let mut out = vec![0.0f32; shape.output_len(batch).unwrap()];
    cpu.forward(&input, batch, &mut out).unwrap();
    out
}

/// The f64 reference output for the same input as [`run_cpu`].
pub fn run_reference(stack: &OwnedStack, frames: usize, batch: usize) -> Vec<f64> {
    let shape = stack.shape.with_frames(frames);
    let mut s = stack.clone();
    s.shape = shape;
    let weights = s.weights().unwrap();
    let input = random_input(&shape, batch, 3);
    let mut ws = vec![0.0f64; workspace_len(&shape, batch).unwrap()];
    let mut out = vec![0.0f64; shape.output_len(batch).unwrap()];
    forward_f64(&weights, &input, batch, &mut ws, &mut out).unwrap();
    out
}

/// The bits of an output, for exact comparisons.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The model error of a load that must fail.
pub fn model_error(result: Result<LoadedModel, bilstm::Error>) -> ModelError {
    match result {
        Ok(m) => panic!("loaded, but should have failed: {}", m.description),
        Err(bilstm::Error::Model(e)) => *e,
        Err(other) => panic!("not a model error: {other}"),
    }
}
