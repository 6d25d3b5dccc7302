"""docs/policies.md, "Activations and warnings": no policy may silently do nothing. Every result
carries ``activations`` (how many times the policy's periodic or epoch work ran; null without
periodic work) and ``warnings`` (plain sentences), in the JSON, the DataFrame, the CSV and Parquet
files, the terminal output and the HTML report."""
import json

import pandas as pd

import tierkit

HYPLACER_0 = "hyplacer acted 0 times: its 1 s interval is longer than the run's "


def test_results_and_dataframes_carry_activations_and_warnings(zipf_trace):
    # 004 §4: HyPlacer's control loop every 1 s never runs in a run of a few ms
    h = tierkit.run(zipf_trace, "dram-pmem", "hyplacer", fast_capacity=0.2, progress=False)
    assert h["activations"] == 0 and h["migrations"] == 0
    assert h["warnings"][0].startswith(HYPLACER_0) and h["warnings"][0].endswith("see --repeat / --time-scale")
    # 003 §3.1: history runs at every boundary: 50,000 accesses, period 1000 → 49
    hi = tierkit.run(zipf_trace, "dram-pmem", "history:period=1000", fast_capacity=0.2, progress=False)
    assert hi["activations"] == 49 and hi["warnings"] == []
    # a fixed placement has no periodic work: null, and nothing to warn about
    ft = tierkit.simulate(zipf_trace, "dram-pmem", "first-touch", fast_capacity=0.2)
    assert ft["activations"].dtype == "Int64" and pd.isna(ft["activations"][0])
    assert ft["warnings"][0] == []

    df = tierkit.compare(zipf_trace, "dram-pmem", "first-touch,hyplacer,history:period=1000", fast_capacity=0.2, progress=False)
    by = df.set_index("policy")
    assert by.loc["hyplacer", "activations"] == 0 and by.loc["history:period=1000", "activations"] == 49
    # hyplacer never acted and charged nothing: its result is first-touch's, and it says so
    assert by.loc["hyplacer", "runtime_ns"] == by.loc["first-touch", "runtime_ns"]
    assert "hyplacer's result is identical to first-touch's (same runtime and fast-tier hits)" in by.loc["hyplacer", "warnings"]
    assert by.loc["first-touch", "warnings"] == []


def test_python_policies_count_their_periods(zipf_trace):
    r = tierkit.run(zipf_trace, "dram-pmem", tierkit.HotPromote(period=10_000), fast_capacity=0.2, progress=False)
    assert r["activations"] == 4 and r["warnings"] == []


def test_compare_shows_warnings_in_the_table_files_and_report(cli, zipf_trace, tmp_path):
    d = tmp_path / "rep"
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch,hyplacer,history:period=1000", "--out", d, "-q")
    assert rc == 0, err
    # the terminal table marks the row and lists the sentence under it
    assert "hyplacer !" in out and "acted" in out
    assert "warnings (! in the table):" in out and f"! {HYPLACER_0}" in out
    csv = pd.read_csv(d / "results.csv")
    pq = pd.read_parquet(d / "results.parquet")
    for df in (csv, pq):
        by = df.set_index("policy")
        assert by.loc["hyplacer", "activations"] == 0 and by.loc["history:period=1000", "activations"] == 49
        assert pd.isna(by.loc["first-touch", "activations"])
    assert json.loads(csv.set_index("policy").loc["hyplacer", "warnings"])[0].startswith(HYPLACER_0)
    assert list(pq.set_index("policy").loc["hyplacer", "warnings"])[0].startswith(HYPLACER_0)
    assert json.loads(csv.set_index("policy").loc["first-touch", "warnings"]) == []
    rows = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    assert {r["policy"]: r["activations"] for r in rows}["first-touch"] is None
    page = (d / "index.html").read_text()
    assert "<h2>Warnings</h2>" in page and "hyplacer (!)" in page
    assert HYPLACER_0.replace("'", "&#x27;") in page


def test_simulate_prints_activations_and_warnings(cli, zipf_trace):
    rc, out, err = cli("simulate", zipf_trace, "-c", "0.2", "-P", "hyplacer", "-q")
    assert rc == 0, err
    assert any(l.split()[:2] == ["activations", "0"] for l in out.splitlines()), out
    assert any(l.startswith("warning ") and l[len("warning"):].lstrip().startswith(HYPLACER_0) for l in out.splitlines()), out
    rc, out, err = cli("simulate", zipf_trace, "-c", "0.2", "-P", "first-touch", "--json", "-q")
    r = json.loads(out)
    assert r["activations"] is None and r["warnings"] == []


def test_warnings_name_the_policy_as_the_user_wrote_it():
    # the front end makes guided:strategy=... into guided:guidance=<file>; the warning (and
    # the result) keep the user's spec. fthp's 100 ms epoch (000 §6.4) never ends in this run
    from conftest import VENDORED

    spec = "guided:strategy=hotset,then=fthp"
    r = tierkit.run(VENDORED / "sqlite3-orders.tkt", "hbm-ddr3", spec, fast_capacity=0.125, progress=False)
    assert r["policy"] == spec and r["activations"] == 0
    assert r["warnings"][0].startswith(f"{spec} acted 0 times: its 100 ms interval is longer than the run's ")
