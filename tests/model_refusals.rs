//! Every model bilstm cannot run faithfully is refused with an error naming the file, node,
//! attribute or tensor at fault; nothing panics.

mod model_common;

use bilstm::model::proto::{DATA_TYPE_DOUBLE, ModelProto};
use bilstm::model::{self, ModelError, TensorProblem};
use bilstm::{BackendError, ErrorKind};
use bilstm_core::layout::Tensor;
use model_common::*;
use prost::Message;
use safetensors::tensor::Dtype;

/// A two-layer pyannote-width model: enough to check chaining, quick to encode.
fn base() -> Built {
    onnx_model(&stack(2, 60, 21), Storage::Raw)
}

/// Loads `built` from bytes and returns its error, checking the kind.
fn refused(built: &Built, kind: ErrorKind) -> ModelError {
    let result = model::load_onnx_bytes(&built.bytes(), None);
    if let Err(e) = &result {
        assert_eq!(e.kind(), kind, "{e}");
    }
    model_error(result)
}

#[test]
fn wrong_hidden_size() {
    let mut m = base();
    set_attr(m.lstm(1), int_attr("hidden_size", 64));
    let err = refused(&m, ErrorKind::Unsupported);
    assert!(matches!(&err, ModelError::Attribute { attribute, .. } if attribute == "hidden_size"));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_1\" (layer 1): attribute hidden_size = 64 is not supported \
         (bilstm needs 128)"
    );
}

#[test]
fn forward_or_absent_direction() {
    let mut m = base();
    set_attr(m.lstm(0), str_attr("direction", "forward"));
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_0\" (layer 0): attribute direction = \"forward\" is not supported \
         (bilstm needs \"bidirectional\")"
    );
    m.lstm(0).attribute.retain(|a| a.name != "direction");
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_0\" (layer 0): attribute direction = absent (the default, \
         \"forward\") is not supported (bilstm needs \"bidirectional\")"
    );
}

#[test]
fn clip_set() {
    let mut m = base();
    set_attr(m.lstm(1), float_attr("clip", 3.5));
    let err = refused(&m, ErrorKind::Unsupported);
    assert!(
        matches!(&err, ModelError::Attribute { attribute, found, .. }
        if attribute == "clip" && found == "3.5")
    );
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_1\" (layer 1): attribute clip = 3.5 is not supported \
         (bilstm needs no clip)"
    );
}

#[test]
fn input_forget_set_but_zero_is_fine() {
    let mut m = base();
    set_attr(m.lstm(0), int_attr("input_forget", 0));
    assert!(model::load_onnx_bytes(&m.bytes(), None).is_ok());
    set_attr(m.lstm(0), int_attr("input_forget", 1));
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_0\" (layer 0): attribute input_forget = 1 is not supported \
         (bilstm needs 0 or absent)"
    );
}

#[test]
fn layout_one() {
    let mut m = base();
    set_attr(m.lstm(0), int_attr("layout", 0));
    assert!(model::load_onnx_bytes(&m.bytes(), None).is_ok());
    set_attr(m.lstm(0), int_attr("layout", 1));
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_0\" (layer 0): attribute layout = 1 is not supported \
         (bilstm needs 0 or absent (X as [seq, batch, features]))"
    );
}

#[test]
fn activations_other_than_the_default() {
    let mut m = base();
    let default = ["Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"];
    set_attr(m.lstm(0), strings_attr("activations", &default));
    assert!(model::load_onnx_bytes(&m.bytes(), None).is_ok());
    let relu = ["Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh", "Relu"];
    set_attr(m.lstm(0), strings_attr("activations", &relu));
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_0\" (layer 0): attribute activations = [\"Sigmoid\", \"Tanh\", \
         \"Relu\", \"Sigmoid\", \"Tanh\", \"Relu\"] is not supported (bilstm needs the default \
         Sigmoid, Tanh, Tanh for both directions)"
    );
    set_attr(m.lstm(0), strings_attr("activations", &default[..3]));
    assert!(matches!(
        refused(&m, ErrorKind::Unsupported),
        ModelError::Attribute { .. }
    ));
}

#[test]
fn unknown_attribute() {
    let mut m = base();
    set_attr(m.lstm(1), int_attr("peephole_mode", 2));
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_1\" (layer 1): attribute peephole_mode = 2 is not supported \
         (bilstm needs only the attributes of the ONNX LSTM operator)"
    );
}

#[test]
fn peepholes() {
    let mut m = base();
    let mut file = Vec::new();
    let p = f32_tensor("P_0", &[2, 384], &[0.1; 768], Storage::Raw, &mut file);
    m.graph().initializer.push(p);
    m.lstm(0).input.push("P_0".into());
    let err = refused(&m, ErrorKind::Unsupported);
    assert!(matches!(err, ModelError::Input { input: "P", .. }));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_0\" (layer 0): input P (\"P_0\") is set; peephole connections are \
         not supported"
    );
}

#[test]
fn sequence_lens() {
    let mut m = base();
    m.lstm(1).input[4] = "lengths".into();
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "LSTM node \"lstm_1\" (layer 1): input sequence_lens (\"lengths\") is set; bilstm runs \
         every window at its full length"
    );
}

#[test]
fn widths_that_do_not_chain() {
    // Layer 1 reads 60 values per frame: it was exported from a different stack.
    let mut m = base();
    let w0 = m.initializer("W_0").clone();
    let w1 = m.initializer("W_1");
    *w1 = w0;
    w1.name = "W_1".into();
    let err = refused(&m, ErrorKind::InvalidInput);
    assert!(matches!(
        err,
        ModelError::Tensor {
            tensor: Tensor::W,
            problem: TensorProblem::Width {
                layer: 1,
                expected: 256,
                found: 60
            },
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_1\" (layer 1): W (\"W_1\"): input width 60, but layer 0 outputs 256 \
         values per frame: the LSTM widths do not chain"
    );
}

#[test]
fn double_data_type() {
    let mut m = base();
    let r = m.initializer("R_1");
    r.double_data = r
        .raw_data
        .chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
        .collect();
    r.raw_data.clear();
    r.data_type = DATA_TYPE_DOUBLE;
    let err = refused(&m, ErrorKind::Unsupported);
    assert!(matches!(
        err,
        ModelError::Tensor {
            tensor: Tensor::R,
            problem: TensorProblem::DataType { found: 11 },
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_1\" (layer 1): R (\"R_1\"): data_type DOUBLE (11); bilstm reads \
         FLOAT (1) only"
    );
}

#[test]
fn missing_or_computed_initializer() {
    let mut m = base();
    m.graph().initializer.retain(|t| t.name != "R_0");
    let err = refused(&m, ErrorKind::InvalidInput);
    assert!(matches!(
        err,
        ModelError::Tensor {
            tensor: Tensor::R,
            problem: TensorProblem::Missing,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_0\" (layer 0): R (\"R_0\"): no initializer or Constant node of that name"
    );

    // Exported without constant folding: W is the output of a Concat.
    let mut m = base();
    m.graph().initializer.retain(|t| t.name != "W_1");
    m.graph()
        .node
        .insert(0, node("Concat", "concat_w", &["w_fwd", "w_rev"], &["W_1"]));
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "LSTM node \"lstm_1\" (layer 1): W (\"W_1\"): computed by Concat node \"concat_w\", not \
         stored as an initializer (export with constant folding)"
    );
}

#[test]
fn wrong_dims_and_data_lengths() {
    let mut m = base();
    m.initializer("B_0").dims = vec![2, 512];
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "LSTM node \"lstm_0\" (layer 0): B (\"B_0\"): dims [2, 512], expected [2, 1024]"
    );

    let mut m = base();
    m.initializer("R_1").raw_data.truncate(1000);
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "LSTM node \"lstm_1\" (layer 1): R (\"R_1\"): raw_data holds 1000 bytes, dims need \
         524288 (4 per f32)"
    );

    let mut m = onnx_model(&stack(1, 60, 23), Storage::Float);
    m.initializer("W_0").float_data.pop();
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "LSTM node \"lstm_0\" (layer 0): W (\"W_0\"): float_data holds 61439 values, dims \
         need 61440"
    );
    m.initializer("W_0").float_data.clear();
    assert!(matches!(
        refused(&m, ErrorKind::InvalidInput),
        ModelError::Tensor {
            problem: TensorProblem::NoData,
            ..
        }
    ));

    let mut m = base();
    m.initializer("W_0").dims = vec![512, 60];
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "LSTM node \"lstm_0\" (layer 0): W (\"W_0\"): dims [512, 60], expected [2, 512, features]"
    );
}

#[test]
fn too_many_features_is_a_core_refusal() {
    let mut m = onnx_model(&stack(1, 60, 24), Storage::Raw);
    m.initializer("W_0").dims = vec![2, 512, 2000];
    let err = model::load_onnx_bytes(&m.bytes(), None).err().unwrap();
    assert!(matches!(err, bilstm::Error::Core(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::Unsupported);
}

#[test]
fn non_finite_weight() {
    let mut m = base();
    m.initializer("W_1").raw_data[40..44].copy_from_slice(&f32::NAN.to_le_bytes());
    let err = refused(&m, ErrorKind::InvalidInput);
    assert!(matches!(
        err,
        ModelError::Tensor {
            problem: TensorProblem::NonFinite { index: 10, .. },
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_1\" (layer 1): W (\"W_1\"): value 10 is not finite (NaN)"
    );
}

#[test]
fn no_graph_no_lstm_too_many_lstms() {
    let empty = ModelProto {
        ir_version: 8,
        ..Default::default()
    };
    let err = model_error(model::load_onnx_bytes(&empty.encode_to_vec(), None));
    assert_eq!(err.to_string(), "ONNX bytes: the ONNX model has no graph");

    let mut m = base();
    for n in &mut m.graph().node {
        if n.op_type == "LSTM" {
            n.op_type = "GRU".into();
        }
    }
    assert_eq!(
        refused(&m, ErrorKind::InvalidInput).to_string(),
        "ONNX bytes: the ONNX graph has no LSTM node (op_type \"LSTM\", default domain)"
    );

    let mut m = base();
    let extra = m.lstm(1).clone();
    for k in 0..7 {
        // Distinct values in and out: the same node twice is refused as a duplicate.
        let mut node = extra.clone();
        node.input[0] = format!("x_extra_{k}");
        node.output = vec![format!("y_extra_{k}")];
        m.graph().node.push(node);
    }
    assert_eq!(
        refused(&m, ErrorKind::Unsupported).to_string(),
        "9 LSTM layers found; bilstm runs stacks of 1 to 8"
    );
}

#[test]
fn truncated_files_are_decode_errors_naming_the_path() {
    let bytes = base().bytes();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.onnx");
    // Cuts inside the header, inside a node, and inside the tensor data.
    for keep in [1, 7, 300, bytes.len() / 2, bytes.len() - 40] {
        std::fs::write(&path, &bytes[..keep]).unwrap();
        let result = model::load_onnx(&path);
        if let Err(e) = &result {
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
        }
        let err = model_error(result);
        assert!(matches!(err, ModelError::Decode { .. }), "{keep}: {err}");
        let prefix = format!(
            "{}: not a valid ONNX model (truncated or corrupt protobuf): ",
            path.display()
        );
        assert!(err.to_string().starts_with(&prefix), "{keep}: {err}");
    }
    // From memory, the origin is named as such.
    let err = model_error(model::load_onnx_bytes(&bytes[..bytes.len() / 3], None));
    assert!(
        err.to_string()
            .starts_with("ONNX bytes: not a valid ONNX model (truncated or corrupt protobuf): "),
        "{err}"
    );
}

#[test]
fn corrupted_bytes_are_decode_errors() {
    let mut bytes = base().bytes();
    // An invalid wire type (7) where the graph field's tag should be.
    let graph_tag = bytes.iter().position(|&b| b == 0x3a).unwrap();
    bytes[graph_tag] = 0x3f;
    let err = model_error(model::load_onnx_bytes(&bytes, None));
    assert!(matches!(err, ModelError::Decode { .. }), "{err}");

    // A varint that never ends.
    let mut bytes = base().bytes();
    bytes[..12].fill(0xff);
    let err = model_error(model::load_onnx_bytes(&bytes, None));
    assert!(matches!(err, ModelError::Decode { .. }), "{err}");
    assert!(err.to_string().contains("truncated or corrupt"), "{err}");

    // Random bytes never panic (each is an error or, rarely, an empty model).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in [0usize, 1, 5, 64, 4096] {
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert!(model::load_onnx_bytes(&junk, None).is_err());
        assert!(model::load_safetensors_bytes(&junk).is_err());
    }
}

#[test]
fn external_data_missing_escaping_or_out_of_range() {
    let torch = stack(1, 60, 25);
    let built = onnx_model(&torch, Storage::External("weights.bin"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, built.bytes()).unwrap();

    // The data file is not there.
    let err = model_error(model::load_onnx(&path));
    let data = dir.path().join("weights.bin");
    assert!(matches!(
        &err,
        ModelError::Tensor { tensor: Tensor::W, problem: TensorProblem::ExternalIo { path, .. }, .. }
            if *path == data
    ));
    assert!(
        err.to_string().starts_with(&format!(
            "LSTM node \"lstm_0\" (layer 0): W (\"W_0\"): cannot read external data {}: ",
            data.display()
        )),
        "{err}"
    );

    // Too short: the last tensor's bytes lie past its end.
    std::fs::write(&data, &built.external[..built.external.len() - 4]).unwrap();
    let err = model_error(model::load_onnx(&path));
    assert!(
        matches!(
            err,
            ModelError::Tensor {
                tensor: Tensor::B,
                problem: TensorProblem::ExternalRange { .. },
                ..
            }
        ),
        "{err}"
    );

    // Locations that leave the directory, even if the file exists there.
    std::fs::write(&data, &built.external).unwrap();
    for location in ["../weights.bin", "/etc/passwd", "sub/../../weights.bin", ""] {
        let mut m = onnx_model(&torch, Storage::External("weights.bin"));
        m.initializer("R_0").external_data[0].value = location.into();
        let bytes = m.bytes();
        let err = model_error(model::load_onnx_bytes(&bytes, Some(dir.path())));
        assert!(
            matches!(
                &err,
                ModelError::Tensor { tensor: Tensor::R, problem: TensorProblem::ExternalEscapes { location: l }, .. }
                    if l == location
            ),
            "{location}: {err}"
        );
    }
    let mut m = onnx_model(&torch, Storage::External("weights.bin"));
    m.initializer("R_0").external_data[0].value = "../weights.bin".into();
    assert_eq!(
        model_error(model::load_onnx_bytes(&m.bytes(), Some(dir.path()))).to_string(),
        "LSTM node \"lstm_0\" (layer 0): R (\"R_0\"): external data location \"../weights.bin\" \
         leaves the model's directory (absolute or with \"..\"): refused"
    );

    // From bytes without a directory.
    assert_eq!(
        model_error(model::load_onnx_bytes(&built.bytes(), None)).to_string(),
        "LSTM node \"lstm_0\" (layer 0): W (\"W_0\"): stored as external data, but no model \
         directory was given to find it in"
    );

    // A bad offset.
    let mut m = onnx_model(&torch, Storage::External("weights.bin"));
    m.initializer("W_0").external_data[1].value = "-4".into();
    assert_eq!(
        model_error(model::load_onnx_bytes(&m.bytes(), Some(dir.path()))).to_string(),
        "LSTM node \"lstm_0\" (layer 0): W (\"W_0\"): external data key \"offset\" = \"-4\" is \
         not a byte count"
    );
    // And everything in place loads.
    assert!(model::load_onnx(&path).is_ok());
}

// ---- safetensors ----

#[test]
fn safetensors_f16_tensor() {
    let torch = stack(2, 60, 26);
    let bytes = safetensors_with(&torch, "lstm.", |name, t| {
        if name == "lstm.weight_hh_l1_reverse" {
            t.dtype = Dtype::F16;
            t.bytes.truncate(t.bytes.len() / 2);
        }
    });
    let result = model::load_safetensors_bytes(&bytes);
    assert_eq!(
        result.as_ref().err().unwrap().kind(),
        ErrorKind::Unsupported
    );
    let err = model_error(result);
    assert!(matches!(&err, ModelError::Dtype { name, dtype }
        if name == "lstm.weight_hh_l1_reverse" && dtype == "F16"));
    assert_eq!(
        err.to_string(),
        "tensor \"lstm.weight_hh_l1_reverse\" is F16; bilstm reads F32 only"
    );
}

#[test]
fn safetensors_missing_reverse_tensor() {
    let torch = stack(2, 60, 27);
    let mut tensors = torch_tensors(&torch, "lstm.");
    tensors.retain(|(n, _)| n != "lstm.bias_ih_l1_reverse");
    let err = model_error(model::load_safetensors_bytes(&write_safetensors(&tensors)));
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. } if name == "lstm.bias_ih_l1_reverse")
    );
    assert_eq!(
        err.to_string(),
        "missing tensor \"lstm.bias_ih_l1_reverse\""
    );
}

#[test]
fn safetensors_wrong_shape() {
    let torch = stack(2, 60, 28);
    let bytes = safetensors_with(&torch, "lstm.", |name, t| {
        if name == "lstm.weight_hh_l0" {
            t.shape = vec![128, 512]; // transposed
        }
    });
    let err = model_error(model::load_safetensors_bytes(&bytes));
    assert!(matches!(&err, ModelError::Shape { name, expected, found }
        if name == "lstm.weight_hh_l0" && *expected == [512, 128] && *found == [128, 512]));
    assert_eq!(
        err.to_string(),
        "tensor \"lstm.weight_hh_l0\" has shape [128, 512], expected [512, 128]"
    );

    // Layer 1 must read 256 values per frame (the widths chain).
    let bytes = safetensors_with(&torch, "", |name, t| {
        if name == "weight_ih_l1" {
            t.shape = vec![512, 60];
            t.bytes.truncate(512 * 60 * 4);
        }
    });
    assert_eq!(
        model_error(model::load_safetensors_bytes(&bytes)).to_string(),
        "tensor \"weight_ih_l1\" has shape [512, 60], expected [512, 256]"
    );
}

#[test]
fn safetensors_prefixes_gaps_and_foreign_tensors() {
    let torch = stack(2, 60, 29);
    // Two stacks in one file.
    let mut tensors = torch_tensors(&torch, "encoder.lstm.");
    tensors.extend(torch_tensors(&torch, "decoder.lstm."));
    let err = model_error(model::load_safetensors_bytes(&write_safetensors(&tensors)));
    assert_eq!(
        err.to_string(),
        "several LSTM prefixes [\"decoder.lstm.\", \"encoder.lstm.\"]; bilstm loads one stack \
         per file"
    );

    // Other tensors of the network are ignored.
    let mut tensors = torch_tensors(&torch, "lstm.");
    tensors.push((
        "linear.0.weight".into(),
        RawTensor::f32(&[128, 256], &[0.0; 128 * 256]),
    ));
    tensors.push((
        "sincnet.conv1d.0.filterbank.low_hz_".into(),
        RawTensor::f32(&[40, 1], &[0.0; 40]),
    ));
    let st = model::load_safetensors_bytes(&write_safetensors(&tensors)).unwrap();
    assert_eq!(st.stack, torch);

    // A gap: layer 0 and 2 without layer 1.
    let three = stack(3, 60, 30);
    let mut tensors = torch_tensors(&three, "lstm.");
    tensors.retain(|(n, _)| !n.contains("_l1"));
    assert_eq!(
        model_error(model::load_safetensors_bytes(&write_safetensors(&tensors))).to_string(),
        "missing tensor \"lstm.weight_ih_l1\": layers are numbered from 0 without gaps, and \
         layer 2 exists"
    );

    // No LSTM at all.
    let tensors = vec![(
        "linear.weight".to_string(),
        RawTensor::f32(&[2], &[0.0, 1.0]),
    )];
    assert_eq!(
        model_error(model::load_safetensors_bytes(&write_safetensors(&tensors))).to_string(),
        "safetensors bytes: no PyTorch LSTM weights (no tensor name ends in \"weight_ih_l0\"; \
         found 1 tensors)"
    );

    // Projections (proj_size > 0).
    let mut tensors = torch_tensors(&torch, "lstm.");
    tensors.push((
        "lstm.weight_hr_l0".into(),
        RawTensor::f32(&[64, 128], &[0.0; 64 * 128]),
    ));
    assert_eq!(
        model_error(model::load_safetensors_bytes(&write_safetensors(&tensors))).to_string(),
        "tensor \"lstm.weight_hr_l0\": LSTM projections (proj_size > 0) are not supported"
    );
}

#[test]
fn safetensors_corrupt_and_non_finite() {
    let torch = stack(1, 60, 31);
    let bytes = torch_safetensors(&torch, "lstm.");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.safetensors");
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = model_error(model::load_safetensors(&path));
    assert!(matches!(err, ModelError::Safetensors { .. }));
    assert!(
        err.to_string().starts_with(&format!(
            "{}: not a valid safetensors file: ",
            path.display()
        )),
        "{err}"
    );

    let bytes = safetensors_with(&torch, "lstm.", |name, t| {
        if name == "lstm.bias_hh_l0" {
            t.bytes[8..12].copy_from_slice(&f32::INFINITY.to_le_bytes());
        }
    });
    assert_eq!(
        model_error(model::load_safetensors_bytes(&bytes)).to_string(),
        "tensor \"lstm.bias_hh_l0\": value 2 is not finite (inf)"
    );
}
