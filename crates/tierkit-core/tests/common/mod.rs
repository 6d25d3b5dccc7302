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
    let recs: Vec<(u64, bool)> = pages
        .iter()
        .enumerate()
        .map(|(i, &pg)| (0x10000 + pg * 4096 + (i as u64 % 64) * 64, writes.map(|w| w[i]).unwrap_or(false)))
        .collect();
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
