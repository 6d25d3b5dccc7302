//! The cores' clocks of a run on several cores, shared between the source that interleaves
//! the cores' accesses ([`super::mix`]) and the timing model that posts when each access
//! issues: a plain shared structure, so the trace layer need not know the timing models.

/// The cores' clocks, shared between the timing model and the source that interleaves the
/// cores' accesses: the source posts each core's next access, the timing model posts the time
/// that access will issue at (from the core's own clock, ROB and MSHRs, which no other core
/// changes), and the source hands out the access that issues first. f64 bits in atomics, so
/// both sides may be `Send`.
#[derive(Debug)]
pub struct ClockBoard {
    clocks: Vec<std::sync::atomic::AtomicU64>,
    /// Per core, its next access as the source will hand it out: the instruction count, and
    /// bit 63 set for a write (posted by the source, read by the timing model to post the
    /// time that access will issue at).
    next: Vec<std::sync::atomic::AtomicU64>,
    /// The timing model changed the time of a core other than the one that ran last (a
    /// charge that halts a page's owner): the source reads every core's time again.
    moved: std::sync::atomic::AtomicBool,
}

impl ClockBoard {
    pub fn new(cores: usize) -> std::sync::Arc<ClockBoard> {
        std::sync::Arc::new(ClockBoard {
            clocks: (0..cores).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            next: (0..cores).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            moved: std::sync::atomic::AtomicBool::new(false),
        })
    }

    #[inline(always)]
    pub fn get(&self, core: usize) -> f64 {
        f64::from_bits(self.clocks[core].load(std::sync::atomic::Ordering::Relaxed))
    }
    /// Every clock back to 0 (a run starts with every core at time 0).
    pub fn reset(&self) {
        for c in self.clocks.iter().chain(&self.next) {
            c.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        self.moved.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    /// A core other than the one that ran last has a new time.
    pub fn mark_moved(&self) {
        self.moved.store(true, std::sync::atomic::Ordering::Relaxed)
    }
    /// Whether some core other than the one that ran last has a new time since the last call.
    #[inline(always)]
    pub fn take_moved(&self) -> bool {
        self.moved.load(std::sync::atomic::Ordering::Relaxed) && self.moved.swap(false, std::sync::atomic::Ordering::Relaxed)
    }
    /// Core `core`'s next access: its instruction count and whether it writes.
    #[inline(always)]
    pub fn set_next(&self, core: usize, insn: u64, write: bool) {
        self.next[core].store((insn & !(1 << 63)) | ((write as u64) << 63), std::sync::atomic::Ordering::Relaxed)
    }
    #[inline(always)]
    pub fn next(&self, core: usize) -> (u64, bool) {
        let v = self.next[core].load(std::sync::atomic::Ordering::Relaxed);
        (v & !(1 << 63), v >> 63 == 1)
    }
    #[inline(always)]
    pub fn set(&self, core: usize, ns: f64) {
        self.clocks[core].store(ns.to_bits(), std::sync::atomic::Ordering::Relaxed)
    }
}
