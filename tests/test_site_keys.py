"""Site keys that survive real runs (docs/guidance.md, "Site keys"; seed 002 §III: guidance by
allocation site applied to an unmodified program; 000 §3: sites as call paths). A site is keyed by
its physical frames as (object identity, offset), so guidance made from one recording applies to
the same program run from another directory or stripped, and a trace with too few frames for
the guidance is an error, not a silent first match.

The program (tests/tracer/keyed_sites.c) allocates hot, warm and cold arrays directly and
through one wrapper allocator. Each recording is a fraction of a second of native work."""
import json
import shutil
import subprocess
import sys

import pytest

import tierkit
from tierkit import guidance as guide
from tierkit import profiling as prof

from conftest import TRACER_PROGRAMS_SRC, VENDORED

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind is not installed: 'tierkit trace record' needs it")

SRC = TRACER_PROGRAMS_SRC / "keyed_sites.c"


@pytest.fixture(scope="module")
def copies(progs, tmp_path_factory):
    """keyed_sites in two directories, stripped, and built without a build-id (then keyed
    by its file name)."""
    d = tmp_path_factory.mktemp("keyed")
    out = {}
    for name in ("a", "b"):
        (d / name).mkdir()
        out[name] = d / name / "keyed_sites"
        shutil.copy2(progs / "keyed_sites", out[name])
    out["stripped"] = d / "stripped" / "keyed_sites"
    out["stripped"].parent.mkdir()
    shutil.copy2(progs / "keyed_sites", out["stripped"])
    subprocess.run(["strip", str(out["stripped"])], check=True)
    for name in ("nobid-a", "nobid-b"):
        p = d / name / "keyed_sites"
        p.parent.mkdir()
        subprocess.run(["gcc", "-O1", "-g", "-Wl,--build-id=none", str(SRC), "-o", str(p)], check=True)
        out[name] = p
    return out


@pytest.fixture(scope="module")
def traces(copies, tmp_path_factory):
    d = tmp_path_factory.mktemp("keyed-traces")
    out = {}
    for name, prog in copies.items():
        for ctx in (1, 2):
            t = d / f"{name}-{ctx}.tkt"
            # run from the program's own directory, as SPEC runs from per-input directories
            tierkit.record(prog, [], t, cache="none", context=ctx, force=True)
            out[name, ctx] = t
    return out


def sites(trace):
    df = tierkit.read_trace(trace)
    return [e["kind"] for e in df.attrs["events"] if e["kind"]["kind"] == "site"]


def guidance(trace, tmp_path, name, context=None, capacity=0.34):
    p = prof.profile(trace, context=context, progress=False)
    g = guide.make_guidance(p, "hotset", capacity)
    f = tmp_path / f"{name}.json"
    guide.write_guidance(g, f)
    return p, g, f


def guided(trace, gf, **kw):
    return tierkit.run(trace, "hbm-ddr3", f"guided:guidance={gf},nonheap=slow", fast_capacity=0.5, progress=False, **kw)


def test_sites_carry_one_key_per_physical_frame(traces, copies):
    for name in ("a", "stripped", "nobid-a"):
        ss = sites(traces[name, 2])
        assert ss and all(len(s["keys"]) == len(s["frames"]) <= 2 for s in ss), ss
        keys = [k for s in ss for k in s["keys"]]
        assert all(guide.FRAME_KEY.match(k) for k in keys), keys
        mine = [k for k in keys if "keyed_sites" in k or k.startswith("build-id:")]
        assert mine
    # a program without a build-id is named by its file name, never its directory
    nob = [k for s in sites(traces["nobid-a", 1]) for k in s["keys"]]
    assert any(k.startswith("file:keyed_sites+0x") for k in nob), nob
    assert not any("/" in k for k in nob)


@pytest.mark.parametrize("train,test", [("a", "b"), ("nobid-a", "nobid-b"), ("a", "stripped"), ("stripped", "a")])
def test_guidance_from_one_run_applies_to_another_directory_and_the_stripped_copy(traces, tmp_path, train, test):
    # the review: from another directory only 6 of 8 sites matched (absolute paths in frames)
    p, g, gf = guidance(traces[train, 2], tmp_path, train)
    assert g["version"] == 2 and g["context"] == 2 and all("key" in s for s in g["sites"])
    r = guided(traces[test, 2], gf)
    st = r["stats"]["policy"]
    assert st["allocations"] >= 6 and st["allocations_unmatched"] == 0, st
    # and places alike: the fast-tier hits of the trace it was made from (within the few
    # accesses by which the runs differ: the loader reads a stripped file differently)
    assert r["fast_hit_ratio"] == pytest.approx(guided(traces[train, 2], gf)["fast_hit_ratio"], rel=1e-3)


def test_a_stripped_programs_sites_stay_distinct(traces):
    # the review: hot, cold and warm arrays of a stripped program became one site
    p = prof.profile(traces["stripped", 1], context=0, progress=False)
    assert p["site_keys"]
    # three sites in main, each one 64 KiB array, and the wrapper's one call of malloc (its
    # three arrays at depth 0), all displayed alike
    direct = [s for s in p["sites"] if s["peak_bytes"] == 64 * 1024]
    wrapper = [s for s in p["sites"] if s["peak_bytes"] == 3 * 64 * 1024]
    assert len(direct) == 3 and len(wrapper) == 1, [(s["frames"], s["key"], s["peak_bytes"]) for s in p["sites"]]
    assert len({s["frames"][0] for s in direct + wrapper}) == 1 and direct[0]["frames"][0].startswith("??? (in ")
    # and are shown apart, by their keys: the program's name and each frame's offset
    shown = [guide.site_label(s) for s in direct + wrapper]
    assert shown == [f"keyed_sites+0x{s['key'][0].rsplit('+0x', 1)[1]}" for s in direct + wrapper] and len(set(shown)) == 4, shown
    table = prof.sites_frame(p)
    assert set(shown) <= set(table["site"]), table
    cold, warm, hot = sorted(s["reads"] + s["writes"] for s in direct)
    # all filled alike; then warm swept 4 times and hot 40 times (1024 lines a sweep)
    assert (warm - cold, hot - cold) == (4 * 1024, 40 * 1024)


@pytest.mark.skipif(shutil.which("sort") is None, reason="no sort program")
def test_sort_gets_more_than_one_site(tmp_path):
    # the review: every allocation of /usr/bin/sort became one site '??? (in /usr/bin/sort)'
    inp = tmp_path / "in.txt"
    inp.write_text("".join(f"{(i * 7919) % 1000}\n" for i in range(300)))
    t = tmp_path / "sort.tkt"
    tierkit.record(shutil.which("sort"), ["-n", str(inp), "-o", str(tmp_path / "out.txt")], t, cache="none",
                   context=1, force=True)
    ss = sites(t)
    keys = {s["keys"][0] for s in ss}
    displays = {s["frames"][0] for s in ss}
    assert len(keys) == len(ss) > 1
    # without symbols several sites display alike; the keys keep them apart
    assert len(keys) >= len(displays)


def test_a_wrapper_allocator_needs_the_guidance_context(traces, tmp_path):
    # the review: trace recorded with --context 1, guidance of context 2: every wrapper
    # allocation silently took the first prefix match (fast hits 0.013 vs 0.844)
    p, g, gf = guidance(traces["a", 2], tmp_path, "ctx2")
    wrapped = [s for s in g["sites"] if len({t["key"][0] for t in g["sites"] if t["key"][0] == s["key"][0]}) == 1
               and sum(t["key"][0] == s["key"][0] for t in g["sites"]) == 3]
    assert len(wrapped) == 3 and len({s["arena"] for s in wrapped}) == 2, g["sites"]
    with pytest.raises(tierkit.TierkitError, match=r"trace site \d+ .* has 1 frame\(s\), too few to tell arenas .* record with context 2"):
        guided(traces["a", 1], gf)
    rc_err = subprocess.run([sys.executable, "-m", "tierkit.cli", "simulate", str(traces["a", 1]), "-p", "hbm-ddr3",
                             "--policy", f"guided:guidance={gf}", "-q"], capture_output=True, text=True)
    assert rc_err.returncode == 2 and rc_err.stderr.count("\n") == 1, rc_err.stderr
    # with enough frames the wrapper's sites separate: the hot one's array is fast
    r = guided(traces["a", 2], gf)
    assert r["stats"]["policy"]["allocations_unmatched"] == 0
    # the wrapper's hot site is in the fast tier: hits well above a placement by first frame
    assert r["fast_hit_ratio"] > 0.5
    # a context-1 trace against context-1 guidance is fine: the wrapper is one site there
    _, g1, gf1 = guidance(traces["a", 1], tmp_path, "ctx1")
    assert g1["context"] == 1
    assert guided(traces["a", 1], gf1)["stats"]["policy"]["allocations_unmatched"] == 0


def test_v1_guidance_still_loads_and_v2_needs_keys(traces, tmp_path, monkeypatch):
    # version 1 (display frames): a profile without keys makes it, and the guided run reads it
    p = prof.profile(traces["a", 2], context=1, progress=False)
    for s in p["sites"]:
        s.pop("key")
    p["site_keys"] = False
    g1 = guide.make_guidance(p, "hotset", 0.34)
    assert g1["version"] == 1 and g1["context"] == 1 and "key" not in g1["sites"][0]
    f1 = tmp_path / "v1.json"
    guide.write_guidance(g1, f1)
    assert guide.read_guidance(f1)["version"] == 1
    r = guided(traces["b", 2], f1)
    assert r["stats"]["policy"]["allocations_unmatched"] == 0
    # version 2 on a trace without keys (imported, or recorded before keys): a clear error
    _, _, f2 = guidance(traces["a", 2], tmp_path, "v2")
    monkeypatch.chdir(tmp_path)  # a short path: the one-line error keeps its whole reason
    with pytest.raises(tierkit.TierkitError, match="has no frame keys"):
        tierkit.run(VENDORED / "sqlite3-orders.tkt", "hbm-ddr3", f"guided:guidance={f2.name}", fast_capacity=0.5,
                    progress=False)


def test_per_phase_guidance_on_another_run_is_warned(copies, tmp_path, capfd):
    # the review: per-phase guidance from one input replayed its slice schedule on a run 240x
    # longer, silently. Train on a run cut into slices and apply it to the same run (no
    # warning), then as if it had been made from another, 10x shorter run (warned)
    t = tmp_path / "sliced.tkt"
    tierkit.record(copies["a"], [], t, cache="none", context=2, slice="20K", force=True)
    p = prof.profile(t, phases=2, progress=False)
    g = guide.make_guidance(p, "hotset", 0.34, per_phase=True)
    mf = g["phases"]["made_from"]
    assert mf["trace_digest"] == p["trace"]["digest"] and mf["insn"] == p["totals"]["insn"] > 0
    gf = tmp_path / "pp.json"
    guide.write_guidance(g, gf)
    same = tierkit.run(t, "hbm-ddr3", f"guided:guidance={gf}", fast_capacity=0.5, progress=False)
    assert not [w for w in same["warnings"] if "per-phase guidance" in w]
    # a schedule that claims a run 10x shorter than this one, made from another trace
    g2 = json.loads(json.dumps(g))
    g2["phases"]["made_from"] = {"trace_digest": "0" * 64, "insn": mf["insn"] // 10, "accesses": None}
    gf2 = tmp_path / "pp-other.json"
    guide.write_guidance(g2, gf2)
    capfd.readouterr()
    other = tierkit.run(t, "hbm-ddr3", f"guided:guidance={gf2}", fast_capacity=0.5, progress=False)
    ws = [w for w in other["warnings"] if "per-phase guidance" in w]
    assert len(ws) == 2, other["warnings"]
    assert "x longer" in ws[0] and "last phase holds" in ws[0] and "digest 000000000000" in ws[1]
    assert "per-phase guidance" in capfd.readouterr().err
    # static guidance has no schedule: nothing to warn about
    st = guide.make_guidance(p, "hotset", 0.34)
    st["phases"]["made_from"] = g2["phases"]["made_from"]
    sf = tmp_path / "static.json"
    guide.write_guidance(st, sf)
    r = tierkit.run(t, "hbm-ddr3", f"guided:guidance={sf}", fast_capacity=0.5, progress=False)
    assert not [w for w in r["warnings"] if "guidance" in w]


@pytest.mark.parametrize("where", ["b", "stripped"])
def test_guidance_recorded_by_the_tracer_is_applied_by_the_runtime(traces, copies, tmp_path, where):
    # the keys the tracer records (Valgrind's frames) are the keys the preloaded
    # allocator computes from return addresses, so guidance made from a recording in one
    # directory applies to the program run natively from another, or stripped: every
    # allocation joins its site's arena, the wrapper's sites by unwinding one frame deeper
    from test_alloc_runtime import alloc_lib, run

    _, g, gf = guidance(traces["a", 2], tmp_path, "native")
    report = tmp_path / "report.json"
    r = run(copies[where], [], alloc_lib(), {"TIERKIT_GUIDANCE": str(gf), "TIERKIT_ALLOC_REPORT": str(report)},
            cwd=copies[where].parent)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    assert rep["guided"] and rep["errors"] == [], rep
    assert rep["allocations_unmatched"] == 0, rep
    decided = {s: d["arena"] for d in rep["decisions"] for s in d["sites"]}
    wrapped = {i for i, s in enumerate(g["sites"]) if sum(t["key"][0] == s["key"][0] for t in g["sites"]) > 1}
    assert wrapped and wrapped <= set(decided), (wrapped, decided)
    for i, s in enumerate(g["sites"]):
        if i in decided:
            assert decided[i] == s["arena"], (i, s, decided)
    assert rep["unwinds"] > 0  # the wrapper is ambiguous at depth 1 (002 §III: context)
