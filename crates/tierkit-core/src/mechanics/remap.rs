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
}
