"""The learned schedulers' inference cost (docs/learned.md, "Inference cost"): the models run at
every boundary before the scheduler decides (003 §3.2); tierkit measures that time per model
(tierkit.learned.inference.per_inference_ns) for the Rust scheduler to charge (infer_ns), and
says at which period the gain over history would pay for it (break_even_period)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tierkit.learned import inference, lstm  # noqa: E402


def _models(m: int, periods: int = 12, seed: int = 0):
    """m untrained models (epochs=0: their initial weights) and m rows of classes."""
    rng = np.random.default_rng(seed)
    series = rng.integers(0, 9, size=(m, periods))
    cfg = lstm.TrainConfig(epochs=0, bins=8, device="cpu")
    return lstm.train(series, cfg), series


def test_predict_last_matches_predict():
    models, series = _models(40)
    K = models.config.history
    # predict's out[:, T] predicts period T from periods T-K..T-1: add a column to read it
    full = lstm.predict(models, np.concatenate([series, np.zeros((40, 1), series.dtype)], 1))
    assert np.array_equal(lstm.predict_last(models, series[:, -K:]), full[:, -1])
    # Kleoniki: rows share models (labels), rows of one model in any order
    labels = np.random.default_rng(1).integers(0, 5, size=40)
    full = lstm.predict(models, np.concatenate([series, np.zeros((40, 1), series.dtype)], 1), model_of=labels)
    got = lstm.predict_last(models, series[:, -K:], labels, lstm.device_weights(models))
    assert np.array_equal(got, full[:, -1])
    with pytest.raises(ValueError, match="K=8"):
        lstm.predict_last(models, series[:, -3:])


def test_per_inference_ns_measures_one_boundary():
    small, s_in = _models(4)
    big, b_in = _models(2000)
    a = inference.per_inference_ns(small, s_in, repeats=3)
    b = inference.per_inference_ns(big, b_in, repeats=3)
    for r, m in ((a, 4), (b, 2000)):
        assert r["models"] == m and r["rows"] == m and r["device"] == "cpu" and r["repeats"] == 3
        assert len(r["wall_ns"]) == len(r["cpu_ns"]) == 3
        assert r["ns_per_model"] > 0 and r["ns_per_boundary"] == min(r["wall_ns"]) > 0
        assert r["ns_per_model"] == pytest.approx(r["ns_per_boundary"] / m)
        assert all(c >= 0 for c in r["cpu_ns"])
    # more models cost more per boundary, less per model (the fixed part is shared)
    assert b["ns_per_boundary"] > a["ns_per_boundary"]
    assert b["ns_per_model"] < a["ns_per_model"]
    # Kleoniki: 3 group models over 30 pages
    labels = np.arange(30) % 3
    k = inference.per_inference_ns(small, np.random.default_rng(2).integers(0, 9, size=(30, 9)), labels, repeats=2)
    assert k["models"] == 4 and k["rows"] == 30 and k["ns_per_model"] > 0
    with pytest.raises(ValueError, match="repeats"):
        inference.per_inference_ns(small, s_in, repeats=0)
    with pytest.raises(ValueError, match="at least K=8 periods"):
        inference.per_inference_ns(small, s_in[:, :5])


def test_break_even_period_worked_example():
    # 1,000,000 accesses at period 1,000: history 2.0 ms, the learned scheduler 1.5 ms, so it
    # gains 0.5 ns per access. One boundary's inference (100 models × 500 ns) is 50 µs: at
    # period P it costs 50,000 / P ns per access, which equals the gain at P = 100,000.
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 1.5e6, 50_000.0) == 100_000
    # rounded up: at 100,001 accesses the gain (0.5) covers the cost (0.49999...)
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 1.5e6, 50_000.2) == 100_001
    # twice the gain, half the period
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 1.0e6, 50_000.0) == 50_000
    # no inference cost: any period
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 1.5e6, 0.0) == 1


def test_break_even_period_without_gain_is_none():
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 2.0e6, 50_000.0) is None
    assert inference.break_even_period(1_000_000, 1000, 2.0e6, 2.5e6, 50_000.0) is None
    with pytest.raises(ValueError, match="positive"):
        inference.break_even_period(0, 1000, 2.0e6, 1.5e6, 1.0)
    with pytest.raises(ValueError, match="per_boundary_ns"):
        inference.break_even_period(10, 1000, 2.0e6, 1.5e6, float("nan"))
