//! `tierkit run`: run a program (or attach to one) on a real Linux with a fast and a slow
//! NUMA node, place its pages under a policy, and report what happened (docs/real-linux.md).
//!
//! Four kinds of policy:
//! - memory policies set before `exec` (`first-touch`, `all-fast`, `all-slow`, `interleave`);
//! - daemon policies: the simulator's decision code (`tierkit_core::live::build_decider`)
//!   fed with observations of the program (pagemap, soft-dirty bits, DAMON, move_pages
//!   queries), its moves carried out with `move_pages(2)` within the fast budget;
//! - kernel policies (`autonuma-tiering`, `damon-tiering`): kernel settings made for the run
//!   and put back afterwards, only inside the testbed VM or where allowed ([`kernel`]).
//!
//! Every policy observes the program the same way, so that the reports compare.

#![recursion_limit = "256"]

pub mod damon;
pub mod guided;
pub mod kernel;
pub mod kernel_params;
pub mod regions;
pub mod sys;
pub mod workload;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};
use tierkit_core::live::{LiveDecider, LiveMove, MoveResult, Observation, PageObs};
use tierkit_core::mechanics::TierId;
use tierkit_core::policy::PolicySpec;
use tierkit_core::{Error, Result};

/// Observation interval when neither `--interval` nor a daemon policy gives one.
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000_000;
/// The least time bound of a daemon step's moves when `--step-limit` is not given (the bound is
/// the policy's interval, at least this). In the paced testbed VM one batch of 1,024 moves
/// takes about 0.3 s, and at a 1 s bound `history` bringing a 32 MiB hot set in was cut at
/// every step and brought 6% of it in 40 s (90% with the bound at 30 s).
pub const DEFAULT_STEP_LIMIT_NS: u64 = 10_000_000_000;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "tierkit run",
    about = "Run a program on a machine with a fast and a slow NUMA node (DRAM + CXL, DRAM + Optane, the testbed VM), place its pages under a policy, and report pages per node over time, migrations and the daemon's cost (docs/real-linux.md).",
    after_help = "Policies: first-touch (default), all-fast, all-slow, interleave (memory policy at exec); \
daemon policies (the simulator's decision code, see 'tierkit policies'); autonuma-tiering, damon-tiering \
(kernel settings, restored afterwards; only inside the testbed VM or with TIERKIT_ALLOW_KERNEL_SETTINGS=1). \
Exit status: the program's (128 + signal if a signal ended it); 2 for an error of tierkit's."
)]
pub struct Args {
    /// Placement policy, NAME[:key=value,...]
    #[arg(long, default_value = "first-touch")]
    pub policy: String,
    /// The fast node [default: from /sys/devices/virtual/memory_tiering, else node distances]
    #[arg(long)]
    pub fast_node: Option<u32>,
    /// The slow node [default: as --fast-node]
    #[arg(long)]
    pub slow_node: Option<u32>,
    /// Most of the program tierkit puts on the fast node (512M, 1G) [default: the fast node's size]
    #[arg(long)]
    pub fast_capacity: Option<String>,
    /// Time between observations (100ms, 1s) [default: 1s]; for a daemon policy, its own
    /// interval parameter (hyplacer's interval=, history's period=) [default: the policy's]
    #[arg(long)]
    pub interval: Option<String>,
    /// Longest one daemon step may take after its observation, the decision and its moves
    /// (100ms, 2s): moves still to do when it runs out are not tried, and the report counts the
    /// steps cut [default: the policy's interval, at least 10s]
    #[arg(long)]
    pub step_limit: Option<String>,
    /// Most pages the policy may migrate, in MiB/s: a daemon policy's moves are paced to it; a
    /// kernel policy's own limits are lowered to it (autonuma-tiering's promotion rate limit,
    /// damon-tiering's quotas per reset interval)
    #[arg(long, value_name = "MB/s")]
    pub max_migrate_rate: Option<f64>,
    /// Write one CSV row per observation here
    #[arg(long)]
    pub timeseries: Option<PathBuf>,
    /// Print one JSON object (the last line of stdout) instead of the table (on stderr)
    #[arg(long)]
    pub json: bool,
    /// Overwrite the --timeseries and --region-series files
    #[arg(long)]
    pub force: bool,
    /// A file the program writes while it runs, naming ranges of its memory: lines
    /// 'region NAME 0xSTART BYTES' (other lines ignored); read again at every observation, a
    /// missing file and a last line without its newline ignored
    #[arg(long)]
    pub regions: Option<PathBuf>,
    /// Write one CSV row per observation per region of --regions (needed) here: time_ms,
    /// region, pages_fast, pages_slow (the program's present pages in the region's range on
    /// each node)
    #[arg(long)]
    pub region_series: Option<PathBuf>,
    /// DAMON access monitoring of the program: on, off, or auto (on for daemon policies)
    #[arg(long, default_value = "auto")]
    pub damon: String,
    /// DAMON regions at most (more: closer to per-page referenced bits, more cost)
    #[arg(long, default_value_t = 4000)]
    pub damon_regions: u64,
    /// DAMON's aggregation window: a page is seen referenced if it was accessed in the last
    /// window before an observation (10ms to 10s; at least 2 of DAMON's 5 ms samples)
    #[arg(long, default_value = "50ms")]
    pub damon_window: String,
    /// Apply this version-2 guidance with the preloaded allocator (libtierkit_alloc.so): each
    /// allocation site's arena bound to its tier's node; with a memory policy (the default
    /// first-touch), which places everything else
    #[arg(long, conflicts_with = "pid")]
    pub guidance: Option<PathBuf>,
    /// Transparent huge pages for the program: off (prctl PR_SET_THP_DISABLE before it
    /// starts: its own setting, not the machine's), keep, or auto (off for daemon policies,
    /// whose decisions and fast budget are per 4 KiB page while move_pages moves a huge page
    /// whole; kept otherwise)
    #[arg(long, default_value = "auto")]
    pub thp: String,
    /// Attach to this running process instead of starting a program
    #[arg(long, conflicts_with = "program")]
    pub pid: Option<i32>,
    /// Check the policy spec, the nodes, the fast capacity and the permissions, print what a
    /// run would do (the parameters it would set in the kernel, the budget), and exit without
    /// starting anything or changing any setting; no program needed
    #[arg(long)]
    pub dry_run: bool,
    /// The program and its arguments, after --
    #[arg(last = true)]
    pub program: Vec<std::ffi::OsString>,
}

/// What kind of policy a spec names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Memory,
    Daemon,
    Kernel,
}

/// How `tierkit run` runs a policy, from its registry entry (`PolicyInfo::deploy`); a policy
/// that cannot run on Linux is one error saying why.
pub fn policy_kind(name: &str) -> Result<Kind> {
    use tierkit_core::policy::Deploy;
    let info = tierkit_core::policy::lookup(name)?;
    match info.deploy {
        Deploy::Memory => Ok(Kind::Memory),
        Deploy::Kernel => Ok(Kind::Kernel),
        Deploy::Daemon => Ok(Kind::Daemon),
        Deploy::Allocator => Err(Error::config(
            "--policy",
            format!("{name} is applied by the preloaded allocator: tierkit guide, then tierkit run --guidance FILE (docs/guidance.md)"),
        )),
        Deploy::Hardware { why } => Err(Error::config("--policy", format!("{name} cannot run on Linux: {why}"))),
        Deploy::FutureKnowledge => Err(Error::config("--policy", format!("{name} uses knowledge of the future: a bound to compare with, not a policy to run"))),
        Deploy::NotLive { why } => Err(Error::config("--policy", format!("{name} does not run live: {why}"))),
    }
}

/// The entry point of `tierkit run` and of the `tierkit-run` binary: `args[0]` is the
/// program name. Returns the exit status: the program's, or 2 after one error line.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return 0;
            }
            let msg = e.to_string();
            let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("bad arguments");
            eprintln!("tierkit: error: run: {} (see 'tierkit run --help')", first.trim_start_matches("error: "));
            return 2;
        }
    };
    match run(&args, None) {
        Ok(rep) => {
            if args.json {
                println!("{}", serde_json::to_string(&rep.json).unwrap());
            } else if args.dry_run {
                eprint!("{}", rep.dry_run_table());
            } else {
                eprint!("{}", rep.table());
            }
            rep.exit_status
        }
        Err(e) => {
            eprintln!("tierkit: error: {e}");
            2
        }
    }
}

/// The outcome of one run.
pub struct Report {
    pub json: Value,
    pub exit_status: i32,
}

impl Report {
    /// `--dry-run`'s table: what a run would do.
    pub fn dry_run_table(&self) -> String {
        let j = &self.json;
        let mut s = String::from("tierkit run --dry-run: every check passed; nothing was started or changed\n");
        let mut row = |k: &str, v: String| s.push_str(&format!("  {k:<28} {v}\n"));
        row("policy", format!("{} ({})", j["policy"].as_str().unwrap_or(""), j["how"].as_str().unwrap_or("")));
        let slow = j["slow_node"].as_u64().map_or("none".to_string(), |n| n.to_string());
        row("nodes", format!("fast {} slow {} (from {})", j["fast_node"], slow, j["tiers_from"].as_str().unwrap_or("")));
        row("fast budget", format!("{} pages", j["fast_budget_pages"]));
        if let Some(k) = j["kernel_settings"].as_object() {
            for (name, v) in k {
                if !v.is_null() {
                    row(&format!("  sets {name}"), v.to_string());
                }
            }
        }
        for n in j["notes"].as_array().into_iter().flatten() {
            row("note", n.as_str().unwrap_or("").to_string());
        }
        s
    }

    /// A short human table (like `simulate`'s).
    pub fn table(&self) -> String {
        let j = &self.json;
        let mut s = String::new();
        let g = |k: &str| j.get(k).cloned().unwrap_or(Value::Null);
        let mut row = |k: &str, v: String| s.push_str(&format!("  {k:<28} {v}\n"));
        row("policy", format!("{} ({})", g("policy").as_str().unwrap_or(""), g("kind").as_str().unwrap_or("")));
        row(
            "nodes",
            format!(
                "fast {} slow {} (from {})",
                g("fast_node"),
                g("slow_node").as_u64().map_or("none".into(), |n| n.to_string()),
                g("tiers_from").as_str().unwrap_or("")
            ),
        );
        row("fast budget", format!("{} pages", g("fast_budget_pages")));
        row("wall time", format!("{:.3} s", g("wall_s").as_f64().unwrap_or(0.0)));
        row("exit status", format!("{}", g("exit_status")));
        let p = &j["pages"];
        row("pages fast / slow (last)", format!("{} / {}", p["last_fast"], p["last_slow"]));
        row("pages fast (max)", format!("{}", p["max_fast"]));
        let m = &j["migrations"];
        row("migrations req/done/failed", format!("{} / {} / {}", m["requested"], m["done"], m["failed"]));
        if let Some(o) = m["failed_by_errno"].as_object().filter(|o| !o.is_empty()) {
            row("  failures", o.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
        }
        row("observations", format!("{} every {} ms", g("observations"), g("interval_ms")));
        row("daemon CPU", format!("{:.3} s", g("daemon_cpu_s").as_f64().unwrap_or(0.0)));
        let k = &j["kernel_threads_cpu_s"];
        let f = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.3} s"));
        row(
            "kernel threads CPU",
            format!("kdamond monitor {}, kdamond tiering {}, kswapd {}", f(&k["kdamond_monitor"]), f(&k["kdamond_tiering"]), f(&k["kswapd"])),
        );
        row("policy CPU (all above)", f(&j["policy_cpu_s"]));
        if let Some(p) = j["processes"].as_object().filter(|p| p["seen"].as_u64() > Some(1)) {
            row("processes", format!("{} seen, at most {} at once", p["seen"], p["max_observed"]));
        }
        if j["steps_cut"].as_u64() > Some(0) {
            row("steps cut at their time bound", format!("{}", j["steps_cut"]));
        }
        if let Some(v) = j["vmstat"].as_object() {
            let nz: Vec<String> = v.iter().filter(|(_, x)| x.as_i64() != Some(0)).map(|(k, x)| format!("{k} {x}")).collect();
            row("vmstat deltas", if nz.is_empty() { "none".into() } else { nz.join(", ") });
        }
        let ga = &j["guided_alloc"];
        if ga.is_object() {
            row("guidance", ga["guidance"].as_str().unwrap_or("").to_string());
            row(
                "allocations guided / total",
                format!(
                    "{} / {} (unmatched {}, unwinds {})",
                    ga["allocations_total"].as_u64().unwrap_or(0) - ga["allocations_unmatched"].as_u64().unwrap_or(0),
                    ga["allocations_total"],
                    ga["allocations_unmatched"],
                    ga["unwinds"]
                ),
            );
            for a in ga["arenas"].as_array().into_iter().flatten() {
                row(
                    &format!("  arena {} (tier {}, node {})", a["id"], a["tier"], a["node"]),
                    format!("{} allocations, pages by node {}", a["allocations"], a["pages_by_node"]),
                );
            }
            let ph = &ga["phases"];
            if ph.is_object() {
                let sw = ph["switches"].as_array().map_or(0, |v| v.len());
                let moves: usize = ph["switches"].as_array().into_iter().flatten().map(|s| s["moves"].as_array().map_or(0, |m| m.len())).sum();
                row(
                    "per-phase guidance",
                    format!(
                        "{} phases, {sw} switches at {} markers ({} boundaries unmarked), {moves} arena moves, {} allocation calls",
                        ph["count"], ph["markers"], ph["unmarked_boundaries"], ph["allocation_calls"]
                    ),
                );
            }
        }
        if let Some(ks) = j["kernel_settings"].as_array() {
            for k in ks {
                row("  kernel setting", format!("{} = {} (was {}, restored: {})", k["path"].as_str().unwrap_or(""), k["set"], k["before"], k["restored"]));
            }
        }
        format!("tierkit run:\n{s}")
    }
}

// --- signals: passed on to the program we started ------------------------------------------

static CHILD: AtomicI32 = AtomicI32::new(0);
static GOT_SIGNAL: AtomicI32 = AtomicI32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    let first = GOT_SIGNAL.compare_exchange(0, sig, SeqCst, SeqCst).is_ok();
    STOP.store(true, SeqCst);
    let pid = CHILD.load(SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; a second signal means now
        unsafe { libc::kill(pid, if first { sig } else { libc::SIGKILL }) };
    }
}

/// SIGINT, SIGTERM and SIGHUP handlers for the run, the old ones put back on drop.
struct SignalGuard(Vec<(i32, libc::sigaction)>);

impl SignalGuard {
    fn install() -> SignalGuard {
        GOT_SIGNAL.store(0, SeqCst);
        STOP.store(false, SeqCst);
        let mut old = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: zeroed sigaction filled in; the handler only does atomics and kill
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as *const () as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut o: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut o) == 0 {
                    old.push((sig, o));
                }
            }
        }
        SignalGuard(old)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        CHILD.store(0, SeqCst);
        for (sig, o) in &self.0 {
            // SAFETY: restoring what sigaction gave us
            unsafe { libc::sigaction(*sig, o, std::ptr::null_mut()) };
        }
    }
}

// --- the process: started, or attached to -------------------------------------------------

enum Target {
    Child(std::process::Child),
    Attached,
}

struct Proc {
    pid: i32,
    target: Target,
    pidfd: Option<i32>,
    status: Option<std::process::ExitStatus>,
    gone: bool,
}

impl Proc {
    /// Wait up to `d` for the process to end; true if it has.
    fn wait_for(&mut self, d: Duration) -> bool {
        if self.gone {
            return true;
        }
        let deadline = Instant::now() + d;
        loop {
            if self.poll_gone() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || STOP.load(SeqCst) && matches!(self.target, Target::Attached) {
                return self.poll_gone();
            }
            match self.pidfd {
                Some(fd) => {
                    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd; a signal interrupts it (EINTR), then we loop
                    unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 200) as i32) };
                }
                None => std::thread::sleep(left.min(Duration::from_millis(10))),
            }
        }
    }

    fn poll_gone(&mut self) -> bool {
        if self.gone {
            return true;
        }
        match &mut self.target {
            Target::Child(c) => {
                if let Ok(Some(st)) = c.try_wait() {
                    CHILD.store(0, SeqCst);
                    self.status = Some(st);
                    self.gone = true;
                }
            }
            Target::Attached => {
                // SAFETY: signal 0 checks existence only
                let alive = unsafe { libc::kill(self.pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
                if !alive || !process_alive(self.pid) {
                    self.gone = true;
                }
            }
        }
        self.gone
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(fd) = self.pidfd.take() {
            // SAFETY: our descriptor
            unsafe { libc::close(fd) };
        }
    }
}

/// The program's own resource use once it has been reaped (getrusage(2), RUSAGE_CHILDREN:
/// tierkit starts no other child): CPU time in user and kernel mode, page faults, and context
/// switches (involuntary ones: something else wanted the program's CPU).
fn child_rusage() -> Value {
    // SAFETY: rusage is plain data; getrusage fills it
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return Value::Null;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    json!({
        "user_s": s(ru.ru_utime), "sys_s": s(ru.ru_stime),
        "minor_faults": ru.ru_minflt, "major_faults": ru.ru_majflt,
        "voluntary_switches": ru.ru_nvcsw, "involuntary_switches": ru.ru_nivcsw,
    })
}

fn pidfd_open(pid: i32) -> Option<i32> {
    // SAFETY: no pointers
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then_some(fd as i32)
}

// --- observing -------------------------------------------------------------------------------

/// What one observation saw, beyond the decider's [`Observation`].
#[derive(Default, Clone)]
struct Seen {
    pages: Vec<PageObs>,
    fast: u64,
    slow: u64,
    other: u64,
    referenced: u64,
    dirty: u64,
    regions: usize,
    ok: bool,
    /// Pages in large folios (transparent huge pages), where /proc/kpageflags tells
    folio_pages: u64,
    /// processes observed
    processes: usize,
    /// time spent reading DAMON's regions (and retargeting it), ns
    damon_ns: u64,
}

struct Observer {
    /// the program, or the process given with --pid: the root of the workload's process tree
    root: i32,
    page: u64,
    fast: u32,
    slow: Option<u32>,
    soft_dirty: bool,
    damon: Option<damon::VaddrMonitor>,
    /// `/proc/kpageflags` (root only), to find the pages that move together
    kpageflags: Option<std::fs::File>,
    /// each process's tag in the addresses the decider sees ([`workload`])
    tags: workload::Tags,
    /// the processes of the last observation
    procs: Vec<i32>,
    /// pages above the tagged address space, left out
    untaggable_pages: u64,
    /// the last error retargeting DAMON, if any
    damon_err: Option<String>,
    /// frame number -> node, where pagemap gives frame numbers (root)
    pfn_nodes: Option<sys::PfnNodes>,
    /// pages whose node came from their frame number, and from a move_pages query
    nodes_from_pfn: u64,
    nodes_queried: u64,
}

impl Observer {
    /// The workload's processes now: the root and its living descendants.
    fn processes(&self) -> Vec<i32> {
        workload::tree(self.root, &workload::process_parents(Path::new("/proc")))
    }

    /// Pages present in the program's data mappings of one process: (address, soft-dirty,
    /// pfn) each. Its pagemap is opened anew at each observation: a file opened before the
    /// process's exec reads the address space it had then (none, once it has gone).
    fn present_pages(&self, pid: i32) -> Option<Vec<(u64, bool, u64)>> {
        let path = format!("/proc/{pid}/maps");
        let vmas = sys::parse_maps(&path, &std::fs::read_to_string(&path).ok()?).ok()?;
        let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).ok()?;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for v in vmas.iter().filter(|v| v.is_program_data()) {
            // in slices of 64 Ki pages (512 KiB of pagemap)
            let mut a = v.start;
            while a < v.end {
                let n = ((v.end - a) / self.page).min(1 << 16);
                buf.resize(n as usize * 8, 0);
                if pagemap.read_exact_at(&mut buf, a / self.page * 8).is_err() {
                    break;
                }
                for (i, e) in sys::parse_pagemap(&buf).into_iter().enumerate() {
                    if e.present() {
                        out.push((a + i as u64 * self.page, e.soft_dirty(), e.pfn()));
                    }
                }
                a += n * self.page;
            }
        }
        Some(out)
    }

    fn observe(&mut self) -> Seen {
        let mut seen = Seen::default();
        let procs = self.processes();
        if procs.is_empty() {
            return seen;
        }
        let mut regions: std::collections::HashMap<i32, Vec<damon::Region>> = std::collections::HashMap::new();
        let damon_t0 = Instant::now();
        if let Some(m) = &mut self.damon {
            if let Err(e) = m.retarget(&procs) {
                self.damon_err = Some(e.to_string());
            }
            let per = m.regions().unwrap_or_default();
            for (pid, r) in m.pids.iter().zip(per) {
                regions.insert(*pid, r);
            }
            seen.regions = regions.values().map(Vec::len).sum();
        }
        seen.damon_ns = damon_t0.elapsed().as_nanos() as u64;
        let mut pfns = Vec::new();
        for &pid in &procs {
            let Some(tag) = self.tags.tag(pid) else { continue };
            let Some(present) = self.present_pages(pid) else { continue };
            seen.ok = true;
            // each page's node from its frame number where pagemap gives them all (root), else
            // asked of the kernel
            let nodes: Vec<i32> = match &self.pfn_nodes {
                Some(t) if present.iter().all(|p| p.2 != 0) => {
                    self.nodes_from_pfn += present.len() as u64;
                    present.iter().map(|p| t.node(p.2)).collect()
                }
                _ => {
                    self.nodes_queried += present.len() as u64;
                    sys::query_nodes(pid, &present.iter().map(|p| p.0).collect::<Vec<u64>>())
                }
            };
            let none = Vec::new();
            let rs = regions.get(&pid).unwrap_or(&none);
            for (&(addr, d, pfn), &node) in present.iter().zip(&nodes) {
                let tier: TierId = if node == self.fast as i32 {
                    0
                } else if Some(node as u32) == self.slow && node >= 0 {
                    1
                } else {
                    if node >= 0 {
                        seen.other += 1;
                    }
                    continue;
                };
                if addr >> workload::TAG_SHIFT != 0 {
                    self.untaggable_pages += 1;
                    continue;
                }
                pfns.push(pfn);
                let accesses = damon::region_of(rs, addr).map_or(0, |r| r.nr_accesses);
                let p = PageObs { addr: workload::tagged(tag, addr), tier, referenced: accesses > 0, dirty: d && self.soft_dirty, accesses };
                if tier == 0 {
                    seen.fast += 1;
                } else {
                    seen.slow += 1;
                }
                seen.referenced += p.referenced as u64;
                seen.dirty += p.dirty as u64;
                seen.pages.push(p);
            }
        }
        // tags are given in the order processes are first seen, which the tree's order need
        // not keep: the decider takes pages by address
        if !seen.pages.is_sorted_by_key(|p| p.addr) {
            seen.pages.sort_unstable_by_key(|p| p.addr);
        }
        if let Some(kf) = &self.kpageflags {
            let mut buf = Vec::new();
            seen.folio_pages = sys::large_folio_pages(&pfns, &mut |pfn, n| {
                buf.resize(n * 8, 0);
                kf.read_exact_at(&mut buf, pfn * 8).ok()?;
                Some(buf.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
            });
        }
        seen.processes = procs.len();
        self.procs = procs;
        seen
    }

    fn clear_soft_dirty(&self) {
        if self.soft_dirty {
            for pid in &self.procs {
                let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "4");
            }
        }
    }

    /// Move one batch of pages given at tagged addresses, each in its own process; a batch
    /// that fails as a whole because its process has ended counts as [`sys::GONE`].
    fn exec_moves(&self, tiers: &sys::Tiers, addrs: &[u64], to: &[TierId]) -> Vec<i32> {
        workload::exec_tagged(&self.tags, addrs, to, &mut |pid, a, t| {
            let st = exec_moves(pid, tiers, a, t);
            // move_pages answers ESRCH for a pid that has gone, EINVAL for one whose memory
            // has (an exiting process) (mm/migrate.c, find_mm_struct)
            if !st.is_empty() && st.iter().all(|&e| e == libc::ESRCH || e == libc::EINVAL) && !process_alive(pid) {
                return vec![sys::GONE; st.len()];
            }
            st
        })
    }
}

/// Whether `pid` still has memory: it exists and is not a zombie.
fn process_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| workload::parse_stat_parent(&s)).is_some_and(|(_, zombie)| !zombie)
}

// --- carrying out moves ----------------------------------------------------------------------

/// Moves one batch: (addresses, target tiers) -> a status per page (0 or a positive errno).
pub type MoveExec<'a> = dyn FnMut(&[u64], &[TierId]) -> Vec<i32> + 'a;

/// Carry out `moves` in order, never taking the fast tier past `budget` pages: a move to the
/// fast tier that would is not tried (errno -1). Moves are sent in batches of at most
/// [`sys::MOVE_BATCH`]; a batch is sent early when a promotion needs the room that demotions
/// queued before it would free, so that only room actually freed counts, and within a batch
/// the demotions go first. Pages count one by one: a page of a transparent huge page moves
/// its whole folio (see `--thp`). `exec` moves a batch (addresses, target tiers) and gives a
/// status per page (0 or a positive errno). Returns the results, in order, and the fast
/// tier's page count afterwards.
pub fn carry_out(moves: &[LiveMove], mut fast_pages: u64, budget: u64, exec: &mut MoveExec<'_>) -> (Vec<MoveResult>, u64) {
    let mut results: Vec<MoveResult> = Vec::with_capacity(moves.len());
    // (index into results, addr, to) waiting to be sent
    let mut pending: Vec<(usize, u64, TierId)> = Vec::new();
    let mut pending_in = 0u64; // promotions queued
    let mut pending_out = 0u64; // demotions queued
    let mut flush = |pending: &mut Vec<(usize, u64, TierId)>, results: &mut Vec<MoveResult>, fast: &mut u64| {
        if pending.is_empty() {
            return;
        }
        // demotions first: the kernel moves in the order given
        pending.sort_by_key(|p| p.2 == 0);
        let addrs: Vec<u64> = pending.iter().map(|p| p.1).collect();
        let tos: Vec<TierId> = pending.iter().map(|p| p.2).collect();
        let st = exec(&addrs, &tos);
        for (&(i, _, to), &e) in pending.iter().zip(&st) {
            results[i].errno = e;
            if e == 0 {
                if to == 0 {
                    *fast += 1;
                } else {
                    *fast = fast.saturating_sub(1);
                }
            }
        }
        pending.clear();
    };
    for m in moves {
        let i = results.len();
        results.push(MoveResult { addr: m.addr, to: m.to, errno: 0 });
        if m.to == m.from {
            continue;
        }
        if m.to == 0 {
            if fast_pages + pending_in >= budget && pending_out > 0 {
                // the room may come from the demotions queued: send them first
                flush(&mut pending, &mut results, &mut fast_pages);
                pending_in = 0;
                pending_out = 0;
            }
            if fast_pages + pending_in >= budget {
                results[i].errno = -1;
                continue;
            }
            pending_in += 1;
        } else {
            pending_out += 1;
        }
        pending.push((i, m.addr, m.to));
        if pending.len() >= sys::MOVE_BATCH {
            flush(&mut pending, &mut results, &mut fast_pages);
            pending_in = 0;
            pending_out = 0;
        }
    }
    flush(&mut pending, &mut results, &mut fast_pages);
    (results, fast_pages)
}

/// The pages to demote when the fast tier holds more than `budget` of the program's pages
/// (its own first touch put them there), by the deciders' own budget rule
/// ([`tierkit_core::live::over_budget`]), so that the decider finds nothing left to demote.
pub fn over_budget(pages: &[PageObs], budget: u64) -> Vec<LiveMove> {
    tierkit_core::live::over_budget(pages, budget).into_iter().map(|i| LiveMove { addr: pages[i].addr, from: 0, to: 1 }).collect()
}

// --- the run ---------------------------------------------------------------------------------

/// Options the library API adds to the command line's (for tests).
pub struct Overrides {
    /// The decider to use instead of `build_decider` (a test's own).
    pub decider: Option<Box<dyn LiveDecider>>,
    /// Nodes to use as they are, without checking them against the machine (a test's).
    pub nodes: Option<(u32, u32)>,
}

#[derive(Default)]
struct Counts {
    requested: u64,
    done: u64,
    failed: u64,
    by_errno: BTreeMap<String, u64>,
    budget_demotions: u64,
}

impl Counts {
    fn add(&mut self, r: &[MoveResult]) {
        for x in r {
            self.requested += 1;
            if x.errno == 0 {
                self.done += 1;
            } else {
                self.failed += 1;
                *self.by_errno.entry(sys::errno_name(x.errno)).or_default() += 1;
            }
        }
    }
}

/// A daemon step's time bound: `--step-limit`, else the interval the policy asked for, at least
/// [`DEFAULT_STEP_LIMIT_NS`].
fn step_bound_ns(step_limit: Option<u64>, interval_ns: u64) -> u64 {
    step_limit.unwrap_or(interval_ns.max(DEFAULT_STEP_LIMIT_NS))
}

/// A duration option, 1ms to 3600s, in ns.
fn parse_duration(what: &str, s: &str) -> Result<u64> {
    let ns = tierkit_core::units::parse_duration_ns(what, s)?;
    if !(1e6..=3.6e12).contains(&ns) {
        return Err(Error::config(what, format!("'{s}': give 1ms to 3600s")));
    }
    Ok(ns.round() as u64)
}

/// A memory policy takes no parameters live (set_mempolicy has none to give).
fn check_no_params(spec: &PolicySpec) -> Result<()> {
    match spec.args.first() {
        Some((k, _)) => Err(Error::config(format!("policy '{}'", spec.name), format!("unknown parameter '{k}' (parameters: none)"))),
        None => Ok(()),
    }
}

/// What `--dry-run` prints: everything checked, what a run would do, nothing started.
#[allow(clippy::too_many_arguments)]
fn dry_run_report(
    spec: &PolicySpec,
    kind: Kind,
    tiers: &sys::Tiers,
    budget_pages: u64,
    page: u64,
    kernel_p: Option<&kernel_params::KernelParams>,
    notes: &[String],
    decider: Option<&dyn LiveDecider>,
) -> Report {
    let how = match kind {
        Kind::Memory => "memory policy, set when the program starts (set_mempolicy)",
        Kind::Kernel => "kernel policy: settings changed for the run, restored afterwards",
        Kind::Daemon => "daemon policy: the simulator's decision code on observations of the program, moves by move_pages",
    };
    let kernel = kernel_p.map(|k| match k {
        kernel_params::KernelParams::Autonuma(a) => serde_json::json!({
            "hot_threshold_ms": a.hot_threshold_ms, "promote_rate_limit_mib_per_s": a.rate_limit_mbps,
            "scan_period_min_ms": a.scan_period_min_ms, "scan_period_max_ms": a.scan_period_max_ms,
            "scan_delay_ms": a.scan_delay_ms, "scan_size_mb": a.scan_size_mb,
        }),
        kernel_params::KernelParams::Damon(d) => serde_json::json!({
            "sample_us": d.attrs.sample_us, "aggr_us": d.attrs.aggr_us, "min_nr_regions": d.attrs.min_regions,
            "max_nr_regions": d.attrs.max_regions, "apply_interval_us": d.apply_interval_us,
            "hot_quota_bytes": d.hot_quota_bytes, "cold_quota_bytes": d.cold_quota_bytes, "quota_reset_ms": d.quota_reset_ms,
            "hot_min_accesses": d.hot_min_accesses, "cold_min_age": d.cold_min_age, "hot_goal_used_bp": d.used_goal_bp,
            "cold_goal_free_bp": d.free_goal_bp, "weight_nr_accesses_permil": d.weight_nr_accesses_permil,
            "weight_age_permil": d.weight_age_permil, "young_filter": d.young_filter,
        }),
    });
    let json = serde_json::json!({
        "dry_run": true,
        "policy": spec.to_string_short(),
        "kind": match kind { Kind::Memory => "memory", Kind::Kernel => "kernel", Kind::Daemon => "daemon" },
        "how": how,
        "fast_node": tiers.fast,
        "slow_node": tiers.slow,
        "tiers_from": tiers.from,
        "fast_budget_pages": budget_pages,
        "fast_budget_bytes": budget_pages.saturating_mul(page),
        "kernel_settings": kernel,
        "live_parameters": kernel_params::live_keys(&spec.name).iter().map(|(k, w)| serde_json::json!({"name": k, "set_in": w})).collect::<Vec<_>>(),
        "decider": decider.map(|d| d.name().to_string()),
        "notes": notes,
    });
    Report { json, exit_status: 0 }
}

/// What the checks decided: everything a run needs, found before anything is started or
/// changed (a mistake in the spec first, then the machine: nodes, budget, permissions, files).
struct Plan {
    spec: PolicySpec,
    kind: Kind,
    page: u64,
    damon_on: bool,
    thp_off: bool,
    /// `--interval`, when the policy does not take it as its own parameter
    interval_override: Option<u64>,
    /// `--step-limit`
    step_limit: Option<u64>,
    damon_window_ns: f64,
    kernel_p: Option<kernel_params::KernelParams>,
    /// what the run's form of the policy says (old names read, a live form chosen)
    spec_notes: Vec<String>,
    tiers: sys::Tiers,
    fast_node_bytes: u64,
    budget_pages: u64,
    decider: Option<Box<dyn LiveDecider>>,
    ts_out: Option<(tierkit_core::outfile::PartialFile, std::fs::File)>,
    rs_out: Option<(tierkit_core::outfile::PartialFile, std::fs::File)>,
}

/// Check everything `args` asks for, in the order the errors are said, and decide the run.
fn plan(args: &Args, overrides: Option<Overrides>, root: &Path) -> Result<Plan> {
    let mut ov = overrides.unwrap_or(Overrides { decider: None, nodes: None });
    let spec = PolicySpec::parse(&args.policy)?;
    let kind = if ov.decider.is_some() { Kind::Daemon } else { policy_kind(&spec.name)? };
    let page = sys::page_bytes();

    if args.program.is_empty() && args.pid.is_none() && !args.dry_run {
        return Err(Error::config("run", "no program given: tierkit run [OPTIONS] -- PROGRAM ARGS... (or --pid PID)"));
    }
    if args.guidance.is_some() && kind != Kind::Memory {
        return Err(Error::config("--guidance", format!("{} moves pages itself and would undo the guidance's placement; combine --guidance with a memory policy (first-touch, the default, all-fast, all-slow, interleave) for the memory outside the guided arenas", spec.name)));
    }
    if args.pid.is_some() && kind == Kind::Memory && spec.name != "first-touch" {
        return Err(Error::config(
            "--policy",
            format!("{} is a memory policy set when the program starts; with --pid use first-touch (observe only), a daemon or a kernel policy", spec.name),
        ));
    }
    let damon_on = match args.damon.as_str() {
        "auto" => kind == Kind::Daemon,
        "on" => true,
        "off" => false,
        o => return Err(Error::config("--damon", format!("'{o}' is not on, off or auto"))),
    };
    let thp_off = match args.thp.as_str() {
        "auto" => kind == Kind::Daemon && args.pid.is_none(),
        "off" if args.pid.is_some() => {
            return Err(Error::config("--thp", "off is set when tierkit starts the program; a running process (--pid) keeps its huge pages"))
        }
        "off" => true,
        "keep" => false,
        o => return Err(Error::config("--thp", format!("'{o}' is not auto, off or keep"))),
    };
    if !(10..=1_000_000).contains(&args.damon_regions) {
        return Err(Error::config("--damon-regions", format!("{}: give 10 to 1000000", args.damon_regions)));
    }
    let mut interval_override = args.interval.as_deref().map(|v| parse_duration("--interval", v)).transpose()?;
    let step_limit = args.step_limit.as_deref().map(|v| parse_duration("--step-limit", v)).transpose()?;
    let damon_window_ns = tierkit_core::units::parse_duration_ns("--damon-window", &args.damon_window)?;
    if !(1e7..=1e10).contains(&damon_window_ns) {
        return Err(Error::config("--damon-window", format!("'{}': give 10ms to 10s", args.damon_window)));
    }
    // A daemon policy keeps its own clock (hyplacer observes `delay` after a clearing
    // activation, then again at its next `interval`): --interval sets the policy's interval
    // parameter instead of overriding the times the policy asks for.
    let mut spec = spec;
    if kind == Kind::Daemon && ov.decider.is_none() {
        if let (Some(given), Ok(info)) = (args.interval.as_deref(), tierkit_core::policy::lookup(&spec.name)) {
            let key = ["interval", "period"].into_iter().find(|k| info.params.iter().any(|p| p.name == *k));
            if let Some(key) = key {
                if spec.args.iter().any(|(k, _)| k == key) {
                    return Err(Error::config("--interval", format!("{} sets {key}= already; give the interval once", args.policy)));
                }
                spec.args.push((key.to_string(), given.to_string()));
                interval_override = None;
            }
        }
    }

    // the policy's parameters first (a typo is said before any other check); a kernel policy's are: the simulator's names and declarations (kernel_params)
    let mut spec_notes = Vec::new();
    if let Some(r) = args.max_migrate_rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::config("--max-migrate-rate", format!("{r}: give MiB per second, more than 0")));
        }
        if kind == Kind::Memory {
            return Err(Error::config("--max-migrate-rate", format!("{} migrates nothing (a memory policy set when the program starts)", spec.name)));
        }
    }
    let kernel_p = match kind {
        Kind::Memory => {
            check_no_params(&spec)?;
            None
        }
        Kind::Kernel => {
            let (mut p, n) = kernel_params::kernel_params(&spec)?;
            spec_notes = n;
            if let Some(r) = args.max_migrate_rate {
                spec_notes.push(kernel_params::limit_rate(&mut p, r));
            }
            Some(p)
        }
        Kind::Daemon => {
            // built again below with the real budget; here only its spec is checked
            if ov.decider.is_none() {
                tierkit_core::live::build_decider(&spec, 1, page)?;
            }
            None
        }
    };
    // nodes: a machine with one node cannot run a policy that places, whatever else is allowed,
    // so that is said first
    let tiers = match ov.nodes {
        Some((f, s)) => sys::Tiers { fast: f, slow: Some(s), from: "given", nodes: vec![f, s] },
        None => sys::discover_tiers(root, args.fast_node, args.slow_node)?,
    };
    let needs_two = !(kind == Kind::Memory && matches!(spec.name.as_str(), "first-touch" | "all-fast"));
    if needs_two && tiers.slow.is_none() {
        return Err(Error::config(
            "--policy",
            format!(
                "{} needs a fast and a slow NUMA node, and this machine has one node with memory (node {}): there is no slow tier to place pages on; see docs/real-linux.md for the testbed VM",
                spec.name, tiers.fast
            ),
        ));
    }
    // machine-wide kernel state is changed only where allowed: said before anything starts
    if kind == Kind::Kernel || damon_on {
        let what = if kind == Kind::Kernel {
            spec.name.clone()
        } else if args.damon == "on" {
            "DAMON monitoring (--damon on)".to_string()
        } else {
            format!("{}'s DAMON monitoring (--damon auto, the default for a daemon policy; --damon off runs without access frequencies)", spec.name)
        };
        kernel::check_allowed(root, &what)?;
    }
    // guidance on one node: every tier on it (said on stderr once the guidance is checked)
    if args.guidance.is_some() {
        spec_notes.extend(guided::one_node_warning(&tiers));
    }
    let fast_node_bytes = sys::node_mem_total_bytes(root, tiers.fast).unwrap_or(0);
    let budget_bytes = match &args.fast_capacity {
        Some(s) => {
            // a fraction or percentage is of the footprint in simulate; a live run learns the
            // program's footprint only as it runs, so it takes a size here (not "less than a page")
            if let Ok(tierkit_core::units::Capacity::Fraction(_)) = tierkit_core::units::Capacity::parse("--fast-capacity", s) {
                return Err(Error::config(
                    "--fast-capacity",
                    format!("'{s}' is a share of the footprint, which a live run does not know before the program has run; give a size (512M, 2G)"),
                ));
            }
            let b = tierkit_core::units::parse_bytes("--fast-capacity", s)?;
            if b < page {
                return Err(Error::config("--fast-capacity", format!("'{s}' is less than one page ({page} bytes)")));
            }
            b
        }
        None if fast_node_bytes > 0 => fast_node_bytes,
        None => u64::MAX / 2,
    };
    let budget_pages = budget_bytes / page;

    // the decider, or the kernel policy's parameters, checked before anything starts
    let decider: Option<Box<dyn LiveDecider>> = match kind {
        Kind::Daemon => Some(match ov.decider.take() {
            Some(d) => d,
            None => tierkit_core::live::build_decider(&spec, budget_pages, page)?,
        }),
        _ => None,
    };
    // what the live form of a daemon policy does differently from simulate's default
    if let Some(d) = &decider {
        spec_notes.extend(d.notes());
    }
    if kind == Kind::Kernel {
        // SAFETY: no arguments
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::config("--policy", format!("{} changes kernel settings and needs root", spec.name)));
        }
    }
    if damon_on && !root.join(damon::ADMIN).is_dir() {
        return Err(Error::config(
            "DAMON",
            format!("this kernel has no DAMON sysfs interface (/{} missing; CONFIG_DAMON_SYSFS); --damon off runs without access frequencies", damon::ADMIN),
        ));
    }
    // the time series file, before anything starts (an existing file stops us here)
    if args.region_series.is_some() && args.regions.is_none() {
        return Err(Error::config("--region-series", "needs --regions FILE, the file in which the program names its regions"));
    }
    if args.region_series.is_some() && args.region_series == args.timeseries {
        return Err(Error::config("--region-series", "the same file as --timeseries; give another"));
    }
    let ts_out = match &args.timeseries {
        Some(p) => Some(tierkit_core::outfile::PartialFile::create(p, args.force)?),
        None => None,
    };
    let rs_out = match &args.region_series {
        Some(p) => Some(tierkit_core::outfile::PartialFile::create(p, args.force)?),
        None => None,
    };
    // a regions file there already (written by hand, or left by an earlier run) is read now,
    // so that a bad line stops us before the program starts
    if let Some(rf) = &args.regions {
        regions::read_regions(rf)?;
    }
    // an attached process: it exists and we may read its page map
    if let Some(pid) = args.pid {
        if pid <= 0 || !Path::new(&format!("/proc/{pid}")).is_dir() {
            return Err(Error::config("--pid", format!("{pid}: no such process")));
        }
        if let Err(e) = std::fs::File::open(format!("/proc/{pid}/pagemap")) {
            return Err(Error::config("--pid", format!("{pid}: cannot read /proc/{pid}/pagemap ({e}); tierkit may only watch a process it may ptrace")));
        }
    }

    Ok(Plan {
        spec,
        step_limit,
        kind,
        page,
        damon_on,
        thp_off,
        interval_override,
        damon_window_ns,
        kernel_p,
        spec_notes,
        tiers,
        fast_node_bytes,
        budget_pages,
        decider,
        ts_out,
        rs_out,
    })
}

/// What the observations gathered, for the files and the report.
#[derive(Default)]
struct Observed {
    counts: Counts,
    /// the time series (`--timeseries`), one row per observation
    rows: Vec<[u64; 14]>,
    max_fast: u64,
    max_folio_pages: u64,
    max_slow: u64,
    /// the split at the observation with the most of the program's pages (the last one may
    /// come while the program frees its memory)
    peak: (u64, u64),
    last: Seen,
    regions_max: usize,
    observations: u64,
    decider_err: Option<String>,
    /// the interval the last observation asked for, ns
    next_ns: u64,
    over_budget_seen: u64,
    /// --region-series: the names in order of first appearance, and rows of (time_ms, name
    /// index, pages fast, pages slow)
    region_names: Vec<String>,
    region_rows: Vec<(u64, usize, u64, u64)>,
    /// a bad line in the regions file, read during the run: the run stops
    regions_err: Option<Error>,
    /// observations that found none of the program's pages while it ran
    empty_observations: u64,
    /// the most processes one observation saw
    max_processes: usize,
    /// daemon steps whose moves ran past the step's time bound (the rest not tried)
    steps_cut: u64,
    /// where the daemon's time went
    time_ns: StepTimes,
}

/// Wall time of the daemon's loop by part, ns: observing (maps, pagemap, nodes, soft-dirty),
/// reading DAMON's regions, the decider (its steps and the moves' outcomes), the moves.
#[derive(Default, Clone, Copy)]
struct StepTimes {
    observe: u64,
    damon: u64,
    decide: u64,
    moves: u64,
}

/// Start the program (its memory policy and huge-page setting set between fork and exec, the
/// allocator's environment for guidance), or attach to `--pid`.
fn start_program(args: &Args, spec: &PolicySpec, kind: Kind, tiers: &sys::Tiers, thp_off: bool, guided_setup: Option<&guided::Setup>) -> Result<Proc> {
    Ok(match args.pid {
        Some(pid) => Proc { pid, target: Target::Attached, pidfd: pidfd_open(pid), status: None, gone: false },
        None => {
            let mut cmd = std::process::Command::new(&args.program[0]);
            cmd.args(&args.program[1..]);
            if let Some(g) = guided_setup {
                cmd.envs(g.env.iter().map(|(k, v)| (k, v)));
            }
            let (mode, mask) = match spec.name.as_str() {
                "all-fast" => (sys::MPOL_BIND, sys::nodemask(&[tiers.fast])),
                "all-slow" => (sys::MPOL_BIND, sys::nodemask(&[tiers.slow.unwrap()])),
                "interleave" => (sys::MPOL_INTERLEAVE, sys::nodemask(&[tiers.fast, tiers.slow.unwrap()])),
                _ => (sys::MPOL_DEFAULT, sys::nodemask(&[])),
            };
            let set_policy = kind == Kind::Memory && mode != sys::MPOL_DEFAULT;
            // SAFETY: only async-signal-safe calls between fork and exec
            unsafe {
                cmd.pre_exec(move || {
                    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                    // should tierkit die unannounced, the program is asked to end too
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
                    if set_policy {
                        sys::set_mempolicy(mode, &mask)?;
                    }
                    // inherited across exec: the program's anonymous memory comes in 4 KiB pages
                    if thp_off && libc::prctl(libc::PR_SET_THP_DISABLE, 1 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd.spawn().map_err(|e| Error::config("program", format!("'{}' cannot be run: {e}", args.program[0].to_string_lossy())))?;
            let pid = child.id() as i32;
            CHILD.store(pid, SeqCst);
            Proc { pid, target: Target::Child(child), pidfd: pidfd_open(pid), status: None, gone: false }
        }
    })
}

/// Observe the program every interval until it ends (or, attached, until tierkit is asked to
/// stop): pages per node, referenced and dirty bits, DAMON's counts; hand each observation to
/// the decider and carry out its moves within the budget.
#[allow(clippy::too_many_arguments)]
fn observe(
    args: &Args,
    proc: &mut Proc,
    mut observer: Option<&mut Observer>,
    decider: &mut Option<Box<dyn LiveDecider>>,
    tiers: &sys::Tiers,
    budget_pages: u64,
    interval_override: Option<u64>,
    step_limit: Option<u64>,
    t0: Instant,
    cpu0: u64,
) -> Observed {
    let mut tally = Observed { next_ns: interval_override.unwrap_or(DEFAULT_INTERVAL_NS), ..Observed::default() };
    let mut last_clear = t0;
    // --max-migrate-rate: when the next batch of moves may start
    let mut pace_next = t0;
    let page_bytes = sys::page_bytes();
    let mut region_index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    if let Some(obs) = observer.as_deref() {
        obs.clear_soft_dirty();
    }
    // observe first after a short while: the program has barely started at t0
    let mut wait = Duration::from_nanos(interval_override.unwrap_or(DEFAULT_INTERVAL_NS).min(100_000_000));
    while !proc.wait_for(wait) {
        if STOP.load(SeqCst) && matches!(proc.target, Target::Attached) {
            break;
        }
        let Some(obs) = observer.as_deref_mut() else { break };
        let obs_t0 = Instant::now();
        let mut seen = obs.observe();
        // the step's time bound runs from the end of the observation
        let step_t0 = Instant::now();
        tally.time_ns.damon += seen.damon_ns;
        tally.time_ns.observe += (step_t0 - obs_t0).as_nanos() as u64 - seen.damon_ns;
        if !seen.ok {
            continue;
        }
        let obs = &*obs;
        tally.observations += 1;
        let t_ns = t0.elapsed().as_nanos() as u64;
        if seen.fast + seen.slow + seen.other == 0 && !proc.poll_gone() {
            if tally.empty_observations == 0 {
                eprintln!(
                    "tierkit: warning: the observation at {:.1} s found none of the program's pages on any node (its memory is in a process tierkit does not see?)",
                    t_ns as f64 / 1e9
                );
            }
            tally.empty_observations += 1;
        }
        tally.max_processes = tally.max_processes.max(seen.processes);
        // one step's moves end when its time bound runs out: the rest are not tried
        let deadline = step_t0 + Duration::from_nanos(step_bound_ns(step_limit, tally.next_ns));
        let cut = std::cell::Cell::new(false);
        let move_ns = std::cell::Cell::new(0u64);
        let mut exec = |addrs: &[u64], to: &[TierId]| {
            // --max-migrate-rate: a batch waits until the pages moved before it are within
            // the rate; one that would wait past the step's bound is cut instead
            if let Some(r) = args.max_migrate_rate {
                let now = Instant::now();
                if pace_next > now {
                    if pace_next >= deadline {
                        cut.set(true);
                        return vec![sys::CUT; addrs.len()];
                    }
                    std::thread::sleep(pace_next - now);
                }
                pace_next = pace_next.max(Instant::now()) + Duration::from_secs_f64(addrs.len() as f64 * page_bytes as f64 / (r * 1048576.0));
            }
            let batch_t0 = Instant::now();
            if batch_t0 >= deadline {
                cut.set(true);
                return vec![sys::CUT; addrs.len()];
            }
            let st = obs.exec_moves(tiers, addrs, to);
            move_ns.set(move_ns.get() + batch_t0.elapsed().as_nanos() as u64);
            st
        };
        let regions_now = match args.regions.as_deref().map(regions::read_regions).transpose() {
            Ok(r) => r.unwrap_or_default(),
            Err(e) => {
                tally.regions_err = Some(e);
                break;
            }
        };
        let before = (tally.counts.requested, tally.counts.done, tally.counts.failed);
        let mut over = 0u64;
        if let Some(d) = decider.as_mut().filter(|_| tally.decider_err.is_none()) {
            // the program's own first touch may have put more than the budget on the fast
            // node: the excess goes to the slow node first, least accessed first
            let excess = over_budget(&seen.pages, budget_pages);
            if !excess.is_empty() {
                over = excess.len() as u64;
                tally.over_budget_seen += over;
                let (res, fast_after) = carry_out(&excess, seen.fast, u64::MAX, &mut exec);
                tally.counts.budget_demotions += res.iter().filter(|r| r.errno == 0).count() as u64;
                tally.counts.add(&res);
                let moved: std::collections::HashSet<u64> = res.iter().filter(|r| r.errno == 0).map(|r| r.addr).collect();
                for p in seen.pages.iter_mut().filter(|p| moved.contains(&p.addr)) {
                    p.tier = 1;
                }
                seen.slow += seen.fast - fast_after;
                seen.fast = fast_after;
            }
            let mut o = Observation { t_ns, since_clear_ns: last_clear.elapsed().as_nanos() as u64, pages: std::mem::take(&mut seen.pages) };
            let decide_t0 = Instant::now();
            let stepped = d.step(&o);
            tally.time_ns.decide += decide_t0.elapsed().as_nanos() as u64;
            match stepped {
                Ok(step) => {
                    let (res, fast_after) = carry_out(&step.moves, seen.fast, budget_pages, &mut exec);
                    tally.counts.add(&res);
                    let moved_t0 = Instant::now();
                    d.moved(&res);
                    tally.time_ns.decide += moved_t0.elapsed().as_nanos() as u64;
                    // the pages where the moves left them (for --region-series)
                    for r in res.iter().filter(|r| r.errno == 0) {
                        if let Ok(i) = o.pages.binary_search_by_key(&r.addr, |p| p.addr) {
                            o.pages[i].tier = r.to;
                        }
                    }
                    let moved_in = fast_after as i64 - seen.fast as i64;
                    seen.fast = fast_after;
                    seen.slow = (seen.slow as i64 - moved_in).max(0) as u64;
                    if step.clear_bits {
                        obs.clear_soft_dirty();
                        last_clear = Instant::now();
                    }
                    tally.next_ns = interval_override.unwrap_or(step.next_in_ns.max(1_000_000));
                }
                Err(e) => tally.decider_err = Some(e.to_string()),
            }
            seen.pages = o.pages;
        } else {
            // observation only: dirty = written during the tally.last interval
            obs.clear_soft_dirty();
            last_clear = Instant::now();
        }
        if cut.get() {
            tally.steps_cut += 1;
        }
        tally.time_ns.moves += move_ns.get();
        tally.max_fast = tally.max_fast.max(seen.fast);
        tally.max_folio_pages = tally.max_folio_pages.max(seen.folio_pages);
        tally.max_slow = tally.max_slow.max(seen.slow);
        if seen.fast + seen.slow > tally.peak.0 + tally.peak.1 {
            tally.peak = (seen.fast, seen.slow);
        }
        tally.regions_max = tally.regions_max.max(seen.regions);
        let cpu_ms = (sys::thread_cpu_ns() - cpu0) / 1_000_000;
        tally.rows.push([
            t_ns / 1_000_000,
            seen.fast,
            seen.slow,
            seen.other,
            seen.referenced,
            seen.dirty,
            seen.regions as u64,
            tally.counts.requested - before.0,
            tally.counts.done - before.1,
            tally.counts.failed - before.2,
            over,
            tally.counts.done,
            cpu_ms,
            seen.processes as u64,
        ]);
        if args.region_series.is_some() {
            for (r, (fast, slow)) in regions_now.iter().zip(regions::count_pages(&regions_now, &seen.pages)) {
                let k = *region_index.entry(r.name.clone()).or_insert_with(|| {
                    tally.region_names.push(r.name.clone());
                    tally.region_names.len() - 1
                });
                tally.region_rows.push((t_ns / 1_000_000, k, fast, slow));
            }
        }
        tally.last = seen;
        wait = Duration::from_nanos(tally.next_ns);
    }
    tally
}

/// Run `args` (the command line's options); see [`main_with_args`]. The phases: the checks
/// ([`plan`]), kernel state for a kernel policy, the program started ([`start_program`]), the
/// observations and the decider's moves ([`observe`]), kernel state restored, the files and
/// the report.
pub fn run(args: &Args, overrides: Option<Overrides>) -> Result<Report> {
    let root = Path::new("/");
    let Plan {
        spec,
        kind,
        page,
        damon_on,
        thp_off,
        interval_override,
        step_limit,
        damon_window_ns,
        kernel_p,
        mut spec_notes,
        tiers,
        fast_node_bytes,
        budget_pages,
        mut decider,
        mut ts_out,
        mut rs_out,
    } = plan(args, overrides, root)?;
    if args.dry_run {
        // the guidance file and the allocator are checked as a run would (a dry run that
        // passes is a run that starts)
        if let Some(g) = &args.guidance {
            guided::check_guidance(g)?;
            guided::find_library()?;
        }
        return Ok(dry_run_report(&spec, kind, &tiers, budget_pages, page, kernel_p.as_ref(), &spec_notes, decider.as_deref()));
    }

    // kernel state, restored when these go out of scope (also on error and after signals)
    let mut settings = kernel::Settings::default();
    let mut notes: Vec<String> = Vec::new();
    let n_kdamonds = damon_on as usize + 2 * (spec.name == "damon-tiering") as usize;
    let mut admin = if n_kdamonds > 0 { Some(damon::DamonAdmin::claim(root, n_kdamonds)?) } else { None };
    let mut tiering: Option<damon::TieringSchemes> = None;
    notes.append(&mut spec_notes);
    if kind == Kind::Kernel {
        let slow = tiers.slow.unwrap();
        if let Some(kernel_params::KernelParams::Autonuma(p)) = &kernel_p {
            notes.extend(kernel::autonuma_tiering(root, p, &mut settings)?);
        } else if let Some(kernel_params::KernelParams::Damon(p)) = &kernel_p {
            // DAMON's schemes alone move pages: NUMA balancing (1 by default on a NUMA
            // machine) would migrate the program's slow pages towards its CPUs' node as well
            let nb = root.join("proc/sys/kernel/numa_balancing");
            if nb.exists() {
                settings.set(&nb, "0")?;
            }
            // migration to the other node must be allowed for DAMON's migrate actions
            tiering = Some(damon::TieringSchemes::start(admin.as_ref().unwrap(), damon_on as usize, root, tiers.fast, slow, p)?);
        }
    }

    let vm_before = sys::read_vmstat(root);
    let kswapd_cpu0 = sys::kswapd_cpu_s();
    let soft_dirty = sys::soft_dirty_supported();
    if !soft_dirty {
        notes.push("this kernel keeps no soft-dirty bits (CONFIG_MEM_SOFT_DIRTY): no page is seen dirty".into());
    }
    if kind != Kind::Kernel {
        // the kernel's own NUMA balancing moves pages too (towards the CPUs' node, or, in
        // tiering mode, promotes): the run then shows both; numa_pages_migrated counts them
        let nb = std::fs::read_to_string(root.join("proc/sys/kernel/numa_balancing")).map(|s| s.trim().to_string()).unwrap_or_default();
        if !nb.is_empty() && nb != "0" && tiers.slow.is_some() {
            notes.push(format!("NUMA balancing is on (numa_balancing={nb}): the kernel moves pages as well (vmstat numa_pages_migrated); set it to 0 for tierkit's policy alone"));
        }
    }
    let guided_setup = match &args.guidance {
        Some(g) => Some(guided::Setup::new(g, tiers.fast, tiers.slow)?),
        None => None,
    };
    // after the guidance file's checks (a bad file is one error line) and before the program
    // starts: the run goes on, and the note stays in the report
    if let (Some(_), Some(w)) = (&guided_setup, guided::one_node_warning(&tiers)) {
        eprintln!("tierkit: {w}");
    }
    let signals = SignalGuard::install();
    let t0 = Instant::now();

    // start the program, or attach
    let mut proc = start_program(args, &spec, kind, &tiers, thp_off, guided_setup.as_ref())?;
    let pid = proc.pid;

    let cpu0 = sys::thread_cpu_ns();
    let mut monitor_err = None;
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap"));
    let damon_mon = match (&admin, damon_on) {
        (Some(a), true) => match damon::VaddrMonitor::start(
            a,
            0,
            &[pid],
            damon::MonitorAttrs { max_regions: args.damon_regions, aggr_us: (damon_window_ns / 1000.0) as u64, ..Default::default() },
        ) {
            Ok(m) => Some(m),
            Err(e) => {
                // the program may have ended already; said in the report
                monitor_err = Some(e.to_string());
                None
            }
        },
        _ => None,
    };
    let kpageflags = std::fs::File::open("/proc/kpageflags").ok();
    let mut observer = pagemap.ok().map(|_| Observer {
        root: pid,
        page,
        fast: tiers.fast,
        slow: tiers.slow,
        soft_dirty,
        damon: damon_mon,
        kpageflags,
        tags: workload::Tags::default(),
        procs: vec![pid],
        untaggable_pages: 0,
        damon_err: None,
        pfn_nodes: sys::PfnNodes::read(root, page),
        nodes_from_pfn: 0,
        nodes_queried: 0,
    });

    let Observed {
        counts,
        rows,
        max_fast,
        max_folio_pages,
        max_slow,
        peak,
        last,
        regions_max,
        observations,
        decider_err,
        next_ns,
        over_budget_seen,
        region_names,
        region_rows,
        regions_err,
        empty_observations,
        max_processes,
        steps_cut,
        time_ns,
    } = observe(args, &mut proc, observer.as_mut(), &mut decider, &tiers, budget_pages, interval_override, step_limit, t0, cpu0);
    if regions_err.is_some() {
        end_program(&mut proc);
    }
    let wall = t0.elapsed();
    let daemon_cpu_ns = sys::thread_cpu_ns() - cpu0;
    let monitor_cpu_s = observer.as_ref().and_then(|o| o.damon.as_ref()).map(|m| m.cpu_s());
    let processes = observer.as_ref().map(|o| {
        json!({
            "max_observed": max_processes, "seen": o.tags.len(), "not_observed": o.tags.refused,
            "pages_above_tagged_space": o.untaggable_pages,
            // how each page's node was found: its frame number's memory block, or a query
            "nodes_from_frame_numbers": o.nodes_from_pfn, "nodes_from_move_pages": o.nodes_queried,
            "damon_restarts": o.damon.as_ref().map(|m| m.restarts), "damon_unsplit_reads": o.damon.as_ref().map(|m| m.unsplit),
            "damon_error": o.damon_err,
        })
    });
    if empty_observations > 0 {
        notes.push(format!("{empty_observations} of {observations} observations found none of the program's pages"));
    }
    if max_processes > 1 {
        notes.push(format!("the program ran as up to {max_processes} processes at once, observed and placed as one workload (its process tree)"));
    }
    if steps_cut > 0 {
        notes.push(format!(
            "{steps_cut} daemon steps ran past their time bound ({:.0} ms): their remaining moves were not tried (failed_by_errno step_time_bound)",
            step_bound_ns(step_limit, next_ns) as f64 / 1e6
        ));
    }
    drop(observer);
    drop(signals);
    let got_signal = GOT_SIGNAL.load(SeqCst);

    // kernel state back as it was
    let tiering_stats = tiering.as_ref().map(|t| t.stats());
    // the kernel threads the run started (DAMON's) and the reclaim threads' share of the run,
    // read before the kdamonds are removed
    let tiering_kdamond_cpu_s = admin.as_ref().filter(|_| tiering.is_some()).map(|a| a.cpu_s(damon_on as usize));
    let kswapd_cpu_s = sys::kswapd_cpu_s() - kswapd_cpu0;
    let damon_errs = admin.as_mut().map(|a| a.release()).unwrap_or_default();
    let vm_after = sys::read_vmstat(root);
    let restored = settings.restore();

    let (exit_status, signal) = match (&proc.target, proc.status) {
        (Target::Child(_), Some(st)) => match (st.code(), st.signal()) {
            (Some(c), _) => (c, None),
            (None, Some(s)) => (128 + s, Some(s)),
            _ => (0, None),
        },
        // an attached process's status is its parent's to collect
        _ => (if got_signal > 0 && !proc.gone { 128 + got_signal } else { 0 }, None),
    };

    // a bad regions line: the program has been ended, kernel state is back, no file is written
    if let Some(e) = regions_err {
        let what = if args.pid.is_some() { "tierkit stopped watching the process" } else { "tierkit ended the program" };
        return Err(match e {
            Error::BadTrace { path, location, msg } => Error::BadTrace { path, location, msg: format!("{msg} (read during the run: {what})") },
            e => e,
        });
    }
    if let Some(out) = ts_out.take() {
        let header = "time_ms,pages_fast,pages_slow,pages_other,referenced,dirty,damon_regions,moves_requested,moves_done,moves_failed,over_budget_demotions,moves_done_total,daemon_cpu_ms,processes";
        write_csv(out, header, rows.iter().map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>().join(",")))?;
    }
    if let Some(out) = rs_out.take() {
        let lines = region_rows.iter().map(|&(t, k, fast, slow)| format!("{t},{},{fast},{slow}", regions::csv_field(&region_names[k])));
        write_csv(out, "time_ms,region,pages_fast,pages_slow", lines)?;
    }

    let guided_alloc = guided_setup.as_ref().map(|g| g.fold(pid));
    if let Some(ga) = &guided_alloc {
        if ga["processes"].as_u64() == Some(0) {
            notes.push(
                "the allocator library wrote no report: a statically linked program, or one that ended by a signal or _exit, is not guided or not reported"
                    .into(),
            );
        }
    }
    if kind == Kind::Daemon && !thp_off && max_folio_pages > 0 {
        notes.push(format!("{max_folio_pages} of the program's pages were in transparent huge pages: move_pages moves a huge page whole while the fast budget counts 4 KiB pages, so the budget can be overrun by up to 511 pages per huge page promoted (--thp off, the default when tierkit starts the program, avoids it)"));
    }
    let gib_monitored = (max_fast + max_slow) as f64 * page as f64 / (1u64 << 30) as f64;
    let cpu_s = daemon_cpu_ns as f64 / 1e9;
    let json = json!({
        "policy": spec.name,
        "policy_spec": args.policy,
        "kind": match kind { Kind::Memory => "memory policy", Kind::Daemon => "daemon", Kind::Kernel => "kernel" },
        "program": args.program.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        "pid": pid,
        "attached": args.pid.is_some(),
        "fast_node": tiers.fast,
        "slow_node": tiers.slow,
        "tiers_from": tiers.from,
        "page_bytes": page,
        "fast_node_bytes": fast_node_bytes,
        "fast_budget_pages": budget_pages,
        "budget_enforced": kind == Kind::Daemon,
        "wall_s": wall.as_secs_f64(),
        "exit_status": exit_status,
        "signal": signal,
        "signal_name": signal.map(tierkit_core::trace::raw::signal_name),
        "tierkit_got_signal": (got_signal > 0).then(|| tierkit_core::trace::raw::signal_name(got_signal)),
        "observations": observations,
        "empty_observations": empty_observations,
        "processes": processes,
        "steps_cut": steps_cut,
        "step_limit_ms": step_limit.map(|n| n as f64 / 1e6),
        "interval_ms": next_ns as f64 / 1e6,
        "soft_dirty": soft_dirty,
        "thp": if thp_off { "off" } else { "kept" },
        "damon": if damon_on { json!({
            "regions_last": last.regions, "regions_max": regions_max, "max_regions": args.damon_regions,
            "error": monitor_err, "teardown_errors": damon_errs }) } else { Value::Null },
        "pages": {
            "last_fast": last.fast, "last_slow": last.slow, "last_other": last.other,
            "last_referenced": last.referenced, "last_dirty": last.dirty,
            "max_fast": max_fast, "max_slow": max_slow,
            "peak_fast": peak.0, "peak_slow": peak.1,
            "in_large_folios_max": max_folio_pages,
        },
        "migrations": {
            "requested": counts.requested, "done": counts.done, "failed": counts.failed,
            "failed_by_errno": counts.by_errno, "budget_demotions": counts.budget_demotions,
            "over_budget_pages_seen": over_budget_seen,
        },
        "daemon_cpu_s": cpu_s,
        // the daemon loop's wall time by part
        "daemon_time_s": {
            "observe": time_ns.observe as f64 / 1e9, "damon_regions": time_ns.damon as f64 / 1e9,
            "decide": time_ns.decide as f64 / 1e9, "moves": time_ns.moves as f64 / 1e9,
        },
        // every CPU second the policy cost beyond the program's own time (which holds NUMA
        // balancing's hint faults and the migrations they make, under autonuma-tiering)
        "kernel_threads_cpu_s": {
            "kdamond_monitor": monitor_cpu_s,
            "kdamond_tiering": tiering_kdamond_cpu_s,
            "kswapd": kswapd_cpu_s,
        },
        "policy_cpu_s": cpu_s + monitor_cpu_s.unwrap_or(0.0) + tiering_kdamond_cpu_s.unwrap_or(0.0) + kswapd_cpu_s,
        "program_rusage": if args.pid.is_none() { child_rusage() } else { Value::Null },
        "daemon_cpu_s_per_s_per_gib": if wall.as_secs_f64() > 0.0 && gib_monitored > 0.0 { json!(cpu_s / wall.as_secs_f64() / gib_monitored) } else { Value::Null },
        "vmstat": sys::vmstat_delta(&vm_before, &vm_after),
        "kernel_settings": restored,
        "damon_tiering": tiering_stats,
        "decider": decider.as_ref().map(|d| d.report()),
        "decider_error": decider_err,
        "notes": notes,
        "timeseries": args.timeseries.as_ref().map(|p| p.display().to_string()),
        "timeseries_rows": rows.len(),
        "region_series": args.region_series.as_ref().map(|p| p.display().to_string()),
        "region_series_rows": region_rows.len(),
        "guided_alloc": guided_alloc,
    });
    Ok(Report { json, exit_status })
}

/// After an error mid-run: the program tierkit started is asked to end (SIGTERM), killed if it
/// has not after 5 s; an attached process is left running.
/// A CSV file the run writes (`--timeseries`, `--region-series`): whole or not at all.
fn write_csv(out: (tierkit_core::outfile::PartialFile, std::fs::File), header: &str, lines: impl Iterator<Item = String>) -> Result<()> {
    let (mut pf, mut f) = out;
    let mut w = std::io::BufWriter::new(&mut f);
    let io = |e| Error::io(pf.path(), e);
    writeln!(w, "{header}").map_err(io)?;
    for l in lines {
        writeln!(w, "{l}").map_err(io)?;
    }
    w.flush().map_err(io)?;
    drop(w);
    pf.commit(&f)
}

fn end_program(proc: &mut Proc) {
    if matches!(proc.target, Target::Attached) || proc.poll_gone() {
        return;
    }
    for (sig, wait) in [(libc::SIGTERM, 5), (libc::SIGKILL, 5)] {
        // SAFETY: no pointers; our own child, not yet reaped
        unsafe { libc::kill(proc.pid, sig) };
        if proc.wait_for(Duration::from_secs(wait)) {
            return;
        }
    }
}

/// move_pages for tiers: tier 0 is the fast node, 1 the slow one.
fn exec_moves(pid: i32, tiers: &sys::Tiers, addrs: &[u64], to: &[TierId]) -> Vec<i32> {
    let nodes: Vec<i32> = to.iter().map(|&t| if t == 0 { tiers.fast as i32 } else { tiers.slow.map_or(-1, |s| s as i32) }).collect();
    sys::move_pages(pid, addrs, &nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(addr: u64, to: TierId) -> LiveMove {
        LiveMove { addr, from: 1 - to, to }
    }

    #[test]
    fn moves_never_take_the_fast_tier_past_the_budget() {
        // budget 3, 2 fast already: one promotion fits, the next is refused (-1)
        let mut calls = Vec::new();
        let (r, fast) = carry_out(&[mv(1, 0), mv(2, 0), mv(3, 0)], 2, 3, &mut |a, t| {
            calls.push((a.to_vec(), t.to_vec()));
            vec![0; a.len()]
        });
        assert_eq!(r.iter().map(|x| x.errno).collect::<Vec<_>>(), vec![0, -1, -1]);
        assert_eq!(fast, 3);
        assert_eq!(calls, vec![(vec![1], vec![0])]);
    }

    #[test]
    fn a_demotion_before_a_promotion_makes_room_only_once_it_is_done() {
        // full (3 of 3): demote 10 then promote 11: the demotion is sent first, then the room counts
        let mut calls = Vec::new();
        let (r, fast) = carry_out(&[mv(10, 1), mv(11, 0)], 3, 3, &mut |a, _| {
            calls.push(a.to_vec());
            vec![0; a.len()]
        });
        assert_eq!(r.iter().map(|x| x.errno).collect::<Vec<_>>(), vec![0, 0]);
        assert_eq!(fast, 3);
        assert_eq!(calls, vec![vec![10], vec![11]]);
        // the demotion fails (EBUSY): no room, the promotion is not tried
        let (r, fast) = carry_out(&[mv(10, 1), mv(11, 0)], 3, 3, &mut |a, _| vec![libc::EBUSY; a.len()]);
        assert_eq!(r.iter().map(|x| x.errno).collect::<Vec<_>>(), vec![libc::EBUSY, -1]);
        assert_eq!(fast, 3);
    }

    #[test]
    fn moves_go_in_order_in_batches_and_failures_are_per_page() {
        let n = sys::MOVE_BATCH * 2 + 5;
        let moves: Vec<LiveMove> = (0..n as u64).map(|i| mv(i, 1)).collect();
        let mut sizes = Vec::new();
        let (r, fast) = carry_out(&moves, n as u64, n as u64, &mut |a, _| {
            sizes.push(a.len());
            a.iter().map(|&x| if x % 7 == 0 { libc::ENOMEM } else { 0 }).collect()
        });
        assert_eq!(sizes, vec![sys::MOVE_BATCH, sys::MOVE_BATCH, 5]);
        assert!(r.iter().enumerate().all(|(i, x)| x.addr == i as u64 && (x.errno == libc::ENOMEM) == (i % 7 == 0)));
        let failed = (0..n).filter(|i| i % 7 == 0).count();
        assert_eq!(fast, failed as u64);
    }

    #[test]
    fn within_a_batch_demotions_are_sent_before_promotions() {
        let mut calls = Vec::new();
        carry_out(&[mv(1, 0), mv(2, 1), mv(3, 0), mv(4, 1)], 0, 10, &mut |a, t| {
            calls.push((a.to_vec(), t.to_vec()));
            vec![0; a.len()]
        });
        assert_eq!(calls, vec![(vec![2, 4, 1, 3], vec![1, 1, 0, 0])]);
    }

    #[test]
    fn the_excess_over_the_budget_is_the_least_accessed() {
        let p = |addr, tier, accesses, dirty| PageObs { addr, tier, referenced: accesses > 0, dirty, accesses };
        let pages = vec![p(1, 0, 5, false), p(2, 0, 0, true), p(3, 1, 0, false), p(4, 0, 0, false), p(5, 0, 2, false)];
        let m = over_budget(&pages, 2);
        assert_eq!(m.iter().map(|x| x.addr).collect::<Vec<_>>(), vec![4, 2]); // clean before dirty
        assert!(m.iter().all(|x| x.from == 0 && x.to == 1));
        assert!(over_budget(&pages, 4).is_empty());
    }

    #[test]
    fn command_line_errors_are_one_line_exit_2() {
        let run = |a: &[&str]| main_with_args(std::iter::once("tierkit-run").chain(a.iter().copied()).map(String::from));
        assert_eq!(run(&["--bogus", "--", "true"]), 2);
        assert_eq!(run(&[]), 2);
        assert_eq!(run(&["--interval", "fast", "--", "true"]), 2);
        assert_eq!(run(&["--policy", "all-fast:x=1", "--", "true"]), 2);
        assert_eq!(run(&["--pid", "999999999"]), 2);
        assert_eq!(run(&["--help"]), 0);
    }

    // --guidance takes version-2 guidance only, and no policy that moves pages itself (docs/guidance.md)
    #[test]
    fn guidance_errors_are_one_line_exit_2() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("v1.json");
        std::fs::write(&v1, r#"{"format": "tierkit-guidance", "version": 1, "context": 1, "arenas": [], "sites": []}"#).unwrap();
        let e = guided::check_guidance(&v1).unwrap_err().to_string();
        assert!(e.contains("version: 1") && !e.contains('\n'), "{e}");
        let v2 = dir.path().join("v2.json");
        std::fs::write(&v2, r#"{"format": "tierkit-guidance", "version": 2, "context": 1, "arenas": [], "sites": []}"#).unwrap();
        assert!(guided::check_guidance(&v2).is_ok());
        assert!(guided::check_guidance(&dir.path().join("none.json")).unwrap_err().to_string().contains("cannot read"));
        let run = |a: &[&str]| main_with_args(std::iter::once("tierkit-run").chain(a.iter().copied()).map(String::from));
        let v2s = v2.to_str().unwrap();
        assert_eq!(run(&["--guidance", v1.to_str().unwrap(), "--", "true"]), 2);
        // a dry run checks the file too: a bad one is no "every check passed"
        assert_eq!(run(&["--dry-run", "--guidance", v1.to_str().unwrap()]), 2);
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "{}").unwrap();
        assert_eq!(run(&["--dry-run", "--guidance", empty.to_str().unwrap()]), 2);
        assert_eq!(run(&["--policy", "hyplacer", "--guidance", v2s, "--", "true"]), 2);
        assert_eq!(run(&["--guidance", v2s, "--pid", "1"]), 2);
    }

    // docs/guidance.md "Reading the guidance file": a guidance file is a regular file within
    // MAX_GUIDANCE_BYTES, checked on the opened file; a device or a FIFO without a writer is
    // refused at once (/dev/urandom once kept the program from ever starting), before anything
    // starts: one line naming the file, exit 2
    #[test]
    fn a_guidance_file_that_is_not_a_regular_file_or_too_big_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a path in our own directory
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let big = dir.path().join("big.json");
        // sparse: its size is refused before a byte is read
        std::fs::File::create(&big).unwrap().set_len(guided::MAX_GUIDANCE_BYTES + 1).unwrap();
        let cases = [
            (PathBuf::from("/dev/urandom"), "not a regular file (a character device)".to_string()),
            (fifo.clone(), "not a regular file (a FIFO)".to_string()),
            (dir.path().to_path_buf(), "not a regular file (a directory)".to_string()),
            (big.clone(), format!("{} bytes, over the limit of 16 MiB", guided::MAX_GUIDANCE_BYTES + 1)),
        ];
        for (path, why) in cases {
            let p = path.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || tx.send(guided::check_guidance(&p).map(|_| ()).unwrap_err().to_string()).unwrap());
            let e = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{}: blocked", path.display()));
            assert!(e.starts_with(&format!("--guidance: {}: {why}", path.display())) && !e.contains('\n'), "{e}");
            let t = Instant::now();
            let run = |a: &[&str]| main_with_args(std::iter::once("tierkit-run").chain(a.iter().copied()).map(String::from));
            assert_eq!(run(&["--guidance", path.to_str().unwrap(), "--", "true"]), 2);
            assert!(t.elapsed() < Duration::from_secs(5), "{}", path.display());
        }
        // the limit itself passes the size check (and is then read as JSON)
        std::fs::File::create(&big).unwrap().set_len(guided::MAX_GUIDANCE_BYTES).unwrap();
        assert!(guided::check_guidance(&big).unwrap_err().to_string().contains("not JSON"));
    }

    /// A fake sysfs with these nodes with memory (node 0 has the CPUs, distances 10 / 20).
    fn fake_nodes(nodes: &[u32]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("sys/devices/system/node");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("has_memory"), nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(",") + "\n").unwrap();
        for &n in nodes {
            let nd = base.join(format!("node{n}"));
            std::fs::create_dir_all(&nd).unwrap();
            std::fs::write(nd.join("cpulist"), if n == 0 { "0-1\n" } else { "\n" }).unwrap();
            let dist: Vec<String> = nodes.iter().map(|&m| if m == n { "10".into() } else { "20".into() }).collect();
            std::fs::write(nd.join("distance"), dist.join(" ") + "\n").unwrap();
            std::fs::write(nd.join("meminfo"), format!("Node {n} MemTotal:  1048576 kB\n")).unwrap();
        }
        d
    }

    // a guided run on a one-node host binds every tier to node 0: a warning says the guidance
    // changes nothing there and where to run it (docs/real-linux.md); the run goes on
    #[test]
    fn guidance_on_one_node_is_warned_about_and_goes_on() {
        let args = |a: &[&str]| Args::try_parse_from(std::iter::once("tierkit-run").chain(a.iter().copied())).unwrap();
        let guided_run = args(&["--guidance", "g.json", "--", "true"]);
        let one = fake_nodes(&[0]);
        let p = plan(&guided_run, None, one.path()).unwrap();
        let w: Vec<&String> = p.spec_notes.iter().filter(|n| n.contains("one NUMA node")).collect();
        assert_eq!(w.len(), 1, "{:?}", p.spec_notes);
        assert!(w[0].contains("every tier of the guidance maps to node 0") && w[0].contains("docs/real-linux.md"), "{}", w[0]);
        assert_eq!((p.tiers.fast, p.tiers.slow), (0, None));
        assert_eq!(guided::one_node_warning(&p.tiers).as_ref(), Some(w[0]));
        // two nodes: tier 0 on node 0, the others on node 1, no warning
        let two = fake_nodes(&[0, 1]);
        let p = plan(&guided_run, None, two.path()).unwrap();
        assert_eq!((p.tiers.fast, p.tiers.slow), (0, Some(1)));
        assert!(!p.spec_notes.iter().any(|n| n.contains("one NUMA node")), "{:?}", p.spec_notes);
        assert!(guided::one_node_warning(&p.tiers).is_none());
        // without guidance one node is not worth a warning (first-touch runs anywhere)
        let p = plan(&args(&["--", "true"]), None, one.path()).unwrap();
        assert!(!p.spec_notes.iter().any(|n| n.contains("one NUMA node")));
        // the only node need not be node 0
        let t = sys::Tiers { fast: 3, slow: None, from: "single node", nodes: vec![3] };
        assert!(guided::one_node_warning(&t).unwrap().contains("maps to node 3"));
    }

    // the first error is the real one: on one node a daemon policy has no slow tier, and that is
    // said (naming the node) before DAMON's default, which the user never asked for
    #[test]
    fn one_node_is_said_before_the_default_damon() {
        let args = |a: &[&str]| Args::try_parse_from(std::iter::once("tierkit-run").chain(a.iter().copied())).unwrap();
        let err = |a: &Args, root: &Path| match plan(a, None, root) {
            Ok(_) => panic!("planned"),
            Err(e) => e.to_string(),
        };
        if std::env::var(kernel::ALLOW_ENV).as_deref() == Ok("1") {
            return; // kernel settings allowed here: the second refusal would not come
        }
        let history = args(&["--dry-run", "--policy", "history"]);
        let e = err(&history, fake_nodes(&[0]).path());
        assert!(e.contains("history needs a fast and a slow NUMA node") && e.contains("(node 0)") && !e.contains("DAMON"), "{e}");
        let e = err(&history, fake_nodes(&[2]).path());
        assert!(e.contains("(node 2)"), "{e}");
        // two nodes: then DAMON's default is what stops it here, and says it was the default
        let e = err(&history, fake_nodes(&[0, 1]).path());
        assert!(e.contains("history's DAMON monitoring (--damon auto, the default") && e.contains("--damon off"), "{e}");
        let e = err(&args(&["--dry-run", "--damon", "on"]), fake_nodes(&[0]).path());
        assert!(e.contains("DAMON monitoring (--damon on)"), "{e}");
    }

    #[test]
    fn the_exit_status_passes_through() {
        let run = |a: &[&str]| main_with_args(std::iter::once("tierkit-run").chain(a.iter().copied()).map(String::from));
        assert_eq!(run(&["--json", "--", "sh", "-c", "exit 3"]), 3);
        assert_eq!(run(&["--json", "--", "sh", "-c", "kill -9 $$"]), 128 + 9);
    }

    #[test]
    fn the_programs_arguments_pass_through_as_bytes() {
        // Linux arguments are bytes, not always UTF-8: the program gets them as they were
        use std::os::unix::ffi::OsStringExt;
        let odd = std::ffi::OsString::from_vec(b"a\xffb".to_vec());
        let args = |last: std::ffi::OsString| -> Vec<std::ffi::OsString> {
            ["tierkit-run", "--json", "--", "sh", "-c", r#"test "$1" = "$(printf 'a\377b')""#, "sh"]
                .iter()
                .map(std::ffi::OsString::from)
                .chain([last])
                .collect()
        };
        assert_eq!(main_with_args(args(odd)), 0);
        assert_eq!(main_with_args(args("ab".into())), 1);
    }
}
