//! Many cores sharing the tiers (`docs/models.md`, "Many cores"): a source that
//! interleaves the accesses of several cores by the cores' own clocks.
//!
//! - **Programs** ([`MixOpener::programs`], `--mix`): each trace is a program of its own on
//!   its own core, in an address space of its own (its addresses carry the program's number
//!   in bits 52 and up, so no two programs share a page).
//! - **Threads** ([`MixOpener::threads`], `--cores N`): one trace whose threads run on N
//!   cores (a thread's core: its rank in order of first access, modulo N), in one address
//!   space.
//!
//! Each batch holds up to `quantum` accesses of one core: the core whose next access issues
//! first, the lowest-numbered on a tie. The source posts each core's next access on the
//! [`ClockBoard`]; after each access the timing model posts when that core's next access will
//! issue (from the core's own clock, ROB and MSHRs, which no other core changes). With a
//! quantum of 1 (the default) the accesses reach the shared tiers in the order they issue; a
//! larger quantum lets a core run that many accesses at once (lax synchronization, as
//! parallel multi-core simulators do), which costs less per access and is less exact. Nothing
//! here depends on anything but the inputs, so a mix gives the same results, bit for bit,
//! every time.
//!
//! A batch's `tid` column holds the core; `insn` holds the core's own instruction count (for
//! a trace's threads, whose counts are the whole program's, the instructions between an
//! access and the one before it are counted to the later access's core).

use super::{Batch, Event, Progress, RecordSource, Summary, TraceMeta};
use crate::error::{Error, Result};
use crate::trace::clocks::ClockBoard;
use crate::trace::opener::TraceOpener;
use std::collections::HashMap;
use std::sync::Arc;

/// Bit at which a program's number starts in its addresses.
pub const PROGRAM_SHIFT: u32 = 52;

/// How many records ahead of a lane's position its columns are prefetched.
const LANE_AHEAD: usize = 16;

/// One core's pending records.
#[derive(Default)]
struct Lane {
    b: Batch,
    pos: usize,
    /// events not yet handed out, with the index of the access they precede in `b`
    ev: usize,
    ended: bool,
}

impl Lane {
    fn pending(&self) -> bool {
        self.pos < self.b.addr.len()
    }
    fn compact(&mut self) {
        if self.pos == 0 {
            return;
        }
        let p = self.pos;
        let b = &mut self.b;
        b.addr.drain(..p);
        b.write.drain(..p);
        if !b.insn.is_empty() {
            b.insn.drain(..p);
        }
        b.events.drain(..self.ev);
        for e in b.events.iter_mut() {
            e.at -= p as u32;
        }
        self.ev = 0;
        self.pos = 0;
    }
}

// one per mix, read on every access: its buffer stays inline rather than behind a box
#[allow(clippy::large_enum_variant)]
enum Feed {
    /// one source per core
    Programs(Vec<Box<dyn RecordSource>>),
    /// one source for every core, its threads mapped to cores. `own[c]`: core c's own
    /// instruction count, `global`: the trace's at the last access (see `refill`)
    Threads { src: Box<dyn RecordSource>, cores: HashMap<u32, usize>, next: usize, buf: Batch, own: Vec<u64>, global: u64 },
}

pub struct MixSource {
    meta: TraceMeta,
    feed: Feed,
    lanes: Vec<Lane>,
    board: Arc<ClockBoard>,
    quantum: usize,
    name: String,
    exhausted: bool,
    /// what the inputs had read at the latest refill (the engine asks after every batch)
    progress: Progress,
    /// Which core runs next, as a tournament over the cores' posted times: `key[c]` is core
    /// c's (infinite once it is done), `tree[1..]` the winner of each match, leaves at
    /// `tree[width..]`. Only the core that ran last has a new time between two picks (no
    /// core's posting depends on another's), so a pick replays that core's matches alone (a
    /// charge that halts another core, a page's owner, is flagged on the board: then every
    /// core's time is read again).
    key: Vec<f64>,
    tree: Vec<usize>,
    width: usize,
    /// the core handed out last (its time to be read back from the board)
    last: Option<usize>,
}

impl MixSource {
    /// The tournament's winner of the match at node `i` (the lower core on a tie).
    #[inline(always)]
    fn winner(&self, i: usize) -> usize {
        let (l, r) = (self.tree[2 * i], self.tree[2 * i + 1]);
        // without a branch: which core wins is as good as random
        std::hint::select_unpredictable(self.key[r] < self.key[l], r, l)
    }

    fn start_tournament(&mut self) {
        let n = self.lanes.len();
        self.width = n.next_power_of_two();
        self.key = (0..self.width).map(|c| if c < n { self.board.get(c) } else { f64::INFINITY }).collect();
        self.tree = vec![0; 2 * self.width];
        for c in 0..self.width {
            self.tree[self.width + c] = c;
        }
        for i in (1..self.width).rev() {
            self.tree[i] = self.winner(i);
        }
    }

    /// Core `c` now waits until `t` (infinite: done).
    #[inline]
    fn update(&mut self, c: usize, t: f64) {
        self.key[c] = t;
        let mut i = (self.width + c) / 2;
        while i >= 1 {
            self.tree[i] = self.winner(i);
            i /= 2;
        }
    }
}

impl MixSource {
    fn read_progress(&self) -> Progress {
        match &self.feed {
            Feed::Programs(srcs) => {
                let mut p = Progress { bytes_read: 0, bytes_total: Some(0) };
                for s in srcs {
                    let q = s.progress();
                    p.bytes_read += q.bytes_read;
                    p.bytes_total = match (p.bytes_total, q.bytes_total) {
                        (Some(a), Some(b)) => Some(a + b),
                        _ => None,
                    };
                }
                p
            }
            Feed::Threads { src, .. } => src.progress(),
        }
    }

    fn refill(&mut self, c: usize) -> Result<()> {
        let lane = &mut self.lanes[c];
        if lane.pending() || lane.ended {
            return Ok(());
        }
        lane.compact();
        match &mut self.feed {
            Feed::Programs(srcs) => {
                let tag = (c as u64) << PROGRAM_SHIFT;
                loop {
                    if !srcs[c].next_batch(&mut lane.b)? {
                        lane.ended = true;
                        return Ok(());
                    }
                    for a in lane.b.addr.iter_mut() {
                        *a |= tag;
                    }
                    if !lane.b.addr.is_empty() || !lane.b.events.is_empty() {
                        return Ok(());
                    }
                }
            }
            Feed::Threads { src, cores, next, buf, own, global } => {
                let n = self.lanes.len();
                // read on until this lane has an access or the trace ends
                while !self.lanes[c].pending() {
                    if !src.next_batch(buf)? {
                        for l in self.lanes.iter_mut() {
                            l.ended = true;
                        }
                        return Ok(());
                    }
                    let mut ev = 0;
                    for i in 0..buf.addr.len() {
                        let tid = buf.tid.get(i).copied().unwrap_or(0);
                        let core = *cores.entry(tid).or_insert_with(|| {
                            let k = *next % n;
                            *next += 1;
                            k
                        });
                        let l = &mut self.lanes[core];
                        while ev < buf.events.len() && buf.events[ev].at as usize <= i {
                            let mut e = buf.events[ev].clone();
                            e.at = l.b.addr.len() as u32;
                            l.b.events.push(e);
                            ev += 1;
                        }
                        l.b.addr.push(buf.addr[i]);
                        l.b.write.push(buf.write[i]);
                        if !buf.insn.is_empty() {
                            // a trace counts the instructions of all its threads together (the
                            // tracer runs one at a time); the instructions since the previous
                            // access, whichever thread made it, are this access's thread's
                            // (its core's), so each core counts its own
                            let g = buf.insn[i];
                            own[core] += g.saturating_sub(*global);
                            *global = g.max(*global);
                            l.b.insn.push(own[core]);
                        }
                    }
                    // events after the batch's last access go with the next access of core 0
                    for e in buf.events.drain(ev..) {
                        let l = &mut self.lanes[0];
                        let mut e: Event = e;
                        e.at = l.b.addr.len() as u32;
                        l.b.events.push(e);
                    }
                }
                Ok(())
            }
        }
    }
}

impl RecordSource for MixSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn set_projection(&mut self, p: super::Projection) {
        // the cores' accesses are copied by address: every input fills `addr`
        let p = super::Projection { addr: true, ..p };
        match &mut self.feed {
            Feed::Programs(srcs) => srcs.iter_mut().for_each(|s| s.set_projection(p)),
            Feed::Threads { src, .. } => src.set_projection(p),
        }
    }

    fn next_batch(&mut self, out: &mut Batch) -> Result<bool> {
        out.clear();
        if self.exhausted {
            return Ok(false);
        }
        let has_insn = self.meta.time_insn;
        if self.tree.is_empty() {
            self.start_tournament();
        }
        if let Some(c) = self.last.take() {
            // its next access's issue time, as the timing model posted it
            let t = self.board.get(c);
            self.update(c, t);
        }
        if self.board.take_moved() {
            // a charge halted another core (the owner of a page): read every running core's
            // time again
            for c in 0..self.lanes.len() {
                if self.key[c].is_finite() {
                    let t = self.board.get(c);
                    self.update(c, t);
                }
            }
        }
        loop {
            // the core whose next access issues first
            let c = self.tree[1];
            if self.key[c] == f64::INFINITY {
                self.exhausted = true;
                return Ok(false);
            }
            {
                let l = &self.lanes[c];
                if l.ended && !l.pending() && l.ev >= l.b.events.len() {
                    self.update(c, f64::INFINITY);
                    continue;
                }
            }
            let l = &mut self.lanes[c];
            if !l.pending() && l.ev < l.b.events.len() {
                // events after the lane's last access: handed out before it is refilled
                for e in l.b.events.drain(l.ev..) {
                    let mut e = e;
                    e.at = 0;
                    out.events.push(e);
                }
                l.ev = 0;
                return Ok(true);
            }
            if !self.lanes[c].pending() {
                self.refill(c)?;
                self.progress = self.read_progress();
            }
            let l = &mut self.lanes[c];
            if !l.pending() {
                continue; // ended (or only events, handed out by the next pick)
            }
            let end = (l.pos + self.quantum).min(l.b.addr.len());
            for i in l.pos..end {
                while l.ev < l.b.events.len() && l.b.events[l.ev].at as usize <= i {
                    let mut e = l.b.events[l.ev].clone();
                    e.at = out.addr.len() as u32;
                    out.events.push(e);
                    l.ev += 1;
                }
                out.addr.push(l.b.addr[i]);
                out.write.push(l.b.write[i]);
                if has_insn {
                    out.insn.push(l.b.insn.get(i).copied().unwrap_or(0));
                }
                out.tid.push(c as u32);
            }
            l.pos = end;
            // the core's following access, for the timing model to time (its issue decides
            // when the core runs next)
            if !self.lanes[c].pending() {
                self.refill(c)?;
                self.progress = self.read_progress();
            }
            let l = &self.lanes[c];
            if l.pending() {
                let insn = if has_insn { l.b.insn.get(l.pos).copied().unwrap_or(0) } else { 0 };
                self.board.set_next(c, insn, l.b.write[l.pos]);
                // the core runs again after the others' turns: its next access's page state
                // to load for then, and the translation of the one after
                out.soon.push(l.b.addr[l.pos]);
                if let Some(&a) = l.b.addr.get(l.pos + 1) {
                    out.later.push(a);
                }
                // and the lane's own records a little further on (a lane is read a record at a
                // time, one among many streams: too many for the hardware to follow)
                let ahead = l.pos + LANE_AHEAD;
                crate::prefetch::read(l.b.addr.as_ptr().wrapping_add(ahead));
                crate::prefetch::read(l.b.write.as_ptr().wrapping_add(ahead));
                if has_insn {
                    crate::prefetch::read(l.b.insn.as_ptr().wrapping_add(ahead));
                }
            }
            self.last = Some(c);
            return Ok(true);
        }
    }

    fn progress(&self) -> Progress {
        self.progress
    }

    fn digest(&self) -> Option<String> {
        match &self.feed {
            Feed::Programs(srcs) => {
                let ds: Option<Vec<String>> = srcs.iter().map(|s| s.digest()).collect();
                ds.map(|d| d.join("+"))
            }
            Feed::Threads { src, .. } => src.digest(),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// What a mix opens: programs, or one trace's threads on cores.
#[derive(Clone)]
pub struct MixOpener {
    parts: Vec<Arc<dyn TraceOpener + Send>>,
    /// threads mode: the number of cores (programs mode: 0)
    thread_cores: usize,
    board: Arc<ClockBoard>,
    quantum: usize,
}

impl MixOpener {
    /// Each trace a program on a core of its own.
    pub fn programs(parts: Vec<Arc<dyn TraceOpener + Send>>, quantum: usize) -> Result<MixOpener> {
        if parts.len() < 2 {
            return Err(Error::config("--mix", "a mix needs at least two traces"));
        }
        if parts.len() > 1 << (64 - PROGRAM_SHIFT) {
            return Err(Error::config("--mix", format!("at most {} programs", 1u64 << (64 - PROGRAM_SHIFT))));
        }
        let board = ClockBoard::new(parts.len());
        Ok(MixOpener { parts, thread_cores: 0, board, quantum: check_quantum(quantum)? })
    }

    /// One trace's threads on `cores` cores.
    pub fn threads(trace: Arc<dyn TraceOpener + Send>, cores: usize, quantum: usize) -> Result<MixOpener> {
        if cores < 1 {
            return Err(Error::config("--cores", "at least 1 core"));
        }
        let board = ClockBoard::new(cores);
        Ok(MixOpener { parts: vec![trace], thread_cores: cores, board, quantum: check_quantum(quantum)? })
    }

    pub fn cores(&self) -> usize {
        if self.thread_cores > 0 {
            self.thread_cores
        } else {
            self.parts.len()
        }
    }

    /// Accesses a core runs at once (1: exact interleaving).
    pub fn quantum(&self) -> usize {
        self.quantum
    }

    pub fn board(&self) -> Arc<ClockBoard> {
        self.board.clone()
    }

    fn open_with(&self, board: Arc<ClockBoard>) -> Result<MixSource> {
        let cores = self.cores();
        let open = |p: &Arc<dyn TraceOpener + Send>| p.open();
        let feed = if self.thread_cores > 0 {
            Feed::Threads { src: open(&self.parts[0])?, cores: HashMap::new(), next: 0, buf: Batch::default(), own: vec![0; cores], global: 0 }
        } else {
            Feed::Programs(self.parts.iter().map(open).collect::<Result<Vec<_>>>()?)
        };
        let meta = match &feed {
            Feed::Programs(srcs) => {
                let m = srcs[0].meta().clone();
                for (s, p) in srcs.iter().zip(&self.parts).skip(1) {
                    let o = s.meta();
                    if o.page_size != m.page_size || o.line_size != m.line_size {
                        return Err(Error::config(
                            "--mix",
                            format!("{}: its page or line size differs from the first trace's; a mix needs the same", p.describe()),
                        ));
                    }
                    if o.time_insn != m.time_insn {
                        return Err(Error::config(
                            "--mix",
                            format!("{}: it has instruction counts where the first trace has none, or the other way round; a mix needs the same", p.describe()),
                        ));
                    }
                }
                m
            }
            Feed::Threads { src, .. } => src.meta().clone(),
        };
        let name = self.describe();
        Ok(MixSource {
            meta,
            feed,
            lanes: (0..cores).map(|_| Lane::default()).collect(),
            board,
            quantum: self.quantum,
            name,
            exhausted: false,
            progress: Progress::default(),
            key: Vec::new(),
            tree: Vec::new(),
            width: 0,
            last: None,
        })
    }
}

fn check_quantum(q: usize) -> Result<usize> {
    if q == 0 {
        return Err(Error::config("--quantum", "at least 1 access"));
    }
    Ok(q)
}

impl TraceOpener for MixOpener {
    fn open(&self) -> Result<Box<dyn RecordSource>> {
        Ok(Box::new(self.open_with(self.board.clone())?))
    }
    /// The whole mix's: its programs' accesses and pages add up (their address spaces are
    /// apart); a threaded trace's is the trace's.
    fn summary(&self) -> Result<Summary> {
        if self.thread_cores > 0 {
            return self.parts[0].summary();
        }
        let mut s = Summary::default();
        for p in &self.parts {
            let q = p.summary()?;
            s.records += q.records;
            s.accesses += q.accesses;
            s.reads += q.reads;
            s.writes += q.writes;
            s.pages += q.pages;
            s.footprint_bytes += q.footprint_bytes;
            s.page_size = q.page_size;
            s.duration_insn = s.duration_insn.max(q.duration_insn);
            s.duration_ns = s.duration_ns.max(q.duration_ns);
            s.allocation_sites += q.allocation_sites;
            s.allocs += q.allocs;
            s.frees += q.frees;
            s.reallocs += q.reallocs;
            s.markers += q.markers;
            s.threads += q.threads;
        }
        Ok(s)
    }
    fn describe(&self) -> String {
        if self.thread_cores > 0 {
            format!("{} on {} cores", self.parts[0].describe(), self.thread_cores)
        } else {
            self.parts.iter().map(|p| p.describe()).collect::<Vec<_>>().join(" + ")
        }
    }
    fn format_name(&self) -> String {
        if self.thread_cores > 0 {
            self.parts[0].format_name()
        } else {
            "mix".into()
        }
    }
    fn incomplete(&self) -> Option<String> {
        self.parts.iter().find_map(|p| p.incomplete().map(|w| format!("{}: {w}", p.describe())))
    }
    fn shared(&self) -> Arc<dyn TraceOpener + Send> {
        Arc::new(self.clone())
    }
}
