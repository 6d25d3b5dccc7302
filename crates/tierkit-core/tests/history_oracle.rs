//! Policies keep their contracts, and models match hand-computed figures: the `history` and
//! `oracle` page schedulers of seed 003 §3.1 ("Page Scheduler"), in their default rules and
//! in `compat=cori-sim`, which must reproduce GTkernel/cori-sim (the simulator of 003 §3.1)
//! bit for bit under the simple timing model.

mod common;
use common::{run, write_pages as write_trace};
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::{self, PolicySpec};
use tierkit_core::trace::TraceInput;
use tierkit_core::units::Capacity;

fn run_err(input: &TraceInput, platform: &str, caps: &[(usize, Capacity)], spec: &str) -> String {
    let mut job = Job::new(input, Platform::load(platform).unwrap());
    job.capacity = caps.to_vec();
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).err().unwrap_or_else(|| panic!("{spec} should fail")).to_string()
}

fn policy_stat(r: &SimResult, key: &str) -> u64 {
    r.stats.policy["scheduler"][key].as_u64().unwrap_or_else(|| panic!("no scheduler.{key} in {}", r.stats.policy))
}

const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];

// The hand-worked trace: 8 pages, 30 accesses, period 10 (so 30 / 10 + 1 = 4 periods in
// cori-sim's count, although only 3 hold accesses), fast ratio 0.5 (l1 = 4 pages).
//   P0 (k 0-9):   0 1 2 3 4 5 6 7 1 3
//   P1 (k 10-19): 6 6 6 5 4 5 4 3 1 7
//   P2 (k 20-29): 6 6 6 0 0 0 2 1 7 5
// Pages get ids in order of first appearance, which here are the labels.
// Initial placement (cori-sim, before any access): even ids while the fast tier has room:
// fast {0,2,4,6}, slow {1,3,5,7}.
const TRACE: [u64; 30] = [
    0, 1, 2, 3, 4, 5, 6, 7, 1, 3, //
    6, 6, 6, 5, 4, 5, 4, 3, 1, 7, //
    6, 6, 6, 0, 0, 0, 2, 1, 7, 5,
];

/// 003 §3.1, reproduced as GTkernel/cori-sim computes it (history, period 10, ratio 0.5).
///
/// P0, fast {0,2,4,6}: hits at k0 (0), k2 (2), k4 (4), k6 (6) = 4.
/// Boundary k=10, counts of P0: 1:2, 3:2, the others 1. Ranked by count, ties by id
///   descending: 3, 1, 7, 6, 5, 4, 2, 0; the first l1=4 are 3, 1, 7, 6; of those in the slow
///   tier, in rank order: 3, 1, 7. Fast pages in LRU order (last access + 1): 0 (1), 2 (3),
///   4 (5), 6 (7). Swaps (3,0) (1,2) (7,4): fast {1,3,6,7}. 6 migrations.
/// P1, fast {1,3,6,7}: 6 6 6 hit, 5 4 5 4 miss, 3 1 7 hit = 6.
/// Boundary k=20, counts of P1: 6:3, 5:2, 4:2, 3:1, 1:1, 7:1. Ranked: 6, 5, 4, 7, 3, 1;
///   first 4: 6, 5, 4, 7; slow: 5, 4. Fast LRU: 6 (13), 3 (18), 1 (19), 7 (20). Victims 6 and
///   3: cori-sim evicts page 6, which it has just ranked hottest. Swaps (5,6) (4,3): fast
///   {1,4,5,7}. 4 migrations, 10 in all.
/// P2, fast {1,4,5,7}: 6 6 6 0 0 0 2 miss, 1 7 5 hit = 3.
/// Hits 4 + 6 + 3 = 13 of 30 (cori-sim prints 43.33 %). Migrations 10.
/// Runtime (ns): fast 13·50 = 650; slow 17·150 = 2550; periods (30/10 + 1)·3000 = 12000;
///   migrations 10·1000 = 10000; bandwidth: (30·64 + 10·4096) B / 3.7 B/ns = 11589.19 ns,
///   less than 650 + 2550 + 10000 = 13200, so no queueing. Runtime 25200.
#[test]
fn history_cori_sim_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &TRACE, None);
    let r = run(&input, "dram-pmem", &HALF, "history:period=10,compat=cori-sim");
    assert_eq!(r.pages, 8);
    assert_eq!(r.fast_capacity_pages, Some(4));
    assert_eq!(r.fast_hit_ratio, 13.0 / 30.0);
    assert_eq!(r.migrations, 10);
    assert_eq!(r.runtime_ns, 25200.0);
    assert_eq!(r.stats.timing["periods"], 4);
    assert_eq!(r.stats.timing["queue_ns"], 0.0);
    assert_eq!(policy_stat(&r, "swaps"), 5);
    assert_eq!(policy_stat(&r, "hot_evictions"), 1, "page 6 at k=20");
}

/// 003 §3.1, the oracle of cori-sim on the same trace (it ranks the coming period).
///
/// P0: 4 hits, as above.
/// Boundary k=10, counts of P1: 6:3, 5:2, 4:2, 7:1, 3:1, 1:1 → ranked 6, 5, 4, 7, 3, 1;
///   first 4: 6, 5, 4, 7; slow among them: 5, 7. Fast LRU: 0 (1), 2 (3), 4 (5), 6 (7).
///   Swaps (5,0) (7,2): fast {4,5,6,7}. 4 migrations.
/// P1, fast {4,5,6,7}: 6 6 6 5 4 5 4 hit, 3 1 miss, 7 hit = 8.
/// Boundary k=20, counts of P2: 6:3, 0:3, 7:1, 5:1, 2:1, 1:1 → ranked 6, 0 (equal counts:
///   higher id first), 7, 5, 2, 1; first 4: 6, 0, 7, 5; slow: 0. Fast LRU: 6 (13), 5 (16),
///   4 (17), 7 (20): the victim is 6, the hottest page of the coming period. Swap (0,6):
///   fast {0,4,5,7}. 2 migrations, 6 in all.
/// P2, fast {0,4,5,7}: 6 6 6 miss, 0 0 0 hit, 2 1 miss, 7 5 hit = 5.
/// Hits 4 + 8 + 5 = 17 of 30. Migrations 6.
/// Runtime: 17·50 = 850; 13·150 = 1950; 4·3000 = 12000; 6·1000 = 6000; bandwidth
///   (1920 + 6·4096) / 3.7 = 7161.08 < 8800, no queueing. Runtime 20800.
#[test]
fn oracle_cori_sim_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &TRACE, None);
    let r = run(&input, "dram-pmem", &HALF, "oracle:period=10,compat=cori-sim");
    assert_eq!(r.fast_hit_ratio, 17.0 / 30.0);
    assert_eq!(r.migrations, 6);
    assert_eq!(r.runtime_ns, 20800.0);
    assert_eq!(policy_stat(&r, "hot_evictions"), 1, "page 6 at k=20");
}

/// 003 §3.1 and cori-sim's bandwidth floor: a trace whose hot pair alternates every period
/// of 2 accesses, so migrations dominate and the runtime is set by the slow tier's bandwidth.
///   accesses: 0 1 | 2 3 | 1 3 | 0 2 | 1 3 | 0 2   (N = 12, P = 2, 12/2 + 1 = 7 periods)
///   4 pages, ratio 0.5 → l1 = 2; initial fast {0,2}, slow {1,3}.
/// Oracle:
///   P0 {0,2}: 0 hit, 1 miss → 1.
///   k=2, next {2:1, 3:1} → ranked 3, 2; slow: 3; LRU fast: 2 (never accessed), 0 → swap
///     (3,2), evicting 2 although it is needed next: fast {0,3}. P1: 2 miss, 3 hit → 1.
///   k=4, next {1,3} → ranked 3, 1; slow: 1; LRU: 0 (1), 3 (4) → swap (1,0): fast {1,3}.
///     P2: 2 hits.
///   k=6, next {0,2}: both slow; LRU 1 (5), 3 (6) → swaps (2,1) (0,3). P3: 2 hits.
///   k=8 and k=10 likewise: 2 swaps each, 2 hits each.
///   Hits 1+1+2+2+2+2 = 10; migrations 2+2+4+4+4 = 16.
/// History:
///   P0: 1 hit. k=2, last {0,1} → ranked 1, 0; slow: 1; LRU: 2 (0), 0 (1) → swap (1,2):
///   fast {0,1}. P1 (2 3): 0. k=4, last {2,3}: both slow; LRU 0 (1), 1 (2) → swaps (3,0)
///   (2,1): fast {2,3}. P2 (1 3): 1. k=6, last {1,3} → ranked 3, 1; slow 1; LRU 2 (4),
///   3 (6) → swap (1,2): fast {1,3}. P3 (0 2): 0. k=8: swaps → {0,2}; P4 (1 3): 0. k=10:
///   swaps → {1,3}; P5 (0 2): 0. Hits 2; migrations 2+4+2+4+4 = 16.
/// Runtime, both: bytes = 12·64 + 16·4096 = 66304, over 3.7 B/ns = 17920 ns.
///   oracle: 10·50 + 2·150 + 16·1000 = 16800 < 17920 → queue 1120;
///           runtime = 500 + 300 + 7·3000 + 16000 + 1120 = 38920.
///   history: 2·50 + 10·150 + 16000 = 17600 → queue 320; runtime = 38920.
#[test]
fn cori_sim_bandwidth_floor_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[0, 1, 2, 3, 1, 3, 0, 2, 1, 3, 0, 2], None);
    // cori-sim's sum, in its order: fast + slow + periods + migrations + queue
    let cori = |hits: f64, migr: f64| {
        let (fast, slow) = (hits * 50.0, (12.0 - hits) * 150.0);
        let allowed = (12.0 * 64.0 + migr * 4096.0) / 3.7;
        let transfer = fast + slow + migr * 1000.0;
        let queue = if transfer < allowed { allowed - transfer } else { 0.0 };
        fast + slow + 7.0 * 3000.0 + migr * 1000.0 + queue
    };
    let o = run(&input, "dram-pmem", &HALF, "oracle:period=2,compat=cori-sim");
    assert_eq!((o.fast_hit_ratio, o.migrations), (10.0 / 12.0, 16));
    assert_eq!(o.runtime_ns, cori(10.0, 16.0));
    assert!((o.runtime_ns - 38920.0).abs() < 1e-6, "{}", o.runtime_ns);
    assert!(o.stats.timing["queue_ns"].as_f64().unwrap() > 1119.0);
    let h = run(&input, "dram-pmem", &HALF, "history:period=2,compat=cori-sim");
    assert_eq!((h.fast_hit_ratio, h.migrations), (2.0 / 12.0, 16));
    assert_eq!(h.runtime_ns, cori(2.0, 16.0));
    assert!((h.runtime_ns - 38920.0).abs() < 1e-6, "{}", h.runtime_ns);
}

/// 003 §3.1 via cori-sim: ratio 1 puts every page in the fast tier; a ratio above one half
/// leaves fast frames free that cori-sim never fills (only even ids start there, and swaps
/// keep the count), and compat mode does the same.
#[test]
fn cori_sim_capacity_edges() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &TRACE, None);
    let all = run(&input, "dram-pmem", &[(0, Capacity::Fraction(1.0))], "history:period=10,compat=cori-sim");
    assert_eq!((all.fast_hit_ratio, all.migrations), (1.0, 0));
    let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.75))], "history:period=10,compat=cori-sim");
    assert_eq!(r.fast_capacity_pages, Some(6));
    assert_eq!(r.stats.platform.tiers[0].used_pages, 4, "cori-sim keeps 4 of 6 fast frames in use");
}

#[test]
fn cori_sim_compat_refuses_what_it_cannot_reproduce() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &TRACE, None);
    let e = run_err(&input, "dram-pmem", &HALF, "history:period=10ms,compat=cori-sim");
    assert!(e.contains("history:period") && e.contains("accesses"), "{e}");
    let e = run_err(&input, "dram-pmem", &HALF, "oracle:period=1K-insn,compat=cori-sim");
    assert!(e.contains("oracle:period"), "{e}");
    let e = run_err(&input, "hbm-dram-cxl", &HALF, "history:period=10,compat=cori-sim");
    assert!(e.contains("history:compat") && e.contains("two tiers"), "{e}");
    let e = run_err(&input, "dram-pmem", &HALF, "history:compat=ramulator");
    assert!(e.contains("cori-sim"), "{e}");
}

// ------------------------------------------------------------------ default rules

/// 003 §3.1: history brings the hottest pages of the last period into the fast tier.
/// 8 pages, fast tier 2 pages (0.25), period 10, placement interleaved at first touch:
/// page 0 fast, 1 slow, 2 fast, then the fast tier is full: 3-7 slow.
///   P0: 0 1 2 3 4 5 6 7 7 7 → hits 0, 2 = 2. Counts: 7:3 (log2 class 2), the rest class 1.
///     Ranked: 7; then class 1 in the fast tier first, most recent first: 2, 0; ... The
///     fast tier wants 7 and 2: 7 replaces the LRU page not wanted, 0 (swap).
///   P1: 7×5 hit, 6×5 miss → 5. Counts 7:5, 6:5 (both class 3): fast wants 7 and 6; 6
///     replaces 2 (swap).
///   P2: 6×5, 7×5 → 10 hits.
/// Hits 17 of 30, migrations 4. Runtime (simple model, not compat): latency
/// 17·50 + 13·150 = 2800, migrations 4·1000, and the two periods whose scheduling ran (at
/// accesses 10 and 20; the third period ends with the trace) 2·3000 → 12800 ns.
#[test]
fn history_promotes_last_periods_hottest_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = vec![0, 1, 2, 3, 4, 5, 6, 7, 7, 7];
    t.extend([7; 5]);
    t.extend([6; 5]);
    t.extend([6; 5]);
    t.extend([7; 5]);
    let input = write_trace(dir.path(), &t, None);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.25))], "history:period=10");
    assert_eq!(r.fast_hit_ratio, 17.0 / 30.0);
    assert_eq!(r.migrations, 4);
    assert_eq!(r.runtime_ns, 12800.0);
    assert_eq!(policy_stat(&r, "swaps"), 2);
}

/// 003 §3.1 / §3.2 (Figure 3.1): history schedulers mispredict phase changes that an oracle
/// foresees. The hot set moves to four new pages every period; history always promotes the
/// set that has just gone cold.
#[test]
fn oracle_beats_history_when_the_hot_set_moves_every_period() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Vec::new();
    for _round in 0..3 {
        for phase in 0..4u64 {
            for i in 0..40u64 {
                t.push(phase * 4 + i % 4);
            }
        }
    }
    let input = write_trace(dir.path(), &t, None);
    for platform in ["dram-pmem", "hbm-dram-cxl"] {
        let caps = [(0, Capacity::Fraction(0.25)), (1, Capacity::Fraction(0.25))];
        let caps = if platform == "dram-pmem" { &caps[..1] } else { &caps[..] };
        let h = run(&input, platform, caps, "history:period=40");
        let o = run(&input, platform, caps, "oracle:period=40");
        assert!(o.fast_hit_ratio > h.fast_hit_ratio + 0.4, "{platform}: oracle {} vs history {}", o.fast_hit_ratio, h.fast_hit_ratio);
        if platform == "dram-pmem" {
            assert!(o.runtime_ns < h.runtime_ns, "{platform}");
        }
        // from the second round on, the oracle has every page placed and ranks them all
        assert!(o.fast_hit_ratio > 0.6, "{}", o.fast_hit_ratio);
    }
}

/// Tie rules (documented in page_scheduler.rs): equal classes favour the page already in the
/// faster tier, then history prefers the more recent last access, oracle the earlier first
/// access in the coming period. 3 pages, fast tier 1 page (page 0), period 5:
///   P0: 0 1 1 2 2 | P1: 1 2 2 1 0 | P2: 1 1 1 1 1
/// history, k=5: 1 and 2 both count 2; 2 was accessed last → 2 replaces 0. P1 hits: 2 2.
///   k=10: 1 and 2 both count 2 again, 2 is already fast → no move. P2: no hits.
///   Hits 1 + 2 + 0 = 3 of 15, 2 migrations.
/// oracle, k=5: next period 1:2, 2:2; 1 comes first → 1 replaces 0. P1 hits: 1 1.
///   k=10: next period wants 1, already fast. P2: 5 hits. Hits 8 of 15, 2 migrations.
#[test]
fn ties_follow_the_documented_rules() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[0, 1, 1, 2, 2, 1, 2, 2, 1, 0, 1, 1, 1, 1, 1], None);
    let caps = [(0, Capacity::Bytes(4096))];
    for bins in ["", ",bins=0"] {
        let h = run(&input, "dram-pmem", &caps, &format!("history:period=5{bins}"));
        assert_eq!((h.fast_hit_ratio, h.migrations), (3.0 / 15.0, 2), "history{bins}");
        let o = run(&input, "dram-pmem", &caps, &format!("oracle:period=5{bins}"));
        assert_eq!((o.fast_hit_ratio, o.migrations), (8.0 / 15.0, 2), "oracle{bins}");
    }
}

/// Binning: counts in the same log2 class are equal heat, so a slow page with 7 accesses
/// does not displace a fast page with 4 (both class 3, 4-7); with bins=0 it does.
/// 2 pages, fast tier 1 page (page 0), period 11:
///   P0: 0×4, 1×7 | P1: 1×11
/// bins=16 (default), bins=2 or bins=1: no migration; hits 4 of 22.
/// bins=0: k=11 swaps 1 in; hits 4 + 11 = 15 of 22, 2 migrations.
#[test]
fn binning_treats_a_log2_class_as_equal_heat() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = vec![0; 4];
    t.extend([1; 7]);
    t.extend([1; 11]);
    let input = write_trace(dir.path(), &t, None);
    let caps = [(0, Capacity::Fraction(0.5))];
    for spec in ["history:period=11", "history:period=11,bins=2", "history:period=11,bins=1"] {
        let r = run(&input, "dram-pmem", &caps, spec);
        assert_eq!((r.fast_hit_ratio, r.migrations), (4.0 / 22.0, 0), "{spec}");
    }
    let r = run(&input, "dram-pmem", &caps, "history:period=11,bins=0");
    assert_eq!((r.fast_hit_ratio, r.migrations), (15.0 / 22.0, 2));
}

/// N tiers, tier by tier (tierkit's generalization of 003 §3.1). hbm-dram-cxl with 2 + 2
/// pages in the two upper tiers; interleaved first touch: tier 0 {0,3}, tier 1 {1,4},
/// tier 2 {2,5,6,7}. Period 16:
///   P0: 0 1 2 3 4 5 6 7, 7 7 7, 6 6 6, 5 5 → counts 7:4, 6:4 (class 3), 5:3 (class 2),
///     the rest 1. Ranked: 6 (more recent), 7, 5, then class 1 by tier and recency: 3, 0,
///     4, 1, 2. Tier 0 wants 6, 7; tier 1 wants 5, 3.
///     Tier 0: 6 swaps with 0 (LRU), 7 swaps with 3 (wanted only in tier 1; tier 1 is full,
///     so 3 goes to 7's place in tier 2). Tier 1: 5 swaps with 1, 3 swaps with 4.
///   P1: 6 7 ×4 each (tier 0), 5 ×4 and 3 ×4 (tier 1).
/// Served: tier 0: 2 (P0: 0, 3) + 8 = 10; tier 1: 2 (1, 4) + 8 = 10; tier 2: 12.
/// 4 swaps = 8 migrations.
#[test]
fn three_tiers_cascade_hand_computed() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = vec![0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 6, 6, 6, 5, 5];
    for _ in 0..4 {
        t.extend([6, 7]);
    }
    t.extend([5; 4]);
    t.extend([3; 4]);
    let input = write_trace(dir.path(), &t, None);
    let caps = [(0, Capacity::Bytes(2 * 4096)), (1, Capacity::Bytes(2 * 4096))];
    let r = run(&input, "hbm-dram-cxl", &caps, "history:period=16");
    let served: Vec<u64> = r.stats.platform.tiers.iter().map(|t| t.counters.reads).collect();
    assert_eq!(served, [10, 10, 12]);
    assert_eq!(r.migrations, 8);
    assert_eq!(policy_stat(&r, "swaps"), 4);
    let used: Vec<u64> = r.stats.platform.tiers.iter().map(|t| t.used_pages).collect();
    assert_eq!(used, [2, 2, 4]);
}

/// A deterministic, skewed trace with phase changes and writes.
fn mixed_trace(n: usize, pages: u64, seed: u64) -> (Vec<u64>, Vec<bool>) {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut t = Vec::with_capacity(n);
    let mut w = Vec::with_capacity(n);
    for i in 0..n {
        let phase = (i / 700) as u64;
        let r = next();
        let page = if r % 4 != 0 { (phase * 13 + r % 17) % pages } else { (r >> 8) % pages };
        t.push(page);
        w.push(next() % 3 == 0);
    }
    (t, w)
}

/// Contract: no tier is ever over capacity (checked at every period with `paranoid`, and at
/// the end), on two and three tiers, for every ratio and binning.
#[test]
fn capacities_hold_on_two_and_three_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let (t, w) = mixed_trace(6000, 300, 7);
    let input = write_trace(dir.path(), &t, Some(&w));
    for platform in ["dram-pmem", "hbm-dram-cxl"] {
        for ratio in [0.05, 0.2, 0.5, 0.9] {
            let mut caps = vec![(0, Capacity::Fraction(ratio))];
            if platform == "hbm-dram-cxl" {
                caps.push((1, Capacity::Fraction(0.3)));
            }
            for spec in ["history:period=100", "oracle:period=250,bins=0", "history:period=37,bins=1", "oracle:period=1000,bins=4"] {
                let r = run(&input, platform, &caps, spec);
                assert_eq!(r.accesses, 6000);
                for tier in &r.stats.platform.tiers {
                    if let Some(cap) = tier.capacity_pages {
                        assert!(tier.used_pages <= cap, "{platform} {ratio} {spec}: {} holds {} > {cap}", tier.name, tier.used_pages);
                    }
                }
                assert_eq!(r.stats.migration.migrated_bytes, r.migrations * 4096);
            }
            if platform == "dram-pmem" {
                for spec in ["history:period=100,compat=cori-sim", "oracle:period=100,compat=cori-sim"] {
                    let r = run(&input, platform, &caps, spec);
                    assert_eq!(r.migrations % 2, 0, "{spec}: swaps only");
                }
            }
        }
    }
}

/// Same inputs, same results, bit for bit.
#[test]
fn runs_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let (t, w) = mixed_trace(3000, 200, 11);
    let input = write_trace(dir.path(), &t, Some(&w));
    for spec in ["history:period=50", "oracle:period=50", "oracle:period=50,compat=cori-sim"] {
        let a = run(&input, "dram-pmem", &HALF, spec);
        let b = run(&input, "dram-pmem", &HALF, spec);
        assert_eq!((a.runtime_ns.to_bits(), a.migrations, a.fast_hit_ratio.to_bits()), (b.runtime_ns.to_bits(), b.migrations, b.fast_hit_ratio.to_bits()));
    }
}

/// `tierkit policies` is generated from the declarations: every parameter has a type, unit,
/// default and source, and the oracle says it knows the future.
#[test]
fn declarations_document_the_parameters() {
    for name in ["history", "oracle"] {
        let info = policy::lookup(name).unwrap();
        let names: Vec<_> = info.params.iter().map(|p| p.name).collect();
        assert_eq!(names, ["period", "bins", "compat"]);
        assert!(info.params.iter().all(|p| !p.source.is_empty() && !p.default.is_empty()));
        assert!(info.source.contains("003 §3.1"));
    }
    let o = policy::lookup("oracle").unwrap();
    assert!(o.future_knowledge && o.summary.contains("FUTURE"));
    assert!(!policy::lookup("history").unwrap().future_knowledge);
}
