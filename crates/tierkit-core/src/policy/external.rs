//! Periodic policies decided outside the engine (in Python, over numpy arrays): the escape
//! hatch for prototypes and learned models. The engine calls the [`PeriodicDecider`] once per
//! period with the last period's per-page counts and carries out the moves it returns.

use super::{Ctx, Needs, Policy};
use crate::error::{Error, Result};
use crate::mechanics::TierId;
use crate::pagemap::PageId;
use crate::units::Period;

/// What an external policy sees at a period boundary.
pub struct PeriodView<'a> {
    /// Index of the period that starts now (1 at the first boundary).
    pub period: u64,
    /// Pages accessed in the period just ended, in order of first access in it.
    pub pages: &'a [PageId],
    /// Their access counts and write counts in that period.
    pub counts: Vec<u32>,
    pub writes: Vec<u32>,
    /// Current tier of every page known so far (index = page id; 255 = not placed).
    pub tier_of: &'a [TierId],
    /// Pages known so far.
    pub num_pages: usize,
    /// Capacity and use of each tier, in pages.
    pub capacity: Vec<u64>,
    pub used: Vec<u64>,
}

/// A move requested by an external policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Move a page to a tier with a free frame.
    Migrate(PageId, TierId),
    /// Exchange the tiers of two pages.
    Swap(PageId, PageId),
}

pub trait PeriodicDecider: Send {
    fn name(&self) -> String;
    fn period(&self) -> Period;
    /// Where a page goes on first touch; `None` = the fastest tier with room.
    fn place(&mut self, _page: PageId) -> Result<Option<TierId>> {
        Ok(None)
    }
    fn decide(&mut self, view: &PeriodView) -> Result<Vec<Decision>>;
}

/// Adapts a [`PeriodicDecider`] to the [`Policy`] interface.
pub struct External {
    pub decider: Box<dyn PeriodicDecider>,
    decisions: u64,
}

impl External {
    pub fn new(decider: Box<dyn PeriodicDecider>) -> External {
        External { decider, decisions: 0 }
    }
}

impl Policy for External {
    fn needs(&self) -> Needs {
        Needs { counts: true, rw_counts: true, ..Default::default() }
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        // a bad answer from outside falls back to first touch; the engine's capacity check
        // still guards the invariant
        match self.decider.place(page) {
            Ok(Some(t)) if (t as usize) < ctx.mem.tiers() && ctx.mem.free(t) > 0 => t,
            _ => ctx.mem.first_free_from(0).unwrap_or(0),
        }
    }

    fn period(&self) -> Option<Period> {
        Some(self.decider.period())
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        let t = ctx.track;
        let view = PeriodView {
            period: ctx.now.period,
            pages: &t.prev_touched,
            counts: t.prev_touched.iter().map(|&p| t.prev_count[p as usize]).collect(),
            writes: t.prev_touched.iter().map(|&p| t.prev_writes[p as usize]).collect(),
            tier_of: &ctx.mem.tier_of()[..ctx.pages.min(ctx.mem.slots())],
            num_pages: ctx.pages,
            capacity: (0..ctx.mem.tiers()).map(|i| ctx.mem.capacity(i as TierId)).collect(),
            used: (0..ctx.mem.tiers()).map(|i| ctx.mem.used(i as TierId)).collect(),
        };
        let ds = self.decider.decide(&view)?;
        let name = self.decider.name();
        for d in ds {
            let r = match d {
                Decision::Migrate(p, to) => {
                    if (p as usize) >= ctx.pages {
                        return Err(Error::config(format!("policy '{name}'"), format!("asked to move page {p}, but only {} pages exist", ctx.pages)));
                    }
                    ctx.mem.migrate(p, to)
                }
                Decision::Swap(a, b) => ctx.mem.swap(a, b),
            };
            // a request the mechanics refuse is the policy's error, reported as such
            r.map_err(|e| {
                Error::config(
                    format!("policy '{name}'"),
                    format!("period {}: {}", ctx.now.period, e.to_string().trim_start_matches("internal invariant violated: ")),
                )
            })?;
            self.decisions += 1;
        }
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({ "decisions": self.decisions })
    }
}
