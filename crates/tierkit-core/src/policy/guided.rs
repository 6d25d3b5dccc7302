//! `guided`: placement by allocation site from a guidance file (`tierkit guide`, format in
//! `docs/guidance.md`), with static or per-phase arenas (000 §3.2, 002 §III-B, §IV-B).
//!
//! Each allocation of the trace is classed when it is made: the site's call stack is looked
//! up in the guidance, and the allocation joins that site's arena. Version-2 guidance keys
//! sites by frame keys and classes them by the rule of [`crate::sitekey::classify`] (the
//! runtime's); version 1 by the first `context + 1` display frames, compared whole. A trace
//! site with too few frames to decide is an error naming it, never a silent first match
//! (docs/guidance.md, "Matching sites"). A page goes, on its first access, to the tier its
//! arena prefers in the current phase; when that tier is full it goes to the next slower
//! tier with room (the overflow of `MPOL_PREFERRED`, 002 §IV-B). A page shared by several
//! allocations follows the one with the most bytes on it: the trace comes from an allocator
//! that packs sites together, where the real runtime gives each arena its own pages. Pages
//! no allocation ever held (stack, globals, mapped files) follow `nonheap`; allocations from sites the
//! guidance does not know follow `unmatched`.
//!
//! Per-phase arenas: at the start of each slice whose phase differs from the previous one,
//! the program stops and every arena whose tier changes moves its pages (000 §6.3: "it
//! suspends execution, and attempts to migrate data in each arena to the appropriate tier
//! using the guidance for the upcoming program phase"): first the pages that go down, then
//! those that go up while the faster tier has room. The batch is one OS entry and one TLB
//! shootdown plus each page's copy (000 §5.1 costs, amortized per arena move as 000 §3.2
//! says arena remapping is).
//!
//! Layout (`layout=arenas`, the default): the trace's addresses are those the recording
//! allocator chose, which hands a freed block to whichever site asks next and packs sites
//! together. The run reads the trace through [`arena_layout::LayoutSource`], which gives
//! each arena (and the unmatched allocations) its own page-aligned address range and places
//! each allocation in its arena's range as an arena allocator would, moving the accesses
//! inside it along; a page then belongs to exactly one arena, as under the real runtime.
//! `layout=trace` keeps the traced addresses, classing a shared page by the allocation with
//! the most bytes on it (the behaviour before the arena layout).
//!
//! With `then=NAME`, guidance only places new pages and the dynamic policy NAME (otf,
//! otf-adaptive, otf-reverse, hma-epoch, fthp) migrates them afterwards; `then.KEY=VALUE`
//! passes its parameters.

use super::arena_layout::{self, LayoutSource, LayoutStats, SiteRange};
use super::params::{ParamSpec, ParamType};
use super::{epoch_os, otf, Built, Ctx, Needs, Params, Policy, PolicyInfo, PolicySpec, Served};
use crate::error::{Error, Result};
use crate::mechanics::{Charge, MoveBy, Op, TierId};
use crate::pagemap::PageId;
use crate::trace::{AllocFn, Event, EventKind, RecordSource};
use crate::units::Period;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

// a page's class: an arena id, or one of these (arena ids stay below both)
const NONHEAP: u16 = u16::MAX;
const UNMATCHED: u16 = u16::MAX - 1;

// ----------------------------------------------------------------------- the guidance file

#[derive(Deserialize)]
struct File {
    format: String,
    version: u32,
    mode: String,
    tiers: Vec<String>,
    context: usize,
    #[serde(default)]
    profile: Option<FileProfile>,
    #[serde(default)]
    phases: Option<FilePhases>,
    arenas: Vec<FileArena>,
    sites: Vec<FileSite>,
}

#[derive(Deserialize)]
struct FileProfile {
    #[serde(default)]
    trace_digest: Option<String>,
}

/// What a per-phase schedule was made from (version 2; docs/guidance.md).
#[derive(Deserialize)]
struct FileMadeFrom {
    #[serde(default)]
    trace_digest: Option<String>,
    #[serde(default)]
    insn: Option<u64>,
    #[serde(default)]
    accesses: Option<u64>,
}

#[derive(Deserialize)]
struct FilePhases {
    #[serde(default)]
    made_from: Option<FileMadeFrom>,
    count: usize,
    #[serde(default)]
    slice_source: Option<String>,
    #[serde(default)]
    slice_length: u64,
    #[serde(default)]
    of_slice: Vec<usize>,
    /// Absent in files made before phase markers.
    #[serde(default)]
    markers: Option<Vec<FileMarker>>,
}

#[derive(Deserialize)]
struct FileMarker {
    phase: usize,
    #[serde(default)]
    alloc: Option<u64>,
    #[serde(default)]
    side: Option<String>,
}

#[derive(Deserialize)]
struct FileArena {
    tiers: Vec<usize>,
}

#[derive(Deserialize)]
struct FileSite {
    #[serde(default)]
    frames: Vec<String>,
    /// Version 2: the frame keys.
    #[serde(default)]
    key: Option<Vec<String>>,
    arena: usize,
}

/// A guidance file, checked.
pub struct Guidance {
    /// The file, for messages.
    pub path: String,
    /// The format version: 1 (display frames) or 2 (frame keys).
    pub version: u32,
    pub per_phase: bool,
    pub tiers: usize,
    /// Frames compared per site: `context + 1` display frames (version 1), `context` frame
    /// keys (version 2).
    pub key_frames: usize,
    /// Tier of each arena in each phase (one phase in static guidance).
    pub arena_tiers: Vec<Vec<usize>>,
    /// Phase of each slice.
    pub of_slice: Vec<usize>,
    /// Length of a slice, for per-phase guidance.
    pub slice: Option<Period>,
    /// Site keys (frame keys in version 2, display frames in version 1) and their arenas,
    /// in the file's order.
    pub sites: Vec<(Vec<String>, u16)>,
    /// Per-phase: the digest of the trace the schedule was made from, when known.
    pub schedule_digest: Option<String>,
    /// Per-phase: the length of the run the schedule was made from, in slice units
    /// (instructions or accesses); from `phases.made_from`, else slices x slice length.
    pub schedule_length: Option<u64>,
    /// Per-phase: the phase markers a run can see, as (position, phase): position `2 i` is
    /// just before allocation call `i` (from 0), `2 i + 1` just after it (docs/guidance.md,
    /// "Phase markers"); None for files made before markers.
    pub markers: Option<Vec<(u64, usize)>>,
}

impl Guidance {
    pub fn read(path: &str) -> Result<Guidance> {
        let key = "guided:guidance";
        let bad = |msg: String| Error::config(key, format!("{path}: {msg}"));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let f: File = serde_json::from_str(&text).map_err(|e| bad(format!("not a guidance file: {e}")))?;
        if f.format != "tierkit-guidance" {
            return Err(bad(format!("format: '{}' is not 'tierkit-guidance'", f.format)));
        }
        if f.version != 1 && f.version != 2 {
            return Err(bad(format!("version: {} is not supported (this tierkit reads versions 1 and 2)", f.version)));
        }
        if f.version == 2 && f.context == 0 {
            return Err(bad("context: 0: version-2 guidance keys sites by at least one frame".into()));
        }
        let per_phase = match f.mode.as_str() {
            "static" => false,
            "per-phase" => true,
            m => return Err(bad(format!("mode: '{m}' is not static or per-phase"))),
        };
        if f.tiers.len() < 2 {
            return Err(bad("tiers: a guidance file names at least two tiers".into()));
        }
        if f.arenas.len() >= UNMATCHED as usize {
            return Err(bad(format!("arenas: {} arenas is too many", f.arenas.len())));
        }
        let n_phases = if per_phase { f.phases.as_ref().map(|p| p.count).unwrap_or(0) } else { 1 };
        if per_phase && n_phases == 0 {
            return Err(bad("phases: per-phase guidance without phases".into()));
        }
        let mut arena_tiers = Vec::new();
        for (i, a) in f.arenas.iter().enumerate() {
            // static guidance reads the first entry
            let fits = if per_phase { a.tiers.len() == n_phases } else { !a.tiers.is_empty() };
            if !fits {
                return Err(bad(format!("arenas[{i}].tiers: {} entries for {n_phases} phases", a.tiers.len())));
            }
            if let Some(t) = a.tiers.iter().find(|&&t| t >= f.tiers.len()) {
                return Err(bad(format!("arenas[{i}].tiers: tier {t} is not one of the {} tiers", f.tiers.len())));
            }
            arena_tiers.push(a.tiers[..n_phases].to_vec());
        }
        let mut sites = Vec::new();
        let mut seen: HashMap<&[String], usize> = HashMap::new();
        for (i, s) in f.sites.iter().enumerate() {
            if s.arena >= f.arenas.len() {
                return Err(bad(format!("sites[{i}].arena: {} is not an arena id (0..{})", s.arena, f.arenas.len())));
            }
            let key = if f.version == 2 {
                let k = s.key.as_ref().ok_or_else(|| bad(format!("sites[{i}].key: missing (version-2 guidance keys each site by its frame keys)")))?;
                if k.is_empty() || k.len() > f.context {
                    return Err(bad(format!("sites[{i}].key: {} frames, but context {} keys sites by 1 to {} frames", k.len(), f.context, f.context)));
                }
                if let Some((j, bad_key)) = k.iter().enumerate().find(|(_, x)| !crate::sitekey::is_frame_key(x)) {
                    return Err(bad(format!("sites[{i}].key[{j}]: '{bad_key}' is not a frame key (build-id:HEX+0xOFFSET or file:NAME+0xOFFSET)")));
                }
                k
            } else {
                &s.frames
            };
            if let Some(j) = seen.insert(key, i) {
                return Err(bad(format!("sites[{i}]: the same key as sites[{j}]")));
            }
            sites.push((key.clone(), s.arena as u16));
        }
        let (mut of_slice, mut slice) = (Vec::new(), None);
        if per_phase {
            let p = f.phases.as_ref().unwrap();
            if let Some(x) = p.of_slice.iter().find(|&&x| x >= n_phases) {
                return Err(bad(format!("phases.of_slice: phase {x} of {n_phases}")));
            }
            if p.of_slice.is_empty() {
                return Err(bad("phases.of_slice: empty".into()));
            }
            of_slice = p.of_slice.clone();
            slice =
                Some(match (p.slice_source.as_deref(), p.slice_length) {
                    (_, 0) => return Err(bad(
                        "phases.slice_length: per-phase guidance needs the slice length (profile a trace with slice markers of known length, or give --slice)"
                            .into(),
                    )),
                    (Some("accesses"), n) => Period::Accesses(n),
                    (_, n) => Period::Insn(n),
                });
        }
        let (mut schedule_digest, mut schedule_length, mut markers) = (None, None, None);
        if let Some(ms) = f.phases.as_ref().and_then(|p| p.markers.as_ref()).filter(|_| per_phase) {
            let mut out: Vec<(u64, usize)> = Vec::new();
            for (i, m) in ms.iter().enumerate() {
                if m.phase >= n_phases {
                    return Err(bad(format!("phases.markers[{i}].phase: {} of {n_phases}", m.phase)));
                }
                let Some(at) = m.alloc else { continue };
                let pos = match m.side.as_deref() {
                    Some("before") => at.saturating_mul(2),
                    Some("after") => at.saturating_mul(2).saturating_add(1),
                    other => return Err(bad(format!("phases.markers[{i}].side: {other:?} is not \"before\" or \"after\""))),
                };
                if out.last().is_some_and(|&(p, _)| p > pos) {
                    return Err(bad(format!("phases.markers[{i}].alloc: {at} comes before the marker ahead of it")));
                }
                out.push((pos, m.phase));
            }
            markers = Some(out);
        }
        if per_phase {
            let p = f.phases.as_ref().unwrap();
            let by_accesses = matches!(slice, Some(Period::Accesses(_)));
            let m = p.made_from.as_ref();
            schedule_digest = m.and_then(|m| m.trace_digest.clone()).or_else(|| f.profile.as_ref().and_then(|x| x.trace_digest.clone()));
            schedule_length = m.and_then(|m| if by_accesses { m.accesses } else { m.insn }).or(Some((of_slice.len() as u64).saturating_mul(p.slice_length)));
        }
        // version 1: a context past any stack's depth compares every frame (and must not
        // overflow)
        let key_frames = if f.version == 2 { f.context } else { f.context.saturating_add(1) };
        Ok(Guidance {
            path: path.to_string(),
            version: f.version,
            per_phase,
            tiers: f.tiers.len(),
            key_frames,
            arena_tiers,
            of_slice,
            slice,
            sites,
            schedule_digest,
            schedule_length,
            markers,
        })
    }

    /// The arena of trace site `site` (`frames` for display, `keys` its frame keys), or
    /// None when the guidance does not know it. Version 2: [`crate::sitekey::classify`] on
    /// the keys. Version 1: the first `context + 1` display frames equal a guidance key; a
    /// trace that records fewer frames takes the keys that start with them, if they are all
    /// in one arena. Too few frames to decide is an error naming the site.
    fn arena_of(&self, index: &HashMap<Vec<String>, u16>, site: u32, frames: &[String], keys: &[String]) -> Result<Option<u16>> {
        use crate::sitekey::{classify, Class};
        // messages stay within one 200-character line (crate::error): the innermost frame only
        let name = || {
            format!(
                "trace site {site} ({})",
                frames.first().map(|f| crate::sitekey::frame_label(f, keys.first().map(|k| k.as_str()))).unwrap_or_else(|| "no frames".into())
            )
        };
        let short_of = |have: usize, arenas: &[u16]| {
            let list: Vec<String> = arenas.iter().map(|a| a.to_string()).collect();
            Error::config(
                "guided:guidance",
                format!(
                    "{}: {} has {have} frame(s), too few to tell arenas {} apart: record with --context {}",
                    self.path,
                    name(),
                    list.join(", "),
                    self.key_frames
                ),
            )
        };
        if self.version == 2 {
            if keys.is_empty() {
                return Err(Error::config(
                    "guided:guidance",
                    format!(
                        "{}: {} has no frame keys (an old or imported trace): version-2 guidance needs a trace from 'tierkit trace record'",
                        self.path,
                        name()
                    ),
                ));
            }
            return match classify(&self.sites, self.key_frames, keys) {
                Class::Arena { arena, .. } => Ok(Some(arena)),
                Class::Unmatched { .. } => Ok(None),
                Class::TooFewFrames { have, arenas } => Err(short_of(have, &arenas)),
            };
        }
        let n = frames.len().min(self.key_frames);
        if let Some(&a) = index.get(&frames[..n]) {
            return Ok(Some(a));
        }
        if n < self.key_frames {
            let mut arenas: Vec<u16> = self.sites.iter().filter(|(k, _)| k.len() >= n && k[..n] == frames[..n]).map(|(_, a)| *a).collect();
            arenas.sort_unstable();
            arenas.dedup();
            return match arenas.len() {
                0 => Ok(None),
                1 => Ok(Some(arenas[0])),
                _ => Err(short_of(n, &arenas)),
            };
        }
        Ok(None)
    }

    /// Warnings about per-phase guidance applied to another run (docs/guidance.md): a run more
    /// than twice as long or short as the one the schedule was made from, or another trace.
    pub fn schedule_warnings(&self, digest: Option<&str>, ran: &super::RunExtent) -> Vec<String> {
        let mut w = Vec::new();
        if !self.per_phase {
            return w;
        }
        let (unit, length) = match self.slice {
            Some(Period::Accesses(_)) => ("accesses", Some(ran.accesses)),
            _ => ("instructions", ran.instructions),
        };
        if let (Some(want), Some(got)) = (self.schedule_length, length) {
            if want > 0 && got > 0 && (got > want.saturating_mul(2) || want > got.saturating_mul(2)) {
                let (ratio, how) = if got > want { (got as f64 / want as f64, "longer") } else { (want as f64 / got as f64, "shorter") };
                w.push(format!(
                    "per-phase guidance {}: its phase schedule was made from a run of {want} {unit} ({} slices), this trace runs {got} ({ratio:.1}x {how}); the schedule's phases do not line up with this run's{}",
                    self.path,
                    self.of_slice.len(),
                    if got > want { " and its last phase holds for the rest of the run" } else { "" }
                ));
            }
        }
        if let (Some(want), Some(got)) = (self.schedule_digest.as_deref(), digest) {
            if want != got {
                let short = |d: &str| d.chars().take(12).collect::<String>();
                w.push(format!(
                    "per-phase guidance {}: made from the trace with digest {}…, not this one ({}…): its phases are that run's slice schedule, replayed here by {unit}",
                    self.path,
                    short(want),
                    short(got)
                ));
            }
        }
        w
    }
}

// ------------------------------------------------------------------------------ the policy

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    FirstTouch,
    Tier(usize),
    /// The guidance's last tier.
    Last,
}

fn rule(key: &str, s: &str) -> Result<Rule> {
    Ok(match s {
        "first-touch" => Rule::FirstTouch,
        "fast" => Rule::Tier(0),
        "slow" | "file" => Rule::Last,
        other => return Err(Error::config(key, format!("'{other}' is not first-touch, fast or slow"))),
    })
}

/// Which addresses the run places pages by.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Each arena its own address range ([`arena_layout`]).
    Arenas,
    /// The addresses of the trace's allocator.
    Trace,
}

/// What one class (an arena, unmatched or non-heap) allocated and where its pages are.
#[derive(Clone, Default)]
struct ClassUse {
    allocations: u64,
    allocated_bytes: u64,
    live_bytes: u64,
    peak_live_bytes: u64,
    /// Pages per tier now.
    pages: Vec<u64>,
    /// Pages per tier when the live bytes last stood at their peak (taken just before they
    /// first went down from it; `None` while they still stand there).
    at_peak: Option<Vec<u64>>,
}

/// No dynamic policy after guided placement.
pub struct Stay;

impl Policy for Stay {
    fn needs(&self) -> Needs {
        Needs::default()
    }
    fn place(&mut self, _page: PageId, ctx: &mut Ctx) -> TierId {
        ctx.mem.first_free_from(0).unwrap_or(0)
    }
}

#[derive(Default, serde::Serialize)]
struct Stats {
    allocations: u64,
    allocations_unmatched: u64,
    /// Pages placed below the tier their arena preferred, because it was full.
    overflow_pages: u64,
    phase_transitions: u64,
    arena_moves: u64,
    pages_moved: u64,
    pages_left_behind: u64,
}

pub struct Guided<P: Policy> {
    g: Arc<Guidance>,
    index: Arc<HashMap<Vec<String>, u16>>,
    inner: P,
    has_inner: bool,
    unmatched: Rule,
    nonheap: Rule,
    /// Arena tier per phase, mapped to the platform's tiers.
    tiers: Vec<Vec<TierId>>,
    last: TierId,
    phase: usize,
    site_class: Vec<u16>,
    /// Live allocations (in the run's addresses): start -> (end, class, site).
    live: BTreeMap<u64, (u64, u16, u32)>,
    page_bytes: u64,
    arena_pages: Vec<Vec<PageId>>,
    /// Pages placed per arena, then unmatched and non-heap (`pages_by_class` in the report).
    class_pages: Vec<u64>,
    stats: Stats,
    layout: Layout,
    /// The layout's statistics, filled when the main reader reaches the trace's end.
    layout_out: Arc<Mutex<Option<LayoutStats>>>,
    /// Per class, indexed like `class_pages`.
    class_use: Vec<ClassUse>,
    /// Class slot and site of each placed page (for pages that move).
    page_class: Vec<u16>,
    page_site: Vec<u32>,
    /// Per site id: its frames and pages per tier now.
    site_frames: Vec<Vec<String>>,
    site_pages: Vec<Vec<u64>>,
    n_tiers: usize,
    /// Per-phase guidance switched at its phase markers (allocation calls), as the runtime
    /// does, instead of by the slice schedule.
    by_markers: bool,
    /// Allocation calls so far, and the next marker (with `by_markers`).
    calls: u64,
    next_marker: usize,
}

const NO_SITE: u32 = u32::MAX;

impl<P: Policy> Guided<P> {
    fn new(g: Guidance, inner: P, has_inner: bool, unmatched: Rule, nonheap: Rule, layout: Layout) -> Guided<P> {
        let index = Arc::new(g.sites.iter().rev().map(|(k, a)| (k.clone(), *a)).collect());
        let n_arenas = g.arena_tiers.len();
        Guided {
            g: Arc::new(g),
            index,
            inner,
            has_inner,
            unmatched,
            nonheap,
            tiers: Vec::new(),
            last: 0,
            phase: 0,
            site_class: Vec::new(),
            live: BTreeMap::new(),
            page_bytes: 4096,
            arena_pages: vec![Vec::new(); n_arenas],
            class_pages: vec![0; n_arenas + 2],
            stats: Stats::default(),
            layout,
            layout_out: Arc::new(Mutex::new(None)),
            class_use: vec![ClassUse::default(); n_arenas + 2],
            page_class: Vec::new(),
            page_site: Vec::new(),
            site_frames: Vec::new(),
            site_pages: Vec::new(),
            n_tiers: 0,
            by_markers: false,
            calls: 0,
            next_marker: 0,
        }
    }

    /// The class (arena, unmatched or non-heap) and site of the allocation with the most
    /// bytes on the page at `start`.
    fn owner(&self, start: u64) -> (u16, u32) {
        let end = start + self.page_bytes;
        let mut best = (0u64, NONHEAP, NO_SITE);
        for (&a, &(e, class, site)) in self.live.range(..end).rev() {
            let overlap = e.min(end).saturating_sub(a.max(start));
            if overlap > best.0 {
                best = (overlap, class, site);
            }
            if a <= start {
                break;
            }
        }
        (best.1, best.2)
    }

    /// The class and site of a page on its first touch. Under the arena layout the page's
    /// address range says its class (the site is the allocation's with the most bytes on it);
    /// under the trace's layout the allocation with the most bytes on it says both.
    fn class_of_page(&self, start: u64) -> (u16, u32) {
        let (class, site) = self.owner(start);
        if self.layout == Layout::Trace {
            return (class, site);
        }
        let n = self.arena_pages.len() as u32;
        match arena_layout::range_of(start, n + 1) {
            Some(r) if r < n => (r as u16, site),
            Some(_) => (UNMATCHED, site),
            None => (NONHEAP, NO_SITE),
        }
    }

    /// Follow the pages that moved in `ops` (arena moves, or the `then=` policy's).
    fn follow_moves(&mut self, ops: &[Op]) {
        for op in ops {
            if let Op::Move(m) = op {
                let p = m.page as usize;
                let Some(&slot) = self.page_class.get(p) else { continue };
                let c = &mut self.class_use[slot as usize].pages;
                c[m.from as usize] -= 1;
                c[m.to as usize] += 1;
                if let Some(sp) = self.site_pages.get_mut(self.page_site[p] as usize) {
                    sp[m.from as usize] -= 1;
                    sp[m.to as usize] += 1;
                }
            }
        }
    }

    /// Live bytes of a class go up or down (a peak is kept as the pages stood at it).
    fn live_change(&mut self, class: u16, add: u64, sub: u64) {
        let slot = self.class_slot(class);
        let u = &mut self.class_use[slot];
        if sub > 0 && u.at_peak.is_none() && u.live_bytes == u.peak_live_bytes {
            u.at_peak = Some(u.pages.clone());
        }
        u.live_bytes = u.live_bytes.saturating_sub(sub) + add;
        if u.live_bytes > u.peak_live_bytes {
            u.peak_live_bytes = u.live_bytes;
            u.at_peak = None;
        }
    }

    fn preferred(&self, class: u16) -> Option<TierId> {
        let r = match class {
            NONHEAP => self.nonheap,
            UNMATCHED => self.unmatched,
            a => return Some(self.tiers[a as usize][self.phase]),
        };
        match r {
            Rule::FirstTouch => None,
            Rule::Tier(t) => Some(t as TierId),
            Rule::Last => Some(self.last),
        }
    }

    /// Index of a class in `class_pages`.
    fn class_slot(&self, class: u16) -> usize {
        let n = self.arena_pages.len();
        match class {
            UNMATCHED => n,
            NONHEAP => n + 1,
            a => a as usize,
        }
    }

    /// The slice schedule's phase transition at a slice boundary (per-phase mode).
    fn transition(&mut self, ctx: &mut Ctx) -> Result<()> {
        let k = ctx.now.period as usize;
        let next = self.g.of_slice[k.min(self.g.of_slice.len() - 1)];
        self.transition_to(next, ctx)
    }

    /// Allocation-call position `pos` reached (with `by_markers`): the markers passed make one
    /// transition, to the last one's phase, as the runtime does.
    fn marker_reached(&mut self, pos: u64, ctx: &mut Ctx) -> Result<()> {
        let Some(ms) = self.g.markers.as_ref() else { return Ok(()) };
        let first = self.next_marker;
        while self.next_marker < ms.len() && ms[self.next_marker].0 <= pos {
            self.next_marker += 1;
        }
        if self.next_marker == first {
            return Ok(());
        }
        let next = ms[self.next_marker - 1].1;
        self.transition_to(next, ctx)
    }

    /// Arena moves to phase `next` (per-phase mode).
    fn transition_to(&mut self, next: usize, ctx: &mut Ctx) -> Result<()> {
        if next == self.phase {
            return Ok(());
        }
        self.phase = next;
        self.stats.phase_transitions += 1;
        let m = &ctx.platform.platform.migration;
        let (fault_ns, tlb_ns) = (m.fault_ns, m.tlb_shootdown_ns);
        let mut moved = 0u64;
        // down first, to make room; then up, while there is room
        for down in [true, false] {
            for a in 0..self.arena_pages.len() {
                let want = self.tiers[a][next];
                let mut any = false;
                for &p in &self.arena_pages[a] {
                    let cur = ctx.mem.tier(p);
                    if cur == want || (down && want < cur) || (!down && want > cur) {
                        continue;
                    }
                    let to = if down { ctx.mem.first_free_from(want) } else { (want..cur).find(|&t| ctx.mem.free(t) > 0) };
                    match to {
                        Some(t) if t != cur => {
                            if moved == 0 {
                                ctx.mem.charge(Charge { what: "OS entry (arena move)", ns: fault_ns, halts: true, energy_j: 0.0 });
                            }
                            ctx.mem.migrate_by(p, t, MoveBy::OsBatch)?;
                            moved += 1;
                            any = true;
                        }
                        _ => self.stats.pages_left_behind += 1,
                    }
                }
                if any {
                    self.stats.arena_moves += 1;
                }
            }
        }
        if moved > 0 {
            ctx.mem.charge(Charge { what: "TLB shootdown (arena move)", ns: tlb_ns, halts: true, energy_j: 0.0 });
        }
        self.stats.pages_moved += moved;
        Ok(())
    }
}

impl<P: Policy> Policy for Guided<P> {
    const PER_ACCESS: bool = P::PER_ACCESS;

    fn needs(&self) -> Needs {
        Needs { events: true, ..self.inner.needs() }
    }

    fn init(&mut self, ctx: &mut Ctx) -> Result<()> {
        let n = ctx.mem.tiers();
        if self.g.tiers > n {
            return Err(Error::config(
                "guided:guidance",
                format!("the guidance assigns {} tiers but the platform has {n}: run 'tierkit guide' with --tiers for {n} tiers", self.g.tiers),
            ));
        }
        // a guidance tier beyond the platform's last maps to the last
        self.last = (self.g.tiers - 1).min(n - 1) as TierId;
        self.tiers = self.g.arena_tiers.iter().map(|ph| ph.iter().map(|&t| t.min(n - 1) as TierId).collect()).collect();
        if let Rule::Tier(t) = self.unmatched {
            self.unmatched = Rule::Tier(t.min(n - 1));
        }
        self.page_bytes = ctx.mem.page_bytes();
        self.phase = if self.g.per_phase { self.g.of_slice[0] } else { 0 };
        self.n_tiers = n;
        for u in &mut self.class_use {
            u.pages = vec![0; n];
        }
        if self.has_inner {
            let from = ctx.mem.ops.len();
            self.inner.init(ctx)?;
            self.follow_moves(&ctx.mem.ops[from..]);
        }
        Ok(())
    }

    fn place(&mut self, page: PageId, ctx: &mut Ctx) -> TierId {
        let (class, site) = self.class_of_page(ctx.page_addr(page));
        let tier = match self.preferred(class) {
            None => ctx.mem.first_free_from(0).unwrap_or(0),
            Some(t) => match ctx.mem.first_free_from(t) {
                Some(x) => {
                    if x != t {
                        self.stats.overflow_pages += 1;
                    }
                    x
                }
                None => ctx.mem.first_free_from(0).unwrap_or(0),
            },
        };
        let slot = self.class_slot(class);
        self.class_pages[slot] += 1;
        if self.g.per_phase && class < UNMATCHED {
            self.arena_pages[class as usize].push(page);
        }
        let p = page as usize;
        if self.page_class.len() <= p {
            self.page_class.resize(p + 1, 0);
            self.page_site.resize(p + 1, NO_SITE);
        }
        (self.page_class[p], self.page_site[p]) = (slot as u16, site);
        self.class_use[slot].pages[tier as usize] += 1;
        if site != NO_SITE {
            let s = site as usize;
            if self.site_pages.len() <= s {
                self.site_pages.resize(s + 1, Vec::new());
            }
            self.site_pages[s].resize(self.n_tiers, 0);
            self.site_pages[s][tier as usize] += 1;
        }
        if self.has_inner {
            let from = ctx.mem.ops.len();
            self.inner.adopt(page, tier, ctx);
            self.follow_moves(&ctx.mem.ops[from..]);
        }
        tier
    }

    #[inline(always)]
    fn on_access(&mut self, page: PageId, addr: u64, write: bool, ctx: &mut Ctx) -> Served {
        let from = ctx.mem.ops.len();
        let s = self.inner.on_access(page, addr, write, ctx);
        if ctx.mem.ops.len() > from {
            self.follow_moves(&ctx.mem.ops[from..]);
        }
        s
    }

    #[inline(always)]
    fn prefetch(&self, page: PageId) {
        self.inner.prefetch(page)
    }

    fn period(&self) -> Option<Period> {
        if self.g.per_phase && !self.by_markers {
            self.g.slice
        } else {
            self.inner.period()
        }
    }

    /// Per-phase guidance checks for a phase change at every slice boundary; static
    /// guidance has no periodic work of its own, only its `then=` policy's.
    fn activity(&self) -> super::Activity {
        if self.g.per_phase && !self.by_markers {
            super::Activity::Boundaries
        } else {
            self.inner.activity()
        }
    }

    fn on_period(&mut self, ctx: &mut Ctx) -> Result<()> {
        let from = ctx.mem.ops.len();
        if self.g.per_phase && !self.by_markers {
            self.transition(ctx)?;
        } else {
            self.inner.on_period(ctx)?;
        }
        self.follow_moves(&ctx.mem.ops[from..]);
        Ok(())
    }

    fn on_event(&mut self, ev: &Event, ctx: &mut Ctx) -> Result<()> {
        // an allocation call as the runtime counts them (docs/guidance.md, "Phase markers")
        let call = self.by_markers
            && match &ev.kind {
                EventKind::Realloc { .. } => true,
                EventKind::Alloc { func, .. } => *func != AllocFn::Mmap,
                _ => false,
            };
        if call {
            self.marker_reached(2 * self.calls, ctx)?;
        }
        match &ev.kind {
            EventKind::Site { site, frames, keys } => {
                let s = *site as usize;
                if self.site_class.len() <= s {
                    self.site_class.resize(s + 1, UNMATCHED);
                }
                self.site_class[s] = self.g.arena_of(&self.index, *site, frames, keys)?.unwrap_or(UNMATCHED);
                if self.site_frames.len() <= s {
                    self.site_frames.resize(s + 1, Vec::new());
                }
                // shown by key where a frame names no function (a stripped program)
                self.site_frames[s] = crate::sitekey::site_labels(frames, keys).into_iter().take(self.g.key_frames).collect();
            }
            EventKind::Alloc { addr, size, site, .. } => self.alloc(*addr, *size, *site),
            EventKind::Free { addr } => self.free(*addr),
            EventKind::Realloc { old_addr, addr, size, site } => {
                self.free(*old_addr);
                self.alloc(*addr, *size, *site);
            }
            EventKind::Marker { .. } => {}
        }
        if call {
            self.marker_reached(2 * self.calls + 1, ctx)?;
            self.calls += 1;
        }
        if self.has_inner && self.inner.needs().events {
            let from = ctx.mem.ops.len();
            self.inner.on_event(ev, ctx)?;
            self.follow_moves(&ctx.mem.ops[from..]);
        }
        Ok(())
    }

    fn records(&self, src: Box<dyn RecordSource>) -> Result<Box<dyn RecordSource>> {
        if self.layout == Layout::Trace {
            return Ok(src);
        }
        // one classification rule for the policy and the layout: the guidance's
        let (g, index) = (self.g.clone(), self.index.clone());
        let n = self.arena_pages.len() as u32;
        let site_range: SiteRange = Arc::new(move |kind: &EventKind| {
            Ok(match kind {
                // an error here is reported by on_event, which sees the same record
                EventKind::Site { site, frames, keys } => Some((*site, g.arena_of(&index, *site, frames, keys).ok().flatten().map(u32::from).unwrap_or(n))),
                _ => None,
            })
        });
        Ok(Box::new(LayoutSource::new(src, n + 1, site_range, self.layout_out.clone())?))
    }

    fn compat(&self) -> super::Compat {
        self.inner.compat()
    }

    fn input_warnings(&self, digest: Option<&str>, ran: &super::RunExtent) -> Vec<String> {
        let mut w = self.g.schedule_warnings(digest, ran);
        if self.has_inner {
            w.extend(self.inner.input_warnings(digest, ran));
        }
        w
    }

    fn report(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.stats).unwrap_or_default();
        let n = self.arena_pages.len();
        let by_class: BTreeMap<String, u64> = self
            .class_pages
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| {
                let name = match i {
                    i if i == n => "unmatched".to_string(),
                    i if i == n + 1 => "non-heap".to_string(),
                    a => format!("arena {a}"),
                };
                (name, c)
            })
            .collect();
        v["pages_by_class"] = serde_json::json!(by_class);
        v["mode"] = serde_json::json!(if self.g.per_phase { "per-phase" } else { "static" });
        if self.g.per_phase {
            v["switch"] = serde_json::json!(if self.by_markers { "markers" } else { "schedule" });
        }
        v["arenas"] = serde_json::json!(self.g.arena_tiers.len());
        v["layout"] = serde_json::json!(match self.layout {
            Layout::Arenas => "arenas",
            Layout::Trace => "trace",
        });
        if let Some(ls) = self.layout_out.lock().unwrap().as_ref() {
            v["layout_model"] = serde_json::json!(ls);
        }
        // per class, in the platform's tier order: what the runtime reports for its arenas
        let class_name = |i: usize| match i {
            i if i == n => "unmatched".to_string(),
            i if i == n + 1 => "non-heap".to_string(),
            a => format!("arena {a}"),
        };
        let mut by_class = serde_json::Map::new();
        for (i, u) in self.class_use.iter().enumerate() {
            let mut c = serde_json::json!({ "pages_by_tier_end": u.pages });
            if i != n + 1 {
                c["allocations"] = serde_json::json!(u.allocations);
                c["allocated_bytes"] = serde_json::json!(u.allocated_bytes);
                c["peak_live_bytes"] = serde_json::json!(u.peak_live_bytes);
                c["pages_by_tier_at_peak"] = serde_json::json!(u.at_peak.as_ref().unwrap_or(&u.pages));
            }
            by_class.insert(class_name(i), c);
        }
        v["by_class"] = serde_json::Value::Object(by_class);
        let by_site: Vec<serde_json::Value> = self
            .site_pages
            .iter()
            .enumerate()
            .filter(|(_, p)| p.iter().any(|&x| x > 0))
            .map(|(s, p)| {
                let class = self.site_class.get(s).copied().unwrap_or(UNMATCHED);
                serde_json::json!({
                    "site": s,
                    "frames": self.site_frames.get(s).cloned().unwrap_or_default(),
                    "class": class_name(self.class_slot(class)),
                    "pages_by_tier_end": p,
                })
            })
            .collect();
        v["by_site"] = serde_json::json!(by_site);
        if self.has_inner {
            v["then"] = self.inner.report();
        }
        v
    }
}

impl<P: Policy> Guided<P> {
    fn alloc(&mut self, addr: u64, size: u64, site: u32) {
        self.stats.allocations += 1;
        let class = self.site_class.get(site as usize).copied().unwrap_or(UNMATCHED);
        if class == UNMATCHED {
            self.stats.allocations_unmatched += 1;
        }
        let slot = self.class_slot(class);
        self.class_use[slot].allocations += 1;
        self.class_use[slot].allocated_bytes += size;
        self.live_change(class, size, 0);
        if size > 0 {
            self.live.insert(addr, (addr.saturating_add(size), class, site));
        }
    }

    fn free(&mut self, addr: u64) {
        if let Some((end, class, _)) = self.live.remove(&addr) {
            self.live_change(class, 0, end - addr);
        }
    }
}

// ------------------------------------------------------------------------ registration

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "guidance", ty: ParamType::Text, unit: "path", default: "", source: "tierkit (docs/guidance.md)", help: "the guidance file written by 'tierkit guide' (required)" },
    ParamSpec {
        name: "mode",
        ty: ParamType::Choice { options: &["file", "static", "per-phase"] },
        unit: "",
        default: "file",
        source: "000 §3.2",
        help: "static arenas or per-phase arenas; 'file' takes the guidance's own mode (the other one is an error: make the guidance with or without --per-phase)",
    },
    ParamSpec {
        name: "switch",
        ty: ParamType::Choice { options: &["schedule", "markers"] },
        unit: "",
        default: "schedule",
        source: "000 §3.2 (phase changes detected exactly); the runtime's phase markers (docs/guidance.md)",
        help: "per-phase guidance: change phase at the schedule's slice boundaries (the profile's phases, exactly), or at the guidance's phase markers, allocation calls, as a real run under tierkit run does (docs/guidance.md, \"Phase markers\")",
    },
    ParamSpec {
        name: "unmatched",
        ty: ParamType::Choice { options: &["first-touch", "slow", "fast", "file"] },
        unit: "",
        default: "first-touch",
        source: "tierkit-alloc's runtime (it serves them from jemalloc's own arenas, which the kernel places by first touch)",
        help: "where allocations from sites the guidance does not list go, first touch as under the runtime; 'slow' (or its old name 'file') is the guidance's last tier, 000 §6.2's place for cold data",
    },
    ParamSpec {
        name: "nonheap",
        ty: ParamType::Choice { options: &["first-touch", "fast", "slow"] },
        unit: "",
        default: "first-touch",
        source: "002 §V-C (numactl -p prefers the upper tier for non-heap data)",
        help: "where pages no allocation ever held (stack, globals, mapped files) go; a freed block's memory stays its arena's",
    },
    ParamSpec {
        name: "layout",
        ty: ParamType::Choice { options: &["arenas", "trace"] },
        unit: "",
        default: "arenas",
        source: "002 §IV-B (one jemalloc arena per tier), docs/guidance.md",
        help: "arenas: each arena gets its own page-aligned address range and each allocation a place in it as an arena allocator would give (docs/guidance.md); trace: the addresses the traced allocator chose, a shared page following the allocation with the most bytes on it",
    },
    ParamSpec {
        name: "strategy",
        ty: ParamType::Text,
        unit: "",
        default: "",
        source: "000 §3.1, 002 §III-A",
        help: "instead of guidance=: knapsack, hotset or thermos over a profile of the simulated trace (or of compare --guide-from's), made by the Python front end",
    },
    ParamSpec { name: "capacity", ty: ParamType::Text, unit: "fraction or bytes", default: "", source: "000 §3.1 (a fraction of the footprint D)", help: "with strategy=: the guidance's fast-tier capacity; default the run's --fast-capacity fraction, else 0.125" },
    ParamSpec { name: "context", ty: ParamType::Text, unit: "frames", default: "", source: "002 §V-C (four layers of context)", help: "with strategy=: call-path depth of the site keys in physical frames (0: the allocation's call site alone); default every frame the trace recorded" },
    ParamSpec { name: "phases", ty: ParamType::Text, unit: "phases", default: "", source: "000 §6.3 (k = 8 was best)", help: "with strategy= and mode=per-phase: at most this many phases (default 8)" },
    ParamSpec { name: "slice", ty: ParamType::Text, unit: "insn or accesses", default: "", source: "tierkit", help: "with strategy=: slice length when the trace has no slice markers (e.g. 100M-insn); default 64 equal slices" },
    ParamSpec {
        name: "then",
        ty: ParamType::Text,
        unit: "",
        default: "",
        source: "tierkit",
        help: "a dynamic policy that migrates pages after guided placement (otf, otf-adaptive, otf-reverse, hma-epoch, fthp); then.KEY=VALUE sets its parameters",
    },
];

fn build(p: &Params) -> Result<Built> {
    let path = p.text("guidance");
    if !p.text("strategy").is_empty() {
        return Err(Error::config(
            "guided:strategy",
            "strategy= is made into guidance by tierkit's Python front end (tierkit simulate/compare, tierkit.run); here give guidance=FILE",
        ));
    }
    if path.is_empty() {
        return Err(Error::config("guided:guidance", "missing: give the guidance file, guided:guidance=FILE (see 'tierkit guide')"));
    }
    let g = Guidance::read(path)?;
    match (p.text("mode"), g.per_phase) {
        ("static", true) => {
            return Err(Error::config(
                "guided:mode",
                format!("{path} is per-phase guidance: use mode=per-phase, or make static guidance ('tierkit guide' without --per-phase)"),
            ))
        }
        ("per-phase", false) => {
            return Err(Error::config("guided:mode", format!("{path} is static guidance: make per-phase guidance with 'tierkit guide --per-phase'")))
        }
        _ => {}
    }
    let by_markers = p.text("switch") == "markers";
    if by_markers {
        if !g.per_phase {
            return Err(Error::config("guided:switch", format!("{path} is static guidance: switch=markers is for per-phase guidance")));
        }
        if g.markers.is_none() {
            return Err(Error::config(
                "guided:switch",
                format!("{path} has no phase markers (made before them): make it again with 'tierkit guide --per-phase'"),
            ));
        }
    }
    let unmatched = rule("guided:unmatched", p.text("unmatched"))?;
    let nonheap = rule("guided:nonheap", p.text("nonheap"))?;
    let layout = if p.text("layout") == "trace" { Layout::Trace } else { Layout::Arenas };
    let then = p.text("then");
    let args = p.then_args();
    if then.is_empty() {
        if let Some((k, _)) = args.first() {
            return Err(Error::config(format!("guided:then.{k}"), "given without then=POLICY"));
        }
        let mut gd = Guided::new(g, Stay, false, unmatched, nonheap, layout);
        gd.by_markers = by_markers;
        return Ok(Built::from(gd));
    }
    if g.per_phase {
        return Err(Error::config("guided:then", "per-phase arenas already move pages at phase changes: then= combines with static guidance only"));
    }
    let spec = PolicySpec { name: then.to_string(), args };
    let info = super::lookup(then).map_err(|_| Error::config("guided:then", format!("unknown policy '{then}'")))?;
    Ok(match then {
        "otf" | "otf-adaptive" | "otf-reverse" => Built::from(Guided::new(g, otf::from_policy_spec(&spec)?, true, unmatched, nonheap, layout)),
        "hma-epoch" => Built::from(Guided::new(g, epoch_os::hma(&Params::parse(info.name, info.params, &spec)?)?, true, unmatched, nonheap, layout)),
        "fthp" => Built::from(Guided::new(g, epoch_os::fthp(&Params::parse(info.name, info.params, &spec)?)?, true, unmatched, nonheap, layout)),
        other => {
            return Err(Error::config(
                "guided:then",
                format!("'{other}' cannot follow guided placement (one of otf, otf-adaptive, otf-reverse, hma-epoch, fthp)"),
            ));
        }
    })
}

pub static GUIDED: PolicyInfo = PolicyInfo {
    name: "guided",
    summary: "allocation-site guidance: each allocation joins its site's arena, whose pages go to the arena's tier on first touch (overflowing to slower tiers); per-phase arenas change tier at phase transitions; then=POLICY adds migration",
    source: "000 §3.2 (static and per-phase arenas), 002 §III-B and §IV-B (static arenas with MPOL_PREFERRED)",
    deploy: super::Deploy::Allocator,
    params: PARAMS,
    build,
};
