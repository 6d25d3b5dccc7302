//! The guided run places each allocation as per-arena allocators would (docs/guidance.md,
//! "Guided runs"; 000 §3.2: each arena its own pages, placed as a unit; 002
//! §IV-B: one jemalloc arena per tier, its extents bound to the tier's node).
mod common;

use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, AllocFn, EventKind, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

const PAGE: u64 = 4096;

enum R {
    Site(u32, &'static [&'static str]),
    Alloc(u64, u64, u32),
    Free(u64),
    Realloc(u64, u64, u64, u32),
    /// `n` reads, one per line, cycling over `pages` pages from `addr`
    Touch(u64, u64, u64),
    /// `n` reads of the line at `addr`
    Line(u64, u64),
}

fn trace(dir: &std::path::Path, name: &str, recs: &[R]) -> TraceInput {
    let p = dir.join(name);
    let meta = TraceMeta { time_insn: true, ..TraceMeta::default() };
    let mut w = TktWriter::create(&p, &meta, true).unwrap();
    let mut insn = 0u64;
    for r in recs {
        let ev = |w: &mut TktWriter, insn: u64, kind: EventKind| w.write_event(insn, 0, 0, &kind).unwrap();
        let mut read = |w: &mut TktWriter, addr: u64| {
            insn += 1;
            w.write_access(&Access { addr, write: false, insn, size: 64, ..Default::default() }).unwrap();
        };
        match r {
            R::Site(id, frames) => ev(&mut w, insn, EventKind::Site { site: *id, frames: frames.iter().map(|s| s.to_string()).collect(), keys: Vec::new() }),
            R::Alloc(addr, size, site) => ev(&mut w, insn, EventKind::Alloc { addr: *addr, size: *size, site: *site, func: AllocFn::Malloc }),
            R::Free(addr) => ev(&mut w, insn, EventKind::Free { addr: *addr }),
            R::Realloc(old, addr, size, site) => ev(&mut w, insn, EventKind::Realloc { old_addr: *old, addr: *addr, size: *size, site: *site }),
            R::Touch(addr, pages, n) => {
                for i in 0..*n {
                    read(&mut w, addr + (i % pages) * PAGE + ((i / pages) % 64) * 64);
                }
            }
            R::Line(addr, n) => {
                for _ in 0..*n {
                    read(&mut w, *addr);
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

fn fast_reads(r: &SimResult) -> u64 {
    r.stats.platform.tiers[0].counters.reads
}

const HOT: &[&str] = &["make_hot (s.c:10)", "main (s.c:50)"];
const COLD: &[&str] = &["make_cold (s.c:20)", "main (s.c:51)"];

/// Static guidance: make_hot's arena 0 prefers tier 0, make_cold's arena 1 tier 1.
fn static_guidance(dir: &std::path::Path) -> String {
    let p = dir.join("static.json");
    let body = serde_json::json!({
        "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
        "arenas": [{"id": 0, "tiers": [0]}, {"id": 1, "tiers": [1]}],
        "sites": [{"frames": HOT, "arena": 0}, {"frames": COLD, "arena": 1}],
    });
    std::fs::write(&p, body.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

/// Pages per tier of one class at the end of the run.
fn class_pages(r: &SimResult, class: &str, when: &str) -> Vec<u64> {
    serde_json::from_value(r.stats.policy["by_class"][class][when].clone()).unwrap_or_else(|_| panic!("{class}.{when} in {}", r.stats.policy))
}

#[test]
fn a_block_freed_by_a_cold_site_and_reused_by_a_hot_one_goes_to_the_hot_arena() {
    // the reproducer: the traced allocator gave hot site B the block cold site A had
    // freed, so B's pages kept A's placement (slow) and the guided run got no fast hits where
    // all-fast gets them all. With the arena layout (000 §3.2, 002 §IV-B) B's block is in
    // B's arena and its pages go to the fast tier.
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "reuse.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 4 * PAGE, 0),
            R::Touch(0x100000, 4, 8),
            R::Free(0x100000),
            R::Site(1, HOT),
            R::Alloc(0x100000, 4 * PAGE, 1),
            R::Touch(0x100000, 4, 800),
        ],
    );
    let g = static_guidance(d.path());
    let arenas = run(&t, 4, &format!("guided:guidance={g}"));
    let fast = run(&t, 4, "all-fast");
    assert_eq!(fast_reads(&arenas), 800, "every access of the hot site is fast");
    assert!(arenas.fast_hit_ratio > 0.95 * fast.fast_hit_ratio, "{} vs all-fast {}", arenas.fast_hit_ratio, fast.fast_hit_ratio);
    assert_eq!(arenas.stats.policy["layout"], "arenas");
    assert_eq!(class_pages(&arenas, "arena 0", "pages_by_tier_end"), [4, 0]);
    assert_eq!(class_pages(&arenas, "arena 1", "pages_by_tier_end"), [0, 4]);
    // the defect, kept behind layout=trace: the hot site inherits the cold pages
    let traced = run(&t, 4, &format!("guided:guidance={g},layout=trace"));
    assert_eq!(fast_reads(&traced), 0);
    assert_eq!(traced.stats.policy["layout"], "trace");
    assert!(traced.runtime_ns > arenas.runtime_ns);
}

#[test]
fn two_sites_sharing_a_traced_page_get_their_own_pages_in_their_own_tiers() {
    // the traced allocator packed a hot and a cold block into one page; arenas do not share
    // pages (002 §IV-B: each arena's extents are bound to its own node)
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "shared.tkt",
        &[
            R::Site(0, HOT),
            R::Alloc(0x10000, 2048, 0),
            R::Site(1, COLD),
            R::Alloc(0x10800, 2048, 1),
            R::Line(0x10800, 10), // the cold block is touched first
            R::Line(0x10000, 500),
            R::Line(0x10840, 20),
        ],
    );
    let g = static_guidance(d.path());
    let arenas = run(&t, 4, &format!("guided:guidance={g}"));
    assert_eq!(fast_reads(&arenas), 500);
    assert_eq!(arenas.stats.platform.tiers[1].counters.reads, 30);
    assert_eq!(arenas.pages, 2, "one page per arena");
    assert_eq!(class_pages(&arenas, "arena 0", "pages_by_tier_end"), [1, 0]);
    assert_eq!(class_pages(&arenas, "arena 1", "pages_by_tier_end"), [0, 1]);
    // per site: the page of each
    let sites = arenas.stats.policy["by_site"].as_array().unwrap();
    assert_eq!(sites.len(), 2);
    assert_eq!(sites[0]["class"], "arena 0");
    assert_eq!(sites[0]["frames"][0], HOT[0]);
    assert_eq!(sites[1]["pages_by_tier_end"], serde_json::json!([0, 1]));
    // the traced page is one page, in one tier, whoever's it is
    let traced = run(&t, 4, &format!("guided:guidance={g},layout=trace"));
    assert_eq!(traced.pages, 1);
    assert!(fast_reads(&traced) == 530 || fast_reads(&traced) == 0, "{}", fast_reads(&traced));
}

#[test]
fn realloc_moves_a_block_to_its_new_sites_arena_and_later_accesses_follow_it() {
    // a cold site's block is grown in place by the traced allocator, by a hot site's realloc:
    // the runtime serves the new block from the hot site's arena, and the data's later
    // accesses (at the traced address) land on the hot arena's pages
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "realloc.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 4 * PAGE, 0),
            R::Touch(0x100000, 4, 8),
            R::Site(1, HOT),
            R::Realloc(0x100000, 0x100000, 6 * PAGE, 1),
            R::Touch(0x100000, 6, 600),
            // and back to a cold site at another traced address
            R::Realloc(0x100000, 0x400000, 6 * PAGE, 0),
            R::Touch(0x400000, 6, 60),
        ],
    );
    let g = static_guidance(d.path());
    let r = run(&t, 8, &format!("guided:guidance={g}"));
    assert_eq!(fast_reads(&r), 600);
    assert_eq!(r.stats.platform.tiers[1].counters.reads, 68);
    let m = &r.stats.policy["layout_model"];
    assert_eq!(m["reallocs_to_another_arena"], 2, "{m}");
    assert_eq!(m["reallocs_in_place"], 0);
    // arena 1 (cold) reused its own freed pages for the second move: 6 pages, not 10
    assert_eq!(class_pages(&r, "arena 1", "pages_by_tier_end"), [0, 6]);
    assert_eq!(class_pages(&r, "arena 0", "pages_by_tier_end"), [6, 0]);
    // the traced layout keeps the cold pages under the hot data
    let traced = run(&t, 8, &format!("guided:guidance={g},layout=trace"));
    assert_eq!(fast_reads(&traced), 200, "only the two pages the realloc added");
}

#[test]
fn per_class_statistics_add_up_and_keep_the_peak() {
    // what the runtime will report per arena: pages per tier at the end and at the arena's
    // peak of live bytes, bytes allocated; every page the run placed is in one class
    let d = tempfile::tempdir().unwrap();
    let other: &[&str] = &["elsewhere (o.c:1)", "main (s.c:52)"];
    let t = trace(
        d.path(),
        "stats.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 4 * PAGE, 0), // 16 KiB: 4 pages
            R::Touch(0x100000, 2, 4),        // two of them touched
            R::Free(0x100000),               // peak passed: 2 pages
            R::Alloc(0x200000, 12288, 0),    // a 3-page slab at the bottom of the arena
            R::Touch(0x200000, 3, 3),
            R::Site(1, HOT),
            R::Alloc(0x300000, 2 * PAGE, 1),
            R::Touch(0x300000, 2, 40),
            R::Site(2, other),
            R::Alloc(0x500000, PAGE, 2),
            R::Touch(0x500000, 1, 5),
            R::Touch(0x900000, 3, 6), // stack
        ],
    );
    let g = static_guidance(d.path());
    let r = run(&t, 2, &format!("guided:guidance={g}"));
    let arena1 = &r.stats.policy["by_class"]["arena 1"];
    assert_eq!(arena1["allocated_bytes"], 4 * PAGE + 12288);
    assert_eq!(arena1["peak_live_bytes"], 4 * PAGE);
    assert_eq!(class_pages(&r, "arena 1", "pages_by_tier_at_peak"), [0, 2]);
    assert_eq!(class_pages(&r, "arena 1", "pages_by_tier_end"), [0, 3]);
    assert_eq!(class_pages(&r, "unmatched", "pages_by_tier_end"), [0, 1]);
    assert_eq!(class_pages(&r, "non-heap", "pages_by_tier_end"), [0, 3], "the fast tier is full with the hot arena");
    assert_eq!(r.stats.policy["allocations_unmatched"], 1);
    // the classes add up to the pages the run placed, tier by tier
    let classes = r.stats.policy["by_class"].as_object().unwrap();
    assert_eq!(classes.len(), 4);
    for (t, tier) in r.stats.platform.tiers.iter().enumerate() {
        let sum: u64 = classes.keys().map(|c| class_pages(&r, c, "pages_by_tier_end")[t]).sum();
        assert_eq!(sum, tier.used_pages, "tier {t}");
    }
    assert_eq!(r.pages, 2 + 3 + 2 + 1 + 3 - 2, "the 3-page slab reuses the two pages touched before");
}

#[test]
fn per_class_pages_follow_migrations_of_the_then_policy() {
    // guidance that has it backwards, fixed afterwards by otf: the pages the dynamic policy
    // moves change tier in the per-class statistics too
    let d = tempfile::tempdir().unwrap();
    let t = trace(
        d.path(),
        "moves.tkt",
        &[
            R::Site(0, COLD),
            R::Alloc(0x100000, 8 * PAGE, 0),
            R::Touch(0x100000, 8, 8),
            R::Site(1, HOT),
            R::Alloc(0x200000, 4 * PAGE, 1),
            R::Touch(0x200000, 4, 400),
        ],
    );
    let p = d.path().join("wrong.json");
    let body = serde_json::json!({
        "format": "tierkit-guidance", "version": 1, "mode": "static", "tiers": ["fast", "slow"], "context": 1,
        "arenas": [{"id": 0, "tiers": [1]}, {"id": 1, "tiers": [0]}],
        "sites": [{"frames": HOT, "arena": 0}, {"frames": COLD, "arena": 1}],
    });
    std::fs::write(&p, body.to_string()).unwrap();
    let r = run(&t, 4, &format!("guided:guidance={},then=otf,then.threshold=8", p.display()));
    assert!(r.migrations > 0);
    let classes = r.stats.policy["by_class"].as_object().unwrap();
    for (t, tier) in r.stats.platform.tiers.iter().enumerate() {
        let sum: u64 = classes.keys().map(|c| class_pages(&r, c, "pages_by_tier_end")[t]).sum();
        assert_eq!(sum, tier.used_pages, "tier {t} after {} migrations", r.migrations);
    }
    let hot_fast = class_pages(&r, "arena 0", "pages_by_tier_end")[0];
    assert!(hot_fast > 0, "otf moved hot pages up: {}", r.stats.policy["by_class"]);
}

#[test]
fn the_layout_is_deterministic() {
    let d = tempfile::tempdir().unwrap();
    let mut recs = vec![R::Site(0, COLD), R::Site(1, HOT)];
    // a churn of blocks of many sizes, freed out of order, across both arenas
    for i in 0..200u64 {
        let size = [24, 100, 700, 5000, 20000, 70000][(i % 6) as usize];
        let addr = 0x1000_0000 + (i % 17) * 0x20000;
        recs.push(R::Alloc(addr, size, (i % 3 == 0) as u32));
        recs.push(R::Touch(addr, size.div_ceil(PAGE), 5));
        if i % 2 == 1 {
            recs.push(R::Free(0x1000_0000 + ((i * 7) % 17) * 0x20000));
        }
    }
    let t = trace(d.path(), "churn.tkt", &recs);
    let g = static_guidance(d.path());
    let a = run(&t, 16, &format!("guided:guidance={g}"));
    let b = run(&t, 16, &format!("guided:guidance={g}"));
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert!(a.stats.policy["layout_model"]["allocations"].as_u64().unwrap() == 200);
}

#[test]
fn a_trace_address_inside_the_arena_ranges_is_a_one_line_error() {
    let d = tempfile::tempdir().unwrap();
    let t = trace(d.path(), "high.tkt", &[R::Line(1 << 60, 1)]);
    let g = static_guidance(d.path());
    let mut job = Job::new(&t, Platform::load("hbm-ddr3").unwrap());
    job.capacity = vec![(0, Capacity::Bytes(4 * PAGE))];
    let e = simulate(&mut job, &PolicySpec::parse(&format!("guided:guidance={g}")).unwrap()).unwrap_err().to_string();
    assert!(e.contains("guided:layout") && e.contains("layout=trace") && !e.contains('\n'), "{e}");
    // the traced layout takes it
    run(&t, 4, &format!("guided:guidance={g},layout=trace"));
}
