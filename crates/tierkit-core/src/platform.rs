//! Layer 2 (data): platforms. A platform is N ≥ 2 memory tiers, fastest first, plus the costs
//! of moving pages between them and the CPU that issues the accesses. Platforms are data:
//! presets live as TOML files in `platforms/` (embedded at build time), and users can load
//! their own TOML, YAML or JSON files with the same fields. `docs/platforms.md` lists the
//! presets with their numbers and sources.

use crate::error::{Error, Result};
use crate::units::Capacity;
use serde::{Deserialize, Serialize};
use std::path::Path;

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
}

impl Default for Cpu {
    fn default() -> Self {
        // 3.2 GHz core with a 128-entry ROB, as in 001's Ramulator configuration
        Cpu { freq_ghz: 3.2, base_cpi: 1.0, rob_entries: 128, max_outstanding: 32, write_queue_entries: 64 }
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
                    "unknown platform '{name_or_path}' (presets: {}; or a path to a .toml, .yaml or .json platform file)",
                    PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
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
        if self.tiers.len() < 2 {
            return Err(Error::config(format!("{origin}: tiers"), "a platform needs at least two tiers"));
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
            }
            for (f, v) in [("read_energy_pj_per_bit", t.read_energy_pj_per_bit), ("write_energy_pj_per_bit", t.write_energy_pj_per_bit)] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(Error::config(key(f), format!("{v} must not be negative")));
                }
            }
            if let Some(c) = &t.capacity {
                c.resolve(&key("capacity"))?;
            }
            if self.tiers[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::config(key("name"), "tier names must be unique"));
            }
        }
        let m = &self.migration;
        for (f, v) in [("fault_ns", m.fault_ns), ("tlb_shootdown_ns", m.tlb_shootdown_ns), ("per_page_ns", m.per_page_ns), ("per_period_ns", m.per_period_ns)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(Error::config(format!("{origin}: migration.{f}"), format!("{v} must not be negative")));
            }
        }
        let c = &self.cpu;
        if !(c.freq_ghz > 0.0 && c.base_cpi > 0.0 && c.rob_entries > 0 && c.max_outstanding > 0 && c.write_queue_entries > 0) {
            return Err(Error::config(format!("{origin}: cpu"), "frequency, CPI, ROB, outstanding misses and write queue must be positive"));
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
}
