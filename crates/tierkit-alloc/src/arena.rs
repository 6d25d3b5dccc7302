//! Guided arenas: one jemalloc arena per guidance arena, each backed by its own reserved
//! address range (so that `free` finds a block's arena with one subtraction and blocks of two
//! arenas never share a page), bound with `mbind(MPOL_PREFERRED)` to its tier's NUMA node
//! (002 §IV-B: a full fast node overflows to the slow one).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use libc::{c_uint, c_void};
use tikv_jemalloc_sys as je;

pub const MAX_ARENAS: usize = 64;
const MPOL_PREFERRED: i32 = 1;
const MPOL_MF_MOVE: u32 = 1 << 1;
const MASK_WORDS: usize = 16; // nodes 0..1023

/// The reserved range of every guided arena: arena `a` owns
/// `[BASE + a << SHIFT, BASE + (a + 1) << SHIFT)`; LEN is 0 while there is none.
pub static BASE: AtomicUsize = AtomicUsize::new(0);
/// BASE, known to the hooks while the arenas are created (BASE is published last).
static RESERVED: AtomicUsize = AtomicUsize::new(0);
pub static LEN: AtomicUsize = AtomicUsize::new(0);
pub static SHIFT: AtomicU32 = AtomicU32::new(63);
pub static N_ARENAS: AtomicUsize = AtomicUsize::new(0);
/// Each guided arena's jemalloc arena index.
pub static JE_IND: [AtomicU32; MAX_ARENAS] = [const { AtomicU32::new(u32::MAX) }; MAX_ARENAS];
/// Each guided arena's bump pointer (offset within its range of the next extent).
static BUMP: [AtomicUsize; MAX_ARENAS] = [const { AtomicUsize::new(0) }; MAX_ARENAS];
/// Each guided arena's node (-1: unbound).
pub static NODE: [AtomicI32; MAX_ARENAS] = [const { AtomicI32::new(-1) }; MAX_ARENAS];
/// Debug knob (TIERKIT_ALLOC_DEBUG_FAIL_EXTENT=N): every Nth extent request fails, as if mmap
/// had refused it.
pub static FAIL_EVERY: AtomicU64 = AtomicU64::new(0);
static EXTENT_CALLS: AtomicU64 = AtomicU64::new(0);
pub static EXTENT_FAILS: AtomicU64 = AtomicU64::new(0);
pub static EXTENT_INJECTED: AtomicU64 = AtomicU64::new(0);

/// The guided arena holding `p`, if any.
#[inline(always)]
pub fn arena_of(p: usize) -> Option<usize> {
    let off = p.wrapping_sub(BASE.load(Relaxed));
    if off < LEN.load(Relaxed) {
        Some(off >> SHIFT.load(Relaxed))
    } else {
        None
    }
}

fn span() -> usize {
    1usize << SHIFT.load(Relaxed)
}

/// The guided arena being created: jemalloc allocates the new arena's own metadata through
/// its hooks before `arenas.create` returns its index.
static CREATING: AtomicUsize = AtomicUsize::new(usize::MAX);

fn our_arena(je_ind: c_uint) -> Option<usize> {
    (0..MAX_ARENAS).find(|&a| JE_IND[a].load(Relaxed) == je_ind).or_else(|| Some(CREATING.load(Relaxed)).filter(|&a| a < MAX_ARENAS))
}

fn page() -> usize {
    // SAFETY: no arguments
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

unsafe extern "C" fn hook_alloc(
    _h: *mut je::extent_hooks_t,
    new_addr: *mut c_void,
    size: usize,
    alignment: usize,
    zero: *mut bool,
    commit: *mut bool,
    arena_ind: c_uint,
) -> *mut c_void {
    let Some(a) = our_arena(arena_ind) else { return std::ptr::null_mut() };
    let every = FAIL_EVERY.load(Relaxed);
    if every > 0 && (EXTENT_CALLS.fetch_add(1, Relaxed) + 1).is_multiple_of(every) {
        EXTENT_INJECTED.fetch_add(1, Relaxed);
        return std::ptr::null_mut();
    }
    let base = RESERVED.load(Relaxed) + a * span();
    let align = alignment.max(page());
    // bump allocation in the arena's range; a request for a given address is served only where
    // that address is the bump pointer (an in-place grow)
    let mut cur = BUMP[a].load(Relaxed);
    let start = loop {
        let s = if new_addr.is_null() { (base + cur + align - 1) & !(align - 1) } else { new_addr as usize };
        if s < base + cur || s + size > base + span() || (!new_addr.is_null() && s != base + cur) {
            if new_addr.is_null() {
                EXTENT_FAILS.fetch_add(1, Relaxed);
            }
            return std::ptr::null_mut();
        }
        match BUMP[a].compare_exchange_weak(cur, s + size - base, AcqRel, Relaxed) {
            Ok(_) => break s,
            Err(c) => cur = c,
        }
    };
    if libc::mprotect(start as *mut c_void, size, libc::PROT_READ | libc::PROT_WRITE) != 0 {
        EXTENT_FAILS.fetch_add(1, Relaxed);
        return std::ptr::null_mut();
    }
    // never used before: the kernel gives zeroed pages
    *zero = true;
    *commit = true;
    start as *mut c_void
}

// jemalloc keeps (retains) what it would give back: the range is never reused by another arena
unsafe extern "C" fn hook_dalloc(_h: *mut je::extent_hooks_t, _a: *mut c_void, _s: usize, _c: bool, _i: c_uint) -> bool {
    true
}
unsafe extern "C" fn hook_destroy(_h: *mut je::extent_hooks_t, a: *mut c_void, s: usize, _c: bool, _i: c_uint) {
    libc::madvise(a, s, libc::MADV_DONTNEED);
}
unsafe extern "C" fn hook_commit(_h: *mut je::extent_hooks_t, a: *mut c_void, s: usize, off: usize, len: usize, _i: c_uint) -> bool {
    let _ = s;
    libc::mprotect((a as usize + off) as *mut c_void, len, libc::PROT_READ | libc::PROT_WRITE) != 0
}
unsafe extern "C" fn hook_purge_lazy(_h: *mut je::extent_hooks_t, a: *mut c_void, _s: usize, off: usize, len: usize, _i: c_uint) -> bool {
    libc::madvise((a as usize + off) as *mut c_void, len, libc::MADV_FREE) != 0
}
unsafe extern "C" fn hook_purge_forced(_h: *mut je::extent_hooks_t, a: *mut c_void, _s: usize, off: usize, len: usize, _i: c_uint) -> bool {
    // the VMA keeps its mbind policy: pages faulted in again go to the same node
    libc::madvise((a as usize + off) as *mut c_void, len, libc::MADV_DONTNEED) != 0
}
unsafe extern "C" fn hook_split(_h: *mut je::extent_hooks_t, _a: *mut c_void, _s: usize, _sa: usize, _sb: usize, _c: bool, _i: c_uint) -> bool {
    false
}
unsafe extern "C" fn hook_merge(_h: *mut je::extent_hooks_t, _a: *mut c_void, _sa: usize, _b: *mut c_void, _sb: usize, _c: bool, _i: c_uint) -> bool {
    false
}

static mut HOOKS: je::extent_hooks_t = je::extent_hooks_t {
    alloc: Some(hook_alloc),
    dalloc: Some(hook_dalloc),
    destroy: Some(hook_destroy),
    commit: Some(hook_commit),
    decommit: None,
    purge_lazy: Some(hook_purge_lazy),
    purge_forced: Some(hook_purge_forced),
    split: Some(hook_split),
    merge: Some(hook_merge),
};

fn mbind(addr: usize, len: usize, node: i32, flags: u32) -> Result<(), i32> {
    let mut mask = [0u64; MASK_WORDS];
    mask[node as usize / 64] |= 1 << (node as usize % 64);
    // SAFETY: the range is a mapping of ours; the mask outlives the call
    let r = unsafe { libc::syscall(libc::SYS_mbind, addr, len, MPOL_PREFERRED, mask.as_ptr(), MASK_WORDS * 64 + 1, flags) };
    if r == 0 {
        Ok(())
    } else {
        // SAFETY: errno of this thread
        Err(unsafe { *libc::__errno_location() })
    }
}

pub fn node_exists(n: i32) -> bool {
    n >= 0 && (n as usize) < MASK_WORDS * 64 && std::path::Path::new(&format!("/sys/devices/system/node/node{n}")).is_dir()
}

/// Reserves the ranges of `nodes.len()` arenas (`per_arena_bytes` each, halved while the
/// system refuses) and creates their jemalloc arenas. Returns warnings.
pub fn create(nodes: &[Option<i32>], mut per_arena_bytes: usize) -> Result<Vec<String>, String> {
    let n = nodes.len().min(MAX_ARENAS);
    let mut warn = Vec::new();
    if n == 0 {
        return Ok(warn);
    }
    // with an address-space limit, leave the program three quarters of it
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: out parameter
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut rl) } == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
        per_arena_bytes = per_arena_bytes.min(rl.rlim_cur as usize / 4 / n);
    }
    let min = 1usize << 24;
    let mut per = per_arena_bytes.max(min).next_power_of_two();
    if per > per_arena_bytes.max(min) {
        per /= 2;
    }
    const HUGE: usize = 2 << 20;
    let (base, len) = loop {
        let len = per * n;
        // SAFETY: a fresh private mapping; PROT_NONE and NORESERVE: no memory is committed
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len + HUGE, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
        if p != libc::MAP_FAILED {
            break (((p as usize) + HUGE - 1) & !(HUGE - 1), len);
        }
        if per <= min {
            return Err(format!("cannot reserve address space for {n} arenas"));
        }
        per /= 2;
    };
    SHIFT.store(per.trailing_zeros(), Relaxed);
    RESERVED.store(base, Relaxed);
    for (a, node) in nodes.iter().take(n).enumerate() {
        if let Some(nd) = *node {
            match mbind(base + a * per, per, nd, 0) {
                Ok(()) => NODE[a].store(nd, Relaxed),
                Err(e) => warn.push(format!("arena {a}: mbind to node {nd} failed (errno {e}); the arena is left unbound")),
            }
        }
        let mut ind: c_uint = 0;
        CREATING.store(a, Relaxed);
        let mut sz = std::mem::size_of::<c_uint>();
        // SAFETY: HOOKS lives forever; jemalloc copies the pointer
        let hooks: *mut je::extent_hooks_t = std::ptr::addr_of_mut!(HOOKS);
        let r = unsafe {
            je::mallctl(
                c"arenas.create".as_ptr(),
                &mut ind as *mut c_uint as *mut c_void,
                &mut sz,
                &hooks as *const _ as *mut c_void,
                std::mem::size_of::<*mut je::extent_hooks_t>(),
            )
        };
        CREATING.store(usize::MAX, Relaxed);
        if r != 0 {
            return Err(format!("jemalloc could not create an arena (error {r})"));
        }
        JE_IND[a].store(ind, Relaxed);
    }
    N_ARENAS.store(n, Relaxed);
    BASE.store(base, Relaxed);
    LEN.store(len, Release);
    Ok(warn)
}

/// Moves arena `a`'s pages to `node` and binds its range there for what comes next
/// (per-phase guidance, 000 §3.2). Returns the errno of a failure.
pub fn move_arena(a: usize, node: i32) -> Result<(), i32> {
    if a >= N_ARENAS.load(Relaxed) || !node_exists(node) {
        return Err(libc::EINVAL);
    }
    let base = BASE.load(Relaxed) + a * span();
    mbind(base, span(), node, MPOL_MF_MOVE)?;
    NODE[a].store(node, Relaxed);
    Ok(())
}

/// Pages of arena `a` present in memory, per node (`move_pages` with no target nodes queries
/// where each page is), and the bytes of its range handed to jemalloc so far.
pub fn pages_by_node(a: usize) -> (std::collections::BTreeMap<i32, u64>, u64) {
    let mut out = std::collections::BTreeMap::new();
    let used = BUMP[a].load(Relaxed);
    let base = BASE.load(Relaxed) + a * span();
    add_pages_by_node(base, used, &mut out);
    (out, used as u64)
}

/// Adds the pages of `[start, start + len)` present in memory to `out`, per node (the pages
/// the range touches, whole).
pub fn add_pages_by_node(start: usize, len: usize, out: &mut std::collections::BTreeMap<i32, u64>) {
    for s in page_nodes(start, len).1 {
        if s >= 0 {
            *out.entry(s).or_insert(0) += 1;
        }
    }
}

/// Where each page that `[start, start + len)` touches is: the first page's address, and per
/// page its node, or a negative errno (-ENOENT: not present; -EIO for a batch whose query
/// failed). One `move_pages` query per 4096 pages.
pub fn page_nodes(start: usize, len: usize) -> (usize, Vec<i32>) {
    let pg = page();
    let base = start & !(pg - 1);
    let n = ((start + len).div_ceil(pg) * pg - base) / pg;
    let mut out = vec![-libc::EIO; n];
    const BATCH: usize = 4096;
    let mut pages: Vec<*mut c_void> = Vec::with_capacity(BATCH);
    for (b, st) in out.chunks_mut(BATCH).enumerate() {
        pages.clear();
        pages.extend((0..st.len()).map(|i| (base + (b * BATCH + i) * pg) as *mut c_void));
        // SAFETY: queries only (nodes = NULL) on pages of this process
        let r = unsafe { libc::syscall(libc::SYS_move_pages, 0, pages.len(), pages.as_ptr(), std::ptr::null::<i32>(), st.as_mut_ptr(), 0) };
        if r != 0 {
            st.iter_mut().for_each(|s| *s = -libc::EIO);
        }
    }
    (base, out)
}

/// The bytes of arena `a`'s range handed to jemalloc so far, from its start.
pub fn arena_range(a: usize) -> (usize, usize) {
    (BASE.load(Relaxed) + a * span(), BUMP[a].load(Relaxed))
}
