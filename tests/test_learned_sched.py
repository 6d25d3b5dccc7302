"""Cori, Kleio and Kleoniki (003 §3.2-§4, issue 6): the reuse collector and frequency
generator on traces with known reuse, the tuner's stopping rule, the page selector's
ranking, the learned schedulers end to end, and the heat map."""
import json

import numpy as np
import pytest

import tierkit
from tierkit import cori, kleio
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
    assert all(m["trials"] == n for m in r["methods"].values())
    assert r["best_runtime_ns"] == min(s["runtime_ns"] for s in r["sweep"])
    assert all(m["slowdown_vs_best"] >= 0 for m in r["methods"].values())
    # same inputs, same result
    rc, out2, _ = cli("tune", reuse_trace, "--bucket", "5", "--grid", "10", "--json", "-q")
    assert json.loads(out2) == r
    rc, out, err = cli("tune", reuse_trace, "--bucket", "5", "--no-sweep", "-q")
    assert rc == 0 and "Cori chose period" in out and "exhaustive" not in out


def test_tune_errors_are_one_line(reuse_trace, cli, tmp_path):
    for args in (["--scheduler", "kleio"], ["--bucket", "0"], ["--patience", "0"]):
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
    k = _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4")
    assert h["runtime_ns"] > o["runtime_ns"]
    gap = kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"])
    assert gap >= 90, gap
    m = k["config"]["models"]
    assert m["models"] == 8 and m["pages_selected"] == 8 and m["accuracy"] > 0.95
    assert m["history_accuracy"] < 0.05  # last period's class is always wrong here
    # same inputs and seed, same result
    assert _runtime(cli, alternating_trace, "kleio:pages=1,period=40,history=4")["runtime_ns"] == k["runtime_ns"]


def test_kleoniki_groups_identical_patterns(alternating_trace, cli):
    pytest.importorskip("torch")
    k = _runtime(cli, alternating_trace, "kleoniki:pages=1,period=40,history=4,tol=0")
    m = k["config"]["models"]
    # the four pages of each set share one pattern: two models for eight pages
    assert m["models"] == 2 and m["pages_per_model"] == 4.0 and m["distinct_patterns"] == 2
    o = _runtime(cli, alternating_trace, "oracle:period=40")
    h = _runtime(cli, alternating_trace, "history:period=40")
    assert kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"]) >= 90


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
    # the user's spec, then the scheduler's parameters and the predictions it read; no empty keys
    assert "kleoniki:pages=1,period=40,history=4,tol=0  ->  kleoniki:bins=16,period=40,predictions=" in line
    assert "=," not in line


def test_models_trained_on_another_run_apply_by_address(alternating_trace, cli, tmp_path):
    pytest.importorskip("torch")
    # another run of the same program: the same pages, a longer run, and a page first touched
    # in another order (so page ids differ between the runs; addresses do not)
    seq = [99] + [(0 if t % 2 == 0 else 4) + i % 4 for t in range(90) for i in range(40)]
    other = pages_trace(tmp_path / "other.tkt", seq[:-1])
    h = _runtime(cli, other, "history:period=40")
    o = _runtime(cli, other, "oracle:period=40")
    k = _runtime(cli, other, f"kleio:pages=1,period=40,history=4,train={alternating_trace}")
    m = k["config"]["models"]
    assert m["train_trace"] == str(alternating_trace) and m["models"] == 8 and m["pages_predicted"] == 8
    assert kleio.gap_bridged(h["runtime_ns"], o["runtime_ns"], k["runtime_ns"]) >= 80
