"""Dynamic migration from the command line and the API (docs/policies.md): the time series of the
on-the-fly and epoch policies as CSV and plots, energy per run, and one-line errors."""
import csv
import json

import pytest

import tierkit

OTF_COLUMNS = ["window", "time_ms", "mbq", "migrations", "threshold", "paused", "remap_occupancy", "mbq_window", "mbq_cumulative"]


@pytest.fixture(scope="module")
def hot_trace(tmp_path_factory):
    # a few hot pages take most accesses: the on-the-fly policies migrate them
    p = tmp_path_factory.mktemp("mig") / "hot.tkt"
    tierkit.synth("zipf", p, accesses=400_000, pages=4_000, seed=7, theta=1.2, write_ratio=0.3, progress=False)
    return p


def test_timeseries_csv_follows_algorithm_3(cli, hot_trace, tmp_path):
    ts = tmp_path / "ts.csv"
    rc, out, err = cli("simulate", hot_trace, "--platform", "hbm-pcm", "-c", "0.25", "--timing", "detailed",
                       "--policy", "otf-adaptive:algorithm=3,twindow=400K", "--timeseries", ts, "--json", "-q")
    assert rc == 0, err
    rows = list(csv.DictReader(ts.open()))
    assert list(rows[0].keys()) == OTF_COLUMNS
    assert len(rows) > 10
    thresholds = [float(r["threshold"]) for r in rows]
    # Algorithm 3 doubles or halves between 32 and 256, one step per window at most
    assert set(thresholds) <= {32.0, 64.0, 128.0, 256.0}
    for a, b in zip(thresholds, thresholds[1:]):
        assert b in (a, a * 2, a / 2)
    assert any(float(r["migrations"]) > 0 for r in rows)
    r = json.loads(out)
    assert r["stats"]["policy"]["counters"]["windows"] == len(rows) - 1  # plus the window under way
    # the same series from the API
    df = tierkit.timeseries(r)
    assert list(df.columns) == OTF_COLUMNS and len(df) == len(rows)


def test_timeseries_file_is_not_overwritten_without_force(cli, hot_trace, tmp_path):
    ts = tmp_path / "ts.csv"
    ts.write_text("mine\n")
    rc, _, err = cli("simulate", hot_trace, "--platform", "hbm-pcm", "--policy", "otf", "--timeseries", ts, "-q")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--force" in err
    assert ts.read_text() == "mine\n"
    rc, _, err = cli("simulate", hot_trace, "--platform", "hbm-pcm", "--policy", "otf", "--timeseries", ts, "--force", "-q")
    assert rc == 0, err
    assert ts.read_text().startswith("window,")


def test_timeseries_of_a_policy_without_one_is_an_error(cli, hot_trace, tmp_path):
    rc, _, err = cli("simulate", hot_trace, "--platform", "hbm-pcm", "-c", "0.2", "--policy", "first-touch",
                     "--timeseries", tmp_path / "ts.csv", "-q")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "time series" in err
    assert not (tmp_path / "ts.csv").exists()


@pytest.mark.parametrize("spec, message", [
    ("otf-adaptive:algorithm=4", "algorithm"),
    ("otf:ar=sometimes", "ar"),
    ("otf-reverse:remap=1", "remap"),
    ("mempod:pods=0", "pods"),
])
def test_bad_parameters_are_one_line_errors(cli, hot_trace, spec, message):
    rc, _, err = cli("simulate", hot_trace, "--platform", "hbm-pcm", "--policy", spec, "-q")
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_compare_plots_time_series_and_reports_energy(cli, hot_trace, tmp_path):
    out = tmp_path / "cmp"
    rc, stdout, err = cli("compare", hot_trace, "--platform", "hbm-pcm", "-c", "0.25", "--timing", "detailed",
                          "--policies", "interleave:weights=4/4,otf,otf-adaptive:algorithm=3,hma-epoch:epoch=1ms", "--out", out, "--json", "-q")
    assert rc == 0, err
    runs = {r["policy"]: r for r in map(json.loads, stdout.splitlines())}
    pngs = sorted(p.name for p in out.glob("timeseries-*.png"))
    assert len(pngs) == 3 and not any("interleave" in p for p in pngs)
    for r in runs.values():
        assert r["energy_j"] > 0
    # on a trace whose hot pages start in PCM, migrating them saves time and energy
    assert runs["otf"]["runtime_ns"] < runs["interleave:weights=4/4"]["runtime_ns"]
    assert runs["otf"]["energy_j"] < runs["interleave:weights=4/4"]["energy_j"]
