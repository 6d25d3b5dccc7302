//! The `simple` timing model: the accounting of the Cori/Kleio simulator (003 §3.1),
//! generalized to N tiers with separate read and write figures.
//!
//! ```text
//! latency   = Σ_tiers  reads·read_latency + writes·write_latency + probes·read_latency
//! migration = migrations · (fault + TLB shootdown + per-page cost)
//!             (per-page cost alone for the pages of an OS batch, `MoveBy::OsBatch`)
//!             + Σ copies page_size / min(src read bw, dst write bw)   (if copy_from_bandwidth)
//! floor     = max_tiers  busy time of the tier at its peak bandwidth, where
//!             busy = bytes_read/read_bw + bytes_written/write_bw  (shared_bandwidth tiers)
//!             busy = max(bytes_read/read_bw, bytes_written/write_bw)  (otherwise)
//! periods   = periods_run · per_period cost
//! runtime   = max(latency + migration, floor) + periods
//! ```
//! The bandwidth floor says a program cannot move its data faster than the busiest tier
//! allows; the extra time is reported as `queue_ns`.
//!
//! Loaded latency: when a tier has a `loaded_latency` curve f_t, its latencies (demand and
//! probes) are multiplied by f_t(u_t), with u_t = busy_t / runtime its utilization over the
//! whole run. The runtime then depends on itself:
//! ```text
//! R = max(Σ_t f_t(busy_t / R) · latency_t + added + migration + halted, floor) + periods
//! ```
//! The right side does not increase with R, so R is the unique fixed point, found by bisection
//! (deterministic, to a relative width of 1e-12). Without curves the arithmetic is the one
//! above, unchanged. The running clock (`now_ns`, which drives periods in ns and the hardware
//! engine's copy times) stays unloaded: the utilization is known only at the end.
//!
//! With `compat=cori-sim` (set by the `history`/`oracle` policies) the model follows that
//! simulator exactly instead: every access costs its tier's latency; the floor is *all*
//! bytes (64 per access, 4096 per migrated page) over the slowest tier's bandwidth; the number
//! of periods is ⌊accesses / period⌋ + 1; and the sum is taken in its order
//! (fast + slow + periods + migrations + queue), so that results match bit for bit.

use super::{AccessEvent, RunCounters, Timing, TimingReport, TimingSetup};
use crate::mechanics::NO_TIER;
use crate::mechanics::{Charge, MigrationOp, MoveBy, TierId};
use crate::platform::{loaded_latency_factor, Resolved, MAX_TIERS};
use crate::timing::Compat;
use serde_json::json;

pub struct SimpleTiming {
    read_bw: Vec<f64>,  // bytes per ns
    write_bw: Vec<f64>, // bytes per ns
    shared: Vec<bool>,
    fixed_per_migration_ns: f64,
    /// the per-page part alone (moves in an OS batch)
    per_page_ns: f64,
    per_period_ns: f64,
    copy: bool,
    page_bytes: f64,
    setup: TimingSetup,
    /// latency of a read and of a write, by tier, indexed `[tier][write]`
    lat: [[f64; 2]; MAX_TIERS],
    /// the demand accesses' (and probes') latency so far: policies that act on every
    /// access read the clock at every access, so it is kept running rather than summed
    demand_ns: f64,
    /// migration and period time so far
    fixed_ns: f64,
    copy_ns: f64,
    /// latency policies' hardware added to accesses, ns
    delay_ns: f64,
    /// charges that stop the program, and those that run alongside it, ns
    halted_ns: f64,
    background_ns: f64,
    /// migration fixed costs so far (OS moves only), ns
    migration_fixed_ns: f64,
    /// when the hardware engine's copies so far are done, ns
    hw_idle_ns: f64,
    /// each tier's loaded-latency curve (empty = flat), and whether any tier has one
    curves: Vec<Vec<[f64; 2]>>,
    loaded: bool,
}

/// Bisection steps at most (each halves the bracket; 1e-12 relative is reached in about 40-60).
const MAX_BISECTIONS: usize = 200;

impl SimpleTiming {
    pub fn new(p: &Resolved, setup: TimingSetup) -> SimpleTiming {
        let t = &p.platform.tiers;
        let m = &p.platform.migration;
        SimpleTiming {
            read_bw: t.iter().map(|t| t.read_bw_gb_per_s).collect(),
            write_bw: t.iter().map(|t| t.write_bw_gb_per_s).collect(),
            shared: t.iter().map(|t| t.shared_bandwidth).collect(),
            fixed_per_migration_ns: m.fault_ns + m.tlb_shootdown_ns + m.per_page_ns,
            per_page_ns: m.per_page_ns,
            per_period_ns: m.per_period_ns,
            copy: m.copy_from_bandwidth,
            page_bytes: p.page_size as f64,
            setup,
            lat: {
                let mut l = [[0.0; 2]; MAX_TIERS];
                for (i, t) in t.iter().enumerate().take(MAX_TIERS) {
                    l[i] = [t.read_latency_ns, t.write_latency_ns];
                }
                l
            },
            demand_ns: 0.0,
            fixed_ns: 0.0,
            copy_ns: 0.0,
            delay_ns: 0.0,
            halted_ns: 0.0,
            background_ns: 0.0,
            migration_fixed_ns: 0.0,
            hw_idle_ns: 0.0,
            curves: t.iter().map(|t| t.loaded_latency.clone()).collect(),
            loaded: t.iter().any(|t| !t.loaded_latency.is_empty()),
        }
    }

    /// The runtime with loaded latencies: the fixed point R = runtime_at(R), where
    /// runtime_at(T) = max(Σ_t f_t(busy_t / T) · lat_t + rest, floor) + period. runtime_at does
    /// not increase with T, so the root of runtime_at(T) − T is unique and lies between
    /// lo = runtime_at(∞) (every tier idle) and hi = runtime_at(lo).
    /// Returns the T reached and each tier's utilization there.
    fn loaded_fixed_point(&self, lat: &[f64], busy: &[f64], rest: f64, floor: f64, period: f64) -> (f64, [f64; MAX_TIERS]) {
        let util = |t: f64| {
            let mut u = [0.0; MAX_TIERS];
            for (i, &b) in busy.iter().enumerate() {
                // busy > 0 implies floor > 0, so t > 0 here
                u[i] = if b > 0.0 { b / t } else { 0.0 };
            }
            u
        };
        let runtime_at = |t: f64| {
            let u = util(t);
            let mut latency = 0.0;
            for (i, &l) in lat.iter().enumerate() {
                latency += l * loaded_latency_factor(&self.curves[i], u[i]);
            }
            (latency + rest).max(floor) + period
        };
        let mut lo = runtime_at(f64::INFINITY);
        let mut hi = runtime_at(lo);
        for _ in 0..MAX_BISECTIONS {
            if hi - lo <= 1e-12 * hi {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if runtime_at(mid) > mid {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (hi, util(hi))
    }

    fn finish_cori(&self, c: &RunCounters) -> TimingReport {
        // Both tiers' latencies per access; reads and writes are not told apart.
        let last = c.tiers.len() - 1;
        let hits = c.tiers[0].reads + c.tiers[0].writes;
        let misses = c.accesses - hits;
        let fast = hits as f64 * self.lat[0][0];
        let slow = misses as f64 * self.lat[last][0];
        let periods = match self.setup.period_accesses {
            Some(p) if p > 0 => c.accesses / p + 1,
            _ => 1,
        };
        let period = periods as f64 * self.per_period_ns;
        let migration = c.migrations as f64 * self.fixed_per_migration_ns;
        let bytes = c.accesses * c.line_bytes + c.migrations * c.page_bytes;
        let allowed = bytes as f64 / self.read_bw[last];
        let transfer = fast + slow + migration;
        let queue = if transfer < allowed { allowed - transfer } else { 0.0 };
        let runtime = fast + slow + period + migration + queue;
        TimingReport {
            runtime_ns: runtime,
            migration_time_ns: migration,
            ipc: None,
            detail: json!({
                "model": "simple", "compat": "cori-sim",
                "fast_ns": fast, "slow_ns": slow, "period_ns": period, "periods": periods,
                "migration_ns": migration, "queue_ns": queue, "bandwidth_floor_ns": allowed,
            }),
        }
    }
}

impl Timing for SimpleTiming {
    #[inline(always)]
    fn access(&mut self, a: AccessEvent) {
        self.demand_ns += self.lat[a.tier as usize][a.write as usize];
        if a.probe != NO_TIER {
            self.demand_ns += self.lat[a.probe as usize][0];
        }
        self.delay_ns += a.delay_ns;
    }

    #[inline]
    fn traffic(&mut self, _tier: TierId, _write: bool) {}

    fn migration(&mut self, op: &MigrationOp) {
        if op.by == MoveBy::Hw {
            // a migration engine: no fault or shootdown, and the copy overlaps the program;
            // its bytes still count toward the bandwidth floor. The copy starts now and takes
            // the unloaded copy time (this model has no queues); the moves of a swap overlap.
            let bw = self.read_bw[op.from as usize].min(self.write_bw[op.to as usize]);
            self.hw_idle_ns = self.hw_idle_ns.max(self.now_ns() + self.page_bytes / bw);
            return;
        }
        // a page of an OS batch: the batch's fault and shootdown are the policy's charge
        let mut t = if op.by == MoveBy::OsBatch { self.per_page_ns } else { self.fixed_per_migration_ns };
        self.migration_fixed_ns += t;
        if self.copy && self.setup.compat == Compat::None {
            let bw = self.read_bw[op.from as usize].min(self.write_bw[op.to as usize]);
            let c = self.page_bytes / bw;
            self.copy_ns += c;
            t += c;
        }
        self.fixed_ns += t;
    }

    fn charge(&mut self, c: &Charge) {
        if c.halts {
            self.halted_ns += c.ns;
            self.fixed_ns += c.ns;
        } else {
            self.background_ns += c.ns;
        }
    }

    fn period(&mut self) {
        self.fixed_ns += self.per_period_ns;
    }

    /// Latency of the accesses so far plus migration and period costs (no bandwidth floor:
    /// that is known only at the end).
    fn now_ns(&self) -> f64 {
        self.fixed_ns + self.delay_ns + self.demand_ns
    }

    fn hw_idle_ns(&self) -> f64 {
        self.hw_idle_ns
    }

    fn finish(&mut self, c: &RunCounters) -> TimingReport {
        if self.setup.compat == Compat::CoriSim {
            return self.finish_cori(c);
        }
        let n = c.tiers.len();
        let mut lat = [0.0; MAX_TIERS];
        let mut busy = [0.0; MAX_TIERS];
        let mut floor: f64 = 0.0;
        let mut busiest = 0;
        for (i, t) in c.tiers.iter().enumerate() {
            lat[i] = t.reads as f64 * self.lat[i][0] + t.writes as f64 * self.lat[i][1] + t.probes as f64 * self.lat[i][0];
            let r = t.bytes_read as f64 / self.read_bw[i];
            let w = t.bytes_written as f64 / self.write_bw[i];
            busy[i] = if self.shared[i] { r + w } else { r.max(w) };
            if busy[i] > floor {
                floor = busy[i];
                busiest = i;
            }
        }
        let migration = self.migration_fixed_ns + self.copy_ns;
        let period = c.periods as f64 * self.per_period_ns;
        // with loaded-latency curves, each tier's latency is scaled by its factor at the
        // fixed point (factors of exactly 1 otherwise, so flat platforms sum as before)
        let loaded = self.loaded.then(|| self.loaded_fixed_point(&lat[..n], &busy[..n], self.delay_ns + migration + self.halted_ns, floor, period));
        let mut latency = 0.0;
        let mut tiers = Vec::new();
        // each tier's share of the latency (the runtime's breakdown in reports)
        let mut tier_latency = Vec::with_capacity(n);
        for i in 0..n {
            match &loaded {
                Some((_, u)) => {
                    let f = loaded_latency_factor(&self.curves[i], u[i]);
                    latency += lat[i] * f;
                    tier_latency.push(lat[i] * f);
                    tiers.push(json!({ "utilization": u[i], "latency_factor": f, "busy_ns": busy[i], "latency_ns": lat[i] * f }));
                }
                None => {
                    latency += lat[i];
                    tier_latency.push(lat[i]);
                }
            }
        }
        latency += self.delay_ns;
        let work = latency + migration + self.halted_ns;
        let queue = (floor - work).max(0.0);
        let mut detail = json!({
            "model": "simple",
            "latency_ns": latency, "added_latency_ns": self.delay_ns, "migration_ns": migration, "copy_ns": self.copy_ns,
            "halting_charges_ns": self.halted_ns, "background_charges_ns": self.background_ns,
            "period_ns": period, "periods": c.periods,
            "bandwidth_floor_ns": floor, "busiest_tier": busiest, "queue_ns": queue,
            "tier_latency_ns": tier_latency,
        });
        if let Some((at, _)) = loaded {
            detail["unloaded_latency_ns"] = json!(lat[..n].iter().sum::<f64>() + self.delay_ns);
            detail["load_elapsed_ns"] = json!(at);
            detail["tiers"] = json!(tiers);
        }
        TimingReport { runtime_ns: work + queue + period, migration_time_ns: migration, ipc: None, detail }
    }
}
