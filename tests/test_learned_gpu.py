"""GPU smoke test of the learned schedulers' models (docs/learned.md, "Saved models"): models
trained on CUDA predict on the GPU what the same models, saved and loaded on the CPU, predict
there; the device and threads are reported. Where PyTorch sees no CUDA device (or is not
installed) the whole file is skipped with one line saying why."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'torch>=2.2'): no GPU smoke test")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: PyTorch sees none (the GPU smoke test runs where one is present)", allow_module_level=True)

from tierkit.learned import lstm, modelfile  # noqa: E402

#: a near tie between the two top logits, where the GPU's and the CPU's float rounding may
#: pick different classes (every other prediction must be the same)
TIE = 1e-4


@pytest.fixture(scope="module")
def series():
    rng = np.random.default_rng(11)
    s = rng.integers(0, 5, size=(40, 40))
    s[:10] = np.tile([0, 2, 4, 1], 10)  # periodic ones, learnt quickly
    return s


def near_ties(models, inputs, where):
    """For each (row, period) in ``where``: whether the CPU's two top logits are within TIE."""
    K, H, bins = models.config.history, models.config.hidden, models.config.bins
    out = []
    for p, t in zip(*where):
        x = torch.from_numpy((inputs[p, t - K:t] / np.float32(bins)).astype(np.float32))[None, :, None]
        W, Wo = models.state["w_gates"][p:p + 1], models.state["w_out"][p:p + 1]
        top = torch.topk(lstm._forward(torch, W, Wo, x, K, H)[0, :, 0], 2).values
        out.append(float(top[0] - top[1]) < TIE)
    return out


def test_trained_on_cuda_predicts_as_on_cpu(series, tmp_path):
    assert lstm.threads() >= 1 and torch.get_num_threads() == lstm.threads()
    cfg = lstm.TrainConfig(history=6, hidden=8, epochs=8, bins=4, seed=3, device="cuda", chunk=16)
    models = lstm.train(series, cfg)
    assert models.device == "cuda" and models.info["chunks"] >= 3
    for k in ("w_gates", "w_out"):  # Models keeps its weights on the CPU whatever trained them
        assert models.state[k].device.type == "cpu" and bool(torch.isfinite(models.state[k]).all())
    on_gpu = lstm.predict(models, series)

    p = tmp_path / "cuda.npz"
    modelfile.save(p, models, {"smoke": "gpu"})
    cpu, meta = modelfile.load(p, device="cpu")
    assert meta == {"smoke": "gpu"}
    assert cpu.device == "cpu" and cpu.config.device == "cpu" and cpu.info["trained_on"] == "cuda"
    on_cpu = lstm.predict(cpu, series)
    assert (on_gpu[:, :6] == -1).all() and (on_cpu[:, :6] == -1).all()
    diff = np.nonzero(on_gpu != on_cpu)
    assert all(near_ties(cpu, series, diff)), f"{len(diff[0])} predictions differ between CUDA and the CPU"
    assert len(diff[0]) <= on_gpu.size // 100

    gpu, _ = modelfile.load(p, device="cuda")
    assert gpu.device == "cuda" and gpu.config.device.startswith("cuda")
    assert np.array_equal(lstm.predict(gpu, series), on_gpu)
    auto, _ = modelfile.load(p, device="auto")
    assert auto.device == "cuda"
    assert modelfile.encode(models, {"smoke": "gpu"}) == p.read_bytes()  # same models, same bytes
