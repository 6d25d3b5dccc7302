"""Results in a notebook (docs/python.md, "Results in a notebook"): derived frames share the
full results instead of copying them, typed and query-friendly columns, the per-tier frame,
the plots and the HTML display."""
import copy
import json

import matplotlib
import pandas as pd
import pytest

import tierkit
from tierkit.results import Results

matplotlib.use("Agg")

POLICIES = "first-touch,history:period=5000,otf"


@pytest.fixture(scope="module")
def compared(zipf_trace):
    return tierkit.compare(zipf_trace, policies=POLICIES, fast_capacity=0.2, progress=False)


def test_derived_frames_share_the_results_and_never_copy_them(compared, monkeypatch):
    held = compared.attrs["results"]
    assert isinstance(held, Results) and isinstance(held, list) and len(held) == len(compared)
    copies = []
    real = Results.__deepcopy__

    def counted(self, memo):
        copies.append(self)
        return real(self, memo)

    monkeypatch.setattr(Results, "__deepcopy__", counted)
    derived = [
        compared[["policy", "runtime_ns"]],
        compared[compared["fast_hit_ratio"] > 0].sort_values("runtime_ns"),
        compared.query("runtime_vs_all_slow <= 1"),
        compared.copy(),
        compared["runtime_ns"].to_frame(),
        pd.concat([compared, compared]),
    ]
    assert copies, "pandas did not copy attrs: this test no longer checks anything"
    for d in derived:
        assert d.attrs["results"] is held
    assert all(c is held for c in copies)
    # what existing code does with it still works: index, iterate, serialize, compare
    assert held[0]["policy"] == "first-touch"
    assert [r["policy"] for r in held] == list(compared["policy"])
    assert json.loads(json.dumps(compared.attrs["results"]))[1]["policy"] == "history:period=5000"
    assert held == list(held) and copy.deepcopy(held) is held


def test_columns_are_typed_and_the_trace_has_a_short_name(compared, zipf_trace):
    # the simple timing model gives no IPC: NaN in a float column, not None in an object one
    assert compared["ipc"].dtype == "float64" and compared["ipc"].isna().all()
    assert compared["energy_j"].dtype == "float64" and compared["runtime_ns"].dtype == "float64"
    assert str(compared["activations"].dtype) == "Int64"
    assert (compared["trace"] == str(zipf_trace)).all()
    assert (compared["trace_name"] == zipf_trace.name).all()
    assert list(compared.columns).index("trace_name") == list(compared.columns).index("trace") + 1
    one = tierkit.simulate(zipf_trace, policy="first-touch", fast_capacity=0.2)
    assert one["ipc"].dtype == "float64" and one["trace_name"][0] == zipf_trace.name
    assert isinstance(one.attrs["results"], Results)
    detailed = tierkit.simulate(zipf_trace, policy="first-touch", fast_capacity=0.2, timing="detailed")
    assert detailed["ipc"].dtype == "float64" and detailed["ipc"][0] > 0


def test_query_friendly_names_beside_the_old_ones(compared):
    fast = compared.query("runtime_vs_all_slow < 1")
    assert "all-slow" not in set(fast["policy"]) and len(fast) >= 1
    # the names with '-' are kept for one release, the same values
    pd.testing.assert_series_equal(compared["runtime_vs_all-slow"], compared["runtime_vs_all_slow"], check_names=False)
    pd.testing.assert_series_equal(compared["speedup_vs_all-slow"], compared.speedup_vs_all_slow, check_names=False)
    ft = tierkit.compare(compared["trace"][0], policies="history:period=5000", baseline="first-touch",
                         fast_capacity=0.2, progress=False)
    assert ft.query("policy == 'first-touch'")["runtime_vs_first_touch"].iloc[0] == 1.0


def test_per_tier_frame_adds_up_to_each_run(compared):
    t = tierkit.tiers(compared)
    assert list(t.columns[:6]) == ["trace", "trace_name", "policy", "run", "tier", "tier_name"]
    tiers_per_run = len(compared.attrs["results"][0]["stats"]["platform"]["tiers"])
    assert len(t) == len(compared) * tiers_per_run
    sums = t.groupby("run")[["hits", "reads", "writes", "migrated_in_bytes", "migrated_out_bytes", "hit_share"]].sum()
    for i, row in compared.iterrows():
        s = sums.loc[i]
        assert s["hits"] == row["accesses"] and s["reads"] == row["reads"] and s["writes"] == row["writes"]
        assert s["migrated_in_bytes"] == row["migrated_bytes"] == s["migrated_out_bytes"]
        assert s["hit_share"] == pytest.approx(1.0)
        assert t[(t["run"] == i) & (t["tier"] == 0)]["hit_share"].iloc[0] == pytest.approx(row["fast_hit_ratio"])
    assert t["read_latency_ns"].notna().all() and t["latency_ns"].notna().all()
    # a filtered, sorted frame: its rows' runs, labelled by its index
    sub = compared[compared["policy"] != "all-slow"].sort_values("runtime_ns", ascending=False)
    ts = tierkit.tiers(sub)
    assert list(dict.fromkeys(ts["run"])) == list(sub.index)
    assert list(dict.fromkeys(ts["policy"])) == list(sub["policy"])
    # reindexed: matched by trace and policy
    again = tierkit.tiers(sub.reset_index(drop=True))
    assert list(dict.fromkeys(again["policy"])) == list(sub["policy"])
    # one result, as run() returns it; a list of them
    r = compared.attrs["results"][1]
    assert tierkit.tiers(r)["hits"].sum() == r["accesses"]
    assert len(tierkit.tiers(list(compared.attrs["results"]))) == len(t)
    with pytest.raises(tierkit.TierkitError, match="holds no results"):
        tierkit.tiers(pd.DataFrame({"policy": ["x"]}))
    # a result read from someone's report may hold anything: one line, no traceback
    with pytest.raises(tierkit.TierkitError, match="^run 0 \\(policy 'x'\\): its stats are not"):
        tierkit.tiers({"policy": "x", "stats": {"platform": {"tiers": [{"reads": "many"}]}}})


def test_plot_helpers_return_axes(compared):
    from matplotlib.axes import Axes

    ax = tierkit.plot_runtime(compared)
    assert isinstance(ax, Axes) and "all-slow" in ax.get_xlabel()
    assert len(ax.patches) == len(compared)
    # a spread of more than 10 times gets a log axis unless told otherwise
    ax = tierkit.plot_runtime(compared.assign(x=[1.0, 2.0, 50.0, 3.0]), column="x")
    assert ax.get_xscale() == "log"
    assert tierkit.plot_runtime(compared, log=False).get_xscale() == "linear"
    ax = tierkit.plot_tiers(compared)
    assert isinstance(ax, Axes) and {t.get_text() for t in ax.get_yticklabels()} == set(compared["policy"])
    with pytest.raises(tierkit.TierkitError, match="'nope': not in the frame"):
        tierkit.plot_runtime(compared, column="nope")
    import matplotlib.pyplot as plt

    plt.close("all")


def test_results_show_as_html_and_a_short_repr(compared):
    held = compared.attrs["results"]
    page = held._repr_html_()
    assert page.startswith("<table")
    for p in compared["policy"]:
        assert f"<td>{p}</td>" in page
    assert repr(held).startswith(f"Results({len(compared)} runs: first-touch, history:period=5000")
    assert len(repr(held)) < 200


def test_load_gives_the_same_columns_and_holder(compared, tmp_path):
    from tierkit import report

    out = tmp_path / "rep"
    report.write(compared, out)
    back = tierkit.load(out)
    assert isinstance(back.attrs["results"], Results)
    assert list(back.columns) == list(compared.columns)
    assert back["ipc"].dtype == "float64" and back.query("runtime_vs_all_slow < 1")["policy"].tolist() == \
        compared.query("runtime_vs_all_slow < 1")["policy"].tolist()
    # a report written before trace_name and the query-friendly names gets them when read
    old = compared.drop(columns=["trace_name", "runtime_vs_all_slow", "speedup_vs_all_slow"])
    old.attrs = {}
    old.to_parquet(out / "results.parquet", index=False)
    back = tierkit.load(out)
    assert "trace_name" in back and "runtime_vs_all_slow" in back
    assert tierkit.tiers(back)["hits"].sum() == compared["accesses"].sum()


def test_a_trace_frame_shares_its_events_with_the_frames_derived_from_it(zipf_trace):
    import tierkit

    df = tierkit.read_trace(zipf_trace, limit=1000)
    sub = df[df["write"] == 1][["addr"]].sort_values("addr")
    assert sub.attrs["events"] is df.attrs["events"] and sub.attrs["meta"] is df.attrs["meta"]
    assert sub.attrs["meta"] == dict(df.attrs["meta"])
