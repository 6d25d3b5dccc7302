"""compare --out: CSV, Parquet, PNG plots and one HTML page."""
import pandas as pd


def test_compare_out_writes_everything(cli, zipf_trace, tmp_path):
    d = tmp_path / "rep"
    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch,interleave:weights=4/4", "--out", d)
    assert rc == 0, err
    for f in ["results.csv", "results.parquet", "results.jsonl", "runtime.png", "hit_ratio.png", "migrated.png", "index.html"]:
        assert (d / f).stat().st_size > 0, f
    df = pd.read_parquet(d / "results.parquet")
    assert list(df["policy"]) == ["first-touch", "interleave:weights=4/4", "all-slow"]
    assert (d / "runtime.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (d / "index.html").read_text()
    assert "first-touch" in html and "data:image/png;base64" in html
    assert "vs all-slow" in out


def test_compare_json_lines(cli, zipf_trace):
    import json

    rc, out, err = cli("compare", zipf_trace, "-c", "0.2", "--policies", "first-touch", "--json")
    assert rc == 0, err
    rows = [json.loads(l) for l in out.splitlines()]
    assert [r["policy"] for r in rows] == ["first-touch", "all-slow"]
    for r in rows:
        for k in ["trace", "platform", "policy", "accesses", "runtime_ns", "fast_hit_ratio", "migrations", "migrated_bytes", "energy_j"]:
            assert k in r


def test_time_series_are_drawn_against_their_time_column():
    """A series with a time column (memos' and damon-tiering's: a window number, then
    time_ms) is drawn against that time, and the time is not a panel of its own."""
    import pandas as pd

    from tierkit.report import _plot_timeseries, varying_columns, x_column

    ts = pd.DataFrame({"cycle": [0, 1, 2], "time_ms": [4.0, 8.0, 12.0], "migrations": [5, 0, 7], "flat": [1, 1, 1]})
    assert x_column(ts) == "time_ms" and varying_columns(ts) == ["migrations"]
    fig = _plot_timeseries(ts, "t")
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "time_ms"
    assert list(fig.axes[0].lines[0].get_xdata()) == [4.0, 8.0, 12.0]
    windows = pd.DataFrame({"window": [0, 1], "mbq": [3, 4]})
    assert x_column(windows) == "window" and varying_columns(windows) == ["mbq"]
