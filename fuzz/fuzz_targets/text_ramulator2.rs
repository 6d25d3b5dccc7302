//! The `ramulator2` text importer (`--format ramulator2`, Ramulator 2's `LD`/`ST` memory
//! traces), read to the end as `simulate` and `trace convert` read it, plain or
//! gzip-compressed, with read-ahead on and off and with every column or pages only; `trace
//! convert` of an accepted trace, which must read back to the same records; and format
//! detection over the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::trace::Format;

fuzz_target!(|data: &[u8]| {
    tierkit_fuzz::text_target(Format::Ramulator2, data);
});
