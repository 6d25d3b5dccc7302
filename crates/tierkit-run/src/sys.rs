//! What Linux offers user space about a process's memory, read and parsed: `/proc/PID/maps`,
//! `/proc/PID/pagemap`, `/proc/vmstat`, NUMA node lists and distances, memory tiers; and the
//! two system calls the daemon needs, `move_pages(2)` and `set_mempolicy(2)`.
//!
//! Parsers take text (or a root directory), so that the tests feed them files of their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tierkit_core::{Error, Result};

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub private: bool,
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[stack]`, `[anon:x]`), empty for anonymous memory.
    pub name: String,
}

impl Vma {
    /// The mappings whose pages the daemon watches and moves: the program's own data, i.e.
    /// private readable mappings that are anonymous (malloc's mmap'd chunks, thread stacks,
    /// `MAP_ANONYMOUS`), the heap (`[heap]`, brk) and the main stack (`[stack]`), plus
    /// anonymous mappings the program named (`[anon:...]`). File-backed mappings (text, shared
    /// libraries, their copy-on-write data) and the kernel's (`[vdso]`, `[vvar]`,
    /// `[vsyscall]`) are left alone: their pages are shared or not the program's to move.
    /// Writable or not: a program may make its data read-only for a while (`mprotect`), and
    /// its pages still take the fast node's room; skipping them for one observation once let
    /// the daemon fill that room twice (an 8 MiB region the test program write-protects for
    /// an instant every 20 ms, tests/test_run_vm.py). Inaccessible mappings (`---p` guard
    /// pages) hold no pages.
    pub fn is_program_data(&self) -> bool {
        if !(self.private && self.read) {
            return false;
        }
        let n = self.name.as_str();
        (self.inode == 0 && n.is_empty()) || n == "[heap]" || n == "[stack]" || n.starts_with("[anon:")
    }

    pub fn pages(&self, page_bytes: u64) -> u64 {
        (self.end - self.start) / page_bytes
    }
}

/// Parse `/proc/PID/maps` text. `what` names the source in errors.
pub fn parse_maps(what: &str, text: &str) -> Result<Vec<Vma>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |m: &str| Error::at_line(what, i as u64 + 1, m.to_string());
        // address perms offset dev inode [name], the name may hold spaces
        let mut it = line.splitn(6, ' ');
        let range = it.next().ok_or_else(|| bad("no address range"))?;
        let perms = it.next().ok_or_else(|| bad("no permissions"))?;
        let _offset = it.next().ok_or_else(|| bad("no offset"))?;
        let _dev = it.next().ok_or_else(|| bad("no device"))?;
        let inode = it.next().ok_or_else(|| bad("no inode"))?;
        let name = it.next().unwrap_or("").trim_start().to_string();
        let (s, e) = range.split_once('-').ok_or_else(|| bad("address range is not START-END"))?;
        let start = u64::from_str_radix(s, 16).map_err(|_| bad("start address is not hex"))?;
        let end = u64::from_str_radix(e, 16).map_err(|_| bad("end address is not hex"))?;
        if end <= start {
            return Err(bad("end address not after start"));
        }
        let p = perms.as_bytes();
        if p.len() != 4 {
            return Err(bad("permissions are not 4 characters (rwxp)"));
        }
        let inode = inode.parse::<u64>().map_err(|_| bad("inode is not a number"))?;
        out.push(Vma { start, end, read: p[0] == b'r', write: p[1] == b'w', private: p[3] == b'p', inode, name });
    }
    Ok(out)
}

/// One 64-bit `/proc/PID/pagemap` entry (Documentation/admin-guide/mm/pagemap.rst).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagemapEntry(pub u64);

impl PagemapEntry {
    /// Bit 63: the page is in RAM.
    pub fn present(self) -> bool {
        self.0 >> 63 & 1 == 1
    }
    /// Bit 62: the page is swapped out.
    pub fn swapped(self) -> bool {
        self.0 >> 62 & 1 == 1
    }
    /// Bit 55: written since the soft-dirty bits were last cleared (`4` to `clear_refs`).
    pub fn soft_dirty(self) -> bool {
        self.0 >> 55 & 1 == 1
    }
    /// Bit 56: mapped by this process only.
    pub fn exclusive(self) -> bool {
        self.0 >> 56 & 1 == 1
    }
    /// Bits 0-54: the page frame number of a present page (0 without CAP_SYS_ADMIN).
    pub fn pfn(self) -> u64 {
        if self.present() {
            self.0 & ((1 << 55) - 1)
        } else {
            0
        }
    }
}

/// `/proc/kpageflags` bits (Documentation/admin-guide/mm/pagemap.rst): the first page of a
/// large folio, and the others.
pub const KPF_COMPOUND_HEAD: u64 = 1 << 15;
pub const KPF_COMPOUND_TAIL: u64 = 1 << 16;

/// How many of the pages are in large folios (transparent huge pages, which `move_pages`
/// moves whole), from their page frame numbers (in the program's virtual order) and
/// `/proc/kpageflags`: the pages flagged compound head or tail. Only a run of consecutive
/// frame numbers can hold a mapped large folio, so flags are read for those runs alone, one
/// read per run. `flags` reads the flags of `n` frames from `pfn` on (None: unknown, no page
/// counted).
pub fn large_folio_pages(pfns: &[u64], flags: &mut dyn FnMut(u64, usize) -> Option<Vec<u64>>) -> u64 {
    let mut n = 0u64;
    let mut i = 0;
    while i < pfns.len() {
        let mut j = i + 1;
        while pfns[i] != 0 && j < pfns.len() && pfns[j] == pfns[j - 1] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            if let Some(f) = flags(pfns[i], j - i).filter(|f| f.len() == j - i) {
                n += f.iter().filter(|&&fl| fl & (KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL) != 0).count() as u64;
            }
        }
        i = j;
    }
    n
}

/// Decode little-endian pagemap bytes.
pub fn parse_pagemap(bytes: &[u8]) -> Vec<PagemapEntry> {
    bytes.chunks_exact(8).map(|c| PagemapEntry(u64::from_le_bytes(c.try_into().unwrap()))).collect()
}

/// Parse a kernel node list: `0`, `0-3`, `0,2-3`, empty.
pub fn parse_nodelist(what: &str, s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || Error::config(what, format!("'{}' is not a node list (examples: 0, 0-3, 0,2)", s.trim()));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if b < a || b - a > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parse `/proc/vmstat`: `name value` per line.
pub fn parse_vmstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The `/proc/vmstat` counters `tierkit run` reports as deltas over the run: migration,
/// promotion (NUMA balancing's, counted on the fast node), demotion (by reclaim), NUMA hint
/// faults. Those a kernel lacks are left out.
pub const VMSTAT_KEYS: &[&str] = &[
    "pgpromote_success",
    "pgpromote_candidate",
    "pgdemote_kswapd",
    "pgdemote_direct",
    "pgdemote_khugepaged",
    "pgdemote_proactive",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pte_updates",
    "numa_local",
    "numa_foreign",
    "numa_miss",
];

pub fn vmstat_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, i64> {
    VMSTAT_KEYS.iter().filter_map(|k| Some((k.to_string(), *after.get(*k)? as i64 - *before.get(*k)? as i64))).collect()
}

pub fn read_vmstat(root: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(root.join("proc/vmstat")).map(|t| parse_vmstat(&t)).unwrap_or_default()
}

/// How the fast and slow nodes were chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiers {
    pub fast: u32,
    /// None on a machine with one memory node.
    pub slow: Option<u32>,
    /// "given", "memory_tiering" or "distance" (or "single node").
    pub from: &'static str,
    /// Every node with memory.
    pub nodes: Vec<u32>,
}

fn node_dir(root: &Path) -> PathBuf {
    root.join("sys/devices/system/node")
}

/// The NUMA nodes with memory (`has_memory`, else every `nodeN` directory).
pub fn memory_nodes(root: &Path) -> Result<Vec<u32>> {
    let dir = node_dir(root);
    if let Ok(s) = std::fs::read_to_string(dir.join("has_memory")) {
        return parse_nodelist(&dir.join("has_memory").display().to_string(), &s);
    }
    let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut out: Vec<u32> = rd.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok()).collect();
    out.sort_unstable();
    Ok(out)
}

/// `memory_tierN` directories with their node lists, by tier number (smaller = faster).
pub fn memory_tiers(root: &Path) -> Result<Vec<(u32, Vec<u32>)>> {
    let dir = root.join("sys/devices/virtual/memory_tiering");
    let Ok(rd) = std::fs::read_dir(&dir) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str().and_then(|s| s.strip_prefix("memory_tier")).and_then(|s| s.parse::<u32>().ok()) else { continue };
        let f = e.path().join("nodelist");
        let text = std::fs::read_to_string(&f).map_err(|er| Error::io(&f, er))?;
        let nodes = parse_nodelist(&f.display().to_string(), &text)?;
        if !nodes.is_empty() {
            out.push((n, nodes));
        }
    }
    out.sort();
    Ok(out)
}

/// A node's distances to every node (`nodeN/distance`, in node order).
pub fn node_distances(root: &Path, node: u32) -> Result<Vec<u32>> {
    let f = node_dir(root).join(format!("node{node}/distance"));
    let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&f, e))?;
    text.split_whitespace().map(|w| w.parse().map_err(|_| Error::config(f.display().to_string(), format!("'{w}' is not a distance")))).collect()
}

fn node_has_cpus(root: &Path, node: u32) -> bool {
    std::fs::read_to_string(node_dir(root).join(format!("node{node}/cpulist"))).map(|s| !s.trim().is_empty()).unwrap_or(false)
}

/// Choose the fast and slow nodes: those given (checked to exist), else the first node of the
/// smallest and of the next `memory_tierN` (Linux's own ranking, from HMAT/CDAT figures), else
/// by distance: the fast node is the first node with CPUs, the slow one the memory node
/// farthest from it.
pub fn discover_tiers(root: &Path, fast: Option<u32>, slow: Option<u32>) -> Result<Tiers> {
    let nodes = memory_nodes(root)?;
    let list = || nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    for (key, n) in [("--fast-node", fast), ("--slow-node", slow)] {
        if let Some(n) = n {
            if !nodes.contains(&n) {
                return Err(Error::config(key, format!("{n}: no NUMA node {n} with memory on this machine (nodes with memory: {})", list())));
            }
        }
    }
    if let (Some(f), Some(s)) = (fast, slow) {
        if f == s {
            return Err(Error::config("--slow-node", format!("{s} is also the fast node: give two different nodes")));
        }
        return Ok(Tiers { fast: f, slow: Some(s), from: "given", nodes });
    }
    if nodes.len() < 2 {
        let only = fast.or(nodes.first().copied()).unwrap_or(0);
        return Ok(Tiers { fast: only, slow: None, from: "single node", nodes });
    }
    let tiers = memory_tiers(root)?;
    if tiers.len() >= 2 {
        let f = fast.unwrap_or(tiers[0].1[0]);
        let s = slow.unwrap_or_else(|| tiers.iter().flat_map(|t| t.1.iter()).copied().find(|&n| n != f && !tiers[0].1.contains(&n)).unwrap_or(tiers[1].1[0]));
        if f != s {
            return Ok(Tiers { fast: f, slow: Some(s), from: "memory_tiering", nodes });
        }
    }
    let f = fast.unwrap_or_else(|| nodes.iter().copied().find(|&n| node_has_cpus(root, n)).unwrap_or(nodes[0]));
    let s = match slow {
        Some(s) => s,
        None => {
            let d = node_distances(root, f)?;
            let dist = |n: u32| d.get(nodes.iter().position(|&x| x == n).unwrap_or(usize::MAX)).copied().unwrap_or(0);
            // farthest; ties to the smaller node number
            nodes.iter().copied().filter(|&n| n != f).max_by_key(|&n| (dist(n), std::cmp::Reverse(n))).unwrap()
        }
    };
    Ok(Tiers { fast: f, slow: Some(s), from: "distance", nodes })
}

/// A node's MemTotal, bytes (`nodeN/meminfo`).
pub fn node_mem_total_bytes(root: &Path, node: u32) -> Result<u64> {
    let f = node_dir(root).join(format!("node{node}/meminfo"));
    let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&f, e))?;
    for line in text.lines() {
        // "Node 0 MemTotal:       16318712 kB"
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() >= 4 && w[2] == "MemTotal:" {
            let kib: u64 = w[3].parse().map_err(|_| Error::config(f.display().to_string(), format!("MemTotal '{}' is not a number", w[3])))?;
            return Ok(kib * 1024);
        }
    }
    Err(Error::config(f.display().to_string(), "no MemTotal line"))
}

// --- system calls --------------------------------------------------------------------------

pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_BIND: i32 = 2;
pub const MPOL_INTERLEAVE: i32 = 3;
const MPOL_MF_MOVE: i32 = 1 << 1;
/// Pages per move_pages(2) call: large enough to amortise the call, small enough that one
/// call does not hold the program's mmap lock long.
pub const MOVE_BATCH: usize = 1024;

/// A move's status when its process had ended (no errno: the call failed for the whole batch).
pub const GONE: i32 = -3;
/// A move's status when the daemon step's time bound ran out before it was tried.
pub const CUT: i32 = -2;

/// The name of an errno value (`ENOENT`), for the failure counts; the three statuses of moves
/// not carried out for tierkit's own reasons: `over_budget` (-1), `step_time_bound` ([`CUT`]),
/// `program_gone` ([`GONE`]).
pub fn errno_name(e: i32) -> String {
    let n = match e {
        -1 => "over_budget",
        CUT => "step_time_bound",
        GONE => "program_gone",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EHWPOISON => "EHWPOISON",
        _ => return format!("errno {e}"),
    };
    n.to_string()
}

/// The size of a memory block, bytes (`/sys/devices/system/memory/block_size_bytes`, hex).
pub fn memory_block_bytes(root: &Path) -> Result<u64> {
    let p = root.join("sys/devices/system/memory/block_size_bytes");
    let t = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).map_err(|_| Error::config(p.display().to_string(), format!("'{}' is not a hex size", t.trim())))
}

/// The memory blocks node `node` lists (`nodeN/memoryM`: M), in no order.
pub fn node_memory_blocks(root: &Path, node: u32) -> Result<Vec<u64>> {
    let dir = root.join(format!("sys/devices/system/node/node{node}"));
    let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(rd.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("memory")?.parse().ok()).collect())
}

/// Which node each physical page frame is on, from the memory blocks each node lists
/// (`/sys/devices/system/node/nodeN/memoryM`, blocks of `/sys/devices/system/memory/
/// block_size_bytes`; Documentation/admin-guide/mm/memory-hotplug.rst). With the frame numbers
/// `pagemap` gives root, a page's node is found without asking the kernel page by page: a
/// `move_pages` query walks the page tables under the program's mmap lock for every page, which
/// in the paced testbed VM took over half a second for 24,000 pages.
pub struct PfnNodes {
    /// (first block, node), sorted; a block belongs to one node
    blocks: Vec<(u64, u32)>,
    pages_per_block: u64,
}

impl PfnNodes {
    /// The machine's table, or None where it cannot be read (no memory block directories).
    pub fn read(root: &Path, page_bytes: u64) -> Option<PfnNodes> {
        let bs = memory_block_bytes(root).ok()?;
        let mut blocks = Vec::new();
        for node in memory_nodes(root).ok()? {
            blocks.extend(node_memory_blocks(root, node).ok()?.into_iter().map(|b| (b, node)));
        }
        blocks.sort_unstable();
        (!blocks.is_empty() && bs >= page_bytes).then_some(PfnNodes { blocks, pages_per_block: bs / page_bytes })
    }

    /// The node of frame `pfn`, or -ENOENT for a frame in no listed block.
    pub fn node(&self, pfn: u64) -> i32 {
        let b = pfn / self.pages_per_block;
        match self.blocks.binary_search_by_key(&b, |x| x.0) {
            Ok(i) => self.blocks[i].1 as i32,
            Err(_) => -libc::ENOENT,
        }
    }
}

/// The node of each page of `pid` (move_pages with no target nodes: a query), in batches:
/// a node number, or a negative errno (`-ENOENT`: not present). A call that fails as a whole
/// (the process is gone) gives its errno, negated, for each page of the batch.
pub fn query_nodes(pid: i32, addrs: &[u64]) -> Vec<i32> {
    let mut out = vec![0i32; addrs.len()];
    for (chunk, st) in addrs.chunks(MOVE_BATCH).zip(out.chunks_mut(MOVE_BATCH)) {
        let ptrs: Vec<*mut libc::c_void> = chunk.iter().map(|&a| a as *mut libc::c_void).collect();
        // SAFETY: count matches the arrays; nodes NULL asks for a query only
        let r = unsafe { libc::syscall(libc::SYS_move_pages, pid, ptrs.len() as libc::c_ulong, ptrs.as_ptr(), std::ptr::null::<i32>(), st.as_mut_ptr(), 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            st.iter_mut().for_each(|s| *s = -e);
        }
    }
    out
}

/// Move the pages at `addrs` of `pid` to `nodes` (one call: at most [`MOVE_BATCH`] pages).
/// Returns, per page, 0 if it is now on its target node, else a positive errno.
pub fn move_pages(pid: i32, addrs: &[u64], nodes: &[i32]) -> Vec<i32> {
    debug_assert_eq!(addrs.len(), nodes.len());
    let ptrs: Vec<*mut libc::c_void> = addrs.iter().map(|&a| a as *mut libc::c_void).collect();
    let mut status = vec![0i32; addrs.len()];
    // SAFETY: the three arrays have `count` elements
    let r = unsafe { libc::syscall(libc::SYS_move_pages, pid, ptrs.len() as libc::c_ulong, ptrs.as_ptr(), nodes.as_ptr(), status.as_mut_ptr(), MPOL_MF_MOVE) };
    if r < 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        return vec![e; addrs.len()];
    }
    status
        .iter()
        .zip(nodes)
        .map(|(&s, &n)| {
            if s == n {
                0
            } else if s < 0 {
                -s
            } else {
                libc::EAGAIN
            }
        })
        .collect()
}

/// A node mask for set_mempolicy: 16 words, nodes 0..1023.
pub fn nodemask(nodes: &[u32]) -> [libc::c_ulong; 16] {
    let mut m = [0 as libc::c_ulong; 16];
    for &n in nodes {
        m[(n / 64) as usize] |= 1 << (n % 64);
    }
    m
}

/// set_mempolicy(2) for the calling thread; async-signal-safe (used between fork and exec).
pub fn set_mempolicy(mode: i32, mask: &[libc::c_ulong; 16]) -> std::io::Result<()> {
    // maxnode counts one more than the highest bit the kernel reads (as libnuma passes it)
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), (16 * 64 + 1) as libc::c_ulong) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Does this kernel keep soft-dirty bits? A page just written is soft-dirty where it does
/// (CONFIG_MEM_SOFT_DIRTY); otherwise bit 55 is always 0. Checked on a page of our own,
/// without clearing anything.
pub fn soft_dirty_supported() -> bool {
    let page = vec![1u8; 2 * 4096];
    let addr = (page.as_ptr() as u64 + 4095) & !4095;
    // SAFETY: addr lies within `page`
    unsafe { std::ptr::write_volatile(addr as *mut u8, 7) };
    let Ok(f) = std::fs::File::open("/proc/self/pagemap") else { return false };
    let mut b = [0u8; 8];
    use std::os::unix::fs::FileExt;
    let ok = f.read_exact_at(&mut b, addr / 4096 * 8).is_ok() && PagemapEntry(u64::from_le_bytes(b)).soft_dirty();
    drop(page);
    ok
}

pub fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// CPU time of the calling thread, ns.
/// The fields of a `/proc/PID/stat` line from the third (the state) on. The command name (field
/// 2) is in parentheses and may hold spaces and parentheses itself: fields are counted from the
/// last ')' (proc(5)).
pub fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.rsplit_once(')')?.1.split_ascii_whitespace().collect())
}

/// CPU time, user and kernel, of the task `pid` (a process's main thread, or a kernel thread)
/// so far, from `/proc/PID/stat` (fields 14 and 15, in clock ticks; proc(5)).
pub fn task_cpu_s(pid: i32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&s)?;
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: no pointers
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// CPU time so far of the kernel's page reclaim threads (`kswapdN`, one per node), summed:
/// demotion in a tiered system is their work (mm/vmscan.c).
pub fn kswapd_cpu_s() -> f64 {
    let Ok(rd) = std::fs::read_dir("/proc") else { return 0.0 };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("kswapd")))
        .filter_map(task_cpu_s)
        .sum()
}

pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frames_node_comes_from_its_memory_block() {
        // the testbed's layout: 128 MiB blocks, node 0 blocks 0-3, node 1 blocks 4-11 (a hole
        // at 3 GiB: blocks 24-31 of node 1 above 4 GiB)
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("sys/devices/system");
        std::fs::create_dir_all(sys.join("memory")).unwrap();
        std::fs::write(sys.join("memory/block_size_bytes"), "8000000\n").unwrap();
        std::fs::create_dir_all(sys.join("node")).unwrap();
        std::fs::write(sys.join("node/has_memory"), "0-1\n").unwrap();
        for (node, blocks) in [(0, vec![0, 1, 2, 3]), (1, vec![4, 5, 24, 25])] {
            for b in blocks {
                std::fs::create_dir_all(sys.join(format!("node/node{node}/memory{b}"))).unwrap();
            }
        }
        let t = PfnNodes::read(d.path(), 4096).unwrap();
        let per_block = (128 << 20) / 4096;
        assert_eq!(t.node(0), 0);
        assert_eq!(t.node(4 * per_block - 1), 0);
        assert_eq!(t.node(4 * per_block), 1);
        assert_eq!(t.node(24 * per_block + 7), 1);
        assert_eq!(t.node(10 * per_block), -libc::ENOENT, "a frame in no block");
    }

    #[test]
    fn maps_lines_parse_and_the_program_data_is_picked() {
        let text = "\
55d0c8a00000-55d0c8a21000 r--p 00000000 fd:01 1234567                    /usr/bin/gups
55d0c8c21000-55d0c8c42000 rw-p 00021000 fd:01 1234567                    /usr/bin/gups
55d0c9e5a000-55d0c9e7b000 rw-p 00000000 00:00 0                          [heap]
7f1c2c000000-7f1c34001000 rw-p 00000000 00:00 0 
7f1c34001000-7f1c34002000 ---p 00000000 00:00 0 
7f1c3a3e4000-7f1c3a3e8000 rw-s 00000000 00:05 99                         /dev/shm/x y
7ffd1c9b6000-7ffd1c9d7000 rw-p 00000000 00:00 0                          [stack]
7ffd1c9fb000-7ffd1c9ff000 r--p 00000000 00:00 0                          [vvar]
7fff00000000-7fff00001000 rw-p 00000000 00:00 0                          [anon:arena]
7fff00001000-7fff00081000 r--p 00000000 00:00 0 
";
        let v = parse_maps("maps", text).unwrap();
        assert_eq!(v.len(), 10);
        assert_eq!((v[0].start, v[0].end), (0x55d0c8a00000, 0x55d0c8a21000));
        assert_eq!(v[5].name, "/dev/shm/x y"); // a name with a space survives
        assert!(!v[5].private);
        let data: Vec<&str> = v.iter().filter(|m| m.is_program_data()).map(|m| m.name.as_str()).collect();
        // the read-only anonymous region (data the program write-protected) counts; the guard
        // page (---p) and the read-only [vvar] do not
        assert_eq!(data, vec!["[heap]", "", "[stack]", "[anon:arena]", ""]);
        assert_eq!(v[3].pages(4096), 0x8001);
    }

    #[test]
    fn bad_maps_lines_name_the_line() {
        for (text, word) in [
            ("zz-10 rw-p 0 0:0 0\n", "start address"),
            ("10-5 rw-p 0 0:0 0\n", "not after"),
            ("10-20 rw 0 0:0 0\n", "permissions"),
            ("10-20\n", "permissions"),
            ("10-20 rw-p 0 0:0 x\n", "inode"),
        ] {
            let e = parse_maps("/proc/7/maps", &format!("10-20 rw-p 0 0:0 0\n{text}")).unwrap_err().to_string();
            assert!(e.contains("/proc/7/maps: line 2") && e.contains(word), "{e}");
        }
    }

    #[test]
    fn pagemap_bits() {
        // present + soft-dirty + exclusive, PFN hidden (0) as for an unprivileged reader
        let e = (1u64 << 63) | (1 << 55) | (1 << 56);
        let swapped = 1u64 << 62;
        let bytes: Vec<u8> = [e, swapped, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let p = parse_pagemap(&bytes);
        assert_eq!(p.len(), 3);
        assert!(p[0].present() && p[0].soft_dirty() && p[0].exclusive() && !p[0].swapped());
        assert!(!p[1].present() && p[1].swapped() && !p[1].soft_dirty());
        assert!(!p[2].present());
    }

    #[test]
    fn nodelists() {
        assert_eq!(parse_nodelist("x", "0\n").unwrap(), vec![0]);
        assert_eq!(parse_nodelist("x", "0-2,5, 7-8").unwrap(), vec![0, 1, 2, 5, 7, 8]);
        assert_eq!(parse_nodelist("x", "\n").unwrap(), Vec::<u32>::new());
        let e = parse_nodelist("/sys/x/nodelist", "0-a").unwrap_err().to_string();
        assert!(e.starts_with("/sys/x/nodelist: '0-a' is not a node list"), "{e}");
        assert!(parse_nodelist("x", "3-1").is_err());
    }

    #[test]
    fn vmstat_and_its_deltas() {
        let a = parse_vmstat("nr_free_pages 100\npgpromote_success 5\npgmigrate_success 10\nbogus\n");
        let b = parse_vmstat("nr_free_pages 90\npgpromote_success 8\npgmigrate_success 30\n");
        assert_eq!(a["nr_free_pages"], 100);
        let d = vmstat_delta(&a, &b);
        assert_eq!(d.get("pgpromote_success"), Some(&3));
        assert_eq!(d.get("pgmigrate_success"), Some(&20));
        assert!(!d.contains_key("pgdemote_kswapd")); // a counter this kernel lacks is left out
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, t) in files {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        }
        d
    }

    const NODES: &str = "sys/devices/system/node";

    #[test]
    fn tiers_from_memory_tiering_then_distances_then_given() {
        // the testbed's layout: node 1 CPU-less, in a lower memory tier
        let t = tree(&[
            (&format!("{NODES}/has_memory"), "0-1\n"),
            (&format!("{NODES}/node0/cpulist"), "0-1\n"),
            (&format!("{NODES}/node1/cpulist"), "\n"),
            (&format!("{NODES}/node0/distance"), "10 20\n"),
            (&format!("{NODES}/node1/distance"), "20 10\n"),
            (&format!("{NODES}/node0/meminfo"), "Node 0 MemTotal:  1048576 kB\nNode 0 MemFree: 5 kB\n"),
            ("sys/devices/virtual/memory_tiering/memory_tier4/nodelist", "0\n"),
            ("sys/devices/virtual/memory_tiering/memory_tier54/nodelist", "1\n"),
        ]);
        assert_eq!(discover_tiers(t.path(), None, None).unwrap(), Tiers { fast: 0, slow: Some(1), from: "memory_tiering", nodes: vec![0, 1] });
        assert_eq!(node_mem_total_bytes(t.path(), 0).unwrap(), 1 << 30);
        // the tier numbers rank, not the node numbers: node 1 fast here
        std::fs::write(t.path().join("sys/devices/virtual/memory_tiering/memory_tier4/nodelist"), "1\n").unwrap();
        std::fs::write(t.path().join("sys/devices/virtual/memory_tiering/memory_tier54/nodelist"), "0\n").unwrap();
        assert_eq!(discover_tiers(t.path(), None, None).unwrap().fast, 1);
        // no memory_tiering: distances (fast = the first node with CPUs, slow = the farthest)
        std::fs::remove_dir_all(t.path().join("sys/devices/virtual")).unwrap();
        let d = discover_tiers(t.path(), None, None).unwrap();
        assert_eq!((d.fast, d.slow, d.from), (0, Some(1), "distance"));
        // given
        let g = discover_tiers(t.path(), Some(1), Some(0)).unwrap();
        assert_eq!((g.fast, g.slow, g.from), (1, Some(0), "given"));
    }

    #[test]
    fn a_node_that_does_not_exist_and_a_single_node_machine() {
        let t = tree(&[(&format!("{NODES}/has_memory"), "0\n"), (&format!("{NODES}/node0/distance"), "10\n")]);
        let e = discover_tiers(t.path(), None, Some(3)).unwrap_err().to_string();
        assert_eq!(e, "--slow-node: 3: no NUMA node 3 with memory on this machine (nodes with memory: 0)");
        let s = discover_tiers(t.path(), None, None).unwrap();
        assert_eq!((s.fast, s.slow, s.from), (0, None, "single node"));
        let e = discover_tiers(t.path(), Some(0), Some(0)).unwrap_err().to_string();
        assert!(e.contains("also the fast node"), "{e}");
    }

    #[test]
    fn pages_in_large_folios_come_from_runs_of_frames_and_their_compound_flags() {
        const H: u64 = KPF_COMPOUND_HEAD;
        const T: u64 = KPF_COMPOUND_TAIL;
        // frames: a 4-page folio at 100 (head + 3 tails), a page of its own at 104 right after
        // it, a page at 7 (no neighbour: no read), the tail half of a folio whose head is not
        // mapped here at 201-202, and an unknown frame (0: no CAP_SYS_ADMIN)
        let pfns = [100, 101, 102, 103, 104, 7, 201, 202, 0];
        let flags = |pfn: u64| match pfn {
            100 => H,
            101..=103 | 201 | 202 => T,
            _ => 0,
        };
        let mut reads = Vec::new();
        let n = large_folio_pages(&pfns, &mut |pfn, n| {
            reads.push((pfn, n));
            Some((pfn..pfn + n as u64).map(flags).collect())
        });
        assert_eq!(n, 6);
        assert_eq!(reads, vec![(100, 5), (201, 2)]);
        // without the flags, no page is counted
        assert_eq!(large_folio_pages(&pfns, &mut |_, _| None), 0);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(libc::EBUSY), "EBUSY");
        assert_eq!(errno_name(-1), "over_budget");
        assert_eq!(errno_name(4242), "errno 4242");
    }

    #[test]
    fn query_and_move_our_own_pages() {
        // move_pages on our own pid: a query finds a touched page on a node, an untouched
        // one not present; a move to the node it is on succeeds (every machine has node 0)
        let len = 4 * 4096usize;
        // SAFETY: a fresh private anonymous mapping, unmapped below
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(p, libc::MAP_FAILED);
        let a = p as u64;
        unsafe { std::ptr::write_volatile(p as *mut u8, 1) };
        let pid = std::process::id() as i32;
        let q = query_nodes(pid, &[a, a + 4096]);
        assert!(q[0] >= 0, "{q:?}");
        assert_eq!(q[1], -libc::ENOENT);
        assert_eq!(move_pages(pid, &[a], &[q[0]]), vec![0]);
        // a page that is not there cannot move: a per-page errno, not a failed call
        assert_eq!(move_pages(pid, &[a + 8192], &[q[0]]), vec![libc::ENOENT]);
        unsafe { libc::munmap(p, len) };
    }
}
