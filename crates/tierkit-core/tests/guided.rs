//! Allocation-site profiles and the `guided` policy (000 §3.2, §4.1; 002 §III-B, §IV-B).
mod common;

use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::profile::{profile, SliceBy, NONHEAP};
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, AllocFn, EventKind, MarkerKind, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

const PAGE: u64 = 4096;

enum R {
    Site(u32, &'static [&'static str]),
    Alloc(u64, u64, u32),
    Free(u64),
    Realloc(u64, u64, u64, u32),
    Slice(u64),
    /// `n` reads, one per line, cycling over `pages` pages from `addr`
    Touch(u64, u64, u64),
}

/// A trace with instruction counts: each access is one instruction after the one before.
fn trace(dir: &std::path::Path, name: &str, recs: &[R]) -> TraceInput {
    let p = dir.join(name);
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    let mut insn = 0u64;
    for r in recs {
        let ev = |w: &mut TktWriter, insn: u64, kind: EventKind| w.write_event(insn, 0, 0, &kind).unwrap();
        match r {
            R::Site(id, frames) => ev(&mut w, insn, EventKind::Site { site: *id, frames: frames.iter().map(|s| s.to_string()).collect(), keys: Vec::new() }),
            R::Alloc(addr, size, site) => ev(&mut w, insn, EventKind::Alloc { addr: *addr, size: *size, site: *site, func: AllocFn::Malloc }),
            R::Free(addr) => ev(&mut w, insn, EventKind::Free { addr: *addr }),
            R::Realloc(old, addr, size, site) => ev(&mut w, insn, EventKind::Realloc { old_addr: *old, addr: *addr, size: *size, site: *site }),
            R::Slice(id) => ev(&mut w, insn, EventKind::Marker { marker: MarkerKind::Slice, id: *id, label: format!("slice {id}") }),
            R::Touch(addr, pages, n) => {
                for i in 0..*n {
                    insn += 1;
                    let a = addr + (i % pages) * PAGE + ((i / pages) % 64) * 64;
                    w.write_access(&Access { addr: a, write: false, insn, size: 64, ..Default::default() }).unwrap();
                }
            }
        }
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

fn run(input: &TraceInput, fast_pages: u64, spec: &str) -> SimResult {
    let mut job = Job::new(input, Platform::load("hbm-ddr3").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(fast_pages * PAGE))];
    job.paranoid = true;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn fails(input: &TraceInput, spec: &str) -> String {
    let mut job = Job::new(input, Platform::load("hbm-ddr3").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4 * PAGE))];
    match simulate(&mut job, &PolicySpec::parse(spec).unwrap()) {
        Ok(_) => panic!("{spec} ran"),
        Err(e) => {
            let e = e.to_string();
            assert!(!e.contains('\n'), "one line: {e}");
            e
        }
    }
}

fn fast_reads(r: &SimResult) -> u64 {
    r.stats.platform.tiers[0].counters.reads
}

const HOT: &[&str] = &["make_hot (s.c:10)", "main (s.c:50)"];
const COLD: &[&str] = &["make_cold (s.c:20)", "main (s.c:51)"];

fn guidance(dir: &std::path::Path, name: &str, body: serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

/// Static guidance: make_hot's arena prefers tier 0, make_cold's tier 1.
fn static_guidance(dir: &std::path::Path) -> String {
    guidance(
        dir,
        "static.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
            "sites": [{"frames": HOT, "arena": 0}, {"frames": COLD, "arena": 1}],
        }),
    )
}

/// The cold data is allocated and touched first (as in the `sites` workload), then the hot
/// data is hammered.
fn cold_then_hot(dir: &std::path::Path) -> TraceInput {
    trace(
        dir,
        "ch.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 8 * PAGE, 0),
            R::Touch(0x100000, 8, 8),
            R::Site(1, HOT),
            R::Alloc(0x200000, 4 * PAGE, 1),
            R::Touch(0x200000, 4, 400),
        ],
    )
}

#[test]
fn profile_attributes_accesses_to_live_allocations_and_keeps_peaks_per_depth() {
    // 002 §III-A, Fig. 2: two call paths into one allocating function are one site at depth
    // 0 and two at depth 1; peak live bytes do not add up when the sites peak apart
    let d = tempfile::tempdir().unwrap();
    let a: &[&str] = &["alloc_buf (b.c:5)", "parse (p.c:10)"];
    let b: &[&str] = &["alloc_buf (b.c:5)", "render (r.c:20)"];
    let t = trace(
        d.path(),
        "p.tkt",
        &[
            R::Site(0, a),
            R::Alloc(0x10000, 2 * PAGE, 0),
            R::Touch(0x10000, 2, 10),
            R::Free(0x10000),
            R::Touch(0x10000, 1, 3), // freed: still the site's memory (lines written back late)
            R::Site(1, b),
            R::Alloc(0x40000, PAGE, 1),
            R::Touch(0x40000, 1, 5),
            R::Realloc(0x40000, 0x80000, 3 * PAGE, 1),
            R::Touch(0x80000, 3, 6),
        ],
    );
    let p = profile(&t, SliceBy::Auto, |_, _| true).unwrap();
    assert_eq!(p.sites.len(), 2);
    assert_eq!((p.sites[0].reads, p.sites[1].reads), (13, 11));
    // the realloc's old block is freed too, but nothing touched it after
    assert_eq!((p.nonheap_reads, p.heap_reads, p.freed_accesses), (0, 24, 3));
    assert_eq!(p.sites[0].peak_bytes, 2 * PAGE);
    assert_eq!(p.sites[1].peak_bytes, 3 * PAGE);
    assert_eq!(p.sites[1].allocs, 2, "a realloc is an allocation of its site");
    assert_eq!(p.peak_live_bytes, 3 * PAGE);
    // depth 0 merges the two paths; their peaks were apart, so the merged peak is 3 pages
    assert_eq!(p.depths[0].groups.len(), 1);
    assert_eq!(p.depths[0].groups[0].peak_bytes, 3 * PAGE);
    assert_eq!(p.depths[1].groups.len(), 2);
    // no markers: 64 equal slices by instructions, counts per slice add up
    assert_eq!(p.slices.source, "insn");
    let heap: u64 = p.slice_counts.iter().filter(|c| c.1 != NONHEAP).map(|c| c.2).sum();
    assert_eq!(heap, 24);
}

#[test]
fn accesses_after_a_free_go_to_the_freed_blocks_memory_not_pages_of_their_own() {
    // a post-cache trace writes a freed block's dirty lines back after the free; the arena
    // layout sends them to the block's memory, so a guided run touches the pages any other
    // policy touches (one per page of the trace), and the profile counts them to the site
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "wb.tkt",
        &[
            R::Site(0, HOT),
            R::Alloc(0x100000, 4 * PAGE, 0),
            R::Touch(0x100000, 4, 40),
            R::Free(0x100000),
            R::Touch(0x100000, 4, 8), // the writebacks
            R::Site(1, COLD),
            R::Alloc(0x100000, 2 * PAGE, 1), // the traced allocator reuses the address
            R::Touch(0x100000, 2, 6),
            R::Touch(0x900000, 1, 2), // a global
        ],
    );
    let g = static_guidance(d.path());
    let ft = run(&t, 8, "first-touch");
    let gd = run(&t, 8, &format!("guided:guidance={g}"));
    assert_eq!(ft.pages, 5);
    // the hot arena's 4 pages, the cold arena's 2, the global's 1
    assert_eq!(gd.pages, 7, "{:?}", gd.stats.policy["pages_by_class"]);
    let lm = &gd.stats.policy["layout_model"];
    assert_eq!((lm["accesses_to_freed_blocks"].as_u64(), lm["accesses_kept"].as_u64()), (Some(8), Some(2)));
    assert_eq!(gd.stats.policy["pages_by_class"]["non-heap"], 1);
    let p = profile(&t, SliceBy::Auto, |_, _| true).unwrap();
    assert_eq!((p.sites[0].reads, p.sites[1].reads, p.nonheap_reads, p.freed_accesses), (48, 6, 2, 8));
}

#[test]
fn profile_slices_follow_the_trace_markers() {
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "m.tkt",
        &[
            R::Site(0, HOT),
            R::Alloc(0x10000, PAGE, 0),
            R::Touch(0x10000, 1, 4),
            R::Slice(1),
            R::Touch(0x10000, 1, 6),
            R::Slice(2),
            R::Slice(3),
            R::Touch(0x10000, 1, 1),
        ],
    );
    let p = profile(&t, SliceBy::Auto, |_, _| true).unwrap();
    assert_eq!(p.slices.source, "markers");
    assert_eq!(p.slices.count, 4, "an empty slice between two markers is kept");
    let per: Vec<(u32, u64)> = p.slice_counts.iter().map(|c| (c.0, c.2)).collect();
    assert_eq!(per, [(0, 4), (1, 6), (3, 1)]);
    assert_eq!(p.slices.start_access, [0, 4, 10, 10]);
}

#[test]
fn static_arenas_keep_cold_data_out_of_the_fast_tier() {
    // 000 §6.2: hot-site data goes to the fast tier on first touch, cold-site data always to
    // the slow tier; first touch instead fills the fast tier with whatever comes first
    let d = tempfile::tempdir().unwrap();
    let t = cold_then_hot(d.path());
    let g = static_guidance(d.path());
    let ft = run(&t, 4, "first-touch");
    let gd = run(&t, 4, &format!("guided:guidance={g}"));
    assert_eq!(fast_reads(&ft), 4, "first touch gives the fast tier to the cold archive");
    assert_eq!(fast_reads(&gd), 400, "guided gives it to the hot counters");
    assert!(gd.runtime_ns < ft.runtime_ns);
    assert_eq!(gd.stats.policy["pages_by_class"]["arena 0"], 4);
    assert_eq!(gd.stats.policy["pages_by_class"]["arena 1"], 8);
    assert_eq!(gd.migrations, 0);
}

#[test]
fn a_full_preferred_tier_overflows_to_the_next_one() {
    // 002 §IV-B: MPOL_PREFERRED lets the hot arena ask for more than the fast tier holds
    let d = tempfile::tempdir().unwrap();
    let t = cold_then_hot(d.path());
    let g = static_guidance(d.path());
    let r = run(&t, 3, &format!("guided:guidance={g}"));
    assert_eq!(r.stats.policy["overflow_pages"], 1);
    assert_eq!(r.stats.platform.tiers[0].used_pages, 3);
}

#[test]
fn unmatched_sites_and_non_heap_pages_follow_their_defaults() {
    let d = tempfile::tempdir().unwrap();
    let other: &[&str] = &["elsewhere (o.c:1)", "main (s.c:52)"];
    let t = trace(d.path(), "u.tkt", &[R::Site(0, other), R::Alloc(0x100000, 2 * PAGE, 0), R::Touch(0x100000, 2, 10), R::Touch(0x900000, 1, 5)]);
    let g = static_guidance(d.path());
    // unmatched and non-heap: first touch (fast while it has room), as under the runtime
    let r = run(&t, 4, &format!("guided:guidance={g}"));
    assert_eq!(fast_reads(&r), 15);
    assert_eq!(r.stats.policy["allocations_unmatched"], 1);
    // unmatched in the guidance's last tier (000 §6.2's cold data)
    let r = run(&t, 4, &format!("guided:guidance={g},unmatched=slow"));
    assert_eq!(fast_reads(&r), 5);
    let r = run(&t, 4, &format!("guided:guidance={g},unmatched=fast,nonheap=slow"));
    assert_eq!(fast_reads(&r), 10);
}

#[test]
fn sites_match_by_their_first_context_frames() {
    // guidance with context 0 keys on the innermost frame alone: another caller still matches
    let d = tempfile::tempdir().unwrap();
    let g = guidance(
        d.path(),
        "c0.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 0,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
            "sites": [{"frames": ["make_hot (s.c:10)"], "arena": 0}, {"frames": ["make_cold (s.c:20)"], "arena": 1}],
        }),
    );
    let hot_elsewhere: &[&str] = &["make_hot (s.c:10)", "other_caller (s.c:99)"];
    let t = trace(
        d.path(),
        "c.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 4 * PAGE, 0),
            R::Touch(0x100000, 4, 4),
            R::Site(1, hot_elsewhere),
            R::Alloc(0x200000, 2 * PAGE, 1),
            R::Touch(0x200000, 2, 20),
        ],
    );
    let r = run(&t, 4, &format!("guided:guidance={g}"));
    assert_eq!(fast_reads(&r), 20);
    assert_eq!(r.stats.policy["allocations_unmatched"], 0);
}

#[test]
fn per_phase_arenas_change_tier_at_phase_transitions() {
    // 000 §3.2, Fig. 1: arena A1 is hot in phase 0 and A2 in phase 1; at the transition the
    // program stops, A1 moves down and A2 up, as one OS batch
    let d = tempfile::tempdir().unwrap();
    let a1: &[&str] = &["stage_a (s.c:1)", "main (s.c:9)"];
    let a2: &[&str] = &["stage_b (s.c:2)", "main (s.c:9)"];
    let t = trace(
        d.path(),
        "ph.tkt",
        &[
            R::Site(0, a1),
            R::Alloc(0x100000, 4 * PAGE, 0),
            R::Site(1, a2),
            R::Alloc(0x200000, 4 * PAGE, 1),
            R::Touch(0x200000, 4, 4), // a2 first touched first: first touch would keep it fast
            R::Touch(0x100000, 4, 996),
            R::Touch(0x200000, 4, 1000),
        ],
    );
    let g = guidance(
        d.path(),
        "pp.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 1, "mode": "per-phase", "tiers": ["fast", "slow"], "context": 1,
            "phases": {"count": 2, "slice_source": "insn", "slice_length": 1001, "of_slice": [0, 1]},
            "arenas": [{"id": 0, "tiers": [0, 1]}, {"id": 1, "tiers": [1, 0]}],
            "sites": [{"frames": a1, "arena": 0}, {"frames": a2, "arena": 1}],
        }),
    );
    let r = run(&t, 4, &format!("guided:guidance={g}"));
    assert_eq!(r.stats.policy["phase_transitions"], 1);
    assert_eq!(r.stats.policy["pages_moved"], 8);
    assert_eq!(r.migrations, 8);
    assert_eq!(fast_reads(&r), 996 + 1000, "each phase's hot arena is in the fast tier");
    let c = &r.stats.migration.charges;
    assert_eq!(c["OS entry (arena move)"].count, 1);
    assert_eq!(c["TLB shootdown (arena move)"].count, 1);
    // static guidance from the same arenas cannot follow
    let s = guidance(
        d.path(),
        "st.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
            "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
            "sites": [{"frames": a1, "arena": 0}, {"frames": a2, "arena": 1}],
        }),
    );
    assert_eq!(fast_reads(&run(&t, 4, &format!("guided:guidance={s}"))), 996);
}

#[test]
fn guidance_combines_with_a_dynamic_policy() {
    // guided placement, then otf migrates what the guidance got wrong
    let d = tempfile::tempdir().unwrap();
    let t = cold_then_hot(d.path());
    // guidance that has it backwards: the cold site fast, the hot one slow
    let g = guidance(
        d.path(),
        "wrong.json",
        serde_json::json!({
            "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
            "arenas": [{"id": 0, "tiers": [1]}, {"id": 1, "tiers": [0]}],
            "sites": [{"frames": HOT, "arena": 0}, {"frames": COLD, "arena": 1}],
        }),
    );
    let alone = run(&t, 4, &format!("guided:guidance={g}"));
    let with = run(&t, 4, &format!("guided:guidance={g},then=otf,then.threshold=8"));
    assert_eq!(alone.migrations, 0);
    assert!(with.migrations > 0);
    assert!(fast_reads(&with) > fast_reads(&alone));
    assert!(with.stats.policy["then"].is_object());
}

#[test]
fn bad_guidance_gives_one_line_errors_naming_file_and_key() {
    let d = tempfile::tempdir().unwrap();
    let t = cold_then_hot(d.path());
    let e = fails(&t, "guided");
    assert!(e.contains("guided:guidance") && e.contains("missing"), "{e}");
    let missing = d.path().join("nope.json");
    let e = fails(&t, &format!("guided:guidance={}", missing.display()));
    assert!(e.contains("nope.json"), "{e}");
    let bad = guidance(d.path(), "bad.json", serde_json::json!({"format": "tierkit-guidance"}));
    let e = fails(&t, &format!("guided:guidance={bad}"));
    assert!(e.contains("bad.json") && e.contains("missing field"), "{e}");
    let arena = guidance(
        d.path(),
        "arena.json",
        serde_json::json!({"format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["f", "s"], "context": 0,
            "arenas": [{"id": 0, "tiers": [0]}], "sites": [{"frames": ["x"], "arena": 3}]}),
    );
    let e = fails(&t, &format!("guided:guidance={arena}"));
    assert!(e.contains("sites[0].arena"), "{e}");
    let g = static_guidance(d.path());
    let e = fails(&t, &format!("guided:guidance={g},mode=per-phase"));
    assert!(e.contains("guided:mode"), "{e}");
    let e = fails(&t, &format!("guided:guidance={g},then=cache-mode"));
    assert!(e.contains("guided:then") && e.contains("cannot follow"), "{e}");
    let e = fails(&t, &format!("guided:guidance={g},then.threshold=4"));
    assert!(e.contains("then.threshold"), "{e}");
    let e = fails(&t, &format!("guided:guidance={g},then=otf,then.bogus=1"));
    assert!(e.contains("bogus"), "{e}");
}
