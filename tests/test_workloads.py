"""The workload suite keeps its contracts: every program builds and runs at --size small, the
same seed gives the same output and another seed another checksum, the footprint follows
--size, options do what they say, and a bad argument is one line on stderr with status 2."""
import json
import os
import re
import shutil
import subprocess

import pytest

import tierkit
from tierkit import workloads as wl

NAMES = ["gups", "bfs", "stencil", "spmv", "kmeans", "btree", "lu", "sites", "phases", "rwmix", "stages", "backprop"]
MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture(scope="module")
def bindir():
    if not (shutil.which("make") and (shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc"))):
        pytest.skip("make or a C compiler is missing")
    return wl.build()


def plan(bindir, name, size, *args):
    p = subprocess.run([str(bindir / name), "--size", size, "--plan", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return wl.parse_output(p.stdout)


def test_registry_names_the_twelve_workloads():
    assert list(wl.WORKLOADS) == NAMES
    df = wl.list_workloads()
    assert list(df["name"]) == NAMES
    assert {"pattern", "description", "hot", "options", "small_bytes", "medium_bytes", "large_bytes"} <= set(df.columns)


@pytest.mark.parametrize("name", NAMES)
def test_runs_small_and_is_deterministic(bindir, name):
    a = wl.run(name, "small", timeout=60)
    b = wl.run(name, "small", timeout=60)
    c = wl.run(name, "small", seed=2, timeout=60)
    assert re.fullmatch(r"[0-9a-f]{16}", a["checksum"]), a["stdout"]
    assert a["name"] == name and a["params"]["size"] == "small" and a["params"]["seed"] == 1
    assert a["stdout"] == b["stdout"]
    assert c["params"]["seed"] == 2 and c["checksum"] != a["checksum"]
    assert wl.run(name, "small", seed=2, timeout=60)["stdout"] == c["stdout"]


@pytest.mark.parametrize("name", NAMES)
def test_planned_footprint_per_size(bindir, name):
    bounds = {"small": (1 * MiB, 8 * MiB), "medium": (64 * MiB, 256 * MiB), "large": (1 * GiB, 4 * GiB)}
    for size, (lo, hi) in bounds.items():
        f = plan(bindir, name, size)["footprint_bytes"]
        assert lo <= f <= hi, (size, f)
        assert f == wl.WORKLOADS[name].footprint_bytes[size], "the registry is out of date with the program"


@pytest.mark.parametrize("name", NAMES)
def test_measured_footprint_grows_with_size(bindir, name):
    if wl._gnu_time() is None:
        pytest.skip("GNU time is not installed (sampling /proc is too coarse for runs of a few ms)")
    small = wl.run(name, "small", timeout=60)
    # --work 0: build and touch the data, skip the main loop (keeps the test fast)
    medium = wl.run(name, "medium", args=["--work", "0"], timeout=120)
    for r in (small, medium):
        # the planned peak heap, plus the program and libc (~1-2 MiB), give or take
        assert 0.6 * r["footprint_bytes"] <= r["peak_rss_bytes"] <= r["footprint_bytes"] + 8 * MiB, r["params"]
    assert medium["peak_rss_bytes"] > 10 * small["peak_rss_bytes"]


@pytest.mark.parametrize("ratio,reads_zero,writes_zero", [("0", False, True), ("1", True, False)])
def test_rwmix_extremes(bindir, ratio, reads_zero, writes_zero):
    r = wl.run("rwmix", args=["--write-ratio", ratio])
    counts = r["results"][0]
    n = r["params"]["accesses"]
    assert counts["reads"] + counts["writes"] == n > 0
    assert (counts["reads"] == 0) == reads_zero and (counts["writes"] == 0) == writes_zero


def test_rwmix_ratio_is_the_share_of_writes(bindir):
    sums = set()
    for ratio in (0.1, 0.5, 0.9):
        r = wl.run("rwmix", args=["--write-ratio", str(ratio)])
        c = r["results"][0]
        assert abs(c["writes"] / r["params"]["accesses"] - ratio) < 0.01
        sums.add(r["checksum"])
    assert len(sums) == 3


def test_gups_threads_do_not_change_the_result(bindir):
    one = wl.run("gups", args=["--threads", "1"])
    three = wl.run("gups", args=["--threads", "3"])
    assert one["checksum"] == three["checksum"] and three["params"]["threads"] == 3


def test_phases_move_the_hot_part(bindir):
    r = wl.run("phases", args=["--phases", "3"])
    phases = r["results"]
    assert [p["phase"] for p in phases] == [0, 1, 2]
    assert [p["first_byte"] for p in phases] == sorted({p["first_byte"] for p in phases})
    for p in phases:
        assert abs(p["updates"] / r["params"]["accesses_per_phase"] - 0.9) < 0.01


def test_stages_each_hammer_their_own_site(bindir):
    r = wl.run("stages", args=["--stages", "3"])
    stages = r["results"]
    assert [s["stage"] for s in stages] == [0, 1, 2] and r["params"]["stages"] == 3
    # one helper (allocation site) per stage, each with its own equal share of the footprint
    assert [s["function"] for s in stages] == [f"make_stage{i}_table" for i in range(3)]
    assert len({s["bytes"] for s in stages}) == 1
    assert sum(s["bytes"] for s in stages) == r["footprint_bytes"] == 8 * r["params"]["words"]
    n = r["params"]["accesses_per_stage"]
    assert n == 4 * stages[0]["bytes"] // 8
    for s in stages:
        assert s["updates"] + s["background_reads"] == n
        assert abs(s["updates"] / n - 0.9) < 0.01
    assert wl.run("stages", args=["--stages", "3", "--work", "0"])["results"][0]["updates"] == 0


def test_backprop_training_lowers_the_error(bindir):
    r = wl.run("backprop")
    its = r["results"]
    assert r["params"]["hidden"] == 16 and r["params"]["outputs"] == 1
    # two weight matrices of 16 floats per input and bias unit, the input units, 264 B of small arrays
    assert r["footprint_bytes"] == (r["params"]["inputs"] + 1) * (2 * 64 + 4) + 264
    assert [i["iteration"] for i in its] == list(range(r["params"]["iterations"]))
    errors = [i["error"] for i in its]
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert all(abs(i["output"] - 0.1) ** 2 / 2 == pytest.approx(i["error"], rel=1e-6) for i in its)
    none = wl.run("backprop", args=["--work", "0"])
    assert none["results"] == [] and none["checksum"] != r["checksum"]


def test_sites_hotness_is_ordered(bindir):
    sites = {s["site"]: s for s in wl.run("sites")["results"]}
    assert list(sites) == ["cold", "warm", "lookup", "log", "hot"]
    assert len({s["function"] for s in sites.values()}) == 5
    per_byte = {k: (s["loads"] + s["stores"]) / s["bytes"] for k, s in sites.items()}
    assert max(per_byte, key=per_byte.get) == "hot" and min(per_byte, key=per_byte.get) == "cold"
    assert per_byte["hot"] > 20 * per_byte["warm"] > 20 * per_byte["cold"]


def test_work_scales_the_work_not_the_footprint(bindir):
    full, half = plan(bindir, "gups", "small"), plan(bindir, "gups", "small", "--work", "0.5")
    assert half["params"]["updates"] * 2 == full["params"]["updates"]
    assert half["footprint_bytes"] == full["footprint_bytes"]


COMMON_BAD = [["--size", "huge"], ["--bogus"], ["--seed", "x"], ["--seed", "-3"], ["--seed"], ["stray"],
              ["--work", "-1"], ["--size=tiny"], ["--plan=1"]]
OWN_BAD = [("gups", ["--threads", "0"]), ("gups", ["--threads", "two"]), ("rwmix", ["--write-ratio", "1.5"]),
           ("rwmix", ["--write-ratio", "nan"]), ("phases", ["--phases", "0"]), ("lu", ["--steps", "99"]),
           ("kmeans", ["--threads", "2"]), ("stages", ["--stages", "1"]), ("stages", ["--stages", "9"]),
           ("backprop", ["--threads", "2"])]


@pytest.mark.parametrize("name,args", [(n, a) for n in NAMES for a in COMMON_BAD] + OWN_BAD)
def test_bad_arguments_one_line_status_2(bindir, name, args):
    p = subprocess.run([str(bindir / name), *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == ""
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: "), p.stderr


def test_help_exits_0(bindir):
    for name in NAMES:
        p = subprocess.run([str(bindir / name), "--help"], capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.startswith(f"usage: {name} "), p.stdout


def test_python_errors_are_tierkit_errors(bindir):
    with pytest.raises(tierkit.TierkitError, match="unknown workload 'nope'"):
        wl.path("nope")
    with pytest.raises(tierkit.TierkitError, match="size 'huge'"):
        wl.run("gups", "huge")
    with pytest.raises(tierkit.TierkitError, match="size 'huge'"):
        wl.trace("gups", "huge", out="x.tkt")
    with pytest.raises(tierkit.TierkitError, match="unknown option"):
        wl.run("gups", args=["--bogus"])


def test_build_failure_is_one_clear_line(bindir, tmp_path, monkeypatch):
    src = tmp_path / "workloads"
    shutil.copytree(wl.source_dir(), src, ignore=shutil.ignore_patterns("build"))
    (src / "gups.c").write_text((src / "gups.c").read_text() + "\nthis is not C;\n")
    monkeypatch.setenv("TIERKIT_WORKLOADS", str(src))
    with pytest.raises(tierkit.TierkitError) as e:
        wl.build()
    msg = str(e.value)
    assert msg.startswith("building the workloads failed: ") and "gups.c" in msg and "\n" not in msg
    monkeypatch.setenv("TIERKIT_WORKLOADS", str(tmp_path / "nowhere"))
    with pytest.raises(tierkit.TierkitError, match="workload sources not found"):
        wl.build()


def test_cli_lists_all_twelve(cli, bindir):
    rc, out, err = cli("workloads", "list")
    assert rc == 0, err
    listed = [l.split()[0] for l in out.splitlines()[1:] if l and not l.startswith(" ") and not l.startswith("every")]
    assert listed == NAMES
    rc, out, err = cli("workloads", "list", "--json")
    assert rc == 0 and [w["name"] for w in json.loads(out)] == NAMES


@pytest.mark.parametrize("args,needle", [
    (["workloads", "trace", "nope", "-o", "x.tkt"], "unknown workload 'nope'"),
    (["workloads", "trace", "gups", "--size", "huge", "-o", "x.tkt"], "size 'huge'"),
    (["workloads", "trace", "gups", "-o", "x.tkt", "--slice", "lots"], "--slice"),
])
def test_cli_errors_one_line(cli, tmp_path, args, needle):
    rc, out, err = cli(*args, cwd=tmp_path)
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("tierkit: error: ") and needle in lines[0], err


@pytest.mark.skipif(not hasattr(tierkit.api, "record"), reason="tierkit.api.record (the tracer) is not there yet")
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_trace_of_sites_has_its_allocation_sites(bindir, tmp_path):
    out = tmp_path / "sites.tkt"
    wl.trace("sites", "small", out=out, extra_args=["--work", "0.25"])
    s = tierkit.trace_info(out, progress=False)["summary"]
    # the five helpers are five call sites (the realloc and libc's own buffers may add more)
    assert s["allocation_sites"] >= 5, s
    assert s["accesses"] > 0


@pytest.mark.skipif(not hasattr(tierkit.api, "record"), reason="tierkit.api.record (the tracer) is not there yet")
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_trace_of_stages_has_one_hot_site_per_stage(bindir, tmp_path):
    import numpy as np

    out = tmp_path / "stages.tkt"
    wl.trace("stages", "small", out=out, cache="none", extra_args=["--work", "0.25"])  # ~2M accesses, ~1 s
    df = tierkit.read_trace(out)
    events = [e["kind"] for e in df.attrs["events"]]
    frames = {e["site"]: e["frames"] for e in events if e["kind"] == "site"}
    tables = [e for e in events if e["kind"] == "alloc" and frames[e["site"]][0].startswith("make_stage")]
    # four stages: four allocation sites, whose innermost frames are the four helpers
    assert len(tables) == 4 and len({t["site"] for t in tables}) == 4
    assert [frames[t["site"]][0].split(" ")[0] for t in tables] == [f"make_stage{i}_table" for i in range(4)]
    assert all(re.fullmatch(r"make_stage\d_table \(stages\.c:\d+\)", frames[t["site"]][0]) for t in tables)
    # the table each access falls in (-1: elsewhere)
    addr, write = df["addr"].to_numpy(), df["write"].to_numpy()
    table = np.full(len(df), -1)
    for i, t in enumerate(tables):
        table[(addr >= t["addr"]) & (addr < t["addr"] + t["size"])] = i
    # stores go to table 0, 1, 2, 3 in order (first touch), then to table 0, 1, 2, 3 again (the
    # stages' updates, as many as the program counts); reads never store
    at = np.flatnonzero(write & (table >= 0))
    runs = np.r_[0, np.flatnonzero(np.diff(table[at])) + 1]
    lengths = np.diff(np.r_[runs, len(at)])
    words = tables[0]["size"] // 8
    updates = [s["updates"] for s in wl.parse_output(
        subprocess.run([str(bindir / "stages"), "--work", "0.25"], capture_output=True, text=True).stdout)["results"]]
    assert list(table[at[runs]]) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert list(lengths) == [words] * 4 + updates
    # from its first update to its last, a stage's own table takes nearly all the accesses
    # (~73x per byte); over the whole run every table takes about the same
    for s in range(4):
        first, last = at[runs[4 + s]], at[runs[4 + s] + lengths[4 + s] - 1]
        inside = table[first:last + 1]
        per_table = np.bincount(inside[inside >= 0], minlength=4)
        assert per_table.argmax() == s and per_table[s] > 20 * np.delete(per_table, s).max(), per_table
    whole = np.bincount(table[table >= 0], minlength=4)
    assert whole.max() < 1.02 * whole.min(), whole


def test_trace_calls_record_with_the_program_and_its_arguments(bindir, tmp_path, monkeypatch, capsys):
    from tierkit import api, cli

    calls = []

    def fake_record(program, args, out, cache=None, context=4, slice=None, force=False, progress=None):
        calls.append(dict(program=program, args=list(args), out=str(out), cache=cache, context=context,
                          slice=slice, force=force))
        return {"summary": {"accesses": 1234, "allocation_sites": 5}}

    monkeypatch.setattr(api, "record", fake_record, raising=False)
    wl.trace("rwmix", "medium", out=tmp_path / "a.tkt", cache="small", extra_args=["--write-ratio", "0.9"])
    assert calls[-1] == dict(program=str(bindir / "rwmix"), args=["--size", "medium", "--write-ratio", "0.9"],
                             out=str(tmp_path / "a.tkt"), cache="small", context=4, slice=None, force=False)
    rc = cli.main(["workloads", "trace", "gups", "-o", str(tmp_path / "b.tkt"), "--cache", "none", "--context", "6",
                   "--slice", "2M", "--force", "--", "--threads", "2"])
    assert rc == 0
    assert calls[-1] == dict(program=str(bindir / "gups"), args=["--size", "small", "--threads", "2"],
                             out=str(tmp_path / "b.tkt"), cache="none", context=6, slice="2M", force=True)
    assert "1,234 accesses, 5 allocation sites" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(tierkit.api, "record"), reason="tierkit.api.record (the tracer) is not there yet")
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_trace_of_backprop_sweeps_the_weights_periodically(bindir, tmp_path):
    import numpy as np

    iterations = 3
    out = tmp_path / "backprop.tkt"
    # the small cache (64 KiB L2) keeps none of the 2 MiB weight matrices from sweep to sweep,
    # as the default cache keeps none of them at medium size; ~0.6M accesses, ~1 s
    wl.trace("backprop", "small", out=out, cache="small", extra_args=["--work", "0.3"])
    df = tierkit.read_trace(out)
    events = [e["kind"] for e in df.attrs["events"]]
    frames = {e["site"]: e["frames"] for e in events if e["kind"] == "site"}
    allocs = {frames[e["site"]][0].split(" ")[0]: e for e in events if e["kind"] == "alloc"}
    weights, momentum = allocs["make_input_weights"], allocs["make_prev_weights"]
    assert weights["size"] == momentum["size"] == (2**15 + 1) * 64
    addr, write = df["addr"].to_numpy(), df["write"].to_numpy()

    def inside(a):
        return (addr >= a["addr"]) & (addr < a["addr"] + a["size"])

    in_w, in_m = inside(weights), inside(momentum)
    # the weights' reads are whole ascending sweeps, each line once: the first touch (its
    # write-allocate reads), the forward pass and the adjustment of every iteration, the checksum
    reads = np.flatnonzero(in_w & ~write)
    starts = np.r_[0, np.flatnonzero(np.diff(addr[reads].astype(np.int64)) < 0) + 1]
    lines = len(np.unique(addr[reads] >> 6))
    assert len(starts) == 2 * iterations + 2
    assert list(np.diff(np.r_[starts, len(reads)])) == [lines] * len(starts)
    # an iteration runs from the start of its forward sweep to the next one's (the last to the
    # checksum's): in every iteration every page of the weights and of the momentum gets the
    # same reads, and nearly the same writes (write-backs leave the cache a little late)
    bounds = reads[starts[1::2]]
    page = addr >> 12
    pages = np.unique(page[in_w | in_m])
    reads_per, writes_per = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        seg = slice(lo, hi)
        big = (in_w | in_m)[seg]
        at = np.searchsorted(pages, page[seg])
        reads_per.append(np.bincount(at[big & ~write[seg]], minlength=len(pages)))
        writes_per.append([(in_w[seg] & write[seg]).sum(), (in_m[seg] & write[seg]).sum()])
    assert len(reads_per) == iterations
    for r in reads_per[1:]:
        assert (r == reads_per[0]).all()
    # a whole page of the weights: 64 lines read twice per iteration; of the momentum: once
    full_w = np.searchsorted(pages, (weights["addr"] >> 12) + 1)
    full_m = np.searchsorted(pages, (momentum["addr"] >> 12) + 1)
    assert reads_per[0][full_w] == 128 and reads_per[0][full_m] == 64
    # every line of each matrix is written back once per iteration, give or take the lines
    # still dirty in the cache at the iteration's bounds
    for w in writes_per:
        assert all(abs(n - lines) < 0.02 * lines for n in w), w
