//! OS-level tiering that real kernels ship: `autonuma-tiering` (Linux NUMA balancing in
//! memory-tiering mode) and `tpp` (Maruf et al., ASPLOS 2023), on the `dram-dcpmm` platform
//! (seed 004 §5.1: DRAM 101.5 ns reads, DCPMM 305 ns). Fixed costs are set to 0 where a test
//! needs the clock to be the accesses alone (`hint_fault_ns`, `pte_update_ns`, `pte_scan_ns`,
//! `tlb_flush_ns`, `lru_scan_ns`); watermarks are made explicit with `min_free_kbytes=0` and
//! `watermark_scale_factor`. Tests with scan periods of microseconds shrink `rate_window_ms`
//! (the kernel's one-second window) so that task_scan_min's floor (a tenth of it at 256 MB
//! per scan) stays under their period.

mod common;
use common::{run, write_pages};
use tierkit_core::engine::SimResult;
use tierkit_core::units::Capacity;

const FREE: &str = "hint_fault_ns=0,pte_update_ns=0,pte_scan_ns=0,tlb_flush_ns=0,lru_scan_ns=0,min_free_kbytes=0";

fn counter(r: &SimResult, k: &str) -> u64 {
    r.stats.policy["counters"][k].as_u64().unwrap_or_else(|| panic!("{k}: {}", r.stats.policy))
}

/// 8 DRAM pages (32 KiB) of 4 KiB.
const DRAM8: [(usize, Capacity); 1] = [(0, Capacity::Bytes(8 * 4096))];

/// The threshold scenario (worked through in the first test below): pages 0..15, 70 accesses to page 0, page 8,
/// 20 accesses to page 0, page 9.
fn threshold_trace() -> Vec<u64> {
    let mut trace: Vec<u64> = (0..16).collect();
    trace.extend(std::iter::repeat_n(0, 70));
    trace.push(8);
    trace.extend(std::iter::repeat_n(0, 20));
    trace.push(9);
    trace
}

/// Kernel rule (kernel/sched/fair.c should_numa_migrate_memory, tiering mode): a slow page
/// whose hint-fault latency is under the hot threshold is a promotion candidate, one over it
/// is not.
///
/// 16 pages, DRAM holds 8; watermarks 0 (scale factor 1 of 10000 of 8 pages rounds to 0), so
/// first touch puts 0-7 in DRAM and 8-15 in DCPMM. Scans every 10 µs from t = 0. Touching
/// 0..15 takes 8·101.5 + 8·305 = 3252 ns; 70 accesses to page 0 follow (7105 ns): the boundary
/// at 10 µs falls before the 68th of them (3252 + 67·101.5 = 10052.5 ns) and arms 8-15.
/// Page 8 comes 3 accesses later: latency ≈ 3·101.5 = 304.5 ns. Then 20 accesses to page 0
/// (2030 ns) and page 9: latency ≥ 304.5 + 305 + 2030 > 2600 ns (more if page 8's fault moved
/// pages). With a 1.5 µs threshold page 8 is a candidate and page 9 is not; with 1 s
/// (the default) both are.
#[test]
fn autonuma_tiering_promotes_under_the_threshold_only() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &threshold_trace(), None);
    let base = format!("autonuma-tiering:scan_period_ms=0.01,scan_delay_ms=0,rate_window_ms=0.1,watermark_scale_factor=1,{FREE}");

    let r = run(&input, "dram-dcpmm", &DRAM8, &format!("{base},hot_threshold_ms=0.0015"));
    assert_eq!(counter(&r, "hint_faults"), 2, "{}", r.stats.policy);
    assert_eq!((counter(&r, "candidates"), counter(&r, "over_threshold")), (1, 1));
    // DRAM is full: the candidate's promotion wakes kswapd instead (migrate_balanced_pgdat)
    assert_eq!(counter(&r, "promote_no_room") + counter(&r, "promoted"), 1);

    let r = run(&input, "dram-dcpmm", &DRAM8, &base);
    assert_eq!((counter(&r, "candidates"), counter(&r, "over_threshold")), (2, 0));
}

/// 608 pages, DRAM holds 8: 600 slow pages. The scan at 200 µs arms all of them (256 MiB
/// window); then each is touched once: 600 hint faults, all with latency ≪ 1 s, so all are
/// candidates. numa_promotion_rate_limit: with 1 MB/s = 256 pages per (rate) window, a
/// candidate is refused once the window's count reaches 256: candidates 1-255 pass, 256-600
/// (345) are refused. The window is 2 ms here (`rate_window_ms`, the kernel's 1 s shrunk so
/// that task_scan_min's floor, 0.2 ms, allows the 0.2 ms period); the whole run fits in it.
#[test]
fn autonuma_tiering_rate_limit_caps_promotions_and_threshold_moves_the_kernel_way() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..608).collect();
    trace.extend(std::iter::repeat_n(0, 200));
    trace.extend(8..608);
    let input = write_pages(dir.path(), &trace, None);
    let base = format!("autonuma-tiering:scan_period_ms=0.2,scan_delay_ms=0,rate_window_ms=2,watermark_scale_factor=1,{FREE}");

    let r = run(&input, "dram-dcpmm", &DRAM8, &format!("{base},promote_rate_limit_mib_per_s=1"));
    assert_eq!(counter(&r, "hint_faults"), 600, "{}", r.stats.policy);
    assert_eq!((counter(&r, "candidates"), counter(&r, "rate_limited")), (600, 345));
    let r = run(&input, "dram-dcpmm", &DRAM8, &base);
    assert_eq!((counter(&r, "candidates"), counter(&r, "rate_limited")), (600, 0));

    // numa_promotion_adjust_threshold with a 50 µs interval: against 1 MB per 2 ms window the
    // interval's expected candidates are 256 · 50/2000 = 6.4, so every interval with its ~160
    // candidates (one per 305 ns) is > 110 % of it and the threshold falls by 2·1000/16 =
    // 125 ms (the first adjustment, at the first fault, has seen none yet and raises it
    // once); against 65536 MB per window (16.8 M pages, 419 k per 50 µs) they are < 90 % and
    // the threshold only rises, to at most 2000 ms.
    let r = run(&input, "dram-dcpmm", &DRAM8, &format!("{base},promote_rate_limit_mib_per_s=1,scan_period_max_ms=0.05"));
    let th = r.stats.policy["threshold_ms"].as_f64().unwrap();
    assert!(counter(&r, "threshold_adjustments") >= 3, "{}", r.stats.policy);
    assert!((125.0..1000.0).contains(&th), "{th}");
    let r = run(&input, "dram-dcpmm", &DRAM8, &format!("{base},scan_period_max_ms=0.05"));
    let th = r.stats.policy["threshold_ms"].as_f64().unwrap();
    assert!(th > 1000.0 && th <= 2000.0, "{th}"); // raised only
}

/// TPP §5.3 / patch 5: a hint fault on a slow page that is not on the active list only
/// activates it; the next fault promotes. Rounds of touching pages 0..15 (≈ 3.3 µs each)
/// with scans every 1 µs re-arm every slow page between rounds. With two rounds a slow page
/// faults at most once: nothing is promoted. With five, pages fault again and are promoted,
/// and never more than were activated first.
#[test]
fn tpp_promotes_on_the_second_fault_not_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("tpp:scan_period_ms=0.001,scan_delay_ms=0,rate_window_ms=0.01,watermark_scale_factor=2000,{FREE}");
    let rounds = |n: usize| -> Vec<u64> { (0..n).flat_map(|_| 0..16u64).collect() };

    let input = write_pages(dir.path(), &rounds(2), None);
    let r = run(&input, "dram-dcpmm", &[(0, Capacity::Bytes(10 * 4096))], &spec);
    assert!(counter(&r, "hint_faults") > 0, "{}", r.stats.policy);
    assert_eq!(counter(&r, "promoted"), 0, "{}", r.stats.policy);
    assert_eq!(counter(&r, "activations"), counter(&r, "hint_faults") - counter(&r, "faults_on_fast"));

    let input = write_pages(dir.path(), &rounds(5), None);
    let r = run(&input, "dram-dcpmm", &[(0, Capacity::Bytes(10 * 4096))], &spec);
    let promoted = counter(&r, "promoted");
    assert!(promoted > 0, "{}", r.stats.policy);
    assert!(promoted <= counter(&r, "activations"));
    assert_eq!(r.stats.migration.promotions, promoted);
}

/// TPP patch 3/5: kswapd keeps the fast tier's free frames at the demotion watermark
/// max(capacity · demote_scale_factor / 10000, 2 · high). DRAM 10 pages, watermark scale
/// factor 2000: step 2, so min 0, low 2, high 4, demote = max(0, 8) = 8. First touch fills
/// DRAM down to the low watermark, and kswapd demotes the inactive tail back to 8 free frames
/// at the next access: at every scan boundary DRAM has at least 8 free frames, while
/// autonuma-tiering (which wakes kswapd only for promotions) lets DRAM fill to its low
/// watermark.
#[test]
fn tpp_demotion_keeps_dram_free_above_the_demotion_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let trace: Vec<u64> = (0..40).chain(0..40).collect();
    let input = write_pages(dir.path(), &trace, None);
    let caps = [(0, Capacity::Bytes(10 * 4096))];
    let r = run(&input, "dram-dcpmm", &caps, &format!("tpp:scan_period_ms=0.001,scan_delay_ms=0,rate_window_ms=0.01,watermark_scale_factor=2000,{FREE}"));
    assert_eq!(r.stats.policy["watermarks"]["demote"], 8, "{}", r.stats.policy);
    assert!(counter(&r, "demoted") > 0);
    let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        assert!(row[6].as_u64().unwrap() >= 8, "{row}");
    }

    let a = run(
        &input,
        "dram-dcpmm",
        &caps,
        &format!("autonuma-tiering:scan_period_ms=0.001,scan_delay_ms=0,rate_window_ms=0.01,watermark_scale_factor=2000,{FREE}"),
    );
    let rows = a.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert!(rows.iter().any(|row| row[6].as_u64().unwrap() <= 2), "{}", a.stats.policy);
}

/// Per-scan armed PTEs (the timeseries' second column).
fn armed_per_scan(r: &SimResult) -> Vec<u64> {
    r.stats.policy["timeseries"]["rows"].as_array().unwrap().iter().map(|row| row[1].as_u64().unwrap()).collect()
}

/// kernel/sched/fair.c `task_numa_work` (tiering mode skips top-tier pages in
/// `change_pte_range`): a chunk of `scan_size` that changed no PTE spends only the scan's
/// `virtpages` budget (8 × scan_size), so top-tier pages at low addresses do not use up the
/// scan; a chunk that armed pages ends it. Before, with `scan_size_mb=1` the scanner armed
/// 0 PTEs in 46 scans on `phases` medium at 50 % fast, because every window of 256 pages was
/// top tier.
///
/// 1 MiB = 256 pages a chunk. First touch fills DRAM with the lowest addresses (watermarks 0).
/// (a) DRAM 1024 of 2048 pages: the first scan walks 4 chunks of DRAM pages (arming nothing,
/// 1024 of its 2048 pages of virtpages left) and arms the fifth chunk, 256 slow pages: 1280
/// PTEs covered. (b) DRAM 3072 of 4096: the first scan stops after 8 chunks (2048 pages) with
/// nothing armed; the second covers the remaining 4 DRAM chunks and arms the next 256.
#[test]
fn autonuma_scan_budget_counts_changed_chunks_and_virtpages() {
    let dir = tempfile::tempdir().unwrap();
    // (a) first touch ≈ 1024·101.5 + 1024·305 ns = 416 µs, then 2000 hits on page 0 (203 µs):
    // one scan, at the first access after 0.5 ms (the next is due a floor of 0.39 ms later)
    let mut trace: Vec<u64> = (0..2048).collect();
    trace.extend(std::iter::repeat_n(0, 2000));
    let input = write_pages(dir.path(), &trace, None);
    let spec = format!("autonuma-tiering:scan_size_mb=1,scan_period_ms=0.5,scan_delay_ms=0.5,watermark_scale_factor=1,{FREE}");
    let r = run(&input, "dram-dcpmm", &[(0, Capacity::Bytes(1024 * 4096))], &spec);
    assert_eq!(counter(&r, "scans"), 1, "{}", r.stats.policy);
    assert_eq!((counter(&r, "ptes_armed"), counter(&r, "ptes_scanned")), (256, 1280), "{}", r.stats.policy);

    // (b) first touch ≈ 3072·101.5 + 1024·305 = 624 µs; scans from 1 ms every 0.5 ms
    // (task_scan_min: 8 ms / 16 windows of 256 pages), 10000 hits on page 0 end at ≈ 1.64 ms
    let mut trace: Vec<u64> = (0..4096).collect();
    trace.extend(std::iter::repeat_n(0, 10_000));
    let input = write_pages(dir.path(), &trace, None);
    let spec = format!("autonuma-tiering:scan_size_mb=1,scan_period_ms=8,scan_delay_ms=1,watermark_scale_factor=1,{FREE}");
    let r = run(&input, "dram-dcpmm", &[(0, Capacity::Bytes(3072 * 4096))], &spec);
    assert_eq!(armed_per_scan(&r), vec![0, 256], "{}", r.stats.policy);
    assert_eq!(counter(&r, "ptes_scanned"), 2048 + 1280);
}

/// kernel/sched/fair.c `task_scan_min`: the scan period is scan_period_min divided by the RSS's
/// windows of scan_size (`task_nr_scan_windows`), and never under the MAX_SCAN_WINDOW floor
/// (2560 MB per second: 1000 ms × scan_size / 2560). In tiering mode it is set once, when the
/// scan delay ends (`task_tick_numa` → `task_scan_start`), since `task_numa_fault` ignores
/// faults on slow-tier pages and `update_task_scan_period` never runs.
///
/// 4096 pages of 4 KiB = 16 MiB at the end of the 1 ms delay. scan_size 1 MiB: 16 windows,
/// 8 ms / 16 = 0.5 ms (above the floor of 1000/2560 = 0.390625 ms); 2 ms / 16 = 0.125 ms is
/// under the floor, so the floor. scan_size 256 MiB: one window, the period itself (floor
/// 100 ms at the kernel's 1 s rate window, 0.01 ms with rate_window_ms=0.1).
#[test]
fn scan_period_follows_task_scan_min() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace: Vec<u64> = (0..4096).collect();
    trace.extend(std::iter::repeat_n(0, 10_000));
    let input = write_pages(dir.path(), &trace, None);
    let caps = [(0, Capacity::Bytes(3072 * 4096))];
    let period = |extra: &str, policy: &str| -> (f64, u64) {
        let r = run(&input, "dram-dcpmm", &caps, &format!("{policy}:scan_delay_ms=1,watermark_scale_factor=1,{FREE},{extra}"));
        (r.stats.policy["scan_period_ms"].as_f64().unwrap(), counter(&r, "scans"))
    };
    for policy in ["autonuma-tiering", "tpp"] {
        assert_eq!(period("scan_size_mb=1,scan_period_ms=8", policy).0, 0.5, "{policy}");
        let (p, scans) = period("scan_size_mb=1,scan_period_ms=2", policy);
        assert_eq!(p, 1000.0 / 2560.0, "{policy}");
        // autonuma-tiering: scans at ≈ 1.0, 1.39 ms; the run ends at ≈ 1.64 ms (tpp demotes
        // page 0 to keep 2 % of DRAM free, and the run lasts longer)
        if policy == "autonuma-tiering" {
            assert_eq!(scans, 2, "{policy}");
        }
        assert_eq!(period("scan_period_ms=0.3,rate_window_ms=0.1", policy).0, 0.3, "{policy}");
        // the default rate window's floor (100 ms at 256 MiB) overrides a shorter period
        assert_eq!(period("scan_period_ms=0.3", policy).0, 100.0, "{policy}");
    }
}

/// A hint-fault promotion needs no TLB shootdown (mm/memory.c `do_numa_page` migrates the page
/// while its PTE is still PROT_NONE; x86 `pte_accessible` is false for such a PTE once the
/// scan's flush is done, so the unmap in migration flushes nothing). The TLB flushes charged
/// are the scan's (one per scan that armed PTEs, mm/mprotect.c) and kswapd's (one per
/// demotion batch). The scenario of the threshold test above: page 8's fault finds DRAM full
/// and wakes kswapd, which demotes; page 9's fault is promoted.
#[test]
fn hint_fault_promotions_pay_no_tlb_shootdown() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &threshold_trace(), None);
    for policy in ["autonuma-tiering", "tpp:activate=fault"] {
        let costs = "hint_fault_ns=0,pte_update_ns=0,pte_scan_ns=0,tlb_flush_ns=1000,lru_scan_ns=0,min_free_kbytes=0";
        let spec = format!("{policy},scan_period_ms=0.01,scan_delay_ms=0,rate_window_ms=0.1,watermark_scale_factor=1,{costs}");
        let spec = spec.replacen("tiering,", "tiering:", 1);
        let r = run(&input, "dram-dcpmm", &DRAM8, &spec);
        let charges = &r.stats.migration.charges;
        let count = |k: &str| charges.get(k).map(|c| c.count).unwrap_or(0);
        let tlb_ns: f64 = charges.iter().filter(|(k, _)| k.contains("TLB")).map(|(_, c)| c.ns).sum();
        let flushes = count("NUMA scan (TLB flush)") + count("TLB shootdown (kswapd demotion batch)");
        assert!(count("NUMA scan (TLB flush)") > 0, "{spec}: {charges:?}");
        assert_eq!(tlb_ns, 1000.0 * flushes as f64, "{spec}: {charges:?}");
        if policy == "autonuma-tiering" {
            assert!(counter(&r, "promoted") >= 1, "{}", r.stats.policy);
        }
    }
}

/// DRAM 64 pages; all costs 0. Pages `0..n` touched once (first touch), 40 hits on page 0,
/// then `then`. A scan is due at 21 µs (scan_delay_ms=0.021): touching 0..99 with 48 pages in
/// DRAM takes 48·101.5 + 52·305 = 20,732 ns, and the hits on page 0 cross 21 µs, so the one
/// scan (the next is 100 ms later: the kernel's rate-window floor) arms every slow page
/// before `then` runs; its hint faults have latencies of a few µs, far under the 1 s threshold.
fn wmark_trace(n: u64, then: &[u64]) -> Vec<u64> {
    let mut t: Vec<u64> = (0..n).collect();
    t.extend(std::iter::repeat_n(0, 40));
    t.extend_from_slice(then);
    t
}
const DRAM64: [(usize, Capacity); 1] = [(0, Capacity::Bytes(64 * 4096))];
const WM_8_16_24_32: &str = "wmark_min_pages=8,wmark_low_pages=16,wmark_high_pages=24,wmark_promo_pages=32";

/// The kernel's real watermarks, given as parameters (docs/validation.md: the testbed VM's node 0
/// has min 5725 / low 7156 / high 8587 / promo 10018 pages in its DMA32 zone, min_free_kbytes
/// raised for THP, where the formula on a 64 MiB tier gives a few pages). The rules they
/// enter: first touch on the fast tier while its free frames exceed low (mm/page_alloc.c
/// `get_page_from_freelist`, ALLOC_WMARK_LOW); promotion only with free frames above high + 1
/// (mm/migrate.c `migrate_balanced_pgdat`), else kswapd is woken (tiering mode) and demotes
/// until they exceed promo (mm/vmscan.c `pgdat_balanced` with WMARK_PROMO).
///
/// Watermarks 8/16/24/32: first touch puts 0..47 in DRAM (64 - 48 = 16 free, not above low)
/// and 48..99 in DCPMM: the scan arms 52 PTEs and sees 16 free frames. Page 48's fault finds
/// 16 ≤ 24 + 1: no room, kswapd demotes at least 17 pages (free > 32). With the formula
/// (min_free_kbytes=0, scale factor 1: all watermarks 0) DRAM fills: 36 armed, 0 free.
#[test]
fn autonuma_tiering_takes_the_kernels_watermarks_as_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &wmark_trace(100, &(48..60).collect::<Vec<u64>>()), None);
    let base = format!("autonuma-tiering:scan_delay_ms=0.021,watermark_scale_factor=1,{FREE}");
    let r = run(&input, "dram-dcpmm", &DRAM64, &format!("{base},{WM_8_16_24_32}"));
    let wm = &r.stats.policy["watermarks"];
    assert_eq!((wm["min"].as_u64(), wm["low"].as_u64(), wm["high"].as_u64(), wm["promo"].as_u64()), (Some(8), Some(16), Some(24), Some(32)));
    let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert_eq!((rows[0][1].as_u64(), rows[0][6].as_u64()), (Some(52), Some(16)), "{}", r.stats.policy);
    assert_eq!(counter(&r, "hint_faults"), 12, "{}", r.stats.policy);
    assert!(counter(&r, "promote_no_room") >= 1 && counter(&r, "demoted") >= 17, "{}", r.stats.policy);
    // every promotion left at least high + 1 free frames
    assert!(counter(&r, "promoted") >= 1);

    let r = run(&input, "dram-dcpmm", &DRAM64, &base);
    let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert_eq!((rows[0][1].as_u64(), rows[0][6].as_u64()), (Some(36), Some(0)), "{}", r.stats.policy);

    // all four or none, in order: one error naming the key
    for (bad, key) in
        [("wmark_low_pages=16", "wmark_min_pages"), ("wmark_min_pages=8,wmark_low_pages=16,wmark_high_pages=12,wmark_promo_pages=32", "wmark_high_pages")]
    {
        let mut job = tierkit_core::engine::Job::new(&input, tierkit_core::platform::Platform::load("dram-dcpmm").unwrap());
        job.capacity = DRAM64.to_vec();
        let spec = tierkit_core::policy::PolicySpec::parse(&format!("autonuma-tiering:{bad}")).unwrap();
        let err = tierkit_core::engine::simulate(&mut job, &spec).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains(&format!("autonuma-tiering:{key}")), "{bad}: {err}");
    }
}

/// Memory of other programs on the fast node (the VM's rootfs, ~7,400 pages of shmem on node
/// 0): in the kernel its free frames (NR_FREE_PAGES) exclude them, and kswapd demotes them too
/// (pgdemote_kswapd counts them); they are the oldest pages of the node's LRU, so tierkit
/// demotes them first.
///
/// DRAM 64 pages of which 20 are others', watermarks 8/16/24/32: first touch puts 28 pages in
/// DRAM (44 - 28 = 16 free), 72 in DCPMM. Page 48's fault: 16 free, no room, kswapd needs
/// 17 more and demotes the 20 others in one batch (at least SWAP_CLUSTER_MAX = 32, all there
/// are): 36 free. Pages 49..59 (11 faults) are promoted, 36 → 25 free; none of the program's
/// pages was demoted.
#[test]
fn autonuma_kswapd_demotes_other_programs_pages_first() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &wmark_trace(100, &(48..60).collect::<Vec<u64>>()), None);
    // first touch takes 28·101.5 + 72·305 = 24,802 ns: the scan comes at 25 µs, in the hits on page 0
    let spec = format!("autonuma-tiering:scan_delay_ms=0.025,watermark_scale_factor=1,{FREE},{WM_8_16_24_32},fast_other_pages=20");
    let r = run(&input, "dram-dcpmm", &DRAM64, &spec);
    let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
    assert_eq!((rows[0][1].as_u64(), rows[0][6].as_u64()), (Some(72), Some(16)), "{}", r.stats.policy);
    assert_eq!(counter(&r, "promote_no_room"), 1, "{}", r.stats.policy);
    assert_eq!((counter(&r, "demoted"), counter(&r, "demoted_other")), (20, 20), "{}", r.stats.policy);
    assert_eq!(counter(&r, "promoted"), 11, "{}", r.stats.policy);
    assert_eq!(r.stats.migration.promotions, 11);
    assert_eq!(r.stats.migration.demotions, 0, "the others' pages are not the program's");
}

/// mm/vmscan.c `kswapd_try_to_sleep`: once kswapd has balanced the node it naps HZ/10 (100 ms)
/// before sleeping; if allocations made the node unbalanced again meanwhile (free frames at
/// or under promo), it reclaims again with no wake-up. In the testbed VM kswapd so demoted
/// ~14,000 pages over 7 s of the program's first touches, woken once.
///
/// DRAM 64, watermarks 8/16/24/32, pages 0..59 (48 in DRAM), a scan at 21 µs, page 48's
/// fault wakes kswapd: free > 32. Then 20 new pages (100..119) fill DRAM to 16 free, 1000
/// hits on page 0 (101.5 µs) pass the 50 µs nap: kswapd finds 16 ≤ 32 and demotes at least
/// 17 more, and 20 more new pages (120..139) find room again. With a nap longer than the run
/// kswapd sleeps after its first run.
#[test]
fn autonuma_kswapd_looks_again_after_its_nap() {
    let dir = tempfile::tempdir().unwrap();
    let mut then: Vec<u64> = vec![48];
    then.extend(100..120);
    then.extend(std::iter::repeat_n(0, 1000));
    then.extend(120..140);
    let input = write_pages(dir.path(), &wmark_trace(60, &then), None);
    // 60 pages: 48·101.5 + 12·305 = 8,532 ns; the scan at 9 µs
    let spec = format!("autonuma-tiering:scan_delay_ms=0.009,watermark_scale_factor=1,{FREE},{WM_8_16_24_32}");
    let nap = run(&input, "dram-dcpmm", &DRAM64, &format!("{spec},kswapd_nap_ms=0.05"));
    let sleep = run(&input, "dram-dcpmm", &DRAM64, &format!("{spec},kswapd_nap_ms=1000"));
    assert_eq!(counter(&nap, "hint_faults"), 1, "{}", nap.stats.policy);
    assert_eq!((counter(&nap, "kswapd_rechecks"), counter(&sleep, "kswapd_rechecks")), (1, 0), "{}", nap.stats.policy);
    assert!(counter(&sleep, "demoted") >= 17, "{}", sleep.stats.policy);
    assert!(counter(&nap, "demoted") >= counter(&sleep, "demoted") + 17, "{} vs {}", nap.stats.policy, sleep.stats.policy);
    assert!(nap.fast_hit_ratio > sleep.fast_hit_ratio);
}

/// The fast node's second, small zone (docs/validation.md: the testbed VM's node 0 has a 16 MiB DMA
/// zone beside DMA32, whose free pages stay under DMA32's low watermark). Linux checks watermarks
/// per zone: kswapd stops once ANY zone is above its promo watermark + lowmem protection
/// (mm/vmscan.c `pgdat_balanced`), a promotion is allowed if any zone has free > high + 1
/// (+ protection) (mm/migrate.c `migrate_balanced_pgdat`), and allocations take the main
/// zone down to its low watermark, then the small zone down to its low + protection
/// (mm/page_alloc.c `get_page_from_freelist`).
///
/// DRAM 64 = a main zone of 48 frames with watermarks 40/48/50/56 (its free frames never
/// exceed low: it stays empty, as DMA32 stays under its low in the VM) and a small zone of 16
/// with low 2 / high 4 / promo 6 and protection 2 (4 / 6 / 8). First touch of 0..99: pages
/// 0..11 take the small zone (16 → 4 free), 12..99 DCPMM; the scan at 30 µs arms 88 PTEs and
/// sees 48 + 4 = 52 free frames. Faults on 12..24, each a candidate (latency of µs):
/// * 12: main 48 ≤ 51, small 4 ≤ 7: refused; kswapd (target: main > 56 or small > 8). Its
///   LRU (tail first 0..11, all young from first touch): sweep 1 rotates 1 + 3 + 6 pages
///   (priorities 3, 2, 1: 12 >> p); sweep 2 rotates 10, 11 and demotes 0, 1 (small 6), then
///   2..6 at priority 1 (small 11): the small zone is balanced, the main zone not — kswapd stops.
/// * 13..16 promoted into the small zone (main 48 is not above low), 11 → 7 free; 17 refused:
///   kswapd demotes 7 (priority 3: 9 >> 3 = 1), 8, 9 (priority 2), small 10 > 8: stops.
/// * 18..20 promoted (10 → 7); 21 refused: kswapd demotes 10, 11 (13 young: rotated), 9 > 8.
/// * 22, 23 promoted (9 → 7); 24 refused: kswapd demotes 13 and 14 (after rotating the young).
///
/// So 4 refusals, 4 kswapd runs all stopped by the small zone, 9 promotions, 14 demotions.
///
/// One zone of 64 with the same allocator floor (watermarks + the small zone's low +
/// protection, 4: 44/52/54/60, what tierkit validate passed before) places the same 12 pages
/// but its kswapd demotes toward free > 60 on the whole tier: 7 (free 59), then 7 + 8 + 9 +
/// 10 + 11 (free 60), then 13 + 14 + 15 + 16 (free 59): 3 refusals, 10 promotions, 16
/// demotions. With the small zone the node looks balanced sooner: fewer demotions and
/// promotions per kswapd run, more refusals, as the kernel's 10,707 candidates against 151
/// promotions on phases.
#[test]
fn autonuma_small_zone_balances_the_node_for_kswapd() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_pages(dir.path(), &wmark_trace(100, &(12..25).collect::<Vec<u64>>()), None);
    // first touch: 12·101.5 + 88·305 = 28,058 ns; the scan at 30 µs, in the hits on page 0
    let base = format!("autonuma-tiering:scan_delay_ms=0.030,watermark_scale_factor=1,{FREE}");
    let zone = "dma_zone_pages=16,dma_wmark_low_pages=2,dma_wmark_high_pages=4,dma_wmark_promo_pages=6,dma_protection_pages=2";
    let two = run(&input, "dram-dcpmm", &DRAM64, &format!("{base},wmark_min_pages=40,wmark_low_pages=48,wmark_high_pages=50,wmark_promo_pages=56,{zone}"));
    let one = run(&input, "dram-dcpmm", &DRAM64, &format!("{base},wmark_min_pages=44,wmark_low_pages=52,wmark_high_pages=54,wmark_promo_pages=60"));
    for r in [&two, &one] {
        let rows = r.stats.policy["timeseries"]["rows"].as_array().unwrap();
        assert_eq!((rows[0][1].as_u64(), rows[0][6].as_u64()), (Some(88), Some(52)), "{}", r.stats.policy);
        assert_eq!(counter(r, "hint_faults"), 13, "{}", r.stats.policy);
    }
    let z = &two.stats.policy["small_zone"];
    assert_eq!((z["low"].as_u64(), z["high"].as_u64(), z["promo"].as_u64(), z["free"].as_u64()), (Some(4), Some(6), Some(8), Some(9)), "{z}");
    let c = |r: &SimResult| ["promote_no_room", "kswapd_runs", "kswapd_small_zone_stops", "promoted", "promoted_small_zone", "demoted"].map(|k| counter(r, k));
    assert_eq!(c(&two), [4, 4, 4, 9, 9, 14], "{}", two.stats.policy);
    assert_eq!(c(&one), [3, 3, 0, 10, 0, 16], "{}", one.stats.policy);
    assert_eq!((two.stats.migration.promotions, two.stats.migration.demotions), (9, 14));

    // the small zone's watermarks rise like the main zone's: one error naming the key
    let mut job = tierkit_core::engine::Job::new(&input, tierkit_core::platform::Platform::load("dram-dcpmm").unwrap());
    job.capacity = DRAM64.to_vec();
    let spec = tierkit_core::policy::PolicySpec::parse("autonuma-tiering:dma_zone_pages=16,dma_wmark_low_pages=4,dma_wmark_high_pages=2").unwrap();
    let err = tierkit_core::engine::simulate(&mut job, &spec).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("autonuma-tiering:dma_wmark_high_pages"), "{err}");
}

/// Scan times (ms) of a run, from its per-scan time series.
fn scan_times_ms(r: &SimResult) -> Vec<f64> {
    r.stats.policy["timeseries"]["rows"].as_array().unwrap().iter().map(|row| row[0].as_f64().unwrap()).collect()
}

/// kernel/sched/fair.c `update_task_scan_period` in tiering mode (docs/validation.md). A fault on a
/// slow page that stays slow is not counted for the task (`task_numa_fault` returns early for a
/// slow node), but a promoted one is, for its new top-tier node (mm/memory.c `do_numa_page`),
/// and the first such fault after a completed pass runs `task_numa_placement`: one task's
/// faults are private and remote, `local + shared == 0`, so the period doubles (up to
/// `task_scan_max`) and the next scan is one new period after that fault. The testbed VM's
/// kernel armed a phases run's PTEs at about 2.2, 5.0 and 9.4 s, where tierkit scanned every
/// second.
///
/// The scenario of `autonuma_kswapd_demotes_other_programs_pages_first`, scanned every 10 µs
/// (one window of 256 MiB: the period itself; `rate_window_ms=0.01` puts the floor at 1 µs):
/// first touch ends at 24,802 ns, the first scan (a whole pass: the address space is one
/// chunk) comes at 25,005 ns (the third hit on page 0) and arms the 72 slow pages. Page 48's
/// fault at 28,862 ns finds no room (kswapd demotes the others' 20 pages); page 49's, at
/// 29,167 ns, is the first promotion after the pass: the period becomes 20 µs and the next
/// scan is due at 49,167 ns, at the first hit on page 0 at or after it. Pages
/// 50..59 are promoted too, but in the same pass: no second doubling. The later scans arm the
/// pages still slow, none of which is touched again, so nothing is promoted and the period
/// stays: scans every 20 µs to the end of the run (1000 hits on page 0 after 30,283.5 ns).
/// Without the rule (`scan_period_adapt=false`) the scans come every 10 µs.
#[test]
fn autonuma_scan_period_doubles_after_a_pass_that_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let mut then: Vec<u64> = (48..60).collect();
    then.extend(std::iter::repeat_n(0, 1000));
    let input = write_pages(dir.path(), &wmark_trace(100, &then), None);
    let spec = format!(
        "autonuma-tiering:scan_delay_ms=0.025,scan_period_ms=0.01,rate_window_ms=0.01,watermark_scale_factor=1,{FREE},{WM_8_16_24_32},fast_other_pages=20"
    );
    let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
    let r = run(&input, "dram-dcpmm", &DRAM64, &spec);
    assert_eq!((counter(&r, "promoted"), counter(&r, "scan_period_doublings")), (11, 1), "{}", r.stats.policy);
    assert!(near(r.stats.policy["scan_period_ms"].as_f64().unwrap(), 0.02), "{}", r.stats.policy);
    let t = scan_times_ms(&r);
    // the second scan: the first access at or after 49,167 ns (the copies of the promotions
    // stretch the hits' clock by a few ns)
    assert!(near(t[0], 0.025005) && (0.049167..0.0494).contains(&t[1]), "{t:?}");
    assert!(t.windows(2).skip(1).all(|w| (0.02..0.0202).contains(&(w[1] - w[0]))), "{t:?}");
    assert_eq!(t.len(), 6, "{t:?}");

    let fixed = run(&input, "dram-dcpmm", &DRAM64, &format!("{spec},scan_period_adapt=false"));
    assert_eq!((counter(&fixed, "promoted"), counter(&fixed, "scan_period_doublings")), (11, 0), "{}", fixed.stats.policy);
    let t = scan_times_ms(&fixed);
    assert!(t.windows(2).all(|w| (0.01..0.0102).contains(&(w[1] - w[0]))), "{t:?}");
    assert_eq!(t.len(), 11, "{t:?}");

    // task_scan_max: scan_period_max_ms over the RSS's one window caps the doubled period
    let capped = run(&input, "dram-dcpmm", &DRAM64, &format!("{spec},scan_period_max_ms=0.015"));
    assert!(near(capped.stats.policy["scan_period_ms"].as_f64().unwrap(), 0.015), "{}", capped.stats.policy);
}

/// kswapd as a thread with a pace (`kswapd_pages_per_s`, docs/validation.md): in Linux a refused
/// promotion wakes kswapd, which frees frames on another CPU at a finite pace while the program
/// goes on faulting, and every fault until it has freed high + 1 frames is refused too (the
/// testbed VM's kernel promoted 34-68 % of its candidates; the model with an instant kswapd
/// nearly all).
///
/// The scenario of `autonuma_kswapd_demotes_other_programs_pages_first`: page 48's fault at
/// 28,862 ns finds 16 free frames (≤ high + 1 = 25) and wakes kswapd, which demotes the 20
/// others' pages: 36 free. At once (the default), pages 49..59 are promoted (36 → 25 free). At
/// 1 page per µs (1e6 pages/s) the 20 frames come free one per µs: pages 49..59 fault within
/// the next 3.4 µs (305 ns each, they stay slow), when at most 3 frames are free again (19
/// usable at most): each is refused and finds kswapd busy. 100 hits on page 0 (10,150 ns)
/// follow; at page 60's fault, 42,672 ns, 13 of the 20 frames are free (29 usable): 60, 61,
/// 62 and 63 are promoted (29 → 25), and nothing more is demoted.
#[test]
fn autonuma_kswapd_frees_its_frames_at_its_pace() {
    let dir = tempfile::tempdir().unwrap();
    let mut then: Vec<u64> = (48..60).collect();
    then.extend(std::iter::repeat_n(0, 100));
    then.extend(60..64);
    let input = write_pages(dir.path(), &wmark_trace(100, &then), None);
    let spec = format!("autonuma-tiering:scan_delay_ms=0.025,watermark_scale_factor=1,{FREE},{WM_8_16_24_32},fast_other_pages=20");
    let paced = run(&input, "dram-dcpmm", &DRAM64, &format!("{spec},kswapd_pages_per_s=1e6"));
    let c = |k| counter(&paced, k);
    assert_eq!((c("promoted"), c("promote_no_room"), c("kswapd_runs"), c("kswapd_wakeups_busy")), (4, 12, 1, 11), "{}", paced.stats.policy);
    assert_eq!((c("demoted"), c("demoted_other")), (20, 20), "{}", paced.stats.policy);
    assert_eq!(paced.stats.migration.promotions, 4);

    let instant = run(&input, "dram-dcpmm", &DRAM64, &spec);
    let c = |k| counter(&instant, k);
    assert_eq!((c("kswapd_wakeups_busy"), c("demoted_other")), (0, 20), "{}", instant.stats.policy);
    // 49..59 promoted at once (36 → 25 free); page 60 then finds 25, not above 25: kswapd demotes
    // the program's pages until more than 32 are free, and 61..63 are promoted
    assert!(c("promoted") >= 11 + 3 && c("promote_no_room") == 2 && c("kswapd_runs") == 2, "{}", instant.stats.policy);
}
