//! The processes `tierkit run` observes and places as one workload: the program (or the
//! process given with `--pid`) and every process descended from it, found again at each
//! observation, so that a program started through a wrapper (`sh -c 'exec prog'`, a shim) or
//! one that forks workers is seen whole.
//!
//! The decision code sees one address space. Each process gets a small number, its *tag*, in
//! the order tierkit first sees it (the program itself is tag 0), and its pages are given to
//! the decider at `tag << TAG_SHIFT | address`: user addresses on x86-64 and arm64 with 4-level
//! page tables are below 2^47 (Linux, Documentation/arch/x86/x86_64/mm.rst), so the tagged
//! addresses of different processes never collide, and those of the program are its own.
//! A page above 2^48 (5-level page tables) is left out and counted.

use std::collections::HashMap;
use std::path::Path;

/// Where a process's tag sits in a tagged address.
pub const TAG_SHIFT: u32 = 48;
/// Tags available: the top 16 bits less the sign bit.
pub const MAX_TAGS: usize = 1 << 15;

/// The parent of each process, from `/proc/*/stat` (field 4), and whether it is a zombie.
/// Processes that end while the directory is read are skipped.
pub fn process_parents(proc_root: &Path) -> HashMap<i32, (i32, bool)> {
    let mut out = HashMap::new();
    let Ok(rd) = std::fs::read_dir(proc_root) else { return out };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        if let Some((ppid, zombie)) = parse_stat_parent(&stat) {
            out.insert(pid, (ppid, zombie));
        }
    }
    out
}

/// The parent pid and the zombie state from one `/proc/PID/stat` line ([`crate::sys::stat_fields`]).
pub fn parse_stat_parent(stat: &str) -> Option<(i32, bool)> {
    let f = crate::sys::stat_fields(stat)?;
    let (state, ppid) = (f.first()?, f.get(1)?.parse().ok()?);
    Some((ppid, *state == "Z"))
}

/// `root` and its living descendants (zombies have no memory left to observe), root first,
/// then in breadth-first order, each level by pid.
pub fn tree(root: i32, parents: &HashMap<i32, (i32, bool)>) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &(ppid, _)) in parents {
        if pid != root {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut level = vec![root];
    let mut seen = std::collections::HashSet::new();
    while !level.is_empty() {
        let mut next = Vec::new();
        for pid in level {
            if !seen.insert(pid) {
                continue;
            }
            if parents.get(&pid).is_some_and(|&(_, z)| !z) {
                out.push(pid);
            }
            if let Some(c) = children.get_mut(&pid) {
                c.sort_unstable();
                next.extend(c.iter().copied());
            }
        }
        level = next;
    }
    out
}

/// Tags given to processes in the order first seen; a pid keeps its tag for the run.
#[derive(Default, Debug)]
pub struct Tags {
    pids: Vec<i32>,
    index: HashMap<i32, u16>,
    /// processes seen after every tag was taken: not observed
    pub refused: u64,
}

impl Tags {
    /// The tag of `pid`, given now if it has none; None when all are taken.
    pub fn tag(&mut self, pid: i32) -> Option<u16> {
        if let Some(&t) = self.index.get(&pid) {
            return Some(t);
        }
        if self.pids.len() >= MAX_TAGS {
            self.refused += 1;
            return None;
        }
        let t = self.pids.len() as u16;
        self.pids.push(pid);
        self.index.insert(pid, t);
        Some(t)
    }

    pub fn pid(&self, tag: u16) -> Option<i32> {
        self.pids.get(tag as usize).copied()
    }

    /// Processes tagged so far.
    pub fn len(&self) -> usize {
        self.pids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }
}

pub fn tagged(tag: u16, addr: u64) -> u64 {
    (tag as u64) << TAG_SHIFT | addr
}

/// (tag, address in its process) of a tagged address.
pub fn untag(a: u64) -> (u16, u64) {
    ((a >> TAG_SHIFT) as u16, a & ((1 << TAG_SHIFT) - 1))
}

/// Moves one batch in one process: (pid, addresses, targets) -> a status per page.
pub type ProcessMoves<'a, T> = dyn FnMut(i32, &[u64], &[T]) -> Vec<i32> + 'a;

/// Carry out one batch of moves given at tagged addresses, one `exec(pid, addresses, targets)`
/// call per process, and give each page's status back in the batch's order. Pages of a tag no
/// process holds fail with `ESRCH`.
pub fn exec_tagged<T: Copy>(tags: &Tags, addrs: &[u64], to: &[T], exec: &mut ProcessMoves<'_, T>) -> Vec<i32> {
    let mut out = vec![0i32; addrs.len()];
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        let (t, _) = untag(a);
        match groups.iter_mut().find(|g| g.0 == t) {
            Some(g) => g.1.push(i),
            None => groups.push((t, vec![i])),
        }
    }
    for (t, idx) in groups {
        let Some(pid) = tags.pid(t) else {
            idx.iter().for_each(|&i| out[i] = libc::ESRCH);
            continue;
        };
        let a: Vec<u64> = idx.iter().map(|&i| untag(addrs[i]).1).collect();
        let d: Vec<T> = idx.iter().map(|&i| to[i]).collect();
        for (&i, s) in idx.iter().zip(exec(pid, &a, &d)) {
            out[i] = s;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents(v: &[(i32, i32, bool)]) -> HashMap<i32, (i32, bool)> {
        v.iter().map(|&(p, pp, z)| (p, (pp, z))).collect()
    }

    #[test]
    fn the_tree_is_the_root_and_its_living_descendants_in_order() {
        // 10 -> 12, 11; 11 -> 20 (zombie) -> 30; 99 is not ours
        let p = parents(&[(1, 0, false), (10, 1, false), (12, 10, false), (11, 10, false), (20, 11, true), (30, 20, false), (99, 1, false)]);
        assert_eq!(tree(10, &p), vec![10, 11, 12, 30]);
        // a root that has gone: nothing
        assert_eq!(tree(5, &p), Vec::<i32>::new());
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(parse_stat_parent("42 (a) b (c)) S 7 42 42 0 -1"), Some((7, false)));
        assert_eq!(parse_stat_parent("42 (sh) Z 1 42"), Some((1, true)));
        assert_eq!(parse_stat_parent("42 (sh"), None);
    }

    #[test]
    fn tags_stay_with_their_process_and_addresses_round_trip() {
        let mut t = Tags::default();
        assert_eq!(t.tag(100), Some(0));
        assert_eq!(t.tag(200), Some(1));
        assert_eq!(t.tag(100), Some(0));
        let a = tagged(1, 0x7ffd_1234_5000);
        assert_eq!(untag(a), (1, 0x7ffd_1234_5000));
        assert_eq!(tagged(0, 0x5000), 0x5000, "the program's own addresses are untagged");
    }

    #[test]
    fn a_batch_is_split_by_process_and_statuses_come_back_in_order() {
        let mut t = Tags::default();
        t.tag(100);
        t.tag(200);
        let addrs = [tagged(1, 0x1000), tagged(0, 0x2000), tagged(1, 0x3000), tagged(2, 0x4000)];
        let mut calls = Vec::new();
        let st = exec_tagged(&t, &addrs, &[1u8, 0, 1, 0], &mut |pid, a, d| {
            calls.push((pid, a.to_vec(), d.to_vec()));
            a.iter().map(|&x| (x >> 12) as i32).collect()
        });
        assert_eq!(calls, vec![(200, vec![0x1000, 0x3000], vec![1, 1]), (100, vec![0x2000], vec![0])]);
        assert_eq!(st, vec![1, 2, 3, libc::ESRCH]);
    }
}
