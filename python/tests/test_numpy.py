"""The numpy API: the same bits as the command line on the CPU backend, every bad input, the GIL
released while a pass runs."""

import json
import struct
import threading
import time

import numpy as np
import pytest

import bilstm
from conftest import ROOT, rel_l2

FIXTURE = ROOT / "tests" / "fixtures" / "torch-2.11-lstm1"


def normal(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def torch_state(layers=4, seed=5, scale=0.3, prefix="lstm."):
    """A random nn.LSTM(60, 128, layers, bidirectional) state dict as float32 arrays."""
    rng = np.random.default_rng(seed)
    state = {}
    for k in range(layers):
        width = 60 if k == 0 else 256
        for suffix in ("", "_reverse"):
            for name, shape in (
                (f"weight_ih_l{k}", (512, width)),
                (f"weight_hh_l{k}", (512, 128)),
                (f"bias_ih_l{k}", (512,)),
                (f"bias_hh_l{k}", (512,)),
            ):
                state[prefix + name + suffix] = rng.uniform(-scale, scale, shape).astype(
                    np.float32
                )
    return state


def write_safetensors(path, state):
    """A safetensors file written by hand (the format: u64 header length, JSON, data)."""
    header, blobs, offset = {}, [], 0
    for name, value in state.items():
        data = np.ascontiguousarray(value, dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(value.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


@pytest.fixture(scope="module")
def cpu_model():
    return bilstm.Model(backend="cpu")


# --- the same bits as the command line -------------------------------------------------------


def test_builtin_matches_cli_bit_for_bit(tmp_path, cli, cpu_model):
    x = normal((3, 97, 60), seed=2)
    np.save(tmp_path / "x.npy", x)
    cli("--backend", "cpu", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    want = np.load(tmp_path / "y.npy")
    got = cpu_model(x)
    assert got.dtype == np.float32 and got.shape == (3, 97, 256)
    assert got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_safetensors_and_torch_state_match_cli(tmp_path, cli):
    state = torch_state()
    write_safetensors(tmp_path / "lstm.safetensors", state)
    x = normal((2, 40, 60), seed=3)
    np.save(tmp_path / "x.npy", x)
    cli(
        "--backend", "cpu", "--model", tmp_path / "lstm.safetensors",
        "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
    )
    want = np.load(tmp_path / "y.npy").view(np.uint32)
    from_file = bilstm.Model(tmp_path / "lstm.safetensors", backend="cpu")
    from_bytes = bilstm.Model.from_safetensors_bytes(
        (tmp_path / "lstm.safetensors").read_bytes(), backend="cpu"
    )
    from_state = bilstm.Model.from_torch_state(state, backend="cpu")
    for model in (from_file, from_bytes, from_state):
        assert np.array_equal(model(x).view(np.uint32), want)
    assert "safetensors" in from_file.description
    # A built-in model gives other bits: the weights really are the file's.
    assert not np.array_equal(bilstm.Model(backend="cpu")(x).view(np.uint32), want)


def test_onnx_export_matches_cli_and_torch(tmp_path, cli):
    model = bilstm.Model(FIXTURE / "model.onnx", backend="cpu")
    assert model.layers == 1 and model.features == 60
    x = np.load(FIXTURE / "x.npy")
    cli(
        "--backend", "cpu", "--model", FIXTURE / "model.onnx",
        "--input", FIXTURE / "x.npy", "--output", tmp_path / "y.npy",
    )
    got = model(x)
    assert np.array_equal(got.view(np.uint32), np.load(tmp_path / "y.npy").view(np.uint32))
    want = np.fromfile(FIXTURE / "y_f64.bin", dtype="<f8").reshape(got.shape)
    assert rel_l2(got, want) < 1e-5


def test_layouts_and_batches_give_the_same_bits(cpu_model):
    x = normal((4, 33, 60), seed=4)
    want = cpu_model(x).view(np.uint32)
    fortran = np.asfortranarray(x)
    strided = np.zeros((4, 33, 120), np.float32)[:, :, ::2]
    strided[...] = x
    for variant in (fortran, strided, x[::-1][::-1]):
        assert np.array_equal(cpu_model(variant).view(np.uint32), want)
    # One window at a time, then a larger batch, then other frame counts: same bits per window.
    for b in range(4):
        assert np.array_equal(cpu_model(x[b : b + 1]).view(np.uint32), want[b : b + 1])
    assert np.array_equal(cpu_model.forward(x).view(np.uint32), want)
    short = cpu_model(x[:, :10])
    assert short.shape == (4, 10, 256)
    assert np.array_equal(cpu_model(x).view(np.uint32), want)


def test_forward_with_state(cpu_model):
    x = normal((2, 21, 60), seed=6)
    out, h_n, c_n = cpu_model.forward_with_state(x)
    assert np.array_equal(out.view(np.uint32), cpu_model(x).view(np.uint32))
    assert h_n.shape == c_n.shape == (8, 2, 128)
    assert h_n.dtype == c_n.dtype == np.float32
    # nn.LSTM's layout: row 2 * layer + direction; the last layer's forward final h is the
    # output's last frame, its reverse final h the output's first frame.
    assert np.array_equal(h_n[6], out[:, -1, :128])
    assert np.array_equal(h_n[7], out[:, 0, 128:])
    assert np.all(np.abs(h_n) < 1) and not np.array_equal(h_n, c_n)


def test_empty_batch(cpu_model):
    y = cpu_model(np.zeros((0, 7, 60), np.float32))
    assert y.shape == (0, 7, 256) and y.dtype == np.float32
    out, h_n, c_n = cpu_model.forward_with_state(np.zeros((0, 7, 60), np.float32))
    assert out.shape == (0, 7, 256) and h_n.shape == (8, 0, 128)


def test_attributes(cpu_model):
    assert cpu_model.backend == "cpu"
    assert cpu_model.backend_reason == "asked for the CPU"
    assert cpu_model.plan is None and cpu_model.plan_for(32) is None
    assert cpu_model.device is None
    assert cpu_model.math == "fp32"
    assert (cpu_model.features, cpu_model.layers, cpu_model.hidden) == (60, 4, 128)
    assert cpu_model.description.startswith("built-in model: 4 layers")
    assert "backend cpu" in repr(cpu_model)
    assert bilstm.__version__ == "0.1.0"
    assert issubclass(bilstm.BilstmError, RuntimeError)


def test_auto_says_why():
    model = bilstm.Model(math="tf32")
    assert model.backend in ("cpu", "cuda")
    assert model.backend_reason
    assert model.math == "tf32"
    if model.backend == "cuda":
        assert model.plan and all(":" in line for line in model.plan)
    else:
        assert "CUDA" in model.backend_reason


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, error, message",
    [
        (np.zeros((1, 5, 60), np.float64), TypeError, "dtype float64 is not float32"),
        (np.zeros((1, 5, 60), np.float16), TypeError, "dtype float16 is not float32"),
        (np.zeros((1, 5, 60), np.int32), TypeError, "dtype int32 is not float32"),
        (np.zeros((1, 5, 60), ">f4"), TypeError, "is not float32"),
        (np.zeros((5, 60), np.float32), ValueError, "has rank 2, expected rank 3 [batch, frames, 60]"),
        (np.zeros((1, 1, 5, 60), np.float32), ValueError, "has rank 4"),
        (np.zeros((1, 5, 61), np.float32), ValueError, "has 61 values per frame, the model takes 60"),
        (np.zeros((2, 0, 60), np.float32), ValueError, "has no frames: a window needs at least one"),
        ([[[0.0] * 60]], TypeError, "expected a numpy.ndarray of float32"),
        (None, TypeError, "got NoneType"),
    ],
)
def test_bad_input(cpu_model, x, error, message):
    with pytest.raises(error) as info:
        cpu_model(x)
    assert message in str(info.value)
    with pytest.raises(error):
        cpu_model.forward_with_state(x)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="backend must be 'auto', 'cpu' or 'cuda'"):
        bilstm.Model(backend="gpu")
    with pytest.raises(ValueError, match="math must be 'fp32' or 'tf32'"):
        bilstm.Model(math="fp16")
    with pytest.raises(bilstm.BilstmError, match="cannot read model .*missing.onnx"):
        bilstm.Model(tmp_path / "missing.onnx")
    (tmp_path / "junk.bin").write_bytes(b"not a model at all")
    with pytest.raises(bilstm.BilstmError, match="junk.bin"):
        bilstm.Model(tmp_path / "junk.bin")
    with pytest.raises(bilstm.BilstmError):
        bilstm.Model.from_safetensors_bytes(b"\x00" * 16)


def test_bad_torch_state():
    state = torch_state(layers=1, prefix="")
    with pytest.raises(TypeError, match="weights\\['weight_ih_l0'\\]: dtype float64"):
        bilstm.Model.from_torch_state({**state, "weight_ih_l0": state["weight_ih_l0"].astype(np.float64)})
    with pytest.raises(TypeError, match="must be a str"):
        bilstm.Model.from_torch_state({**state, 3: state["bias_ih_l0"]})
    with pytest.raises(TypeError, match="numpy.ndarray"):
        bilstm.Model.from_torch_state({**state, "bias_ih_l0": [0.0] * 512})
    missing = dict(state)
    del missing["weight_hh_l0_reverse"]
    with pytest.raises(bilstm.BilstmError, match="weight_hh_l0_reverse"):
        bilstm.Model.from_torch_state(missing, backend="cpu")
    wrong = {**state, "weight_hh_l0": np.zeros((512, 64), np.float32)}
    with pytest.raises(bilstm.BilstmError, match="weight_hh_l0"):
        bilstm.Model.from_torch_state(wrong, backend="cpu")


def test_cuda_without_gpu_is_an_error():
    if bilstm.Model().backend == "cuda":
        pytest.skip("a GPU is usable here")
    with pytest.raises(bilstm.BilstmError, match="(?i)cuda"):
        bilstm.Model(backend="cuda")


# --- threads -------------------------------------------------------------------------------


def test_gil_released_during_a_pass(cpu_model):
    x = normal((8, 589, 60), seed=7)
    cpu_model(x[:1])  # prepared, warm
    started, done = threading.Event(), threading.Event()
    took = []

    def work():
        started.set()
        t0 = time.perf_counter()
        cpu_model(x)
        took.append(time.perf_counter() - t0)
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    ticks, last, longest = 0, time.perf_counter(), 0.0
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
        ticks += 1
    worker.join()
    assert took and took[0] > 0.05, f"the pass took {took}: too short to tell"
    # With the GIL held for the whole pass this thread would stall for all of it.
    assert longest < 0.5 * took[0], f"main thread stalled {longest:.3f} s of a {took[0]:.3f} s pass"
    assert ticks > 1000


def test_two_threads_share_a_model(cpu_model):
    xs = [normal((2, 50, 60), seed=s) for s in (10, 11)]
    want = [cpu_model(x).view(np.uint32) for x in xs]
    got = [None, None]

    def work(i):
        for _ in range(3):
            got[i] = cpu_model(xs[i]).view(np.uint32)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
