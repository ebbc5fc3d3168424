"""bilstm.torch: the nn.LSTM drop-in. Skipped where torch is not importable (CI); the CUDA tests
run on the GPU machine (scripts/gpu-run.sh, group `python`), with that machine's torch."""

import json
import statistics

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import bilstm  # noqa: E402
import bilstm.torch as bt  # noqa: E402
from conftest import rel_l2  # noqa: E402

#: FP32 mode's GPU budget against float64 (core::accuracy::GPU_FP32_REL_L2, DESIGN §5).
GPU_FP32_REL_L2 = 2e-6
#: The CPU backend's budget (core::accuracy::CPU_FP32_REL_L2).
CPU_FP32_REL_L2 = 1e-5

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def pyannote_lstm(seed=0, scale=0.3):
    """pyannote's stack with weights U(-scale, scale) (the accuracy budgets' setting)."""
    torch.manual_seed(seed)
    lstm = nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for p in lstm.parameters():
            p.uniform_(-scale, scale)
    return lstm.eval()


def reference_f64(lstm, x):
    """nn.LSTM in float64 on the CPU: (output, h_n, c_n)."""
    ref = nn.LSTM(60, 128, num_layers=4, bidirectional=True, batch_first=True).double()
    ref.load_state_dict({k: v.detach().cpu().double() for k, v in lstm.state_dict().items()})
    with torch.no_grad():
        out, (h, c) = ref(x.detach().cpu().double())
    return out, h, c


class PyanNetLike(nn.Module):
    """The shape of pyannote's PyanNet after SincNet: LSTM, then linear layers."""

    def __init__(self):
        super().__init__()
        self.lstm = pyannote_lstm(seed=3, scale=0.09)
        self.linear = nn.ModuleList([nn.Linear(256, 128), nn.Linear(128, 128)])
        self.classifier = nn.Linear(128, 7)

    def forward(self, x):
        out, _ = self.lstm(x)
        for layer in self.linear:
            out = torch.nn.functional.leaky_relu(layer(out))
        return torch.log_softmax(self.classifier(out), dim=-1)


# --- everywhere torch is (CPU tensors) -----------------------------------------------------


def test_cpu_tensors_match_nn_lstm():
    lstm = pyannote_lstm()
    drop = bt.from_lstm(lstm, backend="cpu")
    assert isinstance(drop, nn.Module) and drop.model.backend == "cpu"
    x = torch.randn(3, 101, 60)
    with torch.no_grad():
        out, (h, c) = drop(x)
    assert out.shape == (3, 101, 256) and h.shape == c.shape == (8, 3, 128)
    assert out.dtype == h.dtype == torch.float32 and out.device.type == "cpu"
    want = reference_f64(lstm, x)
    for got, ref in zip((out, h, c), want):
        assert rel_l2(got.numpy(), ref.numpy()) < CPU_FP32_REL_L2
    # The same bits as the numpy API.
    assert np.array_equal(out.numpy(), drop.model(x.numpy()))


def test_replace_lstm_in_a_pyannet_shaped_model():
    model = PyanNetLike().eval()
    x = torch.randn(2, 64, 60)
    with torch.no_grad():
        want = model(x)
    swapped = bt.replace_lstm(model, backend="cpu")
    assert model.lstm is swapped and isinstance(model.lstm, bt.BilstmLSTM)
    with torch.no_grad():
        got = model(x)
    assert got.shape == want.shape
    assert rel_l2(got.numpy(), want.numpy()) < CPU_FP32_REL_L2


def test_refuses_other_lstms():
    for kwargs, what in (
        (dict(num_layers=2), "num_layers=2"),
        (dict(hidden_size=64), "hidden_size=64"),
        (dict(bidirectional=False), "bidirectional=False"),
        (dict(batch_first=False), "batch_first=False"),
        (dict(input_size=40), "input_size=40"),
    ):
        args = dict(input_size=60, hidden_size=128, num_layers=4, bidirectional=True, batch_first=True)
        args.update(kwargs)
        with pytest.raises(ValueError, match=what):
            bt.from_lstm(nn.LSTM(**args))
    with pytest.raises(TypeError, match="expected a torch.nn.LSTM"):
        bt.from_lstm(nn.GRU(60, 128, num_layers=4, bidirectional=True, batch_first=True))
    with pytest.raises(TypeError, match="float32"):
        bt.from_lstm(pyannote_lstm().double())


def test_bad_tensors():
    drop = bt.from_lstm(pyannote_lstm(), backend="cpu")
    with pytest.raises(TypeError, match="float32"):
        drop(torch.zeros(1, 5, 60, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\[batch, frames, 60\]"):
        drop(torch.zeros(1, 5, 61))
    with pytest.raises(ValueError, match=r"\[batch, frames, 60\]"):
        drop(torch.zeros(5, 60))
    with pytest.raises(RuntimeError, match="requires grad"):
        drop(torch.zeros(1, 5, 60, requires_grad=True))
    with pytest.raises(ValueError, match="initial states"):
        drop(torch.zeros(1, 5, 60), (torch.ones(8, 1, 128), torch.zeros(8, 1, 128)))
    with pytest.raises(TypeError, match="torch.Tensor"):
        drop(np.zeros((1, 5, 60), np.float32))
    # Zero initial states are what bilstm runs: accepted.
    out, _ = drop(torch.zeros(1, 5, 60), (torch.zeros(8, 1, 128), torch.zeros(8, 1, 128)))
    assert out.shape == (1, 5, 256)


def test_cuda_tensor_on_a_cpu_model_is_an_error():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    drop = bt.from_lstm(pyannote_lstm(), backend="cpu")
    with pytest.raises(RuntimeError, match="runs on the CPU"):
        drop(torch.zeros(1, 5, 60, device="cuda"))


# --- on the GPU ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_pair():
    lstm = pyannote_lstm().cuda()
    drop = bt.from_lstm(lstm)
    return lstm, drop


@needs_cuda
def test_gpu_from_lstm_runs_where_the_lstm_lives(gpu_pair):
    _, drop = gpu_pair
    assert drop.model.backend == "cuda" and drop.model.device == 0
    print("bilstm backend:", drop.model.backend_reason)


@needs_cuda
@pytest.mark.parametrize("batch", [1, 5, 32])
def test_gpu_accuracy_vs_float64_and_cudnn(gpu_pair, batch):
    lstm, drop = gpu_pair
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(100 + batch)
    x = torch.randn(batch, 589, 60, device="cuda")
    with torch.no_grad():
        out, (h, c) = drop(x)
        c_out, (c_h, c_c) = lstm(x)
    torch.cuda.synchronize()
    assert out.device == x.device and out.shape == (batch, 589, 256)
    want = reference_f64(lstm, x)
    for name, got, cudnn, ref in zip(("output", "h_n", "c_n"), (out, h, c), (c_out, c_h, c_c), want):
        ours = rel_l2(got.cpu().numpy(), ref.numpy())
        theirs = rel_l2(cudnn.cpu().numpy(), ref.numpy())
        print(f"batch {batch} {name}: bilstm rel L2 {ours:.2e}, cuDNN FP32 {theirs:.2e}")
        assert ours < GPU_FP32_REL_L2, f"{name}: {ours:.2e} over the 2e-6 budget"
        assert ours <= theirs, f"{name}: bilstm {ours:.2e} worse than cuDNN FP32 {theirs:.2e}"


@needs_cuda
def test_gpu_same_bits_as_the_host_path(gpu_pair):
    _, drop = gpu_pair
    x = torch.randn(4, 200, 60, device="cuda")
    with torch.no_grad():
        out, (h, c) = drop(x)
    host, h_host, c_host = drop.model.forward_with_state(x.cpu().numpy())
    assert np.array_equal(out.cpu().numpy(), host)
    assert np.array_equal(h.cpu().numpy(), h_host) and np.array_equal(c.cpu().numpy(), c_host)
    # A strided CUDA input gives the same bits.
    wide = torch.zeros(4, 200, 120, device="cuda")
    wide[:, :, ::2] = x
    with torch.no_grad():
        strided, _ = drop(wide[:, :, ::2])
    assert torch.equal(strided, out)


@needs_cuda
def test_gpu_zero_copy(gpu_pair, tmp_path):
    """The pass reads and writes the tensors in place: the profiler sees bilstm's kernels and no
    host<->device copy of anything near the tensors' sizes."""
    _, drop = gpu_pair
    batch = 64
    x = torch.randn(batch, 589, 60, device="cuda")
    with torch.no_grad():
        drop(x)  # warm: prepared for this batch
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with torch.no_grad():
            out, (h, c) = drop(x)
        torch.cuda.synchronize()
    # PyTorch's allocator holds exactly the three outputs more than before.
    grown = torch.cuda.memory_allocated() - before
    wanted = 4 * (out.numel() + h.numel() + c.numel())
    assert wanted <= grown < wanted + 4096, f"allocator grew by {grown} bytes, outputs {wanted}"
    assert out.is_cuda and out.is_contiguous()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text()).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if not kernels:
        pytest.skip("the profiler recorded no CUDA kernels (CUPTI unavailable?)")
    ours = [e for e in kernels if "bilstm" in e.get("name", "")]
    assert ours, f"no bilstm kernel among {sorted({e.get('name') for e in kernels})[:10]}"
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    moved = sum(int(e.get("args", {}).get("bytes", 0)) for e in copies)
    names = sorted({e.get("name") for e in copies})
    print(f"zero copy: {len(ours)} bilstm kernels, {len(copies)} memcpys ({moved} bytes) {names}")
    # The input is 9 MB and the output 38 MB; a copy of either through the host would show.
    assert moved < 64 * 1024, f"{moved} bytes copied: {names}"


@needs_cuda
def test_gpu_ordered_with_the_current_stream(gpu_pair):
    """The input is produced on a side stream behind a long sleep: the pass must wait for it."""
    _, drop = gpu_pair
    x0 = torch.randn(2, 589, 60, device="cuda")
    with torch.no_grad():
        want, _ = drop(x0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles before x exists
        x = x0 * 1.0
        out, _ = drop(x)
        copy = out.clone()  # queued after the pass on the same stream
    side.synchronize()
    assert torch.equal(copy, want)


@needs_cuda
def test_gpu_bad_tensors(gpu_pair):
    _, drop = gpu_pair
    with pytest.raises(TypeError, match="float32"):
        drop(torch.zeros(1, 5, 60, device="cuda", dtype=torch.float64))
    with pytest.raises(RuntimeError, match="requires grad"):
        drop(torch.zeros(1, 5, 60, device="cuda", requires_grad=True))
    with pytest.raises(ValueError, match=r"\[batch, frames, 60\]"):
        drop(torch.zeros(1, 5, 59, device="cuda"))
    if torch.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="runs on cuda:0"):
            drop(torch.zeros(1, 5, 60, device="cuda:1"))
    # A CPU tensor on a CUDA model takes the host path.
    x = torch.randn(1, 9, 60)
    out, _ = drop(x)
    assert out.device.type == "cpu"
    assert np.array_equal(out.numpy(), drop.model(x.numpy()))


@needs_cuda
def test_gpu_speedup_over_nn_lstm(gpu_pair):
    """Prints the time per pass of nn.LSTM (cuDNN, FP32) and of the drop-in in this process at
    batches 1, 32 and 256 (asserts nothing about speed)."""
    lstm, drop = gpu_pair
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def median_ms(fn, reps=20):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    for batch in (1, 32, 256):
        x = torch.randn(batch, 589, 60, device="cuda")
        with torch.no_grad():
            theirs = median_ms(lambda: lstm(x))
            ours = median_ms(lambda: drop(x))
        print(
            f"torch speed-up batch {batch}: nn.LSTM (cuDNN FP32) {theirs:.3f} ms, "
            f"bilstm.torch {ours:.3f} ms, {theirs / ours:.2f}x"
        )
        assert ours > 0 and theirs > 0
