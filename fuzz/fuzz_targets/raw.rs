//! The raw stream of tierkit's Valgrind tool (`tracer/tk_main.c`), decoded as `trace record`
//! decodes it: header, then every record to the end record or the end of input; and the
//! Valgrind log parser that `trace record` runs over the tool's messages.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::trace::raw::{parse_valgrind_log, RawSource};
use tierkit_fuzz::{ok, read_to_end};

fuzz_target!(|data: &[u8]| {
    if let Some(mut src) = ok(RawSource::new(data, "tool stream")) {
        read_to_end(&mut src);
        // a stream that stopped early says why, and one that ended cleanly has its end record
        let _ = (src.end(), src.cut_short(), src.time(), src.forks(), src.ended_in_exec());
    }
    let (messages, place) = parse_valgrind_log(&String::from_utf8_lossy(data));
    for m in messages.iter().chain(place.iter()) {
        assert!(!m.contains('\n'), "a log message spans lines: {m:?}");
    }
});
