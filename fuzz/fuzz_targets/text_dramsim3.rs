//! The `dramsim3` text importer (`--format dramsim3`), read to the end as `simulate` and
//! `trace convert` read it, with read-ahead on and off and with every column or pages only;
//! then again with the memory clock (`tck_ps`) that converts its cycles to nanoseconds. The
//! input's first two bytes are the clock period in ps (0: refused), the rest the trace.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::trace::{text, Format};
use tierkit_fuzz::{ok, read_to_end};

fuzz_target!(|data: &[u8]| {
    let Some((clock, trace)) = data.split_first_chunk::<2>() else { return };
    let path = tierkit_fuzz::text_target(Format::Dramsim3, trace);
    if let Some(mut src) = ok(text::open_dramsim3(&path, u16::from_le_bytes(*clock) as u64)) {
        read_to_end(src.as_mut());
    }
});
