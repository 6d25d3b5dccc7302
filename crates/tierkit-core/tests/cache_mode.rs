//! Models match hand-computed figures: `cache-mode`, the fast tier as a direct-mapped,
//! write-allocate cache of the tiers below, as KNL's MCDRAM cache mode (seed 002 §V-D) and
//! DRAM in front of Optane in Memory Mode (seed 004 §2.2).

mod common;
use common::{run, write_records as write_trace};
use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::units::Capacity;

fn stat(r: &SimResult, key: &str) -> u64 {
    r.stats.policy[key].as_u64().or_else(|| r.stats.policy["detail"][key].as_u64()).unwrap_or_else(|| panic!("no {key} in {}", r.stats.policy))
}

/// A 4 KiB cache: 64 sets of 64-byte blocks.
const ONE_PAGE: [(usize, Capacity); 1] = [(0, Capacity::Bytes(4096))];
/// Virtual pages far apart; their dense ids (0, 1, 2...) are the "physical" frames.
const VA: [u64; 4] = [0x5555_0000_0000, 0x7fff_1234_5000, 0x1000_0000, 0x2000_3000];

/// 002 §V-D: MCDRAM cache mode is direct-mapped, so two blocks that map to the same set
/// evict each other. A = frame 0, offset 0 (block 0, set 0); B = frame 1, offset 0 (block 64,
/// set 0); C = frame 1, offset 64 (block 65, set 1).
///   A B A B A A (reads): miss ×5 (every access evicts the other block), then one hit.
///   Runtime: misses cost probe 50 + PMEM 150 = 200 ns, the hit 50 → 5·200 + 50 = 1050 ns.
///   A C A C: 2 misses, 2 hits — different sets.
#[test]
fn direct_mapped_conflicts_evict_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ((VA[0], false), (VA[1], false));
    let input = write_trace(dir.path(), &[a, b, a, b, a, a]);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode");
    assert_eq!((stat(&r, "hits"), stat(&r, "misses"), stat(&r, "evictions")), (1, 5, 4));
    assert_eq!(r.fast_hit_ratio, 1.0 / 6.0);
    assert_eq!(r.runtime_ns, 1050.0);
    let t = &r.stats.platform.tiers;
    assert_eq!((t[0].counters.probes, t[0].counters.extra_writes, t[1].counters.reads), (5, 5, 5));
    assert_eq!((t[0].used_pages, t[1].used_pages), (0, 2), "no page lives in the cache tier");
    assert_eq!(r.migrations, 0);

    let c = (VA[1] + 64, false);
    let input = write_trace(dir.path(), &[a, c, a, c]);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode");
    assert_eq!((stat(&r, "hits"), stat(&r, "misses")), (2, 2));
}

/// The index is the "physical" address (dense page id × page size + offset), not the
/// virtual one. With an 8 KiB cache (128 sets), frame 0 offset 0 and frame 2 offset 0 share
/// set 0, although their virtual addresses (VA[0], VA[3]) fall in sets 0 and 64.
///   A (frame 0, block 0, set 0), D (frame 1, block 64, set 64), B (frame 2, block 128,
///   set 0), A, B: A miss, D miss, B miss evicting A, A miss evicting B, B miss → 5 misses.
#[test]
fn sets_are_indexed_by_frame_in_first_touch_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, d, b) = ((VA[0], false), (VA[2], false), (VA[3], false));
    assert_ne!((VA[0] >> 6) % 128, (VA[3] >> 6) % 128, "virtually, A and B would not conflict");
    let input = write_trace(dir.path(), &[a, d, b, a, b]);
    let r = run(&input, "dram-pmem", &[(0, Capacity::Bytes(8192))], "cache-mode");
    assert_eq!((stat(&r, "sets"), stat(&r, "hits"), stat(&r, "misses")), (128, 0, 5));
}

/// 002 §V-D / 004 §2.2: a loop whose footprint fits the cache hits after its first pass; one
/// twice the size of a direct-mapped cache, walked in order, evicts every block before reuse.
///   fits: 32 lines of one page × 4 passes = 128 reads: 32 misses, 96 hits → 0.75.
///   does not fit: 2 pages × 64 lines × 4 passes = 512 reads; line i of page 0 and line i of
///   page 1 share set i, so every access misses → 0.
#[test]
fn loop_that_fits_hits_and_loop_that_does_not_misses() {
    let dir = tempfile::tempdir().unwrap();
    let small: Vec<(u64, bool)> = (0..4).flat_map(|_| (0..32u64).map(|l| (VA[0] + l * 64, false))).collect();
    let input = write_trace(dir.path(), &small);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode");
    assert_eq!((stat(&r, "hits"), stat(&r, "misses")), (96, 32));
    assert_eq!(r.fast_hit_ratio, 0.75);
    assert_eq!(r.stats.policy["hit_ratio"], 0.75);

    let big: Vec<(u64, bool)> = (0..4).flat_map(|_| [VA[0], VA[1]].into_iter().flat_map(|p| (0..64u64).map(move |l| (p + l * 64, false)))).collect();
    let input = write_trace(dir.path(), &big);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode");
    assert_eq!((stat(&r, "hits"), stat(&r, "misses")), (0, 512));
    assert_eq!(r.fast_hit_ratio, 0.0);
}

/// 004 §2.2 (Memory Mode is a write-back cache): a block written twice is written back once,
/// when evicted; a clean victim costs nothing. A and B conflict (set 0).
///   W A: miss; the full-line write fills the block (no PMEM read): tier 0 write 50 + probe
///        50 = 100 ns; A dirty.
///   W A: hit, 50 ns.
///   R B: miss, evicts dirty A → one PMEM write (writeback); PMEM read 150 + probe 50 = 200.
///   R A: miss, evicts clean B → no writeback; 200 ns.
/// Runtime 550 ns (the bandwidth floor, 34.6 ns on PMEM, is below it).
/// Traffic: tier 0: 2 demand writes, 3 probes, 2 fills; PMEM: 2 reads, 1 writeback.
/// fast_hit_ratio counts the write miss as served by the fast tier: 2 of 4; the cache's own
/// hit ratio is 1 of 4.
#[test]
fn dirty_writeback_is_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[(VA[0], true), (VA[0], true), (VA[1], false), (VA[0], false)]);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode");
    assert_eq!(stat(&r, "dirty_writebacks"), 1);
    assert_eq!((stat(&r, "write_misses"), stat(&r, "write_hits"), stat(&r, "read_misses")), (1, 1, 2));
    let t = &r.stats.platform.tiers;
    assert_eq!((t[0].counters.writes, t[0].counters.probes, t[0].counters.extra_writes), (2, 3, 2));
    assert_eq!((t[1].counters.reads, t[1].counters.extra_writes, t[1].counters.extra_reads), (2, 1, 0));
    assert_eq!(r.runtime_ns, 550.0);
    assert_eq!(r.fast_hit_ratio, 0.5);
    assert_eq!(r.stats.policy["hit_ratio"], 0.25);
}

/// Blocks larger than a line: a write miss must read the rest of the block from the
/// backing tier (one line counted); 128-byte blocks halve the sets.
#[test]
fn larger_blocks_fetch_on_write_miss() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[(VA[0], true), (VA[0] + 64, false)]);
    let r = run(&input, "dram-pmem", &ONE_PAGE, "cache-mode:block=128");
    assert_eq!((stat(&r, "sets"), stat(&r, "hits"), stat(&r, "misses")), (32, 1, 1));
    assert_eq!(r.stats.platform.tiers[1].counters.extra_reads, 1);
}

/// Three tiers (hbm-dram-cxl): pages fill tier 1 (2 pages), then tier 2; a dirty victim is
/// written back to its own page's tier. Frames 0-3 at offset 0 all map to set 0 of a 4 KiB
/// cache.
///   R p0 (tier 1), R p1 (tier 1), R p2 (tier 2), R p3 (tier 2): 4 misses, each evicting the
///   last; W p2: miss, dirty; R p3: miss, evicts dirty p2 → writeback to tier 2; R p0: miss.
///   7 misses; tier 1 serves 3 reads, tier 2 serves 3 reads and takes 1 writeback.
#[test]
fn three_tiers_write_back_to_the_victims_tier() {
    let dir = tempfile::tempdir().unwrap();
    let r_ = |i: usize| (VA[i], false);
    let input = write_trace(dir.path(), &[r_(0), r_(1), r_(2), r_(3), (VA[2], true), r_(3), r_(0)]);
    let caps = [(0, Capacity::Bytes(4096)), (1, Capacity::Bytes(2 * 4096))];
    let r = run(&input, "hbm-dram-cxl", &caps, "cache-mode");
    assert_eq!((stat(&r, "hits"), stat(&r, "misses"), stat(&r, "dirty_writebacks")), (0, 7, 1));
    let t = &r.stats.platform.tiers;
    assert_eq!((t[1].counters.reads, t[2].counters.reads), (3, 3));
    assert_eq!((t[1].counters.extra_writes, t[2].counters.extra_writes), (0, 1));
    assert_eq!((t[0].used_pages, t[1].used_pages, t[2].used_pages), (0, 2, 2));
}

/// Contracts on larger mixed traces, 2 and 3 tiers: accesses counted once, tier 0 holds no
/// page, hits + misses = accesses, and every access's bytes are accounted (the engine's
/// invariants, checked at the end).
#[test]
fn invariants_on_two_and_three_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 12345u64;
    let recs: Vec<(u64, bool)> = (0..20000)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let page = if (x >> 40) & 3 == 0 { (x >> 20) % 400 } else { (i / 500) as u64 * 7 % 400 + (x >> 50) % 8 };
            (0x4000_0000 + page * 4096 + ((x >> 30) % 8) * 64, (x >> 10) & 3 == 0)
        })
        .collect();
    let input = write_trace(dir.path(), &recs);
    for (platform, caps) in
        [("dram-pmem", vec![(0, Capacity::Fraction(0.1))]), ("hbm-dram-cxl", vec![(0, Capacity::Fraction(0.1)), (1, Capacity::Fraction(0.5))])]
    {
        for spec in ["cache-mode", "cache-mode:block=256"] {
            let r = run(&input, platform, &caps, spec);
            assert_eq!(r.accesses, 20000);
            assert_eq!(stat(&r, "hits") + stat(&r, "misses"), 20000);
            assert_eq!(r.stats.platform.tiers[0].used_pages, 0);
            assert!(r.stats.policy["hit_ratio"].as_f64().unwrap() > 0.3, "{platform} {spec}: {}", r.stats.policy);
        }
    }
}

#[test]
fn unusable_configurations_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_trace(dir.path(), &[(VA[0], false)]);
    let mut plat = Platform::load("dram-pmem").unwrap();
    plat.tiers[0].capacity = None;
    let mut job = Job::new(&input, plat);
    let e = simulate(&mut job, &PolicySpec::parse("cache-mode").unwrap()).unwrap_err().to_string();
    assert!(e.contains("cache-mode") && e.contains("capacity"), "{e}");
    job.capacity = ONE_PAGE.to_vec();
    let e = simulate(&mut job, &PolicySpec::parse("cache-mode:block=96").unwrap()).unwrap_err().to_string();
    assert!(e.contains("cache-mode:block") && e.contains("power of two"), "{e}");
    let e = simulate(&mut job, &PolicySpec::parse("cache-mode:block=32").unwrap()).unwrap_err().to_string();
    assert!(e.contains("cache-mode:block") && e.contains("line"), "{e}");
    let e = simulate(&mut job, &PolicySpec::parse("cache-mode:block=8K").unwrap()).unwrap_err().to_string();
    assert!(e.contains("cache-mode:block"), "{e}");
}
