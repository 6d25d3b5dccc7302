//! Cache specs (`--cache none|PRESET|NAME:SIZE:WAYS[:LINE],...`), parsed as `simulate`,
//! `trace convert` and `trace record` parse them; a spec that parses must describe itself
//! (`CacheSpec::describe`, recorded in trace headers and results) as a spec that parses back
//! to itself, and the hierarchy it describes must be built and run over a few accesses within
//! the memory limit (the sizes are checked before anything is allocated).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::cache::{CacheFilter, CacheSpec, MAX_LEVELS, MAX_LINES};
use tierkit_core::trace::{Access, VecSource};
use tierkit_fuzz::{ok, read_to_end};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(Some(spec)) = ok(CacheSpec::parse("--cache", text)) else { return };
    // what the hierarchy allocates up front is bounded (docs/limits.md)
    assert!(spec.levels.len() <= MAX_LEVELS && spec.levels.iter().all(|l| l.size_bytes / l.line_bytes as u64 <= MAX_LINES));
    let d = spec.describe();
    let back = CacheSpec::parse("--cache", &d).unwrap_or_else(|e| panic!("description {d:?} does not parse: {e}"));
    assert_eq!(back.as_ref(), Some(&spec), "description {d:?} parses to another hierarchy");
    let accesses: Vec<Access> =
        (0..64u64).map(|i| Access { addr: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20, write: i % 3 == 0, insn: i, size: 8, ..Default::default() }).collect();
    if let Some(mut f) = ok(CacheFilter::new(Box::new(VecSource::from_accesses(accesses)), &spec)) {
        read_to_end(&mut f);
        assert_eq!(f.stats().len(), spec.levels.len());
    }
});
