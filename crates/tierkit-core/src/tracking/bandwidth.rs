//! Per-tier read and write bandwidth counters, as memory-controller (uncore) counters give
//! them: Intel's Processor Counter Monitor (`pcm-memory`), which HyPlacer reads (004 §4.3,
//! §4.4), reports each NUMA node's read and write throughput per interval. A policy sees
//! bytes per interval per tier, never which pages made them.
//!
//! The counters count every line that crosses a tier's interface: demand reads and writes
//! (the policy reports them from its per-access hook with [`BandwidthCounters::access`]) and
//! migration copies (taken from the mechanics' move counts at each [`sample`]: a moved page
//! is read from its source and written to its destination). Reading the counters costs the
//! caller `read_ns` per sample (charged by the policy; PCM reads model-specific registers
//! through the kernel).
//!
//! [`sample`]: BandwidthCounters::sample

use crate::mechanics::Memory;
use crate::platform::MAX_TIERS;

/// One sample: per-tier throughput over the interval since the previous sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BandwidthSample {
    /// Length of the interval, ns.
    pub interval_ns: f64,
    /// Bytes read from / written to each tier in the interval.
    pub read_bytes: Vec<u64>,
    pub write_bytes: Vec<u64>,
}

impl BandwidthSample {
    /// Read throughput of a tier, MB/s (10^6 bytes per second); 0 over an empty interval.
    pub fn read_mb_per_s(&self, tier: usize) -> f64 {
        rate(self.read_bytes[tier], self.interval_ns)
    }
    pub fn write_mb_per_s(&self, tier: usize) -> f64 {
        rate(self.write_bytes[tier], self.interval_ns)
    }
}

fn rate(bytes: u64, ns: f64) -> f64 {
    if ns > 0.0 {
        bytes as f64 / ns * 1e3
    } else {
        0.0
    }
}

#[derive(Clone, Debug)]
pub struct BandwidthCounters {
    tiers: usize,
    line_bytes: u64,
    /// demand lines since the last sample, `[tier][write]`
    lines: [[u64; 2]; MAX_TIERS],
    /// the mechanics' page moves at the last sample, `[from][to]`
    moved: [[u64; MAX_TIERS]; MAX_TIERS],
    last_ns: f64,
}

impl BandwidthCounters {
    pub fn new(tiers: usize, line_bytes: u64) -> BandwidthCounters {
        BandwidthCounters { tiers, line_bytes, lines: [[0; 2]; MAX_TIERS], moved: [[0; MAX_TIERS]; MAX_TIERS], last_ns: 0.0 }
    }

    /// A demand access served by `tier`.
    #[inline(always)]
    pub fn access(&mut self, tier: u8, write: bool) {
        self.lines[tier as usize][write as usize] += 1;
    }

    /// Throughput since the last sample, at simulated time `now_ns`; the counters restart.
    pub fn sample(&mut self, now_ns: f64, mem: &Memory) -> BandwidthSample {
        let n = self.tiers;
        let mut s = BandwidthSample {
            interval_ns: now_ns - self.last_ns,
            read_bytes: (0..n).map(|t| self.lines[t][0] * self.line_bytes).collect(),
            write_bytes: (0..n).map(|t| self.lines[t][1] * self.line_bytes).collect(),
        };
        let page = mem.page_bytes();
        for f in 0..n {
            for t in 0..n {
                let m = mem.moves_between(f, t);
                let new = m - self.moved[f][t];
                self.moved[f][t] = m;
                s.read_bytes[f] += new * page;
                s.write_bytes[t] += new * page;
            }
        }
        self.lines = [[0; 2]; MAX_TIERS];
        self.last_ns = now_ns;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_count_demand_lines_and_migration_copies_per_interval() {
        let mut mem = Memory::new(&[4, 4], 4096);
        mem.grow(2);
        mem.place(0, 1).unwrap();
        let mut c = BandwidthCounters::new(2, 64);
        c.access(1, true);
        c.access(1, false);
        c.access(0, false);
        mem.migrate(0, 0).unwrap();
        // 1000 ns: tier 1 read one line and the page, wrote one line; tier 0 got the page
        let s = c.sample(1000.0, &mem);
        assert_eq!((s.read_bytes.clone(), s.write_bytes.clone()), (vec![64, 64 + 4096], vec![4096, 64]));
        assert_eq!(s.write_mb_per_s(1), 64.0 / 1000.0 * 1e3);
        // the next interval starts empty: the move is not counted twice
        let s = c.sample(3000.0, &mem);
        assert_eq!((s.interval_ns, s.read_bytes, s.write_bytes), (2000.0, vec![0, 0], vec![0, 0]));
    }
}
