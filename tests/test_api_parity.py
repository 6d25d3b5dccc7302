"""The Python API at parity with the command line (docs/python.md): `tierkit.profile`, `guide`,
`tune`, `kleio`, `kleoniki`, `heatmap` and `load` return what the commands print as JSON (or
write), their errors name the functions' parameters rather than the options, and their
annotations name the types they return."""
import json
import typing

import numpy as np
import pandas as pd
import pytest

import tierkit
from tierkit import api

from conftest import VENDORED

SQLITE = VENDORED / "sqlite3-orders.tkt"
PAGE = 4096


def _cli_json(cli, *args, quiet=True):
    rc, out, err = cli(*args, "--json", *(["-q"] if quiet else []))
    assert rc == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def alternating(tmp_path_factory):
    """Sets A (pages 0-3) and B (pages 4-7) take turns, 40 accesses per period, 60 periods
    (as in test_learned_sched.py): history always holds the set that just went cold."""
    seq = np.array([(0 if t % 2 == 0 else 4) + i % 4 for t in range(60) for i in range(40)], dtype=np.uint64)
    p = tmp_path_factory.mktemp("t") / "alt.tkt"
    api.write_trace(p, 0x10_0000 + seq * PAGE)
    return p


def test_profile_and_guide_equal_the_commands(cli, tmp_path):
    p = tierkit.profile(SQLITE, context=1, progress=False)
    assert p == _cli_json(cli, "profile", SQLITE, "--context", "1", "-o", tmp_path / "p.json")
    sites = tierkit.profile_sites(p)
    assert isinstance(sites, pd.DataFrame) and len(sites) == len(p["sites"])
    assert sites["accesses_pct"].is_monotonic_decreasing
    # from the dict or from the file the command wrote, the same guidance as the command's
    g = tierkit.guide(p, strategy="knapsack", capacity=0.25)
    assert g == tierkit.guide(tmp_path / "p.json", strategy="knapsack", capacity="0.25")
    assert g == _cli_json(cli, "guide", tmp_path / "p.json", "-s", "knapsack", "-c", "0.25", "-o", tmp_path / "g.json", quiet=False)
    # out= writes the file a guided run reads, and refuses to overwrite it without force
    tierkit.guide(p, strategy="hotset", capacity="64K", out=tmp_path / "h.json")
    assert json.loads((tmp_path / "h.json").read_text())["strategy"] == "hotset"
    with pytest.raises(tierkit.TierkitError, match="exists"):
        tierkit.guide(p, strategy="hotset", out=tmp_path / "h.json")
    tierkit.guide(p, strategy="thermos", out=tmp_path / "h.json", force=True)
    assert json.loads((tmp_path / "h.json").read_text())["strategy"] == "thermos"


def test_tune_equals_the_command(cli, alternating):
    t = tierkit.tune(alternating, fast_capacity=0.5, grid=10, progress=False)
    assert t == _cli_json(cli, "tune", alternating, "-c", "0.5", "--grid", "10")
    trials = tierkit.tune_trials(t)
    assert list(trials["period"]) == [x["period"] for x in t["trials"]]
    assert trials["chosen"].sum() == 1 and trials.loc[trials["chosen"], "period"].item() == t["chosen_period"]


def test_learned_schedulers_return_their_rows(cli, alternating):
    pytest.importorskip("torch")
    args = dict(pages=[1.0], period=40, history=4, epochs=20, fast_capacity=0.5, progress=False, infer_ns=2000)
    k = tierkit.kleio(alternating, **args)
    assert isinstance(k, pd.DataFrame) and len(k) == 1
    r = _cli_json(cli, "kleio", alternating, "--pages", "1", "--period", "40", "--history", "4", "--epochs", "20",
                  "-c", "0.5", "--infer-ns", "2000")
    timing = ("train_seconds", "inference_per_period_ms")  # wall-clock times differ run to run
    assert {c: v for c, v in k.iloc[0].items() if c not in timing} == \
        {c: v for c, v in r["rows"][0].items() if c not in timing}
    study = k.attrs["study"]
    assert study["history_runtime_ns"] == r["history_runtime_ns"] and study["periods"] == 60
    # out of sample and trusted after 8 held-out periods: about a third of the gap
    # (test_learned_sched.py) before inference; 8 models x 2 us a boundary cost more
    assert k["gap_bridged_free_inference_pct"].item() > 30 and k["gap_bridged_pct"].item() < 0
    g = tierkit.kleoniki(alternating, tol=0, **args)
    assert g["models"].item() == 2 and g["pages_per_model"].item() == 4.0  # two patterns, eight pages
    assert g.attrs["study"]["cori_period"] is None  # the period was given


def test_heatmap_returns_the_figure_and_writes_it(alternating, tmp_path):
    fig = tierkit.heatmap(alternating, period=40, progress=False)
    assert "8 pages, 60 periods" in fig.axes[0].get_title()
    out = tmp_path / "h.png"
    tierkit.heatmap(alternating, period=40, out=out, progress=False)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(tierkit.TierkitError, match="exists"):
        tierkit.heatmap(alternating, out=out)


def test_load_reads_a_report_back(zipf_trace, tmp_path, cli):
    out = tmp_path / "rep"
    df = tierkit.compare(zipf_trace, policies="first-touch,history:period=5000", fast_capacity=0.2, progress=False)
    rc, _, err = cli("compare", zipf_trace, "--policies", "first-touch,history:period=5000", "-c", "0.2", "--out", out, "-q")
    assert rc == 0, err
    back = tierkit.load(out)
    drop = ["warnings"]
    pd.testing.assert_frame_equal(back.drop(columns=drop), df.drop(columns=drop), check_dtype=False)
    assert list(back["warnings"]) == list(df["warnings"])
    assert [r["runtime_ns"] for r in back.attrs["results"]] == [r["runtime_ns"] for r in df.attrs["results"]]
    (out / "INCOMPLETE").write_text("interrupted\n")
    with pytest.raises(tierkit.TierkitError, match="not finished"):
        tierkit.load(out)
    with pytest.raises(tierkit.TierkitError, match="no such directory: tierkit.load reads the report directory"):
        tierkit.load(tmp_path / "nowhere")


@pytest.mark.parametrize("call, named", [
    (lambda t: tierkit.kleio(t, pages=2), "pages: 2 is not a fraction"),
    (lambda t: tierkit.kleio(t, fast_capacity=0), "fast_capacity: 0 is not a fraction"),
    (lambda t: tierkit.heatmap(t, period=0), "period: 0 must be at least 1"),
    (lambda t: tierkit.tune(t, grid=0), "grid: 0 must be"),
    (lambda t: tierkit.simulate(t, fast_capacity="lots"), "fast_capacity"),
    (lambda t: tierkit.simulate(t, format="nonsense"), "format"),
    (lambda t: tierkit.guide(tierkit.profile(SQLITE, progress=False), strategy="best"), "strategy: 'best'"),
])
def test_errors_name_parameters_not_options(alternating, call, named):
    with pytest.raises(tierkit.TierkitError) as e:
        call(alternating)
    assert named in str(e.value) and "--" not in str(e.value), str(e.value)


def test_the_command_line_still_names_its_options(cli, alternating):
    rc, _, err = cli("simulate", alternating, "--format", "nonsense", "-q")
    assert rc == 2 and "--format" in err


def test_annotations_name_the_returned_types():
    from tierkit import studies

    hints = lambda f: typing.get_type_hints(f, {**vars(api), **vars(studies), "pd": pd})  # noqa: E731
    for f in (tierkit.kleio, tierkit.kleoniki, tierkit.load, tierkit.profile_sites, tierkit.tune_trials,
              tierkit.compare, tierkit.simulate, tierkit.read_trace, tierkit.sweep):
        assert hints(f)["return"] is pd.DataFrame, f.__name__
    for f in (tierkit.profile, tierkit.guide, tierkit.tune):
        assert typing.get_origin(hints(f)["return"]) is dict, f.__name__
    assert tierkit.kleio.__doc__ and "003" in tierkit.kleio.__doc__


def test_run_program_returns_the_live_report(tmp_path, capsys):
    """tierkit.run_program is `tierkit run --json` (here on the host: its one node, first-touch,
    no kernel setting changed): the report as a dict, the program's output passed through."""
    import os
    import shutil

    from tierkit import workloads as wl

    if not (shutil.which("make") and shutil.which(os.environ.get("CC", "cc"))):
        pytest.skip("make or a C compiler is missing (the workloads are built from workloads/)")
    bindir = wl.build()
    r = tierkit.run_program(bindir / "rwmix", ["--size", "medium", "--work", "0.3"], interval="50ms",
                            timeseries=tmp_path / "ts.csv")
    assert r["exit_status"] == 0 and r["policy"] == "first-touch" and r["observations"] >= 1
    assert r["timeseries_rows"] == len((tmp_path / "ts.csv").read_text().splitlines()) - 1
    assert "checksum=" in capsys.readouterr().out  # rwmix's own output
    with pytest.raises(tierkit.TierkitError, match=r"^fast_node: 4095: no NUMA node"):
        tierkit.run_program("true", fast_node=4095)
    with pytest.raises(tierkit.TierkitError, match="exists"):
        tierkit.run_program("true", timeseries=tmp_path / "ts.csv")
    with pytest.raises(tierkit.TierkitError, match="not both"):
        tierkit.run_program("true", pid=1)
