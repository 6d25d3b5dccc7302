//! The runtime behind the exported malloc family: initialisation from the environment, the
//! per-return-address decision cache, the deeper walk where the guidance needs it, guided and
//! plain allocation, counters, the exit report and the site log.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use libc::{c_int, c_void};
use serde_json::{json, Value};
use tikv_jemalloc_sys as je;

use crate::arena::{self, MAX_ARENAS};
use crate::guidance::{Decision, Guidance};
use crate::keys;
use crate::unwind::{self, Caller};

/// Counter shards (a thread counts in the shard its stack address picks), at most: fewer where
/// the guidance's trie is so large that 16 copies of its counters would pass COUNTERS_MAX.
const SHARDS: usize = 16;
const COUNTERS_MAX: usize = 1 << 22;

pub struct Runtime {
    g: Option<Guidance>,
    /// Guided arenas exist (the guidance was read and its arenas created).
    guided: bool,
    guidance_path: Option<String>,
    report_path: Option<String>,
    count: bool,
    log: Option<(String, usize)>,
    counters: Vec<AtomicU64>,
    stride: usize,
    /// Shards of `counters` (a power of two, 1 to SHARDS).
    shards: usize,
    warnings: Vec<String>,
    errors: Vec<String>,
    pid: i32,
    tier_nodes: Vec<Option<i32>>,
    tcache_explicit: bool,
    /// TIERKIT_ALLOC_SAMPLE_MS: a thread queries every arena's pages per node this often.
    sample_ms: u64,
}

static RT: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not started, 1: initialising, 2: done.
static STATE: AtomicU8 = AtomicU8::new(0);
static BEFORE_READY: AtomicU64 = AtomicU64::new(0);
static UNWINDS: AtomicU64 = AtomicU64::new(0);
static UNWIND_MISSES: AtomicU64 = AtomicU64::new(0);
/// Walks done by the cached-CFI walk (crate::unwind), walks libgcc did, and, under
/// TIERKIT_ALLOC_CHECK_UNWIND, walks checked against libgcc's and those whose frames differ.
static UNWINDS_FAST: AtomicU64 = AtomicU64::new(0);
static UNWINDS_LIBGCC: AtomicU64 = AtomicU64::new(0);
static UNWINDS_CHECKED: AtomicU64 = AtomicU64::new(0);
static UNWIND_MISMATCHES: AtomicU64 = AtomicU64::new(0);
static CHECK_UNWIND: AtomicBool = AtomicBool::new(false);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);
static CACHE_FULL: AtomicU64 = AtomicU64::new(0);
static REENTERED: AtomicU64 = AtomicU64::new(0);
static DISTINCT_RA: AtomicU64 = AtomicU64::new(0);
static TCACHES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while this thread computes a key or unwinds: an allocation made meanwhile (by the
    /// unwinder, the loader) is served plain.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// This thread's explicit jemalloc tcache per guided arena: 0 none yet, 1 none (use
    /// MALLOCX_TCACHE_NONE), v >= 2: tcache v - 2.
    static TC: [Cell<u32>; MAX_ARENAS] = const { [const { Cell::new(0) }; MAX_ARENAS] };
}

// ---- lock-free return address -> value tables --------------------------------------------

const SLOTS: usize = 1 << 16;
const PROBE: usize = 32;

struct Slot {
    key: AtomicUsize,
    val: AtomicU64,
}

struct Table([Slot; SLOTS]);

impl Table {
    const fn new() -> Table {
        Table([const { Slot { key: AtomicUsize::new(0), val: AtomicU64::new(0) } }; SLOTS])
    }
    #[inline(always)]
    fn idx(k: usize) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 16)) & (SLOTS - 1)
    }
    /// The value for `k`, 0 if none (yet).
    #[inline(always)]
    fn get(&self, k: usize) -> u64 {
        let mut i = Self::idx(k);
        for _ in 0..PROBE {
            let s = &self.0[i];
            let kk = s.key.load(Acquire);
            if kk == k {
                return s.val.load(Acquire);
            }
            if kk == 0 {
                return 0;
            }
            i = (i + 1) & (SLOTS - 1);
        }
        0
    }
    fn put(&self, k: usize, v: u64) {
        let mut i = Self::idx(k);
        for _ in 0..PROBE {
            let s = &self.0[i];
            match s.key.compare_exchange(0, k, AcqRel, Acquire) {
                Ok(_) => {
                    s.val.store(v, Release);
                    return;
                }
                Err(kk) if kk == k => {
                    s.val.store(v, Release);
                    return;
                }
                Err(_) => i = (i + 1) & (SLOTS - 1),
            }
        }
        CACHE_FULL.fetch_add(1, Relaxed);
    }
}

/// Return address of an allocation call -> its decision (`enc`).
static DEC: Table = Table::new();
/// Return address of a deeper frame -> 1 (not a frame of the guidance) or frame id + 2.
static FRM: Table = Table::new();
/// Return address -> its call-frame rule for the fast walk (crate::unwind).
static CFI: Table = Table::new();
/// (trie node, return address of a deeper frame) -> the step's outcome (`enc`: DEEPER to the
/// next node, ARENA decided, UNMATCHED no such child).
static STEP: Table = Table::new();

impl unwind::Rules for Table {
    fn get(&self, pc: usize) -> u64 {
        Table::get(self, pc)
    }
    fn put(&self, pc: usize, rule: u64) {
        Table::put(self, pc, rule)
    }
}

// decisions: kind in the low 2 bits, the arena in bits 2..10, the trie node from bit 10
const UNMATCHED: u64 = 1;
const ARENA: u64 = 2;
const DEEPER: u64 = 3;
fn enc(kind: u64, arena: usize, node: u32) -> u64 {
    kind | ((arena as u64) << 2) | ((node as u64) << 10)
}

// ---- environment and initialisation ------------------------------------------------------

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn say(line: &str) {
    let s = format!("tierkit-alloc: {line}\n");
    // SAFETY: a plain write to stderr (no allocation through the program's malloc)
    unsafe { libc::write(2, s.as_ptr() as *const c_void, s.len()) };
}

fn parse_bytes(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1usize << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        't' | 'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

/// The nodes with memory, ascending (/sys/devices/system/node/has_memory, "0-1,3").
fn memory_nodes() -> Vec<i32> {
    let s = std::fs::read_to_string("/sys/devices/system/node/has_memory").unwrap_or_default();
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            out.extend(a..=b);
        }
    }
    out
}

pub fn ensure_init() {
    if STATE.compare_exchange(0, 1, AcqRel, Acquire).is_err() {
        return;
    }
    BUSY.with(|b| b.set(true));
    if let Some(rt) = build() {
        RT.store(Box::into_raw(Box::new(rt)), Release);
    }
    BUSY.with(|b| b.set(false));
    STATE.store(2, Release);
}

fn build() -> Option<Runtime> {
    let guidance_path = env("TIERKIT_GUIDANCE");
    let report_path = env("TIERKIT_ALLOC_REPORT");
    let log_path = env("TIERKIT_ALLOC_LOG");
    if guidance_path.is_none() && report_path.is_none() && log_path.is_none() {
        return None;
    }
    // jemalloc initialises (and registers its fork handlers) before ours
    // SAFETY: plain jemalloc calls
    unsafe { je::free(je::malloc(1)) };
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let g = guidance_path.as_ref().and_then(|p| {
        // a regular file within MAX_GUIDANCE_BYTES (checked on the opened file), or one line
        // and the program runs unguided: a bad file never delays or stops it
        match crate::guidance::load(std::path::Path::new(p)) {
            Ok(g) => Some(g),
            Err(e) => {
                let line = format!("error: {p}: {e}; the program runs with plain jemalloc");
                say(&line);
                errors.push(line);
                None
            }
        }
    });
    // tier -> node
    let n_tiers = g.as_ref().map_or(2, |g| g.tier_names.len());
    let mut tier_nodes: Vec<Option<i32>> = Vec::new();
    match env("TIERKIT_NODES") {
        Some(list) => {
            for (t, item) in list.split(',').enumerate().take(n_tiers) {
                let item = item.trim();
                match item.parse::<i32>() {
                    Ok(n) if arena::node_exists(n) => tier_nodes.push(Some(n)),
                    Ok(n) => {
                        warnings.push(format!("warning: TIERKIT_NODES: node {n} (tier {t}) does not exist; arenas of tier {t} are left unbound"));
                        tier_nodes.push(None)
                    }
                    Err(_) if item == "-" || item == "none" => tier_nodes.push(None),
                    Err(_) => {
                        warnings.push(format!("warning: TIERKIT_NODES: '{item}' (tier {t}) is not a node number; arenas of tier {t} are left unbound"));
                        tier_nodes.push(None)
                    }
                }
            }
            if tier_nodes.len() < n_tiers {
                warnings.push(format!("warning: TIERKIT_NODES names {} of {n_tiers} tiers; the others' arenas are left unbound", tier_nodes.len()));
                tier_nodes.resize(n_tiers, None);
            }
        }
        None => {
            // tier 0 on the first node with memory, the others on the following ones (the
            // last node takes the remaining tiers)
            let nodes = memory_nodes();
            if nodes.is_empty() {
                warnings.push("warning: no NUMA node found (/sys/devices/system/node/has_memory); arenas are left unbound".into());
            }
            tier_nodes = (0..n_tiers).map(|t| nodes.get(t.min(nodes.len().saturating_sub(1))).copied()).collect();
        }
    }
    let mut guided = false;
    if let Some(g) = &g {
        if g.mode == "per-phase" && g.phases > 1 {
            if g.markers.is_empty() {
                warnings.push(format!("warning: per-phase guidance without phase markers a run can see (made before markers existed, or no phase boundary has an allocation call near it): the arenas stay in their phase-0 tiers ({} phases not switched)", g.phases));
            } else if g.unmarked > 0 {
                warnings.push(format!("warning: per-phase guidance: {} of {} phase boundaries have no allocation call near them: the run stays in the phase before each until the next marker", g.unmarked, g.unmarked + g.markers.len()));
            }
        }
        if g.arena_tiers.len() > MAX_ARENAS {
            warnings.push(format!("warning: {} arenas: sites of arenas past {MAX_ARENAS} are served unbound", g.arena_tiers.len()));
        }
        let nodes: Vec<Option<i32>> = g.arena_tiers.iter().map(|&t| tier_nodes.get(t as usize).copied().flatten()).collect();
        let per = env("TIERKIT_ALLOC_RESERVE").and_then(|s| parse_bytes(&s)).unwrap_or(64 << 30);
        match arena::create(&nodes, per) {
            Ok(w) => {
                warnings.extend(w);
                guided = true;
            }
            Err(e) => warnings.push(format!("warning: {e}; the program runs with plain jemalloc")),
        }
    }
    CHECK_UNWIND.store(env("TIERKIT_ALLOC_CHECK_UNWIND").is_some_and(|v| v != "0"), Relaxed);
    if let Some(n) = env("TIERKIT_ALLOC_DEBUG_FAIL_EXTENT").and_then(|s| s.parse::<u64>().ok()) {
        arena::FAIL_EVERY.store(n, Relaxed);
    }
    for w in &warnings {
        say(w);
    }
    let n_nodes = g.as_ref().map_or(1, |g| g.nodes.len());
    let stride = (2 * n_nodes).div_ceil(8) * 8;
    let mut shards = SHARDS;
    while shards > 1 && shards * stride > COUNTERS_MAX {
        shards /= 2;
    }
    let counters = if report_path.is_some() { (0..shards * stride).map(|_| AtomicU64::new(0)).collect() } else { Vec::new() };
    let log = log_path.map(|p| (p, env("TIERKIT_ALLOC_LOG_DEPTH").and_then(|d| d.parse::<usize>().ok()).unwrap_or(4).clamp(1, 64)));
    // SAFETY: handlers are plain functions; registered after jemalloc's so that ours run
    // first before a fork and last after it
    unsafe {
        libc::pthread_atfork(Some(prefork), Some(postfork), Some(postfork));
        libc::atexit(at_exit);
        libc::pthread_key_create(std::ptr::addr_of_mut!(TC_KEY), Some(thread_exit));
    }
    Some(Runtime {
        g,
        guided,
        guidance_path,
        count: report_path.is_some(),
        report_path,
        log,
        counters,
        stride,
        shards,
        warnings,
        errors,
        // SAFETY: no arguments
        pid: unsafe { libc::getpid() },
        tier_nodes,
        tcache_explicit: env("TIERKIT_ALLOC_TCACHE").as_deref() != Some("none"),
        sample_ms: if guided { env("TIERKIT_ALLOC_SAMPLE_MS").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) } else { 0 },
    })
}

// ---- sampling the arenas' pages over the run (TIERKIT_ALLOC_SAMPLE_MS) ----------------------
//
// The exit report's pages_by_node is the end of the run; a program that frees memory before
// it ends (jemalloc purges it back to the kernel after its decay time) had more at some point.
// The sampler keeps, per arena, the sample with the most pages present (the arena's peak) and a
// series of every sample (halved in resolution when it gets long), without touching the
// allocation path: it is a thread of its own that queries with move_pages.

const MAX_SAMPLES: usize = 2048;

/// Pages present per node, of one arena.
type NodePages = Vec<(i32, u64)>;

#[derive(Default)]
struct Samples {
    /// (ms since the runtime started, pages per node of each arena)
    series: Vec<(u64, Vec<NodePages>)>,
    /// Every how many samples one is kept in `series`.
    keep_every: u64,
    taken: u64,
    /// Per arena: (ms, pages per node) of the sample with the most pages present.
    peak: Vec<Option<(u64, NodePages)>>,
    /// Per deciding trie node: the same, of its large blocks' pages.
    block_peak: HashMap<u32, (u64, NodePages)>,
}

static SAMPLES: std::sync::Mutex<Option<Samples>> = std::sync::Mutex::new(None);
static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

fn sample_once(n_arenas: usize) {
    let t = T0.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64;
    // one query per arena page; the large blocks' pages are read off the same answers
    let answers: Vec<(usize, Vec<i32>)> = (0..n_arenas)
        .map(|a| {
            let (start, used) = arena::arena_range(a);
            arena::page_nodes(start, used)
        })
        .collect();
    let count = |st: &[i32]| {
        let mut m = std::collections::BTreeMap::<i32, u64>::new();
        for &s in st.iter().filter(|&&s| s >= 0) {
            *m.entry(s).or_insert(0) += 1;
        }
        m
    };
    let now: Vec<NodePages> = answers.iter().map(|(_, st)| count(st).into_iter().collect()).collect();
    let mut by_dec: HashMap<u32, std::collections::BTreeMap<i32, u64>> = HashMap::new();
    let pg = 1usize << PAGE_SHIFT.load(Relaxed);
    for (addr, len, d) in blocks() {
        let e = by_dec.entry(d).or_default();
        let Some((base, st)) = arena::arena_of(addr).and_then(|a| answers.get(a)) else { continue };
        // the block's pages (whole), those the arena's query covered (a block served after
        // the query may reach past it)
        let first = ((addr & !(pg - 1)).saturating_sub(*base)) / pg;
        let end = ((addr + len).div_ceil(pg) * pg).saturating_sub(*base) / pg;
        for (n, c) in count(&st[first.min(st.len())..end.min(st.len())]) {
            *e.entry(n).or_insert(0) += c;
        }
    }
    let Ok(mut g) = SAMPLES.lock() else { return };
    let s = g.get_or_insert_with(|| Samples { keep_every: 1, ..Default::default() });
    s.peak.resize(n_arenas, None);
    for (d, p) in by_dec {
        let tot: u64 = p.values().sum();
        let best = s.block_peak.get(&d).map_or(0, |(_, q)| q.iter().map(|x| x.1).sum::<u64>());
        if !s.block_peak.contains_key(&d) || tot > best {
            s.block_peak.insert(d, (t, p.into_iter().collect()));
        }
    }
    for (a, p) in now.iter().enumerate() {
        let tot: u64 = p.iter().map(|x| x.1).sum();
        let best = s.peak[a].as_ref().map_or(0, |(_, q)| q.iter().map(|x| x.1).sum::<u64>());
        if s.peak[a].is_none() || tot > best {
            s.peak[a] = Some((t, p.clone()));
        }
    }
    if s.taken.is_multiple_of(s.keep_every) {
        // in time order: the sampler thread and the sample at exit may take theirs at once,
        // the later one's queries finishing first
        let at = s.series.partition_point(|x| x.0 <= t);
        s.series.insert(at, (t, now));
        if s.series.len() >= MAX_SAMPLES {
            // keep every other sample from now on, and of those taken so far
            s.keep_every *= 2;
            let mut i = 0;
            s.series.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
    }
    s.taken += 1;
}

/// Starts the sampler thread (from the library's constructor, once the runtime is up).
pub fn start_sampler() {
    let r = RT.load(Acquire);
    if r.is_null() {
        return;
    }
    // SAFETY: the runtime lives until the process ends
    let r = unsafe { &*r };
    if r.sample_ms == 0 || !r.guided {
        return;
    }
    T0.get_or_init(std::time::Instant::now);
    // per-site pages: the large blocks' pages are read off the arenas' own query (no second
    // query); TIERKIT_ALLOC_SAMPLE_BLOCKS=0 turns the tracking off
    TRACK_BLOCKS.store(env("TIERKIT_ALLOC_SAMPLE_BLOCKS").is_none_or(|v| v != "0"), Release);
    PAGE_SHIFT.store(
        // SAFETY: no arguments
        (unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize).trailing_zeros() as usize,
        Relaxed,
    );
    let (ms, n) = (r.sample_ms, arena::N_ARENAS.load(Relaxed));
    // Creating the thread allocates through this library (glibc's thread descriptor and TLS,
    // its thread-local destructors): those allocations are the library's, not the program's,
    // and are taken out of the counts. The constructor runs before the program's main, with
    // no other thread allocating, so the counts' difference is exactly the thread's.
    let before = r.unmatched_counts();
    static READY: AtomicBool = AtomicBool::new(false);
    let spawned = std::thread::Builder::new().name("tierkit-sample".into()).spawn(move || {
        sample_once(n);
        READY.store(true, Release);
        loop {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            sample_once(n);
        }
    });
    if spawned.is_ok() {
        while !READY.load(Acquire) {
            std::thread::yield_now();
        }
    }
    let after = r.unmatched_counts();
    SAMPLER_ALLOCS.store(after.0 - before.0, Relaxed);
    SAMPLER_BYTES.store(after.1 - before.1, Relaxed);
}

static SAMPLER_ALLOCS: AtomicU64 = AtomicU64::new(0);
static SAMPLER_BYTES: AtomicU64 = AtomicU64::new(0);

impl Runtime {
    /// Unmatched allocations and bytes counted so far.
    fn unmatched_counts(&self) -> (u64, u64) {
        if !self.count {
            return (0, 0);
        }
        (0..self.shards).fold((0, 0), |(c, b), s| (c + self.counters[s * self.stride].load(Relaxed), b + self.counters[s * self.stride + 1].load(Relaxed)))
    }
}

// ---- the site log (TIERKIT_ALLOC_LOG) ------------------------------------------------------

static LOG_LOCK: AtomicBool = AtomicBool::new(false);
static mut LOG: Option<HashMap<Vec<usize>, (u64, u64)>> = None;

// ---- large blocks by site (with TIERKIT_ALLOC_SAMPLE_MS) -------------------------------------
//
// An arena holds the blocks of several sites; a site's own pages are those of its large
// blocks (small ones share jemalloc's slabs with other sites). With sampling on, blocks of at
// least BLOCK_MIN bytes are kept by address with the trie node that decided them (the
// report's decisions), under LOG_LOCK, and the sampler queries their pages per node.

/// Blocks of at least this many bytes are tracked (jemalloc serves them from whole pages).
const BLOCK_MIN: usize = 64 << 10;
static TRACK_BLOCKS: AtomicBool = AtomicBool::new(false);
static PAGE_SHIFT: AtomicUsize = AtomicUsize::new(12);
static mut BLOCKS: Option<std::collections::BTreeMap<usize, (usize, u32)>> = None;

// the block tracking's work is out of line: only sampled runs do it, and inlined into the
// allocation and free paths it cost every guided malloc/free pair about 8 ns (bench/README.md)
#[cold]
#[inline(never)]
fn track(p: *mut c_void, size: usize, node: u32) {
    lock();
    // SAFETY: under LOG_LOCK
    unsafe { (*std::ptr::addr_of_mut!(BLOCKS)).get_or_insert_with(Default::default).insert(p as usize, (size, node)) };
    unlock();
}

#[inline(always)]
unsafe fn untrack(p: *mut c_void) {
    if TRACK_BLOCKS.load(Relaxed) {
        untrack_block(p);
    }
}

#[cold]
#[inline(never)]
unsafe fn untrack_block(p: *mut c_void) {
    if !p.is_null() && je::malloc_usable_size(p) >= BLOCK_MIN {
        lock();
        // SAFETY: under LOG_LOCK
        if let Some(m) = (*std::ptr::addr_of_mut!(BLOCKS)).as_mut() {
            m.remove(&(p as usize));
        }
        unlock();
    }
}

/// The tracked blocks now: (address, bytes, deciding node).
fn blocks() -> Vec<(usize, usize, u32)> {
    lock();
    // SAFETY: under LOG_LOCK
    let v = unsafe { (*std::ptr::addr_of!(BLOCKS)).as_ref().map(|m| m.iter().map(|(&a, &(n, d))| (a, n, d)).collect()).unwrap_or_default() };
    unlock();
    v
}

fn lock() {
    while LOG_LOCK.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        std::hint::spin_loop();
    }
}
fn unlock() {
    LOG_LOCK.store(false, Release);
}
extern "C" fn prefork() {
    lock();
}
extern "C" fn postfork() {
    unlock();
}

// ---- unwinding -----------------------------------------------------------------------------

#[allow(non_camel_case_types)]
type _Unwind_Context = c_void;
extern "C" {
    fn _Unwind_Backtrace(cb: extern "C" fn(*mut _Unwind_Context, *mut c_void) -> c_int, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut _Unwind_Context) -> usize;
}

const MAX_FRAMES: usize = 96;
struct Bt {
    buf: [usize; MAX_FRAMES],
    n: usize,
    ra: usize,
    at: Option<usize>,
    want: usize,
    /// When classifying: the guidance, the trie node reached, and the decision once made (the
    /// unwinding stops there, no deeper than the rule needs).
    g: *const Guidance,
    node: u32,
    out: Option<(u32, Option<usize>)>,
}

/// One frame of the deeper walk from trie node `n`: Ok(next node) while undecided, Err(the
/// decision) once made. Cached per (node, return address) in STEP, so that a walk step is one
/// table lookup (the trie's own maps hash with SipHash).
fn step_frame(g: &Guidance, n: u32, fra: usize) -> Result<u32, (u32, Option<usize>)> {
    // the key is exact: user-space code addresses stay below 2^47; larger tries skip the cache
    let key = if (n as usize) < (1 << 16) && fra < (1 << 47) && fra != 0 { fra | ((n as usize) << 47) } else { 0 };
    if key != 0 {
        let v = STEP.get(key);
        if v != 0 {
            let c = (v >> 10) as u32;
            return match v & 3 {
                DEEPER => Ok(c),
                ARENA => Err((c, Some(((v >> 2) & 0xff) as usize))),
                _ => Err((0, None)),
            };
        }
    }
    let r = step_frame_uncached(g, n, fra);
    if key != 0 {
        STEP.put(
            key,
            match r {
                Ok(c) => enc(DEEPER, 0, c),
                Err((c, Some(a))) if a <= 0xff => enc(ARENA, a, c),
                Err((_, Some(_))) => return r,
                Err((_, None)) => UNMATCHED,
            },
        );
    }
    r
}

fn step_frame_uncached(g: &Guidance, n: u32, fra: usize) -> Result<u32, (u32, Option<usize>)> {
    let mut v = FRM.get(fra);
    if v == 0 {
        v = match keys::frame_key(fra).and_then(|k| g.frame_ids.get(k.as_str()).copied()) {
            Some(f) => f as u64 + 2,
            None => 1,
        };
        FRM.put(fra, v);
    }
    let fid = if v >= 2 { Some((v - 2) as u32) } else { None };
    let c = g.step(n, fid).ok_or((0, None))?;
    if let Some(Decision::Arena(a)) = g.nodes[c as usize].decision {
        return Err((c, Some(a as usize)));
    }
    Ok(c)
}

extern "C" fn bt_cb(ctx: *mut _Unwind_Context, arg: *mut c_void) -> c_int {
    // SAFETY: arg is the Bt of unwind_from
    let b = unsafe { &mut *(arg as *mut Bt) };
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if b.n >= MAX_FRAMES || ip == 0 {
        return 5;
    }
    b.buf[b.n] = ip;
    b.n += 1;
    if b.at.is_none() && ip == b.ra {
        b.at = Some(b.n - 1);
        return 0;
    }
    if b.at.is_some() && !b.g.is_null() {
        // SAFETY: the runtime's guidance, alive for the process
        let g = unsafe { &*b.g };
        match step_frame(g, b.node, ip) {
            Ok(c) => b.node = c,
            Err(d) => {
                b.out = Some(d);
                return 4;
            }
        }
    }
    match b.at {
        Some(a) if b.n - a >= b.want => 4, // _URC_NORMAL_STOP
        _ => 0,
    }
}

/// The return addresses of the stack from `ra` (the program's call into the allocator)
/// outwards, `want` at most, `ra` first. Empty when `ra` is not found on the stack.
#[inline(never)]
fn unwind_from(ra: usize, want: usize, g: Option<(&Guidance, u32)>) -> (Bt, usize) {
    let (gp, node) = g.map_or((std::ptr::null(), 0), |(g, n)| (g as *const Guidance, n));
    let mut b = Bt { buf: [0; MAX_FRAMES], n: 0, ra, at: None, want, g: gp, node, out: None };
    UNWINDS_LIBGCC.fetch_add(1, Relaxed);
    // SAFETY: the callback writes only into b
    unsafe { _Unwind_Backtrace(bt_cb, &mut b as *mut Bt as *mut c_void) };
    let at = match b.at {
        Some(a) => a,
        None => {
            UNWIND_MISSES.fetch_add(1, Relaxed);
            b.n
        }
    };
    (b, at)
}

/// TIERKIT_ALLOC_CHECK_UNWIND: the fast walk's frames against libgcc's, `depth` frames from
/// the call's own (libgcc's walk of a stack it cannot follow up to the call is not counted).
#[cold]
fn check_walk(ra: usize, caller: Caller, depth: usize) {
    let mut fast = vec![ra];
    let _ = unwind::walk(caller, &CFI, depth.saturating_sub(1), |ip| {
        fast.push(ip);
        true
    });
    let (b, at) = unwind_from(ra, depth, None);
    if b.at.is_none() {
        return;
    }
    UNWINDS_CHECKED.fetch_add(1, Relaxed);
    if b.buf[at..b.n] != fast[..] {
        UNWIND_MISMATCHES.fetch_add(1, Relaxed);
    }
}

// ---- classification ------------------------------------------------------------------------

impl Runtime {
    /// The guided arena of an allocation from return address `ra` (None: plain), and the trie
    /// node that decided (0: unmatched) for `counted`.
    #[inline(always)]
    fn target(&self, caller: Caller, size: usize) -> (u32, Option<usize>) {
        let ra = unwind::caller_ra(caller);
        if self.log.is_some() {
            self.log_site(ra, caller, size);
        }
        let (node, arena) = if self.guided { self.classify(ra, caller) } else { (0, None) };
        (node, arena.filter(|&a| a < MAX_ARENAS))
    }

    /// Counts a served allocation (failed ones are not counted).
    #[inline(always)]
    fn counted(&self, node: u32, size: usize, p: *mut c_void) -> *mut c_void {
        if self.count && !p.is_null() {
            let shard = {
                let x = 0u8;
                let sp = &x as *const u8 as usize;
                ((sp >> 16).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) & (self.shards - 1)
            };
            let i = shard * self.stride + 2 * node as usize;
            self.counters[i].fetch_add(1, Relaxed);
            self.counters[i + 1].fetch_add(size as u64, Relaxed);
        }
        if size >= BLOCK_MIN && !p.is_null() && TRACK_BLOCKS.load(Relaxed) {
            track(p, size, node);
        }
        p
    }

    /// (trie node that decided, 0 when unmatched; arena)
    #[inline(always)]
    fn classify(&self, ra: usize, caller: Caller) -> (u32, Option<usize>) {
        let mut d = DEC.get(ra);
        if d == 0 {
            d = self.first_frame(ra);
        }
        let node = (d >> 10) as u32;
        match d & 3 {
            ARENA => (node, Some(((d >> 2) & 0xff) as usize)),
            DEEPER => self.deeper(node, ra, caller),
            _ => (0, None),
        }
    }

    /// The decision of the innermost frame, computed once per distinct return address.
    #[cold]
    fn first_frame(&self, ra: usize) -> u64 {
        let g = self.g.as_ref().unwrap();
        if BUSY.with(|b| b.replace(true)) {
            REENTERED.fetch_add(1, Relaxed);
            return UNMATCHED;
        }
        let fid = keys::frame_key(ra).and_then(|k| g.frame_ids.get(k.as_str()).copied());
        BUSY.with(|b| b.set(false));
        let d = match g.step(0, fid) {
            None => UNMATCHED,
            Some(n) => match g.nodes[n as usize].decision {
                Some(Decision::Arena(a)) => enc(ARENA, a as usize, n),
                _ => enc(DEEPER, 0, n),
            },
        };
        DISTINCT_RA.fetch_add(1, Relaxed);
        DEC.put(ra, d);
        d
    }

    /// The rest of the walk from node `n`, reached by the innermost frame `ra`: unwinds.
    #[cold]
    #[inline(never)]
    fn deeper(&self, n: u32, ra: usize, caller: Caller) -> (u32, Option<usize>) {
        let g = self.g.as_ref().unwrap();
        if BUSY.with(|b| b.replace(true)) {
            REENTERED.fetch_add(1, Relaxed);
            return (0, None);
        }
        UNWINDS.fetch_add(1, Relaxed);
        // the walk steps the trie frame by frame and stops once decided (or at the context's
        // depth): the cached-CFI walk where every frame's rule allows it, libgcc's otherwise
        let (mut node, mut out) = (n, None);
        let fast = unwind::walk(caller, &CFI, g.context.saturating_sub(1), |ip| match step_frame(g, node, ip) {
            Ok(c) => {
                node = c;
                true
            }
            Err(d) => {
                out = Some(d);
                false
            }
        });
        let (out, n) = if fast.is_some() {
            UNWINDS_FAST.fetch_add(1, Relaxed);
            if CHECK_UNWIND.load(Relaxed) {
                check_walk(ra, caller, g.context);
            }
            (out, node)
        } else {
            let (b, _) = unwind_from(ra, g.context, Some((g, n)));
            (b.out, b.node)
        };
        BUSY.with(|b| b.set(false));
        // the stack ended (or the context did) while ambiguous: the exact site, if any
        out.unwrap_or_else(|| match g.at_end(n) {
            Some(a) => (n, Some(a as usize)),
            None => (0, None),
        })
    }

    #[cold]
    #[inline(never)]
    fn log_site(&self, ra: usize, caller: Caller, size: usize) {
        if BUSY.with(|b| b.replace(true)) {
            return;
        }
        let depth = self.log.as_ref().unwrap().1;
        UNWINDS.fetch_add(1, Relaxed);
        let mut key: Vec<usize> = vec![ra];
        if unwind::walk(caller, &CFI, depth.saturating_sub(1), |ip| {
            key.push(ip);
            true
        })
        .is_some()
        {
            UNWINDS_FAST.fetch_add(1, Relaxed);
            if CHECK_UNWIND.load(Relaxed) {
                check_walk(ra, caller, depth);
            }
        } else {
            let (b, at) = unwind_from(ra, depth, None);
            key.truncate(1);
            key.extend(b.buf[..b.n].iter().skip(at + 1).take(depth - 1));
        }
        lock();
        // SAFETY: under LOG_LOCK
        let m = unsafe { (*std::ptr::addr_of_mut!(LOG)).get_or_insert_with(HashMap::new) };
        let e = m.entry(key).or_insert((0, 0));
        e.0 += 1;
        e.1 += size as u64;
        unlock();
        BUSY.with(|b| b.set(false));
    }
}

// ---- allocation ------------------------------------------------------------------------------

static mut TC_KEY: libc::pthread_key_t = 0;

/// A thread's explicit tcaches are flushed and destroyed when it ends.
extern "C" fn thread_exit(_v: *mut c_void) {
    let _ = TC.try_with(|t| {
        for c in t.iter() {
            let v = c.replace(1);
            if v >= 2 {
                let mut ind = v - 2;
                // SAFETY: a tcache this thread created
                unsafe { je::mallctl(c"tcache.destroy".as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), &mut ind as *mut u32 as *mut c_void, 4) };
            }
        }
    });
}

/// Flags for an allocation or free in guided arena `a` on this thread: its own explicit tcache
/// (jemalloc's default tcache would mix arenas: a block freed from arena A could serve arena
/// B), or none.
#[inline(always)]
fn tcache_flag(a: usize, explicit: bool) -> c_int {
    if !explicit {
        return je::MALLOCX_TCACHE_NONE;
    }
    TC.try_with(|t| {
        let v = t[a].get();
        if v >= 2 {
            return je::MALLOCX_TCACHE((v - 2) as usize);
        }
        if v == 1 {
            return je::MALLOCX_TCACHE_NONE;
        }
        // jemalloc gives an explicit tcache the thread's internal arena, which it chooses (and
        // may have to create) first: when that fails (memory exhausted), tcache.create still
        // succeeds, with no arena, and destroying it at thread exit crashes (the same defect as
        // jemalloc/jemalloc#2247's). Reading thread.arena chooses and binds the thread's arenas
        // or says EAGAIN: then this thread goes without an explicit tcache.
        let mut cur: u32 = 0;
        let mut sz = 4usize;
        // SAFETY: out parameters
        if unsafe { je::mallctl(c"thread.arena".as_ptr(), &mut cur as *mut u32 as *mut c_void, &mut sz, std::ptr::null_mut(), 0) } != 0 {
            return je::MALLOCX_TCACHE_NONE;
        }
        let mut ind: u32 = 0;
        let mut sz = 4usize;
        // SAFETY: out parameters
        let r = unsafe { je::mallctl(c"tcache.create".as_ptr(), &mut ind as *mut u32 as *mut c_void, &mut sz, std::ptr::null_mut(), 0) };
        if r != 0 {
            t[a].set(1);
            return je::MALLOCX_TCACHE_NONE;
        }
        t[a].set(ind + 2);
        TCACHES.fetch_add(1, Relaxed);
        // SAFETY: the key was created at initialisation; a non-null value runs thread_exit
        unsafe { libc::pthread_setspecific(TC_KEY, std::ptr::dangling::<c_void>()) };
        je::MALLOCX_TCACHE(ind as usize)
    })
    .unwrap_or(je::MALLOCX_TCACHE_NONE)
}

fn set_enomem() {
    // SAFETY: this thread's errno
    unsafe { *libc::__errno_location() = libc::ENOMEM };
}

/// jemalloc's automatic arenas with the thread's default tcache: plain jemalloc.
#[inline(always)]
unsafe fn plain(size: usize, align: usize, zero: bool) -> *mut c_void {
    if align == 0 {
        // both set errno on failure; a tail call, as cheap as plain jemalloc
        return if zero { je::calloc(1, size) } else { je::malloc(size) };
    }
    let p = je::mallocx(size.max(1), je::MALLOCX_ALIGN(align));
    if p.is_null() {
        set_enomem();
    }
    p
}

#[inline(always)]
unsafe fn guided(rt: &Runtime, a: usize, size: usize, align: usize, zero: bool) -> *mut c_void {
    let mut flags = je::MALLOCX_ARENA(arena::JE_IND[a].load(Relaxed) as usize) | tcache_flag(a, rt.tcache_explicit);
    if align > 0 {
        flags |= je::MALLOCX_ALIGN(align);
    }
    if zero {
        flags |= je::MALLOCX_ZERO;
    }
    let p = je::mallocx(size.max(1), flags);
    if !p.is_null() {
        return p;
    }
    // the arena's memory is refused (mmap failed, its range is full): never fail an allocation
    // that plain jemalloc can serve
    FALLBACKS.fetch_add(1, Relaxed);
    plain(size, align, zero)
}

#[inline(always)]
unsafe fn alloc_at(caller: usize, size: usize, align: usize, zero: bool) -> *mut c_void {
    let r = RT.load(Acquire);
    if r.is_null() {
        // no guidance, no report, no log: plain jemalloc
        if STATE.load(Relaxed) == 2 {
            return plain(size, align, zero);
        }
        return cold_alloc(caller, size, align, zero);
    }
    let r = &*r;
    let call = phase_before();
    let (node, a) = r.target(caller, size);
    let p = match a {
        None => plain(size, align, zero),
        Some(a) => guided(r, a, size, align, zero),
    };
    phase_after(call);
    r.counted(node, size, p)
}

#[cold]
#[inline(never)]
unsafe fn cold_alloc(caller: usize, size: usize, align: usize, zero: bool) -> *mut c_void {
    match STATE.load(Acquire) {
        0 => {
            ensure_init();
            if !RT.load(Acquire).is_null() {
                return alloc_at(caller, size, align, zero);
            }
        }
        1 => {
            BEFORE_READY.fetch_add(1, Relaxed);
        }
        _ => {}
    }
    plain(size, align, zero)
}

#[inline(never)]
pub unsafe extern "C" fn tk_malloc(size: usize, caller: usize) -> *mut c_void {
    alloc_at(caller, size, 0, false)
}

pub unsafe extern "C" fn tk_calloc(n: usize, size: usize, caller: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(t) => alloc_at(caller, t, 0, true),
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

#[inline(always)]
pub unsafe fn tk_free(p: *mut c_void) {
    untrack(p);
    // NULL is in no guided range: jemalloc's free ignores it
    match arena::arena_of(p as usize) {
        None => je::free(p),
        Some(a) => {
            let explicit = {
                let r = RT.load(Relaxed);
                r.is_null() || (*r).tcache_explicit
            };
            je::dallocx(p, tcache_flag(a, explicit))
        }
    }
}

unsafe fn move_block(p: *mut c_void, size: usize, dst: Option<usize>) -> *mut c_void {
    let r = RT.load(Acquire);
    let q = match (dst, r.is_null()) {
        (Some(a), false) => guided(&*r, a, size, 0, false),
        _ => plain(size, 0, false),
    };
    if q.is_null() {
        return q;
    }
    std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, je::malloc_usable_size(p).min(size));
    tk_free(p);
    q
}

/// realloc: the new block goes to the arena of the realloc's own site (as the tracer's profile
/// counts it); a block that changes arena is copied.
pub unsafe extern "C" fn tk_realloc(p: *mut c_void, size: usize, caller: usize) -> *mut c_void {
    if p.is_null() {
        return alloc_at(caller, size, 0, false);
    }
    if size == 0 {
        // glibc: realloc(p, 0) frees p and returns NULL
        tk_free(p);
        return std::ptr::null_mut();
    }
    let src = arena::arena_of(p as usize);
    let r = RT.load(Acquire);
    if r.is_null() {
        return move_or_realloc(p, size, src, None);
    }
    // the block is tracked again, at its new place and size, by `counted`
    untrack(p);
    let call = phase_before();
    let (node, dst) = (*r).target(caller, size);
    let q = move_or_realloc(p, size, src, dst);
    phase_after(call);
    (*r).counted(node, size, q)
}

unsafe fn move_or_realloc(p: *mut c_void, size: usize, src: Option<usize>, dst: Option<usize>) -> *mut c_void {
    let r = RT.load(Acquire);
    match (src, dst) {
        (None, None) => {
            let q = je::realloc(p, size);
            if q.is_null() {
                set_enomem();
            }
            q
        }
        (Some(a), Some(b)) if a == b => {
            let q = je::rallocx(p, size, je::MALLOCX_ARENA(arena::JE_IND[a].load(Relaxed) as usize) | tcache_flag(a, r.is_null() || (*r).tcache_explicit));
            if !q.is_null() {
                return q;
            }
            FALLBACKS.fetch_add(1, Relaxed);
            move_block(p, size, None)
        }
        _ => move_block(p, size, dst),
    }
}

pub unsafe extern "C" fn tk_reallocarray(p: *mut c_void, n: usize, size: usize, caller: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(t) => tk_realloc(p, t, caller),
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

pub unsafe extern "C" fn tk_posix_memalign(out: *mut *mut c_void, align: usize, size: usize, caller: usize) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    let e = *libc::__errno_location();
    let p = alloc_at(caller, size, align, false);
    *libc::__errno_location() = e;
    if p.is_null() {
        return libc::ENOMEM;
    }
    *out = p;
    0
}

/// memalign and aligned_alloc: glibc rounds an alignment that is not a power of two up to one.
pub unsafe extern "C" fn tk_memalign(align: usize, size: usize, caller: usize) -> *mut c_void {
    match align.max(1).checked_next_power_of_two().filter(|a| *a <= 1 << 40) {
        Some(a) => alloc_at(caller, size, a, false),
        None => {
            *libc::__errno_location() = libc::EINVAL;
            std::ptr::null_mut()
        }
    }
}

fn page() -> usize {
    // SAFETY: no arguments
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

pub unsafe extern "C" fn tk_valloc(size: usize, caller: usize) -> *mut c_void {
    alloc_at(caller, size, page(), false)
}

pub unsafe extern "C" fn tk_pvalloc(size: usize, caller: usize) -> *mut c_void {
    let pg = page();
    match size.max(1).checked_add(pg - 1) {
        Some(s) => alloc_at(caller, s & !(pg - 1), pg, false),
        None => {
            set_enomem();
            std::ptr::null_mut()
        }
    }
}

// operator new: on failure the next definition (libstdc++'s) runs the new-handler loop and
// throws std::bad_alloc; the exception unwinds through these frames ("C-unwind")
unsafe fn new_failed(sym: &std::ffi::CStr, size: usize, align: Option<usize>) -> *mut c_void {
    let f = libc::dlsym(libc::RTLD_NEXT, sym.as_ptr());
    if f.is_null() {
        say("operator new: out of memory, and no C++ runtime to throw std::bad_alloc; aborting");
        libc::abort();
    }
    match align {
        None => std::mem::transmute::<*mut c_void, unsafe extern "C-unwind" fn(usize) -> *mut c_void>(f)(size),
        Some(a) => std::mem::transmute::<*mut c_void, unsafe extern "C-unwind" fn(usize, usize) -> *mut c_void>(f)(size, a),
    }
}

/// The allocation of operator new, in a function that cannot unwind: a panic of the library
/// aborts with its message instead of unwinding into the program.
#[inline(never)]
unsafe extern "C" fn alloc_new(caller: usize, size: usize, align: usize) -> *mut c_void {
    alloc_at(caller, size, align, false)
}

pub unsafe extern "C-unwind" fn tk_new(size: usize, caller: usize) -> *mut c_void {
    let p = alloc_new(caller, size, 0);
    if p.is_null() {
        new_failed(c"_Znwm", size, None)
    } else {
        p
    }
}
pub unsafe extern "C-unwind" fn tk_new_arr(size: usize, caller: usize) -> *mut c_void {
    let p = alloc_new(caller, size, 0);
    if p.is_null() {
        new_failed(c"_Znam", size, None)
    } else {
        p
    }
}
pub unsafe extern "C" fn tk_new_nothrow(size: usize, _nt: *const c_void, caller: usize) -> *mut c_void {
    alloc_at(caller, size, 0, false)
}
pub unsafe extern "C-unwind" fn tk_new_aligned(size: usize, align: usize, caller: usize) -> *mut c_void {
    let p = if align.is_power_of_two() { alloc_new(caller, size, align) } else { std::ptr::null_mut() };
    if p.is_null() {
        new_failed(c"_ZnwmSt11align_val_t", size, Some(align))
    } else {
        p
    }
}
pub unsafe extern "C-unwind" fn tk_new_arr_aligned(size: usize, align: usize, caller: usize) -> *mut c_void {
    let p = if align.is_power_of_two() { alloc_new(caller, size, align) } else { std::ptr::null_mut() };
    if p.is_null() {
        new_failed(c"_ZnamSt11align_val_t", size, Some(align))
    } else {
        p
    }
}
pub unsafe extern "C" fn tk_new_aligned_nothrow(size: usize, align: usize, _nt: *const c_void, caller: usize) -> *mut c_void {
    if align.is_power_of_two() {
        alloc_at(caller, size, align, false)
    } else {
        std::ptr::null_mut()
    }
}

// ---- per-phase guidance: switching phases at the markers (000 §3.2) -------------------------
//
// The guidance's phase markers are allocation calls of the profiled run (a program's allocator
// has no instruction counter; docs/guidance.md "Phase markers"). Once the runtime is up, every
// allocation call (malloc, calloc, realloc other than to size 0, the memalign family, C++ new:
// what the tracer records as alloc and realloc events) takes a number from CALLS. Position 2i
// is just before call i is served, 2i + 1 just after; NEXT_AT is the position of the next
// marker (u64::MAX: none), so between markers the cost is an atomic add and two compares.
// The thread that reaches a marker moves the arenas whose tier changes (demotions first, so
// the fast node has room for the promotions), as 000 §3.2's run suspends to migrate.

static CALLS: AtomicU64 = AtomicU64::new(0);
static NEXT_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static PHASED: AtomicBool = AtomicBool::new(false);

struct Phases {
    /// Index of the next marker in the guidance's list.
    next: usize,
    phase: u32,
    /// One JSON object per switch, for the report.
    switches: Vec<Value>,
}

static PHASES: std::sync::Mutex<Phases> = std::sync::Mutex::new(Phases { next: 0, phase: 0, switches: Vec::new() });

/// Starts counting allocation calls (from the library's constructor, after the sampler thread
/// exists: its allocations are the library's), when the guidance has phase markers.
pub fn start_phases() {
    let r = RT.load(Acquire);
    if r.is_null() {
        return;
    }
    // SAFETY: the runtime lives until the process ends
    let r = unsafe { &*r };
    let Some(g) = r.g.as_ref().filter(|g| r.guided && !g.markers.is_empty()) else { return };
    T0.get_or_init(std::time::Instant::now);
    NEXT_AT.store(g.markers[0].0, Relaxed);
    PHASED.store(true, Release);
}

#[inline(always)]
fn phase_before() -> u64 {
    if !PHASED.load(Relaxed) {
        return u64::MAX;
    }
    let i = CALLS.fetch_add(1, Relaxed);
    if 2 * i >= NEXT_AT.load(Relaxed) {
        phase_reached(2 * i);
    }
    i
}

#[inline(always)]
fn phase_after(i: u64) {
    if i != u64::MAX && 2 * i + 1 >= NEXT_AT.load(Relaxed) {
        phase_reached(2 * i + 1);
    }
}

#[cold]
#[inline(never)]
fn phase_reached(pos: u64) {
    let r = RT.load(Acquire);
    if r.is_null() {
        return;
    }
    // SAFETY: the runtime lives until the process ends
    let r = unsafe { &*r };
    let Some(g) = r.g.as_ref() else { return };
    let Ok(mut ph) = PHASES.lock() else { return };
    // another thread may have passed the marker first; markers passed at once are one switch
    let first = ph.next;
    while ph.next < g.markers.len() && g.markers[ph.next].0 <= pos {
        ph.next += 1;
    }
    if ph.next == first {
        return;
    }
    let (mpos, phase) = g.markers[ph.next - 1];
    let t0 = std::time::Instant::now();
    let t_ms = T0.get().map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
    let mut moved = Vec::new();
    if phase != ph.phase {
        let created = arena::N_ARENAS.load(Relaxed).min(g.arena_phase_tiers.len());
        // (tier, arena, node) of each arena whose node changes; slower tiers first
        let mut todo: Vec<(u32, usize, i32)> = (0..created)
            .filter_map(|a| {
                let t = g.arena_phase_tiers[a][phase as usize];
                let n = r.tier_nodes.get(t as usize).copied().flatten()?;
                (arena::NODE[a].load(Relaxed) != n).then_some((t, a, n))
            })
            .collect();
        todo.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        for (t, a, n) in todo {
            let e = arena::move_arena(a, n).err();
            moved.push(json!({"arena": a, "tier": t, "node": n, "errno": e}));
        }
    }
    let (last, from) = (ph.next - 1, ph.phase);
    ph.switches.push(json!({
        "markers": [first, last], "phase": phase, "from_phase": from,
        "alloc": mpos / 2, "side": if mpos % 2 == 0 { "before" } else { "after" },
        "t_ms": (t_ms * 1e3).round() / 1e3, "move_ms": (t0.elapsed().as_secs_f64() * 1e6).round() / 1e3,
        "moves": moved,
    }));
    ph.phase = phase;
    NEXT_AT.store(g.markers.get(ph.next).map_or(u64::MAX, |m| m.0), Relaxed);
}

// ---- the exit report and the site log ------------------------------------------------------

fn with_pid(path: &str, pid: i32) -> String {
    path.replace("%p", &pid.to_string())
}

extern "C" fn at_exit() {
    let r = RT.load(Acquire);
    if r.is_null() {
        return;
    }
    // SAFETY: the runtime lives until the process ends
    let r = unsafe { &*r };
    // a child forked without exec inherited the parent's counts: only the process that read
    // the guidance reports
    if unsafe { libc::getpid() } != r.pid {
        return;
    }
    if let Some(p) = &r.report_path {
        let path = with_pid(p, r.pid);
        if let Err(e) = std::fs::write(&path, serde_json::to_string(&r.report()).unwrap_or_default() + "\n") {
            say(&format!("error: cannot write the report {path} ({e})"));
        }
    }
    if let Some((p, depth)) = &r.log {
        let path = with_pid(p, r.pid);
        if let Err(e) = std::fs::write(&path, serde_json::to_string(&log_json(*depth, r.pid)).unwrap_or_default() + "\n") {
            say(&format!("error: cannot write the site log {path} ({e})"));
        }
    }
}

fn log_json(depth: usize, pid: i32) -> Value {
    lock();
    // SAFETY: under LOG_LOCK
    let m: Vec<(Vec<usize>, (u64, u64))> =
        unsafe { (*std::ptr::addr_of!(LOG)).as_ref().map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect()).unwrap_or_default() };
    unlock();
    let mut by_key: HashMap<Vec<String>, (u64, u64)> = HashMap::new();
    let mut names: HashMap<usize, String> = HashMap::new();
    for (ras, (c, b)) in m {
        let key: Vec<String> = ras.iter().map(|&ra| names.entry(ra).or_insert_with(|| keys::frame_key(ra).unwrap_or_else(|| "?".into())).clone()).collect();
        let e = by_key.entry(key).or_insert((0, 0));
        e.0 += c;
        e.1 += b;
    }
    let mut v: Vec<_> = by_key.into_iter().collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    json!({
        "format": "tierkit-alloc-log", "version": 1, "pid": pid, "depth": depth,
        "sites": v.iter().map(|(k, (c, b))| json!({"key": k, "allocations": c, "bytes": b})).collect::<Vec<_>>(),
    })
}

impl Runtime {
    fn report(&self) -> Value {
        let n_nodes = self.g.as_ref().map_or(1, |g| g.nodes.len());
        let mut sums = vec![(0u64, 0u64); n_nodes];
        if self.count {
            for s in 0..self.shards {
                for (n, sum) in sums.iter_mut().enumerate() {
                    sum.0 += self.counters[s * self.stride + 2 * n].load(Relaxed);
                    sum.1 += self.counters[s * self.stride + 2 * n + 1].load(Relaxed);
                }
            }
        }
        // the sampler thread's own allocations are not the program's
        sums[0].0 = sums[0].0.saturating_sub(SAMPLER_ALLOCS.load(Relaxed));
        sums[0].1 = sums[0].1.saturating_sub(SAMPLER_BYTES.load(Relaxed));
        let created = arena::N_ARENAS.load(Relaxed);
        if self.sample_ms > 0 {
            // the end is a sample too
            sample_once(created);
        }
        let block_peak = SAMPLES.lock().ok().and_then(|g| g.as_ref().map(|s| s.block_peak.clone())).unwrap_or_default();
        let node_map = |p: &[(i32, u64)]| p.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>();
        let mut decisions = Vec::new();
        let n_arenas = self.g.as_ref().map_or(0, |g| g.arena_tiers.len());
        let mut per_arena = vec![(0u64, 0u64); n_arenas];
        if let Some(g) = &self.g {
            let counted: Vec<u32> = sums.iter().enumerate().skip(1).filter(|(_, s)| s.0 > 0).map(|(n, _)| n as u32).collect();
            let under = g.sites_under(&counted);
            for (n, &(c, b)) in sums.iter().enumerate().skip(1) {
                if c == 0 {
                    continue;
                }
                let node = &g.nodes[n];
                let a = match node.decision {
                    Some(Decision::Arena(a)) => a,
                    _ => g.at_end(n as u32).unwrap_or(0),
                };
                per_arena[a as usize].0 += c;
                per_arena[a as usize].1 += b;
                let bp = block_peak.get(&(n as u32));
                decisions.push(json!({
                    "prefix": g.prefix(n as u32),
                    "sites": under.get(&(n as u32)), "arena": a, "allocations": c, "bytes": b,
                    "block_pages_by_node_at_peak": bp.map(|(_, p)| Value::Object(node_map(p))),
                    "block_peak_t_ms": bp.map(|(t, _)| *t),
                }));
            }
        }
        let samples = SAMPLES.lock().ok().and_then(|g| g.as_ref().map(|s| (s.series.clone(), s.peak.clone(), s.taken)));
        let arenas: Vec<Value> = (0..n_arenas)
            .map(|a| {
                let tier = self.g.as_ref().unwrap().arena_tiers[a];
                let (pages, used) = if self.guided && a < created { arena::pages_by_node(a) } else { Default::default() };
                let node = arena::NODE.get(a).map(|n| n.load(Relaxed)).filter(|&n| n >= 0 && self.guided);
                json!({
                    "id": a, "tier": tier, "node": node, "bound": node.is_some(),
                    "jemalloc_arena": if self.guided && a < created { json!(arena::JE_IND[a].load(Relaxed)) } else { Value::Null },
                    "allocations": per_arena[a].0, "bytes": per_arena[a].1,
                    "range_bytes_used": used,
                    "pages_by_node": pages.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                    "pages_present": pages.values().sum::<u64>(),
                    "pages_by_node_at_peak": samples.as_ref().and_then(|s| s.1.get(a).cloned().flatten()).map(|(_, p)| Value::Object(node_map(&p))),
                    "peak_t_ms": samples.as_ref().and_then(|s| s.1.get(a).cloned().flatten()).map(|(t, _)| t),
                })
            })
            .collect();
        let total: u64 = sums.iter().map(|s| s.0).sum();
        json!({
            "format": "tierkit-alloc-report", "version": 1,
            "pid": self.pid,
            "guidance": self.guidance_path,
            "guidance_digest": self.g.as_ref().map(|g| g.digest.clone()),
            "guided": self.guided,
            "context": self.g.as_ref().map(|g| g.context),
            "tier_nodes": self.tier_nodes,
            "tcache": if self.tcache_explicit { "explicit" } else { "none" },
            "allocations_counted": self.count,
            "allocations_total": total,
            "allocations_unmatched": sums[0].0,
            "bytes_unmatched": sums[0].1,
            "allocations_before_ready": BEFORE_READY.load(Relaxed),
            "allocations_reentrant_plain": REENTERED.load(Relaxed),
            "arena_fallbacks": FALLBACKS.load(Relaxed),
            "extent_failures": arena::EXTENT_FAILS.load(Relaxed),
            "extent_failures_injected": arena::EXTENT_INJECTED.load(Relaxed),
            "unwinds": UNWINDS.load(Relaxed),
            "unwind": {
                "fast": UNWINDS_FAST.load(Relaxed), "libgcc": UNWINDS_LIBGCC.load(Relaxed),
                "checked": UNWINDS_CHECKED.load(Relaxed), "mismatches": UNWIND_MISMATCHES.load(Relaxed),
            },
            "unwinds_without_call_site": UNWIND_MISSES.load(Relaxed),
            "distinct_return_addresses": DISTINCT_RA.load(Relaxed),
            "cache_full": CACHE_FULL.load(Relaxed),
            "explicit_tcaches": TCACHES.load(Relaxed),
            "arenas": arenas,
            "phases": self.g.as_ref().filter(|g| g.mode == "per-phase").map(|g| {
                let ph = PHASES.lock().ok();
                json!({
                    "count": g.phases, "markers": g.markers.len(), "unmarked_boundaries": g.unmarked,
                    "switched": PHASED.load(Relaxed),
                    "allocation_calls": CALLS.load(Relaxed),
                    "phase_at_exit": ph.as_ref().map(|p| p.phase),
                    "switches": ph.as_ref().map(|p| p.switches.clone()).unwrap_or_default(),
                })
            }),
            "samples": samples.map(|(series, _, taken)| json!({
                "interval_ms": self.sample_ms, "taken": taken,
                "sampler_allocations": SAMPLER_ALLOCS.load(Relaxed),
                "t_ms": series.iter().map(|x| x.0).collect::<Vec<_>>(),
                "pages_by_node": series.iter().map(|x| x.1.iter().map(|p| Value::Object(node_map(p))).collect::<Vec<_>>()).collect::<Vec<_>>(),
            })),
            "decisions": decisions,
            "warnings": self.warnings,
            "errors": self.errors,
        })
    }
}
