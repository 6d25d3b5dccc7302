//! What every fuzz target shares: a scratch file for the input (tierkit's readers take paths,
//! as the CLI and the Python bindings call them), the error contract, and a reader that walks
//! a trace to its end and fingerprints what it read, so that two ways of reading the same
//! bytes (read-ahead on or off, every column or only the pages) can be compared.
//!
//! A target panics only on a real defect: a panic inside tierkit, an error that breaks the
//! contract of `crates/tierkit-core/src/error.rs` (one line, bounded length, a user error and
//! not an internal one), or two readings of the same input that disagree.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use tierkit_core::error::{Error, MAX_KEY_CHARS, MAX_MSG_CHARS, MAX_PATH_CHARS};
use tierkit_core::trace::threaded::ReadAhead;
use tierkit_core::trace::{Batch, Projection, RecordSource, TraceInput};

/// The longest location an error may carry: "offset 18446744073709551615: ".
const MAX_LOCATION_CHARS: usize = 29;

/// Write `data` to this process's scratch file with extension `ext` and return its path.
/// One directory per process (libFuzzer's `-fork`/`-jobs` run several), under
/// `$TIERKIT_FUZZ_SCRATCH` (which `fuzz/run.sh` sets and removes afterwards), else under
/// /dev/shm when there is one, so that the file never touches a disk.
pub fn scratch(ext: &str, data: &[u8]) -> PathBuf {
    let base = match std::env::var_os("TIERKIT_FUZZ_SCRATCH") {
        Some(d) => PathBuf::from(d),
        None if std::path::Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    };
    let dir = base.join(format!("tierkit-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the scratch directory");
    let path = dir.join(format!("input.{ext}"));
    std::fs::write(&path, data).expect("writing the scratch file");
    path
}

/// The error contract: an error caused by input is a user error (exit status 2, never the
/// "bug in tierkit" status 3), printed as one line of bounded length.
pub fn check_error(e: &Error) {
    let line = e.to_string();
    assert!(e.is_user_error(), "input gave an internal error: {line}");
    assert!(!line.contains(['\n', '\r']), "error is not one line: {line:?}");
    assert!(!line.chars().any(char::is_control), "error holds a control character: {line:?}");
    let max = match e {
        Error::BadTrace { .. } => MAX_PATH_CHARS + 2 + MAX_LOCATION_CHARS + MAX_MSG_CHARS,
        Error::BadConfig { .. } => MAX_KEY_CHARS + 2 + MAX_MSG_CHARS,
        Error::Io { .. } => MAX_PATH_CHARS + 2 + MAX_MSG_CHARS,
        _ => MAX_MSG_CHARS + 40,
    };
    let n = line.chars().count();
    assert!(n <= max, "error line of {n} characters (at most {max}): {line}");
}

/// Check the contract on an `Err`, pass an `Ok` through.
pub fn ok<T>(r: tierkit_core::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

/// What reading a trace to its end gave.
#[derive(Debug, PartialEq, Eq)]
pub struct Reading {
    /// `Ok(records)` or the error line.
    pub outcome: Result<u64, String>,
    /// Every field of every record read, in order (up to the error, if any).
    pub full: u64,
    /// Only the page, direction, size and thread of each access and the events: what a
    /// consumer that does not decode addresses, instruction counts and times sees.
    pub pages: u64,
}

/// Read `src` to its end (or its first error), fingerprinting the records.
pub fn read_to_end(src: &mut dyn RecordSource) -> Reading {
    let shift = src.meta().page_size.trailing_zeros();
    let (mut full, mut pages) = (DefaultHasher::new(), DefaultHasher::new());
    let mut records = 0u64;
    let mut b = Batch::default();
    let outcome = loop {
        match src.next_batch(&mut b) {
            Ok(true) => {
                records += b.records() as u64;
                fingerprint(&b, shift, &mut full, &mut pages);
            }
            Ok(false) => break Ok(records),
            Err(e) => {
                check_error(&e);
                break Err(e.to_string());
            }
        }
    };
    Reading { outcome, full: full.finish(), pages: pages.finish() }
}

fn fingerprint(b: &Batch, shift: u32, full: &mut DefaultHasher, pages: &mut DefaultHasher) {
    for i in 0..b.len() {
        let page = if b.addr.is_empty() { b.dict_pages[b.dict_idx[i] as usize] << b.dict_shift >> shift } else { b.addr[i] >> shift };
        (page, b.write[i], b.size_at(i), b.tid_at(i)).hash(pages);
        if !b.addr.is_empty() {
            (b.addr[i], b.write[i], b.insn_at(i), b.ns_at(i), b.size_at(i), b.tid_at(i), b.pc_at(i)).hash(full);
        }
    }
    for e in &b.events {
        let s = format!("{e:?}");
        s.hash(full);
        (e.at, &e.kind).hash_debug(pages);
    }
}

trait HashDebug {
    fn hash_debug(&self, h: &mut DefaultHasher);
}
impl<T: std::fmt::Debug> HashDebug for T {
    fn hash_debug(&self, h: &mut DefaultHasher) {
        format!("{self:?}").hash(h);
    }
}

/// Read the trace at `input` three ways: every column directly, every column through the
/// read-ahead thread, and pages only (as the `simple` timing model with `first-touch` reads
/// it). Asserts that they agree: accepting or rejecting a trace, and what it holds, must not
/// depend on how or how much of it is decoded (docs/fuzzing.md). Returns the direct reading.
pub fn read_three_ways(input: &TraceInput) -> Option<Reading> {
    let direct = read_to_end(ok(input.open())?.as_mut());

    let mut ahead_src = ReadAhead::new(ok(input.open())?);
    let ahead = read_to_end(&mut ahead_src);
    assert_eq!(direct, ahead, "read-ahead reads differently from a direct read");

    let mut src = ok(input.open())?;
    src.set_projection(Projection { insn: false, ns: false, addr: false });
    let lean = read_to_end(src.as_mut());
    assert_eq!(
        (direct.outcome.is_ok(), direct.pages),
        (lean.outcome.is_ok(), lean.pages),
        "reading pages only accepts or reads differently from reading every column: {:?} vs {:?}",
        direct.outcome,
        lean.outcome
    );
    if let (Ok(a), Ok(b)) = (&direct.outcome, &lean.outcome) {
        assert_eq!(a, b, "record counts differ by projection");
    }
    Some(direct)
}

/// A text importer target: the bytes as a trace of `format`, read three ways, and format
/// detection (which tries every importer on the first lines).
/// Returns the scratch file's path.
pub fn text_target(format: tierkit_core::trace::Format, data: &[u8]) -> PathBuf {
    let path = scratch("trace", data);
    ok(tierkit_core::trace::input::detect(&path));
    let input = TraceInput::new(&path).with_format(Some(format));
    if let Some(reading) = read_three_ways(&input) {
        convert_round_trip(&input, &reading);
    }
    path
}

/// A platform file target: the bytes as a platform file with extension `ext`, loaded by
/// [`Platform::load`](tierkit_core::platform::Platform::load) as `--platform` does. A loaded
/// platform must survive what a run does with it: resolving capacities for a footprint, the
/// loaded-latency curve at any utilisation, and a round trip through JSON (results record
/// their platform as JSON) that loads back to the same, valid platform.
pub fn platform_target(ext: &str, data: &[u8]) {
    use tierkit_core::platform::{loaded_latency_factor, Platform};
    use tierkit_core::units::Capacity;
    let path = scratch(ext, data);
    let Some(p) = ok(Platform::load(path.to_str().unwrap())) else { return };
    for footprint_pages in [0u64, 1, 1000, u32::MAX as u64, u64::MAX] {
        for page_size in [4096u64, 1 << 21] {
            ok(p.resolve(footprint_pages, page_size, &[]));
            ok(p.resolve(footprint_pages, page_size, &[(0, Capacity::Fraction(0.5)), (1, Capacity::Bytes(1 << 30))]));
        }
    }
    for t in &p.tiers {
        for u in [0.0, 0.5, 1.0, 2.0, f64::INFINITY] {
            let f = loaded_latency_factor(&t.loaded_latency, u);
            assert!(f.is_finite() && f > 0.0, "loaded latency factor {f} at utilisation {u}");
            // docs/limits.md: every result stays finite, a runtime being a sum of at most
            // 2^64 accesses, each at its tier's (loaded) latency
            let worst = t.read_latency_ns.max(t.write_latency_ns) * f * 2f64.powi(64);
            assert!(
                worst.is_finite(),
                "tier {} at utilisation {u}: latency {} ns × factor {f} can make a runtime infinite",
                t.name,
                t.read_latency_ns.max(t.write_latency_ns)
            );
        }
    }
    let json = serde_json::to_string(&p).expect("a platform serializes");
    let again = scratch("json", json.as_bytes());
    let q = Platform::load(again.to_str().unwrap()).unwrap_or_else(|e| panic!("a valid platform written as JSON does not load back: {e}\n{json}"));
    assert_eq!(p, q, "a platform changes in a JSON round trip");
}

/// Make an empty scratch directory the current one (for targets whose input may name files).
pub fn enter_empty_dir() {
    let dir = scratch("unused", b"").with_file_name("empty");
    std::fs::create_dir_all(&dir).expect("creating the empty directory");
    std::env::set_current_dir(&dir).expect("entering the empty directory");
}

/// `trace convert` of an accepted trace to the native format must succeed and read back to
/// the same records: what one consumer accepts, every consumer accepts (traces that
/// `simulate` ran used to be refused by `trace convert`).
pub fn convert_round_trip(input: &TraceInput, reading: &Reading) {
    let Ok(records) = reading.outcome else { return };
    let out = scratch("out.tkt", b"");
    let report = tierkit_core::trace::convert::convert(input, &out, None, true, None);
    if let Err(e) = &report {
        panic!("a trace read to its end without error cannot be converted: {e}");
    }
    let back = read_to_end(ok(TraceInput::new(&out).open()).expect("the converted trace opens").as_mut());
    assert_eq!(back.outcome, Ok(records), "the converted trace reads differently");
    assert_eq!(back.full, reading.full, "the converted trace holds other records");
}
