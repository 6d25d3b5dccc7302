//! Layer 2 (data): platforms. A platform is N ≥ 2 memory tiers, fastest first, plus the costs
//! of moving pages between them and the CPU that issues the accesses. Platforms are data:
//! presets live as TOML files in `platforms/` (embedded at build time), and users can load
//! their own TOML, YAML or JSON files with the same fields. `docs/platforms.md` lists the
//! presets with their numbers and sources.

use crate::error::{Error, Result};
use crate::units::Capacity;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Most tiers a platform may have (fixed-size per-tier arrays on the hot path).
pub const MAX_TIERS: usize = 8;

/// A tier's capacity as written in a platform file: a number in (0, 1] (fraction of the
/// footprint) or a string (`"16G"`, `"12.5%"`, `"unlimited"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CapacityField {
    Number(f64),
    Text(String),
}

impl CapacityField {
    pub fn resolve(&self, key: &str) -> Result<Capacity> {
        match self {
            CapacityField::Number(v) => Capacity::parse(key, &v.to_string()),
            CapacityField::Text(s) => Capacity::parse(key, s),
        }
    }
}

/// One memory tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub name: String,
    /// Technology, for people (e.g. "HBM2 stacked DRAM").
    #[serde(default)]
    pub technology: String,
    /// Capacity; absent means unlimited (allowed for the last tier only, by convention).
    #[serde(default)]
    pub capacity: Option<CapacityField>,
    /// Unloaded latency of a 64-byte read, in ns.
    pub read_latency_ns: f64,
    /// Unloaded latency of a 64-byte write, in ns.
    pub write_latency_ns: f64,
    /// Peak read bandwidth, in GB/s (10^9 bytes per second).
    pub read_bw_gb_per_s: f64,
    /// Peak write bandwidth, in GB/s.
    pub write_bw_gb_per_s: f64,
    /// Dynamic energy of reading, in pJ per bit.
    #[serde(default)]
    pub read_energy_pj_per_bit: f64,
    /// Dynamic energy of writing, in pJ per bit.
    #[serde(default)]
    pub write_energy_pj_per_bit: f64,
    /// Reads and writes share the device's time (true for media such as PCM and Optane,
    /// where writes occupy the media that reads need); false gives them separate queues.
    #[serde(default)]
    pub shared_bandwidth: bool,
    /// Loaded-latency curve: points `[u, factor]` of a piecewise-linear function of the tier's
    /// bandwidth utilization u (busy time / elapsed time, in [0, 1]). The factor multiplies the
    /// tier's read and write latency. u strictly increasing, factor ≥ 1 and non-decreasing;
    /// factor 1 at u = 0 unless the first point says otherwise, flat past the last point.
    /// Empty (absent) = flat: the latency does not depend on the load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_latency: Vec<[f64; 2]>,
}

impl Tier {
    /// The factor on this tier's latency at utilization `u` (see [`loaded_latency_factor`]).
    pub fn latency_factor(&self, u: f64) -> f64 {
        loaded_latency_factor(&self.loaded_latency, u)
    }
}

/// A loaded-latency curve at utilization `u`: linear interpolation between the points, from an
/// implicit `[0, 1]` before the first point (when that point is past u = 0), held at the last
/// point's factor beyond it; 1 for an empty curve. Non-decreasing in `u` for a valid curve.
#[inline]
pub fn loaded_latency_factor(curve: &[[f64; 2]], u: f64) -> f64 {
    let (mut u0, mut f0) = (0.0, 1.0);
    for &[u1, f1] in curve {
        if u <= u1 {
            // a first point at u = 0 gives its own factor there (no segment to interpolate)
            if u1 <= u0 {
                return f1;
            }
            return f0 + (f1 - f0) * ((u - u0) / (u1 - u0)).max(0.0);
        }
        (u0, f0) = (u1, f1);
    }
    f0
}

/// Check a loaded-latency curve; the message says which point is wrong and why.
fn check_curve(curve: &[[f64; 2]]) -> std::result::Result<(), String> {
    for (j, &[u, f]) in curve.iter().enumerate() {
        let at = || format!("point {j} [{u}, {f}]");
        if !(u.is_finite() && (0.0..=1.0).contains(&u)) {
            return Err(format!("{}: the utilization must be in [0, 1]", at()));
        }
        if !(f.is_finite() && f >= 1.0) {
            return Err(format!("{}: the factor must be at least 1 (load never makes a tier faster)", at()));
        }
        if f > MAX_LOADED_FACTOR {
            return Err(format!("{}: the factor is out of range (at most {MAX_LOADED_FACTOR})", at()));
        }
        if j > 0 {
            let [pu, pf] = curve[j - 1];
            if u <= pu {
                return Err(format!("{}: utilizations must be strictly increasing (previous point at {pu})", at()));
            }
            if f < pf {
                return Err(format!("{}: factors must not decrease (previous factor {pf})", at()));
            }
        }
    }
    Ok(())
}

/// Costs of moving a page, shared by all policies (charged by the migration mechanics).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MigrationCosts {
    /// Page-fault / kernel-entry cost per migrated page, ns.
    pub fault_ns: f64,
    /// TLB shootdown per migrated page, ns.
    pub tlb_shootdown_ns: f64,
    /// Fixed software cost per migrated page, ns (beyond fault and shootdown).
    pub per_page_ns: f64,
    /// Fixed cost of each scheduling period of a periodic policy, ns.
    pub per_period_ns: f64,
    /// Charge the copy itself from the bandwidths of both tiers (page size / min(source read
    /// bandwidth, destination write bandwidth)).
    pub copy_from_bandwidth: bool,
}

impl Default for MigrationCosts {
    fn default() -> Self {
        // 000 §5.1: page faults 5 µs and TLB shootdowns 3 µs, copy from the bandwidth
        MigrationCosts { fault_ns: 5000.0, tlb_shootdown_ns: 3000.0, per_page_ns: 0.0, per_period_ns: 0.0, copy_from_bandwidth: true }
    }
}

/// The core that issues the accesses (used by the `detailed` timing model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cpu {
    /// Clock frequency, GHz.
    pub freq_ghz: f64,
    /// Cycles per instruction when no memory access stalls the core.
    pub base_cpi: f64,
    /// Reorder-buffer entries: how far past an outstanding miss the core can run.
    pub rob_entries: u32,
    /// Most last-level misses outstanding at once (MSHRs).
    pub max_outstanding: u32,
    /// Posted writes a tier's write queue holds before the core stalls.
    pub write_queue_entries: u32,
    /// Time constant of the exponentially decaying busy-time estimate from which the
    /// `detailed` model reads a tier's recent utilization for its loaded-latency curve, ns.
    pub load_window_ns: f64,
}

impl Default for Cpu {
    fn default() -> Self {
        // a 3.2 GHz core with a 128-entry ROB (001 §4.1); base CPI 1.0 is tierkit's neutral
        // default (seed presets set Ramulator's 4-wide core, CPI 0.25)
        // load window 1 µs: tierkit's default, long against one line's transfer (a few ns),
        // short against a program phase
        Cpu { freq_ghz: 3.2, base_cpi: 1.0, rob_entries: 128, max_outstanding: 32, write_queue_entries: 64, load_window_ns: 1000.0 }
    }
}

/// A platform as loaded (capacities not yet resolved against a trace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: String,
    pub tiers: Vec<Tier>,
    #[serde(default)]
    pub migration: MigrationCosts,
    #[serde(default)]
    pub cpu: Cpu,
}

/// Preset platforms, embedded from `platforms/*.toml`.
pub const PRESETS: &[(&str, &str)] = &[
    ("hbm-ddr3", include_str!("../../../platforms/hbm-ddr3.toml")),
    ("hbm-ddr4", include_str!("../../../platforms/hbm-ddr4.toml")),
    ("hbm-pcm", include_str!("../../../platforms/hbm-pcm.toml")),
    ("mcdram-ddr4", include_str!("../../../platforms/mcdram-ddr4.toml")),
    ("dram-pmem", include_str!("../../../platforms/dram-pmem.toml")),
    ("dram-dcpmm", include_str!("../../../platforms/dram-dcpmm.toml")),
    ("dram-cxl", include_str!("../../../platforms/dram-cxl.toml")),
    ("hbm-dram-cxl", include_str!("../../../platforms/hbm-dram-cxl.toml")),
];

impl Platform {
    /// A preset by name, or a platform file (`.toml`, `.yaml`/`.yml`, `.json`) by path.
    pub fn load(name_or_path: &str) -> Result<Platform> {
        if let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            let p: Platform = toml::from_str(text).map_err(|e| Error::Invariant(format!("preset {name_or_path}: {e}")))?;
            p.validate(name_or_path)?;
            return Ok(p);
        }
        let path = Path::new(name_or_path);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        if !path.exists() || !matches!(ext.as_str(), "toml" | "yaml" | "yml" | "json") {
            return Err(Error::config(
                "--platform",
                format!(
                    "unknown platform '{name_or_path}'{}; presets: {}; or a path to a .toml, .yaml or .json platform file",
                    crate::error::did_you_mean(name_or_path, PRESETS.iter().map(|p| p.0)),
                    PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        check_nesting(&text, ext.as_str()).map_err(|m| Error::config(name_or_path, m))?;
        let p: Platform = match ext.as_str() {
            "toml" => toml::from_str(&text).map_err(|e| Error::config(name_or_path, one_line(&e.to_string())))?,
            "json" => serde_json::from_str(&text).map_err(|e| Error::config(name_or_path, e.to_string()))?,
            _ => serde_yaml_ng::from_str(&text).map_err(|e| Error::config(name_or_path, e.to_string()))?,
        };
        p.validate(name_or_path)?;
        Ok(p)
    }

    pub fn presets() -> Vec<Platform> {
        PRESETS.iter().map(|(n, _)| Platform::load(n).expect("presets are valid")).collect()
    }

    pub fn validate(&self, origin: &str) -> Result<()> {
        if self.tiers.len() < 2 || self.tiers.len() > MAX_TIERS {
            return Err(Error::config(format!("{origin}: tiers"), format!("a platform needs 2 to {MAX_TIERS} tiers, not {}", self.tiers.len())));
        }
        for (i, t) in self.tiers.iter().enumerate() {
            let key = |f: &str| format!("{origin}: tiers[{i}] ({}).{f}", t.name);
            for (f, v) in [
                ("read_latency_ns", t.read_latency_ns),
                ("write_latency_ns", t.write_latency_ns),
                ("read_bw_gb_per_s", t.read_bw_gb_per_s),
                ("write_bw_gb_per_s", t.write_bw_gb_per_s),
            ] {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(Error::config(key(f), format!("{v} must be positive")));
                }
                let max = if f.contains("latency") { MAX_LATENCY_NS } else { MAX_BW_GB_PER_S };
                let min = if f.contains("latency") { 0.0 } else { MIN_BW_GB_PER_S };
                if v > max || v < min {
                    return Err(Error::config(key(f), format!("{v} is out of range (at least {min}, at most {max})")));
                }
            }
            for (f, v) in [("read_energy_pj_per_bit", t.read_energy_pj_per_bit), ("write_energy_pj_per_bit", t.write_energy_pj_per_bit)] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(Error::config(key(f), format!("{v} must not be negative")));
                }
                if v > MAX_ENERGY_PJ_PER_BIT {
                    return Err(Error::config(key(f), format!("{v} is out of range (at most {MAX_ENERGY_PJ_PER_BIT})")));
                }
            }
            if let Some(c) = &t.capacity {
                c.resolve(&key("capacity"))?;
            }
            check_curve(&t.loaded_latency).map_err(|m| Error::config(key("loaded_latency"), m))?;
            if self.tiers[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::config(key("name"), "tier names must be unique"));
            }
        }
        let m = &self.migration;
        for (f, v) in [("fault_ns", m.fault_ns), ("tlb_shootdown_ns", m.tlb_shootdown_ns), ("per_page_ns", m.per_page_ns), ("per_period_ns", m.per_period_ns)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::config(format!("{origin}: migration.{f}"), format!("{v} must not be negative")));
            }
            if v > MAX_COST_NS {
                return Err(Error::config(format!("{origin}: migration.{f}"), format!("{v} is out of range (at most {MAX_COST_NS})")));
            }
        }
        let c = &self.cpu;
        if !(c.freq_ghz > 0.0 && c.base_cpi > 0.0 && c.rob_entries > 0 && c.max_outstanding > 0 && c.write_queue_entries > 0) {
            return Err(Error::config(format!("{origin}: cpu"), "frequency, CPI, ROB, outstanding misses and write queue must be positive"));
        }
        for (f, v, max) in [("freq_ghz", c.freq_ghz, MAX_FREQ_GHZ), ("base_cpi", c.base_cpi, MAX_CPI), ("load_window_ns", c.load_window_ns, MAX_LOAD_WINDOW_NS)]
        {
            if !(v > 0.0 && v <= max) {
                return Err(Error::config(format!("{origin}: cpu.{f}"), format!("{v} is out of range (positive, at most {max})")));
            }
        }
        // the detailed model allocates rings of these sizes
        for (f, v) in [("rob_entries", c.rob_entries), ("max_outstanding", c.max_outstanding), ("write_queue_entries", c.write_queue_entries)] {
            if v > MAX_CPU_ENTRIES {
                return Err(Error::config(format!("{origin}: cpu.{f}"), format!("{v} is out of range (at most {MAX_CPU_ENTRIES})")));
            }
        }
        Ok(())
    }

    /// Resolve every tier's capacity to pages for a trace of `footprint_pages` pages.
    /// `overrides` replace the platform's capacities by tier index. Fails when the tiers
    /// cannot hold the footprint.
    pub fn resolve(&self, footprint_pages: u64, page_size: u64, overrides: &[(usize, Capacity)]) -> Result<Resolved> {
        let n = self.tiers.len();
        let mut caps = Vec::with_capacity(n);
        for (i, t) in self.tiers.iter().enumerate() {
            let c = match overrides.iter().rev().find(|(j, _)| *j == i) {
                Some((_, c)) => *c,
                None => match &t.capacity {
                    Some(f) => f.resolve(&format!("{}: tiers[{i}].capacity", self.name))?,
                    None => Capacity::Unlimited,
                },
            };
            caps.push(c);
        }
        let pages: Vec<u64> = caps.iter().map(|c| c.pages(footprint_pages, page_size)).collect();
        let total = pages.iter().fold(0u64, |a, &p| a.saturating_add(p));
        if total < footprint_pages {
            return Err(Error::config(
                "capacity",
                format!(
                    "cannot work: the tiers of {} hold {} pages in all ({}), but the trace touches {} pages",
                    self.name,
                    total,
                    self.tiers.iter().zip(&pages).map(|(t, p)| format!("{} {}", t.name, p)).collect::<Vec<_>>().join(", "),
                    footprint_pages
                ),
            ));
        }
        Ok(Resolved { platform: self.clone(), capacity: caps, capacity_pages: pages, page_size, footprint_pages })
    }
}

/// The ranges of a platform's numbers (docs/limits.md). Far beyond any real device, they keep
/// every result finite: a runtime sums at most 2^64 accesses of at most 1 s each.
/// Latency of a tier (ns): 1 s at most.
pub const MAX_LATENCY_NS: f64 = 1e9;
/// Bandwidth of a tier (GB/s): 1 kB/s to 1 PB/s.
pub const MIN_BW_GB_PER_S: f64 = 1e-6;
pub const MAX_BW_GB_PER_S: f64 = 1e6;
/// Energy per bit (pJ): 1 µJ at most.
pub const MAX_ENERGY_PJ_PER_BIT: f64 = 1e6;
/// A loaded-latency factor: 1000 at most (measured curves reach 1.9 for DRAM, 6.7 for
/// Optane), so that a loaded latency stays within 1000 s and a runtime finite.
pub const MAX_LOADED_FACTOR: f64 = 1e3;
/// A migration cost (ns, per event): 1 s at most.
pub const MAX_COST_NS: f64 = 1e9;
/// CPU clock (GHz), base CPI and the load window (ns, 1,000 s).
pub const MAX_FREQ_GHZ: f64 = 1e3;
pub const MAX_CPI: f64 = 1e6;
pub const MAX_LOAD_WINDOW_NS: f64 = 1e12;
/// ROB entries, MSHRs and write-queue entries (the detailed model's rings).
pub const MAX_CPU_ENTRIES: u32 = 1 << 16;

/// Nesting depth a platform file may reach: its deepest key (`tiers[i].loaded_latency[j][k]`)
/// is 4 levels down. Checked by [`check_nesting`] before parsing.
pub const MAX_NESTING: usize = 32;
/// Indentation (columns) a YAML platform line may have: block nesting is indentation.
pub const MAX_INDENT: usize = 256;

/// A linear pre-scan that rejects a file nested deeper than any platform is before a parser
/// sees it: the YAML parser takes time quadratic in the depth (97 s for a 100,000-deep file)
/// and recursive parsers use stack in proportion to it. Flow collections (`[`, `{`, in every
/// format) are counted outside strings and comments; for YAML, block nesting is bounded by the
/// indentation and the `- ` / `? ` indicators that open a line.
fn check_nesting(text: &str, ext: &str) -> std::result::Result<(), String> {
    let yaml = !matches!(ext, "toml" | "json");
    let mut depth = 0usize;
    for (n, line) in text.lines().enumerate() {
        let lineno = n + 1;
        if yaml {
            let body = line.trim_start_matches([' ', '\t']);
            let mut block = line.len() - body.len();
            let mut rest = body;
            while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")) {
                block += 2;
                rest = r.trim_start_matches(' ');
            }
            if block > MAX_INDENT {
                return Err(format!("line {lineno}: nested deeper than a platform file may be (indentation and '- ' at most {MAX_INDENT} columns)"));
            }
        }
        let mut quote: Option<char> = None;
        let mut escaped = false;
        for c in line.chars() {
            match quote {
                Some(q) => {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' && q == '"' {
                        escaped = true;
                    } else if c == q {
                        quote = None;
                    }
                }
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '#' if ext != "json" => break,
                    '[' | '{' => {
                        depth += 1;
                        if depth > MAX_NESTING {
                            return Err(format!("line {lineno}: nested deeper than a platform file may be (at most {MAX_NESTING} levels of [ and {{)"));
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A platform with capacities resolved for one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Resolved {
    pub platform: Platform,
    pub capacity: Vec<Capacity>,
    /// Capacity of each tier in pages (`u64::MAX` = unlimited).
    pub capacity_pages: Vec<u64>,
    pub page_size: u64,
    pub footprint_pages: u64,
}

impl Resolved {
    pub fn tiers(&self) -> usize {
        self.platform.tiers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_presets_load() {
        let ps = Platform::presets();
        assert_eq!(ps.len(), 8);
        assert!(ps.iter().any(|p| p.tiers.len() == 3));
    }

    #[test]
    fn unknown_platform_is_named() {
        let e = Platform::load("hbm-ddr5").unwrap_err().to_string();
        assert!(e.contains("hbm-ddr5") && e.contains("dram-pmem"), "{e}");
    }

    #[test]
    fn capacity_that_cannot_hold_the_footprint_is_refused() {
        let p = Platform::load("dram-pmem").unwrap();
        let mut q = p.clone();
        q.tiers[1].capacity = Some(CapacityField::Text("0.5".into()));
        assert!(q.resolve(1000, 4096, &[(0, Capacity::Fraction(0.2))]).is_err());
        let r = p.resolve(1000, 4096, &[(0, Capacity::Fraction(0.2))]).unwrap();
        assert_eq!(r.capacity_pages[0], 200);
    }

    #[test]
    fn platform_files_with_typos_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.toml");
        let mut text = PRESETS[0].1.replacen("read_latency_ns", "read_latncy_ns", 1);
        std::fs::write(&f, &text).unwrap();
        let e = Platform::load(f.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("read_latncy_ns"), "{e}");
        text = PRESETS[0].1.replacen("read_latency_ns = ", "read_latency_ns = -", 1);
        std::fs::write(&f, &text).unwrap();
        let e = Platform::load(f.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("read_latency_ns") && e.contains("positive"), "{e}");
    }

    // ---- The presets against their sources (docs/platforms.md lists every number and where
    // it comes from). Each test names the seed section or public reference it checks.

    fn preset(name: &str) -> Platform {
        Platform::load(name).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn tier<'a>(p: &'a Platform, name: &str) -> &'a Tier {
        p.tiers.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{}: no tier {name}", p.name))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    const GIB: u64 = 1 << 30;

    #[test]
    fn every_preset_is_sourced_and_ordered_by_bandwidth() {
        for p in Platform::presets() {
            assert!(!p.description.is_empty() && !p.source.is_empty(), "{}: description and source are required", p.name);
            assert!(!p.description.contains("PROVISIONAL") && !p.source.contains("PROVISIONAL"), "{} is still provisional", p.name);
            // fastest first: no tier reads faster than the one above it
            for w in p.tiers.windows(2) {
                assert!(w[0].read_bw_gb_per_s >= w[1].read_bw_gb_per_s, "{}: {} is listed before the faster {}", p.name, w[0].name, w[1].name);
            }
            // with three or more tiers every tier above the last needs a capacity, or the lower
            // tiers would never be used
            for t in &p.tiers[..p.tiers.len() - 1] {
                if p.tiers.len() > 2 {
                    assert!(t.capacity.is_some(), "{}: middle tier {} needs a capacity", p.name, t.name);
                }
            }
            // energy is either given for every tier or for none (a half-filled table would
            // make energy comparisons meaningless)
            let given = p.tiers.iter().filter(|t| t.read_energy_pj_per_bit > 0.0).count();
            assert!(given == 0 || given == p.tiers.len(), "{}: energy given for some tiers only", p.name);
        }
    }

    #[test]
    fn presets_round_trip_through_yaml_and_json() {
        let dir = tempfile::tempdir().unwrap();
        for p in Platform::presets() {
            let y = dir.path().join(format!("{}.yaml", p.name));
            std::fs::write(&y, serde_yaml_ng::to_string(&p).unwrap()).unwrap();
            assert_eq!(Platform::load(y.to_str().unwrap()).unwrap(), p, "{} via YAML", p.name);
            let j = dir.path().join(format!("{}.json", p.name));
            std::fs::write(&j, serde_json::to_string_pretty(&p).unwrap()).unwrap();
            assert_eq!(Platform::load(j.to_str().unwrap()).unwrap(), p, "{} via JSON", p.name);
        }
    }

    #[test]
    fn hbm_ddr_presets_follow_seed_000() {
        for (name, slow, bw, lat) in [("hbm-ddr3", "DDR3", 12.8, 32.5), ("hbm-ddr4", "DDR4", 19.2, 30.0)] {
            let p = preset(name);
            assert_eq!(p.tiers.len(), 2);
            let hbm = tier(&p, "HBM");
            let ddr = tier(&p, slow);
            // 000 §5.1: upper tier 12.5% of peak RSS (1:8), lower tier unbounded
            assert_eq!(hbm.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Fraction(0.125), "{name}");
            assert!(ddr.capacity.is_none(), "{name}");
            // Ramulator HBM_1Gbps, 8 channels: 128 GB/s; read (7+7+2) clocks of 2 ns
            assert!(close(hbm.read_bw_gb_per_s, 128.0) && close(hbm.read_latency_ns, 32.0), "{name}");
            // one DDR channel: rate x 8 bytes; read (nRCD + nCL + nBL) x tCK
            assert!(close(ddr.read_bw_gb_per_s, bw) && close(ddr.read_latency_ns, lat), "{name}");
            // HBM's advantage is bandwidth; its latency is within 10% of the DDR device's
            assert!(hbm.read_bw_gb_per_s >= 6.0 * ddr.read_bw_gb_per_s, "{name}");
            assert!((hbm.read_latency_ns / ddr.read_latency_ns - 1.0).abs() < 0.1, "{name}");
            // 000 §5.1: page faults 5 µs, TLB shootdowns 3 µs, copy set by the bandwidth
            assert_eq!((p.migration.fault_ns, p.migration.tlb_shootdown_ns), (5000.0, 3000.0), "{name}");
            assert!(p.migration.copy_from_bandwidth, "{name}");
            // 000 §5.1: 3.2 GHz, 128-entry ROB
            assert_eq!((p.cpu.freq_ghz, p.cpu.rob_entries), (3.2, 128), "{name}");
        }
    }

    #[test]
    fn hbm_pcm_matches_seed_001_tables_2_3_and_5() {
        let p = preset("hbm-pcm");
        let hbm = tier(&p, "HBM");
        let pcm = tier(&p, "PCM");
        // Table 2: 1 GB HBM + 16 GB PCM
        assert_eq!(hbm.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(GIB));
        assert_eq!(pcm.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(16 * GIB));
        // Table 2: PCM read 80 ns = 7.5 tPRE + 62.5 tSENSE + 10 tBUS; write 250 ns; HBM tRCD + tCAS = 28 ns plus a 4 ns burst
        assert!(close(pcm.read_latency_ns, 7.5 + 62.5 + 10.0));
        assert!(close(pcm.write_latency_ns, 250.0));
        assert!(close(hbm.read_latency_ns, 14.0 + 14.0 + 4.0));
        // tBUS agrees with the bus bandwidth: 64 B over one 6.4 GB/s channel takes 10 ns
        assert!(close(64.0 / (pcm.read_bw_gb_per_s / 2.0), 10.0));
        // PCM writes occupy the banks: shared bandwidth, writes slower than reads
        assert!(pcm.shared_bandwidth && pcm.write_bw_gb_per_s < pcm.read_bw_gb_per_s);
        // Table 5: HBM 3.92 pJ/bit; PCM read 42, write 140 pJ/bit
        assert_eq!((hbm.read_energy_pj_per_bit, hbm.write_energy_pj_per_bit), (3.92, 3.92));
        assert_eq!((pcm.read_energy_pj_per_bit, pcm.write_energy_pj_per_bit), (42.0, 140.0));
        // Table 3 at 3.2 GHz: TLB invalidation 300 cycles; page walk 150 + reverse mapping 4480 cycles
        let ns = |cycles: f64| cycles / p.cpu.freq_ghz;
        assert!(close(p.migration.tlb_shootdown_ns, ns(300.0)));
        assert!(close(p.migration.per_page_ns, ns(150.0 + 4480.0)));
        assert_eq!(p.migration.fault_ns, 0.0);
        // §4.1: 3.2 GHz, 128-entry ROB
        assert_eq!((p.cpu.freq_ghz, p.cpu.rob_entries), (3.2, 128));
    }

    #[test]
    fn mcdram_ddr4_matches_seed_002() {
        let p = preset("mcdram-ddr4");
        let mc = tier(&p, "MCDRAM");
        let ddr = tier(&p, "DDR4");
        // 002 §V-A: 16 GB MCDRAM (8 x 2 GB), 192 GB DDR4 (6 x 32 GB), 1.30 GHz
        assert_eq!(mc.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(16 * GIB));
        assert_eq!(ddr.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(192 * GIB));
        assert_eq!(p.cpu.freq_ghz, 1.3);
        // 002 §III: much higher bandwidth, similar latency (measured: MCDRAM no faster)
        assert!(mc.read_bw_gb_per_s >= 4.0 * ddr.read_bw_gb_per_s);
        assert!(mc.read_latency_ns >= ddr.read_latency_ns && mc.read_latency_ns <= 1.25 * ddr.read_latency_ns);
    }

    #[test]
    fn dram_pmem_keeps_the_ratios_of_seed_003() {
        let p = preset("dram-pmem");
        let (fast, slow) = (&p.tiers[0], &p.tiers[1]);
        // 003 §3.1: latency 1:3, bandwidth 1:0.37; costs 1 µs per migrated page, 3 µs per period
        assert!(close(slow.read_latency_ns / fast.read_latency_ns, 3.0));
        assert!(close(slow.read_bw_gb_per_s / fast.read_bw_gb_per_s, 0.37));
        assert_eq!((p.migration.per_page_ns, p.migration.per_period_ns), (1000.0, 3000.0));
        assert_eq!((fast.read_latency_ns, fast.read_bw_gb_per_s), (50.0, 10.0));
    }

    #[test]
    fn dram_dcpmm_has_the_optane_asymmetry_of_seed_004() {
        let p = preset("dram-dcpmm");
        let dram = tier(&p, "DRAM");
        let pm = tier(&p, "DCPMM");
        // 004 §2.1 / Fig. 2: DCPMM write bandwidth far below its read bandwidth, writes occupy the media
        assert!(pm.write_bw_gb_per_s < 0.5 * pm.read_bw_gb_per_s);
        assert!(pm.shared_bandwidth && !dram.shared_bandwidth);
        // reads about 3x slower than DRAM (Yang et al., FAST 2020: 305 vs 101.5 ns), lower peak read bandwidth
        assert!((pm.read_latency_ns / dram.read_latency_ns - 3.0).abs() < 0.1);
        assert!(pm.read_bw_gb_per_s < dram.read_bw_gb_per_s);
        // 004 §5.1: 32 GB DRAM and 256 GB DCPMM per socket, 2.30 GHz
        assert_eq!(dram.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(32 * GIB));
        assert_eq!(pm.capacity.as_ref().unwrap().resolve("t").unwrap(), Capacity::Bytes(256 * GIB));
        assert_eq!(p.cpu.freq_ghz, 2.3);
    }

    #[test]
    fn cxl_adds_pond_latency_and_keeps_near_ddr5_bandwidth() {
        for name in ["dram-cxl", "hbm-dram-cxl"] {
            let p = preset(name);
            let dram = tier(&p, "DRAM");
            let cxl = tier(&p, "CXL");
            // Pond (ASPLOS 2023): CXL adds about 70-90 ns over local DRAM
            let extra = cxl.read_latency_ns - dram.read_latency_ns;
            assert!((70.0..=90.0).contains(&extra), "{name}: {extra}");
            // Micron CZ120: 36 GB/s per module, just under a DDR5-4800 channel's 38.4 GB/s
            assert!(cxl.read_bw_gb_per_s < dram.read_bw_gb_per_s && cxl.read_bw_gb_per_s > 0.9 * dram.read_bw_gb_per_s, "{name}");
            assert!(cxl.capacity.is_none(), "{name}: the expander is the unlimited tier");
        }
    }

    #[test]
    fn loaded_latency_curves_interpolate_from_an_implicit_idle_point() {
        // empty: flat
        assert_eq!(loaded_latency_factor(&[], 0.7), 1.0);
        // a first point past u = 0 starts from [0, 1]; flat past the last point
        let c = [[0.5, 2.0], [1.0, 4.0]];
        assert_eq!(loaded_latency_factor(&c, 0.0), 1.0);
        assert!(close(loaded_latency_factor(&c, 0.25), 1.5));
        assert!(close(loaded_latency_factor(&c, 0.75), 3.0));
        assert_eq!(loaded_latency_factor(&c, 1.0), 4.0);
        assert_eq!(loaded_latency_factor(&c, 7.0), 4.0);
        // a first point at u = 0 sets the idle factor itself
        let c = [[0.0, 1.5], [0.5, 2.5]];
        assert_eq!(loaded_latency_factor(&c, 0.0), 1.5);
        assert_eq!(loaded_latency_factor(&c, -1.0), 1.5);
        assert!(close(loaded_latency_factor(&c, 0.25), 2.0));
    }

    #[test]
    fn loaded_latency_presets_follow_their_sources() {
        let p = preset("dram-dcpmm");
        let (dram, pm) = (tier(&p, "DRAM"), tier(&p, "DCPMM"));
        // DRAM (Intel MLC on Cascade Lake DDR4): nearly flat to 80% of the peak, about 1.9x at it
        assert!(dram.latency_factor(0.5) < 1.25 && dram.latency_factor(0.8) < 1.5);
        assert!((1.8..=2.0).contains(&dram.latency_factor(1.0)));
        // DCPMM rises earlier and higher than DRAM at every utilization
        for k in 1..=20 {
            let u = k as f64 / 20.0;
            assert!(pm.latency_factor(u) >= dram.latency_factor(u), "u = {u}");
        }
        // 004 §3: at DCPMM's peak, up to 11.3x the latency of DRAM serving the same demand (at
        // half its peak: 2x lower peak read bandwidth), sequential idle latencies of Yang et al.
        // Fig. 2 (DRAM 81.4 ns, Optane 169.4 ns)
        let ratio = pm.latency_factor(1.0) * 169.4 / (dram.latency_factor(0.5) * 81.4);
        assert!((ratio - 11.3).abs() < 0.1, "{ratio}");
        // dram-cxl: both tiers carry the DRAM curve; hbm-dram-cxl stays flat
        let p = preset("dram-cxl");
        for t in &p.tiers {
            assert_eq!(t.loaded_latency, dram.loaded_latency, "{}", t.name);
        }
        assert!(preset("hbm-dram-cxl").tiers.iter().all(|t| t.loaded_latency.is_empty()));
        // every other preset is flat, so their results are unchanged
        for p in Platform::presets() {
            if !["dram-dcpmm", "dram-cxl"].contains(&p.name.as_str()) {
                assert!(p.tiers.iter().all(|t| t.loaded_latency.is_empty()), "{}", p.name);
            }
            assert_eq!(p.cpu.load_window_ns, 1000.0, "{}", p.name);
        }
    }

    #[test]
    fn hbm_dram_cxl_has_three_tiers_ordered_by_latency_and_bandwidth() {
        let p = preset("hbm-dram-cxl");
        let names: Vec<&str> = p.tiers.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["HBM", "DRAM", "CXL"]);
        // latency never decreases down the tiers (HBM is no faster than DRAM to reach, only wider);
        // bandwidth strictly decreases
        for w in p.tiers.windows(2) {
            assert!(w[0].read_latency_ns <= w[1].read_latency_ns, "{} vs {}", w[0].name, w[1].name);
            assert!(w[0].read_bw_gb_per_s > w[1].read_bw_gb_per_s, "{} vs {}", w[0].name, w[1].name);
        }
        assert!(p.tiers[0].read_latency_ns < p.tiers[2].read_latency_ns);
        // a resolved run puts 1/8 of the footprint in HBM and 1/4 in DRAM, the rest on CXL
        let r = p.resolve(800, 4096, &[]).unwrap();
        assert_eq!(&r.capacity_pages[..2], &[100, 200]);
        assert_eq!(r.capacity_pages[2], u64::MAX);
    }
}
