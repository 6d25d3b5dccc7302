//! `cache-mode`: the fast tier as a hardware-managed, direct-mapped cache of the tiers below
//! it, as Knights Landing's MCDRAM in cache mode (002 §V-D) and DRAM in front of Optane
//! persistent memory in Memory Mode (004 §2.2).
//!
//! Model and assumptions:
//! * **Pages live below the fast tier**: first touch fills tier 1, then tier 2, and so on.
//!   The fast tier's capacity holds the cache, never pages; no page ever migrates.
//! * **Geometry**: `fast capacity (pages) × page size / block` sets of one block each
//!   (direct-mapped, one way). `block` defaults to 64 bytes, one line.
//! * **Index by "physical" address**: real memory-side caches see physical addresses, so
//!   each page gets a frame in first-touch order — its dense page id — and the block is
//!   `(page id × page size + offset in page) / block`, its set that number modulo the sets.
//!   Virtual addresses would give other conflicts than the hardware sees.
//! * **Read hit**: served by tier 0. **Read miss**: a tag probe of tier 0 (its read latency
//!   is added), the line served by the page's tier, and the block filled into tier 0 (one
//!   line written there, no latency of its own).
//! * **Writes allocate** (write-allocate, write-back) and mark the block dirty. A write hit
//!   is served by tier 0. A write miss probes tier 0 and writes the line into it: the write
//!   itself fills the block, so no read from the backing tier is needed when the block is
//!   one line (as for LLC writebacks into a line-sized memory-side cache); with larger
//!   blocks the rest of the block is read from the backing tier (one line is counted). A
//!   write miss therefore counts as served by the fast tier in `fast_hit_ratio`; the cache's
//!   own hit ratio is `stats.policy.hit_ratio`.
//! * **Dirty victims** are written back to their page's tier (one line written there). The
//!   victim's data is read together with the tag by the probe (tag and data share a unit in
//!   such DRAM caches), so no separate read of tier 0 is counted for it.
//! * Traffic is counted in lines of the trace's line size: with blocks larger than a line,
//!   a fill or writeback still counts one line (block-level bytes are in the statistics).
//! * Blocks still dirty at the end of the run are not flushed.

use super::params::{ParamSpec, ParamType, Params};
use super::{Built, Ctx, Needs, Policy, PolicyInfo, Served};
use crate::error::{Error, Result};
use crate::mechanics::TierId;
use crate::pagemap::PageId;
use serde_json::json;

const DIRTY: u64 = 1 << 63;

#[derive(Clone, Debug, Default, serde::Serialize)]
struct Stats {
    read_hits: u64,
    read_misses: u64,
    write_hits: u64,
    write_misses: u64,
    /// Misses that evicted a valid block.
    evictions: u64,
    /// Evicted blocks that were dirty and written back.
    dirty_writebacks: u64,
}

pub struct CacheMode {
    block_bytes: u64,
    block_shift: u32,
    page_shift: u32,
    page_mask: u64,
    sets: u64,
    /// Per set: 0 = empty, else (block number + 1) | DIRTY. Grown on demand up to `sets`,
    /// so a cache larger than the footprint costs only what is used.
    tags: Vec<u64>,
    /// The trace's line size: a write of one line fills a block of that size.
    line_bytes: u64,
    stats: Stats,
}

impl CacheMode {
    pub fn new(block_bytes: u64) -> CacheMode {
        CacheMode {
            block_bytes,
            block_shift: block_bytes.trailing_zeros(),
            page_shift: 12,
            page_mask: 4095,
            sets: 0,
            tags: Vec::new(),
            line_bytes: 64,
            stats: Stats::default(),
        }
    }

    fn hits(&self) -> u64 {
        self.stats.read_hits + self.stats.write_hits
    }
    fn misses(&self) -> u64 {
        self.stats.read_misses + self.stats.write_misses
    }
}

impl Policy for CacheMode {
    const PER_ACCESS: bool = true;

    fn needs(&self) -> Needs {
        Needs::default()
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let page = ctx.mem.page_bytes();
        let cap = ctx.mem.capacity(0);
        if cap == u64::MAX {
            return Err(Error::config(
                "cache-mode",
                format!(
                    "the fast tier ({}) has no capacity limit, so it cannot size a cache; give one (e.g. --fast-capacity 0.25 or 16G)",
                    ctx.platform.platform.tiers[0].name
                ),
            ));
        }
        let bytes = cap.saturating_mul(page);
        if self.block_bytes > bytes {
            return Err(Error::config("cache-mode:block", format!("a {}-byte block does not fit the {bytes}-byte fast tier", self.block_bytes)));
        }
        if self.block_bytes < ctx.line_bytes {
            return Err(Error::config(
                "cache-mode:block",
                format!("a {}-byte block is smaller than the trace's {}-byte lines", self.block_bytes, ctx.line_bytes),
            ));
        }
        let below: u64 = (1..ctx.mem.tiers()).fold(0u64, |a, t| a.saturating_add(ctx.mem.capacity(t as TierId)));
        let footprint = ctx.platform.footprint_pages;
        if below < footprint {
            return Err(Error::config(
                "cache-mode",
                format!("the tiers below the cache hold {below} pages, but the trace touches {footprint}: the fast tier's capacity holds the cache, not pages"),
            ));
        }
        self.page_shift = page.trailing_zeros();
        self.page_mask = page - 1;
        self.sets = bytes / self.block_bytes;
        self.line_bytes = ctx.line_bytes;
        self.tags.clear();
        Ok(())
    }

    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        // never tier 0: its capacity is the cache
        ctx.mem.first_free_from(1).unwrap_or(1)
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        let phys = ((page as u64) << self.page_shift) | (addr & self.page_mask);
        let block = phys >> self.block_shift;
        let set = (block % self.sets) as usize;
        if set >= self.tags.len() {
            let want = (set + 1).max(self.tags.len() * 2).min(self.sets as usize);
            self.tags.resize(want, 0);
        }
        let entry = self.tags[set];
        if entry & !DIRTY == block + 1 {
            if write {
                self.stats.write_hits += 1;
                self.tags[set] = entry | DIRTY;
            } else {
                self.stats.read_hits += 1;
            }
            return Served::by(0);
        }
        // miss: probe, (fill), write back a dirty victim
        let backing = ctx.mem.tier(page);
        let mut s = if write {
            self.stats.write_misses += 1;
            let s = Served::by(0).with_probe(0);
            if self.block_bytes > self.line_bytes {
                s.plus(backing, false)
            } else {
                s
            }
        } else {
            self.stats.read_misses += 1;
            Served::by(backing).with_probe(0).plus(0, true)
        };
        if entry != 0 {
            self.stats.evictions += 1;
            if entry & DIRTY != 0 {
                self.stats.dirty_writebacks += 1;
                let victim_page = (((entry & !DIRTY) - 1) << self.block_shift) >> self.page_shift;
                s = s.plus(ctx.mem.tier(victim_page as PageId), true);
            }
        }
        self.tags[set] = (block + 1) | if write { DIRTY } else { 0 };
        s
    }

    fn report(&self) -> serde_json::Value {
        let acc = self.hits() + self.misses();
        json!({
            "name": "cache-mode",
            "sets": self.sets,
            "block_bytes": self.block_bytes,
            "hits": self.hits(),
            "misses": self.misses(),
            "hit_ratio": if acc > 0 { self.hits() as f64 / acc as f64 } else { 0.0 },
            "fills": self.misses(),
            "fill_bytes": self.misses() * self.block_bytes,
            "writeback_bytes": self.stats.dirty_writebacks * self.block_bytes,
            "detail": self.stats,
        })
    }
}

pub static CACHE_MODE: PolicyInfo = PolicyInfo {
    name: "cache-mode",
    summary:
        "the fast tier as a direct-mapped, write-allocate cache of the tiers below (KNL cache mode, Optane Memory Mode); pages first-touch from tier 1 down",
    source: "002 §V-D (KNL MCDRAM cache mode); 004 §2.2 (DCPMM Memory Mode)",
    deploy: super::Deploy::Hardware {
        why: "the fast tier as a hardware-managed cache (Optane Memory Mode, KNL cache mode) is a firmware setting, not a placement",
    },
    params: &[ParamSpec {
        name: "block",
        ty: ParamType::Bytes,
        unit: "bytes",
        default: "64",
        source: "002 §V-D and 004 §2.2 (line-sized blocks of a memory-side cache)",
        help: "cache block size, a power of two, at least the trace's line size and at most the fast tier's capacity",
    }],
    build: |p: &Params| {
        let b = p.bytes("block");
        if !b.is_power_of_two() {
            return Err(Error::config("cache-mode:block", format!("{b} is not a power of two")));
        }
        Ok(Built::from(CacheMode::new(b)))
    },
};
