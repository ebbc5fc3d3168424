//! Hostile model and input files (issue 12): a seeded mutation test of the three loaders
//! (ONNX, safetensors, npy) and the crafted cases found by the reliability sweep, kept as a
//! regression corpus. Every case must end in `Ok` or an error, never a panic, within a bounded
//! time, and every error message must be one line of bounded length.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod model_common;

use std::path::Path;
use std::time::{Duration, Instant};

use bilstm::StackShape;
use bilstm::model::proto::{ModelProto, StringStringEntryProto, TensorProto};
use bilstm::model::{self, ModelError, TensorProblem};
use bilstm::npy;
use bilstm::owned::OwnedStack;
use bilstm_test_support::{f32_bytes, npy_bytes};
use model_common::*;
use prost::Message;

/// The most one loader call may take on one mutated or crafted case (debug build, a loaded
/// 2-core CI machine: the valid cases take a few milliseconds).
const PER_CASE: Duration = Duration::from_secs(3);

/// A small seeded generator (SplitMix64): the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One mutation of `bytes`: bit flips, byte overwrites with interesting values, a cut, a
/// duplicated or deleted span, in the first 4 KiB (the headers and protobuf framing) or
/// anywhere.
fn mutate(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let head = b.len().min(4096);
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(0);
        }
        let at = if rng.below(4) == 0 {
            rng.below(b.len())
        } else {
            rng.below(head.min(b.len()))
        };
        match rng.below(7) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = [0x00, 0xff, 0x7f, 0x80, b'(', b'[', b'\'', b',', 0x1b][rng.below(9)],
            2 => b.truncate(at),
            3 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                let span = b[at..end].to_vec();
                b.splice(at..at, span);
            }
            4 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                b.drain(at..end);
            }
            5 => {
                let v = [u64::MAX, 1 << 32, 1 << 62, 0xffff_ffff][rng.below(4)];
                let end = (at + 8).min(b.len());
                let n = end - at;
                b[at..end].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            _ => b.insert(at, rng.next() as u8),
        }
    }
    b
}

/// Runs `f` on `case`, asserting no panic (a panic fails the test), a bounded time, and a
/// one-line message of bounded length on error.
fn check<T>(what: &str, k: usize, f: impl FnOnce() -> Result<T, String>) {
    let started = Instant::now();
    let r = f();
    let took = started.elapsed();
    assert!(took < PER_CASE, "{what} case {k} took {took:?}");
    if let Err(m) = r {
        assert!(
            m.len() < 4000,
            "{what} case {k}: a {}-byte message",
            m.len()
        );
    }
}

fn small_stack() -> OwnedStack {
    // 4 features keep layer 0 small, so each case decodes quickly in a debug build.
    let shape = StackShape {
        layers: 2,
        features: 4,
        ..StackShape::pyannote()
    };
    OwnedStack::random(&shape, 5, 0.3)
}

#[test]
fn mutated_files_never_panic_or_hang() {
    let stack = small_stack();
    let onnx = onnx_model(&stack, Storage::Raw).bytes();
    let onnx_float = onnx_model(&stack, Storage::Float).bytes();
    let st = torch_safetensors(&stack, "lstm.");
    let npy_ok = npy_bytes("<f4", false, "(2, 3, 4)", &f32_bytes(&[0.5; 24]));
    assert!(model::load_onnx_bytes(&onnx, None).is_ok());
    assert!(model::load_safetensors_bytes(&st).is_ok());
    let dir = tempfile::tempdir().unwrap();
    let npy_path = dir.path().join("x.npy");
    let started = Instant::now();
    let mut rng = Rng(0x1ce_b00c);
    let cases = 400;
    for k in 0..cases {
        let m = mutate(&mut rng, if k % 2 == 0 { &onnx } else { &onnx_float });
        check("onnx", k, || {
            model::load_onnx_bytes(&m, Some(dir.path())).map_err(|e| e.to_string())
        });
        let m = mutate(&mut rng, &st);
        check("safetensors", k, || {
            model::load_safetensors_bytes(&m).map_err(|e| e.to_string())
        });
        let m = mutate(&mut rng, &npy_ok);
        std::fs::write(&npy_path, &m).unwrap();
        check("npy", k, || {
            npy::read_f32_3d(&npy_path, 4).map_err(|e| e.to_string())
        });
    }
    println!("{} cases x 3 loaders in {:?}", cases, started.elapsed());
}

/// The crafted `.npy` cases: each is refused (or read) quickly with one line.
#[test]
fn crafted_npy_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.npy");
    let nested = |depth: usize| {
        format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 4), 'x': {}{}}}",
            "[(".repeat(depth),
            ")]".repeat(depth)
        )
    };
    let raw = |text: &str| {
        let mut h = text.as_bytes().to_vec();
        h.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(&[0u8; 16]);
        out
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // 672 bytes of nested brackets ran past 60 s in npyz's parser.
        (
            "nested brackets, 672 bytes",
            raw(&nested(150)),
            "the key \"x\"",
        ),
        ("nested brackets, 9 KB", raw(&nested(2200)), "the key \"x\""),
        (
            "huge header echoed",
            raw(&format!("{{'descr': '{}'", "A".repeat(9000))),
            "not a dictionary",
        ),
        (
            "escape sequence in descr",
            raw("{'descr': '\x1b[2J', 'fortran_order': False, 'shape': (1, 1, 4), }"),
            "\\u{1b}",
        ),
        (
            "zero windows, 2^40 frames",
            raw("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 4), }"),
            "",
        ),
        (
            "overflowing shape",
            raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }"),
            "overflows 64 bits",
        ),
        (
            "lying header length",
            {
                let mut b = raw("{}");
                b[8] = 0xff;
                b[9] = 0xff;
                b
            },
            "the header announces",
        ),
    ];
    for (what, bytes, want) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let started = Instant::now();
        let r = npy::read_f32_3d(&path, 4);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{what}: {:?}",
            started.elapsed()
        );
        match r {
            Ok(a) => assert_eq!(a.data.len(), 0, "{what}"),
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains(want), "{what}: {m}");
                assert!(m.len() < 600 && !m.contains('\x1b'), "{what}: {m:?}");
            }
        }
    }
}

fn tensor_named<'m>(m: &'m mut ModelProto, name: &str) -> &'m mut TensorProto {
    m.graph
        .as_mut()
        .unwrap()
        .initializer
        .iter_mut()
        .find(|t| t.name == name)
        .unwrap()
}

fn onnx_err(m: &ModelProto, dir: Option<&Path>) -> ModelError {
    model_error(model::load_onnx_bytes(&m.encode_to_vec(), dir))
}

/// The ONNX cases the sweep accepted silently or read without bound, each decided and
/// documented in the README ("Model files").
#[test]
fn crafted_onnx_corpus() {
    let stack = small_stack();
    let base = onnx_model(&stack, Storage::Raw).model;

    // A duplicated LSTM node ran as an extra layer: refused.
    let mut m = base.clone();
    let g = m.graph.as_mut().unwrap();
    let lstm = g.node.iter().position(|n| n.op_type == "LSTM").unwrap();
    let copy = g.node[lstm].clone();
    g.node.insert(lstm + 1, copy);
    let e = onnx_err(&m, None);
    assert!(matches!(e, ModelError::Duplicate { .. }), "{e}");

    // Two initializers of one name (the first used to win): refused.
    let mut m = base.clone();
    let g = m.graph.as_mut().unwrap();
    let mut twin = g
        .initializer
        .iter()
        .find(|t| t.name == "W_0")
        .unwrap()
        .clone();
    twin.raw_data.iter_mut().for_each(|b| *b = 0);
    g.initializer.push(twin);
    let e = onnx_err(&m, None);
    assert!(
        e.to_string()
            .contains("initializer name \"W_0\" appears twice"),
        "{e}"
    );

    // raw_data and float_data both set: refused.
    let mut m = base.clone();
    let t = tensor_named(&mut m, "R_0");
    t.float_data = vec![0.0; 2 * 512 * 128];
    let e = onnx_err(&m, None);
    assert!(
        matches!(
            &e,
            ModelError::Tensor {
                problem: TensorProblem::SeveralSources,
                ..
            }
        ),
        "{e}"
    );

    // A stored initial_h declaring 2 GiB of external data: judged by its dims, nothing read
    // (the data file does not even exist).
    let dir = tempfile::tempdir().unwrap();
    let mut m = base.clone();
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(TensorProto {
        name: "h0_stored".into(),
        dims: vec![2, 2_097_152, 128],
        data_type: 1,
        data_location: 1,
        external_data: vec![
            StringStringEntryProto {
                key: "location".into(),
                value: "h0.bin".into(),
            },
            StringStringEntryProto {
                key: "length".into(),
                value: "2147483648".into(),
            },
        ],
        ..Default::default()
    });
    for n in g.node.iter_mut().filter(|n| n.op_type == "LSTM") {
        n.input[5] = "h0_stored".into();
    }
    let started = Instant::now();
    let e = onnx_err(&m, Some(dir.path()));
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(
        e.to_string().contains("initial_h") && e.to_string().contains("dims"),
        "{e}"
    );

    // A node name with a terminal escape sequence: escaped in the message.
    let mut m = base.clone();
    let g = m.graph.as_mut().unwrap();
    let lstm = g.node.iter_mut().find(|n| n.op_type == "LSTM").unwrap();
    lstm.name = format!("\x1b]0;pwned\x07{}", "n".repeat(5000));
    lstm.attribute.push(int_attr("clip", 1));
    let e = onnx_err(&m, None).to_string();
    assert!(
        !e.contains('\x1b') && !e.contains('\x07') && e.len() < 1000,
        "{e:?}"
    );
}

/// Model and external-data paths that are not regular files are refused at once.
#[cfg(unix)]
#[test]
fn special_files_are_refused() {
    let e = model_error(model::load(Path::new("/dev/zero")));
    assert!(e.to_string().contains("character device"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("m.onnx");
    if std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let started = Instant::now();
        let e = model_error(model::load(&fifo));
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(1));
        // External data that is a FIFO.
        let stack = small_stack();
        let built = onnx_model(&stack, Storage::External("w.bin"));
        let data = dir.path().join("w.bin");
        std::process::Command::new("mkfifo")
            .arg(&data)
            .status()
            .unwrap();
        let model_path = dir.path().join("x.onnx");
        std::fs::write(&model_path, built.bytes()).unwrap();
        let e = model_error(model::load(&model_path));
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
