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
