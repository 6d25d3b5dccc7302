//! Inputs that the libFuzzer targets of `fuzz/` (docs/fuzzing.md) found to break tierkit,
//! each replayed here through the same public entry point, so that `cargo test` keeps them
//! fixed without a fuzzing toolchain. Each is also a seed of its target
//! (`fuzz/seeds/TARGET/regression-*`). The contract they check is issue 15's: bad input gets
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
        (b"0x7P\0\0\0\0\0\0\00x7f\n", Format::Hex),
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
