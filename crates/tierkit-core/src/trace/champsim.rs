//! ChampSim traces: a stream of fixed-size instruction records, usually xz- or
//! gzip-compressed (`*.champsimtrace.xz`). Two layouts (docs/trace-format.md, "champsim"):
//!
//! - `champsim`: ChampSim's `input_instr`, 64 bytes: `ip` (u64), `is_branch` (u8),
//!   `branch_taken` (u8), `destination_registers[2]` (u8), `source_registers[4]` (u8),
//!   `destination_memory[2]` (u64), `source_memory[4]` (u64), little-endian, no padding;
//! - `champsim-cloudsuite`: `cloudsuite_instr`, 96 bytes: the same fields with 4 destination
//!   registers and 4 destination memory slots, then `asid[2]` (u8), with C's padding (6 bytes
//!   after the registers, 6 at the end).
//!
//! Each record is one instruction, the `n`-th (from 1) at instruction count `n`: its nonzero
//! `source_memory` slots are loads, then its nonzero `destination_memory` slots stores, each
//! one access of one cache line (the format has no sizes) at the instruction's pc. Slots are
//! taken as they are, a repeated address as a repeated access, as ChampSim's simulator takes
//! them (ChampSim's own tracer never repeats an address within one instruction's slots).

use super::stream::{self, Stream};
use super::{Access, Batch, Format, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// One of the two record layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per record.
    pub size: usize,
    /// Offset of `destination_memory` and its slots.
    dst_at: usize,
    dst_slots: usize,
    /// Offset of `source_memory` (always 4 slots).
    src_at: usize,
    /// Offset of `asid[2]`, when the layout has one.
    asid_at: Option<usize>,
    format: Format,
}

/// ChampSim's `input_instr`.
pub const STANDARD: Layout = Layout { size: 64, dst_at: 16, dst_slots: 2, src_at: 32, asid_at: None, format: Format::Champsim };
/// ChampSim's `cloudsuite_instr`.
pub const CLOUDSUITE: Layout = Layout { size: 96, dst_at: 24, dst_slots: 4, src_at: 56, asid_at: Some(88), format: Format::ChampsimCloudsuite };

const SRC_SLOTS: usize = 4;

impl Layout {
    pub fn for_format(f: Format) -> Option<Layout> {
        match f {
            Format::Champsim => Some(STANDARD),
            Format::ChampsimCloudsuite => Some(CLOUDSUITE),
            _ => None,
        }
    }
    fn u64_at(rec: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(rec[at..at + 8].try_into().unwrap())
    }
    fn ip(&self, rec: &[u8]) -> u64 {
        Self::u64_at(rec, 0)
    }
    fn src(&self, rec: &[u8], i: usize) -> u64 {
        Self::u64_at(rec, self.src_at + 8 * i)
    }
    fn dst(&self, rec: &[u8], i: usize) -> u64 {
        Self::u64_at(rec, self.dst_at + 8 * i)
    }
}

/// Records per read from the decompressor.
const RECORDS_PER_READ: usize = 4096;

/// A ChampSim trace being read.
pub struct ChampsimSource {
    stream: Stream,
    layout: Layout,
    meta: TraceMeta,
    path: String,
    buf: Vec<u8>,
    /// Records read so far (the instruction count of the last one).
    records: u64,
    done: bool,
    /// `champsim-cloudsuite`: the first record's address-space id, and the records whose id differs.
    first_asid: Option<[u8; 2]>,
    other_asid: u64,
}

impl ChampsimSource {
    pub fn open(path: &Path, format: Format) -> Result<ChampsimSource> {
        let layout = Layout::for_format(format).ok_or_else(|| Error::config("--format", format!("{format} is not a ChampSim format")))?;
        let stream = Stream::open(path)?;
        let mut meta = TraceMeta { time_insn: true, has_pc: true, post_cache: false, line_size: 64, ..Default::default() };
        meta.provenance.tool = format!("import:{}", format.name());
        meta.provenance.tool_version = env!("CARGO_PKG_VERSION").to_string();
        meta.provenance.source_format = Some(format.name().to_string());
        meta.provenance.source_file = path.file_name().map(|s| s.to_string_lossy().into_owned());
        meta.notes.insert("address_space".into(), "virtual".into());
        let layout_note = match format {
            Format::ChampsimCloudsuite => "cloudsuite_instr, 96-byte records",
            _ => "input_instr, 64-byte records",
        };
        meta.notes.insert("champsim.layout".into(), layout_note.into());
        Ok(ChampsimSource {
            stream,
            layout,
            meta,
            path: path.display().to_string(),
            buf: vec![0; RECORDS_PER_READ * layout.size],
            records: 0,
            done: false,
            first_asid: None,
            other_asid: 0,
        })
    }

    /// Decode whole records of `self.buf[..n]`, pushing their accesses.
    fn decode(&mut self, n: usize, out: &mut Batch) {
        let l = self.layout;
        for rec in self.buf[..n].chunks_exact(l.size) {
            self.records += 1;
            let insn = self.records;
            let pc = l.ip(rec);
            for i in 0..SRC_SLOTS {
                let addr = l.src(rec, i);
                if addr != 0 {
                    out.push(&Access { addr, write: false, insn, size: 64, pc, ..Default::default() });
                }
            }
            for i in 0..l.dst_slots {
                let addr = l.dst(rec, i);
                if addr != 0 {
                    out.push(&Access { addr, write: true, insn, size: 64, pc, ..Default::default() });
                }
            }
            if let Some(at) = l.asid_at {
                let asid = [rec[at], rec[at + 1]];
                match self.first_asid {
                    None => self.first_asid = Some(asid),
                    Some(first) if first != asid => self.other_asid += 1,
                    Some(_) => {}
                }
            }
        }
    }
}

impl RecordSource for ChampsimSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        // a read of RECORDS_PER_READ records adds at most 8 accesses per record
        while !self.done && batch.len() + RECORDS_PER_READ * 8 <= BATCH_RECORDS {
            let offset = self.records * self.layout.size as u64;
            let n =
                stream::read_full(&mut self.stream.reader, &mut self.buf).map_err(|e| stream::read_error(&self.path, self.stream.compression, offset, e))?;
            let whole = n - n % self.layout.size;
            self.decode(whole, batch);
            if n < self.buf.len() {
                self.done = true;
                if whole < n {
                    let at = self.records * self.layout.size as u64;
                    return Err(Error::at_offset(
                        &self.path,
                        at,
                        format!(
                            "truncated trace{}: the data ends inside instruction record {} ({} of its {} bytes present)",
                            self.stream.compression.offset_note(),
                            self.records + 1,
                            n - whole,
                            self.layout.size
                        ),
                    ));
                }
            }
        }
        Ok(!batch.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.stream.bytes_read(), bytes_total: Some(self.stream.total) }
    }

    fn digest(&self) -> Option<String> {
        Some(self.stream.digest())
    }

    fn import_losses(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        if self.other_asid > 0 {
            m.insert("other_asid".to_string(), self.other_asid);
        }
        m
    }

    fn name(&self) -> &str {
        &self.path
    }
}

/// Records that format detection checks (at most).
const SNIFF_RECORDS: usize = 4096;
/// Records detection needs to decide.
pub const SNIFF_MIN_RECORDS: usize = 4;

/// Could `a` be a 64-bit virtual address: bits 63..47 all equal (x86-64's 48-bit canonical
/// form, which AArch64's and SPARC's user and kernel addresses also have)?
fn canonical(a: u64) -> bool {
    let top = a >> 47;
    top == 0 || top == (1 << 17) - 1
}

/// Does `head` (the first decompressed bytes of a file; `complete`: all of them) read as
/// records of `l`? `Err` says why not. The rules (docs/trace-format.md, "champsim"):
/// a complete file's length is a multiple of the record size; there are at least
/// [`SNIFF_MIN_RECORDS`] records; in each of the first 4096, `ip` is nonzero, `is_branch` and
/// `branch_taken` are 0 or 1, and `ip` and every memory slot are 0 or canonical addresses;
/// and at least 3/4 of the records that follow a non-branch are at 0 to 16 bytes past its
/// `ip` (straight-line code: instructions follow each other).
pub fn plausible(l: Layout, head: &[u8], complete: bool) -> std::result::Result<(), String> {
    let name = l.format.name();
    let cut = head.len() % l.size;
    if complete && cut != 0 {
        return Err(format!("{name}: {} bytes are not whole {}-byte records", head.len(), l.size));
    }
    let n = (head.len() / l.size).min(SNIFF_RECORDS);
    if n < SNIFF_MIN_RECORDS {
        return Err(format!("{name}: fewer than {SNIFF_MIN_RECORDS} records"));
    }
    let recs: Vec<&[u8]> = head.chunks_exact(l.size).take(n).collect();
    for (i, r) in recs.iter().enumerate() {
        let k = i + 1;
        let ip = l.ip(r);
        if ip == 0 || !canonical(ip) {
            return Err(format!("{name}: record {k}: ip {ip:#x} is no code address"));
        }
        if r[8] > 1 || r[9] > 1 {
            return Err(format!("{name}: record {k}: branch flags {},{} are not 0 or 1", r[8], r[9]));
        }
        let mut slots = (0..SRC_SLOTS).map(|j| l.src(r, j)).chain((0..l.dst_slots).map(|j| l.dst(r, j)));
        if let Some(a) = slots.find(|&a| a != 0 && !canonical(a)) {
            return Err(format!("{name}: record {k}: address {a:#x} is no virtual address"));
        }
    }
    let (mut pairs, mut straight) = (0usize, 0usize);
    for w in recs.windows(2) {
        if w[0][8] == 0 {
            pairs += 1;
            straight += (l.ip(w[1]).wrapping_sub(l.ip(w[0])) <= 16) as usize;
        }
    }
    if pairs == 0 || straight * 4 < pairs * 3 {
        return Err(format!("{name}: instructions not in sequence ({straight} of {pairs} non-branches fall through)"));
    }
    Ok(())
}

/// Which ChampSim layout `head` holds, if exactly one fits.
pub fn sniff(head: &[u8], complete: bool) -> std::result::Result<Format, String> {
    match (plausible(STANDARD, head, complete), plausible(CLOUDSUITE, head, complete)) {
        (Ok(()), Ok(())) => Err("it could be champsim or champsim-cloudsuite".into()),
        (Ok(()), Err(_)) => Ok(Format::Champsim),
        (Err(_), Ok(())) => Ok(Format::ChampsimCloudsuite),
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-byte record: ip, branch flags, loads and stores.
    fn rec(ip: u64, branch: bool, loads: &[u64], stores: &[u64]) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[..8].copy_from_slice(&ip.to_le_bytes());
        r[8] = branch as u8;
        for (i, a) in stores.iter().enumerate() {
            r[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        for (i, a) in loads.iter().enumerate() {
            r[32 + 8 * i..40 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        r
    }

    fn program(n: usize) -> Vec<u8> {
        (0..n).flat_map(|i| rec(0x401000 + 4 * i as u64, i % 5 == 4, &[0x7fff_0000 + 8 * i as u64], &[])).collect()
    }

    #[test]
    fn sniff_accepts_straight_line_code_and_rejects_other_bytes() {
        let p = program(50);
        assert_eq!(sniff(&p, true), Ok(Format::Champsim));
        // a file cut inside a record is not a complete champsim file, but its head may be
        assert!(sniff(&p[..p.len() - 3], true).is_err());
        assert_eq!(sniff(&p[..p.len() - 3], false), Ok(Format::Champsim));
        // too few records to say
        assert!(sniff(&p[..3 * 64], true).unwrap_err().contains("fewer than 4"));
        // text is no ChampSim
        let text = "0 9618752\n3 89528192 140734746854976\n".repeat(20);
        assert!(sniff(text.as_bytes(), true).is_err());
        // a branch flag of 7
        let mut q = p.clone();
        q[64 + 8] = 7;
        assert!(sniff(&q, true).unwrap_err().contains("record 2: branch flags 7,0"));
        // random jumps everywhere: not instructions in sequence
        let r: Vec<u8> = (0..50u64).flat_map(|i| rec(0x401000 + (i * 7919 % 50) * 4096, false, &[], &[])).collect();
        assert!(sniff(&r, true).unwrap_err().contains("not in sequence"));
    }

    #[test]
    fn canonical_addresses() {
        assert!(canonical(0x7fff_ffff_ffff) && canonical(0xffff_8000_0000_0000) && canonical(1));
        assert!(!canonical(0x0000_8000_0000_0000) && !canonical(0x3031_3233_3435_3637));
    }
}
