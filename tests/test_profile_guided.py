"""Profiles, guidance and guided runs from the command line and the API (docs/guidance.md).

The committed sqlite3 trace carries allocation events, so most tests need no tracer; the
train-versus-ref and per-phase tests record the workloads with Valgrind and skip without it.
"""
import json
import os
import shutil

import pytest

import tierkit
from tierkit import guidance as guide
from tierkit import profiling as prof

from conftest import VENDORED

SQLITE = VENDORED / "sqlite3-orders.tkt"
GCC = VENDORED / "403.gcc.gz"
needs_tracer = pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("make") is None,
                                  reason="valgrind or make is not installed")


@pytest.fixture(scope="module")
def sqlite_profile(tmp_path_factory):
    return prof.profile(SQLITE, progress=False)


def test_profile_cli_writes_profile_and_plot(cli, tmp_path):
    out, png = tmp_path / "p.json", tmp_path / "p.png"
    rc, stdout, err = cli("profile", SQLITE, "-o", out, "--plot", png, "--top", "3", "-q")
    assert rc == 0, err
    assert "acc/byte" in stdout and "phases" in stdout
    p = guide.read_profile(out)
    assert p["format"] == "tierkit-profile" and p["sites"]
    assert png.stat().st_size > 1000
    # never overwrite without --force: one line, status 2
    rc, _, err = cli("profile", SQLITE, "-o", out, "-q")
    assert rc == 2 and err.count("\n") == 1 and "--force" in err
    rc, _, err = cli("profile", SQLITE, "-o", out, "-q", "--force")
    assert rc == 0, err


def test_profile_accounts_for_every_access(sqlite_profile):
    p = sqlite_profile
    t = p["totals"]
    site_acc = sum(s["reads"] + s["writes"] for s in p["sites"])
    assert site_acc == t["heap_accesses"]
    assert t["heap_accesses"] + t["nonheap_accesses"] == t["accesses"]
    # per phase as well, and each phase of at least one slice
    n = p["phases"]["count"]
    assert sum(sum(s["phase_reads"]) + sum(s["phase_writes"]) for s in p["sites"]) == site_acc
    assert sorted(set(p["phases"]["of_slice"])) == list(range(n))
    assert len(p["phases"]["of_slice"]) == p["slices"]["count"]
    # 002 Fig. 2 curves end at (1, 1) and never decrease
    for c in p["curves"].values():
        assert c["capacity"][-1] == pytest.approx(1.0) and c["accesses"][-1] == pytest.approx(1.0)
        assert all(a <= b for a, b in zip(c["accesses"], c["accesses"][1:]))


def test_context_depth_merges_sites(sqlite_profile):
    # fewer frames per key can only merge sites (002 Fig. 2, upper against lower plots)
    shallow = prof.profile(SQLITE, context=0, progress=False)
    assert len(shallow["sites"]) <= len(sqlite_profile["sites"])
    assert shallow["totals"]["heap_accesses"] == sqlite_profile["totals"]["heap_accesses"]
    sizes = [sqlite_profile["curves"][str(d)]["sites"] for d in range(sqlite_profile["context"] + 1)]
    assert sizes == sorted(sizes)


def test_profile_errors_are_one_line(cli, tmp_path):
    rc, _, err = cli("profile", SQLITE, "-o", tmp_path / "x.json", "--context", "9", "-q")
    assert rc == 2 and err.count("\n") == 1 and "--context" in err
    rc, _, err = cli("profile", GCC, "-o", tmp_path / "y.json", "-q")
    assert rc == 2 and err.count("\n") == 1 and "no allocation events" in err
    rc, _, err = cli("profile", SQLITE, "-o", tmp_path / "z.json", "--slice", "10ms", "-q")
    assert rc == 2 and err.count("\n") == 1 and "--slice" in err


def test_guide_cli_strategies_and_errors(cli, tmp_path, sqlite_profile):
    pf = tmp_path / "p.json"
    prof.write(sqlite_profile, pf)
    for s in ("knapsack", "hotset", "thermos"):
        out = tmp_path / f"{s}.json"
        rc, stdout, err = cli("guide", pf, "--strategy", s, "--capacity", "0.125", "-o", out)
        assert rc == 0, err
        g = guide.read_guidance(out)
        assert g["strategy"] == s and stdout.startswith(s)
    rc, _, err = cli("guide", pf, "--strategy", "thermos", "-o", tmp_path / "thermos.json")
    assert rc == 2 and "--force" in err
    rc, _, err = cli("guide", pf, "--strategy", "bogus", "-o", tmp_path / "b.json")
    assert rc == 2 and err.count("\n") == 1 and "--strategy" in err
    rc, _, err = cli("guide", pf, "--capacity", "7", "-o", tmp_path / "c.json")
    assert rc == 2 and err.count("\n") == 1 and "--capacity" in err
    rc, _, err = cli("guide", tmp_path / "missing.json", "-o", tmp_path / "d.json")
    assert rc == 2 and err.count("\n") == 1 and "missing.json" in err
    # three tiers, tier by tier
    rc, _, err = cli("guide", pf, "--tiers", "hbm,dram,cxl", "--capacity", "0.1,0.3", "-o", tmp_path / "t3.json")
    assert rc == 0, err
    assert guide.read_guidance(tmp_path / "t3.json")["tiers"] == ["hbm", "dram", "cxl"]


def test_guided_runs_from_a_file_and_from_a_strategy(cli, tmp_path, sqlite_profile):
    g = guide.make_guidance(sqlite_profile, "thermos", 0.125)
    gf = tmp_path / "g.json"
    guide.write_guidance(g, gf)
    rc, out, err = cli("simulate", SQLITE, "-p", "hbm-ddr3", "-c", "0.125", "--policy", f"guided:guidance={gf}", "--json", "-q")
    assert rc == 0, err
    r = json.loads(out)
    st = r["stats"]["policy"]
    assert st["allocations"] > 0 and st["allocations_unmatched"] == 0
    # the same guidance made on the fly: same placement, same runtime
    r2 = tierkit.run(SQLITE, "hbm-ddr3", "guided:strategy=thermos,capacity=0.125", fast_capacity=0.125, progress=False)
    assert r2["runtime_ns"] == r["runtime_ns"]
    assert r2["policy"] == "guided:strategy=thermos,capacity=0.125"
    assert r2["config"]["guidance"]["strategy"] == "thermos"
    # compare labels the row with the user's spec
    df = tierkit.compare(SQLITE, "hbm-ddr3", "first-touch,guided:strategy=hotset", fast_capacity=0.125, progress=False)
    assert "guided:strategy=hotset" in set(df["policy"])
    # 'all' leaves guided out: it needs guidance
    assert "guided" not in tierkit.api.parse_policies("all")
    rc, _, err = cli("simulate", SQLITE, "--policy", "guided:strategy=thermos,guidance=x.json", "-q")
    assert rc == 2 and err.count("\n") == 1


def test_unmatched_sites_fall_back_to_the_documented_default(tmp_path, sqlite_profile):
    # guidance for another program matches none of this trace's sites: all its allocations
    # follow unmatched= (default: first touch, as under the runtime; slow: the last tier, 000's
    # place for cold sites)
    other = json.loads(json.dumps(sqlite_profile))
    for i, s in enumerate(other["sites"]):
        s["frames"] = [f"elsewhere_{i} (x.c:{i})"]
    other["context"] = 0
    g = guide.make_guidance(other, "thermos", 0.5)
    gf = tmp_path / "other.json"
    guide.write_guidance(g, gf)
    r = tierkit.run(SQLITE, "hbm-ddr3", f"guided:guidance={gf},unmatched=slow,nonheap=slow", fast_capacity=0.5, progress=False)
    st = r["stats"]["policy"]
    assert st["allocations_unmatched"] == st["allocations"]
    assert r["fast_hit_ratio"] == 0
    ft = tierkit.run(SQLITE, "hbm-ddr3", "first-touch", fast_capacity=0.5, progress=False)
    r = tierkit.run(SQLITE, "hbm-ddr3", f"guided:guidance={gf}", fast_capacity=0.5, progress=False)
    # every page placed by first touch (in the arena layout's order of pages, not the trace's)
    assert r["fast_hit_ratio"] > 0.5 * ft["fast_hit_ratio"] > 0
    r = tierkit.run(SQLITE, "hbm-ddr3", f"guided:guidance={gf},unmatched=fast,nonheap=slow", fast_capacity=0.5, progress=False)
    assert r["fast_hit_ratio"] > 0


@needs_tracer
def test_sites_match_across_inputs_and_guidance_transfers(tmp_path):
    # 000 §6.2: profile one input (train), evaluate another (ref); sites are keyed by their
    # symbolized frames, so every allocation of the ref run finds its site
    from tierkit import workloads

    train, ref = tmp_path / "train.tkt", tmp_path / "ref.tkt"
    workloads.trace("sites", "small", out=train, cache="L1:8K:8")
    workloads.trace("sites", "small", out=ref, cache="L1:8K:8", extra_args=["--seed", "7", "--work", "2"])
    pt = prof.profile(train, progress=False)
    pr = prof.profile(ref, progress=False)
    keys = lambda p: {tuple(s["frames"]) for s in p["sites"]}  # noqa: E731
    assert keys(pt) == keys(pr)
    g = guide.make_guidance(pt, "thermos", 0.125)
    hot = [s for s in g["sites"] if s["tier"] == 0]
    assert hot and hot[0]["frames"][0].startswith("make_hot_counters")
    df = tierkit.compare(ref, "hbm-ddr3", "first-touch,guided:strategy=thermos", fast_capacity=0.125,
                         progress=False, guide_from=train, timing="detailed")
    r = {x["policy"]: x for x in df.attrs["results"]}
    assert r["guided:strategy=thermos"]["stats"]["policy"]["allocations_unmatched"] == 0
    assert r["guided:strategy=thermos"]["runtime_ns"] < r["first-touch"]["runtime_ns"]
    assert r["guided:strategy=thermos"]["config"]["guidance"]["from_trace"] == str(train)


@needs_tracer
def test_per_phase_guidance_follows_the_stages(cli, tmp_path):
    # 000 §3.2, Fig. 1: each stage's table is hot in its own phase; per-phase arenas move it
    # into the fast tier at each transition, which static arenas cannot
    from tierkit import workloads

    t = tmp_path / "stages.tkt"
    workloads.trace("stages", "small", out=t, cache="L1:16K:16", slice="1M")
    pf, gf = tmp_path / "p.json", tmp_path / "g.json"
    rc, out, err = cli("profile", t, "-o", pf, "--phases", "8", "-q")
    assert rc == 0, err
    p = guide.read_profile(pf)
    assert p["phases"]["count"] == 4 and p["phases"]["source"] == "kmeans"
    # each stage table is the hottest site of exactly one phase
    tables = [s for s in p["sites"] if s["frames"][0].startswith("make_stage")]
    hottest = sorted(max(range(4), key=lambda k: s["phase_reads"][k] + s["phase_writes"][k]) for s in tables)
    assert hottest == [0, 1, 2, 3]
    rc, out, err = cli("guide", pf, "--per-phase", "--capacity", "0.125", "-o", gf)
    assert rc == 0, err
    g = guide.read_guidance(gf)
    assert sorted(s["bits"] for s in g["sites"] if s["frames"][0].startswith("make_stage")) == ["0001", "0010", "0100", "1000"]
    rs = {}
    for mode in ("per-phase", "static"):
        pol = f"guided:guidance={gf}" if mode == "per-phase" else "guided:strategy=thermos"
        rc, out, err = cli("simulate", t, "-p", "hbm-pcm", "-c", "0.125", "-t", "detailed", "--policy", pol, "--json", "-q")
        assert rc == 0, err
        rs[mode] = json.loads(out)
    assert rs["per-phase"]["stats"]["policy"]["phase_transitions"] >= 3
    assert rs["per-phase"]["fast_hit_ratio"] > 2 * rs["static"]["fast_hit_ratio"]
    assert rs["per-phase"]["runtime_ns"] < rs["static"]["runtime_ns"]


@needs_tracer
def test_per_phase_guidance_switches_at_its_phase_markers_in_a_real_run(cli, tmp_path):
    # docs/guidance.md "Phase markers": a running program has no instruction counter, so per-phase
    # guidance marks each phase boundary by the nearest allocation call of the profiled run, and the
    # preloaded allocator counts its calls. `stages --scratch 1` allocates a record at each stage's
    # start; plain `stages` allocates nothing after its tables, so its stage boundaries cannot
    # be seen, which the guide and the runtime both say
    import subprocess

    from tierkit import workloads
    from test_alloc_runtime import alloc_lib

    lib = alloc_lib()
    out = {}
    for scratch in ("1", "0"):
        t = tmp_path / f"stages-{scratch}.tkt"
        workloads.trace("stages", "small", out=t, cache="L1:16K:16", slice="1M", extra_args=["--scratch", scratch])
        pf, gf = tmp_path / f"p{scratch}.json", tmp_path / f"g{scratch}.json"
        rc, _, err = cli("profile", t, "-o", pf, "--phases", "8", "-q")
        assert rc == 0, err
        rc, stdout, err = cli("guide", pf, "--per-phase", "--capacity", "0.125", "-o", gf)
        assert rc == 0, err
        p, g = guide.read_profile(pf), guide.read_guidance(gf)
        rep = tmp_path / f"rep{scratch}.json"
        env = dict(os.environ, LD_PRELOAD=str(lib), TIERKIT_GUIDANCE=str(gf), TIERKIT_ALLOC_REPORT=str(rep))
        r = subprocess.run([str(workloads.path("stages")), "--size", "small", "--scratch", scratch], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        # the simulated guided run by the schedule (phases exactly) and by the markers (what
        # the real run above could do)
        sims = {}
        for sw in ("schedule", "markers"):
            rc, so, se = cli("simulate", t, "-p", "hbm-pcm", "-c", "0.125", "--policy", f"guided:guidance={gf},switch={sw}", "--json", "-q")
            assert rc == 0, se
            sims[sw] = json.loads(so)
        # the library writes its report at exit; if it did not, what it said is the lead
        assert rep.is_file(), f"no allocator report at {rep}; the program's stderr: {r.stderr[-2000:]!r}"
        out[scratch] = (p, g, json.loads(rep.read_text()), stdout, err, r.stderr, sims)

    def stage_of_phase(g):
        # the stage whose table is in the fast tier in each phase (one table fits)
        out = {}
        for s in g["sites"]:
            if s["frames"][0].startswith("make_stage"):
                hot = [k for k, t in enumerate(g["arenas"][s["arena"]]["tiers"]) if t == 0]
                assert len(hot) == 1, g["arenas"]
                out[hot[0]] = int(s["frames"][0][len("make_stage")])
        return out

    p, g, rep, stdout, err, rstderr, sims = out["1"]
    # the boundary into each of stages 1..3 (a phase where a later table is hot) is marked by
    # its stage's record, within one 1M-instruction slice (the tables' fills and the final
    # read make boundaries of their own, marked by the tables' mallocs or not at all)
    sop = stage_of_phase(g)
    near = {sop.get(m["phase"]) for m in g["phases"]["markers"] if m["alloc"] is not None and abs(m["offset_insn"]) < 1_000_000}
    assert near >= {1, 2, 3}, g["phases"]["markers"]
    assert "phase markers:" in stdout
    # the real run counted the calls the trace recorded, and switched at every marker, in order
    ph = rep["phases"]
    assert ph["allocation_calls"] == p["totals"]["alloc_calls"], (ph, p["totals"])
    marked = [(m["alloc"], m["side"], m["phase"]) for m in g["phases"]["markers"] if m["alloc"] is not None]
    assert [(s["alloc"], s["side"], s["phase"]) for s in ph["switches"]] == marked
    assert all(s["markers"][0] == s["markers"][1] for s in ph["switches"])  # one thread: one marker each
    assert rep["allocations_unmatched"] == 0 and rep["errors"] == []
    # the model switching at the markers makes the real run's switches (a phase change at
    # each), and gains nearly what the schedule does
    by = {k: v["stats"]["policy"] for k, v in sims.items()}
    assert by["markers"]["switch"] == "markers" and by["markers"]["phase_transitions"] == len(ph["switches"])
    assert sims["markers"]["fast_hit_ratio"] > 0.9 * sims["schedule"]["fast_hit_ratio"], {k: v["fast_hit_ratio"] for k, v in sims.items()}

    p, g, rep, stdout, err, rstderr, sims = out["0"]
    # plain stages: the boundaries between the stages have no allocation call beside them
    assert "cannot see it" in err or "more phase boundaries" in err, err
    sop = stage_of_phase(g)
    assert {sop.get(m["phase"]) for m in g["phases"]["markers"] if m["alloc"] is None} >= {1, 2, 3}, g["phases"]["markers"]
    unseen = [m for m in g["phases"]["markers"] if m["alloc"] is None]
    assert rep["phases"]["unmarked_boundaries"] == len(unseen) > 0
    # and the model by the markers shows what that costs: the stages' tables stay where the
    # fills left them, far fewer fast hits than the schedule's exact phases
    assert sims["markers"]["stats"]["policy"]["phase_transitions"] < sims["schedule"]["stats"]["policy"]["phase_transitions"]
    assert sims["markers"]["fast_hit_ratio"] < 0.7 * sims["schedule"]["fast_hit_ratio"], {k: v["fast_hit_ratio"] for k, v in sims.items()}
    assert "phase boundaries have no allocation call near them" in rstderr or "without phase markers" in rstderr


def test_guided_result_replays_bit_for_bit(cli, tmp_path):
    """A guided run used to make its guidance in a temporary directory; the result now
    embeds the guidance (by SHA-256) and `tierkit replay` reproduces every figure."""
    rc, out, err = cli("simulate", SQLITE, "-p", "hbm-ddr3", "-c", "0.125", "--policy", "guided:strategy=thermos",
                       "--json", "-q")
    assert rc == 0, err
    r = json.loads(out)
    emb = r["config"]["inputs"]["guidance"]
    assert len(emb["sha256"]) == 64
    assert r["config"]["guidance"]["made_with"]["strategy"] == "thermos"
    f = tmp_path / "r.json"
    f.write_text(json.dumps(r))
    rc, out, err = cli("replay", f, "-q")
    assert rc == 0, err
    assert "same figures, bit for bit" in out
    from tierkit import replaying as rp

    again = rp.replay(r)
    assert rp.differences(r, again) == []
    assert again["runtime_ns"] == r["runtime_ns"] and again["stats"]["policy"] == r["stats"]["policy"]
    # a result whose figures were changed is reported, exit code 1
    r["runtime_ns"] += 1
    f.write_text(json.dumps(r))
    rc, out, _ = cli("replay", f, "-q")
    assert rc == 1 and "DIFFERENT: runtime_ns" in out


def test_guidance_made_on_the_fly_takes_the_runs_fast_capacity_as_the_simulator_reads_it():
    """-c 1M is 1 MiB for the guidance too (it used to fall back to 0.125 of the heap without a
    word); a capacity that is not one is an error."""
    t = VENDORED / "sqlite3-orders.tkt"
    made = lambda c: tierkit.run(t, "hbm-ddr4", "guided:strategy=hotset", fast_capacity=c, progress=False)["config"]["guidance"]
    assert made("1M")["capacity_bytes"] == [1 << 20]
    assert made("125%")["capacity_bytes"] == made(1.0)["capacity_bytes"]
    with pytest.raises(tierkit.TierkitError, match="fast_capacity"):
        made("bogus")
