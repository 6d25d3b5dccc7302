"""Kleio scored with only what a running system knows (docs/learned.md, "The fallback").

- the online fallback decides period ``s`` from the scored periods before ``s`` only;
- a constant predictor ("no access" always, or an untrained model's constant class) is never
  used, so it cannot show a gain over history;
- the future-knowledge fallback and perfect classes for the selected pages (``hybrid``) say
  that they use the future;
- every result has per-class recall, and a warning when the models' accessed recall is below
  history's.
"""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tierkit
from conftest import VENDORED
from test_learned_sched import pages_trace
from tierkit import learned as kleio


def _prev(actual: np.ndarray) -> np.ndarray:
    """History's guess: the period before's class (the first period has the class before it)."""
    p = np.zeros_like(actual)
    p[:, 1:] = actual[:, :-1]
    return p


def test_online_fallback_worked_example():
    """A page used every third period: a perfect model catches each access history misses
    (history predicts the previous period, idle), so after 8 periods of evidence it is used;
    history's lag is never used for a page it already predicts."""
    actual = np.array([[3 if t % 3 == 0 else 0 for t in range(20)]])
    use = kleio.online_fallback(actual.copy(), _prev(actual), actual, trust=8)
    assert not use[0, :8].any() and use[0, 8:].all()
    # a model that is history itself never beats history: never used
    assert not kleio.online_fallback(_prev(actual), _prev(actual), actual, trust=8).any()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 30))
def test_online_fallback_decides_from_the_past_only(seed, trust, cut):
    """Changing the actual classes (and the predictions) of periods s.. changes no decision
    before s: the rule uses only what has been scored when a period starts."""
    rng = np.random.default_rng(seed)
    actual = rng.integers(0, 5, size=(6, 40))
    pred = rng.integers(0, 5, size=(6, 40))
    use = kleio.online_fallback(pred, _prev(actual), actual, trust)
    a2, p2 = actual.copy(), pred.copy()
    a2[:, cut:] = rng.integers(0, 5, size=(6, 40 - cut))
    p2[:, cut:] = rng.integers(0, 5, size=(6, 40 - cut))
    # the guess for period `cut` is actual[cut - 1]: still the past
    use2 = kleio.online_fallback(p2, _prev(a2), a2, trust)
    assert (use[:, :cut + 1] == use2[:, :cut + 1]).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 6), st.integers(1, 10))
def test_a_constant_predictor_is_never_used(seed, c, trust):
    """No constant class is ever trusted, whatever the page does: it never errs less than
    the window's median class."""
    rng = np.random.default_rng(seed)
    actual = rng.integers(0, 7, size=(8, 50)) * (rng.random((8, 50)) < rng.random((8, 1)))
    const = np.full_like(actual, c)
    assert not kleio.online_fallback(const, _prev(actual), actual, trust).any()


@pytest.fixture(scope="module")
def alternating_trace(tmp_path_factory):
    """Sets A (pages 0-3) and B (pages 4-7) take turns, 40 accesses per period, 60 periods:
    history always holds the set that just went cold; a constant "hot" guess for every page
    would beat history's class error here."""
    seq = [(0 if t % 2 == 0 else 4) + i % 4 for t in range(60) for i in range(40)]
    return pages_trace(tmp_path_factory.mktemp("t") / "alt.tkt", seq)


def _gap(trace, made, period, cap):
    h = tierkit.run(trace, "dram-pmem", f"history:period={period}", fast_capacity=cap, progress=False)["runtime_ns"]
    o = tierkit.run(trace, "dram-pmem", f"oracle:period={period}", fast_capacity=cap, progress=False)["runtime_ns"]
    k = tierkit.run(trace, "dram-pmem", f"kleio:period={period},predictions={made.path}", fast_capacity=cap,
                    progress=False)["runtime_ns"]
    return kleio.gap_bridged(h, o, k), k == h


@pytest.mark.parametrize("where", ["alternating", "403.gcc"])
def test_untrained_and_constant_models_show_no_gain(where, alternating_trace):
    """The controls: untrained models (epochs=0) and "no access" always, with the default
    (online) fallback, schedule exactly as history does: no gain to show. Without the
    fallback the constant "no access" reads +2.5% of the gap on 403.gcc (more than the trained
    models' +1.9%): the gain a model shows there is not learning."""
    pytest.importorskip("torch")
    trace, period, cap, pages = ((alternating_trace, 40, 0.5, 1.0) if where == "alternating"
                                 else (VENDORED / "403.gcc.gz", 1000, 0.2, 0.2))
    kw = dict(period=period, history=4 if where == "alternating" else 8, fast_capacity=cap, progress=False)
    for made in (kleio.predictions(trace, "kleio", pages=pages, epochs=0, **kw),
                 kleio.predictions(trace, "kleio", pages=pages, predictor="idle", **kw)):
        assert made.info["predicted_periods_used"] == 0, made.info["predictor"]
        gap, same = _gap(trace, made, period, cap)
        assert same and gap == 0.0, (made.info["predictor"], made.info["epochs"], gap)
    # the same models trained do learn the alternation, and are used
    made = kleio.predictions(trace, "kleio", pages=pages, **kw)
    if where == "alternating":
        assert made.info["predicted_periods_used"] > 0 and _gap(trace, made, period, cap)[0] > 30


def test_future_knowledge_is_said(alternating_trace):
    """The future-knowledge fallback and perfect classes for the selected pages are marked
    (``future_knowledge``) in what they make; hybrid's predictions are the actual classes."""
    pytest.importorskip("torch")
    kw = dict(pages=1.0, period=40, history=4, fast_capacity=0.5, progress=False)
    assert not kleio.predictions(alternating_trace, "kleio", **kw).info["future_knowledge"]
    assert kleio.predictions(alternating_trace, "kleio", fallback="future", **kw).info["future_knowledge"]
    hyb = kleio.predictions(alternating_trace, "kleio", predictor="hybrid", fallback="off", **kw)
    assert hyb.info["future_knowledge"] and hyb.info["models"] == 0 and hyb.info["accuracy"] == 1.0
    c = kleio.counts(alternating_trace, 40, progress=False)
    rows = json.loads(open(hyb.path).read())["rows"]
    for page, r in rows.items():
        actual = c.dense(np.array([int(page)]), 16)[0]
        assert r[30:] == "".join("0123456789abcdef"[x] for x in actual[30:])
    with pytest.raises(tierkit.TierkitError, match="predictor"):
        kleio.predictions(alternating_trace, "kleio", predictor="psychic", **kw)
    with pytest.raises(tierkit.TierkitError, match="fallback"):
        kleio.predictions(alternating_trace, "kleio", fallback="maybe", **kw)


def test_per_class_recall_and_the_collapse_warning():
    """Per-class recall in every learned result; a warning (in the result's warnings) when the
    models' accessed recall is below history's (403.gcc at 10%: 26.5% against 50.0%)."""
    pytest.importorskip("torch")
    r = tierkit.run(VENDORED / "403.gcc.gz", "dram-pmem", "kleio:pages=0.1,period=1000,epochs=20", fast_capacity=0.2,
                    progress=False)
    m = r["config"]["models"]
    assert m["class_recall"] and all(0 <= v <= 1 for v in m["class_recall"].values())
    assert set(m["class_recall"]) == set(m["history_class_recall"])
    assert m["accessed_recall"] < m["history_accessed_recall"]
    assert any("accessed recall" in w and "below history" in w for w in r["warnings"]), r["warnings"]


def test_study_reports_every_fallback_and_the_controls():
    pytest.importorskip("torch")
    s = kleio.study(VENDORED / "403.gcc.gz", "kleio", (0.1,), period=1000, epochs=10, progress=False)
    x = s["rows"][0]
    for k in ("gap_bridged_pct", "gap_bridged_no_fallback_pct", "gap_bridged_future_fallback_pct",
              "gap_bridged_future_hybrid_pct", "gap_bridged_untrained_pct", "gap_bridged_idle_pct"):
        assert x[k] is not None, k
    assert x["gap_bridged_untrained_pct"] == 0.0 and x["gap_bridged_idle_pct"] == 0.0
    assert set(s["future_knowledge"]) == {"oracle_runtime_ns", "gap_bridged_future_fallback_pct",
                                          "gap_bridged_future_hybrid_pct"}


def _rows_of(r):
    """The predicted classes a result's run read (embedded in config.inputs)."""
    import base64
    import zlib

    emb = r["config"]["inputs"]["predictions"]["zlib_base64"]
    return json.loads(zlib.decompress(base64.b64decode(emb)))["rows"]


def test_saved_models_are_reused(alternating_trace, tmp_path, cli):
    """save=FILE keeps the trained models; model=FILE runs them instead of training (the same
    predictions, no training); a file made for another period is refused, naming the key."""
    pytest.importorskip("torch")
    f = tmp_path / "m.npz"
    spec = "kleio:pages=1,period=40,history=4,infer_ns=0"
    a = tierkit.run(alternating_trace, "dram-pmem", f"{spec},save={f}", fast_capacity=0.5, progress=False)
    assert f.is_file() and a["config"]["models"]["saved_to"] == str(f)
    b = tierkit.run(alternating_trace, "dram-pmem", f"{spec},model={f}", fast_capacity=0.5, progress=False)
    mb = b["config"]["models"]
    assert mb["model_file"] == str(f) and mb["train_seconds"] == 0.0 and mb["models"] == 8
    assert _rows_of(b) == _rows_of(a) and mb["scores"] == a["config"]["models"]["scores"]
    assert b["runtime_ns"] == a["runtime_ns"]
    # not over an existing file
    rc, _, err = cli("simulate", alternating_trace, "--policy", f"{spec},save={f}", "-c", "0.5", "-q")
    assert rc == 2 and "m.npz" in err and "exists" in err and err.count("\n") == 1
    rc, _, err = cli("simulate", alternating_trace, "--policy", f"kleio:pages=1,period=20,history=4,model={f}", "-c",
                     "0.5", "-q")
    assert rc == 2 and "m.npz" in err and "meta.period" in err and err.count("\n") == 1
    # every new parameter's bad value, and a models file that is not there: one line each
    for bad, key in (("model=" + str(tmp_path / "none.npz"), "none.npz"), ("trust=0", "trust"),
                     ("predictor=xyz", "predictor"), ("fallback=maybe", "fallback"), ("infer_ns=fast", "infer_ns")):
        rc, _, err = cli("simulate", alternating_trace, "--policy", f"kleio:pages=1,period=40,history=4,{bad}", "-c",
                         "0.5", "-q")
        assert rc == 2 and key in err and err.count("\n") == 1, (bad, err)


def test_the_period_search_uses_the_training_periods_only(tmp_path):
    """Kleio's default period is searched on the training periods (fit on two thirds, validate
    on the last third): two traces that differ only in their held-out half get the same
    period and the same scores."""
    pytest.importorskip("torch")
    first = [(0 if t % 2 == 0 else 4) + i % 4 for t in range(60) for i in range(40)]
    rng = np.random.default_rng(5)
    other = first[:1200] + [int(x) for x in rng.integers(0, 8, size=1200)]
    a = pages_trace(tmp_path / "a.tkt", first)
    b = pages_trace(tmp_path / "b.tkt", other)
    kw = dict(pages=1.0, fast_capacity=0.5, history=4, epochs=20, progress=False)
    pa, note, tried = kleio.search_period(a, **kw)
    pb, _, tried_b = kleio.search_period(b, **kw)
    assert (pa, tried) == (pb, tried_b)
    assert pa in [r["period"] for r in tried] and "searched on the training periods" in note
    assert all(r["fit_periods"] + r["validate_periods"] <= r["periods"] // 2 + 1 for r in tried)
    # the result says how its period was chosen
    r = tierkit.run(a, "dram-pmem", "kleio:pages=1,history=4,epochs=20,infer_ns=0", fast_capacity=0.5, progress=False)
    m = r["config"]["models"]
    assert m["period"] == pa and m["period_chosen"] == note and m["period_search"] == tried


def test_device_option(alternating_trace, cli):
    """The models train and run where asked: cpu works everywhere; cuda without a GPU, or an
    unknown device, is one error line."""
    pytest.importorskip("torch")
    import torch

    r = tierkit.run(alternating_trace, "dram-pmem", "kleio:pages=1,period=40,history=4,epochs=5,device=cpu,infer_ns=0",
                    fast_capacity=0.5, progress=False)
    assert r["config"]["models"]["train_device"] == "cpu" and "device=cpu" in r["config"]["policy"]
    bad = ["tpu"] + ([] if torch.cuda.is_available() else ["cuda"])
    for d in bad:
        rc, _, err = cli("kleio", alternating_trace, "--pages", "1", "--period", "40", "--history", "4", "-c", "0.5",
                         "--device", d, "-q")
        assert rc == 2 and "device" in err and err.count("\n") == 1, (d, err)
