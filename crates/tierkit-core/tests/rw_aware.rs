//! Policies keep their contracts: the read/write-aware peers of HyPlacer's comparison (seed
//! 004) — `clock-dwf`, the partitioned policy of 004 §3.1 (CLOCK-DWF, Lee, Bahn and Noh,
//! IEEE TC 2014), and `memos`, 004 §5.1's re-implementation of Memos with the bandwidth
//! balance of 004 §3.3. Worked by hand on `dram-dcpmm` (DRAM reads 101.5 ns, writes 86.9 ns;
//! DCPMM reads 305 ns, read bandwidth 13.04 GB/s; page fault 5 µs, TLB shootdown 3 µs) or on
//! a tiny platform written here, whose bandwidths are small enough for a few accesses to
//! load a tier.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::SimResult;
use tierkit_core::policy::{PolicySpec, REGISTRY};
use tierkit_core::units::Capacity;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// (reads, writes) served by each tier.
fn served(r: &SimResult) -> Vec<(u64, u64)> {
    r.stats.platform.tiers.iter().map(|t| (t.counters.reads, t.counters.writes)).collect()
}

fn stat(r: &SimResult, group: &str, key: &str) -> u64 {
    r.stats.policy[group][key].as_u64().unwrap_or_else(|| panic!("no {group}.{key} in {}", r.stats.policy))
}

const R: bool = false;
const W: bool = true;

/// A trace of (page, write) pairs.
fn trace(dir: &std::path::Path, acc: &[(u64, bool)]) -> tierkit_core::trace::TraceInput {
    let pages: Vec<u64> = acc.iter().map(|a| a.0).collect();
    let writes: Vec<bool> = acc.iter().map(|a| a.1).collect();
    write_pages(dir, &pages, Some(&writes))
}

fn pages(n: u64) -> Capacity {
    Capacity::Bytes(n * 4096)
}

// ------------------------------------------------------------------------------ clock-dwf

/// 004 §3.1 (partitioned: read-dominated pages in DCPMM, written ones in DRAM). Trace R0 W1
/// R1 R0 W1: page 0, first read, goes to DCPMM; page 1, first written, straight to DRAM (the
/// engine tells `place` the first access is a store: no move, no fault charged).
/// DRAM serves R1 and both writes, DCPMM both reads of page 0.
#[test]
fn clock_dwf_places_a_first_write_in_dram_and_a_first_read_in_the_slow_tier() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), &[(0, R), (1, W), (1, R), (0, R), (1, W)]);
    let r = run(&input, "dram-dcpmm", &[], "clock-dwf");
    assert_eq!(served(&r), vec![(1, 2), (2, 0)]);
    assert_eq!(r.migrations, 0);
    assert!(r.stats.migration.charges.is_empty(), "{:?}", r.stats.migration.charges);
    assert_eq!(stat(&r, "clock_dwf", "placed_slow"), 1);
    assert_eq!(stat(&r, "clock_dwf", "placed_dram_write"), 1);
    assert_eq!(stat(&r, "clock_dwf", "write_faults"), 0);
}

/// A write to a DCPMM page traps (write-protection fault, the platform's 5 µs by default)
/// and the kernel moves the page to DRAM before the store completes, with one TLB shootdown
/// (3 µs). Trace R0 W0 R0: DCPMM serves the first read, DRAM the write and the last read.
/// The move costs its copy (4096 B at DCPMM's 13.04 GB/s, the slower side); the unloaded
/// runtime is 305 + 86.9 + 101.5 + 5000 + 3000 + that copy (the simple model adds the
/// loaded-latency factor on top).
#[test]
fn clock_dwf_promotes_a_written_slow_page_and_charges_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), &[(0, R), (0, W), (0, R)]);
    let r = run(&input, "dram-dcpmm", &[], "clock-dwf");
    assert_eq!(served(&r), vec![(1, 1), (1, 0)]);
    assert_eq!((r.migrations, r.stats.migration.promotions), (1, 1));
    let c = &r.stats.migration.charges;
    assert_eq!((c["write-protection fault"].count, c["write-protection fault"].halted_ns), (1, 5000.0));
    assert_eq!((c["TLB shootdown (write fault)"].count, c["TLB shootdown (write fault)"].ns), (1, 3000.0));
    assert_eq!(stat(&r, "clock_dwf", "write_faults"), 1);
    // the move is one page of an OS batch: its copy only (the fault is the kernel entry)
    assert!(close(r.migration_time_ns, 4096.0 / 13.04), "{}", r.migration_time_ns);
    let unloaded = 305.0 + 86.9 + 101.5 + 5000.0 + 3000.0 + 4096.0 / 13.04;
    assert!(r.runtime_ns >= unloaded - 1e-6, "{} < {unloaded}", r.runtime_ns);
    // the fault's cost is a parameter
    let r2 = run(&input, "dram-dcpmm", &[], "clock-dwf:wp_fault_ns=2000");
    assert_eq!(r2.stats.migration.charges["write-protection fault"].ns, 2000.0);
    assert!(r2.runtime_ns < r.runtime_ns - 2000.0);
}

/// The DRAM victim is a page without writes since the hand last passed, before one with,
/// even when the hand meets the written one first. DRAM and DCPMM hold 2 pages each.
/// R0 R1: DCPMM, now full. W3: first written, DRAM (frame 0), dirty. R2: DCPMM full, so DRAM (frame 1),
/// clean. W0: write fault on page 0; DRAM is full: the hand finds page 3 dirty (clears it,
/// write frequency 1) and page 2 clean without history: page 2 is the victim and swaps with
/// page 0. Then R3 (DRAM), R2 (DCPMM), R0 (DRAM).
/// A clock that ignored writes would have taken page 3, the first it met.
#[test]
fn clock_dwf_demotes_a_page_without_recent_writes_before_one_with() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), &[(0, R), (1, R), (3, W), (2, R), (0, W), (3, R), (2, R), (0, R)]);
    let r = run(&input, "dram-dcpmm", &[(0, pages(2)), (1, pages(2))], "clock-dwf");
    // DRAM: R2 R3 R0 and W3 W0; DCPMM: R0 R1 R2
    assert_eq!(served(&r), vec![(3, 2), (3, 0)]);
    assert_eq!((r.migrations, r.stats.migration.swaps), (2, 1));
    assert_eq!((stat(&r, "clock_dwf", "placed_dram_write"), stat(&r, "clock_dwf", "placed_dram_slow_full")), (1, 1));
    assert_eq!(stat(&r, "clock_dwf", "write_faults"), 1);
    assert_eq!(stat(&r, "clock_dwf", "demoted"), 1);
    assert_eq!((stat(&r, "clock_dwf", "hand_steps"), stat(&r, "clock_dwf", "passed_dirty")), (2, 1));
    // the scan: 2 PTEs at 10 ns; one fault and one shootdown
    let c = &r.stats.migration.charges;
    assert_eq!((c["DRAM clock scan"].count, c["DRAM clock scan"].ns), (1, 20.0));
    assert_eq!(c["TLB shootdown (write fault)"].count, 1);
}

/// Write frequency: a clean page with a write history survives `expiration` sweeps.
/// DRAM holds 2 pages; hot_threshold=1, expiration=1. W0 W1: both to DRAM (frames 0, 1).
/// W2 (first touch by a store, into a full DRAM): the hand clears 0 and 1 (frequency 1 each), then finds 0 clean with frequency 1
///   (not above 1): victim 0; page 2 takes frame 0, the hand is at frame 1.
/// W1: dirty again.
/// W3: the hand clears 1 (frequency 2) and 2 (frequency 1); page 1 is clean but has
///   frequency 2 > 1 and no clean pass yet: passed (one clean pass); page 2 (frequency 1)
///   is the victim. DRAM: 3 and 1.
/// With expiration=0 the history does not count: page 1, met first clean, is the victim;
/// DRAM: 2 and 3. Probes R1 R1 R1 R2 tell the two apart.
#[test]
fn clock_dwf_keeps_a_page_with_write_history_for_its_expiration() {
    let dir = tempfile::tempdir().unwrap();
    let acc = [(0, W), (1, W), (2, W), (1, W), (3, W), (1, R), (1, R), (1, R), (2, R)];
    let input = trace(dir.path(), &acc);
    let caps = [(0, pages(2))];
    let h = run(&input, "dram-dcpmm", &caps, "clock-dwf:hot_threshold=1,expiration=1");
    assert_eq!(served(&h)[0].0, 3, "page 1 kept in DRAM, page 2 demoted");
    assert_eq!(served(&h)[1].0, 1);
    assert_eq!(stat(&h, "clock_dwf", "passed_history"), 1);
    let p = run(&input, "dram-dcpmm", &caps, "clock-dwf:hot_threshold=1,expiration=0");
    assert_eq!(served(&p)[0].0, 1, "page 1 demoted, page 2 kept");
    assert_eq!(served(&p)[1].0, 3);
    assert_eq!(stat(&p, "clock_dwf", "passed_history"), 0);
    // every write is served by DRAM either way (a write to a slow page moves it first)
    assert_eq!((served(&h)[0].1, served(&p)[0].1), (5, 5));
    assert_eq!(stat(&h, "clock_dwf", "demoted"), 2);
}

/// `detect=interval`, the form a daemon runs (`tierkit run`): no write-protection fault; the
/// written slow page is found in the dirty bits at the next look and brought in then, the
/// clock choosing the victim. DRAM and DCPMM hold 2 pages each; interval 2 µs.
/// R0 R1: first touches go where the kernel puts them, DRAM (frames 0, 1). R2, W3: DCPMM; the
/// store to page 3 completes there (no fault, no move). 30 × R1 carry the clock past 2 µs:
/// the look finds page 3 written, DRAM is full, the hand finds page 0 clean without history:
/// page 0 swaps with page 3. Then R3 (DRAM), R0 (DCPMM).
/// With W0 before the look, page 0 is dirty: the hand passes it and takes page 1.
#[test]
fn clock_dwf_by_interval_moves_a_written_slow_page_at_the_next_look() {
    let dir = tempfile::tempdir().unwrap();
    let caps = [(0, pages(2)), (1, pages(2))];
    let spec = "clock-dwf:detect=interval,interval=2us";
    let mut acc = vec![(0, R), (1, R), (2, R), (3, W)];
    acc.extend([(1, R); 30]);
    acc.extend([(3, R), (0, R)]);
    let r = run(&trace(dir.path(), &acc), "dram-dcpmm", &caps, spec);
    // DRAM: R0, 31 x R1, R3; DCPMM: R2, W3 (before the look), R0 (after)
    assert_eq!(served(&r), vec![(33, 0), (2, 1)]);
    assert_eq!((r.migrations, r.stats.migration.swaps), (2, 1));
    assert_eq!((stat(&r, "clock_dwf", "write_faults"), stat(&r, "clock_dwf", "interval_written")), (0, 1));
    assert_eq!((stat(&r, "clock_dwf", "placed_dram_free"), stat(&r, "clock_dwf", "placed_slow")), (2, 2));
    let c = &r.stats.migration.charges;
    assert!(!c.contains_key("write-protection fault"), "{c:?}");
    assert_eq!(c["OS entry (clock-dwf batch)"].count, 1);
    // the look read the 2 slow pages' dirty bits: 2 x 10 ns, at each boundary passed
    assert_eq!(c["slow-tier dirty-bit scan"].ns, 20.0 * c["slow-tier dirty-bit scan"].count as f64);

    // W0 before the look: page 0 was written, the hand passes it; page 1 is the victim
    let dir = tempfile::tempdir().unwrap();
    let mut acc = vec![(0, R), (1, R), (2, R), (3, W), (0, W)];
    acc.extend([(0, R); 30]);
    acc.extend([(3, R), (1, R)]);
    let r = run(&trace(dir.path(), &acc), "dram-dcpmm", &caps, spec);
    // DRAM: R0, R1, 30 x R0, R3, and W0; DCPMM: R2, W3, R1 (after the look)
    assert_eq!(served(&r), vec![(33, 1), (2, 1)]);
    assert_eq!((stat(&r, "clock_dwf", "passed_dirty"), stat(&r, "clock_dwf", "demoted")), (1, 1));
}

// ------------------------------------------------------------------------------ memos

/// A platform whose tiers saturate at a few accesses: DRAM 1 GB/s each way (separate
/// queues), 100 ns; SLOW 0.5 GB/s shared, 300 ns, no capacity limit; moves cost nothing but
/// their bytes (no fault, shootdown or copy time), so that intervals are demand time only.
const TINY: &str = r#"
name = "tiny-rw"
[[tiers]]
name = "DRAM"
capacity = "64K"
read_latency_ns = 100.0
write_latency_ns = 100.0
read_bw_gb_per_s = 1.0
write_bw_gb_per_s = 1.0
[[tiers]]
name = "SLOW"
read_latency_ns = 300.0
write_latency_ns = 300.0
read_bw_gb_per_s = 0.5
write_bw_gb_per_s = 0.5
shared_bandwidth = true
[migration]
fault_ns = 0.0
tlb_shootdown_ns = 0.0
per_page_ns = 0.0
copy_from_bandwidth = false
"#;

fn tiny(dir: &std::path::Path) -> String {
    let p = dir.join("tiny-rw.toml");
    std::fs::write(&p, TINY).unwrap();
    p.display().to_string()
}

fn ts_rows(r: &SimResult) -> Vec<Vec<f64>> {
    let ts = &r.stats.policy["timeseries"];
    assert_eq!(ts["columns"][7], "dram_util", "{ts}");
    ts["rows"].as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()).collect()
}

/// 004 §5.2: Memos "allocates new pages in DCPMM". With the default 40 s period nothing
/// else happens in a short trace.
#[test]
fn memos_places_new_pages_in_the_slow_tier() {
    let dir = tempfile::tempdir().unwrap();
    let input = trace(dir.path(), &[(0, R), (1, W), (2, R), (0, W)]);
    let r = run(&input, "dram-dcpmm", &[], "memos");
    assert_eq!(served(&r), vec![(0, 0), (2, 2)]);
    assert_eq!(r.migrations, 0);
    assert_eq!(stat(&r, "memos", "cycles"), 0);
}

/// NVM write avoidance comes first, and the cap holds. Cycles of 4 accesses, one
/// classification. Cycle 0: R0 R0 W1 R0, all on SLOW: page 0 is read-hot, page 1 write-hot.
/// SLOW's utilization: 4 lines of 64 B over 1200 ns at 0.5 GB/s (shared) = 0.43; DRAM's 0:
/// the balance wants read-hot pages in DRAM too. With max_pages=1, only page 1 moves,
/// though page 0 comes first in page order; with max_pages=2 both move.
/// Then R0 W1: DRAM serves W1 in both runs, R0 only in the second.
#[test]
fn memos_promotes_write_hot_pages_first_and_caps_each_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let platform = tiny(dir.path());
    let input = trace(dir.path(), &[(0, R), (0, R), (1, W), (0, R), (0, R), (1, W)]);
    let one = run(&input, &platform, &[], "memos:period=4,max_pages=1");
    assert_eq!(one.migrations, 1);
    assert_eq!(served(&one), vec![(0, 1), (4, 1)]);
    assert_eq!((stat(&one, "memos", "promoted_write_hot"), stat(&one, "memos", "promoted_for_balance")), (1, 0));
    assert_eq!(stat(&one, "memos", "capped"), 1);
    let rows = ts_rows(&one);
    assert!(close(rows[0][8], 256.0 / (0.5 * 1200.0)), "{:?}", rows[0]);
    assert_eq!(rows[0][7], 0.0);

    let two = run(&input, &platform, &[], "memos:period=4,max_pages=2");
    assert_eq!(two.migrations, 2);
    assert_eq!(served(&two), vec![(1, 1), (3, 1)]);
    assert_eq!((stat(&two, "memos", "promoted_write_hot"), stat(&two, "memos", "promoted_for_balance")), (1, 1));
    assert_eq!(stat(&two, "memos", "capped"), 0);
    // one walk per cycle: 2 PTEs at 10 ns, plus the platform's (here free) flush
    assert_eq!(two.stats.migration.charges["PTE walk (referenced/dirty bits)"].ns, 20.0);
    assert_eq!(two.stats.migration.charges["OS entry (memos batch)"].count, 1);

    // balance=off (the live form: no bandwidth counters): the write-hot page moves, the
    // read-hot one stays, and no counter is read
    let off = run(&input, &platform, &[], "memos:period=4,max_pages=2,balance=off");
    assert_eq!(off.migrations, 1);
    assert_eq!(served(&off), served(&one));
    assert_eq!((stat(&off, "memos", "promoted_write_hot"), stat(&off, "memos", "promoted_for_balance")), (1, 0));
    assert!(!off.stats.migration.charges.contains_key("bandwidth counter read"));
}

/// One rule for bandwidth-counter reads (docs/policies.md; hyplacer follows it too, see
/// hyplacer.rs): recorded, never halting. 004 §4.3: PCM is its own process and writes the
/// throughput to a file that Control reads; pcm-memory reads the memory controllers' counters
/// through PCI configuration space on 004's Cascade Lake, which interrupts no core. One read
/// per cycle; 1 ms reads leave the simulated time as 0 ns reads do, bit for bit.
#[test]
fn memos_counter_reads_are_recorded_and_never_halt() {
    let dir = tempfile::tempdir().unwrap();
    let platform = tiny(dir.path());
    let input = trace(dir.path(), &[(0, R), (0, R), (1, W), (0, R), (0, R), (1, W), (0, R), (1, W), (0, R)]);
    let slow = run(&input, &platform, &[], "memos:period=4,counter_read_ns=1000000");
    let free = run(&input, &platform, &[], "memos:period=4,counter_read_ns=0");
    let c = &slow.stats.migration.charges["bandwidth counter read"];
    assert_eq!(c.count, stat(&slow, "memos", "cycles"));
    assert!(c.count >= 1 && c.ns == 1e6 * c.count as f64 && c.halted_ns == 0.0, "{c:?}");
    assert_eq!(slow.runtime_ns.to_bits(), free.runtime_ns.to_bits());
}

/// The balance moves read-hot pages to the slow tier only when DRAM's utilization is above
/// the slow tier's (by more than the 0.1 margin), and never a write-hot page. DRAM holds 3
/// pages; cycles of L accesses: w = L/11 writes to page 0, then L − w reads alternating
/// pages 1 and 2; the same again; then the probes W0 R1 (fewer than L: no boundary).
/// Cycle 0, all on SLOW: utilization 64·L B / (0.5 GB/s × 300·L ns) = 0.43, DRAM's 0.
///   Page 0 is write-hot and goes to DRAM first; then, SLOW being busier, read-hot pages
///   follow: 3 hot pages there, a share of 0.14 each, k = 1/0.5 = 2: ceil(0.43/(0.14 × 1.5))
///   = 2, pages 1 and 2. 3 pages moved: 3 × 4096 B read from SLOW and written to DRAM,
///   which the counters show in cycle 1.
/// Cycle 1, all on DRAM (100 ns each, plus the 30 ns walk at the boundary):
///   - L = 660: DRAM max(64·600, 12288 + 64·60)/66030 = 0.58; SLOW 24576/66030 = 0.37.
///     DRAM busier by 0.21: 3 hot DRAM pages, share 0.19, ceil(0.21/(0.19 × 3)) = 1
///     read-hot page goes back to SLOW: page 1, the first after the cursor (cycle 0 moved
///     up to page 2). The probe R1 is served by SLOW.
///   - L = 330: DRAM 0.58, SLOW 24576/33030 = 0.74: SLOW is busier, nothing is demoted
///     (and no read-hot page is left on SLOW to promote). R1 is served by DRAM.
#[test]
fn memos_balances_read_hot_pages_toward_the_slow_tier_only_when_dram_is_busier() {
    let dir = tempfile::tempdir().unwrap();
    let platform = tiny(dir.path());
    for (l, demoted) in [(660usize, 1u64), (330, 0)] {
        let w = l / 11;
        let mut acc = Vec::new();
        for _ in 0..2 {
            acc.extend((0..w).map(|_| (0, W)));
            acc.extend((0..l - w).map(|i| (1 + (i % 2) as u64, R)));
        }
        acc.extend([(0, W), (1, R)]);
        let input = trace(dir.path(), &acc);
        let r = run(&input, &platform, &[(0, pages(3))], &format!("memos:period={l}"));
        let (rd, wr) = ((l - w) as u64, w as u64);
        assert_eq!(stat(&r, "memos", "cycles"), 2, "L = {l}");
        assert_eq!((stat(&r, "memos", "promoted_write_hot"), stat(&r, "memos", "promoted_for_balance")), (1, 2), "L = {l}");
        assert_eq!(stat(&r, "memos", "demoted_for_balance"), demoted, "L = {l}");
        assert_eq!(r.migrations, 3 + demoted);
        assert_eq!(served(&r), vec![(rd + 1 - demoted, wr + 1), (rd + demoted, wr)], "L = {l}");
        let rows = ts_rows(&r);
        let interval = 100.0 * l as f64 + 30.0;
        let u_d = (64.0 * rd as f64).max(12288.0 + 64.0 * wr as f64) / interval;
        let u_s = 12288.0 / (0.5 * interval);
        assert!(close(rows[1][7], u_d) && close(rows[1][8], u_s), "L = {l}: {:?} vs {u_d} {u_s}", rows[1]);
        assert_eq!(rows[1][9], demoted as f64);
    }
}

/// A write-hot page is never moved to the slow tier for balance, however busy DRAM is.
/// Cycles of 600 accesses, all writes to page 0: cycle 0 on SLOW moves it to DRAM (write-
/// hot); in cycle 1 DRAM is at (4096 + 64·600)/60010 = 0.71 against SLOW's 4096/(0.5 ×
/// 60010) = 0.14, but its only hot page is write-hot: nothing moves. The probe W0 is
/// served by DRAM.
#[test]
fn memos_never_demotes_a_write_hot_page_for_balance() {
    let dir = tempfile::tempdir().unwrap();
    let platform = tiny(dir.path());
    let acc: Vec<(u64, bool)> = (0..1201).map(|_| (0, W)).collect();
    let input = trace(dir.path(), &acc);
    let r = run(&input, &platform, &[], "memos:period=600");
    assert_eq!(stat(&r, "memos", "cycles"), 2);
    assert_eq!((r.migrations, stat(&r, "memos", "demoted_for_balance")), (1, 0));
    assert_eq!(served(&r), vec![(0, 601), (0, 600)]);
    let rows = ts_rows(&r);
    assert!(rows[1][7] > rows[1][8] + 0.1, "{:?}", rows[1]);
}

/// Classification over several rounds: with `classifications=2`, a page referenced in only
/// one of the two rounds of a cycle is not hot (half of 2, rounded up, is 1: it is). With 3
/// rounds a page needs 2. Cycles of 6 accesses (rounds of 2 or 3). Page 0 is read in every
/// round, page 1 only in the first access of the cycle; DRAM has room. SLOW is busy, so
/// the balance promotes read-hot pages: with 3 rounds (of 2 accesses) page 1 is cold and
/// stays on SLOW; with 2 rounds (of 3) it is hot and moves too. Probe R1.
#[test]
fn memos_classifies_from_several_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let platform = tiny(dir.path());
    let acc = [(1, R), (0, R), (0, R), (0, R), (0, R), (0, R), (1, R)];
    let input = trace(dir.path(), &acc);
    let three = run(&input, &platform, &[], "memos:period=6,classifications=3");
    assert_eq!((stat(&three, "memos", "walks"), stat(&three, "memos", "cycles")), (3, 1));
    assert_eq!((stat(&three, "memos", "read_hot"), stat(&three, "memos", "cold")), (1, 1));
    assert_eq!(served(&three)[1].0, 7, "page 1 stayed on SLOW");
    let two = run(&input, &platform, &[], "memos:period=6,classifications=2");
    assert_eq!((stat(&two, "memos", "read_hot"), stat(&two, "memos", "cold")), (2, 0));
    assert_eq!(served(&two)[1].0, 6);
    assert_eq!(served(&two)[0].0, 1, "page 1 moved to DRAM");
}

#[test]
fn registered_with_documented_parameters() {
    for name in ["clock-dwf", "memos"] {
        let info = REGISTRY.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name} is not registered"));
        assert!(!info.future_knowledge());
        for p in info.params {
            // a choice names its options instead of a unit
            let unit = !p.unit.is_empty() || matches!(p.ty, tierkit_core::policy::ParamType::Choice { .. });
            assert!(!p.source.is_empty() && !p.help.is_empty() && unit, "{name}:{}", p.name);
        }
    }
    let info = REGISTRY.iter().find(|p| p.name == "memos").unwrap();
    let d = |n: &str| info.params.iter().find(|p| p.name == n).unwrap().default;
    assert_eq!((d("period"), d("classifications"), d("max_pages")), ("40s", "1", "10000"));
    let e = tierkit_core::policy::build(&PolicySpec::parse("memos:max_page=3").unwrap()).err().unwrap().to_string();
    assert!(e.contains("memos") && e.contains("max_pages"), "{e}");
}
