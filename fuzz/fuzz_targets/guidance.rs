//! Guidance files (`guided:guidance=FILE`, made by `tierkit guide`; docs/guidance.md), read
//! and checked as the `guided` policy reads them, then the policy built from them as
//! `simulate` builds it (static and per-phase, alone and with `then=otf`).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::policy::guided::Guidance;
use tierkit_core::policy::{self, PolicySpec};
use tierkit_fuzz::ok;

fuzz_target!(|data: &[u8]| {
    let path = tierkit_fuzz::scratch("json", data);
    let p = path.to_str().unwrap();
    let Some(g) = ok(Guidance::read(p)) else { return };
    assert!(g.tiers >= 2 && g.key_frames >= 1);
    // version 2 keys sites by 1 to `context` frame keys (docs/guidance.md)
    if g.version == 2 {
        assert!(g.sites.iter().all(|(k, _)| !k.is_empty() && k.len() <= g.key_frames));
    }
    assert_eq!(g.per_phase, g.slice.is_some());
    for tiers in &g.arena_tiers {
        assert!(tiers.iter().all(|&t| t < g.tiers));
    }
    let mode = if g.per_phase { "per-phase" } else { "static" };
    for spec in [format!("guided:guidance={p},mode={mode}"), format!("guided:guidance={p},then=otf")] {
        if let Some(spec) = ok(PolicySpec::parse(&spec)) {
            ok(policy::build(&spec));
        }
    }
});
