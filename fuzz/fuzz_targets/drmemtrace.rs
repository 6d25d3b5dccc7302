//! The drmemtrace importer (`--format drmemtrace`): thread files of 12-byte `trace_entry_t`
//! records, read to the end as `simulate` and `trace convert` read them, with read-ahead on
//! and off and with every column or pages only, after format detection. The input's first
//! byte chooses the container of the rest:
//!
//! - 0: one plain thread file (`*.trace`);
//! - 1: the bytes as a zip archive (`*.trace.zip`: the archive reader and its checks);
//! - 2: the records cut into chunks of the next byte's number of records (at least 1), in a zip
//!   archive, deflated or stored by that byte's top bit;
//! - 3: the records cut in two at the next byte's number of records: two thread files in a
//!   directory, interleaved by their timestamps.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use std::path::Path;
use tierkit_core::trace::drmemtrace::ENTRY;
use tierkit_core::trace::{Format, TraceInput};
use tierkit_fuzz::{convert_round_trip, ok, read_three_ways, scratch};

fn zip_of(path: &Path, chunks: &[&[u8]], deflate: bool) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if deflate { zip::CompressionMethod::Deflated } else { zip::CompressionMethod::Stored };
    for (i, c) in chunks.iter().enumerate() {
        z.start_file(format!("chunk.{i:04}"), zip::write::SimpleFileOptions::default().compression_method(method)).unwrap();
        z.write_all(c).unwrap();
    }
    z.finish().unwrap();
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let path = match mode % 4 {
        0 => scratch("trace", rest),
        1 => scratch("trace.zip", rest),
        2 => {
            let Some((&k, recs)) = rest.split_first() else { return };
            let per = ENTRY * ((k & 0x7f) as usize).max(1);
            let chunks: Vec<&[u8]> = recs.chunks(per).collect();
            let p = scratch("trace.zip", b"");
            zip_of(&p, &chunks, k & 0x80 != 0);
            p
        }
        _ => {
            let Some((&k, recs)) = rest.split_first() else { return };
            let cut = (k as usize * ENTRY).min(recs.len());
            let dir = scratch("unused", b"").with_file_name("drmemtrace.fuzz.dir");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("trace")).unwrap();
            std::fs::write(dir.join("trace/a.trace"), &recs[..cut]).unwrap();
            std::fs::write(dir.join("trace/b.trace"), &recs[cut..]).unwrap();
            dir
        }
    };
    ok(tierkit_core::trace::input::detect(&path));
    let input = TraceInput::new(&path).with_format(Some(Format::Drmemtrace));
    if let Some(reading) = read_three_ways(&input) {
        convert_round_trip(&input, &reading);
    }
});
