//! The cache filter: turns a raw (pre-cache) access stream into the stream main memory sees,
//! last-level misses plus dirty writebacks.
//!
//! Model and its assumptions (say them, since results depend on them):
//! - a hierarchy of set-associative levels, each write-back and write-allocate, with true LRU
//!   replacement inside a set;
//! - non-inclusive: a line is filled into every level it missed in; a dirty victim of level
//!   *i* is written into level *i+1* (and, from the last level, to memory as a write);
//! - a write that misses everywhere reads its line from memory first (read for ownership), so
//!   it appears as a memory read; its data leaves as a write only when evicted dirty;
//! - one hierarchy for all threads (a single core's caches; Valgrind runs threads serially);
//! - an access that straddles a line boundary touches each line it covers;
//! - no prefetching; dirty lines still cached at the end of the trace are not flushed.
//!
//! Output records carry the time, thread and pc of the access that caused them; a miss's
//! memory read comes first, then the writeback it caused.

use crate::error::{Error, Result};
use crate::trace::{Access, Batch, Progress, RecordSource, TraceMeta};
use serde::{Deserialize, Serialize};

/// One cache level as configured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelSpec {
    pub name: String,
    pub size_bytes: u64,
    pub ways: u32,
    pub line_bytes: u32,
}

/// A cache hierarchy, innermost level first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSpec {
    pub levels: Vec<LevelSpec>,
}

/// Named presets for `--cache`.
pub const PRESETS: &[(&str, &str, &str)] = &[
    ("default", "L1:32K:8,L2:1M:16,L3:8M:16", "a current server core: 32 KiB L1D, 1 MiB L2, 8 MiB share of the LLC"),
    ("small", "L1:8K:4,L2:64K:8", "scaled-down hierarchy for small test inputs (as the Kleio Pin traces scale caches down)"),
    ("knl", "L1:32K:8,L2:1M:16", "Knights Landing: 32 KiB L1D, 1 MiB L2 per tile, no L3"),
    ("skylake-sp", "L1:32K:8,L2:1M:16,L3:1408K:11", "Skylake-SP: 32 KiB L1D, 1 MiB L2, 1.375 MiB LLC slice per core"),
];

/// Lines in one simulated level at most: 2^24 (1 GiB of 64-byte lines, 272 MiB of tags,
/// stamps and dirty bits), above any on-chip cache the seeds model; a size from the command
/// line is checked against it before anything is allocated.
pub const MAX_LINES: u64 = 1 << 24;
/// Line size at most (bytes): a page of 4 KiB.
pub const MAX_LINE_BYTES: u32 = 4096;
/// Levels at most, as in the tracer's stream (`trace::raw`): with [`MAX_LINES`] per level, a
/// hierarchy's tags stay within 8 × 272 MiB however many levels `--cache` lists.
pub const MAX_LEVELS: usize = 8;

impl CacheSpec {
    /// Parse `--cache`: `none`, a preset name, or `NAME:SIZE:WAYS[:LINE],...`.
    /// Returns `None` for `none`.
    pub fn parse(key: &str, s: &str) -> Result<Option<CacheSpec>> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        if let Some((_, spec, _)) = PRESETS.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(t)) {
            return Self::parse(key, spec);
        }
        let mut levels = Vec::new();
        let n = t.split(',').count();
        if n > MAX_LEVELS {
            return Err(Error::config(key, format!("{n} cache levels: a hierarchy has at most {MAX_LEVELS}")));
        }
        for part in t.split(',') {
            let f: Vec<&str> = part.trim().split(':').collect();
            if f.len() < 3 || f.len() > 4 {
                return Err(Error::config(
                    key,
                    format!(
                        "'{part}' is not a cache level; write NAME:SIZE:WAYS[:LINE] (e.g. L1:32K:8), or one of: none, {}",
                        PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            let size_bytes = crate::units::parse_bytes(key, f[1])?;
            let ways: u32 = f[2].parse().map_err(|_| Error::config(key, format!("'{}' is not a number of ways", f[2])))?;
            let line_bytes: u32 = match f.get(3) {
                Some(l) => {
                    let b = crate::units::parse_bytes(key, l)?;
                    if b > MAX_LINE_BYTES as u64 {
                        return Err(Error::config(key, format!("'{part}': a line is at most {MAX_LINE_BYTES} bytes")));
                    }
                    b as u32
                }
                None => 64,
            };
            if ways == 0 || line_bytes == 0 || !line_bytes.is_power_of_two() {
                return Err(Error::config(key, format!("'{part}': ways must be positive and the line size a power of two")));
            }
            let set_bytes = ways as u64 * line_bytes as u64;
            if size_bytes == 0 || size_bytes % set_bytes != 0 {
                return Err(Error::config(key, format!("'{part}': size must be a positive multiple of ways × line ({set_bytes} bytes)")));
            }
            // checked before the level allocates its tag arrays (17 bytes per line)
            if size_bytes / line_bytes as u64 > MAX_LINES {
                return Err(Error::config(
                    key,
                    format!(
                        "'{part}': a cache level holds at most {MAX_LINES} lines ({} GiB of {line_bytes}-byte lines)",
                        (MAX_LINES * line_bytes as u64) >> 30
                    ),
                ));
            }
            levels.push(LevelSpec { name: f[0].to_string(), size_bytes, ways, line_bytes });
        }
        if levels.windows(2).any(|w| w[0].line_bytes != w[1].line_bytes) {
            return Err(Error::config(key, "all cache levels must have the same line size"));
        }
        Ok(Some(CacheSpec { levels }))
    }

    pub fn line_bytes(&self) -> u32 {
        self.levels.first().map(|l| l.line_bytes).unwrap_or(64)
    }

    /// The canonical text form (`L1:32K:8:64,...`), recorded in trace headers and results.
    pub fn describe(&self) -> String {
        self.levels.iter().map(|l| format!("{}:{}:{}:{}", l.name, human_bytes(l.size_bytes), l.ways, l.line_bytes)).collect::<Vec<_>>().join(",")
    }
}

fn human_bytes(b: u64) -> String {
    if b.is_multiple_of(1 << 30) {
        format!("{}G", b >> 30)
    } else if b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b.is_multiple_of(1 << 10) {
        format!("{}K", b >> 10)
    } else {
        b.to_string()
    }
}

/// Hit and miss counts of one level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelStats {
    pub name: String,
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    pub writebacks: u64,
}

/// One set-associative, write-back, LRU level.
struct Level {
    sets: u64,
    ways: usize,
    /// line address + 1 per way; 0 = invalid
    tags: Vec<u64>,
    stamp: Vec<u64>,
    dirty: Vec<bool>,
    clock: u64,
    stats: LevelStats,
}

enum Lookup {
    Hit,
    /// Missed; the line was filled. Carries the dirty victim's line address, if any.
    Miss(Option<u64>),
}

impl Level {
    fn new(spec: &LevelSpec) -> Level {
        let sets = spec.size_bytes / (spec.ways as u64 * spec.line_bytes as u64);
        let n = (sets * spec.ways as u64) as usize;
        Level {
            sets,
            ways: spec.ways as usize,
            tags: vec![0; n],
            stamp: vec![0; n],
            dirty: vec![false; n],
            clock: 0,
            stats: LevelStats { name: spec.name.clone(), ..Default::default() },
        }
    }

    /// Access `line` (a line address); fill on miss. `write` marks the line dirty.
    #[inline]
    fn access(&mut self, line: u64, write: bool) -> Lookup {
        self.clock += 1;
        self.stats.accesses += 1;
        let base = ((line % self.sets) as usize) * self.ways;
        let ways = base..base + self.ways;
        let tag = line + 1;
        let mut victim = base;
        let mut oldest = u64::MAX;
        for i in ways {
            if self.tags[i] == tag {
                self.stamp[i] = self.clock;
                self.dirty[i] |= write;
                self.stats.hits += 1;
                return Lookup::Hit;
            }
            // invalid ways (stamp 0) are chosen first
            if self.stamp[i] < oldest {
                oldest = self.stamp[i];
                victim = i;
            }
        }
        self.stats.misses += 1;
        let evicted = if self.tags[victim] != 0 && self.dirty[victim] { Some(self.tags[victim] - 1) } else { None };
        if evicted.is_some() {
            self.stats.writebacks += 1;
        }
        self.tags[victim] = tag;
        self.stamp[victim] = self.clock;
        self.dirty[victim] = write;
        Lookup::Miss(evicted)
    }
}

/// The hierarchy without the stream plumbing (usable on its own, e.g. from tests).
pub struct Hierarchy {
    levels: Vec<Level>,
    line_shift: u32,
    /// writebacks caused by the access in progress, emitted after its memory read
    wbs: Vec<(u64, bool)>,
}

impl Hierarchy {
    pub fn new(spec: &CacheSpec) -> Hierarchy {
        Hierarchy { levels: spec.levels.iter().map(Level::new).collect(), line_shift: spec.line_bytes().trailing_zeros(), wbs: Vec::new() }
    }

    /// Write `line` (dirty, from level `from`) into the levels below `from`; returns the line
    /// addresses that leave the last level dirty.
    fn write_back(&mut self, line: u64, from: usize) {
        // a dirty eviction may cause one further dirty eviction per level below
        let (mut line, mut lvl) = (line, from + 1);
        while lvl < self.levels.len() {
            match self.levels[lvl].access(line, true) {
                Lookup::Miss(Some(v)) => {
                    line = v;
                    lvl += 1;
                }
                _ => return,
            }
        }
        self.wbs.push((line << self.line_shift, true));
    }

    /// Feed one access; push the memory transfers it causes as (byte address, is_write).
    pub fn access(&mut self, addr: u64, size: u16, write: bool, out: &mut Vec<(u64, bool)>) {
        let first = addr >> self.line_shift;
        let last = (addr + (size.max(1) as u64) - 1) >> self.line_shift;
        for line in first..=last {
            self.wbs.clear();
            let mut lvl = 0;
            loop {
                if lvl == self.levels.len() {
                    out.push((line << self.line_shift, false));
                    break;
                }
                // only the innermost level sees the store itself; deeper levels are filled clean
                match self.levels[lvl].access(line, write && lvl == 0) {
                    Lookup::Hit => break,
                    Lookup::Miss(victim) => {
                        if let Some(v) = victim {
                            self.write_back(v, lvl);
                        }
                        lvl += 1;
                    }
                }
            }
            out.extend_from_slice(&self.wbs);
        }
    }

    pub fn stats(&self) -> Vec<LevelStats> {
        self.levels.iter().map(|l| l.stats.clone()).collect()
    }
}

/// A [`RecordSource`] that filters another through a cache hierarchy.
pub struct CacheFilter {
    inner: Box<dyn RecordSource>,
    cache: Hierarchy,
    meta: TraceMeta,
    input: Batch,
    scratch: Vec<(u64, bool)>,
    name: String,
}

impl CacheFilter {
    pub fn new(inner: Box<dyn RecordSource>, spec: &CacheSpec) -> Result<CacheFilter> {
        if inner.meta().post_cache {
            // filtering a post-cache stream again is almost certainly a mistake
            return Err(Error::config("--cache", format!("{} already holds post-cache accesses (last-level misses); use --cache none", inner.name())));
        }
        let mut meta = inner.meta().clone();
        meta.post_cache = true;
        meta.cache_filter = Some(spec.describe());
        meta.line_size = spec.line_bytes() as u64;
        let name = inner.name().to_string();
        Ok(CacheFilter { inner, cache: Hierarchy::new(spec), meta, input: Batch::default(), scratch: Vec::new(), name })
    }

    pub fn stats(&self) -> Vec<LevelStats> {
        self.cache.stats()
    }
}

impl RecordSource for CacheFilter {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, out: &mut Batch) -> Result<bool> {
        out.clear();
        let line = self.meta.line_size as u16;
        while out.is_empty() {
            if !self.inner.next_batch(&mut self.input)? {
                return Ok(false);
            }
            let b = &self.input;
            let mut e = 0;
            for i in 0..b.len() {
                while e < b.events.len() && b.events[e].at as usize <= i {
                    let ev = &b.events[e];
                    out.push_event(ev.insn, ev.ns, ev.tid, ev.kind.clone());
                    e += 1;
                }
                self.scratch.clear();
                self.cache.access(b.addr[i], b.size_at(i), b.write[i], &mut self.scratch);
                for &(addr, write) in &self.scratch {
                    out.push(&Access { addr, write, insn: b.insn_at(i), ns: b.ns_at(i), size: line, tid: b.tid_at(i), pc: b.pc_at(i) });
                }
            }
            for ev in &b.events[e..] {
                out.push_event(ev.insn, ev.ns, ev.tid, ev.kind.clone());
            }
        }
        Ok(true)
    }

    fn progress(&self) -> Progress {
        self.inner.progress()
    }

    fn digest(&self) -> Option<String> {
        self.inner.digest()
    }

    fn import_losses(&self) -> std::collections::BTreeMap<String, u64> {
        self.inner.import_losses()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> CacheSpec {
        CacheSpec::parse("--cache", s).unwrap().unwrap()
    }

    #[test]
    fn parses_specs_and_presets() {
        let s = spec("L1:32K:8,L2:1M:16");
        assert_eq!(s.levels.len(), 2);
        assert_eq!(s.levels[1].size_bytes, 1 << 20);
        assert_eq!(s.describe(), "L1:32K:8:64,L2:1M:16:64");
        assert!(CacheSpec::parse("c", "none").unwrap().is_none());
        assert_eq!(spec("default").levels.len(), 3);
        assert!(CacheSpec::parse("c", "L1:1000:8").is_err());
        assert!(CacheSpec::parse("c", "L1:32K").is_err());
        assert!(CacheSpec::parse("c", "bogus").is_err());
    }

    #[test]
    fn lru_within_a_set_hand_worked() {
        // one level, 2 sets x 2 ways of 64-byte lines = 256 bytes
        let mut h = Hierarchy::new(&spec("L1:256:2"));
        let mut out = Vec::new();
        // lines 0, 2, 4 all map to set 0
        h.access(0, 8, false, &mut out); // miss
        h.access(128, 8, false, &mut out); // miss
        h.access(0, 8, false, &mut out); // hit: line 0 now MRU
        h.access(256, 8, false, &mut out); // miss, evicts line 2 (LRU)
        h.access(0, 8, false, &mut out); // hit
        h.access(128, 8, false, &mut out); // miss again
        assert_eq!(out, vec![(0, false), (128, false), (256, false), (128, false)]);
        let s = &h.stats()[0];
        assert_eq!((s.hits, s.misses), (2, 4));
    }

    #[test]
    fn dirty_victims_become_writes_once() {
        let mut h = Hierarchy::new(&spec("L1:128:1"));
        let mut out = Vec::new();
        h.access(0, 8, true, &mut out); // write miss: memory read of line 0 (RFO)
        h.access(0, 8, true, &mut out); // write hit
        h.access(128, 8, false, &mut out); // conflicts in set 0: line 0 leaves dirty after the read
        h.access(0, 8, false, &mut out); // line 0 read again; line 2 (clean) evicted silently
        assert_eq!(out, vec![(0, false), (128, false), (0, true), (0, false)]);
    }

    #[test]
    fn two_levels_write_back_through_l2() {
        let mut h = Hierarchy::new(&spec("L1:64:1,L2:256:1"));
        let mut out = Vec::new();
        h.access(0, 8, true, &mut out); // misses both: memory read
        h.access(64, 8, false, &mut out); // L1 evicts dirty line 0 into L2 (hit there), L2 miss for line 1
        assert_eq!(out, vec![(0, false), (64, false)]);
        // line 4 maps to L2 set 0 with line 0 (dirty in L2) -> it leaves to memory as a write
        h.access(256, 8, false, &mut out);
        assert_eq!(out[2..], [(256, false), (0, true)]);
    }

    #[test]
    fn straddling_access_touches_both_lines() {
        let mut h = Hierarchy::new(&spec("L1:1K:2"));
        let mut out = Vec::new();
        h.access(60, 8, false, &mut out);
        assert_eq!(out, vec![(0, false), (64, false)]);
    }
}
