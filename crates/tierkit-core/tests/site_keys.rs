//! Site keys that survive real runs (docs/guidance.md, "Site keys"; seed 002 §III; 000 §3):
//! version-2 guidance (sites keyed by frame keys) in the `guided` policy, the classification rule
//! on a trace's keys, and the context shortfall that must be an error, not a silent first match;
//! version-1 guidance keeps working, and per-phase guidance applied to another run is warned about.
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::profile::{profile, SliceBy};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, AllocFn, EventKind, MarkerKind, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

const PAGE: u64 = 4096;
const W: &str = "build-id:ab12+0x11bd"; // the wrapper's call of malloc
const HOT: &str = "build-id:ab12+0x11da";
const COLD: &str = "build-id:ab12+0x11ed";

enum R {
    /// site id, display frames, frame keys
    Site(u32, &'static [&'static str], &'static [&'static str]),
    Alloc(u64, u64, u32),
    Slice(u64),
    /// `n` reads cycling over `pages` pages from `addr`
    Touch(u64, u64, u64),
}

fn trace(dir: &std::path::Path, name: &str, recs: &[R]) -> TraceInput {
    let p = dir.join(name);
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    let mut insn = 0u64;
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for r in recs {
        let kind = match r {
            R::Site(site, frames, keys) => EventKind::Site { site: *site, frames: s(frames), keys: s(keys) },
            R::Alloc(addr, size, site) => EventKind::Alloc { addr: *addr, size: *size, site: *site, func: AllocFn::Malloc },
            R::Slice(id) => EventKind::Marker { marker: MarkerKind::Slice, id: *id, label: format!("slice {id}") },
            R::Touch(addr, pages, n) => {
                for i in 0..*n {
                    insn += 1;
                    let a = addr + (i % pages) * PAGE + ((i / pages) % 64) * 64;
                    w.write_access(&Access { addr: a, write: false, insn, size: 64, ..Default::default() }).unwrap();
                }
                continue;
            }
        };
        w.write_event(insn, 0, 0, &kind).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn job(input: &TraceInput) -> Job<'_> {
    let mut job = Job::new(input, Platform::load("hbm-ddr3").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4 * PAGE))];
    job.paranoid = true;
    job
}

fn run(input: &TraceInput, spec: &str) -> SimResult {
    simulate(&mut job(input), &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn fails(input: &TraceInput, spec: &str) -> String {
    match simulate(&mut job(input), &PolicySpec::parse(spec).unwrap()) {
        Ok(_) => panic!("{spec} ran"),
        Err(e) => {
            let e = e.to_string();
            let max = tierkit_core::error::MAX_KEY_CHARS + 2 + tierkit_core::error::MAX_MSG_CHARS;
            assert!(!e.contains('\n') && e.chars().count() <= max, "one short line: {e}");
            e
        }
    }
}

fn file(dir: &std::path::Path, name: &str, body: serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

/// A wrapper allocator called for hot and for cold data: the two sites share their first
/// frame, so guidance needs two frames to tell them apart.
fn wrapper_guidance(dir: &std::path::Path) -> String {
    file(
        dir,
        "v2.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 2, "mode": "static", "tiers": ["fast", "slow"], "context": 2,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
            "sites": [
                {"key": [W, HOT], "frames": ["wrap (w.c:3)", "make_hot (w.c:10)"], "arena": 0},
                {"key": [W, COLD], "frames": ["wrap (w.c:3)", "make_cold (w.c:20)"], "arena": 1},
            ],
        }),
    )
}

/// Cold data first (it would take the fast tier on first touch), then hot data hammered.
fn wrapper_trace(dir: &std::path::Path, name: &str, two_frames: bool) -> TraceInput {
    let (hot, cold): (&[&str], &[&str]) = if two_frames { (&[W, HOT], &[W, COLD]) } else { (&[W], &[W]) };
    let (fh, fc): (&[&str], &[&str]) =
        if two_frames { (&["wrap (w.c:3)", "make_hot (w.c:10)"], &["wrap (w.c:3)", "make_cold (w.c:20)"]) } else { (&["wrap (w.c:3)"], &["wrap (w.c:3)"]) };
    // with one frame, both allocations come from one site (the tracer keys sites by frames)
    let hot_site = if two_frames { 1 } else { 0 };
    let mut recs = vec![R::Site(0, fc, cold), R::Alloc(0x100000, 8 * PAGE, 0), R::Touch(0x100000, 8, 8)];
    if two_frames {
        recs.push(R::Site(1, fh, hot));
    }
    recs.extend([R::Alloc(0x200000, 4 * PAGE, hot_site), R::Touch(0x200000, 4, 400)]);
    trace(dir, name, &recs)
}

#[test]
fn frame_keys_place_a_wrapper_allocators_sites_apart() {
    let d = tempfile::tempdir().unwrap();
    let g = wrapper_guidance(d.path());
    let t = wrapper_trace(d.path(), "two.tkt", true);
    let r = run(&t, &format!("guided:guidance={g}"));
    assert_eq!(r.stats.policy["allocations"], 2);
    assert_eq!(r.stats.policy["allocations_unmatched"], 0);
    assert_eq!(r.stats.platform.tiers[0].counters.reads, 400, "the hot data is in the fast tier");
    assert_eq!(r.stats.policy["pages_by_class"]["arena 1"], 8);
}

#[test]
fn too_few_frames_for_the_guidance_is_an_error_naming_the_site() {
    // the review: a trace recorded with --context 1 against guidance of context 2 sent every
    // wrapper allocation to the first matching (hot) arena, silently (fast hits 0.013 vs 0.844)
    let d = tempfile::tempdir().unwrap();
    let g = wrapper_guidance(d.path());
    let t = wrapper_trace(d.path(), "one.tkt", false);
    let e = fails(&t, &format!("guided:guidance={g}"));
    assert!(e.contains("trace site 0 (wrap (w.c:3)) has 1 frame(s), too few to tell arenas 0, 1 apart"), "{e}");
    assert!(e.contains("--context 2"), "{e}");
}

#[test]
fn an_unambiguous_first_frame_decides_and_unknown_frames_are_unmatched() {
    // 002 §III-B via the runtime's rule: where the innermost frame is unambiguous, one frame
    // decides (a deeper caller the guidance never saw does not matter)
    let d = tempfile::tempdir().unwrap();
    let g = file(
        d.path(),
        "g.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 2, "mode": "static", "tiers": ["fast", "slow"], "context": 2,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
            "sites": [{"key": [HOT, "file:prog+0x10"], "frames": ["h", "m"], "arena": 0}, {"key": [COLD], "frames": ["c"], "arena": 1}],
        }),
    );
    let t = trace(
        d.path(),
        "t.tkt",
        &[
            R::Site(0, &["c", "x"], &[COLD, "file:prog+0x99"]),
            R::Alloc(0x100000, 8 * PAGE, 0),
            R::Touch(0x100000, 8, 8),
            R::Site(1, &["h", "y"], &[HOT, "file:prog+0x77"]),
            R::Alloc(0x200000, 4 * PAGE, 1),
            R::Touch(0x200000, 4, 400),
            R::Site(2, &["z"], &["file:other+0x1"]),
            R::Alloc(0x300000, PAGE, 2),
        ],
    );
    let r = run(&t, &format!("guided:guidance={g}"));
    assert_eq!(r.stats.policy["allocations_unmatched"], 1);
    assert_eq!(r.stats.platform.tiers[0].counters.reads, 400);
}

#[test]
fn version_2_guidance_needs_a_trace_with_keys_and_checks_its_keys() {
    let d = tempfile::tempdir().unwrap();
    let g = wrapper_guidance(d.path());
    // a trace without keys (imported, or recorded before keys existed)
    let t = trace(d.path(), "old.tkt", &[R::Site(0, &["wrap (w.c:3)", "make_hot (w.c:10)"], &[]), R::Alloc(0x1000, PAGE, 0), R::Touch(0x1000, 1, 2)]);
    let e = fails(&t, &format!("guided:guidance={g}"));
    assert!(e.contains("trace site 0 (wrap (w.c:3)) has no frame keys"), "{e}");
    let bad = |name: &str, sites: serde_json::Value| {
        file(
            d.path(),
            name,
            serde_json::json!({"format": "tierkit-guidance", "version": 2, "mode": "static", "tiers": ["fast", "slow"], "context": 2,
                "arenas": [{"id": 0, "tiers": [0]}], "sites": sites}),
        )
    };
    let t2 = wrapper_trace(d.path(), "two.tkt", true);
    let cases = [
        (bad("nokey.json", serde_json::json!([{"frames": ["a"], "arena": 0}])), "sites[0].key: missing"),
        (bad("long.json", serde_json::json!([{"key": [W, HOT, COLD], "arena": 0}])), "sites[0].key: 3 frames"),
        (bad("path.json", serde_json::json!([{"key": ["file:/usr/bin/sort+0x10"], "arena": 0}])), "is not a frame key"),
        (bad("twice.json", serde_json::json!([{"key": [W], "arena": 0}, {"key": [W], "arena": 0}])), "the same key as sites[0]"),
    ];
    for (g, want) in cases {
        let e = fails(&t2, &format!("guided:guidance={g}"));
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn version_1_guidance_still_reads_and_refuses_an_ambiguous_shortfall() {
    // display-frame guidance of context 1 (two frames per key) on a trace that recorded one
    // frame: with the wrapper's sites in two arenas, the first prefix match used to win
    // silently; with both in one arena, the shorter trace still matches
    let d = tempfile::tempdir().unwrap();
    let v1 = |name: &str, cold_arena: u32| {
        file(
            d.path(),
            name,
            serde_json::json!({
                "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
                "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
                "sites": [{"frames": ["wrap (w.c:3)", "make_hot (w.c:10)"], "arena": 0}, {"frames": ["wrap (w.c:3)", "make_cold (w.c:20)"], "arena": cold_arena}],
            }),
        )
    };
    let one = wrapper_trace(d.path(), "one.tkt", false);
    let e = fails(&one, &format!("guided:guidance={}", v1("amb.json", 1)));
    assert!(e.contains("trace site 0 (wrap (w.c:3)) has 1 frame(s), too few to tell arenas 0, 1 apart"), "{e}");
    let r = run(&one, &format!("guided:guidance={}", v1("same.json", 0)));
    assert_eq!(r.stats.policy["allocations_unmatched"], 0);
    // and a full-depth trace matches whole keys as before
    let two = wrapper_trace(d.path(), "two.tkt", true);
    let r = run(&two, &format!("guided:guidance={}", v1("v1.json", 1)));
    assert_eq!((r.stats.policy["allocations_unmatched"].as_u64(), r.stats.platform.tiers[0].counters.reads), (Some(0), 400));
}

#[test]
fn profiles_group_by_frame_keys_where_display_frames_agree() {
    // the review: a stripped program's hot, warm and cold arrays became one site, since all
    // their frames displayed as '??? (in prog)'
    let d = tempfile::tempdir().unwrap();
    let q: &[&str] = &["??? (in /x/prog)"];
    let t = trace(
        d.path(),
        "s.tkt",
        &[
            R::Site(0, q, &["build-id:ab12+0x121b"]),
            R::Alloc(0x10000, PAGE, 0),
            R::Site(1, q, &["build-id:ab12+0x1228"]),
            R::Alloc(0x20000, PAGE, 1),
            R::Touch(0x20000, 1, 5),
        ],
    );
    let p = profile(&t, SliceBy::Auto, |_, _| true).unwrap();
    assert!(p.keyed);
    assert_eq!(p.depths[0].groups.len(), 2);
    assert_eq!(p.depths[0].groups[1].keys, vec!["build-id:ab12+0x1228".to_string()]);
    assert_eq!(p.depths[0].groups[1].frames, q.iter().map(|s| s.to_string()).collect::<Vec<_>>());
}

/// Per-phase guidance of two phases over slices of 100 instructions, made from a run of
/// `made_insn` instructions (trace digest `digest`).
fn per_phase(dir: &std::path::Path, name: &str, made_insn: u64, digest: Option<&str>) -> String {
    file(
        dir,
        name,
        serde_json::json!({
            "format": "tierkit-guidance", "version": 2, "mode": "per-phase", "tiers": ["fast", "slow"], "context": 2,
            "profile": {"trace_digest": digest},
            "phases": {"count": 2, "slice_source": "insn", "slice_length": 100, "of_slice": [0, 0, 1, 1],
                       "made_from": {"trace_digest": digest, "insn": made_insn, "accesses": null}},
            "arenas": [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}],
            "sites": [{"key": [W, HOT], "arena": 0}, {"key": [W, COLD], "arena": 1}],
        }),
    )
}

#[test]
fn per_phase_guidance_from_another_run_is_warned_about() {
    // the review: per-phase guidance from one input replayed its slice schedule on a run 240x
    // longer, silently (000 §3.2 phases are the training run's)
    let d = tempfile::tempdir().unwrap();
    let mut recs =
        vec![R::Site(0, &["w", "c"], &[W, COLD]), R::Alloc(0x100000, 4 * PAGE, 0), R::Site(1, &["w", "h"], &[W, HOT]), R::Alloc(0x200000, 4 * PAGE, 1)];
    for k in 1..=4u64 {
        recs.push(R::Touch(0x100000 + (k % 2) * 0x100000, 4, 100));
        recs.push(R::Slice(k));
    }
    let t = trace(d.path(), "pp.tkt", &recs);
    let digest = run(&t, "first-touch").config.trace_digest.unwrap();
    // made from this very run: no warning
    let r = run(&t, &format!("guided:guidance={}", per_phase(d.path(), "same.json", 400, Some(&digest))));
    assert!(r.warnings.iter().all(|w| !w.contains("per-phase guidance")), "{:?}", r.warnings);
    // a schedule made from a run of 40 instructions, another trace: two warnings, and it runs
    let r = run(&t, &format!("guided:guidance={}", per_phase(d.path(), "other.json", 40, Some("ffff0000"))));
    let w: Vec<&String> = r.warnings.iter().filter(|w| w.contains("per-phase guidance")).collect();
    assert_eq!(w.len(), 2, "{:?}", r.warnings);
    assert!(w[0].contains("made from a run of 40 instructions (4 slices), this trace runs 400 (10.0x longer)"), "{}", w[0]);
    assert!(w[0].contains("last phase holds"), "{}", w[0]);
    assert!(w[1].contains("made from the trace with digest ffff0000…"), "{}", w[1]);
    // 1.5x: within the factor of two, and no digest to compare: nothing said
    let r = run(&t, &format!("guided:guidance={}", per_phase(d.path(), "near.json", 600, None)));
    assert!(r.warnings.iter().all(|w| !w.contains("per-phase guidance")), "{:?}", r.warnings);
}
