//! The ChampSim importers (`--format champsim` and `champsim-cloudsuite`): fixed-size
//! instruction records, read to the end as `simulate` and `trace convert` read them, with
//! read-ahead on and off and with every column or pages only, after format detection on the
//! same file. The input's first byte chooses: bit 0 the layout (64-byte `input_instr` or
//! 96-byte `cloudsuite_instr`), bit 1 whether the rest is written gzip-compressed (so that the
//! decompressor's errors are exercised too); the rest is the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use tierkit_core::trace::{Format, TraceInput};
use tierkit_fuzz::{convert_round_trip, ok, read_three_ways, scratch};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let format = if mode & 1 == 0 { Format::Champsim } else { Format::ChampsimCloudsuite };
    let bytes = if mode & 2 == 0 {
        rest.to_vec()
    } else {
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        g.write_all(rest).unwrap();
        g.finish().unwrap()
    };
    let path = scratch("champsim", &bytes);
    // detection on any bytes: a format, or an error that keeps the contract
    if let Some(f) = ok(tierkit_core::trace::input::detect(&path)) {
        if rest.len() < 60_000 && mode & 2 == 0 && matches!(f, Format::Champsim | Format::ChampsimCloudsuite) {
            // a small plain file detected as a layout is whole records of it: it reads to the end
            let r = read_three_ways(&TraceInput::new(&path).with_format(Some(f))).expect("a detected ChampSim trace opens");
            assert!(r.outcome.is_ok(), "a detected ChampSim trace fails to read: {:?}", r.outcome);
        }
    }
    let input = TraceInput::new(&path).with_format(Some(format));
    if let Some(reading) = read_three_ways(&input) {
        convert_round_trip(&input, &reading);
    }
});
