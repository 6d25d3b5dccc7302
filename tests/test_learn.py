"""The learning core of Kleio and Kleoniki (003 §3.2, §4): access classes, per-page LSTMs
trained together, Kleoniki's pattern grouping."""
import sys

import numpy as np
import pytest

from tierkit import TierkitError
from tierkit.learned import lstm as learn
from tierkit import profiling as prof
from tierkit.learned.lstm import TrainConfig, class_count, count_class, group_patterns

K = TrainConfig().history
A = np.tile([0, 5], 24)  # period 2
B = np.tile([1, 4, 7], 16)  # period 3


# -- classes: the Rust page scheduler's count_class rule (log2 classes capped at bins) ----


def test_count_class_matches_the_rule():
    counts = [0, 1, 2, 3, 4, 5, 7, 8, 9, 127, 128, 255, 256, 2**31 - 1, 2**31, 2**32 - 1]
    for bins in (1, 3, 8, 32):
        want = [min(bins, c.bit_length()) for c in counts]
        got = count_class(np.array(counts, dtype=np.uint32), bins)
        assert got.dtype == np.uint8 and got.tolist() == want
    assert count_class(np.array([0, 1, 2, 3, 4, 7, 8, 255, 256]), 8).tolist() == [0, 1, 2, 2, 3, 3, 4, 8, 8]
    big = np.array([2**40, 2**40 - 1, 2**63 + 5], dtype=np.uint64)
    assert count_class(big, 64).tolist() == [41, 40, 64]
    rng = np.random.default_rng(0)
    c = rng.integers(0, 2**20, (7, 9))
    assert count_class(c, 12).tolist() == [[min(12, int(v).bit_length()) for v in r] for r in c]


def test_class_count_is_a_count_of_its_class():
    c = np.arange(9)
    rep = class_count(c)
    assert rep.dtype == np.uint32 and rep.tolist() == [0, 1, 2, 4, 8, 16, 32, 64, 128]
    assert count_class(rep, 8).tolist() == c.tolist()
    # and every count lies in its class's range [rep, 2 rep)
    counts = np.arange(0, 300)
    cls = count_class(counts, 9)
    lo = class_count(cls).astype(np.int64)
    assert ((counts >= lo) & ((counts < 2 * lo) | (counts == 0))).all()


def test_class_errors():
    with pytest.raises(ValueError, match="negative"):
        count_class(np.array([1, -1]), 8)
    with pytest.raises(ValueError, match="bins"):
        count_class(np.array([1]), 0)
    with pytest.raises(ValueError, match="integers"):
        count_class(np.array([1.5]), 8)
    with pytest.raises(ValueError, match="0 to 32"):
        class_count(np.array([33]))


# -- training and prediction --------------------------------------------------------------


@pytest.fixture(scope="module")
def two_models():
    pytest.importorskip("torch")
    return learn.train(np.stack([A, B]), TrainConfig(seed=0))


def test_one_model_learns_a_periodic_pattern_exactly():
    pytest.importorskip("torch")
    m = learn.train(B[None], TrainConfig(seed=3))
    out = learn.predict(m, B[None])
    assert out.dtype == np.int16 and out.shape == (1, len(B))
    assert (out[0, :K] == -1).all()
    assert (out[0, K:] == B[K:]).all()


def test_models_trained_together_each_learn_their_own(two_models):
    m = two_models
    assert m.count == 2 and m.device == "cpu" and m.train_seconds > 0
    s = np.stack([A, B])
    out = learn.predict(m, s)
    assert (out[:, :K] == -1).all()
    assert (out[:, K:] == s[:, K:]).all()
    # rows served by the other model: swapping the inputs and model_of swaps the results
    swapped = learn.predict(m, s[::-1], model_of=np.array([1, 0]))
    assert (swapped[:, K:] == s[::-1, K:]).all()
    crossed = learn.predict(m, s[::-1], model_of=np.array([0, 1]))
    assert not (crossed[:, K:] == s[::-1, K:]).all()
    # many rows may share a model; one period of input (K + 1) predicts that period
    rows = np.stack([A, B, A, A, B])
    out = learn.predict(m, rows, model_of=np.array([0, 1, 0, 0, 1]))
    assert (out[:, K:] == rows[:, K:]).all()
    one = learn.predict(m, rows[:, 10:10 + K + 1], model_of=np.array([0, 1, 0, 0, 1]))
    assert one.shape == (5, K + 1) and (one[:, :K] == -1).all() and (one[:, K] == rows[:, 10 + K]).all()
    short = learn.predict(m, rows[:, :K], model_of=np.array([0, 1, 0, 0, 1]))
    assert (short == -1).all()


def test_training_is_deterministic(two_models):
    s = np.stack([A, B])
    again = learn.train(s, TrainConfig(seed=0))
    for key, v in two_models.state.items():
        assert v.dtype == again.state[key].dtype and v.shape[0] == 2
        assert np.array_equal(v.numpy(), again.state[key].numpy()), key
    assert np.array_equal(learn.predict(two_models, s), learn.predict(again, s))
    other = learn.train(s, TrainConfig(seed=1, epochs=2))
    assert not np.array_equal(other.state["w_gates"].numpy(), two_models.state["w_gates"].numpy())


def test_mini_batches_and_chunks_still_learn():
    # random series (more distinct windows than a batch: trained in mini-batches) in the
    # same chunk as periodic ones (all their windows in every step), in two chunks: the
    # periodic ones are still learnt exactly
    pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    T = 120
    s = np.stack([np.tile([0, 5], T)[:T], rng.integers(0, 9, T), np.tile([1, 4, 7], T)[:T], rng.integers(0, 9, T)])
    seen = []
    m = learn.train(s, TrainConfig(seed=0, epochs=60, chunk=3), progress=lambda d, t: seen.append((d, t)))
    assert m.info["chunks"] == 2 and m.info["distinct_windows"] < s.shape[0] * (T - K)
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
    out = learn.predict(m, s)
    assert (out[[0, 2], K:] == s[[0, 2], K:]).all()
    assert ((out[[1, 3]] >= 0) | (np.arange(T) < K)).all()


def test_hand_written_gradients_match_autograd():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    m, b, k, h, c = 3, 5, 4, 3, 4
    d = torch.float64
    W = torch.randn(m, 4 * h, h + 2, generator=g, dtype=d)
    Wo = torch.randn(m, c, h + 1, generator=g, dtype=d)
    x = torch.rand(m, k, b, generator=g, dtype=d)
    cnt = torch.randint(0, 3, (m, c, b), generator=g).to(d)
    gW, gWo = learn._Net(torch, m, b, k, h, c, "cpu", dtype=d).step(W, Wo, x, cnt)
    Wr, Wor = W.clone().requires_grad_(), Wo.clone().requires_grad_()
    logp = torch.log_softmax(learn._forward(torch, Wr, Wor, x, k, h), 1)
    loss = (-(cnt * logp).sum((1, 2)) / cnt.sum((1, 2)).clamp_min(1)).sum()
    loss.backward()
    assert torch.allclose(gW, Wr.grad, atol=1e-12) and torch.allclose(gWo, Wor.grad, atol=1e-12)


def test_clear_errors():
    with pytest.raises(ValueError, match="at least 9 periods"):
        learn.train(np.zeros((2, K), dtype=np.int64))
    with pytest.raises(ValueError, match="0 to bins=8"):
        learn.train(np.full((1, 20), 9))
    with pytest.raises(ValueError, match="2-D"):
        learn.train(np.zeros(20, dtype=np.int64))
    with pytest.raises(ValueError, match="hidden"):
        learn.train(np.zeros((1, 20), dtype=np.int64), TrainConfig(hidden=0))


def test_predict_errors(two_models):
    with pytest.raises(ValueError, match="model_of"):
        learn.predict(two_models, np.zeros((3, 12), dtype=np.int64))
    with pytest.raises(ValueError, match="outside"):
        learn.predict(two_models, np.zeros((1, 12), dtype=np.int64), model_of=np.array([2]))


def test_missing_torch_is_a_tierkit_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(TierkitError, match=r"pip install 'torch>=2\.2'"):
        learn.train(np.zeros((1, 20), dtype=np.int64))


# -- Kleoniki's grouping (003 §4.2) --------------------------------------------------------


def test_identical_rows_form_one_group_and_different_rows_stay_apart():
    c = np.tile([8, 8, 1], 11)[:32]
    rows = np.stack([c, A[:32], A[:32], c, A[:32]]).astype(np.uint8)
    labels, reps = group_patterns(rows, tol=0.5)
    # largest group first
    assert labels.tolist() == [1, 0, 0, 1, 0]
    assert reps.dtype == np.uint8 and np.array_equal(reps, np.stack([A[:32], c]))


def test_near_identical_rows_merge_under_tol_only():
    a = A[:32].astype(np.uint8)
    near = a.copy()
    near[3] = 4  # one period differs by one class
    c = np.tile([8, 8, 1], 11)[:32].astype(np.uint8)
    rows = np.stack([c, a, a, near, c, a])
    labels, reps = group_patterns(rows, tol=0.5)
    assert labels.tolist() == [1, 0, 0, 0, 1, 0] and np.array_equal(reps[0], a)
    labels, reps = group_patterns(rows, tol=0.0)
    assert labels.tolist() == [1, 0, 0, 2, 1, 0] and np.array_equal(reps[2], near)


def test_group_order_ties_by_first_page_and_determinism():
    rng = np.random.default_rng(2)
    base = rng.integers(0, 9, (6, 40))
    pages = base[rng.integers(0, 6, 300)]
    flip = rng.random(pages.shape) < 0.05
    pages[flip] = np.clip(pages[flip] + 1, 0, 8)
    l1, r1 = group_patterns(pages, tol=0.2, seed=7)
    l2, r2 = group_patterns(pages, tol=0.2, seed=7)
    assert np.array_equal(l1, l2) and np.array_equal(r1, r2)
    sizes = np.bincount(l1)
    firsts = [int(np.flatnonzero(l1 == g)[0]) for g in range(len(sizes))]
    assert all((sizes[g], -firsts[g]) > (sizes[g + 1], -firsts[g + 1]) for g in range(len(sizes) - 1))
    err = np.abs(pages - r1[l1].astype(int)).mean(1).mean()
    assert err <= 0.2 and len(r1) <= 12
    # ties by first page: two groups of one page each
    labels, _ = group_patterns(np.array([[0, 0], [8, 8]]), tol=0.0)
    assert labels.tolist() == [0, 1]
    labels, _ = group_patterns(np.zeros((0, 5), dtype=np.uint8))
    assert labels.shape == (0,)


def test_weighted_kmeans():
    # a point of weight 3 counts as three copies
    x = np.array([[0.0], [10.0]])
    labels, sse = prof.kmeans(x, 1, seed=0, weights=np.array([3.0, 1.0]))
    assert labels.tolist() == [0, 0] and sse == pytest.approx(3 * 2.5**2 + 7.5**2)


def test_kmeans_blockwise_path_agrees_with_exact(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 9, (400, 24)).astype(float)
    w = rng.integers(1, 4, 400).astype(float)
    exact = prof.kmeans(x, 7, seed=3, weights=w, n_init=1)
    monkeypatch.setattr(prof, "_EXACT_CELLS", 100)
    blas = prof.kmeans(x, 7, seed=3, weights=w, n_init=1)
    assert np.array_equal(exact[0], blas[0]) and exact[1] == pytest.approx(blas[1])
