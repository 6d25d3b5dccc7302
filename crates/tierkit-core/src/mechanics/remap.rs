//! The ReMap table of a hardware migration controller (seed 001 §2.1–2.3): one entry per page
//! the controller moved behind the OS, a swap's two entries held as one group with the pair
//! flag, freed when the OS reconciles the group's addresses or the controller moves it back.
//! The policy decides what to move and when; the table keeps the moves' bookkeeping: how many
//! entries are held against the capacity, each group's pages and origin, when its copy
//! completed, and the order of the moves, which reconciliation follows (oldest first).
//!
//! Slots are reused; a group is named by its slot and told from a later group in the same
//! slot by its sequence number.

use std::collections::VecDeque;

use crate::mechanics::TierId;
use crate::pagemap::{PageId, NO_PAGE};

/// One migration recorded in the table: a one-way move (`cold == NO_PAGE`) or a swap.
#[derive(Clone, Copy, Debug)]
pub struct RemapGroup {
    /// The page moved into the fast tier, and the fast page it was swapped with (if any).
    pub hot: PageId,
    pub cold: PageId,
    /// The tier the hot page came from.
    pub from: TierId,
    /// When its move completed, ns; infinite while a move of the group is in flight.
    pub done_ns: f64,
    pub seq: u64,
    pub live: bool,
}

impl RemapGroup {
    /// The entries it holds (a swap holds two).
    pub fn pages(&self) -> u64 {
        1 + (self.cold != NO_PAGE) as u64
    }
}

/// What reconciliation may take next ([`RemapTable::oldest_done`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oldest {
    /// No group is held.
    Empty,
    /// The oldest group's move is still in flight: reconciliation waits for it.
    InFlight,
    /// The oldest group, whose move is done, taken out of the order (its entries stay held
    /// until [`RemapTable::remove`]).
    Done(u32),
}

/// The table: `capacity` entries (unbounded: `u64::MAX`, the no-reconciliation variant, whose
/// entries the policy counts per page with [`RemapTable::hold`]).
pub struct RemapTable {
    capacity: u64,
    entries: u64,
    groups: Vec<RemapGroup>,
    free_slots: Vec<u32>,
    /// Groups in the order of their moves (lazy: dead ones are skipped when met).
    order: VecDeque<(u64, u32)>,
    /// Whether the order is kept (only reconciliation reads it).
    keep_order: bool,
    seq: u64,
}

impl RemapTable {
    pub fn new(capacity: Option<u64>, keep_order: bool) -> RemapTable {
        RemapTable {
            capacity: capacity.unwrap_or(u64::MAX),
            entries: 0,
            groups: Vec::new(),
            free_slots: Vec::new(),
            order: VecDeque::new(),
            keep_order,
            seq: 0,
        }
    }

    pub fn bounded(&self) -> bool {
        self.capacity != u64::MAX
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Entries held now.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Whether `need` more entries fit.
    pub fn has_room(&self, need: u64) -> bool {
        self.entries + need <= self.capacity
    }

    /// Hold `n` entries without a group (the unbounded table counts its entries per page).
    pub fn hold(&mut self, n: u64) {
        self.entries += n;
    }

    /// Record a move that starts now: its entries are held, its completion is not yet known.
    /// Returns its slot.
    pub fn insert(&mut self, hot: PageId, cold: PageId, from: TierId) -> u32 {
        self.seq += 1;
        let g = RemapGroup { hot, cold, from, done_ns: f64::INFINITY, seq: self.seq, live: true };
        self.entries += g.pages();
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.groups[s as usize] = g;
                s
            }
            None => {
                self.groups.push(g);
                (self.groups.len() - 1) as u32
            }
        };
        if self.keep_order {
            self.order.push_back((self.seq, slot));
        }
        slot
    }

    /// Free a group's entries (reconciled, or moved back); returns it.
    pub fn remove(&mut self, slot: u32) -> RemapGroup {
        let g = self.groups[slot as usize];
        self.groups[slot as usize].live = false;
        self.free_slots.push(slot);
        self.entries -= g.pages();
        g
    }

    pub fn group(&self, slot: u32) -> RemapGroup {
        self.groups[slot as usize]
    }

    /// A move of the group completed at `t` ns (infinite: one starts).
    pub fn set_done(&mut self, slot: u32, t: f64) {
        self.groups[slot as usize].done_ns = t;
    }

    /// Every slot's group, live or not, by slot.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &RemapGroup)> {
        self.groups.iter().enumerate().map(|(s, g)| (s as u32, g))
    }

    /// The groups held.
    pub fn live(&self) -> impl Iterator<Item = &RemapGroup> {
        self.groups.iter().filter(|g| g.live)
    }

    /// The oldest group held, for reconciliation (001 §2.3: the oldest entries first).
    pub fn oldest_done(&mut self) -> Oldest {
        loop {
            let Some(&(seq, slot)) = self.order.front() else { return Oldest::Empty };
            let g = self.groups[slot as usize];
            if !g.live || g.seq != seq {
                self.order.pop_front();
                continue;
            }
            if !g.done_ns.is_finite() {
                return Oldest::InFlight;
            }
            self.order.pop_front();
            return Oldest::Done(slot);
        }
    }
}

/// What a controller's move does: a forward migration into the fast tier, or a group moved
/// back where it came from (reverse migration, 001 §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveKind {
    Forward,
    Back,
}

/// The controller's move in flight: its pages, its group in the table, when it started, and
/// when its copy is done (NaN until the timing model, which runs the copy alongside the
/// program, has been handed the move).
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub kind: MoveKind,
    pub hot: PageId,
    pub cold: PageId,
    /// Its group in the table (`u32::MAX` with an unbounded table).
    pub slot: u32,
    pub start_ns: f64,
    pub done_ns: f64,
}

/// A reconciliation in progress: the group whose addresses the OS (or MigC) is reconciling,
/// and when it is done.
#[derive(Clone, Copy, Debug)]
pub struct Reconciling {
    pub slot: u32,
    pub done_ns: f64,
}

/// A hardware migration controller (001 §2, MigC): its ReMap table, the one move it has in
/// flight (it moves one page or one pair at a time) and the one reconciliation running beside
/// it. The policy decides what to start and charges what each step costs; this keeps what is
/// under way and when it completes.
pub struct Controller {
    pub table: RemapTable,
    in_flight: Option<InFlight>,
    reconciling: Option<Reconciling>,
}

impl Controller {
    pub fn new(table: RemapTable) -> Controller {
        Controller { table, in_flight: None, reconciling: None }
    }

    /// A move is in flight.
    pub fn moving(&self) -> bool {
        self.in_flight.is_some()
    }

    pub fn in_flight(&self) -> Option<&InFlight> {
        self.in_flight.as_ref()
    }

    /// Start a move (the mechanics' move itself is requested by the policy).
    pub fn start_move(&mut self, kind: MoveKind, hot: PageId, cold: PageId, slot: u32, now_ns: f64) {
        debug_assert!(self.in_flight.is_none(), "one move at a time");
        self.in_flight = Some(InFlight { kind, hot, cold, slot, start_ns: now_ns, done_ns: f64::NAN });
    }

    /// When the move in flight completes: known once the timing model has run its copy (the
    /// hardware engine is idle from `hw_idle_ns` on, and not before the move started).
    pub fn move_done_ns(&mut self, hw_idle_ns: f64) -> Option<f64> {
        let m = self.in_flight.as_mut()?;
        if m.done_ns.is_nan() {
            m.done_ns = hw_idle_ns.max(m.start_ns);
        }
        Some(m.done_ns)
    }

    /// The move in flight is done: it leaves the controller.
    pub fn finish_move(&mut self) -> Option<InFlight> {
        self.in_flight.take()
    }

    pub fn reconciling(&self) -> Option<Reconciling> {
        self.reconciling
    }

    pub fn start_reconciling(&mut self, slot: u32, done_ns: f64) {
        debug_assert!(self.reconciling.is_none(), "one reconciliation at a time");
        self.reconciling = Some(Reconciling { slot, done_ns });
    }

    /// The reconciliation is done: it leaves the controller (the policy frees its group's
    /// entries with [`RemapTable::remove`], with its own per-page state).
    pub fn finish_reconciling(&mut self) -> Option<Reconciling> {
        self.reconciling.take()
    }
}

/// CACTI 7.0's access time, ns, of a fully associative ReMap table of `entries` 20-byte
/// entries at 22 nm, in one bank (see [`remap_lookup_cycles`]), by entries (powers of two,
/// ascending).
const REMAP_CACTI_ACCESS_NS: [(u64, f64); 7] =
    [(1 << 10, 0.584163), (1 << 11, 0.705348), (1 << 12, 0.885683), (1 << 13, 0.912247), (1 << 14, 1.20272), (1 << 15, 1.59022), (1 << 16, 1.99988)];

/// CPU cycles (3.2 GHz, 001 §4.1) one lookup of a ReMap table of `entries` entries costs:
/// 001's conservative 10 cycles for its 1024-entry table, scaled by how CACTI says the access
/// time of a fully associative table grows with its size, rounded up:
/// `ceil(10 × t(entries) / t(1024))`.
///
/// `t` is measured with CACTI 7.0 (github.com/HewlettPackard/cacti at 1ffd8df, "7.0.3DD",
/// `make opt`): a fully associative cache (associativity 0, one read-write and one search
/// port) in one UCA bank, 16-byte blocks and a 32-bit tag (the original page number searched
/// for), so 20 bytes an entry (001 §5.5: 64K entries, about 1.3 Mbytes); 22 nm, ITRS-HP
/// cells and periphery, 360 K, no ECC, 128-bit output, CACTI's default objective (ED²).
/// The inputs, the script and every run are in bench/cacti/, the study in
/// docs/remap-latency.md.
///
/// | entries | CACTI access (ns) | CACTI cycles at 3.2 GHz | this function |
/// |--------:|------------------:|------------------------:|--------------:|
/// |      1K |             0.584 |                    1.87 |            10 |
/// |      2K |             0.705 |                    2.26 |            13 |
/// |      4K |             0.886 |                    2.83 |            16 |
/// |      8K |             0.912 |                    2.92 |            16 |
/// |     16K |             1.203 |                    3.85 |            21 |
/// |     32K |             1.590 |                    5.09 |            28 |
/// |     64K |             2.000 |                    6.40 |            35 |
///
/// Between the measured sizes `t` is interpolated linearly in log2(entries); beyond 64K it is
/// extrapolated with the last segment's slope, 0.41 ns a doubling (128K: 42 cycles, 256K:
/// 49). That underestimates what CACTI gives there: 2.58 and 3.40 ns (45 and 59 cycles) at
/// best, in 8 and 4 banks; 2.88 and 4.87 ns (50 and 84) in one bank, which from 128K on
/// outgrows CACTI's 512 subarrays. Below 1024 entries: 10 cycles. The scaling keeps 001's
/// margin over CACTI (10 cycles where CACTI says 1.87), ×5.3 at every size: CACTI's own
/// figure is `t × 3.2`.
pub fn remap_lookup_cycles(entries: u64) -> u64 {
    let (first, t_first) = REMAP_CACTI_ACCESS_NS[0];
    if entries <= first {
        return 10;
    }
    // log2(entries), exact for powers of two
    let k = 63 - entries.leading_zeros();
    let lg = k as f64 + (entries as f64 / (1u64 << k) as f64).log2();
    let n = REMAP_CACTI_ACCESS_NS.len();
    // the segment [i, i + 1] that holds lg (the last one beyond the table)
    let i = REMAP_CACTI_ACCESS_NS.iter().rposition(|&(e, _)| e <= entries).unwrap_or(0).min(n - 2);
    let (e0, t0) = REMAP_CACTI_ACCESS_NS[i];
    let (e1, t1) = REMAP_CACTI_ACCESS_NS[i + 1];
    let (l0, l1) = (e0.trailing_zeros() as f64, e1.trailing_zeros() as f64);
    let t = t0 + (t1 - t0) * (lg - l0) / (l1 - l0);
    (10.0 * t / t_first).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries against the capacity, slots reused, and reconciliation's order: oldest first,
    /// waiting for a move in flight, skipping groups moved back meanwhile.
    #[test]
    fn entries_slots_and_the_order_of_reconciliation() {
        let mut t = RemapTable::new(Some(4), true);
        let a = t.insert(1, NO_PAGE, 1);
        let b = t.insert(2, 3, 1);
        assert_eq!((t.entries(), t.has_room(1), t.has_room(2)), (3, true, false));
        assert_eq!(t.oldest_done(), Oldest::InFlight, "the oldest move is still in flight");
        t.set_done(a, 10.0);
        t.set_done(b, 20.0);
        // b moved back before it is reconciled: its slot is reused by c, a later group
        assert_eq!(t.remove(b).pages(), 2);
        let c = t.insert(4, NO_PAGE, 1);
        assert_eq!(c, b, "the slot is reused");
        t.set_done(c, 30.0);
        assert_eq!(t.oldest_done(), Oldest::Done(a));
        t.remove(a);
        assert_eq!(t.oldest_done(), Oldest::Done(c), "b's old entry in the order is skipped");
        t.remove(c);
        assert_eq!((t.oldest_done(), t.entries()), (Oldest::Empty, 0));
        // the controller: one move, done when the hardware engine is idle (not before it
        // started); one reconciliation, which frees its group's entries
        let mut mc = Controller::new(RemapTable::new(Some(4), true));
        let g = mc.table.insert(5, 6, 1);
        mc.start_move(MoveKind::Forward, 5, 6, g, 100.0);
        assert_eq!(mc.move_done_ns(50.0), Some(100.0));
        assert_eq!(mc.move_done_ns(500.0), Some(100.0), "known once");
        assert_eq!(mc.finish_move().map(|m| m.hot), Some(5));
        mc.table.set_done(g, 100.0);
        assert!(!mc.moving() && mc.move_done_ns(1.0).is_none());
        let Oldest::Done(s) = mc.table.oldest_done() else { panic!() };
        mc.start_reconciling(s, 200.0);
        assert_eq!(mc.reconciling().map(|r| r.done_ns), Some(200.0));
        let r = mc.finish_reconciling().unwrap();
        assert_eq!(mc.table.remove(r.slot).pages(), 2);
        assert_eq!(mc.table.entries(), 0);
        let mut u = RemapTable::new(None, false);
        u.hold(7);
        assert!(!u.bounded() && u.has_room(1 << 40) && u.entries() == 7);
    }

    /// 001's 10 cycles at 1024 entries, CACTI's measured sizes, growth that never falls, and
    /// interpolation and extrapolation between and beyond them.
    #[test]
    fn remap_lookup_cycles_follow_cacti() {
        assert_eq!(remap_lookup_cycles(1024), 10, "001 §4.1's conservative figure");
        for e in [0, 1, 512, 1023] {
            assert_eq!(remap_lookup_cycles(e), 10, "no faster than 001's 1024-entry table");
        }
        let anchors = [(1 << 11, 13), (1 << 12, 16), (1 << 13, 16), (1 << 14, 21), (1 << 15, 28), (1 << 16, 35)];
        for (e, c) in anchors {
            assert_eq!(remap_lookup_cycles(e), c, "{e} entries");
        }
        // between 2K (12.07 before rounding) and 4K (15.16): about halfway at 2K × √2
        assert_eq!(remap_lookup_cycles(2896), 14);
        // beyond the table: the 32K–64K slope, 0.41 ns a doubling
        assert_eq!((remap_lookup_cycles(1 << 17), remap_lookup_cycles(1 << 18)), (42, 49));
        let mut last = 0;
        let mut e = 1u64;
        while e < 1 << 24 {
            let c = remap_lookup_cycles(e);
            assert!(c >= last, "{e} entries: {c} cycles after {last}");
            last = c;
            e += 1 + e / 64;
        }
        assert!(remap_lookup_cycles(u64::MAX) > remap_lookup_cycles(1 << 40));
    }
}
