//! Policies keep their contracts: `damon-tiering`, DAMOS-based memory tiering (Linux 6.11+
//! `migrate_hot` / `migrate_cold`, quotas and quota goals as samples/damon/mtier.c sets them
//! up), over the DAMON region-sampling model (`tracking::damon`, whose convergence, merge,
//! split and determinism tests are unit tests in that file).
//!
//! All runs use `dram-dcpmm` with short intervals (tens of µs instead of 5 ms / 100 ms) so
//! that tiny traces span many aggregation intervals, `apply_aggrs=1` (DAMOS's own default:
//! the schemes run at every aggregation; mtier.c's 1 s, the policy's default, is checked on
//! its own below), and `quota_reset` at half the aggregation interval so that every
//! application of the schemes opens a new quota window.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::SimResult;
use tierkit_core::units::Capacity;

/// DRAM holds half of the footprint.
const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];
/// Short intervals for tiny traces; schemes at every aggregation, each opening a quota window.
const FAST: &str = "sample=20us,aggr=200us,apply_aggrs=1,quota_reset=100us,check_ns=50";

/// `cold` pages touched once, then `rounds` passes over the `hot` pages.
fn trace(cold: std::ops::Range<u64>, hot: std::ops::Range<u64>, rounds: usize) -> Vec<u64> {
    let mut t: Vec<u64> = cold.collect();
    for _ in 0..rounds {
        t.extend(hot.clone());
    }
    t
}

/// Rows of the policy's time series as numbers, with the column index of `name`.
fn series(r: &SimResult) -> (Vec<Vec<f64>>, impl Fn(&str) -> usize) {
    let ts = &r.stats.policy["timeseries"];
    let cols: Vec<String> = ts["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    let rows = ts["rows"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()).collect();
    (rows, move |name: &str| cols.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}")))
}

fn scheme<'a>(r: &'a SimResult, which: &str) -> &'a serde_json::Value {
    &r.stats.policy["schemes"][which]["stats"]
}

/// usage.rst (DAMOS actions migrate_hot / migrate_cold) and mtier.c's two schemes, fixed
/// quotas (no goals, no size limit). 16 pages, DRAM 8: first touch puts the cold pages 0-7
/// in DRAM, the hot pages 8-15 land in DCPMM and are then accessed in every sampling
/// interval. Every region over 8-15 counts nr_accesses > 0 (promotion pattern), every region
/// over 0-7 counts 0 (demotion pattern); the young filter lets each hot page up and keeps a
/// cold page down only once its first-touch bit is cleared. The end state: 8 pages moved
/// each way and nothing else (no page moves twice), and all later accesses hit DRAM.
#[test]
fn promotes_the_hot_slow_region_and_demotes_the_cold_fast_region() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..8, 8..16, 3000), None);
    let r = run(&input, "dram-dcpmm", &HALF, &format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,cold_quota=0"));
    assert_eq!((r.pages, r.fast_capacity_pages), (16, Some(8)));
    let m = &r.stats.migration;
    assert_eq!(m.moves, vec![vec![0, 8], vec![8, 0]], "8 demoted, 8 promoted, none twice");
    assert_eq!(m.by_hardware, 0);
    assert_eq!((scheme(&r, "promote")["moved_pages"].as_u64(), scheme(&r, "demote")["moved_pages"].as_u64()), (Some(8), Some(8)));
    // after the moves every access hits DRAM: at most the first ~2 aggregation intervals miss
    assert!(r.fast_hit_ratio > 0.9, "{}", r.fast_hit_ratio);
    // each sampling interval charged one check per region; each batch one entry
    let c = &m.charges;
    let d = &r.stats.policy["damon"];
    assert_eq!(c["DAMON access sampling"].count, d["samples"].as_u64().unwrap());
    assert_eq!(c["DAMON access sampling"].ns, d["checks"].as_u64().unwrap() as f64 * 50.0);
    let act = &r.stats.policy["activity"];
    assert_eq!(c["DAMOS migration entry"].count, act["batches"].as_u64().unwrap());
    assert_eq!(c["DAMOS migration entry"].ns, c["DAMOS migration entry"].count as f64 * 5000.0);
    assert_eq!(c["DAMOS TLB shootdown"].count, act["tlb_shootdowns"].as_u64().unwrap());
    assert!(act["batches"].as_u64().unwrap() >= 1);

    // the hot pages 0-3 already in DRAM, the DCPMM pages 8-15 never accessed after first
    // touch: no slow region is hot, so nothing is promoted; DRAM's cold pages 4-7 go down
    let input = write_pages(dir.path(), &trace(0..16, 0..4, 6000), None);
    let q = run(&input, "dram-dcpmm", &HALF, &format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,cold_quota=0"));
    assert_eq!(q.stats.migration.moves, vec![vec![0, 4], vec![0, 0]]);
}

/// design.rst "Quotas" / core.c damos_adjust_quota: a scheme acts on at most its quota of
/// bytes per reset interval. 128 pages, DRAM 64: cold pages 0-63 fill DRAM, hot pages
/// 64-127 sit in DCPMM. Demotion is unlimited; promotion's quota is 8 KiB = 2 pages per
/// window (one window per application here). So every application promotes at most 2 pages
/// and charges at most 8192 bytes, and the 64 hot pages need at least 32 applications.
/// Without the quota, the first application that finds free frames promotes them all.
#[test]
fn quota_caps_bytes_moved_per_reset_interval() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..64, 64..128, 1500), None);
    let spec = format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,cold_quota=0");
    let r = run(&input, "dram-dcpmm", &HALF, &format!("{spec},hot_quota=8K"));
    let (rows, col) = series(&r);
    let (charged, promoted) = (col("hot_charged_bytes"), col("promoted"));
    assert!(rows.len() > 40, "{} applications", rows.len());
    for row in &rows {
        assert!(row[charged] <= 8192.0 && row[promoted] <= 2.0, "{row:?}");
    }
    let p = scheme(&r, "promote");
    let windows = p["windows"].as_u64().unwrap();
    assert!(p["moved_pages"].as_u64().unwrap() <= 2 * windows);
    assert!(p["charged_bytes"].as_u64().unwrap() <= 8192 * windows);
    assert_eq!(p["last_esz_bytes"].as_u64(), Some(8192), "no goal: the size quota is the effective quota");
    let promotions = r.stats.migration.promotions;
    assert!(promotions >= 40, "the quota slows promotion down but does not stop it: {promotions}");
    let first_two = rows.iter().position(|row| row[promoted] > 0.0).unwrap();
    assert!(rows[first_two..].iter().take(10).map(|row| row[promoted]).sum::<f64>() <= 20.0);

    let u = run(&input, "dram-dcpmm", &HALF, &format!("{spec},hot_quota=0"));
    let (urows, _) = series(&u);
    let most = urows.iter().map(|row| row[promoted]).fold(0.0, f64::max);
    assert!(most > 2.0, "unlimited: more than 2 pages in one application ({most})");
    assert_eq!(u.stats.migration.promotions, 64);
}

/// core.c damos_set_effective_quota / damon_feed_loop_next_input with mtier.c's promotion
/// goal metric node_mem_used_bp. 128 pages, DRAM 64: cold pages 0-31 and hot pages 32-63
/// fill DRAM, hot pages 64-127 sit in DCPMM. Demotion (unlimited, no goal) moves the 32
/// cold pages out, so DRAM is at least 50 % used from then on (hot pages are never
/// demoted).
/// * goal 50 % (5000 bp): the score used/goal is ≥ 10000 at every reset, so the feedback
///   input never rises above its floor of 10000 (= 1 byte of quota): nothing is promoted.
/// * goal 99.7 % (mtier.c): at 50 % used the score is 5000·10000/9970 = 5015, the input
///   grows ×1.4985 per window from 1 byte and passes one page (4096 bytes) after 21
///   windows (1.4985^20 = 3249 < 4096 ≤ 4869 = 1.4985^21); promotion then fills DRAM.
/// * no goal: the 200 MiB size quota; promotion starts at the first application that finds
///   free frames.
#[test]
fn goal_stops_promotion_when_dram_usage_is_at_its_goal() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..32, 32..128, 1000), None);
    let spec = format!("damon-tiering:{FAST},cold_goal_free_bp=0,cold_quota=0");

    let at_goal = run(&input, "dram-dcpmm", &HALF, &format!("{spec},hot_goal_used_bp=5000"));
    assert!(at_goal.stats.migration.demotions >= 32);
    assert_eq!(at_goal.stats.migration.promotions, 0);
    let p = scheme(&at_goal, "promote");
    assert_eq!(p["last_esz_bytes"].as_u64(), Some(1), "the feedback input stays at its floor");
    assert!(p["candidate_regions"].as_u64().unwrap() > 0, "there were hot slow regions to promote");
    let (rows, col) = series(&at_goal);
    assert!(rows.iter().all(|row| row[col("fast_used_pages")] >= 32.0));

    let under = run(&input, "dram-dcpmm", &HALF, &format!("{spec},hot_goal_used_bp=9970"));
    // sampling is noisy: a hot page sampled only in intervals stretched by a migration stall
    // can look cold once, go down and come back up; every move down is then matched by one up
    let m = &under.stats.migration;
    assert!(m.demotions >= 32 && m.promotions >= 32, "{} {}", m.demotions, m.promotions);
    assert_eq!(m.promotions, m.demotions, "DRAM ends as full as it started");
    let (rows, col) = series(&under);
    let first = rows.iter().position(|row| row[col("promoted")] > 0.0).unwrap();
    // the first promotion needs an effective quota of a page: 21 windows of growth at most
    // ×1.5 from 1 byte (more if DRAM was fuller while demotion was still under way)
    assert!(first >= 20, "first promotion at application {first}");
    assert!(rows[first][col("hot_esz_bytes")] >= 4096.0);
    assert_eq!(rows.last().unwrap()[col("fast_used_pages")], 64.0);

    let free = run(&input, "dram-dcpmm", &HALF, &format!("{spec},hot_goal_used_bp=0"));
    // (a cold page can stay in DRAM for good when it shares a 2-page region with a hot one:
    // DAMON never splits a region of two minimum-size regions; its frame is then not free)
    assert!(free.stats.migration.promotions >= 28, "{}", free.stats.migration.promotions);
    let (rows, col) = series(&free);
    let first_free = rows.iter().position(|row| row[col("promoted")] > 0.0).unwrap();
    assert!(first_free < 3 && first_free < first, "{first_free}");
}

/// Same inputs and seed, same result bit for bit; defaults run.
#[test]
fn deterministic_and_runs_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..64, 64..128, 400), None);
    let a = run(&input, "dram-cxl", &HALF, &format!("damon-tiering:{FAST},seed=3"));
    let b = run(&input, "dram-cxl", &HALF, &format!("damon-tiering:{FAST},seed=3"));
    assert_eq!(a.runtime_ns.to_bits(), b.runtime_ns.to_bits());
    assert_eq!(a.stats.policy, b.stats.policy);
    let d = run(&input, "dram-cxl", &HALF, "damon-tiering");
    assert_eq!(d.accesses, 64 + 64 * 400);
}

/// samples/damon/mtier.c creates both schemes with an apply interval of 1 s (10 of its 100 ms
/// aggregation intervals): the default `apply_aggrs` is 10, so the schemes run at every 10th
/// aggregation. The default used to be 1 (every 100 ms) while the docs cited mtier.c.
#[test]
fn schemes_apply_every_second_by_default_as_mtier_does() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..64, 64..128, 400), None);
    let spec = |extra: &str| format!("damon-tiering:sample=20us,aggr=200us,quota_reset=100us,check_ns=50{extra}");
    let r = run(&input, "dram-dcpmm", &HALF, &spec(""));
    assert_eq!(r.stats.policy["apply_aggrs"], 10, "{}", r.stats.policy);
    let aggregations = r.stats.policy["aggregations"].as_u64().unwrap();
    assert!(aggregations >= 20, "{aggregations}");
    assert_eq!(r.stats.policy["activity"]["applies"].as_u64().unwrap(), aggregations / 10, "{}", r.stats.policy);
    // with 100 ms aggregations (the default aggr), 10 of them are mtier.c's 1 s
    let info = tierkit_core::policy::lookup("damon-tiering").unwrap();
    let aggr = info.params.iter().find(|p| p.name == "aggr").unwrap();
    assert_eq!(aggr.default, "100ms");
    let every = run(&input, "dram-dcpmm", &HALF, &spec(",apply_aggrs=1"));
    assert_eq!(every.stats.policy["activity"]["applies"].as_u64().unwrap(), every.stats.policy["aggregations"].as_u64().unwrap());
}

/// The young filter of `migrate_hot` as the kernel runs it. mtier.c gives migrate_hot a
/// `young` filter that *allows* (only pages referenced since their last check are promoted);
/// allow filters came with Linux 6.14, and before that a filter can only reject, so `tierkit
/// run --policy damon-tiering` on 6.12 sets the young filter on migrate_cold alone (its report's
/// `damon_tiering[].effective.filters`). paddr.c `damon_pa_migrate` then isolates every LRU
/// page of a region that matched the access pattern. `hot_young_filter=false` models that.
/// 128 pages, DRAM 64: pages 0-63 (DRAM) are touched once, pages 64-127 (DCPMM) once and then
/// the even ones in every round (32 hot pages), the odd ones never again. With at most 8
/// regions, every region over the slow pages holds hot and cold pages alternately, so it
/// counts accesses and matches `nr_accesses >= 1`. Demotion (unlimited, no goal) frees DRAM.
/// * hot filter (mtier on 6.14+): a cold odd page's bit, set at first touch, is cleared by
///   DAMON's sampling before the first application (100 samples of regions of about 16
///   pages) or by its first filter check, and never set again: only the 32 hot pages are
///   promoted, each once (a hot page in DRAM is young and never demoted).
/// * no hot filter (6.12): the odd pages of the matching regions come up with the even ones,
///   so more than 32 pages are promoted, and no page is left by the filter.
#[test]
fn migrate_hot_filters_young_pages_only_where_the_kernel_has_allow_filters() {
    let dir = tempfile::tempdir().unwrap();
    let mut t: Vec<u64> = (0..128).collect();
    for _ in 0..1500 {
        t.extend((64..128).step_by(2));
    }
    let input = write_pages(dir.path(), &t, None);
    let spec = |hot_filter: bool| {
        format!(
            "damon-tiering:sample=20us,aggr=200us,apply_aggrs=10,quota_reset=100us,check_ns=50,min_nr_regions=4,max_nr_regions=8,\
             hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,cold_quota=0,hot_young_filter={hot_filter}"
        )
    };
    let on = run(&input, "dram-dcpmm", &HALF, &spec(true));
    let p = scheme(&on, "promote");
    assert_eq!(on.stats.policy["schemes"]["promote"]["young_filter"], true);
    assert!(p["filtered_young"].as_u64().unwrap() > 0, "cold slow pages were left by the filter: {p}");
    assert!(on.stats.migration.promotions > 0 && on.stats.migration.promotions <= 32, "only the hot pages: {}", on.stats.migration.promotions);

    let off = run(&input, "dram-dcpmm", &HALF, &spec(false));
    let p = scheme(&off, "promote");
    assert_eq!(off.stats.policy["schemes"]["promote"]["young_filter"], false);
    assert_eq!(off.stats.policy["schemes"]["demote"]["young_filter"], true, "migrate_cold keeps its filter");
    assert_eq!(p["filtered_young"].as_u64(), Some(0));
    assert!(off.stats.migration.promotions > 32, "cold pages of hot regions come up too: {}", off.stats.migration.promotions);
}

/// core.c damos_adjust_quota opens a new charge window when the time since the last one
/// reached the reset interval; kdamond counts the apply interval in sampling intervals
/// (`next_apply_sis`), each lasting at least the sampling interval (it sleeps that long), so
/// with mtier.c's apply interval equal to its reset interval (1 s both) every application of
/// a scheme opens a window with a fresh quota. The model's sampling boundaries are at whole
/// multiples of `sample`, but its hook runs at the first access past the boundary, a little
/// late by a varying amount: timed by that, two applications exactly one apply interval apart
/// could be a few ns short of the reset interval, and the window (with what was charged in it)
/// then carried over (before the fix: 8 windows in 11 applications). Here apply every 10
/// aggregations of 200 µs = 2 ms, reset 2 ms, 3000 passes over 64 pages: 11 applications,
/// each must open a window.
#[test]
fn every_application_opens_a_quota_window_when_apply_and_reset_intervals_are_equal() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..64, 64..128, 3000), None);
    let r = run(
        &input,
        "dram-dcpmm",
        &HALF,
        "damon-tiering:sample=20us,aggr=200us,apply_aggrs=10,quota_reset=2ms,check_ns=50,hot_goal_used_bp=0,cold_goal_free_bp=0",
    );
    let applies = r.stats.policy["activity"]["applies"].as_u64().unwrap();
    assert!(applies >= 5, "{applies}");
    for which in ["promote", "demote"] {
        let s = scheme(&r, which);
        assert_eq!(s["applies"].as_u64(), Some(applies));
        assert_eq!(s["windows"].as_u64(), Some(applies), "{which}: {s}");
    }
}

/// mm/page_alloc.c and mm/damon/paddr.c: a first touch takes a node-0 frame only above the
/// zone's low watermark (else the next node, kswapd not woken), DAMOS's `GFP_NOWAIT`
/// promotion only above its min watermark. 16 pages, DRAM 8, low 3, min 1: first touch
/// fills DRAM while more than 3 frames are free, so the cold pages 0-4 (free 8 -> 3); the
/// hot pages 8-15 are in DCPMM. Promotion alone then finds 2 frames above min (3 -> 1); with
/// demotion too, the 5 cold DRAM pages go down and 7 hot pages come up (8 free -> 1).
#[test]
fn first_touch_stops_at_the_low_watermark_and_promotion_at_the_min_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..8, 8..16, 3000), None);
    let base = format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,cold_quota=0,wmark_low_pages=3,wmark_min_pages=1");
    let r = run(&input, "dram-dcpmm", &HALF, &format!("{base},schemes=promote"));
    assert_eq!(r.stats.migration.moves, vec![vec![0, 0], vec![2, 0]]);
    assert_eq!(scheme(&r, "promote")["no_room"].as_u64().map(|n| n > 0), Some(true));
    let r = run(&input, "dram-dcpmm", &HALF, &base);
    assert_eq!(r.stats.migration.moves, vec![vec![0, 5], vec![7, 0]]);
    assert_eq!((r.stats.policy["wmark_low_pages"].as_u64(), r.stats.policy["wmark_min_pages"].as_u64()), (Some(3), Some(1)));
    // the floors are off by default: every frame (the first test's 8 and 8)
    let r = run(&input, "dram-dcpmm", &HALF, &format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,cold_quota=0"));
    assert_eq!(r.stats.migration.moves, vec![vec![0, 8], vec![8, 0]]);
    // min above low is refused, naming the key
    let spec = tierkit_core::policy::PolicySpec::parse("damon-tiering:wmark_low_pages=2,wmark_min_pages=3").unwrap();
    let e = tierkit_core::policy::build(&spec).err().map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| e.contains("wmark_min_pages")), "{e:?}");
}

/// migrate_cold monitors node 0's physical range, so other programs' cold pages on node 0
/// are demoted too, first (they are older than any of the program's), and count in the
/// scheme's sz_applied. 16 pages, DRAM 8 of which 3 are another program's: first touch puts
/// the cold pages 0-4 in DRAM (5 free); migrate_cold then demotes the 3 others and the 5
/// cold pages (8 moved, 3 of them others'), and all 8 hot pages come up.
#[test]
fn other_programs_pages_on_the_fast_node_are_demoted_first_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace(0..8, 8..16, 3000), None);
    let base = format!("damon-tiering:{FAST},hot_goal_used_bp=0,cold_goal_free_bp=0,hot_quota=0,fast_other_pages=3");
    let r = run(&input, "dram-dcpmm", &HALF, &format!("{base},cold_quota=0"));
    assert_eq!(r.stats.migration.moves, vec![vec![0, 5], vec![8, 0]]);
    let d = scheme(&r, "demote");
    assert_eq!((d["moved_pages"].as_u64(), d["moved_other_pages"].as_u64()), (Some(8), Some(3)));
    assert_eq!(r.stats.policy["fast_other_pages_left"].as_u64(), Some(0));
    // demotion alone with a quota of one page per window: the others go first, so the first
    // three windows that demote leave the program's 5 DRAM pages in place, the next ones not
    let r = run(&input, "dram-dcpmm", &HALF, &format!("{base},cold_quota=4096,schemes=demote"));
    let (rows, col) = series(&r);
    assert_eq!(scheme(&r, "demote")["moved_other_pages"].as_u64(), Some(3));
    assert_eq!(r.stats.migration.moves[0][1], 5);
    let used: Vec<f64> = rows.iter().filter(|row| row[col("demoted")] > 0.0).map(|row| row[col("fast_used_pages")]).collect();
    assert_eq!(used, vec![5.0, 5.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
    // more other pages than the fast tier holds: one error naming the key
    let spec = tierkit_core::policy::PolicySpec::parse("damon-tiering:fast_other_pages=9").unwrap();
    let mut job = tierkit_core::engine::Job::new(&input, tierkit_core::platform::Platform::load("dram-dcpmm").unwrap());
    job.capacity = HALF.to_vec();
    let e = tierkit_core::engine::simulate(&mut job, &spec).err().map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| e.contains("fast_other_pages") && e.contains("do not fit")), "{e:?}");
}
