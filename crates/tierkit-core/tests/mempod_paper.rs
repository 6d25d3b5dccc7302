//! `mempod` against its paper: Prodromou, Meswani, Jayasena, Loh, Tullsen, "MemPod: A
//! Clustered Architecture for Efficient and Scalable Migration in Flat Address Space
//! Multi-level Memories", HPCA 2017 (section numbers of that paper), and the activity floor
//! tierkit adds to it (after Misra and Gries 1982; `docs/policies.md`, MemPod).
//!
//! The paper gives MEA as a listing (Algorithm 1) and a description of its three operations
//! (§III), not as a worked stream in a figure (its Figures 1-3 plot accuracy), so the MEA
//! example below is a stream worked by hand through Algorithm 1.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::SimResult;
use tierkit_core::policy::mea::MisraGries;
use tierkit_core::policy::mempod::{above_floor, Floor};
use tierkit_core::units::Capacity;

const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];

fn ts_rows(r: &SimResult) -> Vec<Vec<f64>> {
    let ts = &r.stats.policy["timeseries"];
    assert_eq!(ts["columns"], serde_json::json!(["epoch", "time_ms", "migrations", "promoted", "tracked", "accesses", "fast_hit_ratio"]));
    ts["rows"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()).collect()
}

fn stat(r: &SimResult, k: &str) -> u64 {
    r.stats.policy["mempod"][k].as_u64().unwrap_or_else(|| panic!("no {k}: {}", r.stats.policy["mempod"]))
}

/// MemPod §III, Algorithm 1, with K = 3 counters over the stream 7 3 7 5 9 7 3 3 (N = 8),
/// step by step; each element does one of §III's operations: (a) a tracked page's counter
/// goes up by one, (b) an untracked page takes a free counter at 1, (c) an untracked page
/// that finds every counter taken is dropped and every counter loses one, those at 0 freed.
///
///   7 (b) {7:1}   3 (b) {7:1 3:1}   7 (a) {7:2 3:1}   5 (b) {7:2 3:1 5:1}
///   9 (c) {7:1}   7 (a) {7:2}       3 (b) {7:2 3:1}   3 (a) {7:2 3:2}
///
/// One decrement step (d = 1). 7 and 3 occur 3 times each, more than N / (K + 1) = 2, and
/// are tracked, as §III's guarantee says; each counter is 1 short of its true count (≤ d).
#[test]
fn mea_follows_algorithm_1_step_by_step() {
    let stream = [7u32, 3, 7, 5, 9, 7, 3, 3];
    let after: [&[(u32, u32)]; 8] =
        [&[(7, 1)], &[(3, 1), (7, 1)], &[(3, 1), (7, 2)], &[(3, 1), (5, 1), (7, 2)], &[(7, 1)], &[(7, 2)], &[(3, 1), (7, 2)], &[(3, 2), (7, 2)]];
    let mut m = MisraGries::new(3);
    for (i, (&x, want)) in stream.iter().zip(after).enumerate() {
        m.record(x);
        let mut got: Vec<(u32, u32)> = m.entries().collect();
        got.sort_unstable();
        assert_eq!(got, want, "after element {i} ({x})");
    }
    assert_eq!((m.seen(), m.decrements(), m.len(), m.capacity()), (8, 1, 2, 3));
    // the true counts lie between the counter and the counter plus the decrement steps
    for (x, truth) in [(7, 3), (3, 3)] {
        let c = m.count(x).unwrap() as u64;
        assert!(c <= truth && truth <= c + m.decrements());
    }
    // K = 1 is the majority vote (§III: "has majority")
    let mut one = MisraGries::new(1);
    for x in [4u32, 1, 4, 2, 4, 4, 3] {
        one.record(x);
    }
    assert_eq!(one.entries().collect::<Vec<_>>(), vec![(4, 1)]);
}

/// The activity floor, by hand: `c` the counter, `d` the decrement steps, `n` the pod's
/// accesses in the epoch, `k` the counters.
#[test]
fn the_floor_by_hand() {
    // counted once: never, whatever the rule but the paper's (min_count 1, no floor)
    for floor in [Floor::Possible, Floor::Frequent, Floor::None] {
        assert!(!above_floor(floor, 2, 1, 0, 10, 64));
    }
    assert!(above_floor(Floor::None, 1, 1, 0, 10, 64));
    // a quiet epoch (n = 40, k = 64, no decrement): a page counted twice moves
    assert!(above_floor(Floor::Possible, 2, 2, 0, 40, 64) && above_floor(Floor::Frequent, 2, 2, 0, 40, 64));
    // a busy one: n = 1300, k = 64, n / (k + 1) = 20; d = 15 decrement steps
    assert!(!above_floor(Floor::Possible, 2, 5, 15, 1300, 64), "5 + 15 = 20: not above 1300/65 = 20");
    assert!(above_floor(Floor::Possible, 2, 6, 15, 1300, 64));
    assert!(!above_floor(Floor::Frequent, 2, 20, 15, 1300, 64) && above_floor(Floor::Frequent, 2, 21, 15, 1300, 64));
    // k = 1, the majority vote: 0 2 4 6 6 6 6 6 6 6 4 0 leaves 6 at 4 after d = 4 steps;
    // 6 made 7 of 12, a majority, which 4 + 4 > 12 / 2 allows and 4 > 12 / 2 does not prove
    let mut m = MisraGries::new(1);
    for x in [0u32, 2, 4, 6, 6, 6, 6, 6, 6, 6, 4, 0] {
        m.record(x);
    }
    assert_eq!((m.count(6), m.decrements(), m.seen()), (Some(4), 4, 12));
    assert!(above_floor(Floor::Possible, 2, 4, 4, 12, 1));
    assert!(!above_floor(Floor::Frequent, 2, 4, 4, 12, 1));
}

/// An epoch in which every page is touched once moves nothing. 128 pages, one pod, the fast
/// tier half of them; first-touch puts 0-63 in it. Epochs of 64 accesses: epoch 0 touches
/// 0-63 once each, epoch 1 touches 64-127 once each (64 counters: all tracked, at 1), then
/// 0-3 once more (a partial epoch, never closed). MemPod's own rule (§V-B, `min_count=1,
/// floor=none`) swaps all 64 slow pages in at the end of epoch 1; tierkit's floor none.
///
/// The same with few accesses: 124 pages, 64 fast frames, epochs of 10 accesses touching
/// 0-123 once each in order: the paper's rule moves every slow page touched once at every
/// epoch's end (10 an epoch once past the fast pages); the floor, none.
#[test]
fn an_epoch_of_single_touches_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..128).collect();
    trace.extend(0..4);
    let input = write_pages(dir.path(), &trace, None);
    let base = "mempod:pods=1,initial=first-touch,epoch=64";
    let r = run(&input, "dram-pmem", &HALF, base);
    assert_eq!((r.pages, r.fast_capacity_pages), (128, Some(64)));
    assert_eq!(r.migrations, 0, "{}", r.stats.policy["mempod"]);
    assert_eq!((stat(&r, "epochs"), stat(&r, "tracked"), stat(&r, "below_floor"), stat(&r, "promoted")), (2, 128, 64, 0));
    let paper = run(&input, "dram-pmem", &HALF, &format!("{base},min_count=1,floor=none"));
    assert_eq!((paper.migrations, paper.stats.migration.swaps, stat(&paper, "promoted")), (128, 64, 64));

    let few = "mempod:pods=1,initial=first-touch,epoch=10";
    let mut trace: Vec<u64> = (0..124).collect();
    trace.extend(0..4);
    let input = write_pages(dir.path(), &trace, None);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Bytes(64 * 4096))], few);
    assert_eq!((r.migrations, stat(&r, "epochs")), (0, 12));
    assert!(ts_rows(&r).iter().all(|row| row[2] == 0.0 && row[5] == 10.0));
    let paper = run(&input, "dram-pmem", &[(0, Capacity::Bytes(64 * 4096))], &format!("{few},min_count=1,floor=none"));
    let moved: Vec<f64> = ts_rows(&paper).iter().map(|row| row[3]).collect();
    // epochs 0-5 touch fast pages 0-59; epoch 6 the fast 60-63 and the slow 64-69; then
    // every epoch 10 slow pages
    assert_eq!(moved, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0, 10.0, 10.0, 10.0, 10.0, 10.0]);
}

/// The victim pointer (§V-B) and the counters' reset at the end of an epoch, worked by hand
/// on `dram-pmem`: 8 pages, one pod, 4 fast frames, first-touch (0-3 fast), 8 counters (no
/// decrement step: at most 8 pages an epoch), epochs of 8 accesses.
///
/// Epoch 0: 0 1 2 3 4 5 6 7, all counted once: nothing moves (4 slow pages below the floor).
/// Epoch 1: 4 4 5 5 1 1 7 6. Counters 1:2 4:2 5:2 6:1 7:1. By counter, then id: 1 is fast
///   (ignored, §V-B); 4: the pointer starts at frame 0, page 0, untracked: swap (4, 0); 5:
///   frame 1 holds 1, tracked, passed over; frame 2, page 2: swap (5, 2). 6 and 7 (counted
///   once) stay. Fast frames: 4 1 5 3, pointer at frame 3.
/// Epoch 2: 6 6 7 7 0 1 2 5. Counters cleared at the boundary: 4 is untracked now. 6: frame
///   3, page 3: swap (6, 3); 7: the pointer wraps to frame 0, page 4 (tracked in epoch 1,
///   not in epoch 2): swap (7, 4). 0 and 2 (once) stay. Fast frames: 7 1 5 6.
/// Then 7 1 5 6 3 4 (a partial epoch, never closed).
/// The fast tier serves 0 1 2 3 | 1 1 | 1 5 | 7 1 5 6: 12 of 30.
#[test]
fn victims_follow_the_pointer_and_counters_restart_each_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let trace = [0, 1, 2, 3, 4, 5, 6, 7, 4, 4, 5, 5, 1, 1, 7, 6, 6, 6, 7, 7, 0, 1, 2, 5, 7, 1, 5, 6, 3, 4];
    let input = write_pages(dir.path(), &trace, None);
    let r = run(&input, "dram-pmem", &HALF, "mempod:pods=1,mea_counters=8,initial=first-touch,epoch=8");
    assert_eq!(r.fast_hit_ratio, 12.0 / 30.0);
    assert_eq!((r.migrations, r.stats.migration.swaps, r.stats.migration.by_hardware), (8, 4, 8));
    assert!(r.stats.migration.charges.is_empty(), "no address reconciliation");
    assert_eq!((stat(&r, "promoted"), stat(&r, "swaps"), stat(&r, "below_floor"), stat(&r, "no_victim")), (4, 4, 8, 0));
    let rows = ts_rows(&r);
    let cols: Vec<[f64; 4]> = rows.iter().map(|row| [row[2], row[3], row[4], row[5]]).collect();
    assert_eq!(cols, vec![[0.0, 0.0, 8.0, 8.0], [4.0, 2.0, 5.0, 8.0], [4.0, 2.0, 6.0, 8.0]]);
}

/// §V-B: "at each interval a Pod will migrate up to K pages", K the number of MEA counters.
/// Two pods of 4 counters, epochs of 300 accesses over 600 pages (fast tier 10%): each epoch
/// 6 new pages take 40 accesses each, round robin (3 to a pod: 40 of its 150 accesses, more
/// than 1/(k+1) = 30), then 60 accesses to pages spread over the footprint. Whatever the
/// rule, no pod promotes more than K = 4 pages in an epoch, so no epoch more than
/// pods × K = 8; the paper's (no floor) reaches K; tierkit's default moves the hot pages.
#[test]
fn a_pod_moves_at_most_its_counters_per_epoch() {
    let mut trace = Vec::new();
    for e in 0..100u64 {
        for _ in 0..40 {
            trace.extend((0..6).map(|h| (e * 6 + h) % 600));
        }
        trace.extend((0..60).map(|j| (e * 37 + j * 13) % 600));
    }
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &trace, None);
    let (pods, k) = (2u64, 4u64);
    for (rule, reaches_k) in [("", false), (",floor=frequent", false), (",min_count=1,floor=none", true)] {
        let spec = format!("mempod:pods={pods},mea_counters={k},epoch=300{rule}");
        let r = run(&input, "dram-pmem", &[(0, Capacity::Fraction(0.1))], &spec);
        let most = stat(&r, "most_promoted_by_a_pod");
        assert!(most <= k, "{spec}: a pod promoted {most} > {k} in one epoch");
        assert!(!reaches_k || most == k, "{spec}: {most}");
        let rows = ts_rows(&r);
        assert!(rows.len() >= 99);
        assert!(rows.iter().all(|row| row[3] <= (pods * k) as f64 && row[4] <= (pods * k) as f64), "{spec}");
        if rule.is_empty() {
            assert!(stat(&r, "promoted") >= 100, "{spec}: {}", r.stats.policy["mempod"]);
        }
    }
}

/// Every parameter's default names where it comes from: the paper's section for the paper's
/// parameters, tierkit (and Misra and Gries) for the floor.
#[test]
fn defaults_cite_their_sources() {
    let info = tierkit_core::policy::REGISTRY.iter().find(|p| p.name == "mempod").unwrap();
    let src = |n: &str| {
        let d = info.params.iter().find(|p| p.name == n).unwrap_or_else(|| panic!("no {n}"));
        (d.default, d.source)
    };
    let (d, s) = src("pods");
    assert!(d == "4" && s.contains("§V-A"), "{s}");
    let (d, s) = src("mea_counters");
    assert!(d == "64" && s.contains("§V-B") && s.contains("Fig. 6"), "{s}");
    let (d, s) = src("epoch");
    assert!(d == "50us" && s.contains("§V-B") && s.contains("Fig. 6"), "{s}");
    let (d, s) = src("min_count");
    assert!(d == "2" && s.contains("tierkit") && s.contains("§V-B"), "{s}");
    let (d, s) = src("floor");
    assert!(d == "possible" && s.contains("Misra and Gries"), "{s}");
}
