"""Cori, Kleio and Kleoniki (003 §3.2-§4, docs/learned.md): the reuse collector and frequency
generator on traces with known reuse, the tuner's stopping rule, the page selector's
ranking, the learned schedulers end to end, and the heat map."""
import json

import numpy as np
import pytest

import tierkit
from tierkit import cori, learned as kleio
from tierkit.api import write_trace

PAGE = 4096


def pages_trace(path, pages, write=None):
    """A trace touching the given page numbers in order, one access each."""
    pages = np.asarray(pages, dtype=np.uint64)
    addr = 0x10_0000 + pages * PAGE + (np.arange(len(pages), dtype=np.uint64) % 64) * 64
    write_trace(path, addr, write)
    return path


@pytest.fixture(scope="module")
def reuse_trace(tmp_path_factory):
    """Three phases cycling 50 times over 10, 20 and 30 distinct pages: every reuse distance
    is 10, 20 or 30 accesses, and every page is reused 49 times."""
    seq = []
    base = 0
    for n in (10, 20, 30):
        seq += [base + i for _ in range(50) for i in range(n)]
        base += n
    return pages_trace(tmp_path_factory.mktemp("t") / "reuse.tkt", seq)


def test_reuse_collector_finds_the_known_distances(reuse_trace):
    p = cori.reuse_profile(reuse_trace, bucket=5, progress=False)
    assert p["accesses"] == 3000 and p["pages"] == 60
    assert p["kept"]["distance"] == [10, 20, 30]
    assert p["kept"]["height"] == [49.0, 49.0, 49.0]
    # equal heights, weights 1, 0.5, 0 from shortest to longest: (10 + 10) / 1.5
    assert cori.dominant_reuse(p) == 13


def test_reuse_collector_drops_reuse_within_a_bucket(reuse_trace):
    # with 100-access buckets every reuse falls in the first bucket: nothing is kept, and
    # the dominant reuse falls back to the mean reuse distance (bucket midpoints)
    p = cori.reuse_profile(reuse_trace, bucket=100, progress=False)
    assert p["kept"]["distance"] == []
    assert cori.dominant_reuse(p) == 50


def test_candidates_are_multiples_with_distinct_period_counts():
    assert cori.candidates(100, 1000) == [100, 200, 300, 400]  # 500 makes 2 periods, as 400
    c = cori.candidates(13, 3000)
    assert c[0] == 13 and all(x % 13 == 0 for x in c) and max(c) <= 1500
    assert c == sorted(c)
    counts = [int(3000 / x) for x in c]
    assert len(set(counts)) == len(counts)
    # every multiple left out repeats the period count of one kept before it
    for m in range(13, 1501, 13):
        assert int(3000 / m) in counts


def test_tuner_stops_when_performance_stops_improving():
    assert cori.tuner_trials([9, 8, 7, 7.5, 1]) == 4  # the 4th trial is worse: stop there
    assert cori.tuner_trials([9, 8, 7]) == 3
    assert cori.tuner_trials([9, 9]) == 2  # equal is no improvement
    assert cori.tuner_trials([9, 10, 11, 3], patience=2) == 3
    assert cori.tuner_trials([9, 10, 8, 11, 1], patience=2) == 5


def test_tune_runs_cori_and_the_baselines(reuse_trace, cli):
    rc, out, err = cli("tune", reuse_trace, "--bucket", "5", "--grid", "10", "--json", "-q")
    assert rc == 0, err
    r = json.loads(out)
    assert r["dominant_reuse"] == 13 and r["candidates"][0] == 13
    n = len(r["trials"])
    assert [t["period"] for t in r["trials"]] == r["candidates"][:n]
    assert r["chosen_period"] in r["candidates"][:n]
    assert set(r["methods"]) == {"cori", "base-left", "base-right", "base-random"}
    assert r["budget_cori_trials"] == n
    assert r["best_runtime_ns"] == min(s["runtime_ns"] for s in r["sweep"])
    assert r["policy_params"] == {"compat": "none", "bins": None}
    # every method counted alike, against the sweep: its own order run to the end
    rt = {s["period"]: s["runtime_ns"] for s in r["sweep"]}
    orders = {"cori": r["candidates"], "base-left": r["grid"][::-1], "base-right": r["grid"]}
    for name, order in orders.items():
        m = r["methods"][name]
        assert m["trials_to_best"] == cori.trials_to_best([rt[p] for p in order], r["best_runtime_ns"], 0.03)
        assert m["period_at_cori_trials"] in order[:n]
        assert m["slowdown_at_cori_trials"] == rt[m["period_at_cori_trials"]] / r["best_runtime_ns"] - 1
    assert r["budget_cori_trials_to_best"] == (r["methods"]["cori"]["trials_to_best"] or len(r["candidates"]))
    assert r["methods"]["cori"]["period_at_cori_trials"] == r["chosen_period"]
    assert all(m["slowdown_at_cori_trials"] >= 0 and m["slowdown_at_cori_trials_to_best"] >= 0
               for m in r["methods"].values())
    # same inputs, same result
    rc, out2, _ = cli("tune", reuse_trace, "--bucket", "5", "--grid", "10", "--json", "-q")
    assert json.loads(out2) == r
    rc, out, err = cli("tune", reuse_trace, "--bucket", "5", "--no-sweep", "-q")
    assert rc == 0 and "Cori chose period" in out and "exhaustive" not in out


def test_trials_to_best_and_both_budgets_follow_the_definitions():
    """003 §3.3.3: Fig. 3.7 counts the trials each method needs to come within 3% of the best;
    Fig. 3.6 gives the baselines Cori's trials to best. Cori here stops after 2 trials (the
    second is worse), but run to the end its 4th candidate is within 3% of the best (100)."""
    rt = {10: 130.0, 20: 140.0, 30: 120.0, 40: 102.0, 50: 100.0, 60: 125.0, 70: 101.0, 80: 150.0}
    orders = {"cori": [10, 20, 30, 40, 50], "base-left": [80, 70, 60, 50], "base-right": [60, 70, 80],
              "base-random": [80, 60, 30]}
    assert cori.tuner_trials([rt[p] for p in orders["cori"]]) == 2
    assert cori.trials_to_best([130, 140, 120, 102], 100, 0.03) == 4
    assert cori.trials_to_best([130, 140, 120, 102], 100, 0.01) is None
    assert cori.trials_to_best([103.0], 100, 0.03) == 1  # within is inclusive
    budgets, m = cori.compare_methods(orders, rt, 2, 0.03)
    assert budgets == {"cori_trials": 2, "cori_trials_to_best": 4}
    assert {k: v["trials_to_best"] for k, v in m.items()} == {
        "cori": 4, "base-left": 2, "base-right": 2, "base-random": None}
    # after Cori's 2 trials: each method's best of its first two
    assert {k: v["period_at_cori_trials"] for k, v in m.items()} == {
        "cori": 10, "base-left": 70, "base-right": 70, "base-random": 60}
    assert m["cori"]["slowdown_at_cori_trials"] == pytest.approx(0.30)
    assert m["base-left"]["slowdown_at_cori_trials"] == pytest.approx(0.01)
    # after Cori's 4 trials to best: base-left reaches 50 itself; base-right and base-random
    # run out of periods and keep their best
    assert {k: v["period_at_cori_trials_to_best"] for k, v in m.items()} == {
        "cori": 40, "base-left": 50, "base-right": 70, "base-random": 30}
    assert m["cori"]["slowdown_at_cori_trials_to_best"] == pytest.approx(0.02)
    assert m["base-left"]["slowdown_at_cori_trials_to_best"] == 0
    assert m["base-random"]["slowdown_at_cori_trials_to_best"] == pytest.approx(0.20)
    # Cori never within: its budget to best is all its candidates
    budgets, m = cori.compare_methods({"cori": [10, 20, 30], "base-right": [50]}, rt, 2, 0.03)
    assert budgets == {"cori_trials": 2, "cori_trials_to_best": 3} and m["cori"]["trials_to_best"] is None
    assert m["cori"]["period_at_cori_trials_to_best"] == 30


def test_tune_passes_compat_and_bins_to_the_scheduler(reuse_trace, cli):
    base = ("tune", reuse_trace, "--bucket", "5", "--grid", "6", "--json", "-q")
    runs = {}
    for args in ([], ["--compat", "cori-sim"], ["--compat", "cori-sim-raw"], ["--bins", "0"], ["--bins", "1"]):
        rc, out, err = cli(*base, *args)
        assert rc == 0, (args, err)
        r = json.loads(out)
        runs[tuple(args)] = r
        want = dict(zip(args[::2], args[1::2]))
        assert r["policy_params"] == {"compat": want.get("--compat", "none"),
                                      "bins": int(want["--bins"]) if "--bins" in want else None}
    # each is the scheduler run with those parameters
    sweep = {k: {s["period"]: s["runtime_ns"] for s in r["sweep"]} for k, r in runs.items()}
    for args, pol in (((), ""), (("--compat", "cori-sim"), ",compat=cori-sim"), (("--bins", "1"), ",bins=1")):
        p = runs[args]["candidates"][0]
        one = tierkit.run(reuse_trace, "dram-pmem", f"history:period={p}{pol}", "0.2", progress=False)
        assert sweep[args][p] == one["runtime_ns"], args
    assert sweep[()] != sweep[("--compat", "cori-sim")]
    assert sweep[()] != sweep[("--bins", "1")]


def test_tune_errors_are_one_line(reuse_trace, cli, tmp_path):
    for args in (["--scheduler", "kleio"], ["--bucket", "0"], ["--patience", "0"], ["--compat", "cori"],
                 ["--compat", ""], ["--bins", "33"], ["--bins", "-1"], ["--bins", "two"],
                 ["--compat", "cori-sim", "--timing", "detailed"]):
        rc, _, err = cli("tune", reuse_trace, *args, "-q")
        assert rc == 2 and err.count("\n") == 1 and err.startswith("tierkit: error:"), (args, err)
    bad = tmp_path / "bad.tkt"
    bad.write_bytes(b"TKT\x00garbage")
    rc, _, err = cli("tune", bad, "-q")
    assert rc == 2 and "bad.tkt" in err and err.count("\n") == 1


def _counts(rows):
    """Counts from a dense [pages, periods] matrix."""
    m = np.asarray(rows, dtype=np.uint32)
    per, page = np.nonzero(m.T)
    return kleio.Counts(1, m.shape[1], int(m.sum()), np.arange(m.shape[0], dtype=np.uint64) * PAGE,
                        per.astype(np.uint32), page.astype(np.uint32), m[page, per], "", "test")


def test_page_selector_ranks_misplaced_pages_by_their_accesses():
    # two pages fit; pages 0, 1 are hot in even periods, 2, 3 in odd ones, page 4 always
    # lukewarm: history always holds last period's pair, so every hot page is misplaced
    # whenever it is hot (after the first period); page 4 never is
    m = [[10, 0, 10, 0, 10, 0],
         [5, 0, 5, 0, 5, 0],
         [0, 8, 0, 8, 0, 8],
         [0, 3, 0, 3, 0, 3],
         [1, 1, 1, 1, 1, 1]]
    pages, score = kleio.select_pages(_counts(m), capacity=2)
    # page 0 is misplaced in periods 2 and 4 (10 + 10), page 2 in 1, 3 and 5 (3 x 8)
    assert pages.tolist() == [2, 0, 1, 3]
    assert score.tolist() == [24, 20, 10, 9]


def test_predictions_file_and_gap(tmp_path):
    assert kleio.gap_bridged(100, 60, 70) == 75.0
    assert kleio.gap_bridged(100, 100, 90) is None
    rows = kleio._rows(np.array([[-1, 0, 5, 12, 35]]))
    assert rows == ["-05cz"]


def test_heatmap_cli_and_compare_report(reuse_trace, cli, tmp_path):
    png = tmp_path / "heat.png"
    rc, _, err = cli("trace", "heatmap", reuse_trace, "--period", "100", "-o", png, "-q")
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # never overwritten without --force
    rc, _, err = cli("trace", "heatmap", reuse_trace, "--period", "100", "-o", png, "-q")
    assert rc == 2 and "--force" in err and err.count("\n") == 1
    rc, _, err = cli("trace", "heatmap", reuse_trace, "--period", "0", "-o", tmp_path / "z.png", "-q")
    assert rc == 2 and "--period" in err
    # the counts behind it: 30 periods of 100 accesses, every access counted once; page 0
    # is accessed 10 times in each of the first 5 periods (class 4), page 10 5 times in the
    # 6th (class 3)
    c = kleio.counts(reuse_trace, 100, progress=False)
    assert c.periods == 30 and c.pages == 60 and int(c.count.sum()) == 3000
    assert c.dense(np.array([0, 10]), 16)[:, :6].tolist() == [[4, 4, 4, 4, 4, 0], [0, 0, 0, 0, 0, 3]]
    out = tmp_path / "rep"
    rc, _, err = cli("compare", reuse_trace, "--policies", "first-touch,history:period=100", "-c", "0.2", "--out", out, "-q")
    assert rc == 0, err
    assert (out / "heatmap-0-reuse.tkt.png").stat().st_size > 1000
    assert "heatmap-0" in (out / "index.html").read_text()


@pytest.fixture(scope="module")
def alternating_trace(tmp_path_factory):
    """Sets A (pages 0-3) and B (pages 4-7) take turns, 40 accesses per period, 60 periods:
    with a fast tier of four pages, history always holds the set that just went cold."""
    seq = [(0 if t % 2 == 0 else 4) + i % 4 for t in range(60) for i in range(40)]
    return pages_trace(tmp_path_factory.mktemp("t") / "alt.tkt", seq)


def _runtime(cli, trace, policy):
    rc, out, err = cli("simulate", trace, "--policy", policy, "-c", "0.5", "--json", "-q")
    assert rc == 0, err
    return json.loads(out)


def test_kleio_learns_what_history_misses(alternating_trace, cli):
    pytest.importorskip("torch")
    h = _runtime(cli, alternating_trace, "history:period=40")
    o = _runtime(cli, alternating_trace, "oracle:period=40")
    k = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,holdout=0,infer_ns=0")
    assert h["runtime_ns"] > o["runtime_ns"]
    gap = kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"])
    # predictions from period K = 4 on, used once they have beaten history over the 8 scored
    # periods before (the online fallback): history schedules periods 0-11, the models 12-59
    assert 78 <= gap < 90, gap
    m = k["config"]["models"]
    assert m["models"] == 8 and m["pages_selected"] == 8 and m["accuracy"] > 0.95
    assert m["history_accuracy"] < 0.05  # last period's class is always wrong here
    # out of sample (the default): trained on periods 0-29, predicting only 30-59, trusted
    # from period 38 on (8 scored periods of evidence): 22 of 60 periods scheduled by the models
    ko = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,infer_ns=0")
    assert 30 <= kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], ko["runtime_ns"]) < 45
    assert ko["config"]["models"]["accuracy"] > 0.95 and ko["config"]["models"]["out_of_sample"]
    # same inputs and seed, same result
    assert _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,infer_ns=0")["runtime_ns"] == ko["runtime_ns"]


def test_kleoniki_groups_identical_patterns(alternating_trace, cli):
    pytest.importorskip("torch")
    k = _runtime(cli, alternating_trace, "kleoniki:pages=1,period=40,history=4,tol=0,holdout=0,infer_ns=0")
    m = k["config"]["models"]
    # the four pages of each set share one pattern: two models for eight pages
    assert m["models"] == 2 and m["pages_per_model"] == 4.0 and m["distinct_patterns"] == 2
    o = _runtime(cli, alternating_trace, "oracle:period=40")
    h = _runtime(cli, alternating_trace, "history:period=40")
    # (the online fallback: history schedules periods 0-11, the models 12-59)
    assert 78 <= kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"]) < 90


def test_learned_policy_errors_are_one_line(alternating_trace, cli):
    for pol, key in (("kleio:pages=2", "pages"), ("kleio:pages=0.5,history=x", "history"),
                     ("kleio:pages=0.5,period=2400", "too few"), ("kleoniki:predictions=/nonexistent.json", "nonexistent")):
        rc, _, err = cli("simulate", alternating_trace, "--policy", pol, "-c", "0.5", "-q")
        assert rc == 2 and err.count("\n") == 1 and key in err, (pol, err)


def test_learned_schedulers_run_on_real_traces(shared_traces, cli):
    pytest.importorskip("torch")
    t = shared_traces / "403.gcc.gz"
    rc, out, err = cli("compare", t, "-c", "0.2", "--json", "-q", "--policies",
                       "history:period=2000,oracle:period=2000,kleio:pages=0.05,period=2000,epochs=20,"
                       "kleoniki:pages=0.1,period=2000,epochs=20")
    assert rc == 0, err
    rows = {r["policy"].split(":")[0]: r for r in map(json.loads, out.splitlines())}
    assert {"history", "oracle", "kleio", "kleoniki"} <= set(rows)
    k, kn = rows["kleio"]["config"]["models"], rows["kleoniki"]["config"]["models"]
    assert k["models"] == k["pages_selected"] > 0
    assert kn["models"] <= kn["pages_selected"]
    rc, out, err = cli("tune", t, "--grid", "8", "--json", "-q")
    assert rc == 0, err
    r = json.loads(out)
    assert r["chosen_period"] in r["candidates"] and len(r["trials"]) >= 1


def test_simulate_shows_what_the_front_end_made(alternating_trace, cli):
    pytest.importorskip("torch")
    rc, out, err = cli("simulate", alternating_trace, "--policy", "kleoniki:pages=1,period=40,history=4,tol=0", "-c", "0.5", "-q")
    assert rc == 0, err
    line = next(l for l in out.splitlines() if l.startswith("policy"))
    # the user's spec, then every parameter, the training ones included (they used to be
    # recorded blank), and the predictions it read; no empty keys
    assert ("kleoniki:pages=1,period=40,history=4,tol=0  ->  kleoniki:bins=16,device=auto,epochs=60,fallback=online,"
            "hidden=16,history=4,holdout=0.5,infer_ns=") in line
    # the inference cost measured with the trained models, charged by the scheduler
    assert float(line.split("infer_ns=")[1].split(",")[0]) > 0
    assert ",pages=1.0,period=40,predictions=" in line
    assert ",predictor=lstm,seed=0,threads=1,tol=0.0,trust=8,weight=none" in line
    assert "=," not in line


def test_models_trained_on_another_run_apply_by_address(alternating_trace, cli, tmp_path):
    pytest.importorskip("torch")
    # another run of the same program: the same pages, a longer run, and a page first touched
    # in another order (so page ids differ between the runs; addresses do not)
    seq = [99] + [(0 if t % 2 == 0 else 4) + i % 4 for t in range(90) for i in range(40)]
    other = pages_trace(tmp_path / "other.tkt", seq[:-1])
    h = _runtime(cli, other, "history:period=40")
    o = _runtime(cli, other, "oracle:period=40")
    k = _runtime(cli, other, f"kleio:pages=1,period=40,history=4,train={alternating_trace},infer_ns=0")
    m = k["config"]["models"]
    assert m["train_trace"] == str(alternating_trace) and m["models"] == 8 and m["pages_predicted"] == 8
    assert kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"]) >= 80


# ---------------------------------------------------------------------------------------------
# Kleoniki's default period, PyTorch threads, collapse, out of sample, fallback (docs/learned.md)


def test_kleoniki_default_period_works_on_an_ordinary_trace(cli):
    """003 §4 runs Kleoniki at Cori's period; with K = 8 periods of model input, Cori's
    (long) period left the 50k-access 403.gcc with 7 periods: "too few periods". The default
    now shortens it and says so."""
    pytest.importorskip("torch")
    from conftest import VENDORED

    gcc = VENDORED / "403.gcc.gz"
    r = tierkit.run(gcc, "dram-pmem", "kleoniki:pages=0.05,epochs=5", fast_capacity=0.2, progress=False)
    m = r["config"]["models"]
    assert m["cori_period"] is not None and m["period"] < m["cori_period"]
    assert "shortened" in m["period_chosen"] and f"{m['period']:,}" in m["period_chosen"]
    # Cori tuned it over the whole trace, held-out periods included: the result says so
    assert "FUTURE KNOWLEDGE" in m["period_chosen"] and m["period_future_knowledge"]
    assert r["accesses"] // m["period"] >= kleio.MIN_PERIODS_PER_INPUT * 9
    # a Cori period that leaves enough periods is kept as is
    assert kleio.learned_period(1_000_000, 5000, 8) == (5000, "Cori's period for history (5,000 accesses)")
    assert kleio.learned_period(50_000, 7420, 8)[0] == 500  # 50,000 / 72 = 694 -> 500


def test_torch_threads_are_set_and_results_do_not_depend_on_them(monkeypatch):
    """PyTorch's default (a thread per core) made `tierkit kleio` 18x slower on a loaded
    2-core machine; tierkit sets 1 thread unless told, and the trained models are
    the same bit for bit."""
    torch = pytest.importorskip("torch")
    from tierkit.learned import lstm as learn

    monkeypatch.delenv(learn.THREADS_ENV, raising=False)
    assert learn.threads() == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv(learn.THREADS_ENV, "2")
    assert learn.threads() == 2 and torch.get_num_threads() == 2
    monkeypatch.setenv(learn.THREADS_ENV, "zero")
    with pytest.raises(tierkit.TierkitError, match=learn.THREADS_ENV):
        learn.threads()
    rng = np.random.default_rng(3)
    series = rng.integers(0, 4, size=(40, 30)).astype(np.uint8)
    cfg = learn.TrainConfig(history=4, hidden=8, epochs=5, bins=3, device="cpu")
    learn.threads(1)
    a = learn.train(series, cfg)
    learn.threads(2)
    b = learn.train(series, cfg)
    learn.threads(1)
    assert torch.equal(a.state["w_gates"], b.state["w_gates"]) and torch.equal(a.state["w_out"], b.state["w_out"])


def test_scores_show_a_collapse_to_no_access():
    """Models predicting "no access" in most accessed periods can look more accurate
    than history; the accessed recall shows it."""
    actual = np.array([[0, 3, 3, 0, 0, 0, 3, 3, 0, 0]])
    collapsed = np.zeros_like(actual)
    s = kleio.scores(collapsed, actual)
    assert s["accuracy"] == 0.6 and s["accessed_recall"] == 0.0 and s["idle_recall"] == 1.0
    assert s["balanced_accuracy"] == 0.5 and s["class_mae"] == 1.2
    hist = np.array([[-1, 0, 3, 3, 0, 0, 0, 3, 3, 0]])  # last period's class; none for period 0
    h = kleio.scores(hist, actual)
    # history is less accurate (5 of 9) but catches half of the accessed periods
    assert h["scored"] == 9 and h["accuracy"] == 5 / 9 < s["accuracy"] and h["accessed_recall"] == 0.5


@pytest.fixture(scope="module")
def drift_trace(tmp_path_factory):
    """Pages 0-3 and 4-7 alternate for 40 periods, then pages 0-3 stay hot and 4-7 go cold:
    models trained in sample learn the alternation; out of sample they would mispredict."""
    seq = [(0 if t % 2 == 0 else 4) + i % 4 for t in range(40) for i in range(40)]
    seq += [i % 4 if i % 2 == 0 else 8 + i % 4 for t in range(20) for i in range(40)]
    return pages_trace(tmp_path_factory.mktemp("t") / "drift.tkt", seq)


def test_models_are_scored_out_of_sample_and_lose_to_history_fall_back(alternating_trace, drift_trace):
    """Scores and the run use only periods the models did not train on (the last
    half by default), and a page whose model loses to history there follows history."""
    pytest.importorskip("torch")
    made = kleio.predictions(alternating_trace, "kleio", pages=1, period=40, history=4, fast_capacity=0.5, progress=False)
    m = made.info
    assert m["train_periods"] == 30 and m["eval_start_period"] == 30 and m["eval_periods"] == 30 and m["out_of_sample"]
    rows = json.loads(open(made.path).read())["rows"]
    # no prediction in the training periods, nor in the first 8 held-out ones (no evidence
    # yet that the model beats history): the scheduler follows history there
    assert all(r[:38] == "-" * 38 and "-" not in r[38:] for r in rows.values())
    assert m["fallback"] == "online" and m["trust"] == 8 and not m["future_knowledge"]
    assert m["accuracy"] > 0.95 and m["fallback_pages"] == 0
    # in sample (holdout=0): predictions from period K on
    ins = kleio.predictions(alternating_trace, "kleio", pages=1, period=40, history=4, fast_capacity=0.5, holdout=0,
                            progress=False).info
    assert ins["eval_start_period"] == 4 and not ins["out_of_sample"]
    # the pattern changes in the held-out periods: the models of pages 4-7 keep predicting
    # the alternation, lose to history, and fall back
    d = kleio.predictions(drift_trace, "kleio", pages=1, period=40, history=4, fast_capacity=0.5, holdout=1 / 3,
                          progress=False, also_without_fallback=True, fallback="future")
    assert d.info["pages_losing_to_history"] == d.info["fallback_pages"] > 0 and d.info["future_knowledge"]
    doc = json.loads(open(d.path).read())
    fell = [p for p, r in doc["rows"].items() if set(r) == {"-"}]
    assert len(fell) == d.info["fallback_pages"]
    nofb = json.loads(open(d.info["no_fallback_path"]).read())
    assert all(set(r) != {"-"} for r in nofb["rows"].values())
    assert d.info["scores"]["used"]["class_mae"] <= d.info["scores"]["history"]["class_mae"]


def test_kleio_fallback_is_never_worse_than_history_on_a_real_trace(cli):
    """003 §3.2 hybrid scheduler: with the fallback, Kleio on 403.gcc is at least
    as fast as history in this setting, and the study reports the collapse metric."""
    pytest.importorskip("torch")
    from conftest import VENDORED

    s = kleio.study(VENDORED / "403.gcc.gz", "kleio", (0.1,), period=1000, epochs=20, progress=False,
                    class_weight="balanced")
    x = s["rows"][0]
    assert x["accessed_recall"] is not None and x["history_accessed_recall"] is not None
    assert x["fallback_pages"] > 0
    # balanced weighting makes models worse than history here; the fallback undoes that
    assert x["gap_bridged_no_fallback_pct"] < 0 <= x["gap_bridged_free_inference_pct"] + 0.5


def test_kleio_cli_reports_recall_and_fallbacks(alternating_trace, cli):
    pytest.importorskip("torch")
    rc, out, err = cli("kleio", alternating_trace, "--pages", "1", "--period", "40", "--history", "4",
                       "-c", "0.5", "-q")
    assert rc == 0, err
    assert "acc. recall" in out and "used" in out and "held-out periods 30..59" in out
    assert "break-even" in out and "untrained" in out and "FUTURE KNOWLEDGE" in out
    for bad in (("--holdout", "1.5"), ("--infer-ns", "fast")):
        rc, _, err = cli("kleio", alternating_trace, "--period", "40", *bad, "-q")
        assert rc == 2 and bad[0] in err and err.count("\n") == 1


def test_kleio_study_json_replays(alternating_trace, cli, tmp_path):
    """`tierkit kleio --json` carries every run of the study with the predictions it read:
    `tierkit replay` runs each again and gets the same figures."""
    pytest.importorskip("torch")
    rc, out, err = cli("kleio", alternating_trace, "--pages", "1", "--period", "40", "--history", "4", "--epochs", "10",
                       "-c", "0.5", "--json", "-q")
    assert rc == 0, err
    s = json.loads(out)
    # history, oracle, and per fraction: 3 fallbacks, the charged headline, hybrid, 3 controls
    assert len(s["results"]) == 2 + 8 and all("inputs" in r["config"] for r in s["results"][2:])
    f = tmp_path / "study.json"
    f.write_text(out)
    rc, out, err = cli("replay", f, "-q")
    assert rc == 0, err
    assert out.count("same figures, bit for bit") == 10
    del s["results"]
    f.write_text(json.dumps(s))
    rc, _, err = cli("replay", f, "-q")
    assert rc == 2 and "results" in err and err.count("\n") == 1


def test_kleio_result_replays_bit_for_bit(alternating_trace, cli, tmp_path):
    """A kleio result carries its predictions (by SHA-256) and its training
    parameters, and `tierkit replay` reproduces every figure, after the temporary
    predictions file is gone."""
    pytest.importorskip("torch")
    import os

    r = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,epochs=30")
    cfg = r["config"]
    # the training parameters are recorded, not blank
    assert "history=4" in cfg["policy"] and "epochs=30" in cfg["policy"] and "pages=1" in cfg["policy"]
    assert "holdout=0.5" in cfg["policy"] and "fallback=online" in cfg["policy"]
    emb = cfg["inputs"]["predictions"]
    assert emb["sha256"] == cfg["models"]["predictions_sha256"]
    assert not os.path.exists(emb["path"])  # the CLI process that made it has exited
    f = tmp_path / "r.json"
    f.write_text(json.dumps(r))
    rc, out, err = cli("replay", f, "--json", "-q")
    assert rc == 0, err
    again = json.loads(out)
    for k in ("runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes", "periods"):
        assert again[k] == r[k], k
    # a tampered embedded file is refused
    emb["sha256"] = "0" * 64
    f.write_text(json.dumps(r))
    rc, _, err = cli("replay", f, "-q")
    assert rc == 2 and "SHA-256" in err and err.count("\n") == 1


def test_fallback_on_the_shared_spec_traces(shared_traces):
    """The fallback on the three real SPEC traces: the accessed recall is reported for the models
    and history, and with the fallback what the scheduler uses errs no more than history on
    the held-out periods (pages whose models lose follow history)."""
    pytest.importorskip("torch")
    for name in ("403.gcc.gz", "444.namd.gz", "447.dealII.gz"):
        m = kleio.predictions(shared_traces / name, "kleio", pages=0.05, period=1000, epochs=10, progress=False).info
        assert m["out_of_sample"] and m["eval_periods"] > 0
        assert m["accessed_recall"] is not None and m["history_accessed_recall"] is not None
        used, hist = m["scores"]["used"], m["scores"]["history"]
        assert used["class_mae"] <= hist["class_mae"], name
        assert used["scored"] == hist["scored"]


def test_trained_predictions_are_reused_by_trace_digest_and_configuration(alternating_trace, cli, tmp_path, monkeypatch):
    """`simulate kleio:...` used to train its models again on every call; now predictions
    are kept by the trace's digest and the training configuration, and reused."""
    pytest.importorskip("torch")
    monkeypatch.setenv("TIERKIT_CACHE", "on")
    monkeypatch.setenv("TIERKIT_CACHE_DIR", str(tmp_path / "cache"))
    args = dict(pages=1, period=40, history=4, fast_capacity=0.5, progress=False, epochs=20)
    first = kleio.predictions(alternating_trace, "kleio", **args)
    assert first.info["cached"] is False and first.info["train_seconds"] > 0
    again = kleio.predictions(alternating_trace, "kleio", **args)
    assert again.info["cached"] is True
    assert kleio.file_digest(again.path) == first.info["predictions_sha256"]
    # another seed is another configuration: trained
    assert kleio.predictions(alternating_trace, "kleio", seed=1, **args).info["cached"] is False
    # a damaged cached file is not used: trained again, and the same bytes come out
    open(again.path, "a").write(" ")
    fresh = kleio.predictions(alternating_trace, "kleio", **args)
    assert fresh.info["cached"] is False and fresh.info["predictions_sha256"] == first.info["predictions_sha256"]
    # the CLI reuses them too, with the same result as training
    r1 = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,epochs=20")
    r2 = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4,epochs=20")
    assert r1["runtime_ns"] == r2["runtime_ns"] and r2["config"]["models"]["cached"] is True
