//! `tierkit run --guidance FILE`: the program runs with the preloaded allocator
//! (`libtierkit_alloc.so`, crate `tierkit-alloc`), which serves each allocation site from the
//! arena its version-2 guidance names, bound to its tier's node (002 §IV; docs/guidance.md, "A guided run on a real machine"). Its exit
//! reports (one per process that loaded it) are folded into the run's report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tierkit_core::{Error, Result};

pub const LIB_NAME: &str = "libtierkit_alloc.so";

/// The library: `TIERKIT_ALLOC_LIB`, else next to this binary, else in the workspace's
/// target/release this crate was built in.
pub fn find_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("TIERKIT_ALLOC_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(Error::config("TIERKIT_ALLOC_LIB", format!("{}: no such file", p.display()))) };
    }
    let mut cands = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(d) = exe.parent() {
            cands.push(d.join(LIB_NAME));
        }
    }
    cands.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release").join(LIB_NAME));
    cands
        .iter()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            Error::config(
                "--guidance",
                format!("the allocator library {LIB_NAME} is not built (looked in {}); run 'make alloc' (cargo build --release -p tierkit-alloc) or set TIERKIT_ALLOC_LIB", cands.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")),
            )
        })
}

/// The guidance file's reader and its limit, `MAX_GUIDANCE_BYTES`: the preloaded library's own
/// source, so that a file the library would refuse is refused before the program starts, in
/// the same words (docs/guidance.md "Reading the guidance file").
#[path = "../../tierkit-alloc/src/guidance_file.rs"]
mod guidance_file;
pub use guidance_file::MAX_GUIDANCE_BYTES;

/// The bytes of the guidance file ([`guidance_file::read_file`]), and what to give instead of
/// something that is not a file.
fn read_guidance_file(path: &Path) -> std::result::Result<Vec<u8>, String> {
    guidance_file::read_file(path).map_err(|e| if e.starts_with("not a regular file") { format!("{e}; give the file 'tierkit guide' wrote") } else { e })
}

/// Checks what tierkit can check before the program starts: a regular file within
/// [`MAX_GUIDANCE_BYTES`] holding JSON guidance of version 2 (the library checks the rest and
/// says so on stderr).
pub fn check_guidance(path: &Path) -> Result<Value> {
    let name = path.display().to_string();
    let bytes = read_guidance_file(path).map_err(|e| Error::config("--guidance", format!("{name}: {e}")))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| Error::config("--guidance", format!("{name}: not JSON ({e})")))?;
    if v.get("format").and_then(Value::as_str) != Some("tierkit-guidance") {
        return Err(Error::config("--guidance", format!("{name}: format: not \"tierkit-guidance\"")));
    }
    match v.get("version").and_then(Value::as_u64) {
        Some(2) => Ok(v),
        Some(1) => Err(Error::config(
            "--guidance",
            format!("{name}: version: 1 keys sites by symbolized frames, which a running program cannot compute; make version-2 guidance (docs/guidance.md)"),
        )),
        _ => Err(Error::config("--guidance", format!("{name}: version: not 2"))),
    }
}

/// The warning of a guided run on a machine with one NUMA node with memory (`tiers.slow` is
/// None): every tier of the guidance is bound to that node, so the guidance changes nothing
/// about where pages go (the run still shows its arenas and allocations). None with two nodes.
pub fn one_node_warning(tiers: &crate::sys::Tiers) -> Option<String> {
    if tiers.slow.is_some() {
        return None;
    }
    let n = tiers.fast;
    Some(format!(
        "warning: --guidance: this machine has one NUMA node with memory (node {n}), so every tier of the guidance maps to node {n} and the guidance changes nothing about placement; run it where there is a fast and a slow node, such as the testbed VM (docs/real-linux.md)"
    ))
}

/// The environment of a guided program, and the directory its reports go to.
pub struct Setup {
    pub lib: PathBuf,
    pub guidance: PathBuf,
    pub report_dir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Setup {
    pub fn new(guidance: &Path, fast: u32, slow: Option<u32>) -> Result<Setup> {
        check_guidance(guidance)?;
        let lib = find_library()?;
        let guidance = guidance.canonicalize().map_err(|e| Error::io(guidance, e))?;
        let report_dir = std::env::temp_dir().join(format!(
            "tierkit-alloc-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
        ));
        std::fs::create_dir_all(&report_dir).map_err(|e| Error::io(&report_dir, e))?;
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(p) if !p.is_empty() => format!("{}:{p}", lib.display()),
            _ => lib.display().to_string(),
        };
        let env = vec![
            ("LD_PRELOAD".into(), preload),
            ("TIERKIT_GUIDANCE".into(), guidance.display().to_string()),
            ("TIERKIT_ALLOC_REPORT".into(), report_dir.join("alloc.%p.json").display().to_string()),
            // tier 0 on the fast node, the other tiers on the slow one (the fast node alone on
            // a one-node machine)
            ("TIERKIT_NODES".into(), format!("{fast},{}", slow.unwrap_or(fast))),
        ];
        Ok(Setup { lib, guidance, report_dir, env })
    }

    /// The library's reports folded into one object (and the directory removed).
    pub fn fold(&self, program_pid: i32) -> Value {
        let mut reports: Vec<Value> = std::fs::read_dir(&self.report_dir)
            .map(|d| d.filter_map(|e| e.ok()).filter_map(|e| std::fs::read(e.path()).ok()).filter_map(|b| serde_json::from_slice(&b).ok()).collect())
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&self.report_dir);
        reports.sort_by_key(|r| r["pid"].as_i64().unwrap_or(0));
        let sum = |k: &str| reports.iter().map(|r| r[k].as_u64().unwrap_or(0)).sum::<u64>();
        // per guidance arena, over the processes
        // id -> (allocations, bytes, pages by node, tier, node, pages by node at the sampled
        // peak: TIERKIT_ALLOC_SAMPLE_MS)
        type Sum = (u64, u64, BTreeMap<String, u64>, Value, Value, Option<BTreeMap<String, u64>>);
        let mut arenas: BTreeMap<u64, Sum> = BTreeMap::new();
        for r in &reports {
            for a in r["arenas"].as_array().into_iter().flatten() {
                let e = arenas.entry(a["id"].as_u64().unwrap_or(0)).or_insert((0, 0, BTreeMap::new(), a["tier"].clone(), a["node"].clone(), None));
                e.0 += a["allocations"].as_u64().unwrap_or(0);
                e.1 += a["bytes"].as_u64().unwrap_or(0);
                for (n, c) in a["pages_by_node"].as_object().into_iter().flatten() {
                    *e.2.entry(n.clone()).or_insert(0) += c.as_u64().unwrap_or(0);
                }
                if let Some(pk) = a["pages_by_node_at_peak"].as_object() {
                    let m = e.5.get_or_insert_with(BTreeMap::new);
                    for (n, c) in pk {
                        *m.entry(n.clone()).or_insert(0) += c.as_u64().unwrap_or(0);
                    }
                }
            }
        }
        let main = reports.iter().find(|r| r["pid"].as_i64() == Some(program_pid as i64));
        json!({
            "library": self.lib.display().to_string(),
            "guidance": self.guidance.display().to_string(),
            "guidance_digest": reports.first().map(|r| r["guidance_digest"].clone()),
            "processes": reports.len(),
            "program_reported": main.is_some(),
            "guided": main.map(|r| r["guided"].clone()).unwrap_or(Value::Null),
            "allocations_total": sum("allocations_total"),
            "allocations_unmatched": sum("allocations_unmatched"),
            "bytes_unmatched": sum("bytes_unmatched"),
            "arena_fallbacks": sum("arena_fallbacks"),
            "unwinds": sum("unwinds"),
            // per-phase guidance: the program's switches at the phase markers
            "phases": main.map(|r| r["phases"].clone()).unwrap_or(Value::Null),
            "arenas": arenas.iter().map(|(id, (c, b, pages, tier, node, peak))| json!({
                "id": id, "tier": tier, "node": node, "allocations": c, "bytes": b, "pages_by_node": pages,
                "pages_by_node_at_peak": peak,
            })).collect::<Vec<_>>(),
            "errors": reports.iter().flat_map(|r| r["errors"].as_array().cloned().unwrap_or_default()).collect::<Vec<_>>(),
            "warnings": reports.iter().flat_map(|r| r["warnings"].as_array().cloned().unwrap_or_default()).collect::<Vec<_>>(),
            "reports": reports,
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.report_dir);
    }
}
