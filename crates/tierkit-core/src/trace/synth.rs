//! Synthetic traces with known structure, for tests and benchmarks
//! (`tierkit trace synth KIND --accesses N --pages P [--seed S]`).
//!
//! - `zipf`: page popularity follows a Zipf law of exponent `theta` over ranks; ranks are
//!   mapped to pages by a seeded permutation, so hot pages are scattered over the range.
//! - `uniform`: every page equally likely.
//! - `stream`: sweeps the pages line by line, in order, wrapping around (lbm-like streaming).
//! - `phases`: the run is split into `phases` equal parts; in part *k*, `hot_fraction` of the
//!   accesses go (uniformly) to the *k*-th slice of pages of size `pages / phases`, the rest
//!   uniformly everywhere. The hot set moves between phases.
//!
//! Every access is one 64-byte line; a fraction `write_ratio` are writes. Instruction counts
//! advance by a gap drawn uniformly in `[0, 2 * insn_per_access]` per access. Same parameters
//! and seed give the same trace, bit for bit.

use super::{Access, Batch, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SynthKind {
    Zipf,
    Uniform,
    Stream,
    Phases,
}

impl SynthKind {
    pub const ALL: [SynthKind; 4] = [SynthKind::Zipf, SynthKind::Uniform, SynthKind::Stream, SynthKind::Phases];
    pub fn name(&self) -> &'static str {
        match self {
            SynthKind::Zipf => "zipf",
            SynthKind::Uniform => "uniform",
            SynthKind::Stream => "stream",
            SynthKind::Phases => "phases",
        }
    }
    pub fn parse(s: &str) -> Result<SynthKind> {
        SynthKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| Error::config("KIND", format!("unknown synthetic trace kind '{s}' (known: zipf, uniform, stream, phases)")))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SynthSpec {
    pub kind: SynthKind,
    pub accesses: u64,
    pub pages: u64,
    pub seed: u64,
    pub write_ratio: f64,
    /// Zipf exponent.
    pub theta: f64,
    /// Number of phases (`phases` kind).
    pub phases: u64,
    /// Share of accesses to the phase's hot set (`phases` kind).
    pub hot_fraction: f64,
    /// Mean instructions between accesses.
    pub insn_per_access: u64,
    /// Virtual address of page 0.
    pub base_addr: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            kind: SynthKind::Zipf,
            accesses: 1_000_000,
            pages: 10_000,
            seed: 1,
            write_ratio: 0.0,
            theta: 0.99,
            phases: 4,
            hot_fraction: 0.9,
            insn_per_access: 20,
            base_addr: 0x5555_0000_0000,
        }
    }
}

impl SynthSpec {
    pub fn validate(&self) -> Result<()> {
        if self.pages == 0 {
            return Err(Error::config("--pages", "must be at least 1"));
        }
        if self.pages > MAX_PAGES {
            return Err(Error::config("--pages", format!("{}: at most {MAX_PAGES} (2^40 pages of 4 KiB: the addresses stay within 64 bits)", self.pages)));
        }
        // zipf keeps a permutation of 32-bit page ranks: checked before it is allocated
        if self.kind == SynthKind::Zipf && self.pages > MAX_ZIPF_PAGES {
            return Err(Error::config(
                "--pages",
                format!(
                    "{}: zipf draws at most {MAX_ZIPF_PAGES} pages (2^27, 512 GiB of 4 KiB pages; its permutation of ranks takes 4 bytes a page)",
                    self.pages
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return Err(Error::config("--write-ratio", format!("{} is not in [0, 1]", self.write_ratio)));
        }
        if !(self.theta > 0.0 && self.theta.is_finite()) {
            return Err(Error::config("--theta", format!("{} must be positive", self.theta)));
        }
        if self.kind == SynthKind::Phases && (self.phases == 0 || self.phases > self.pages) {
            return Err(Error::config("--phases", format!("{} must be in [1, pages]", self.phases)));
        }
        if !(0.0..=1.0).contains(&self.hot_fraction) {
            return Err(Error::config("--hot-fraction", format!("{} is not in [0, 1]", self.hot_fraction)));
        }
        Ok(())
    }
}

/// The most pages a synthetic trace spans (docs/limits.md).
pub const MAX_PAGES: u64 = 1 << 40;
/// The most pages a `zipf` trace spans: its rank permutation is allocated up front, 4 bytes
/// a page (512 MiB at this limit), and holds 32-bit ranks.
pub const MAX_ZIPF_PAGES: u64 = 1 << 27;

/// A generator of synthetic records.
pub struct SynthSource {
    spec: SynthSpec,
    meta: TraceMeta,
    rng: ChaCha8Rng,
    zipf: Option<rand_distr::Zipf<f64>>,
    perm: Vec<u32>,
    emitted: u64,
    insn: u64,
    cursor: u64,
}

impl SynthSource {
    pub fn new(spec: SynthSpec) -> Result<SynthSource> {
        spec.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let mut perm = Vec::new();
        let mut zipf = None;
        if spec.kind == SynthKind::Zipf {
            perm = (0..spec.pages as u32).collect();
            // Fisher-Yates with our own rng, so the permutation is fixed by the seed
            for i in (1..perm.len()).rev() {
                let j = rng.random_range(0..=i);
                perm.swap(i, j);
            }
            zipf = Some(rand_distr::Zipf::new(spec.pages as f64, spec.theta).map_err(|e| Error::config("--theta", e.to_string()))?);
        }
        let mut meta = TraceMeta { time_insn: true, post_cache: true, ..Default::default() };
        meta.provenance.tool = "tierkit trace synth".into();
        meta.provenance.tool_version = env!("CARGO_PKG_VERSION").into();
        meta.provenance.program = Some(format!("synth:{}", spec.kind.name()));
        meta.provenance.args = vec![
            format!("accesses={}", spec.accesses),
            format!("pages={}", spec.pages),
            format!("seed={}", spec.seed),
            format!("write_ratio={}", spec.write_ratio),
            format!("theta={}", spec.theta),
            format!("phases={}", spec.phases),
            format!("hot_fraction={}", spec.hot_fraction),
            format!("insn_per_access={}", spec.insn_per_access),
        ];
        Ok(SynthSource { spec, meta, rng, zipf, perm, emitted: 0, insn: 0, cursor: 0 })
    }

    #[inline]
    fn next_page_and_line(&mut self) -> (u64, u64) {
        let s = &self.spec;
        match s.kind {
            SynthKind::Zipf => {
                let rank = self.rng.sample(self.zipf.as_ref().unwrap()) as u64; // 1..=pages
                let page = self.perm[(rank.clamp(1, s.pages) - 1) as usize] as u64;
                (page, self.rng.random_range(0..64u64))
            }
            SynthKind::Uniform => (self.rng.random_range(0..s.pages), self.rng.random_range(0..64u64)),
            SynthKind::Stream => {
                let c = self.cursor;
                self.cursor = (self.cursor + 1) % (s.pages * 64);
                (c / 64, c % 64)
            }
            SynthKind::Phases => {
                let phase = (self.emitted * s.phases / s.accesses.max(1)).min(s.phases - 1);
                let slice = s.pages / s.phases;
                let page = if self.rng.random::<f64>() < s.hot_fraction {
                    phase * slice + self.rng.random_range(0..slice.max(1))
                } else {
                    self.rng.random_range(0..s.pages)
                };
                (page, self.rng.random_range(0..64u64))
            }
        }
    }
}

impl RecordSource for SynthSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        batch.clear();
        let n = (self.spec.accesses - self.emitted).min(BATCH_RECORDS as u64);
        for _ in 0..n {
            let (page, line) = self.next_page_and_line();
            let write = self.spec.write_ratio > 0.0 && self.rng.random::<f64>() < self.spec.write_ratio;
            if self.spec.insn_per_access > 0 {
                self.insn += self.rng.random_range(0..=2 * self.spec.insn_per_access);
            }
            batch.push(&Access { addr: self.spec.base_addr + page * 4096 + line * 64, write, insn: self.insn, ns: 0, size: 64, tid: 0, pc: 0 });
            self.emitted += 1;
        }
        Ok(n > 0)
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.emitted, bytes_total: Some(self.spec.accesses) }
    }

    fn name(&self) -> &str {
        self.spec.kind.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::summary::scan;

    #[test]
    fn same_seed_same_trace_and_kinds_have_their_shape() {
        let spec = SynthSpec { accesses: 20_000, pages: 500, seed: 7, write_ratio: 0.25, ..Default::default() };
        let a = crate::trace::read_all(&mut SynthSource::new(spec.clone()).unwrap()).unwrap();
        let b = crate::trace::read_all(&mut SynthSource::new(spec.clone()).unwrap()).unwrap();
        assert_eq!(a[0].addr, b[0].addr);
        let s = scan(&mut SynthSource::new(spec).unwrap()).unwrap();
        assert_eq!(s.accesses, 20_000);
        assert!(s.pages <= 500 && s.pages > 300);
        let wr = s.writes as f64 / s.accesses as f64;
        assert!((wr - 0.25).abs() < 0.02, "{wr}");
        let st = scan(&mut SynthSource::new(SynthSpec { kind: SynthKind::Stream, accesses: 64 * 10, pages: 100, ..Default::default() }).unwrap()).unwrap();
        assert_eq!(st.pages, 10);
    }

    #[test]
    fn page_counts_are_checked_before_anything_is_allocated() {
        // 2^32 used to be truncated to 0 ranks (then a panic) and 1G allocated 4 GB first
        for pages in [1u64 << 32, (1 << 32) + 1, 1 << 30, MAX_ZIPF_PAGES + 1] {
            let e = SynthSource::new(SynthSpec { pages, accesses: 10, ..Default::default() }).err().expect("refused");
            assert!(e.to_string().contains("--pages") && e.to_string().contains("zipf draws at most"), "{e}");
        }
        let e = SynthSource::new(SynthSpec { kind: SynthKind::Uniform, pages: MAX_PAGES + 1, accesses: 10, ..Default::default() }).err().expect("refused");
        assert!(e.to_string().contains("at most 1099511627776"), "{e}");
        // the kinds that keep no per-page state take any count up to the address limit
        let s = scan(&mut SynthSource::new(SynthSpec { kind: SynthKind::Uniform, pages: 1 << 32, accesses: 1000, ..Default::default() }).unwrap()).unwrap();
        assert_eq!(s.accesses, 1000);
    }

    #[test]
    fn zipf_concentrates_accesses() {
        let spec = SynthSpec { accesses: 100_000, pages: 10_000, seed: 3, ..Default::default() };
        let mut src = SynthSource::new(spec).unwrap();
        let mut counts = std::collections::HashMap::new();
        let mut b = Batch::default();
        while src.next_batch(&mut b).unwrap() {
            for &a in &b.addr {
                *counts.entry(a >> 12).or_insert(0u64) += 1;
            }
        }
        let mut v: Vec<u64> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let top1pct: u64 = v.iter().take(100).sum();
        assert!(top1pct > 30_000, "top 1% of pages got {top1pct} of 100000 accesses");
    }
}
