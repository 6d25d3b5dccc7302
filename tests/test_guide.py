"""Profile-guided placement (tierkit.guidance): strategies, tiers, per-phase arenas, files."""
import itertools
import json

import numpy as np
import pytest

from tierkit.guidance import (
    GuidanceError,
    assign_tiers,
    density_order,
    frame_label,
    hotset,
    knapsack,
    knapsack_select,
    make_guidance,
    classify,
    match_site,
    parse_capacity,
    read_guidance,
    read_profile,
    site_frames,
    site_label,
    thermos,
    tier_summary,
    write_guidance,
)


def sel(mask):
    return {i for i, m in enumerate(mask) if m}


# --------------------------------------------------------------------- worked examples


def test_example_a_large_very_hot_site():
    """000 §3.1 / 002 §III-A: knapsack drops a site too big for the tier however hot; hotset
    takes it (it crosses the capacity, then stops); thermos takes it and refuses the
    lukewarm sites because they would displace the hottest 100 bytes (2000 accesses)."""
    sizes, values, cap = [150, 50, 40], [3000, 200, 120], 100
    assert sel(knapsack(sizes, values, cap, granularity=1)) == {1, 2}
    assert sel(hotset(sizes, values, cap)) == {0}
    assert sel(thermos(sizes, values, cap)) == {0}


def test_example_b_lukewarm_site_cannot_crowd_out():
    """002 §III-A: hotset over-prescribes with the lukewarm B (it starts below the capacity);
    thermos refuses it: B brings 400*100/200 = 200 accesses but would displace all of A
    (d = min(60, 160) = 60 bytes, 600 accesses)."""
    sizes, values, cap = [60, 200], [600, 400], 100
    assert sel(hotset(sizes, values, cap)) == {0, 1}
    assert sel(thermos(sizes, values, cap)) == {0}
    assert sel(knapsack(sizes, values, cap, granularity=1)) == {0}


def test_thermos_walk_goes_on_and_pro_rata():
    """002 §III-A: the walk goes on after a refusal; a site that fits in the free space is
    taken, an overflowing site hotter than what it could displace is taken too, and the
    displaced data is counted pro rata over the densest selected sites."""
    # A fills 60; B (d = 60, displaced 600 > 200) refused; C fits in the 40 bytes left
    assert sel(thermos([60, 200, 30], [600, 400, 30], 100)) == {0, 2}
    # A 20 B (20/B), B 10 B (10/B); C 200 B, 1200 accesses: d = min(30, 130) = 30 bytes,
    # displaced 400 + 100 = 500 < contributed 1200 * 100 / 200 = 600 -> admitted
    assert sel(thermos([20, 10, 200], [400, 100, 1200], 100)) == {0, 1, 2}
    assert sel(thermos([20, 10, 200], [400, 100, 1000], 100)) == {0, 1}  # 500 is not > 500
    # A 5 B/100, B 40 B/200; C 70 B: d = min(45, 15) = 15 = all of A (100) + 10 bytes of B
    # (10 * 5 = 50): displaced 150, so C needs more than 150 accesses
    assert sel(thermos([5, 40, 70], [100, 200, 151], 100)) == {0, 1, 2}
    assert sel(thermos([5, 40, 70], [100, 200, 150], 100)) == {0, 1}


def test_empty_zero_capacity_and_all_fit():
    for f in (hotset, thermos, knapsack):
        assert f(np.zeros(0, np.int64), np.zeros(0, np.int64), 100).shape == (0,)
        assert not f([10, 20], [5, 5], 0).any()
        assert sel(f([4096, 8192, 4096], [5, 0, 7], 1 << 20)) == {0, 2}  # value 0 never selected


def test_deterministic_ties():
    """Equal density and value: the lower index wins in every strategy."""
    for f in (hotset, thermos, lambda s, v, c: knapsack(s, v, c, granularity=1)):
        assert sel(f([10, 10, 10], [5, 5, 5], 10)) == {0}
    assert list(density_order([10, 20, 0, 0, 5], [10, 20, 1, 0, 0])) == [2, 1, 0, 3, 4]


def test_knapsack_granularity_rounding():
    """Sizes round up to pages, the capacity down (000 §3.2: arenas are page-aligned)."""
    sizes, values = [4097, 4096], [10, 9]
    assert sel(knapsack(sizes, values, 8192)) == {0}  # 2 + 1 pages > 2: best single is site 0
    assert sel(knapsack(sizes, values, 8191)) == {1}  # one page of room
    assert sel(knapsack(sizes, values, 12288)) == {0, 1}
    assert sel(knapsack(sizes, values, 8193, granularity=1)) == {0, 1}


def test_knapsack_coarsens_when_too_big():
    rng = np.random.default_rng(7)
    s = rng.integers(1, 5000, 50)
    v = rng.integers(1, 100, 50)
    cap = int(s.sum() // 2)
    m, g = knapsack_select(s, v, cap, granularity=1, max_cells=2_000)
    assert g > 1 and g & (g - 1) == 0  # doubled from 1
    assert 50 * (cap // g + 1) <= 2_000
    assert int((-(-s[m] // g)).sum()) <= cap // g
    m1, g1 = knapsack_select(s, v, cap, granularity=1)
    assert g1 == 1 and v[m1].sum() >= v[m].sum()


def test_knapsack_matches_brute_force():
    """Exact 0/1 knapsack at the granularity (000 §3.1), checked by enumeration."""
    rng = np.random.default_rng(2024)
    for trial in range(30):
        n = int(rng.integers(1, 11))
        g = int(rng.choice([1, 4]))
        s = rng.integers(0, 25, n)
        v = rng.integers(0, 40, n) * (rng.random(n) > 0.15)
        cap = int(rng.integers(0, 80))
        m, used = knapsack_select(s, v, cap, granularity=g)
        assert used == g
        units = -(-s // g)
        best = 0
        for r in range(n + 1):
            for combo in itertools.combinations(range(n), r):
                c = list(combo)
                if units[c].sum() <= cap // g:
                    best = max(best, int(v[c].sum()))
        assert int(v[m].sum()) == best, (trial, s, v, cap, g)
        assert int(units[m].sum()) <= cap // g
        assert not (m & (v == 0)).any()
        assert (m == knapsack_select(s, v, cap, granularity=g)[0]).all()  # deterministic


def test_thousands_of_sites_run():
    rng = np.random.default_rng(1)
    s = rng.integers(1, 1 << 20, 3000)
    v = rng.integers(0, 10**6, 3000)
    cap = int(s.sum() // 8)
    for f in (hotset, thermos, knapsack):
        m = f(s, v, cap)
        assert m.dtype == bool and m.any()
    assert s[knapsack(s, v, cap)].sum() <= cap
    assert s[thermos(s, v, cap)].sum() <= cap + s.max()


def test_bad_arrays():
    with pytest.raises(GuidanceError, match="sizes"):
        hotset([-1, 2], [1, 1], 10)
    with pytest.raises(GuidanceError, match="capacity"):
        thermos([1], [1], -5)
    with pytest.raises(GuidanceError, match="--granularity"):
        knapsack([1], [1], 5, granularity=0)


# ------------------------------------------------------------------------------ multi-tier


def test_assign_tiers_tier_by_tier():
    sizes, values = [10, 10, 10, 10], [40, 30, 20, 10]
    for strat in ("hotset", "thermos", "knapsack"):
        t = assign_tiers(sizes, values, [10, 20], strat, granularity=1)
        assert list(t) == [0, 1, 1, 2], strat
    assert list(assign_tiers(sizes, values, [], "hotset")) == [0, 0, 0, 0]
    # a function works too: everything with accesses >= 25 in each tier
    assert list(assign_tiers(sizes, values, [100], lambda s, v, c: v >= 25)) == [0, 0, 1, 1]
    with pytest.raises(GuidanceError, match="--strategy"):
        assign_tiers(sizes, values, [10], "lru")


# ------------------------------------------------------------------------------- profiles


def profile_dict(**over):
    """Three sites, two phases: X hot in phase 0 only, Y in phase 1 only, Z cold."""
    def site(fn, line, pr, pw, peak=16384):
        return {"frames": [f"{fn} (sites.c:{line})", "main (sites.c:200)"], "peak_bytes": peak, "allocs": 1,
                "bytes_allocated": peak, "reads": sum(pr), "writes": sum(pw), "phase_reads": pr, "phase_writes": pw}

    p = {
        "format": "tierkit-profile", "version": 1,
        "trace": {"path": "run.tkt", "digest": "abc123", "program": "./sites", "args": ["small"],
                  "page_size": 4096, "line_size": 64},
        "context": 1,
        "totals": {"accesses": 2100, "reads": 1600, "writes": 500, "heap_accesses": 2022,
                   "peak_live_bytes": 49152},
        "slices": {"source": "insn", "count": 4, "length": 1_000_000},
        "phases": {"source": "kmeans", "count": 2, "of_slice": [0, 0, 1, 1]},
        "sites": [
            site("make_z", 30, [1, 0], [0, 1]),
            site("make_y", 20, [5, 700], [5, 300]),
            site("make_x", 10, [700, 5], [300, 5]),
            {"frames": ["unused (sites.c:40)"], "peak_bytes": 0, "allocs": 0, "bytes_allocated": 0, "reads": 0,
             "writes": 0, "phase_reads": [0, 0], "phase_writes": [0, 0]},
        ],
        "nonheap": {"reads": 50, "writes": 28, "phase_reads": [25, 25], "phase_writes": [14, 14]},
    }
    p.update(over)
    return p


def test_per_phase_bit_vectors():
    """000 §3.2, Fig. 1: per-phase hot/cold bit vectors; sites with the same vector share
    an arena, numbered in order of first appearance (sites hottest first, then frames)."""
    for strat in ("thermos", "knapsack"):
        g = make_guidance(profile_dict(), strat, 0.4, per_phase=True)
        names = [s["frames"][0].split()[0] for s in g["sites"]]
        assert names == ["make_x", "make_y", "make_z"]  # 'unused' dropped: no access, no alloc
        assert [s["bits"] for s in g["sites"]] == ["10", "01", "00"]
        assert [s["arena"] for s in g["sites"]] == [0, 1, 2]
        assert g["arenas"] == [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}, {"id": 2, "tiers": [1, 1]}]
        assert [s["tier"] for s in g["sites"]] == [0, 1, 1]
        assert g["mode"] == "per-phase"
        # the schedule says what it was made from (the profile has no insn count)
        # a profile made before allocation counts per slice: no phase markers, and a warning
        assert g["phases"] == {"count": 2, "slice_source": "insn", "slice_length": 1_000_000, "of_slice": [0, 0, 1, 1],
                               "made_from": {"trace_digest": "abc123", "insn": None, "accesses": 2100}, "markers": []}
        assert len(g["warnings"]) == 1 and "no allocation counts per slice" in g["warnings"][0]
        assert g["sites"][0]["phase_accesses"] == [1000, 10]
        assert g["capacity_bytes"] == [19660] and g["capacity_fraction"] == [0.4]
    assert make_guidance(profile_dict(), "knapsack", 0.4, per_phase=True)["granularity_bytes"] == 4096
    assert make_guidance(profile_dict(), "thermos", 0.4, per_phase=True)["granularity_bytes"] is None


def test_phase_markers_worked_example():
    """Phase markers (docs/guidance.md): each boundary between phases is marked by the
    allocation call nearest to it in instructions, from the phase runs on either side; one
    with no call on either side is unmarked. Eight slices of 1,000 instructions, phases
    0 0 1 1 0 0 1 0; allocation calls at 10, 20, 30 | 1950 | 2010 | - | 4700, 4800 | 5100 | - | -."""
    from tierkit.guidance import phase_markers

    p = profile_dict()
    p["totals"].update(insn=8000, alloc_calls=8)
    p["phases"] = {"source": "kmeans", "count": 2, "of_slice": [0, 0, 1, 1, 0, 0, 1, 0]}
    p["slices"] = {"source": "insn", "count": 8, "length": 1000, "start_insn": [i * 1000 for i in range(8)],
                   "start_access": [0] * 8, "start_allocs": [0, 3, 4, 5, 5, 7, 8, 8],
                   "first_alloc_insn": [10, 1950, 2010, None, 4700, 5100, None, None],
                   "last_alloc_insn": [30, 1950, 2010, None, 4800, 5100, None, None]}
    marks, warns = phase_markers(p)
    got = [(m["slice"], m["phase"], m["alloc"], m["side"], m["offset_insn"]) for m in marks]
    assert got == [
        (2, 1, 4, "before", 10),     # call 4 at 2010 is nearer than call 3 at 1950
        (4, 0, 5, "before", 700),    # the run before has call 4, 1,990 away; call 5 is 700 after
        (6, 1, 7, "after", -900),    # nothing in the run after: the last call before, 900 early
        (7, 0, None, None, None),    # no call in slices 6 or 7: a run cannot see it
    ]
    # warned: more than 10% of the shorter phase run beside the boundary away, and unmarked
    assert len(warns) == 3, warns
    assert "slice 4" in warns[0] and "700 instructions after" in warns[0] and "35%" in warns[0]
    assert "slice 6" in warns[1] and "900 instructions before" in warns[1] and "90%" in warns[1]
    assert "slice 7" in warns[2] and "cannot see it" in warns[2]
    # per-phase guidance carries them, and reading it back checks their order
    g = make_guidance(p, "thermos", 0.4, per_phase=True)
    assert g["phases"]["markers"] == marks and g["warnings"] == warns


def test_static_guidance():
    g = make_guidance(profile_dict(), "hotset", "12.5%")
    assert g["mode"] == "static" and g["phases"]["count"] == 1 and g["phases"]["of_slice"] == [0, 0, 0, 0]
    # 12.5% of 49152 = 6144 bytes: X (ties with Y on density and accesses, first by index) crosses it
    assert [s["tier"] for s in g["sites"]] == [0, 1, 1]
    assert g["arenas"] == [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}]  # one arena per tier used
    assert "bits" not in g["sites"][0]
    assert g["profile"] == {"trace_path": "run.tkt", "trace_digest": "abc123", "program": "./sites",
                            "args": ["small"], "footprint_bytes": 49152}
    assert g["context"] == 1 and g["unmatched"] == "first-touch" and g["tiers"] == ["fast", "slow"]
    assert g["sites"][0]["accesses_per_byte"] == pytest.approx(1010 / 16384)
    # three tiers: X fast, Y middle, Z last
    g3 = make_guidance(profile_dict(), "knapsack", [16384, "16K"], tiers=["hbm", "dram", "pmem"])
    assert [s["tier"] for s in g3["sites"]] == [0, 1, 2]
    assert g3["capacity_fraction"] == [None, None]
    df = tier_summary(g3)
    assert list(df["sites"]) == [1, 1, 1] and list(df["tier"]) == ["hbm", "dram", "pmem"]


def test_match_site():
    g = make_guidance(profile_dict(), "thermos", 0.4)
    x = g["sites"][0]
    assert match_site(["make_x (sites.c:10)", "main (sites.c:200)"], g) is x
    # deeper trace stacks compare their first context + 1 frames
    assert match_site(["make_x (sites.c:10)", "main (sites.c:200)", "_start"], g) is x
    # a shallower trace matches the first site whose key starts with what it has
    assert match_site(["make_x (sites.c:10)"], g) is x
    assert match_site(["make_x (sites.c:10)", "other (o.c:1)"], g) is None
    assert match_site(["make_q (sites.c:99)"], g) is None


def keyed_profile():
    """profile_dict with frame keys: X, Y and Z allocated through one wrapper (docs/guidance.md,
    "Site keys")."""
    p = profile_dict()
    for s, k in zip(p["sites"], ("3", "2", "1", "9")):
        s["key"] = ["build-id:ab12+0x11bd", f"build-id:ab12+0x12{k}0"]
        s["frames"][0] = "wrap (w.c:3)"
    p["sites"][3]["key"] = ["file:prog+0x40"]
    p["site_keys"] = True
    return p


def test_keyed_profiles_make_version_2_guidance():
    # 002 §III: sites keyed by frame keys; context counts a key's frames
    g = make_guidance(keyed_profile(), "thermos", 0.4, per_phase=True)
    assert g["version"] == 2 and g["context"] == 2
    assert [s["key"][1] for s in g["sites"]] == ["build-id:ab12+0x1210", "build-id:ab12+0x1220", "build-id:ab12+0x1230"]
    # display frames may repeat (all 'wrap' at depth 0 here): the keys are what must differ
    assert read_guidance_dict(g)["version"] == 2
    bad = json.loads(json.dumps(g))
    bad["sites"][1]["key"] = list(bad["sites"][0]["key"])
    with pytest.raises(GuidanceError, match=r"sites\[1\]\.key: same frame keys as sites\[0\]"):
        read_guidance_dict(bad)
    bad = json.loads(json.dumps(g))
    bad["sites"][0]["key"] = ["/usr/bin/sort+0x10"]
    with pytest.raises(GuidanceError, match=r"sites\[0\]\.key\[0\]: .* is not a frame key"):
        read_guidance_dict(bad)
    bad = json.loads(json.dumps(g))
    bad["sites"][0]["key"] += ["file:x+0x1"]
    with pytest.raises(GuidanceError, match=r"sites\[0\]\.key: 3 frames"):
        read_guidance_dict(bad)
    bad = json.loads(json.dumps(g))
    del bad["sites"][0]["key"]
    with pytest.raises(GuidanceError, match=r"sites\[0\]\.key: missing"):
        read_guidance_dict(bad)
    # version 1 still reads (test_write_read_round_trip_and_stable_bytes); others do not
    bad = json.loads(json.dumps(g))
    bad["version"] = 3
    with pytest.raises(GuidanceError, match="version: 3 is not supported .*versions 1 and 2"):
        read_guidance_dict(bad)


def stripped_profile():
    """keyed_profile as a stripped program shows it: every frame '??? (in /opt/app/bin/prog)',
    the keys as before (docs/guidance.md, "Site keys")."""
    p = keyed_profile()
    for s in p["sites"]:
        s["frames"] = ["??? (in /opt/app/bin/prog)"] * len(s["key"])
        s["accesses_per_byte"] = (s["reads"] + s["writes"]) / max(1, s["peak_bytes"])
        s["bytes_per_kinsn"] = 0.0
    return p


def test_frame_label_shows_an_unnamed_frame_by_its_key():
    assert frame_label("??? (in /usr/bin/sort)", "build-id:4f1c+0x4a10") == "sort+0x4a10"
    assert frame_label("??? (in /usr/lib/libz.so.1)", "file:libz.so.1+0x1d7") == "libz.so.1+0x1d7"
    assert frame_label("???", "file:?+0x7f00") == "file:?+0x7f00"
    # a named frame, and a frame without a key (version 1, an imported trace), stay as they are
    assert frame_label("main (a.c:3)", "build-id:4f1c+0x11") == "main (a.c:3)"
    assert frame_label("??? (in /usr/bin/sort)") == "??? (in /usr/bin/sort)"
    assert frame_label("??? (in /usr/bin/sort)", "main (a.c:3)") == "??? (in /usr/bin/sort)"
    assert site_frames({"frames": ["??? (in /x/prog)", "main (a.c:3)"], "key": ["build-id:ab+0x10", "build-id:ab+0x20"]}) \
        == ["prog+0x10", "main (a.c:3)"]
    assert site_frames({"frames": ["??? (in /x/prog)"]}) == ["??? (in /x/prog)"]
    # one line: the innermost frame, and its caller where that says little
    assert site_label({"frames": ["??? (in /x/prog)", "??? (in /x/prog)"], "key": ["file:prog+0x10", "file:prog+0x20"]}) \
        == "prog+0x10 < prog+0x20"
    assert site_label({"frames": ["make_hot_counters (sites.c:87)", "main (sites.c:120)"]}) == "make_hot_counters (sites.c:87)"
    assert site_label({"frames": []}) == "?"


def test_a_stripped_programs_sites_are_shown_apart(tmp_path, cli):
    """A stripped program's sites all display as '??? (in PROG)' although their keys differ:
    the profile's table, the guidance file and tierkit guide show each by its key instead."""
    from tierkit.profiling import sites_frame

    p = stripped_profile()
    df = sites_frame(p)
    # the innermost frame is the wrapper's for three sites: its callers tell them apart
    assert list(df["site"]) == ["prog+0x11bd < prog+0x1230", "prog+0x11bd < prog+0x1220", "prog+0x11bd < prog+0x1210",
                                "prog+0x40"]
    assert list(df["callers"]) == ["prog+0x1230", "prog+0x1220", "prog+0x1210", ""]
    g = make_guidance(p, "thermos", 0.4)
    assert g["version"] == 2
    for s in g["sites"]:
        assert s["frames"] == ["prog+0x" + k.rsplit("+0x", 1)[1] for k in s["key"]], s
    assert read_guidance_dict(g)["sites"] == g["sites"]
    # version 1 keys sites by their display frames: written as they are
    v1 = profile_dict()
    for i, s in enumerate(v1["sites"]):
        s["frames"] = ["??? (in /opt/app/bin/prog)", f"caller{i} (m.c:{i})"]
    assert [s["frames"][0] for s in make_guidance(v1, "thermos", 0.4)["sites"]] == ["??? (in /opt/app/bin/prog)"] * 3
    # tierkit guide lists them apart
    pf = tmp_path / "p.json"
    pf.write_text(json.dumps(p))
    rc, out, err = cli("guide", pf, "--capacity", "0.4", "-o", tmp_path / "g.json")
    assert rc == 0, err
    listed = [line.strip().split("  (")[0] for line in out.splitlines() if line.startswith("      ") and "accesses" in line]
    assert sorted(listed) == ["prog+0x11bd < prog+0x1210", "prog+0x11bd < prog+0x1220", "prog+0x11bd < prog+0x1230"], out
    assert "???" not in out, out


def read_guidance_dict(g):
    from tierkit.guidance import check_guidance
    return check_guidance(json.loads(json.dumps(g)))


def test_classification_rule():
    # docs/guidance.md "Matching sites": the rule the guided policy and the runtime share
    sites = [(["w", "hot"], 0), (["w", "cold"], 1), (["a", "x"], 2), (["a", "y"], 2)]
    assert classify(["a", "zzz"], sites, 2) == ("arena", (2, 1))  # unambiguous: decided at depth 1
    assert classify(["a"], sites, 2) == ("arena", (2, 1))
    assert classify(["w", "cold", "main"], sites, 2) == ("arena", (1, 2))  # ambiguous: one deeper
    assert classify(["w", "other"], sites, 2) == ("unmatched", 2)
    assert classify(["q"], sites, 2) == ("unmatched", 1)
    assert classify(["w"], sites, 2) == ("too-few-frames", (1, [0, 1]))
    assert classify(["w"], sites + [(["w"], 1)], 2) == ("arena", (1, 1))  # a stack that short


def test_match_site_refuses_too_few_frames():
    # the review's wrapper: a context-1 trace against context-2 guidance took the first
    # prefix match silently
    g = make_guidance(keyed_profile(), "thermos", 0.4, per_phase=True)
    assert match_site(["build-id:ab12+0x11bd", "build-id:ab12+0x1220"], g) is g["sites"][1]
    with pytest.raises(GuidanceError, match="1 frame.*too few to tell arenas 0, 1, 2 apart"):
        match_site(["build-id:ab12+0x11bd"], g)
    assert match_site(["file:other+0x1"], g) is None
    # version 1 alike, where the sites that start with the frames are in several arenas
    v1 = make_guidance(profile_dict(), "thermos", 0.4, per_phase=True)
    for s in v1["sites"]:
        s["frames"][0] = "wrap (w.c:3)"
    with pytest.raises(GuidanceError, match="too few"):
        match_site(["wrap (w.c:3)"], v1)


# ----------------------------------------------------------------------------------- files


def test_write_read_round_trip_and_stable_bytes(tmp_path):
    g = make_guidance(profile_dict(), "thermos", 0.4, per_phase=True)
    p = tmp_path / "g.json"
    write_guidance(g, p)
    assert read_guidance(p) == g
    q = tmp_path / "h.json"
    write_guidance(make_guidance(profile_dict(), "thermos", 0.4, per_phase=True), q)
    assert p.read_bytes() == q.read_bytes()
    # profile site order does not change the guidance
    pr = profile_dict()
    pr["sites"] = pr["sites"][::-1]
    assert make_guidance(pr, "thermos", 0.4, per_phase=True) == g


def test_refuses_to_overwrite(tmp_path):
    g = make_guidance(profile_dict(), "hotset", 0.25)
    p = tmp_path / "g.json"
    p.write_text("keep")
    with pytest.raises(GuidanceError) as e:
        write_guidance(g, p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)
    assert p.read_text() == "keep"
    write_guidance(g, p, force=True)
    assert read_guidance(p)["strategy"] == "hotset"


def one_line(err, *words):
    s = str(err.value)
    assert "\n" not in s, s
    for w in words:
        assert w in s, (w, s)


def test_read_guidance_errors(tmp_path):
    g = make_guidance(profile_dict(), "thermos", 0.4, per_phase=True)
    p = tmp_path / "g.json"

    def bad(mutate, *words):
        d = json.loads(json.dumps(g))
        mutate(d)
        p.write_text(json.dumps(d))
        with pytest.raises(GuidanceError) as e:
            read_guidance(p)
        one_line(e, str(p), *words)

    bad(lambda d: d.update(format="tierkit-profile"), "format")
    bad(lambda d: d.update(version=3), "version")
    bad(lambda d: d.update(version=2), "sites[0].key", "missing")  # version 2 keys sites by frame keys
    bad(lambda d: d.pop("arenas"), "arenas", "missing")
    bad(lambda d: d.update(mode="dynamic"), "mode")
    bad(lambda d: d["sites"][1].update(arena=9), "sites[1].arena")
    bad(lambda d: d["sites"][0].update(peak_bytes="16K"), "sites[0].peak_bytes")
    bad(lambda d: d["arenas"][2].update(tiers=[1]), "arenas[2].tiers")
    bad(lambda d: d["sites"][0].update(bits="11"), "sites[0].bits")
    bad(lambda d: d.update(capacity_bytes=[1, 2]), "capacity_bytes")
    bad(lambda d: d["phases"].update(slice_length=0), "phases.slice_length")
    two = [{"slice": 2, "phase": 1, "alloc": 5, "side": "before"}, {"slice": 3, "phase": 0, "alloc": 4, "side": "after"}]
    bad(lambda d: d["phases"].update(markers=two), "phases.markers[1].alloc", "before the marker ahead")
    bad(lambda d: d["phases"].update(markers=[dict(two[0], side="at")]), "phases.markers[0].side")
    bad(lambda d: d["phases"].update(markers=[dict(two[0], phase=2)]), "phases.markers[0].phase")
    p.write_text('{"format": "tierkit-guidance",\n "version": 1,,}')
    with pytest.raises(GuidanceError) as e:
        read_guidance(p)
    one_line(e, str(p), "line 2 column")
    with pytest.raises(GuidanceError) as e:
        read_guidance(tmp_path / "absent.json")
    one_line(e, "absent.json")


def test_read_profile_errors(tmp_path):
    p = tmp_path / "prof.json"
    p.write_text(json.dumps(profile_dict()))
    assert read_profile(p)["context"] == 1
    pr = profile_dict()
    pr["sites"][1]["phase_reads"] = [1]
    p.write_text(json.dumps(pr))
    with pytest.raises(GuidanceError) as e:
        read_profile(p)
    one_line(e, str(p), "sites[1].phase_reads")
    pr = profile_dict()
    del pr["totals"]["peak_live_bytes"]
    p.write_text(json.dumps(pr))
    with pytest.raises(GuidanceError) as e:
        read_profile(p)
    one_line(e, "totals.peak_live_bytes")
    pr = profile_dict()
    pr["sites"][0]["frames"] = ["a", "b", "c"]  # context 1 keys have at most 2 frames
    p.write_text(json.dumps(pr))
    with pytest.raises(GuidanceError) as e:
        read_profile(p)
    one_line(e, "sites[0].frames")


@pytest.mark.parametrize("kwargs,words", [
    ({"capacity": 0}, ["--capacity"]),
    ({"capacity": 1.5}, ["--capacity", "1.5"]),
    ({"capacity": "2"}, ["--capacity"]),
    ({"capacity": [0.1, 0.2]}, ["--capacity", "2 capacities for 2 tiers"]),
    ({"capacity": 0.1, "tiers": ["a", "b", "c"]}, ["--capacity", "3 tiers"]),
    ({"capacity": 0.1, "tiers": ["a"]}, ["--tiers"]),
    ({"capacity": 0.1, "strategy": "lru"}, ["--strategy", "lru"]),
    ({"capacity": 0.1, "granularity": 0}, ["--granularity"]),
])
def test_make_guidance_option_errors(kwargs, words):
    kw = {"strategy": "thermos", **kwargs}
    with pytest.raises(GuidanceError) as e:
        make_guidance(profile_dict(), **kw)
    one_line(e, *words)


def test_per_phase_needs_phases():
    pr = profile_dict(slices={"source": "insn", "count": 0, "length": 1000},
                      phases={"source": "single", "count": 1, "of_slice": []})
    pr["sites"] = [dict(s, phase_reads=[s["reads"]], phase_writes=[s["writes"]]) for s in pr["sites"]]
    pr["nonheap"] = dict(pr["nonheap"], phase_reads=[50], phase_writes=[28])
    assert make_guidance(pr, "hotset", 0.5)["mode"] == "static"
    with pytest.raises(GuidanceError) as e:
        make_guidance(pr, "hotset", 0.5, per_phase=True)
    one_line(e, "--per-phase", "phases")
    pr = profile_dict()
    del pr["phases"]
    with pytest.raises(GuidanceError) as e:
        make_guidance(pr, "hotset", 0.5, per_phase=True)
    one_line(e, "profile: phases: missing")


def test_parse_capacity():
    assert parse_capacity("0.125") == 0.125
    assert parse_capacity("12.5%") == 0.125
    assert parse_capacity("512M") == 512 << 20
    assert parse_capacity("1GiB") == 1 << 30
    assert parse_capacity(4096) == 4096
    assert parse_capacity(0.5) == 0.5
    for bad in ("0", "150%", "3", "12 parsecs", -1, 0.0, True):
        with pytest.raises(GuidanceError):
            parse_capacity(bad)


# ---------------------------------------------------------------- solving again for a capacity


def test_resolve_solves_the_same_strategy_for_another_capacity():
    """`tierkit run --guidance G --fast-capacity BYTES` (docs/guidance.md, "Guidance for the
    machine's capacity"): the strategy runs again on the sizes and accesses G keeps, which is
    what `tierkit guide` would give from the profile at that capacity."""
    from tierkit.guidance import resolve

    for strat in ("hotset", "knapsack", "thermos"):
        for per_phase in (False, True):
            g = make_guidance(keyed_profile(), strat, 0.1, per_phase=per_phase)
            for cap in (0.4, 40000, "1M"):
                want = make_guidance(keyed_profile(), strat, cap, per_phase=per_phase)
                got = resolve(g, cap)
                assert got["resolved_from"]["capacity_bytes"] == g["capacity_bytes"]
                for k in ("sites", "arenas", "capacity_bytes", "capacity_fraction", "granularity_bytes"):
                    assert got[k] == want[k], (strat, per_phase, cap, k)
                assert read_guidance_dict(got)["resolved_from"]["fast_sites"] == sum(s["tier"] == 0 for s in g["sites"])
    # knapsack fits none of the 16 KiB sites in 4,915 bytes, two in 40,000
    g = make_guidance(keyed_profile(), "knapsack", 0.1)
    assert [s["tier"] for s in g["sites"]] == [1, 1, 1]
    assert [s["tier"] for s in resolve(g, 40000)["sites"]] == [0, 0, 1]
    with pytest.raises(GuidanceError, match="resolved_from: .*solved again already"):
        resolve(resolve(g, 40000), 1000)
    bad = json.loads(json.dumps(make_guidance(keyed_profile(), "thermos", 0.1, per_phase=True)))
    del bad["sites"][1]["phase_accesses"]
    with pytest.raises(GuidanceError, match=r"sites\[1\]\.phase_accesses"):
        resolve(bad, 40000)


def test_tierkit_run_solves_guidance_for_its_fast_capacity(tmp_path, capsys):
    from tierkit.cli import resolve_guidance_args

    gf = tmp_path / "g.json"
    write_guidance(make_guidance(keyed_profile(), "knapsack", 0.1), gf)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = ["--guidance", str(gf), "--fast-capacity", "40K", "--", "prog", "--guidance", "x"]
    out = resolve_guidance_args(argv, tmp)
    assert out[0] == "--guidance" and out[1] == str(tmp / "g.json") and out[2:] == argv[2:]
    g = read_guidance(out[1])
    assert [s["tier"] for s in g["sites"]] == [0, 0, 1]
    err = capsys.readouterr().err
    assert "knapsack solved again for a fast tier of 40,960 bytes" in err and "2 of 3 sites fast (were 0)" in err
    # --guidance=G form; without --fast-capacity, or with it only among the program's
    # arguments, nothing changes
    tmp2 = tmp_path / "tmp2"
    tmp2.mkdir()
    assert resolve_guidance_args([f"--guidance={gf}", "--fast-capacity=40K", "--", "p"], tmp2)[0] == f"--guidance={tmp2 / 'g.json'}"
    for same in (["--guidance", str(gf), "--", "p"], ["--guidance", str(gf), "--", "p", "--fast-capacity", "1M"]):
        assert resolve_guidance_args(same, tmp) == same
    # a file tierkit run refuses (too big, not a regular file) is left to it, naming the user's file
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate((16 << 20) + 1)
    for bad in (str(big), str(tmp_path)):
        assert resolve_guidance_args(["--guidance", bad, "--fast-capacity", "1M", "--", "p"], tmp) == ["--guidance", bad, "--fast-capacity", "1M", "--", "p"]
    with pytest.raises(GuidanceError, match="--fast-capacity: '0.5' is a share of the footprint"):
        resolve_guidance_args(["--guidance", str(gf), "--fast-capacity", "0.5", "--", "p"], tmp)
