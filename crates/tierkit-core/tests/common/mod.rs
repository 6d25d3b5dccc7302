//! Helpers shared by the integration tests.
#![allow(dead_code)]

use tierkit_core::engine::{simulate, Job, SimResult};
use tierkit_core::platform::Platform;
use tierkit_core::policy::PolicySpec;
use tierkit_core::trace::tkt::TktWriter;
use tierkit_core::trace::{Access, TraceInput, TraceMeta};
use tierkit_core::units::Capacity;

/// A native trace `t.tkt` in `dir` holding one 64-byte access per (address, write) record.
pub fn write_records(dir: &std::path::Path, recs: &[(u64, bool)]) -> TraceInput {
    let p = dir.join("t.tkt");
    let mut w = TktWriter::create(&p, &TraceMeta::default(), true).unwrap();
    for &(addr, write) in recs {
        w.write_access(&Access { addr, write, size: 64, ..Default::default() }).unwrap();
    }
    w.finish().unwrap();
    TraceInput::new(p)
}

/// A trace touching `pages` in order (4 KiB pages, one access each, reads unless `writes`
/// says so; the line within the page varies).
pub fn write_pages(dir: &std::path::Path, pages: &[u64], writes: Option<&[bool]>) -> TraceInput {
    let recs: Vec<(u64, bool)> =
        pages.iter().enumerate().map(|(i, &pg)| (0x10000 + pg * 4096 + (i as u64 % 64) * 64, writes.map(|w| w[i]).unwrap_or(false))).collect();
    write_records(dir, &recs)
}

/// Simulate `spec` with capacity overrides, invariants checked at every boundary.
pub fn run(input: &TraceInput, platform: &str, caps: &[(usize, Capacity)], spec: &str) -> SimResult {
    let mut job = Job::new(input, Platform::load(platform).unwrap());
    job.capacity = caps.to_vec();
    job.paranoid = true;
    simulate(&mut job, &PolicySpec::parse(spec).unwrap()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// Every access of a source, in order.
pub fn rows(src: &mut dyn tierkit_core::trace::RecordSource) -> Vec<Access> {
    tierkit_core::trace::read_all(src).unwrap().iter().flat_map(|b| (0..b.len()).map(move |i| b.access(i))).collect()
}

/// The error that opening or reading `input` to its end gives (a panic if it reads cleanly).
pub fn read_err(input: &TraceInput) -> String {
    let mut src = match input.open() {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    match tierkit_core::trace::read_all(src.as_mut()) {
        Ok(_) => panic!("{} read without error", input.display()),
        Err(e) => e.to_string(),
    }
}

/// Write `bytes` to `dir/name`, gzip- or xz-compressed by the name's extension.
pub fn write_file(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    use std::io::Write;
    let p = dir.join(name);
    let f = std::fs::File::create(&p).unwrap();
    if name.ends_with(".gz") {
        let mut g = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        g.write_all(bytes).unwrap();
        g.finish().unwrap();
    } else if name.ends_with(".xz") {
        let mut x = liblzma::write::XzEncoder::new(f, 6);
        x.write_all(bytes).unwrap();
        x.finish().unwrap();
    } else {
        std::fs::write(&p, bytes).unwrap();
    }
    p
}

/// The hand-computed platform of the timing tests (figures set field by field, so that edits
/// to the presets do not move them): tier 0 "DRAM" 50 ns, 64 GB/s (1 ns per line); tier 1
/// "PMEM" 150 ns, 6.4 GB/s (10 ns per line); CPU 2 GHz, CPI 1, ROB 128, 32 MSHRs, 64 writes;
/// migration 1000 + 500 + 250 ns fixed, 3000 ns per period; no loaded-latency curves.
pub fn hand_platform() -> Platform {
    let mut p = Platform::load("dram-pmem").unwrap();
    p.tiers.truncate(2);
    for (t, lat, bw) in [(0, 50.0, 64.0), (1, 150.0, 6.4)] {
        let x = &mut p.tiers[t];
        x.read_latency_ns = lat;
        x.write_latency_ns = lat;
        x.read_bw_gb_per_s = bw;
        x.write_bw_gb_per_s = bw;
        x.shared_bandwidth = false;
        x.capacity = None;
        x.loaded_latency = vec![];
    }
    p.cpu.freq_ghz = 2.0;
    p.cpu.base_cpi = 1.0;
    p.cpu.rob_entries = 128;
    p.cpu.max_outstanding = 32;
    p.cpu.write_queue_entries = 64;
    p.migration.fault_ns = 1000.0;
    p.migration.tlb_shootdown_ns = 500.0;
    p.migration.per_page_ns = 250.0;
    p.migration.per_period_ns = 3000.0;
    p.migration.copy_from_bandwidth = false;
    p
}
