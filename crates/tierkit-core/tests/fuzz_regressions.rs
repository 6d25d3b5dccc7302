//! Inputs that the libFuzzer targets of `fuzz/` (docs/fuzzing.md) found to break tierkit,
//! each replayed here through the same public entry point, so that `cargo test` keeps them
//! fixed without a fuzzing toolchain. Each is also a seed of its target
//! (`fuzz/seeds/TARGET/regression-*`). The contract they check is docs/limits.md's: bad input gets
//! one readable line (at most ~200 characters of message, naming the file and line, offset or
//! key) and exit status 2, never a panic or an "internal error"; what is accepted is
//! accepted whatever reads it.

use std::io::Write;
use tierkit_core::error::Error;
use tierkit_core::trace::{Format, TraceInput};

/// The error line's contract, as the fuzz targets assert it (fuzz/src/lib.rs `check_error`).
fn assert_clean_line(e: &Error) {
    let line = e.to_string();
    assert!(e.is_user_error(), "internal error for bad input: {line}");
    assert!(!line.chars().any(char::is_control), "error line holds a control character or line break: {line:?}");
}

fn text_trace(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f
}

/// The first error reading `bytes` as a trace of `format` to its end.
fn first_error(bytes: &[u8], format: Format) -> Error {
    let f = text_trace(bytes);
    let input = TraceInput::new(f.path()).with_format(Some(format));
    let mut src = input.open().unwrap();
    let mut b = tierkit_core::trace::Batch::default();
    loop {
        match src.next_batch(&mut b) {
            Ok(true) => continue,
            Ok(false) => panic!("{format}: {bytes:?} was accepted"),
            Err(e) => return e,
        }
    }
}

/// Found by every text target in its first seconds: a short token quoted back from the input
/// kept its control characters (NUL, DEL, and a vertical tab or form feed that terminals show
/// as a line break), because only text longer than one token went through the elision that
/// replaces them. Every text format, policy specs, cache specs and units were affected.
#[test]
fn short_tokens_with_control_characters_are_quoted_on_one_clean_line() {
    let cases: [(&[u8], Format); 6] = [
        (b"0x7P\0\0\0\0\0\0\x000x7f\n", Format::Hex),
        (b"3\0\0\0 20734016\n", Format::Ramulator),
        (b"\x01\x7f 1\n", Format::RamulatorNoWb),
        (b"4\x1c\0 0x1 0x2 1\n", Format::Hma4),
        (b"==12e\x0c4== =\n", Format::Lackey),
        (b"0xq\x0b1000 READ 12\n", Format::Dramsim3),
    ];
    for (bytes, format) in cases {
        let e = first_error(bytes, format);
        assert_clean_line(&e);
        assert!(e.to_string().contains("line 1"), "{e}");
    }
    let e = tierkit_core::policy::PolicySpec::parse("history:\u{3}").unwrap_err();
    assert_clean_line(&e);
    let e = tierkit_core::cache::CacheSpec::parse("--cache", "L1:8K\0\0:4").unwrap_err();
    assert_clean_line(&e);
    let e = tierkit_core::units::parse_bytes("--fast-capacity", "\0\0\0\u{4}").unwrap_err();
    assert_clean_line(&e);
    // a key that quotes the input is cleaned as the message is
    let e = tierkit_core::policy::PolicySpec::parse("\u{0}\n:\u{3}").unwrap_err();
    assert_clean_line(&e);
}

fn build(spec: &str) -> tierkit_core::Result<()> {
    tierkit_core::policy::build(&tierkit_core::policy::PolicySpec::parse(spec)?).map(|_| ())
}

/// Found by the policy_spec target: an integer parameter of -2^63 overflowed when negated (a
/// panic: "attempt to negate with overflow"), and one of 2^64 − 1 wrapped to −1, which
/// `min_free_kbytes` takes for "the kernel's formula" (Linux mm/page_alloc.c, as seed 004 §5
/// configures TPP): a wrong value accepted without a word.
#[test]
fn integer_parameters_out_of_64_bits_are_refused_not_wrapped() {
    for spec in ["history:bins=-9223372036854775808", "tpp:min_free_kbytes=18446744073709551615", "tpp:min_free_kbytes=9223372036854775808", "history:bins=--5"]
    {
        let e = build(spec).expect_err(spec);
        assert_clean_line(&e);
        let line = e.to_string();
        assert!(line.contains("bins") || line.contains("min_free_kbytes"), "{spec}: {line}");
    }
    // the edges that fit still parse to themselves
    build("tpp:min_free_kbytes=-1").unwrap();
    build("tpp:min_free_kbytes=1099511627776").unwrap();
}

/// Found by the guidance target: a guidance file's `context` of 2^64 − 1 (frames compared
/// per site minus one, docs/guidance.md; seed 002 §V-C's layers of context) overflowed when
/// one was added. Such a context compares every frame a trace recorded.
#[test]
fn a_guidance_context_of_any_size_reads() {
    let f = text_trace(br#"{"format":"tierkit-guidance","version":1,"mode":"static","tiers":["a","b"],"context":18446744073709551615,"arenas":[{"tiers":[0]}],"sites":[{"frames":["main (a.c:1)"],"arena":0}]}"#);
    let g = tierkit_core::policy::guided::Guidance::read(f.path().to_str().unwrap()).unwrap();
    assert_eq!(g.key_frames, usize::MAX);
}

/// Found reading the cache_spec target's checks against docs/limits.md: each `--cache`
/// level was bounded (2^24 lines) but not their number, so `L1:1G:16,L2:1G:16,...` asked for
/// 272 MiB of tags per level without end (as `--cache L1:1T:16` once asked for 128 GiB, one
/// level at a time; docs/limits.md). The tracer's stream already refuses more than 8 levels;
/// --cache now does too, naming the limit.
#[test]
fn a_cache_hierarchy_has_at_most_eight_levels() {
    let levels = |n: usize| (1..=n).map(|i| format!("L{i}:1G:16")).collect::<Vec<_>>().join(",");
    assert_eq!(tierkit_core::cache::CacheSpec::parse("--cache", &levels(8)).unwrap().unwrap().levels.len(), 8);
    let e = match tierkit_core::cache::CacheSpec::parse("--cache", &levels(300)) {
        Ok(_) => panic!("300 levels of 1 GiB accepted"),
        Err(e) => e,
    };
    assert_clean_line(&e);
    assert!(e.to_string().contains("at most 8"), "{e}");
}

/// Found by the platform targets' check of docs/limits.md ("every result is finite"): a
/// loaded-latency factor (docs/platforms.md; the MLC curves behind seed 004's DCPMM platform
/// reach 6.7) had no upper bound, so a latency of 1e9 ns at a factor of 1e300 is infinite.
#[test]
fn a_loaded_latency_factor_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let toml = |factor: &str| {
        format!(
            "name = \"x\"\n[[tiers]]\nname = \"fast\"\nread_latency_ns = 1e9\nwrite_latency_ns = 1e9\nread_bw_gb_per_s = 10\nwrite_bw_gb_per_s = 10\nloaded_latency = [[0.0, 1.0], [1.0, {factor}]]\n\
             [[tiers]]\nname = \"slow\"\nread_latency_ns = 300\nwrite_latency_ns = 300\nread_bw_gb_per_s = 5\nwrite_bw_gb_per_s = 5\n"
        )
    };
    let path = dir.path().join("p.toml");
    std::fs::write(&path, toml("1e300")).unwrap();
    let e = match tierkit_core::platform::Platform::load(path.to_str().unwrap()) {
        Ok(_) => panic!("a loaded-latency factor of 1e300 accepted"),
        Err(e) => e,
    };
    assert_clean_line(&e);
    assert!(e.to_string().contains("loaded_latency"), "{e}");
    std::fs::write(&path, toml("6.7")).unwrap();
    tierkit_core::platform::Platform::load(path.to_str().unwrap()).unwrap();
}

/// Peak resident memory of this process (Linux), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Found by the tkt target (a 10 s timeout in the `make test` build): a 514-byte trace whose
/// chunk header claims 185 MB of compressed data (under the 256 MiB chunk limit of
/// docs/trace-format.md) made the reader allocate and zero 185 MB before finding that the file
/// ends 240 bytes later. The size is now checked against what the file holds first.
#[test]
fn a_chunk_longer_than_the_file_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.tkt");
    let w = tierkit_core::trace::tkt::TktWriter::create(&good, &Default::default(), false).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&good).unwrap();
    // the header, then a data chunk header claiming 0x0b0b0b0b bytes, then 240 bytes
    let header_len = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize + 4;
    let mut bad = bytes[..header_len].to_vec();
    bad.extend([b'D', 0x18, 0, 0x0b, 0x0b]);
    bad.extend([0x0b; 252]);
    let path = dir.path().join("bad.tkt");
    std::fs::write(&path, &bad).unwrap();
    let before = peak_rss_kib();
    let mut src = TraceInput::new(&path).with_format(Some(Format::Tkt)).open().unwrap();
    let e = src.next_batch(&mut Default::default()).unwrap_err();
    if let (Some(a), Some(b)) = (before, peak_rss_kib()) {
        assert!(b - a < 64 << 10, "reading a {}-byte trace raised the peak memory by {} MiB", bad.len(), (b - a) >> 10);
    }
    assert_clean_line(&e);
    // the error names the chunk's offset and both sizes
    let line = e.to_string();
    assert!(line.contains(&format!("offset {header_len}")) && line.contains("185273099") && line.contains("240"), "{line}");
}
