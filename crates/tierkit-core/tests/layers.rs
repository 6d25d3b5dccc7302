//! The layers of docs/architecture.md, checked on the source: each module of the crate names
//! (in code, not comments) only modules of its own layer or below it. A new module fails here
//! until it is given its layer.

use std::collections::BTreeSet;
use std::path::Path;

/// Module → layer, from the bottom. Modules of one layer may use each other.
const LAYERS: &[(&str, u32)] = &[
    // shared by every layer
    ("error", 0),
    ("units", 0),
    ("pagemap", 0),
    ("prefetch", 0),
    ("rng", 0),
    ("sitekey", 0),
    ("outfile", 0),
    // records in, records out; knows nothing of tiers
    ("trace", 1),
    ("cache", 1),
    ("heap", 1),
    // tiers and their figures; the one description of a run; analyses of traces
    ("platform", 2),
    ("runspec", 2),
    ("periods", 2),
    ("profile", 2),
    // moves, capacities and their accounting
    ("mechanics", 3),
    // what accesses and moves cost
    ("timing", 4),
    // what a policy may observe
    ("tracking", 5),
    // decisions only
    ("policy", 6),
    // the loop
    ("engine", 7),
    // live tiering's decision side
    ("live", 8),
];

fn rank(m: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == m).map(|&(_, r)| r)
}

/// The `crate::NAME` a source text names outside comments.
fn names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + 7..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn sources(p: &Path) -> Vec<std::path::PathBuf> {
    if p.is_dir() {
        let mut v: Vec<_> = std::fs::read_dir(p).unwrap().flat_map(|e| sources(&e.unwrap().path())).collect();
        v.sort();
        v
    } else if p.extension().is_some_and(|e| e == "rs") {
        vec![p.to_path_buf()]
    } else {
        Vec::new()
    }
}

#[test]
fn each_module_uses_only_its_layer_and_those_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let modules: Vec<&str> = lib.lines().filter_map(|l| l.trim().strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';'))).collect();
    assert!(modules.len() > 15, "{modules:?}");
    let mut wrong = Vec::new();
    for m in &modules {
        let r = rank(m).unwrap_or_else(|| panic!("module {m} has no layer in tests/layers.rs (docs/architecture.md)"));
        let path = if src.join(m).is_dir() { src.join(m) } else { src.join(format!("{m}.rs")) };
        for f in sources(&path) {
            let text = std::fs::read_to_string(&f).unwrap();
            for used in names(&text) {
                match rank(&used) {
                    Some(u) if u > r => wrong.push(format!("{} (layer {r}) uses crate::{used} (layer {u})", f.strip_prefix(&src).unwrap().display())),
                    _ => {}
                }
            }
        }
    }
    assert!(wrong.is_empty(), "a layer uses one above it:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_a_use_and_skips_comments() {
    let n = names("use crate::engine::Job; // crate::live\n/// see crate::runspec\nlet x = crate::policy::lookup(a);");
    assert_eq!(n.into_iter().collect::<Vec<_>>(), ["engine", "policy"]);
}
