//! DAMON through its sysfs interface (/sys/kernel/mm/damon/admin, Documentation/admin-guide/
//! mm/damon/usage.rst): virtual-address monitoring of one process for the daemon policies, and
//! the physical-address `migrate_hot`/`migrate_cold` schemes of the `damon-tiering` kernel
//! policy. Everything tierkit creates it removes again on drop ([`DamonAdmin`]).

use std::path::{Path, PathBuf};

use tierkit_core::{Error, Result};

pub const ADMIN: &str = "sys/kernel/mm/damon/admin";

/// One region DAMON reported for a scheme (`tried_regions/N/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    /// Sampling intervals, of the last aggregation window's, in which the region was accessed.
    pub nr_accesses: u32,
    /// Aggregation windows the region kept its access frequency.
    pub age: u32,
}

fn read_u64(p: &Path) -> Result<u64> {
    let t = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
    t.trim().parse().map_err(|_| Error::config(p.display().to_string(), format!("'{}' is not a number", t.trim())))
}

fn write(p: &Path, v: impl AsRef<str>) -> Result<()> {
    std::fs::write(p, v.as_ref()).map_err(|e| Error::config(p.display().to_string(), format!("writing '{}': {e}", v.as_ref())))
}

/// Write a kdamond's `state`. The kernel's handler only try-locks DAMON's sysfs lock and
/// answers EBUSY while another kdamond's callback holds it (mm/damon/sysfs.c, `state_store`):
/// with two kdamonds (damon-tiering) turning the second on raced the first's callbacks, more
/// often in a slow guest. A busy answer is retried for up to 5 s; anything else is an error.
fn write_state(kdamond: &Path, v: &str) -> Result<()> {
    write_busy_retried(&kdamond.join("state"), v, std::time::Duration::from_secs(5))
}

fn write_busy_retried(p: &Path, v: &str, patience: std::time::Duration) -> Result<()> {
    let t0 = std::time::Instant::now();
    loop {
        match std::fs::write(p, v) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(16 /* EBUSY */) && t0.elapsed() < patience => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(e) => return Err(Error::config(p.display().to_string(), format!("writing '{v}': {e}"))),
        }
    }
}

/// Read a scheme's `tried_regions` directory: every numbered subdirectory's start, end,
/// nr_accesses and age, sorted by start.
pub fn read_tried_regions(dir: &Path) -> Result<Vec<Region>> {
    let mut out = read_tried_regions_in_order(dir)?;
    out.sort_by_key(|r| r.start);
    Ok(out)
}

fn read_region(p: &Path) -> Result<Region> {
    let r = Region {
        start: read_u64(&p.join("start"))?,
        end: read_u64(&p.join("end"))?,
        nr_accesses: read_u64(&p.join("nr_accesses"))? as u32,
        age: read_u64(&p.join("age"))? as u32,
    };
    if r.end <= r.start {
        return Err(Error::config(p.display().to_string(), format!("region end {:#x} not after start {:#x}", r.end, r.start)));
    }
    Ok(r)
}

/// The region holding `addr` in sorted, non-overlapping `regions`.
pub fn region_of(regions: &[Region], addr: u64) -> Option<&Region> {
    let i = regions.partition_point(|r| r.start <= addr);
    let r = regions.get(i.checked_sub(1)?)?;
    (addr < r.end).then_some(r)
}

/// The kdamonds tierkit made. DAMON's sysfs directory is one shared, machine-wide state, so
/// tierkit only uses it when nobody else does (no kdamond exists), and leaves it as it found
/// it: every kdamond off, none left.
pub struct DamonAdmin {
    kdamonds_dir: PathBuf,
    pub n: usize,
    released: bool,
}

impl DamonAdmin {
    /// Make `n` kdamonds under `root`/sys/kernel/mm/damon/admin.
    pub fn claim(root: &Path, n: usize) -> Result<DamonAdmin> {
        let admin = root.join(ADMIN);
        if !admin.is_dir() {
            return Err(Error::config(
                "DAMON",
                format!(
                    "this kernel has no DAMON sysfs interface ({} missing; needs CONFIG_DAMON_SYSFS, Linux 5.18+, e.g. Debian's 6.12 kernels)",
                    admin.display()
                ),
            ));
        }
        let kd = admin.join("kdamonds");
        let existing = read_u64(&kd.join("nr_kdamonds"))?;
        if existing != 0 {
            return Err(Error::config(
                "DAMON",
                format!("{existing} kdamond(s) already exist under {} (another user of DAMON); tierkit run never touches them", kd.display()),
            ));
        }
        write(&kd.join("nr_kdamonds"), n.to_string())?;
        Ok(DamonAdmin { kdamonds_dir: kd, n, released: false })
    }

    pub fn kdamond(&self, i: usize) -> PathBuf {
        self.kdamonds_dir.join(i.to_string())
    }

    /// CPU time so far of kdamonds `from..` running now (a kdamond that is off has none).
    pub fn cpu_s(&self, from: usize) -> f64 {
        (from..self.n).map(|i| kdamond_cpu_s(&self.kdamond(i))).sum()
    }

    /// Turn every kdamond off and remove them. Errors are collected, not raised: this runs
    /// on the way out, also after a failure.
    pub fn release(&mut self) -> Vec<String> {
        if self.released {
            return Vec::new();
        }
        self.released = true;
        let mut errs = Vec::new();
        for i in 0..self.n {
            if kdamond_on(&self.kdamond(i)) {
                if let Err(e) = write_state(&self.kdamond(i), "off") {
                    errs.push(e.to_string());
                }
            }
        }
        let nr = self.kdamonds_dir.join("nr_kdamonds");
        if let Err(e) = std::fs::write(&nr, "0") {
            errs.push(format!("{}: {e}", nr.display()));
        }
        errs
    }
}

impl Drop for DamonAdmin {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Whether a kdamond runs (its `state` reads `on`).
fn kdamond_on(kdamond: &Path) -> bool {
    std::fs::read_to_string(kdamond.join("state")).is_ok_and(|s| s.trim() == "on")
}

/// CPU time of a kdamond's thread so far (its `pid` file names it while it runs), 0 when off.
pub fn kdamond_cpu_s(kdamond: &Path) -> f64 {
    std::fs::read_to_string(kdamond.join("pid"))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .filter(|&p| p > 0)
        .and_then(crate::sys::task_cpu_s)
        .unwrap_or(0.0)
}

/// Monitoring attributes of the vaddr monitor.
#[derive(Clone, Copy, Debug)]
pub struct MonitorAttrs {
    pub sample_us: u64,
    pub aggr_us: u64,
    pub update_us: u64,
    pub min_regions: u64,
    pub max_regions: u64,
}

impl Default for MonitorAttrs {
    fn default() -> Self {
        // DAMON's defaults for the intervals; many more regions than its default (1000) so
        // that a region is a few pages of a program of a few hundred MiB
        MonitorAttrs { sample_us: 5_000, aggr_us: 100_000, update_us: 1_000_000, min_regions: 10, max_regions: 4_000 }
    }
}

/// Write the access pattern that matches every region.
fn match_all(scheme: &Path) -> Result<()> {
    for (k, max) in [("sz", u64::MAX), ("nr_accesses", u32::MAX as u64), ("age", u32::MAX as u64)] {
        write(&scheme.join(format!("access_pattern/{k}/min")), "0")?;
        write(&scheme.join(format!("access_pattern/{k}/max")), max.to_string())?;
    }
    Ok(())
}

fn context(kdamond: &Path, ops: &str, a: &MonitorAttrs) -> Result<PathBuf> {
    write(&kdamond.join("contexts/nr_contexts"), "1")?;
    let ctx = kdamond.join("contexts/0");
    let avail = std::fs::read_to_string(ctx.join("avail_operations")).unwrap_or_default();
    if !avail.split_whitespace().any(|o| o == ops) {
        return Err(Error::config(
            "DAMON",
            format!("this kernel's DAMON has no '{ops}' operations (it offers: {})", avail.split_whitespace().collect::<Vec<_>>().join(", ")),
        ));
    }
    write(&ctx.join("operations"), ops)?;
    let m = ctx.join("monitoring_attrs");
    write(&m.join("intervals/sample_us"), a.sample_us.to_string())?;
    write(&m.join("intervals/aggr_us"), a.aggr_us.to_string())?;
    write(&m.join("intervals/update_us"), a.update_us.to_string())?;
    // max before min: the kernel checks min <= max on commit, not per write, but keep it valid
    write(&m.join("nr_regions/max"), a.max_regions.to_string())?;
    write(&m.join("nr_regions/min"), a.min_regions.to_string())?;
    Ok(ctx)
}

/// DAMON virtual-address monitoring of a workload's processes: a kdamond with one `vaddr`
/// context, one target per process, and one scheme with the action `stat` that matches every
/// region, so that `update_schemes_tried_regions` exposes all the regions with their access
/// frequency.
pub struct VaddrMonitor {
    kdamond: PathBuf,
    ctx: PathBuf,
    scheme: PathBuf,
    pub attrs: MonitorAttrs,
    /// the processes watched, in target order
    pub pids: Vec<i32>,
    /// times the targets were changed (the kdamond stopped and started again)
    pub restarts: u64,
    /// reads whose regions could not be told apart by process (then none is used)
    pub unsplit: u64,
    /// CPU time of the kdamond threads stopped by [`VaddrMonitor::retarget`]
    pub cpu_before_s: f64,
    /// CPU time of the current kdamond thread when last read (it stops by itself when the
    /// processes have gone, and its time goes with it)
    pub cpu_last_s: f64,
}

impl VaddrMonitor {
    /// Configure kdamond `idx` of `admin` to watch `pids`, and start it.
    pub fn start(admin: &DamonAdmin, idx: usize, pids: &[i32], attrs: MonitorAttrs) -> Result<VaddrMonitor> {
        let kd = admin.kdamond(idx);
        let ctx = context(&kd, "vaddr", &attrs)?;
        write(&ctx.join("schemes/nr_schemes"), "1")?;
        let scheme = ctx.join("schemes/0");
        write(&scheme.join("action"), "stat")?;
        match_all(&scheme)?;
        let mut m = VaddrMonitor { kdamond: kd, ctx, scheme, attrs, pids: Vec::new(), restarts: 0, unsplit: 0, cpu_before_s: 0.0, cpu_last_s: 0.0 };
        m.set_targets(pids)?;
        write_state(&m.kdamond, "on")?;
        Ok(m)
    }

    fn set_targets(&mut self, pids: &[i32]) -> Result<()> {
        write(&self.ctx.join("targets/nr_targets"), pids.len().to_string())?;
        for (i, pid) in pids.iter().enumerate() {
            write(&self.ctx.join(format!("targets/{i}/pid_target")), pid.to_string())?;
        }
        self.pids = pids.to_vec();
        Ok(())
    }

    /// CPU time of the monitor's kdamond threads so far (those stopped to change targets, and
    /// the current one when last read).
    pub fn cpu_s(&self) -> f64 {
        self.cpu_before_s + self.cpu_last_s.max(kdamond_cpu_s(&self.kdamond))
    }

    /// Watch `pids` from now on, if they are not the processes watched already: the kdamond
    /// is stopped, given the new targets and started again (its regions start over). A
    /// process that ended meanwhile makes the start fail: then the next observation tries
    /// again with the processes left.
    pub fn retarget(&mut self, pids: &[i32]) -> Result<()> {
        let on = kdamond_on(&self.kdamond);
        // the same processes, watched: nothing to do; an earlier start that failed (a process
        // ended meanwhile) is tried again
        if pids.is_empty() || pids == self.pids.as_slice() && on {
            return Ok(());
        }
        if on {
            // its thread ends with it: count its CPU time now
            let cpu = kdamond_cpu_s(&self.kdamond).max(self.cpu_last_s);
            write_state(&self.kdamond, "off")?;
            self.cpu_before_s += cpu;
            self.cpu_last_s = 0.0;
        }
        self.restarts += 1;
        self.set_targets(pids)?;
        write_state(&self.kdamond, "on")
    }

    /// The regions of the last aggregation window, per watched process (in the order of
    /// [`VaddrMonitor::pids`]). The kernel fills `tried_regions` when the scheme is next
    /// applied (one aggregation interval at most), and the write returns then. A monitor whose
    /// processes have all gone stops by itself: then no regions.
    pub fn regions(&mut self) -> Result<Vec<Vec<Region>>> {
        if !kdamond_on(&self.kdamond) {
            return Ok(Vec::new());
        }
        if write_state(&self.kdamond, "update_schemes_tried_regions").is_err() {
            return Ok(Vec::new());
        }
        self.cpu_last_s = self.cpu_last_s.max(kdamond_cpu_s(&self.kdamond));
        let flat = read_tried_regions_in_order(&self.scheme.join("tried_regions"))?;
        match split_targets(flat, self.pids.len()) {
            Some(v) => Ok(v),
            None => {
                self.unsplit += 1;
                Ok(Vec::new())
            }
        }
    }
}

/// `tried_regions/N/` in the order the kernel numbered them: target by target, each target's
/// regions by address (mm/damon/core.c applies schemes that way).
fn read_tried_regions_in_order(dir: &Path) -> Result<Vec<Region>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut numbered: Vec<(u64, PathBuf)> = rd.flatten().filter_map(|e| Some((e.file_name().to_str()?.parse::<u64>().ok()?, e.path()))).collect();
    numbered.sort_unstable_by_key(|x| x.0);
    numbered.iter().map(|(_, p)| read_region(p)).collect()
}

/// Cut the regions of `n` targets, listed target by target and each target's by address, where
/// the address goes back: a target's regions end at its highest mapping (the stack, near the
/// top of the address space) and the next one's start at its lowest. None if that does not
/// give `n` parts (a target without regions: its process ended, or its regions are not set
/// up yet), so that no process is credited with another's accesses.
pub fn split_targets(regions: Vec<Region>, n: usize) -> Option<Vec<Vec<Region>>> {
    if n <= 1 {
        return (n == 1).then(|| vec![regions]);
    }
    let mut out: Vec<Vec<Region>> = vec![Vec::new()];
    for r in regions {
        let cur = out.last_mut().unwrap();
        if cur.last().is_some_and(|l| r.start < l.end) {
            out.push(vec![r]);
        } else {
            cur.push(r);
        }
    }
    (out.len() == n).then_some(out)
}

/// The `damon-tiering` kernel policy's parameters (after the kernel's samples/damon/mtier.c:
/// promote hot pages of the slow node, demote cold pages of the fast node, each with a size
/// quota per interval and a goal on the fast node's use).
#[derive(Clone, Debug)]
pub struct TieringParams {
    pub apply_interval_us: u64,
    /// Size quotas of migrate_hot and migrate_cold per reset interval (mtier: 200 MiB each).
    pub hot_quota_bytes: u64,
    pub cold_quota_bytes: u64,
    pub quota_reset_ms: u64,
    /// nr_accesses a region of the slow node needs to be promoted.
    pub hot_min_accesses: u64,
    /// Aggregation intervals a region of the fast node must have gone unaccessed to be demoted.
    pub cold_min_age: u64,
    /// Goal for promotion: the fast node's used memory, basis points (mtier: 9970).
    pub used_goal_bp: u64,
    /// Goal for demotion: the fast node's free memory, basis points (mtier: 50).
    pub free_goal_bp: u64,
    /// Weights of access frequency and age in a region's priority (size does not rank).
    pub weight_nr_accesses_permil: u64,
    pub weight_age_permil: u64,
    /// migrate_cold never demotes a page referenced since the last check.
    pub young_filter: bool,
    pub attrs: MonitorAttrs,
}

impl Default for TieringParams {
    fn default() -> Self {
        TieringParams {
            apply_interval_us: 1_000_000,
            hot_quota_bytes: 200 << 20,
            cold_quota_bytes: 200 << 20,
            quota_reset_ms: 1000,
            hot_min_accesses: 1,
            cold_min_age: 0,
            used_goal_bp: 9970,
            free_goal_bp: 50,
            weight_nr_accesses_permil: 100,
            weight_age_permil: 100,
            young_filter: true,
            attrs: MonitorAttrs { max_regions: 1000, ..MonitorAttrs::default() },
        }
    }
}

/// A node's physical address range: its memory blocks (`nodeN/memoryM`) times the block size.
pub fn node_phys_range(root: &Path, node: u32) -> Result<(u64, u64)> {
    let bs = crate::sys::memory_block_bytes(root)?;
    let blocks = crate::sys::node_memory_blocks(root, node)?;
    match (blocks.iter().min(), blocks.iter().max()) {
        (Some(&lo), Some(&hi)) => Ok((lo * bs, (hi + 1) * bs)),
        _ => Err(Error::config(
            root.join(format!("sys/devices/system/node/node{node}")).display().to_string(),
            "no memory blocks (memoryN entries) for this node",
        )),
    }
}

/// What the tiering schemes did (`stats/`), and whether the kernel took the goals.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SchemeStats {
    pub action: String,
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub qt_exceeds: u64,
    /// The quota goal the kernel took, or why none (metrics by node arrived in Linux 6.16).
    pub goal: String,
    /// The scheme as the kernel's sysfs holds it after the setup (read back, not what tierkit
    /// meant to write): a model of the run simulates this, not mtier's intent.
    pub effective: SchemeConfig,
}

/// A tiering scheme's configuration read back from sysfs once its kdamond is on.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SchemeConfig {
    pub sample_us: u64,
    pub aggr_us: u64,
    pub min_nr_regions: u64,
    pub max_nr_regions: u64,
    /// the monitored physical range, bytes
    pub region_start: u64,
    pub region_end: u64,
    pub target_nid: u64,
    pub min_nr_accesses: u64,
    pub max_nr_accesses: u64,
    pub min_age: u64,
    /// None where the kernel has no per-scheme apply interval (before 6.7)
    pub apply_interval_us: Option<u64>,
    pub quota_bytes: u64,
    pub quota_reset_interval_ms: u64,
    pub weight_sz_permil: u64,
    pub weight_nr_accesses_permil: u64,
    pub weight_age_permil: u64,
    /// quota goals in place: (metric, target value); empty where the kernel refused them
    pub goals: Vec<(String, u64)>,
    /// filters in place: (type, matching, allow); `allow` None before Linux 6.14
    pub filters: Vec<(String, bool, Option<bool>)>,
}

impl SchemeConfig {
    /// Read scheme 0 of context 0 of `kdamond`; a file missing in this kernel reads as 0.
    pub fn read(kdamond: &Path) -> SchemeConfig {
        let ctx = kdamond.join("contexts/0");
        let s = ctx.join("schemes/0");
        let num = |p: PathBuf| read_u64(&p).unwrap_or(0);
        let text = |p: PathBuf| std::fs::read_to_string(p).map(|t| t.trim().to_string()).unwrap_or_default();
        let flag = |p: PathBuf| std::fs::read_to_string(p).ok().map(|t| matches!(t.trim(), "Y" | "y" | "1"));
        let nr_goals = num(s.join("quotas/goals/nr_goals"));
        let goals = (0..nr_goals)
            .map(|i| {
                let g = s.join(format!("quotas/goals/{i}"));
                (text(g.join("target_metric")), num(g.join("target_value")))
            })
            .collect();
        let nr_filters = num(s.join("filters/nr_filters"));
        let filters = (0..nr_filters)
            .map(|i| {
                let f = s.join(format!("filters/{i}"));
                (text(f.join("type")), flag(f.join("matching")).unwrap_or(false), flag(f.join("allow")))
            })
            .collect();
        let m = ctx.join("monitoring_attrs");
        let r = ctx.join("targets/0/regions/0");
        SchemeConfig {
            sample_us: num(m.join("intervals/sample_us")),
            aggr_us: num(m.join("intervals/aggr_us")),
            min_nr_regions: num(m.join("nr_regions/min")),
            max_nr_regions: num(m.join("nr_regions/max")),
            region_start: num(r.join("start")),
            region_end: num(r.join("end")),
            target_nid: num(s.join("target_nid")),
            min_nr_accesses: num(s.join("access_pattern/nr_accesses/min")),
            max_nr_accesses: num(s.join("access_pattern/nr_accesses/max")),
            min_age: num(s.join("access_pattern/age/min")),
            apply_interval_us: read_u64(&s.join("apply_interval_us")).ok(),
            quota_bytes: num(s.join("quotas/bytes")),
            quota_reset_interval_ms: num(s.join("quotas/reset_interval_ms")),
            weight_sz_permil: num(s.join("quotas/weights/sz_permil")),
            weight_nr_accesses_permil: num(s.join("quotas/weights/nr_accesses_permil")),
            weight_age_permil: num(s.join("quotas/weights/age_permil")),
            goals,
            filters,
        }
    }
}

pub struct TieringSchemes {
    kdamonds: Vec<PathBuf>,
    goals: Vec<String>,
    actions: Vec<&'static str>,
    effective: Vec<SchemeConfig>,
}

impl TieringSchemes {
    /// Kdamonds `first` and `first + 1` of `admin`: promotion on the slow node's physical
    /// range, demotion on the fast node's.
    pub fn start(admin: &DamonAdmin, first: usize, root: &Path, fast: u32, slow: u32, p: &TieringParams) -> Result<TieringSchemes> {
        let mut kds = Vec::new();
        let mut goals = Vec::new();
        let max_acc = (p.attrs.aggr_us / p.attrs.sample_us.max(1)).max(1);
        for (k, promote) in [(first, true), (first + 1, false)] {
            let kd = admin.kdamond(k);
            let ctx = context(&kd, "paddr", &p.attrs)?;
            let (lo, hi) = node_phys_range(root, if promote { slow } else { fast })?;
            write(&ctx.join("targets/nr_targets"), "1")?;
            let t = ctx.join("targets/0");
            write(&t.join("regions/nr_regions"), "1")?;
            write(&t.join("regions/0/start"), lo.to_string())?;
            write(&t.join("regions/0/end"), hi.to_string())?;
            write(&ctx.join("schemes/nr_schemes"), "1")?;
            let s = ctx.join("schemes/0");
            write(&s.join("action"), if promote { "migrate_hot" } else { "migrate_cold" })?;
            write(&s.join("target_nid"), (if promote { fast } else { slow }).to_string())?;
            match_all(&s)?;
            if promote {
                write(&s.join("access_pattern/nr_accesses/min"), p.hot_min_accesses.min(max_acc).to_string())?;
            } else {
                write(&s.join("access_pattern/nr_accesses/max"), "0")?;
                write(&s.join("access_pattern/age/min"), p.cold_min_age.to_string())?;
            }
            let _ = std::fs::write(s.join("apply_interval_us"), p.apply_interval_us.to_string());
            write(&s.join("quotas/bytes"), (if promote { p.hot_quota_bytes } else { p.cold_quota_bytes }).to_string())?;
            write(&s.join("quotas/reset_interval_ms"), p.quota_reset_ms.to_string())?;
            // size does not rank regions; frequency and age do
            write(&s.join("quotas/weights/sz_permil"), "0")?;
            write(&s.join("quotas/weights/nr_accesses_permil"), p.weight_nr_accesses_permil.to_string())?;
            write(&s.join("quotas/weights/age_permil"), p.weight_age_permil.to_string())?;
            goals.push(Self::goal(&s, promote, fast, p));
            if !promote && p.young_filter {
                // never demote a page referenced since the last check (the young filter,
                // matching = the filter rejects what matches)
                if std::fs::write(s.join("filters/nr_filters"), "1").is_ok() {
                    let f = s.join("filters/0");
                    if std::fs::write(f.join("type"), "young").is_err() || std::fs::write(f.join("matching"), "Y").is_err() {
                        let _ = std::fs::write(s.join("filters/nr_filters"), "0");
                    }
                }
            }
            kds.push(kd);
        }
        for kd in &kds {
            write_state(kd, "on")?;
        }
        let effective = kds.iter().map(|kd| SchemeConfig::read(kd)).collect();
        Ok(TieringSchemes { kdamonds: kds, goals, actions: vec!["migrate_hot", "migrate_cold"], effective })
    }

    /// A goal on the fast node's use, as mtier sets it; a kernel without the node metrics
    /// (before 6.16) refuses the metric's name: then the quota alone limits the schemes.
    fn goal(s: &Path, promote: bool, fast: u32, p: &TieringParams) -> String {
        let (metric, value) = if promote { ("node_mem_used_bp", p.used_goal_bp) } else { ("node_mem_free_bp", p.free_goal_bp) };
        let g = s.join("quotas/goals");
        if std::fs::write(g.join("nr_goals"), "1").is_err() {
            return "none (no quota goals in this kernel)".into();
        }
        let g0 = g.join("0");
        let ok = std::fs::write(g0.join("target_metric"), metric).is_ok()
            && std::fs::write(g0.join("target_value"), value.to_string()).is_ok()
            && std::fs::write(g0.join("nid"), fast.to_string()).is_ok();
        if ok {
            format!("{metric}={value} on node {fast}")
        } else {
            let _ = std::fs::write(g.join("nr_goals"), "0");
            format!("none ({metric} needs Linux 6.16+; the quota alone limits the scheme)")
        }
    }

    pub fn stats(&self) -> Vec<SchemeStats> {
        let mut out = Vec::new();
        for (i, kd) in self.kdamonds.iter().enumerate() {
            let _ = write_state(kd, "update_schemes_stats");
            let st = kd.join("contexts/0/schemes/0/stats");
            let g = |k: &str| read_u64(&st.join(k)).unwrap_or(0);
            out.push(SchemeStats {
                action: self.actions[i].into(),
                nr_tried: g("nr_tried"),
                sz_tried: g("sz_tried"),
                nr_applied: g("nr_applied"),
                sz_applied: g("sz_applied"),
                qt_exceeds: g("qt_exceeds"),
                goal: self.goals[i].clone(),
                effective: self.effective[i].clone(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, p: &str, t: &str) {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    }

    #[test]
    fn tried_regions_are_read_sorted_and_looked_up() {
        let d = tempfile::tempdir().unwrap();
        let tr = d.path();
        put(tr, "total_bytes", "12288\n");
        for (i, (s, e, n, a)) in [(0x3000u64, 0x5000u64, 0u32, 7u32), (0x1000, 0x3000, 4, 2)].iter().enumerate() {
            put(tr, &format!("{i}/start"), &format!("{s}\n"));
            put(tr, &format!("{i}/end"), &format!("{e}\n"));
            put(tr, &format!("{i}/nr_accesses"), &format!("{n}\n"));
            put(tr, &format!("{i}/age"), &format!("{a}\n"));
        }
        let r = read_tried_regions(tr).unwrap();
        assert_eq!(r, vec![Region { start: 0x1000, end: 0x3000, nr_accesses: 4, age: 2 }, Region { start: 0x3000, end: 0x5000, nr_accesses: 0, age: 7 }]);
        assert_eq!(region_of(&r, 0x0fff), None);
        assert_eq!(region_of(&r, 0x1000).unwrap().nr_accesses, 4);
        assert_eq!(region_of(&r, 0x2fff).unwrap().nr_accesses, 4);
        assert_eq!(region_of(&r, 0x3000).unwrap().age, 7);
        assert_eq!(region_of(&r, 0x5000), None);
        // a bad value names its file
        put(tr, "1/nr_accesses", "many\n");
        let e = read_tried_regions(tr).unwrap_err().to_string();
        assert!(e.contains("1/nr_accesses") && e.contains("'many' is not a number"), "{e}");
    }

    #[test]
    fn regions_of_several_processes_are_cut_where_the_address_goes_back() {
        let r = |start: u64, end: u64| Region { start, end, nr_accesses: 1, age: 0 };
        // two processes: a static one (0x400000 up to its stack) and a PIE one
        let flat = vec![r(0x40_0000, 0x50_0000), r(0x50_0000, 0x7ffd_0000_0000), r(0x5555_0000_0000, 0x5555_1000_0000), r(0x7fff_0000_0000, 0x7fff_1000_0000)];
        let parts = split_targets(flat.clone(), 2).unwrap();
        assert_eq!(parts, vec![flat[..2].to_vec(), flat[2..].to_vec()]);
        // one process without regions yet: the regions cannot be attributed, none are
        assert_eq!(split_targets(flat.clone(), 3), None);
        assert_eq!(split_targets(flat.clone(), 1), Some(vec![flat]));
        assert_eq!(split_targets(Vec::new(), 0), None);
    }

    #[test]
    fn no_damon_and_damon_in_use_are_one_line_each() {
        let d = tempfile::tempdir().unwrap();
        let e = DamonAdmin::claim(d.path(), 1).err().unwrap().to_string();
        assert!(e.starts_with("DAMON: this kernel has no DAMON sysfs interface"), "{e}");
        put(d.path(), &format!("{ADMIN}/kdamonds/nr_kdamonds"), "1\n");
        let e = DamonAdmin::claim(d.path(), 1).err().unwrap().to_string();
        assert!(e.contains("1 kdamond(s) already exist") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_state_write_that_is_not_busy_fails_at_once_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let t0 = std::time::Instant::now();
        let e = write_busy_retried(&d.path().join("gone/state"), "on", std::time::Duration::from_secs(5)).unwrap_err().to_string();
        assert!(t0.elapsed() < std::time::Duration::from_secs(1), "ENOENT was retried");
        assert!(e.contains("gone/state") && e.contains("writing 'on'"), "{e}");
        write_busy_retried(&d.path().join("state"), "off", std::time::Duration::ZERO).unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join("state")).unwrap(), "off");
    }

    #[test]
    fn claimed_kdamonds_are_removed_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let nr = d.path().join(ADMIN).join("kdamonds/nr_kdamonds");
        put(d.path(), &format!("{ADMIN}/kdamonds/nr_kdamonds"), "0\n");
        put(d.path(), &format!("{ADMIN}/kdamonds/0/state"), "on\n");
        {
            let a = DamonAdmin::claim(d.path(), 1).unwrap();
            assert_eq!(std::fs::read_to_string(&nr).unwrap(), "1");
            drop(a);
        }
        assert_eq!(std::fs::read_to_string(&nr).unwrap(), "0");
        assert_eq!(std::fs::read_to_string(d.path().join(ADMIN).join("kdamonds/0/state")).unwrap(), "off");
    }

    #[test]
    fn a_nodes_physical_range_from_its_memory_blocks() {
        let d = tempfile::tempdir().unwrap();
        put(d.path(), "sys/devices/system/memory/block_size_bytes", "8000000\n");
        for b in [8, 9, 11] {
            std::fs::create_dir_all(d.path().join(format!("sys/devices/system/node/node1/memory{b}"))).unwrap();
        }
        assert_eq!(node_phys_range(d.path(), 1).unwrap(), (8 * 0x800_0000, 12 * 0x800_0000));
    }

    /// What validate simulates is read back: a kernel that refused the goal (6.12 has no
    /// node_mem_*_bp metrics, so nr_goals went back to 0) shows none, filters as they stand.
    #[test]
    fn scheme_config_is_read_back_from_sysfs() {
        let d = tempfile::tempdir().unwrap();
        let kd = d.path();
        for (f, v) in [
            ("contexts/0/monitoring_attrs/intervals/sample_us", "5000"),
            ("contexts/0/monitoring_attrs/intervals/aggr_us", "100000"),
            ("contexts/0/monitoring_attrs/nr_regions/min", "10"),
            ("contexts/0/monitoring_attrs/nr_regions/max", "1000"),
            ("contexts/0/targets/0/regions/0/start", "4294967296"),
            ("contexts/0/targets/0/regions/0/end", "5368709120"),
            ("contexts/0/schemes/0/target_nid", "0"),
            ("contexts/0/schemes/0/access_pattern/nr_accesses/min", "1"),
            ("contexts/0/schemes/0/access_pattern/nr_accesses/max", "4294967295"),
            ("contexts/0/schemes/0/access_pattern/age/min", "0"),
            ("contexts/0/schemes/0/apply_interval_us", "1000000"),
            ("contexts/0/schemes/0/quotas/bytes", "209715200"),
            ("contexts/0/schemes/0/quotas/reset_interval_ms", "1000"),
            ("contexts/0/schemes/0/quotas/weights/sz_permil", "0"),
            ("contexts/0/schemes/0/quotas/weights/nr_accesses_permil", "100"),
            ("contexts/0/schemes/0/quotas/weights/age_permil", "100"),
            ("contexts/0/schemes/0/quotas/goals/nr_goals", "0"),
            ("contexts/0/schemes/0/filters/nr_filters", "1"),
            ("contexts/0/schemes/0/filters/0/type", "young"),
            ("contexts/0/schemes/0/filters/0/matching", "Y"),
        ] {
            put(kd, f, &format!("{v}\n"));
        }
        let c = SchemeConfig::read(kd);
        assert_eq!((c.sample_us, c.aggr_us, c.min_nr_regions, c.max_nr_regions), (5000, 100_000, 10, 1000));
        assert_eq!((c.region_start, c.region_end, c.target_nid), (4 << 30, 5 << 30, 0));
        assert_eq!((c.min_nr_accesses, c.max_nr_accesses, c.min_age), (1, u32::MAX as u64, 0));
        assert_eq!((c.apply_interval_us, c.quota_bytes, c.quota_reset_interval_ms), (Some(1_000_000), 200 << 20, 1000));
        assert_eq!((c.weight_sz_permil, c.weight_nr_accesses_permil, c.weight_age_permil), (0, 100, 100));
        assert!(c.goals.is_empty());
        assert_eq!(c.filters, vec![("young".to_string(), true, None)]);
        put(kd, "contexts/0/schemes/0/quotas/goals/nr_goals", "1\n");
        put(kd, "contexts/0/schemes/0/quotas/goals/0/target_metric", "node_mem_used_bp\n");
        put(kd, "contexts/0/schemes/0/quotas/goals/0/target_value", "9970\n");
        put(kd, "contexts/0/schemes/0/filters/0/allow", "N\n");
        let c = SchemeConfig::read(kd);
        assert_eq!(c.goals, vec![("node_mem_used_bp".to_string(), 9970)]);
        assert_eq!(c.filters, vec![("young".to_string(), true, Some(false))]);
    }
}
