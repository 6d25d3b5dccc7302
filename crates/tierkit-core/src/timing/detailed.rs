//! The `detailed` timing model: one out-of-order core with a bounded miss window in front of
//! per-tier bandwidth queues. The equations, units and what the model leaves out are in
//! `docs/models.md` (section `detailed`); in short:
//!
//! ```text
//! cycle      = base_cpi / freq_ghz                                   ns per instruction
//! compute    : core += (insn - prev_insn) · cycle                     (1 instruction per access
//!                                                                      when the trace has no counts)
//! ROB        : instruction j cannot dispatch before the oldest unretired miss m retires when
//!              j ≥ insn_m + rob_entries; at most rob_entries misses are unretired;
//!              retire_m = max(done_m, retire_{m-1})                     (in-order retirement)
//! MSHR       : a miss cannot issue while max_outstanding misses are in flight
//! read queue : start = max(arrival, free); free = start + line/read_bw; done = start + read_latency
//! probe      : the probe tier's read is served first; the serving read arrives at its `done`
//! write      : posted: start = max(arrival, free); free = done = start + line/write_bw;
//!              the core stalls only while the tier holds write_queue_entries unfinished writes
//! shared_bandwidth tiers: reads and writes use one queue (a write takes media time from reads)
//! migration  : by the OS: core += fault + TLB shootdown + per-page cost (the per-page cost
//!              alone for a page of an OS batch, whose fault and shootdown the policy charges
//!              once); copy = page/read_bw
//!              (source read queue) pipelined with page/write_bw (destination write queue); the
//!              core waits for the copy only when `copy_from_bandwidth` (synchronous, like
//!              move_pages). By a hardware engine: no fixed cost, the copy always runs
//!              alongside the program, and an access to the page before the source read is
//!              done waits for it, then is served from the engine's buffer
//! added      : a policy's per-access added latency (e.g. a remap lookup) delays the read
//! charge     : a policy's charge stops the core for its time if it halts the program
//!              (a charge for pages, on several cores: the pages' owners, see `charge_core`)
//! period     : core += per_period_ns, once per activation of a periodic policy
//! runtime    = max(core, retire of the last miss)      (posted writes still draining do not count)
//! IPC        = instructions / (runtime · freq_ghz)
//! loaded     : on a tier with a `loaded_latency` curve f, a read's latency is
//!              read_latency · f(u), u = the tier's recent utilization: per queue an
//!              exponentially decaying busy time B (time constant τ = load_window_ns), fed by
//!              every transfer the queue carries, u = max over the tier's queues of B/τ at the
//!              read's start; a tier's reads complete in issue order
//! ```
//!
//! Everything here is amortized O(1) per access with no allocation: the ROB is a ring of
//! `rob_entries` misses; the MSHRs are one ring of completion times per tier (a tier's queue
//! is FIFO with one latency, so its reads complete in issue order); each tier's write queue
//! is a ring of `write_queue_entries` drain times.

use super::{AccessEvent, ClockBoard, CoreReport, RunCounters, Timing, TimingReport, TimingSetup};
use crate::mechanics::{Charge, MigrationOp, MoveBy, TierId};
use crate::pagemap::PageId;
use crate::platform::{loaded_latency_factor, Resolved};
use serde_json::json;
use std::sync::Arc;

/// Line size assumed when the setup does not give one, bytes.
const DEFAULT_LINE_BYTES: u64 = 64;

/// A ring of f64 of power-of-two capacity, addressed by ever-growing positions.
#[inline(always)]
fn slot(base: usize, mask: usize, pos: usize) -> usize {
    base + (pos & mask)
}

/// The later of two times: `f64::max` for operands that are never NaN (times here are
/// finite, and never -0.0, the one other input where the two could differ), as a plain compare
/// and select, one `maxsd` on x86-64. `f64::max` follows IEEE 754 `maxNum` and returns the
/// other operand when one is NaN, which costs a compare-unordered and a blend on the model's
/// dependency chain (the core clock and the queues' free times, carried from access to access).
#[inline(always)]
fn later(a: f64, b: f64) -> f64 {
    debug_assert!(!a.is_nan() && !b.is_nan(), "a time is NaN");
    if a > b {
        a
    } else {
        b
    }
}

/// Kinds of transfer, indexing [`TierQ::load_k`] and [`TierQ::load_c`].
const LINE_READ: usize = 0;
const LINE_WRITE: usize = 1;
const PAGE_READ: usize = 2;
const PAGE_WRITE: usize = 3;

/// One tier: its figures (ns) and its queues' state.
#[derive(Clone, Debug, Default)]
struct TierQ {
    read_lat_ns: f64,
    /// Time one line occupies the read (or shared) queue: line / read_bw.
    read_xfer_ns: f64,
    /// Time one line occupies the write (or shared) queue: line / write_bw.
    write_xfer_ns: f64,
    page_read_ns: f64,
    page_write_ns: f64,
    shared: bool,
    /// When the read queue (`free[0]`, the only queue of a shared tier) and the write queue
    /// (`free[1]`) are next free.
    free: [f64; 2],
    /// The queue writes use: 0 on a shared tier, else 1 (an index, not a branch).
    wq: usize,
    /// This tier's reads in flight, in `DetailedTiming::out_done[out_base..]`: completion
    /// times in issue order, which is completion order (the queue is FIFO with one latency).
    out_base: usize,
    out_head: usize,
    out_tail: usize,
    /// This tier's latest posted writes' drain times, in `DetailedTiming::wring[w_base..]`.
    w_base: usize,
    w_pos: usize,
    // statistics (busy times are derived from the counts at the end)
    reads: u64,
    probes: u64,
    writes: u64,
    extra_reads: u64,
    extra_writes: u64,
    pages_out: u64,
    pages_in: u64,
    /// Queueing delay of the demand reads served by this tier, ns.
    demand_read_delay: f64,
    /// Queueing delay of every line read (demand, probe, extra), ns.
    read_queue_delay: f64,
    write_queue_delay: f64,

    // loaded latency (only when some tier of the platform has a curve)
    /// The tier's loaded-latency curve; empty: its latency does not depend on the load.
    curve: Vec<[f64; 2]>,
    /// Per queue (indexed like `free`), the busy time decayed with time constant τ,
    /// B(t) = ∫ busy(s) e^{−(t−s)/τ} ds, as of `load_t` (the end of its latest transfer), ns.
    load: [f64; 2],
    load_t: [f64; 2],
    /// Per kind of transfer of duration x: e^{−x/τ}, and τ·(1 − e^{−x/τ}), what a transfer
    /// adds to B when it ends.
    load_k: [f64; 4],
    load_c: [f64; 4],
    /// The factor of this tier's latest read; the sum over its demand reads, and the sum of
    /// their latencies (factor applied, plus any wait to complete in order).
    last_factor: f64,
    factor_sum: f64,
    demand_read_lat_sum: f64,
    /// Completion time of this tier's latest demand read (reads complete in issue order).
    last_done: f64,
}

impl TierQ {
    /// The decayed busy time of queue `qi` at `t` (not before the end of its latest transfer).
    #[inline(always)]
    fn load_at(&self, qi: usize, t: f64, inv_tau: f64) -> f64 {
        let dt = t - self.load_t[qi];
        if dt > 0.0 {
            self.load[qi] * (-dt * inv_tau).exp()
        } else {
            self.load[qi]
        }
    }

    /// A transfer of kind `kind` holding queue `qi` from `start` for `xfer` ns: decay the
    /// estimate to `start`, return it, then add the transfer as of its end.
    #[inline(always)]
    fn add_load(&mut self, qi: usize, kind: usize, start: f64, xfer: f64, inv_tau: f64) -> f64 {
        let b = self.load_at(qi, start, inv_tau);
        self.load[qi] = b * self.load_k[kind] + self.load_c[kind];
        self.load_t[qi] = self.load_t[qi].max(start + xfer);
        b
    }
}

/// A core's own state while another core of a multi-core run is active (the active core's
/// state is in [`DetailedTiming`]'s fields, so that the one-core path is unchanged): its
/// clock, instruction count, ROB, MSHRs and posted writes. The tiers' queues, their load and
/// the hardware engine are shared by every core.
#[derive(Clone, Debug, Default)]
struct Parked {
    core: f64,
    cur_insn: u64,
    rob: Vec<(u64, f64)>,
    rob_head: usize,
    rob_tail: usize,
    last_retire: f64,
    out_done: Vec<f64>,
    outstanding: usize,
    wring: Vec<f64>,
    /// per tier (the no-probe tier included): out_head, out_tail, w_pos
    pos: Vec<[usize; 3]>,
}

pub struct DetailedTiming {
    /// The platform's tiers, then the no-probe tier.
    tiers: Vec<TierQ>,
    n_tiers: usize,
    names: Vec<String>,
    cycle_ns: f64,
    freq_ghz: f64,
    has_insn: bool,
    rob_entries: u64,
    fixed_migration_ns: f64,
    /// the per-page part alone (moves in an OS batch)
    per_page_ns: f64,
    per_period_ns: f64,
    sync_copy: bool,
    line_bytes: u64,
    page_bytes: u64,

    /// The core clock: when the instruction `cur_insn` was dispatched, ns.
    core: f64,
    cur_insn: u64,

    /// ROB: the misses not known to have retired, in issue order: (instruction, retire
    /// time); positions `rob_head..rob_tail` of a power-of-two ring.
    rob: Vec<(u64, f64)>,
    rob_mask: usize,
    rob_head: usize,
    rob_tail: usize,
    last_retire: f64,
    /// MSHRs: per tier, a power-of-two ring of at least `max_outstanding` completion times.
    out_done: Vec<f64>,
    out_mask: usize,
    max_outstanding: usize,
    /// Reads in the rings (some may have completed since: they are dropped when it matters).
    outstanding: usize,
    /// Per tier, a power-of-two ring of at least `write_queue_entries` drain times.
    wring: Vec<f64>,
    w_mask: usize,
    wq_entries: usize,

    // statistics, ns
    rob_stall_ns: f64,
    mshr_stall_ns: f64,
    write_stall_ns: f64,
    migration_fixed_ns: f64,
    migration_copy_ns: f64,
    async_copy_ns: f64,
    period_stall_ns: f64,
    miss_latency_sum: f64,
    misses: u64,
    migrations: u64,
    /// Pages a hardware engine is moving: (page, its data is in the engine's buffer at, the
    /// copy is done at).
    inflight: Vec<(PageId, f64, f64)>,
    /// When every hardware-engine copy so far is done, ns.
    hw_idle: f64,
    buffer_hits: u64,
    buffer_wait_ns: f64,
    added_latency_ns: f64,
    charge_stall_ns: f64,
    background_charge_ns: f64,
    /// Some tier has a loaded-latency curve (otherwise none of that bookkeeping runs).
    loaded: bool,
    /// 1 / load_window_ns.
    inv_tau: f64,
    /// Multi-core runs: the active core, every core's parked state (the active one's slot
    /// holds spare buffers), and the board the cores' clocks are posted to.
    active: usize,
    parked: Vec<Parked>,
    board: Option<Arc<ClockBoard>>,
}

impl DetailedTiming {
    pub fn new(p: &Resolved, setup: TimingSetup) -> DetailedTiming {
        let line = if setup.line_bytes > 0 { setup.line_bytes } else { DEFAULT_LINE_BYTES };
        let page = p.page_size;
        let cpu = &p.platform.cpu;
        let m = &p.platform.migration;
        let rob = cpu.rob_entries.max(1) as usize;
        let mo = cpu.max_outstanding.max(1) as usize;
        let wq = cpu.write_queue_entries.max(1) as usize;
        let (out_cap, w_cap) = (mo.next_power_of_two(), wq.next_power_of_two());
        // GB/s = bytes per ns
        let tiers: Vec<TierQ> = p
            .platform
            .tiers
            .iter()
            .enumerate()
            .map(|(i, t)| TierQ {
                read_lat_ns: t.read_latency_ns,
                read_xfer_ns: line as f64 / t.read_bw_gb_per_s,
                write_xfer_ns: line as f64 / t.write_bw_gb_per_s,
                page_read_ns: page as f64 / t.read_bw_gb_per_s,
                page_write_ns: page as f64 / t.write_bw_gb_per_s,
                shared: t.shared_bandwidth,
                wq: if t.shared_bandwidth { 0 } else { 1 },
                out_base: i * out_cap,
                w_base: i * w_cap,
                ..TierQ::default()
            })
            .collect();
        let n = tiers.len();
        let tau = cpu.load_window_ns;
        let loaded = p.platform.tiers.iter().any(|t| !t.loaded_latency.is_empty());
        let mut tiers = tiers;
        if loaded {
            for (q, t) in tiers.iter_mut().zip(&p.platform.tiers) {
                q.curve = t.loaded_latency.clone();
                for (kind, x) in [(LINE_READ, q.read_xfer_ns), (LINE_WRITE, q.write_xfer_ns), (PAGE_READ, q.page_read_ns), (PAGE_WRITE, q.page_write_ns)] {
                    q.load_k[kind] = (-x / tau).exp();
                    q.load_c[kind] = -(-x / tau).exp_m1() * tau;
                }
            }
        }
        // "no probe" is a probe of a tier that takes no time (index n), so that the probe
        // costs no branch: its queue starts every read on arrival (the core clock never goes
        // back) and adds exactly 0.0
        tiers.push(TierQ { out_base: n * out_cap, w_base: n * w_cap, ..TierQ::default() });
        DetailedTiming {
            tiers,
            n_tiers: n,
            names: p.platform.tiers.iter().map(|t| t.name.clone()).collect(),
            cycle_ns: cpu.base_cpi / cpu.freq_ghz,
            freq_ghz: cpu.freq_ghz,
            has_insn: setup.has_insn,
            rob_entries: rob as u64,
            fixed_migration_ns: m.fault_ns + m.tlb_shootdown_ns + m.per_page_ns,
            per_page_ns: m.per_page_ns,
            per_period_ns: m.per_period_ns,
            sync_copy: m.copy_from_bandwidth,
            line_bytes: line,
            page_bytes: page,
            core: 0.0,
            cur_insn: 0,
            rob: vec![(0, 0.0); rob.next_power_of_two()],
            rob_mask: rob.next_power_of_two() - 1,
            rob_head: 0,
            rob_tail: 0,
            last_retire: 0.0,
            out_done: vec![0.0; (n + 1) * out_cap],
            out_mask: out_cap - 1,
            max_outstanding: mo,
            outstanding: 0,
            wring: vec![0.0; (n + 1) * w_cap],
            w_mask: w_cap - 1,
            wq_entries: wq,
            rob_stall_ns: 0.0,
            mshr_stall_ns: 0.0,
            write_stall_ns: 0.0,
            migration_fixed_ns: 0.0,
            migration_copy_ns: 0.0,
            async_copy_ns: 0.0,
            period_stall_ns: 0.0,
            miss_latency_sum: 0.0,
            misses: 0,
            migrations: 0,
            inflight: Vec::new(),
            hw_idle: 0.0,
            buffer_hits: 0,
            buffer_wait_ns: 0.0,
            added_latency_ns: 0.0,
            charge_stall_ns: 0.0,
            background_charge_ns: 0.0,
            loaded,
            inv_tau: 1.0 / tau,
            active: 0,
            parked: Vec::new(),
            board: None,
        }
        .with_cores(setup.cores, setup.board)
    }

    /// Give every core but the first its own ROB, MSHRs and write rings.
    fn with_cores(mut self, cores: usize, board: Option<Arc<ClockBoard>>) -> DetailedTiming {
        if cores > 1 {
            let n = self.tiers.len();
            let fresh = Parked {
                rob: vec![(0, 0.0); self.rob.len()],
                out_done: vec![0.0; self.out_done.len()],
                wring: vec![0.0; self.wring.len()],
                pos: vec![[0; 3]; n],
                ..Parked::default()
            };
            self.parked = vec![fresh; cores];
            self.parked[0] = Parked { pos: vec![[0; 3]; n], ..Parked::default() };
            self.board = board;
        }
        self
    }

    fn park(&mut self, c: usize) {
        let p = &mut self.parked[c];
        p.core = self.core;
        p.cur_insn = self.cur_insn;
        std::mem::swap(&mut p.rob, &mut self.rob);
        p.rob_head = self.rob_head;
        p.rob_tail = self.rob_tail;
        p.last_retire = self.last_retire;
        std::mem::swap(&mut p.out_done, &mut self.out_done);
        p.outstanding = self.outstanding;
        std::mem::swap(&mut p.wring, &mut self.wring);
        for (x, q) in p.pos.iter_mut().zip(&self.tiers) {
            *x = [q.out_head, q.out_tail, q.w_pos];
        }
    }

    fn unpark(&mut self, c: usize) {
        let p = &mut self.parked[c];
        self.core = p.core;
        self.cur_insn = p.cur_insn;
        std::mem::swap(&mut p.rob, &mut self.rob);
        self.rob_head = p.rob_head;
        self.rob_tail = p.rob_tail;
        self.last_retire = p.last_retire;
        std::mem::swap(&mut p.out_done, &mut self.out_done);
        self.outstanding = p.outstanding;
        std::mem::swap(&mut p.wring, &mut self.wring);
        for (x, q) in p.pos.iter().zip(self.tiers.iter_mut()) {
            [q.out_head, q.out_tail, q.w_pos] = *x;
        }
    }

    /// When the active core's next access, at instruction `insn` (the next instruction when
    /// the trace has no counts), would issue, from the core's own state alone: the compute up
    /// to it, the ROB (an instruction `rob_entries` past an unretired miss waits for it, and a
    /// full ROB for its oldest), and for a read the MSHRs. What the policy may add on the way
    /// (a migration's fixed cost, a charge) and a write's wait for a full write queue are not
    /// known before; they only make the access later.
    fn issue_time(&self, insn: u64, write: bool) -> f64 {
        let insn = if self.has_insn { insn } else { self.cur_insn + 1 };
        let (mut core, mut cur, mut head) = (self.core, self.cur_insn, self.rob_head);
        if insn > cur {
            while head != self.rob_tail {
                let (h_insn, h_retire) = self.rob[head & self.rob_mask];
                let limit = h_insn + self.rob_entries;
                if insn < limit {
                    break;
                }
                core += limit.saturating_sub(cur) as f64 * self.cycle_ns;
                cur = cur.max(limit);
                core = core.max(h_retire);
                head += 1;
            }
            core += insn.saturating_sub(cur) as f64 * self.cycle_ns;
        }
        if !write {
            if self.rob_tail - head == self.rob_entries as usize {
                core = core.max(self.rob[head & self.rob_mask].1);
            }
            if self.outstanding >= self.max_outstanding {
                // the earliest of the reads in flight that are not done by then
                let mut live = 0usize;
                let mut earliest = f64::INFINITY;
                for q in &self.tiers[..self.n_tiers] {
                    let mut h = q.out_head;
                    while h != q.out_tail {
                        let d = self.out_done[slot(q.out_base, self.out_mask, h)];
                        if d > core {
                            live += 1;
                            earliest = earliest.min(d);
                        }
                        h += 1;
                    }
                }
                if live >= self.max_outstanding {
                    core = core.max(earliest);
                }
            }
        }
        core
    }

    /// Each core's (clock, last retire, instructions), the active one's current.
    fn cores_state(&self) -> Vec<(f64, f64, u64)> {
        if self.parked.is_empty() {
            return vec![(self.core, self.last_retire, self.cur_insn)];
        }
        (0..self.parked.len())
            .map(|c| {
                if c == self.active {
                    (self.core, self.last_retire, self.cur_insn)
                } else {
                    let p = &self.parked[c];
                    (p.core, p.last_retire, p.cur_insn)
                }
            })
            .collect()
    }

    /// The latency factor of a line read that starts at `start` on `tier`, recording the
    /// read in the tier's load estimate. Only called when the platform has curves.
    #[cold]
    #[inline(never)]
    fn loaded_read(&mut self, tier: usize, start: f64) -> f64 {
        let inv_tau = self.inv_tau;
        let q = &mut self.tiers[tier];
        if q.curve.is_empty() {
            return 1.0;
        }
        let b = q.add_load(0, LINE_READ, start, q.read_xfer_ns, inv_tau);
        // a tier with separate queues is as loaded as its busier queue
        let b = if q.shared { b } else { b.max(q.load_at(1, start, inv_tau)) };
        let f = loaded_latency_factor(&q.curve, b * inv_tau);
        q.last_factor = f;
        f
    }

    /// A transfer that adds no latency of its own (a write, a page copy) on a loaded platform.
    #[cold]
    #[inline(never)]
    fn loaded_transfer(&mut self, tier: usize, qi: usize, kind: usize, start: f64, xfer: f64) {
        let inv_tau = self.inv_tau;
        let q = &mut self.tiers[tier];
        if !q.curve.is_empty() {
            q.add_load(qi, kind, start, xfer, inv_tau);
        }
    }

    /// An access to a page a hardware engine is moving: served from the engine's buffer once
    /// the page's data is in it. Returns false if the page is not in flight.
    #[cold]
    fn served_by_engine_buffer(&mut self, a: &AccessEvent) -> bool {
        let now = self.core;
        self.inflight.retain(|e| e.2 > now);
        let Some(&(_, ready, _)) = self.inflight.iter().find(|e| e.0 == a.page) else { return false };
        self.buffer_hits += 1;
        if !a.write {
            // a read waits for the buffer like a miss, in the ROB and against an MSHR
            self.buffer_wait_ns += (ready - now).max(0.0);
            self.retire_read(ready.max(now), now);
        }
        // a write lands in the buffer and is carried with the page
        true
    }

    /// Put a read issued at `issue` and done at `done` in the ROB.
    #[inline(always)]
    fn retire_read(&mut self, done: f64, issue: f64) {
        self.miss_latency_sum += done - issue;
        self.misses += 1;
        let retire = later(done, self.last_retire);
        self.last_retire = retire;
        self.rob[self.rob_tail & self.rob_mask] = (self.cur_insn, retire);
        self.rob_tail += 1;
    }

    /// Move the core clock to `t` if that is later, charging the wait to `stall`.
    #[inline(always)]
    fn wait_until(core: &mut f64, stall: &mut f64, t: f64) {
        let c = later(*core, t);
        *stall += c - *core;
        *core = c;
    }

    /// Execute instructions up to `insn`. An instruction `rob_entries` past the oldest miss
    /// still in the ROB cannot dispatch before that miss retires: the core runs up to it,
    /// waits, and goes on.
    #[inline(always)]
    fn advance(&mut self, insn: u64) {
        if insn <= self.cur_insn {
            return;
        }
        // Whether the head leaves the ROB on the way to `insn` is close to a coin toss, so the
        // first step is taken without a branch; a second pop on one access is the exception.
        self.rob_step(insn);
        while self.rob_head != self.rob_tail && insn >= self.rob[self.rob_head & self.rob_mask].0 + self.rob_entries {
            self.rob_step(insn);
        }
        self.core += (insn - self.cur_insn) as i64 as f64 * self.cycle_ns;
        self.cur_insn = insn;
    }

    /// If the oldest miss in the ROB holds back an instruction at or before `insn`, run up to
    /// that instruction, wait for the miss to retire and drop it; otherwise change nothing.
    #[inline(always)]
    fn rob_step(&mut self, insn: u64) {
        let (h_insn, h_retire) = self.rob[self.rob_head & self.rob_mask];
        // limit > cur_insn: a miss enters at cur_insn and leaves once the core reaches it
        let limit = h_insn + self.rob_entries;
        let pop = (self.rob_head != self.rob_tail) & (insn >= limit);
        // masks rather than `if`s, and hidden from the optimizer, which would turn them back
        // into a branch
        let mask = std::hint::black_box(0u64.wrapping_sub(pop as u64));
        let run = limit.wrapping_sub(self.cur_insn) & mask;
        let t = self.core + run as i64 as f64 * self.cycle_ns;
        // retire times are ≥ 0, so a masked-out +0.0 leaves `t` as it is
        let r = f64::from_bits(h_retire.to_bits() & mask);
        let c = later(t, r);
        self.rob_stall_ns += c - t;
        self.core = c;
        self.cur_insn += run;
        self.rob_head += pop as usize;
    }

    /// A line read arriving at `tier`'s read queue at `arrive`; returns its queueing delay
    /// and its latency (its data is back `delay + latency` after `arrive`): the tier's read
    /// latency, times its loaded-latency factor on a loaded platform.
    #[inline(always)]
    fn queue_read(&mut self, tier: usize, arrive: f64) -> (f64, f64) {
        let q = &mut self.tiers[tier];
        let start = later(arrive, q.free[0]);
        q.free[0] = start + q.read_xfer_ns;
        let delay = start - arrive;
        q.read_queue_delay += delay;
        let lat = q.read_lat_ns;
        if self.loaded {
            return (delay, lat * self.loaded_read(tier, start));
        }
        (delay, lat)
    }

    /// A posted line write to `tier`, ready at `ready`. Stalls the core while the tier's write
    /// queue holds `write_queue_entries` unfinished writes.
    #[inline(always)]
    fn post_write(&mut self, tier: usize, ready: f64) {
        let (base, pos) = (self.tiers[tier].w_base, self.tiers[tier].w_pos);
        // the write `write_queue_entries` ago; drain times grow in order, so if it is still
        // unfinished, so are all the writes after it
        let oldest = self.wring[slot(base, self.w_mask, pos.wrapping_sub(self.wq_entries))];
        Self::wait_until(&mut self.core, &mut self.write_stall_ns, oldest);
        let arrive = later(ready, self.core);
        let q = &mut self.tiers[tier];
        let xfer = q.write_xfer_ns;
        let wq = q.wq;
        let start = later(arrive, q.free[wq]);
        q.free[wq] = start + xfer;
        q.write_queue_delay += start - arrive;
        q.w_pos = pos.wrapping_add(1);
        self.wring[slot(base, self.w_mask, pos)] = start + xfer;
        if self.loaded {
            self.loaded_transfer(tier, wq, LINE_WRITE, start, xfer);
        }
    }

    /// A tag probe of tier `probe` (or none: [`NO_TIER`](crate::mechanics::NO_TIER)) issued
    /// at `at`; returns when its data is back.
    #[inline(always)]
    fn probe(&mut self, probe: TierId, at: f64) -> f64 {
        let p = (probe as usize).min(self.n_tiers);
        let (delay, lat) = self.queue_read(p, at);
        self.tiers[p].probes += 1;
        at + delay + lat
    }

    /// Wait, if `max_outstanding` reads are in flight, until the earliest completes.
    #[inline(always)]
    fn free_mshr(&mut self) {
        if self.outstanding < self.max_outstanding {
            return;
        }
        // drop the reads that have completed by now
        for q in self.tiers[..self.n_tiers].iter_mut() {
            while q.out_head != q.out_tail && self.out_done[slot(q.out_base, self.out_mask, q.out_head)] <= self.core {
                q.out_head += 1;
                self.outstanding -= 1;
            }
        }
        if self.outstanding < self.max_outstanding {
            return;
        }
        // all in flight: wait for the earliest, the oldest of some tier
        let mut best = 0;
        let mut earliest = f64::INFINITY;
        for (t, q) in self.tiers[..self.n_tiers].iter().enumerate() {
            if q.out_head != q.out_tail {
                let d = self.out_done[slot(q.out_base, self.out_mask, q.out_head)];
                if d < earliest {
                    earliest = d;
                    best = t;
                }
            }
        }
        Self::wait_until(&mut self.core, &mut self.mshr_stall_ns, earliest);
        self.tiers[best].out_head += 1;
        self.outstanding -= 1;
    }

    #[inline(always)]
    fn read_miss(&mut self, tier: usize, probe: TierId, added_ns: f64) {
        // the ROB holds at most rob_entries loads
        if self.rob_tail - self.rob_head == self.rob_entries as usize {
            let r = self.rob[self.rob_head & self.rob_mask].1;
            Self::wait_until(&mut self.core, &mut self.rob_stall_ns, r);
            self.rob_head += 1;
        }
        self.free_mshr();
        let issue = self.core;
        // the policy's added latency (a remap lookup) comes before the memory request
        let arrive = self.probe(probe, issue + added_ns);
        let (delay, lat) = self.queue_read(tier, arrive);
        let q = &mut self.tiers[tier];
        let mut done = arrive + delay + lat;
        if self.loaded {
            // with latencies that vary, a later read could overtake an earlier one; the tier
            // returns them in order (the MSHR rings rely on it)
            let raw = done;
            done = later(raw, q.last_done);
            q.last_done = done;
            q.factor_sum += q.last_factor;
            q.demand_read_lat_sum += lat + (done - raw);
        }
        q.reads += 1;
        q.demand_read_delay += delay;
        self.out_done[slot(q.out_base, self.out_mask, q.out_tail)] = done;
        q.out_tail += 1;
        self.outstanding += 1;
        self.retire_read(done, issue);
    }

    fn tier_detail(&self, runtime: f64) -> Vec<serde_json::Value> {
        let util = |busy: f64| if runtime > 0.0 { busy / runtime } else { 0.0 };
        self.tiers
            .iter()
            .zip(&self.names)
            .map(|(q, name)| {
                let avg = if q.reads == 0 {
                    0.0
                } else if self.loaded {
                    q.demand_read_lat_sum / q.reads as f64 + q.demand_read_delay / q.reads as f64
                } else {
                    q.read_lat_ns + q.demand_read_delay / q.reads as f64
                };
                let busy_read = (q.reads + q.probes + q.extra_reads) as f64 * q.read_xfer_ns + q.pages_out as f64 * q.page_read_ns;
                let busy_write = (q.writes + q.extra_writes) as f64 * q.write_xfer_ns + q.pages_in as f64 * q.page_write_ns;
                let (ru, wu) = if q.shared {
                    let u = util(busy_read + busy_write);
                    (u, u)
                } else {
                    (util(busy_read), util(busy_write))
                };
                let mut v = json!({
                    "name": name,
                    "shared_bandwidth": q.shared,
                    "reads": q.reads, "writes": q.writes, "probes": q.probes,
                    "extra_reads": q.extra_reads, "extra_writes": q.extra_writes,
                    "pages_migrated_out": q.pages_out, "pages_migrated_in": q.pages_in,
                    "avg_read_latency_ns": avg,
                    "read_queue_delay_ns": q.read_queue_delay,
                    "write_queue_delay_ns": q.write_queue_delay,
                    "busy_read_ns": busy_read,
                    "busy_write_ns": busy_write,
                    "read_queue_utilization": ru,
                    "write_queue_utilization": wu,
                });
                if self.loaded {
                    // mean factor over the tier's demand reads (1 without a curve or reads)
                    v["mean_latency_factor"] = json!(if q.reads > 0 && !q.curve.is_empty() { q.factor_sum / q.reads as f64 } else { 1.0 });
                    v["has_loaded_latency"] = json!(!q.curve.is_empty());
                }
                v
            })
            .collect()
    }
}

impl Timing for DetailedTiming {
    #[inline(always)]
    fn access(&mut self, a: AccessEvent) {
        let insn = if self.has_insn { a.insn } else { self.cur_insn + 1 };
        self.advance(insn);
        self.added_latency_ns += a.delay_ns;
        if !self.inflight.is_empty() && self.served_by_engine_buffer(&a) {
            return;
        }
        let t = a.tier as usize;
        if a.write {
            // the tag probe precedes the write but, the write being posted, not the core
            let ready = self.probe(a.probe, self.core + a.delay_ns);
            self.tiers[t].writes += 1;
            self.post_write(t, ready);
        } else {
            self.read_miss(t, a.probe, a.delay_ns);
        }
        if let Some(b) = &self.board {
            let (insn, write) = b.next(self.active);
            b.set(self.active, self.issue_time(insn, write));
        }
    }

    fn set_core(&mut self, c: usize) {
        if c != self.active && !self.parked.is_empty() {
            let a = self.active;
            self.park(a);
            self.unpark(c);
            self.active = c;
        }
    }

    fn core_reports(&self) -> Vec<CoreReport> {
        if self.parked.is_empty() {
            return Vec::new();
        }
        self.cores_state()
            .into_iter()
            .map(|(core, retire, insn)| {
                let runtime = core.max(retire);
                CoreReport { runtime_ns: runtime, instructions: insn, ipc: (self.has_insn && runtime > 0.0).then(|| insn as f64 / (runtime * self.freq_ghz)) }
            })
            .collect()
    }

    #[inline]
    fn traffic(&mut self, tier: TierId, write: bool) {
        let t = tier as usize;
        if write {
            self.tiers[t].extra_writes += 1;
            self.post_write(t, self.core);
        } else {
            self.tiers[t].extra_reads += 1;
            self.queue_read(t, self.core);
            // (on a loaded platform the read is counted in the tier's load; its latency is
            // on nobody's path)
        }
    }

    fn migration(&mut self, op: &MigrationOp) {
        self.migrations += 1;
        let hw = op.by == MoveBy::Hw;
        if !hw {
            // a page of an OS batch: the batch's fault and shootdown are the policy's charge
            let fixed = if op.by == MoveBy::OsBatch { self.per_page_ns } else { self.fixed_migration_ns };
            self.core += fixed;
            self.migration_fixed_ns += fixed;
        }
        let issue = self.core;
        // the copy streams: the destination writes start with the source reads
        let s = &mut self.tiers[op.from as usize];
        let rs = later(issue, s.free[0]);
        let re = rs + s.page_read_ns;
        s.free[0] = re;
        s.pages_out += 1;
        let d = &mut self.tiers[op.to as usize];
        let ws = later(rs, d.free[d.wq]);
        let we = ws + d.page_write_ns;
        d.free[d.wq] = we;
        d.pages_in += 1;
        let end = later(re, we);
        if self.loaded {
            let (from, to) = (op.from as usize, op.to as usize);
            let (sx, dx, dq) = (self.tiers[from].page_read_ns, self.tiers[to].page_write_ns, self.tiers[to].wq);
            self.loaded_transfer(from, 0, PAGE_READ, rs, sx);
            self.loaded_transfer(to, dq, PAGE_WRITE, ws, dx);
        }
        if hw {
            self.async_copy_ns += end - issue;
            self.inflight.push((op.page, re, end));
            self.hw_idle = self.hw_idle.max(end);
        } else if self.sync_copy {
            self.migration_copy_ns += end - issue;
            self.core = end;
        } else {
            self.async_copy_ns += end - issue;
        }
    }

    fn charge(&mut self, c: &Charge) {
        if c.halts {
            self.core += c.ns;
            self.charge_stall_ns += c.ns;
        } else {
            self.background_charge_ns += c.ns;
        }
    }

    fn charge_core(&mut self, core: usize, c: &Charge) {
        if !c.halts || self.parked.is_empty() || core == self.active || core >= self.parked.len() {
            return self.charge(c);
        }
        // the owner is parked: its clock moves on by the halt, and so does the time its next
        // access issues at, which the source must read again (it reads back only the core
        // that ran last)
        let a = self.active;
        self.set_core(core);
        self.charge(c);
        if let Some(b) = &self.board {
            let (insn, write) = b.next(core);
            b.set(core, self.issue_time(insn, write));
            b.mark_moved();
        }
        self.set_core(a);
    }

    fn period(&mut self) {
        self.core += self.per_period_ns;
        self.period_stall_ns += self.per_period_ns;
    }

    #[inline(always)]
    fn now_ns(&self) -> f64 {
        self.core
    }

    #[inline(always)]
    fn hw_idle_ns(&self) -> f64 {
        self.hw_idle
    }

    fn finish(&mut self, c: &RunCounters) -> TimingReport {
        // the run ends with its last core (one core: the only one)
        let cores = self.cores_state();
        let (end_core, end_retire, _) = cores.iter().copied().fold((0.0f64, 0.0f64, 0u64), |m, x| if x.0.max(x.1) > m.0.max(m.1) { x } else { m });
        let tail = (end_retire - end_core).max(0.0);
        let runtime = end_core + tail;
        let all_insn: u64 = cores.iter().map(|x| x.2).sum();
        let instructions = if self.has_insn && cores.len() == 1 { c.instructions.unwrap_or(self.cur_insn) } else { all_insn };
        let ipc = if self.has_insn && runtime > 0.0 { Some(instructions as f64 / (runtime * self.freq_ghz)) } else { None };
        let drained = self.tiers[..self.n_tiers].iter().map(|q| q.free[0].max(q.free[1])).fold(0.0f64, f64::max);
        let migration = self.migration_fixed_ns + self.migration_copy_ns;
        let window = self.rob_stall_ns + self.mshr_stall_ns;
        // instructions run at the base CPI; the stalls are counted where they happen
        let compute = all_insn as f64 * self.cycle_ns;
        TimingReport {
            runtime_ns: runtime,
            migration_time_ns: migration,
            ipc,
            detail: json!({
                "model": "detailed",
                "instructions": instructions,
                "instructions_from_trace": self.has_insn,
                "cycle_ns": self.cycle_ns,
                "line_bytes": self.line_bytes,
                "page_bytes": self.page_bytes,
                "compute_ns": compute,
                "window_stall_ns": window,
                "rob_stall_ns": self.rob_stall_ns,
                "mshr_stall_ns": self.mshr_stall_ns,
                "tail_ns": tail,
                "write_queue_stall_ns": self.write_stall_ns,
                "migration_stall_ns": migration,
                "migration_fixed_ns": self.migration_fixed_ns,
                "migration_copy_ns": self.migration_copy_ns,
                "async_copy_ns": self.async_copy_ns,
                "migrations": self.migrations,
                "period_stall_ns": self.period_stall_ns,
                "charge_stall_ns": self.charge_stall_ns,
                "background_charge_ns": self.background_charge_ns,
                "added_latency_ns": self.added_latency_ns,
                "engine_buffer_hits": self.buffer_hits,
                "engine_buffer_wait_ns": self.buffer_wait_ns,
                "read_misses": self.misses,
                "avg_miss_latency_ns": if self.misses > 0 { self.miss_latency_sum / self.misses as f64 } else { 0.0 },
                "queues_drain_after_ns": (drained - runtime).max(0.0),
                "tiers": self.tier_detail(runtime),
                "cores": cores.len(),
            }),
        }
    }
}
