//! A trace replayed several times as one continuous stream (`--repeat N`, docs/models.md).
//!
//! Short traces of real programs last milliseconds of simulated time, while the policies of
//! operating systems act every 0.1–40 s. Replaying the trace N times as ONE run gives such a
//! policy N times the time to act on real behaviour: the consumer sees a single stream in
//! which addresses repeat (so the same pages come back), instruction counts and timestamps
//! keep rising (each replay is offset by the last value of the replay before, so they stay
//! monotonic), and everything the consumer keeps (simulated time, placement, policy state)
//! simply carries over. Events (allocations, frees, site definitions, markers) replay with
//! the accesses they sit between; a site defined again is defined the same way.
//!
//! Every replay must read the same bytes: the digest of each pass is checked against the
//! first, so a file that changes under a run is an error, not a silently mixed result.

use super::{Batch, Progress, Projection, RecordSource, TraceMeta};
use crate::error::{Error, Result};

/// Opens one more pass of the trace.
pub type OpenPass = Box<dyn FnMut() -> Result<Box<dyn RecordSource>> + Send>;

/// `passes` replays of the source that `open` yields, as one stream.
pub struct RepeatSource {
    open: OpenPass,
    cur: Box<dyn RecordSource>,
    meta: TraceMeta,
    name: String,
    passes: u32,
    pass: u32,
    projection: Option<Projection>,
    insn_offset: u64,
    ns_offset: u64,
    last_insn: u64,
    last_ns: u64,
    first_digest: Option<String>,
    /// Bytes of one pass (known once the first pass ended).
    pass_bytes: u64,
}

impl RepeatSource {
    /// The first pass is opened here (its header is the stream's).
    pub fn new(passes: u32, mut open: OpenPass) -> Result<RepeatSource> {
        if passes == 0 {
            return Err(Error::config("--repeat", "0 replays: give at least 1"));
        }
        let cur = open()?;
        let meta = cur.meta().clone();
        let name = cur.name().to_string();
        Ok(RepeatSource {
            open,
            cur,
            meta,
            name,
            passes,
            pass: 0,
            projection: None,
            insn_offset: 0,
            ns_offset: 0,
            last_insn: 0,
            last_ns: 0,
            first_digest: None,
            pass_bytes: 0,
        })
    }

    /// Shift the batch's instruction counts and timestamps by the replay's offsets and note
    /// the last of each.
    fn offset(&mut self, b: &mut Batch) {
        if self.pass > 0 {
            for i in b.insn.iter_mut() {
                *i += self.insn_offset;
            }
            for t in b.ns.iter_mut() {
                *t += self.ns_offset;
            }
            for e in b.events.iter_mut() {
                e.insn += self.insn_offset;
                e.ns += self.ns_offset;
            }
        }
        // the last record may be an event after the last access: take the larger
        let ev_insn = b.events.last().map(|e| e.insn).unwrap_or(0);
        let ev_ns = b.events.last().map(|e| e.ns).unwrap_or(0);
        self.last_insn = self.last_insn.max(b.insn.last().copied().unwrap_or(0)).max(ev_insn);
        self.last_ns = self.last_ns.max(b.ns.last().copied().unwrap_or(0)).max(ev_ns);
    }
}

impl RecordSource for RepeatSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn set_projection(&mut self, p: Projection) {
        self.projection = Some(p);
        self.cur.set_projection(p);
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        loop {
            if self.cur.next_batch(batch)? {
                self.offset(batch);
                return Ok(true);
            }
            // the end of a pass
            let digest = self.cur.digest();
            if self.pass == 0 {
                self.first_digest = digest;
                let p = self.cur.progress();
                self.pass_bytes = p.bytes_total.unwrap_or(p.bytes_read);
            } else if digest != self.first_digest {
                return Err(Error::config(
                    &self.name,
                    format!("replay {} of the trace read different bytes from the first (the file changed during the run)", self.pass + 1),
                ));
            }
            if self.pass + 1 >= self.passes {
                return Ok(false);
            }
            self.pass += 1;
            self.cur = (self.open)()?;
            if let Some(p) = self.projection {
                self.cur.set_projection(p);
            }
            self.insn_offset = self.last_insn;
            self.ns_offset = self.last_ns;
        }
    }

    fn progress(&self) -> Progress {
        let p = self.cur.progress();
        let per_pass = if self.pass == 0 { p.bytes_total } else { Some(self.pass_bytes) };
        Progress { bytes_read: self.pass as u64 * self.pass_bytes + p.bytes_read, bytes_total: per_pass.map(|t| t * self.passes as u64) }
    }

    /// The digest of the trace (every pass reads the same bytes).
    fn digest(&self) -> Option<String> {
        if self.pass == 0 {
            self.cur.digest()
        } else {
            self.first_digest.clone()
        }
    }

    /// The losses of the pass being read (every pass reads the same records).
    fn import_losses(&self) -> std::collections::BTreeMap<String, u64> {
        self.cur.import_losses()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{read_all, Access, EventKind, MarkerKind, VecSource};

    fn source() -> Box<dyn RecordSource> {
        let acc: Vec<Access> =
            [(0x1000u64, 5u64), (0x2000, 9), (0x1000, 12)].iter().map(|&(addr, insn)| Access { addr, insn, ns: insn * 2, ..Default::default() }).collect();
        let meta = TraceMeta { time_insn: true, time_ns: true, ..Default::default() };
        let ev = vec![(
            3,
            crate::trace::Event { at: 0, insn: 14, ns: 28, tid: 0, kind: EventKind::Marker { marker: MarkerKind::User, id: 1, label: "end".into() } },
        )];
        Box::new(VecSource::new(meta, acc, ev))
    }

    #[test]
    fn replays_keep_addresses_and_offset_instructions_and_time() {
        // one continuous run (docs/models.md, "`--repeat N`"); counts stay monotonic across replays
        let mut r = RepeatSource::new(3, Box::new(|| Ok(source()))).unwrap();
        let batches = read_all(&mut r).unwrap();
        let addr: Vec<u64> = batches.iter().flat_map(|b| b.addr.clone()).collect();
        let insn: Vec<u64> = batches.iter().flat_map(|b| b.insn.clone()).collect();
        let ns: Vec<u64> = batches.iter().flat_map(|b| b.ns.clone()).collect();
        assert_eq!(addr, [0x1000, 0x2000, 0x1000].repeat(3));
        // each replay starts after the last record of the one before (the marker at 14)
        assert_eq!(insn, vec![5, 9, 12, 19, 23, 26, 33, 37, 40]);
        assert_eq!(ns, vec![10, 18, 24, 38, 46, 52, 66, 74, 80]);
        let ev: Vec<u64> = batches.iter().flat_map(|b| b.events.iter().map(|e| e.insn)).collect();
        assert_eq!(ev, vec![14, 28, 42]);
        assert!(RepeatSource::new(0, Box::new(|| Ok(source()))).is_err());
    }
}
