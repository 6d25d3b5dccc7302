//! The native trace reader (`.tkt`): file header, data chunks and their columns, the end
//! chunk's summary and the trailer, read to the end as `simulate` and `trace convert` read it
//! (format detection, then every record), with read-ahead on and off and with every column or
//! pages only; then the instant summary that `trace info` reads from the trailer, and
//! `trace convert` of an accepted trace, which must read back to the same records.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::trace::tkt::TktReader;
use tierkit_core::trace::{Format, TraceInput};
use tierkit_fuzz::{ok, read_three_ways, read_to_end};

fuzz_target!(|data: &[u8]| {
    let path = tierkit_fuzz::scratch("tkt", data);
    // detection (what a path without --format goes through) must agree with the magic number
    let detected = ok(tierkit_core::trace::input::detect(&path));
    if data.starts_with(tierkit_core::trace::tkt::MAGIC) {
        assert_eq!(detected, Some(Format::Tkt));
    }
    let input = TraceInput::new(&path).with_format(Some(Format::Tkt));
    let Some(reading) = read_three_ways(&input) else { return };
    tierkit_fuzz::convert_round_trip(&input, &reading);
    let instant = ok(TktReader::read_summary(&path));
    if reading.outcome.is_ok() {
        // a trace read to its end without error has a valid trailer and end chunk, and the
        // summary found through the trailer is the one at the end of the records
        let (_, s) = instant.expect("a trace that reads to its end has a readable summary");
        let mut r = TktReader::open(&path).expect("opened before");
        assert!(read_to_end(&mut r).outcome.is_ok());
        assert_eq!(r.summary(), Some(&s), "the trailer's summary differs from the end chunk read in order");
        assert_eq!(ok(input.summary()), Some(s));
    }
});
