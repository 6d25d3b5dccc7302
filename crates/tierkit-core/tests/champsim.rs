//! The ChampSim importers (docs/trace-format.md, sections 23 and 24): files made here from
//! the layouts of ChampSim's `inc/trace_instruction.h` (`input_instr`, `cloudsuite_instr`),
//! plain, gzip and xz, read field by field, detected (and binary files of no known format
//! refused without quoting them), and refused with one clear line when truncated or corrupt.

use std::collections::BTreeMap;
use tierkit_core::trace::input::detect;
use tierkit_core::trace::summary::scan;
use tierkit_core::trace::tkt::TktReader;
use tierkit_core::trace::{Access, Format, TraceInput};

mod common;
use common::{read_err, rows, write_file as write};

/// A ChampSim `input_instr` (64 bytes): ip, is_branch, branch_taken, destination_registers[2],
/// source_registers[4], destination_memory[2], source_memory[4].
fn champsim(ip: u64, branch: bool, src: &[u64], dst: &[u64]) -> Vec<u8> {
    let mut r = vec![0u8; 64];
    r[..8].copy_from_slice(&ip.to_le_bytes());
    r[8] = branch as u8;
    r[9] = branch as u8;
    r[10] = 1; // a destination register, as real traces have
    r[12] = 2;
    for (i, a) in dst.iter().enumerate() {
        r[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    for (i, a) in src.iter().enumerate() {
        r[32 + 8 * i..40 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    r
}

/// A ChampSim `cloudsuite_instr` (96 bytes): ip, is_branch, branch_taken,
/// destination_registers[4], source_registers[4], 6 bytes of padding, destination_memory[4],
/// source_memory[4], asid[2], 6 bytes of padding.
fn cloudsuite(ip: u64, src: &[u64], dst: &[u64], asid: [u8; 2]) -> Vec<u8> {
    let mut r = vec![0u8; 96];
    r[..8].copy_from_slice(&ip.to_le_bytes());
    r[14] = 3;
    for (i, a) in dst.iter().enumerate() {
        r[24 + 8 * i..32 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    for (i, a) in src.iter().enumerate() {
        r[56 + 8 * i..64 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    r[88..90].copy_from_slice(&asid);
    r
}

fn champsim_sample() -> Vec<u8> {
    [
        champsim(0x401000, false, &[0x7ffe0010], &[]),
        champsim(0x401004, false, &[], &[]),
        champsim(0x401008, false, &[0x601000, 0x601040], &[0x7ffe0020]),
        champsim(0x40100c, true, &[], &[]),
        champsim(0x401010, false, &[0x601080, 0, 0x6010c0], &[0x601080]),
        champsim(0x401014, false, &[0x5000, 0x5000], &[]),
    ]
    .concat()
}

fn acc(addr: u64, write: bool, insn: u64, size: u16, tid: u32, pc: u64) -> Access {
    Access { addr, write, insn, ns: 0, size, tid, pc }
}

fn champsim_expected() -> Vec<Access> {
    vec![
        acc(0x7ffe0010, false, 1, 64, 0, 0x401000),
        acc(0x601000, false, 3, 64, 0, 0x401008),
        acc(0x601040, false, 3, 64, 0, 0x401008),
        acc(0x7ffe0020, true, 3, 64, 0, 0x401008),
        acc(0x601080, false, 5, 64, 0, 0x401010),
        acc(0x6010c0, false, 5, 64, 0, 0x401010),
        acc(0x601080, true, 5, 64, 0, 0x401010),
        acc(0x5000, false, 6, 64, 0, 0x401014),
        acc(0x5000, false, 6, 64, 0, 0x401014),
    ]
}

#[test]
fn champsim_records_become_loads_then_stores_plain_gzip_and_xz() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = champsim_sample();
    for name in ["t.champsimtrace", "t.champsimtrace.gz", "t.champsimtrace.xz", "no-suffix"] {
        let p = write(dir.path(), name, &bytes);
        assert_eq!(detect(&p).unwrap(), Format::Champsim, "{name}");
        let input = TraceInput::new(&p);
        let mut src = input.open().unwrap();
        assert_eq!(rows(src.as_mut()), champsim_expected(), "{name}");
        let m = src.meta();
        assert!(m.time_insn && m.has_pc && !m.post_cache && !m.time_ns, "{name}");
        assert_eq!(m.provenance.tool, "import:champsim");
        assert_eq!(m.provenance.source_file.as_deref(), Some(name));
        assert_eq!(m.notes["champsim.layout"], "input_instr, 64-byte records");
        assert_eq!(src.digest().unwrap(), blake3::hash(&std::fs::read(&p).unwrap()).to_hex().to_string());
        assert!(src.import_losses().is_empty());
        let s = input.summary().unwrap();
        assert_eq!((s.accesses, s.reads, s.writes, s.duration_insn, s.threads), (9, 7, 2, 5, 1));
        assert!(s.import_losses.is_empty());
    }
}

#[test]
fn cloudsuite_records_and_their_address_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = [
        cloudsuite(0x10000, &[0x20000], &[], [1, 1]),
        cloudsuite(0x10004, &[], &[0x20040, 0, 0, 0x20080], [1, 1]),
        cloudsuite(0x10008, &[], &[], [1, 1]),
        cloudsuite(0x1000c, &[0x30000, 0x30040, 0x30080, 0x300c0], &[0x30100, 0x30140, 0x30180, 0x301c0], [2, 2]),
        cloudsuite(0x10010, &[], &[], [2, 2]),
    ]
    .concat();
    for name in ["c.trace.xz", "c.trace"] {
        let p = write(dir.path(), name, &bytes);
        assert_eq!(detect(&p).unwrap(), Format::ChampsimCloudsuite, "{name}");
        let mut src = TraceInput::new(&p).open().unwrap();
        let got = rows(src.as_mut());
        let mut want = vec![acc(0x20000, false, 1, 64, 0, 0x10000), acc(0x20040, true, 2, 64, 0, 0x10004), acc(0x20080, true, 2, 64, 0, 0x10004)];
        want.extend([0x30000, 0x30040, 0x30080, 0x300c0].map(|a| acc(a, false, 4, 64, 0, 0x1000c)));
        want.extend([0x30100, 0x30140, 0x30180, 0x301c0].map(|a| acc(a, true, 4, 64, 0, 0x1000c)));
        assert_eq!(got, want);
        // two instructions ran in another address space than the first's
        assert_eq!(src.import_losses(), BTreeMap::from([("other_asid".to_string(), 2)]));
    }
    // the same bytes named as the 64-byte layout: read as such (no check), 480 = 7.5 records
    let p = write(dir.path(), "c2.trace", &bytes);
    let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Champsim)));
    assert!(e.contains("c2.trace") && e.contains("offset 448") && e.contains("record 8 (32 of its 64 bytes present)"), "{e}");
}

#[test]
fn champsim_truncated_and_corrupt_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = champsim_sample();
    bytes.truncate(5 * 64 + 10);
    let p = write(dir.path(), "cut.champsim", &bytes);
    let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Champsim)));
    assert!(e.contains("cut.champsim: offset 320: truncated trace: the data ends inside instruction record 6 (10 of its 64 bytes present)"), "{e}");
    // the same cut inside gzip: the offset is of the decompressed data
    let p = write(dir.path(), "cut.champsim.gz", &bytes);
    let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Champsim)));
    assert!(e.contains("offset 320") && e.contains("gunzipped"), "{e}");
    // an xz file cut short: a decompression error naming the file
    let p = write(dir.path(), "whole.champsim.xz", &champsim_sample().repeat(50));
    let xz = std::fs::read(&p).unwrap();
    let p = dir.path().join("cut.champsim.xz");
    std::fs::write(&p, &xz[..xz.len() / 2]).unwrap();
    let e = read_err(&TraceInput::new(&p).with_format(Some(Format::Champsim)));
    assert!(e.contains("cut.champsim.xz: offset ") && e.contains("corrupt xz data"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn binary_files_of_no_known_format_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // bytes that are no format at all, with NULs and control characters
    let junk: Vec<u8> = (0..4000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let p = write(dir.path(), "junk.bin", &junk);
    let e = detect(&p).unwrap_err().to_string();
    assert!(e.contains("junk.bin") && e.contains("binary data") && e.contains("--format") && e.contains("champsim"), "{e}");
    assert!(!e.chars().any(char::is_control), "{e:?}");
    // ChampSim records shuffled: no straight-line code
    let mut recs: Vec<Vec<u8>> = (0..40u64).map(|i| champsim(0x400000 + (i * 7919 % 40) * 0x10000, false, &[0x601000], &[])).collect();
    recs.rotate_left(3);
    let p = write(dir.path(), "shuffled.bin", &recs.concat());
    let e = detect(&p).unwrap_err().to_string();
    assert!(e.contains("champsim: instructions not in sequence"), "{e}");
    // too short to tell
    let p = write(dir.path(), "short.champsim", &champsim_sample()[..128]);
    assert!(detect(&p).unwrap_err().to_string().contains("fewer than 4 records"));
}

#[test]
fn text_and_native_traces_are_detected_as_before() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        ("0x7f001000\n0x7f001040 W\n", Format::Hex),
        ("0 9618752\n3 89528192 140734746854976\n", Format::Ramulator),
        ("10 140733193388032 4198400 1\n0 140733193388096 4198405 2\n", Format::Hma4),
        ("==1== Lackey\nI  0023C790,2\n S 04222CAC,4\n", Format::Lackey),
        ("0x12345680 READ 121\n0x12345700 WRITE 130\n", Format::Dramsim3),
    ] {
        for name in ["t.txt", "t.txt.gz"] {
            let p = write(dir.path(), name, text.as_bytes());
            assert_eq!(detect(&p).unwrap(), want, "{text:?} {name}");
        }
        // xz-compressed text is recognised and refused with what to do
        let p = write(dir.path(), "t.txt.xz", text.as_bytes());
        let e = detect(&p).unwrap_err().to_string();
        assert!(e.contains(&format!("an xz-compressed {want} trace")), "{e}");
    }
    // a native trace made from a ChampSim one is native
    let p = write(dir.path(), "t.champsim", &champsim_sample());
    let out = dir.path().join("t.tkt");
    tierkit_core::trace::convert::convert(&TraceInput::new(&p), &out, None, false, None).unwrap();
    assert_eq!(detect(&out).unwrap(), Format::Tkt);
    assert_eq!(rows(&mut TktReader::open(&out).unwrap()), champsim_expected());
}

#[test]
fn champsim_formats_have_names_and_summaries() {
    for (name, f) in [("champsim", Format::Champsim), ("champsim-cloudsuite", Format::ChampsimCloudsuite)] {
        assert_eq!(Format::parse("--format", name).unwrap(), f);
        assert_eq!(f.name(), name);
        assert!(!f.is_text());
        assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{name}\""));
    }
    // a scan and the summary agree
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "s.champsim", &champsim_sample());
    let a = scan(TraceInput::new(&p).open().unwrap().as_mut()).unwrap();
    assert_eq!(a, TraceInput::new(&p).summary().unwrap());
}
