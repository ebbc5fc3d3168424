//! ONNX and safetensors models built here from seeded weights load into the same stack,
//! run on the CPU backend within 1e-5 of the f64 reference, and give each other's bits.

mod model_common;

use bilstm::model::{self, ModelError, ModelFormat};
use bilstm::{BackendError, ErrorKind, GateOrder, StackShape};
use bilstm_core::reference::relative_l2;
use model_common::*;

/// Frames per window in these tests: short, so the f64 reference stays quick.
const FRAMES: usize = 17;
/// Windows per batch.
const BATCH: usize = 2;

#[test]
fn raw_data_model_matches_the_reference_in_onnx_gate_order() {
    let torch = stack(4, 60, 11);
    let built = onnx_model(&torch, Storage::Raw);
    let loaded = model::load_onnx_bytes(&built.bytes(), None).unwrap();
    assert_eq!(loaded.format, ModelFormat::Onnx);
    assert_eq!(
        loaded.description,
        "ONNX bytes: 4 LSTM nodes lstm_0..lstm_3, 60 features, hidden 128"
    );
    assert_eq!(loaded.stack.shape, StackShape::pyannote());
    assert_eq!(loaded.stack.order, GateOrder::Onnx);
    // The same logical weights, kept in ONNX's gate order.
    assert_eq!(loaded.stack, torch.with_order(GateOrder::Onnx).unwrap());

    let got = run_cpu(&loaded.stack, FRAMES, BATCH);
    let want = run_reference(&torch, FRAMES, BATCH);
    let err = relative_l2(&got, &want);
    println!("ONNX raw_data model, CPU vs f64: relative L2 {err:.3e}");
    assert!(err <= 1e-5, "relative L2 {err:e}");
    // Packing maps the gates: the ONNX-order stack runs to the PyTorch-order stack's bits.
    assert_eq!(bits(&got), bits(&run_cpu(&torch, FRAMES, BATCH)));
}

#[test]
fn float_data_model_gives_the_raw_data_bits() {
    let torch = stack(2, 60, 12);
    let raw = model::load_onnx_bytes(&onnx_model(&torch, Storage::Raw).bytes(), None).unwrap();
    let float = model::load_onnx_bytes(&onnx_model(&torch, Storage::Float).bytes(), None).unwrap();
    assert_eq!(float.stack, raw.stack);
    let got = run_cpu(&float.stack, FRAMES, BATCH);
    assert!(relative_l2(&got, &run_reference(&torch, FRAMES, BATCH)) <= 1e-5);
    assert_eq!(bits(&got), bits(&run_cpu(&raw.stack, FRAMES, BATCH)));
}

#[test]
fn external_data_is_read_from_the_model_directory() {
    let torch = stack(4, 60, 13);
    let built = onnx_model(&torch, Storage::External("weights.bin"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg.onnx");
    std::fs::write(&path, built.bytes()).unwrap();
    std::fs::write(dir.path().join("weights.bin"), &built.external).unwrap();
    // The model itself holds no weights.
    assert!(built.bytes().len() < 4096);

    let loaded = model::load_onnx(&path).unwrap();
    assert_eq!(loaded.stack, torch.with_order(GateOrder::Onnx).unwrap());
    assert_eq!(
        loaded.description,
        format!(
            "ONNX model {}: 4 LSTM nodes lstm_0..lstm_3, 60 features, hidden 128",
            path.display()
        )
    );
    let got = run_cpu(&loaded.stack, FRAMES, BATCH);
    assert!(relative_l2(&got, &run_reference(&torch, FRAMES, BATCH)) <= 1e-5);

    // Through `load` (by extension) and `load_onnx_bytes` with the directory: the same.
    assert_eq!(model::load(&path).unwrap().stack, loaded.stack);
    let bytes = std::fs::read(&path).unwrap();
    let from_bytes = model::load_onnx_bytes(&bytes, Some(dir.path())).unwrap();
    assert_eq!(from_bytes.stack, loaded.stack);
}

#[test]
fn safetensors_in_pytorch_order_gives_the_onnx_bits() {
    let torch = stack(4, 60, 14);
    let onnx = model::load_onnx_bytes(&onnx_model(&torch, Storage::Raw).bytes(), None).unwrap();
    let st = model::load_safetensors_bytes(&torch_safetensors(&torch, "lstm.")).unwrap();
    assert_eq!(st.format, ModelFormat::Safetensors);
    assert_eq!(st.stack.order, GateOrder::Torch);
    assert_eq!(st.stack, torch);
    assert_eq!(
        st.description,
        "safetensors bytes: 4 LSTM layers under prefix \"lstm.\", 60 features, hidden 128"
    );
    // Different gate orders in memory, identical outputs bit for bit.
    assert_ne!(
        st.stack.layers[0].forward.weight_ih,
        onnx.stack.layers[0].forward.weight_ih
    );
    let from_st = run_cpu(&st.stack, FRAMES, BATCH);
    let from_onnx = run_cpu(&onnx.stack, FRAMES, BATCH);
    assert_eq!(bits(&from_st), bits(&from_onnx));
    assert!(relative_l2(&from_st, &run_reference(&torch, FRAMES, BATCH)) <= 1e-5);
}

#[test]
fn operators_and_constants_around_the_lstm_nodes_are_ignored() {
    let torch = stack(2, 60, 15);
    let mut built = onnx_model(&torch, Storage::Raw);
    let graph = built.graph();
    // A head after the stack, as in pyannote's model (Linear layers, activations)...
    graph
        .node
        .push(node("Slice", "head_slice", &["y"], &["y_cut"]));
    graph
        .node
        .push(node("Concat", "head_concat", &["y_cut", "y"], &["y_cat"]));
    graph
        .node
        .push(node("Gemm", "head_linear", &["y_cat"], &["logits"]));
    graph
        .node
        .push(node("LogSoftmax", "head_softmax", &["logits"], &["scores"]));
    graph
        .node
        .insert(0, node("Identity", "front", &["audio"], &["features"]));
    // ...and layer 1's B held by a `Constant` node instead of an initializer.
    let b1 = {
        let pos = graph
            .initializer
            .iter()
            .position(|t| t.name == "B_1")
            .unwrap();
        graph.initializer.remove(pos)
    };
    let mut constant = node("Constant", "bias_1", &[], &["B_1"]);
    constant
        .attribute
        .push(bilstm::model::proto::AttributeProto {
            name: "value".into(),
            t: Some(b1),
            r#type: bilstm::model::proto::attribute_type::TENSOR,
            ..Default::default()
        });
    graph.node.insert(1, constant);
    // Nodes of another domain named LSTM are not ONNX LSTMs.
    let mut custom = node("LSTM", "vendor_lstm", &["scores"], &["other"]);
    custom.domain = "com.example".into();
    graph.node.push(custom);

    let loaded = model::load_onnx_bytes(&built.bytes(), None).unwrap();
    assert_eq!(loaded.stack, torch.with_order(GateOrder::Onnx).unwrap());
    assert_eq!(
        loaded.description,
        "ONNX bytes: 2 LSTM nodes lstm_0..lstm_1, 60 features, hidden 128"
    );
}

#[test]
fn any_feature_count_and_one_to_eight_layers_load() {
    let one = stack(1, 7, 16);
    let mut built = onnx_model(&one, Storage::Float);
    built.lstm(0).name.clear();
    let loaded = model::load_onnx_bytes(&built.bytes(), None).unwrap();
    assert_eq!(
        loaded.description,
        "ONNX bytes: 1 LSTM node #0, 7 features, hidden 128"
    );
    assert_eq!(loaded.stack.shape.features, 7);
    assert_eq!(loaded.stack.shape.layers, 1);
    let got = run_cpu(&loaded.stack, FRAMES, BATCH);
    assert!(relative_l2(&got, &run_reference(&one, FRAMES, BATCH)) <= 1e-5);

    // Eight layers is the most; the graph's attribute order does not matter.
    let eight = stack(8, 3, 17);
    let mut built = onnx_model(&eight, Storage::Raw);
    built.lstm(5).attribute.reverse();
    let loaded = model::load_onnx_bytes(&built.bytes(), None).unwrap();
    assert_eq!(loaded.stack.shape.layers, 8);
    assert_eq!(loaded.stack, eight.with_order(GateOrder::Onnx).unwrap());
}

#[test]
fn omitted_bias_means_zeros_in_both_formats() {
    let mut torch = stack(2, 60, 18);
    for layer in &mut torch.layers {
        for d in [&mut layer.forward, &mut layer.reverse] {
            d.bias_ih.fill(0.0);
            d.bias_hh.fill(0.0);
        }
    }
    let mut built = onnx_model(&torch, Storage::Raw);
    for k in 0..2 {
        built.lstm(k).input[3].clear(); // B omitted: an empty input name
    }
    built
        .graph()
        .initializer
        .retain(|t| !t.name.starts_with("B_"));
    let loaded = model::load_onnx_bytes(&built.bytes(), None).unwrap();
    assert_eq!(loaded.stack, torch.with_order(GateOrder::Onnx).unwrap());

    // nn.LSTM(bias=False): no bias tensor at all.
    let mut tensors = torch_tensors(&torch, "");
    tensors.retain(|(name, _)| !name.starts_with("bias_"));
    let st = model::load_safetensors_bytes(&write_safetensors(&tensors)).unwrap();
    assert_eq!(st.stack, torch);
    assert!(st.description.ends_with(", no biases (zeros)"));
}

#[test]
fn stored_initial_state_must_be_zeros() {
    let torch = stack(1, 60, 19);
    let mut built = onnx_model(&torch, Storage::Raw);
    let mut scratch = Vec::new();
    let zeros = f32_tensor(
        "h_init",
        &[2, 1, 128],
        &[0.0; 256],
        Storage::Raw,
        &mut scratch,
    );
    built.graph().initializer.push(zeros);
    built.lstm(0).input[5] = "h_init".into();
    built.lstm(0).input[6] = "h_init".into();
    assert!(model::load_onnx_bytes(&built.bytes(), None).is_ok());

    built.initializer("h_init").raw_data[4..8].copy_from_slice(&0.5f32.to_le_bytes());
    let err = model_error(model::load_onnx_bytes(&built.bytes(), None));
    assert!(matches!(
        err,
        ModelError::Input {
            input: "initial_h",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "LSTM node \"lstm_0\" (layer 0): input initial_h (\"h_init\") is stored with values \
         other than FLOAT zeros; bilstm starts every window from h0 = c0 = 0"
    );
}

#[test]
fn load_picks_the_format_by_extension_then_by_first_bytes() {
    let torch = stack(1, 60, 20);
    let dir = tempfile::tempdir().unwrap();
    let onnx_bytes = onnx_model(&torch, Storage::Raw).bytes();
    let st_bytes = torch_safetensors(&torch, "model.rnn.");
    for (name, bytes, format) in [
        ("a.onnx", &onnx_bytes, ModelFormat::Onnx),
        ("b.ONNX", &onnx_bytes, ModelFormat::Onnx),
        ("c.safetensors", &st_bytes, ModelFormat::Safetensors),
        ("onnx_without_extension", &onnx_bytes, ModelFormat::Onnx),
        ("d.bin", &st_bytes, ModelFormat::Safetensors),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let loaded = model::load(&path).unwrap();
        assert_eq!(loaded.format, format, "{name}");
        assert!(loaded.description.contains(name), "{}", loaded.description);
    }

    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "not a model").unwrap();
    let err = model_error(model::load(&path));
    assert!(matches!(err, ModelError::UnknownFormat { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: unknown model format (the name ends neither in .onnx nor in .safetensors, \
             and the first bytes match neither format)",
            path.display()
        )
    );
}

#[test]
fn a_missing_file_is_invalid_input_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["absent.onnx", "absent.safetensors", "absent"] {
        let path = dir.path().join(name);
        let result = model::load(&path);
        let Err(e) = &result else {
            panic!("{name} loaded")
        };
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let err = model_error(result);
        assert!(matches!(err, ModelError::Io { .. }));
        assert!(
            err.to_string()
                .starts_with(&format!("cannot read model {}: ", path.display())),
            "{err}"
        );
    }
}
