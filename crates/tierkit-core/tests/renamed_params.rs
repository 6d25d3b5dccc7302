//! One name for one thing (docs/policies.md): parameters renamed so that the same cost or
//! interval has the same name in every policy (`pte_scan_ns`, `counter_read_ns`,
//! `promote_rate_limit_mib_per_s`, `tlb_flush_interval_ms`, `fthp:epoch` as the other epoch
//! policies') are still read under their old names for one release: the same run, bit for
//! bit, and a warning that names the new name.

mod common;

use common::{run, write_pages};
use tierkit_core::policy::params::RENAMED;
use tierkit_core::policy::REGISTRY;
use tierkit_core::units::Capacity;

const HALF: [(usize, Capacity); 1] = [(0, Capacity::Fraction(0.5))];

/// A value each renamed parameter takes, under its new name (the old one gets the old form).
fn values(policy: &str, new: &str) -> (&'static str, &'static str) {
    match (policy, new) {
        ("fthp", "epoch") => ("0.02", "20us"),
        (_, "promote_rate_limit_mib_per_s") => ("100", "100"),
        (_, "tlb_flush_interval_ms") => ("5", "5"),
        _ => ("20", "20"),
    }
}

#[test]
fn every_old_name_runs_the_same_as_its_new_one_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let pages: Vec<u64> = (0..4000u64).map(|i| (i * 7919) % 300).collect();
    let input = write_pages(dir.path(), &pages, None);
    for r in RENAMED {
        let info = REGISTRY.iter().find(|p| p.name == r.policy).unwrap_or_else(|| panic!("{} is not registered", r.policy));
        assert!(info.params.iter().any(|d| d.name == r.new), "{}:{} is not declared", r.policy, r.new);
        assert!(!info.params.iter().any(|d| d.name == r.old), "{}:{} is still declared", r.policy, r.old);
        let (old_v, new_v) = values(r.policy, r.new);
        let platform = if matches!(r.policy, "hyplacer" | "memos" | "clock-dwf" | "autonuma-tiering") { "dram-dcpmm" } else { "hbm-ddr4" };
        let a = run(&input, platform, &HALF, &format!("{}:{}={old_v}", r.policy, r.old));
        let b = run(&input, platform, &HALF, &format!("{}:{}={new_v}", r.policy, r.new));
        assert_eq!((a.runtime_ns, a.migrations, a.fast_hit_ratio), (b.runtime_ns, b.migrations, b.fast_hit_ratio), "{}:{}", r.policy, r.old);
        // the recorded spec is the new one, so the replay needs no old name
        assert_eq!(a.config.policy, b.config.policy);
        let said: Vec<&String> = a.warnings.iter().filter(|w| w.contains(&format!("{}:{} is now {}:{}", r.policy, r.old, r.policy, r.new))).collect();
        assert_eq!(said.len(), 1, "{:?}", a.warnings);
        assert!(!b.warnings.iter().any(|w| w.contains("is now")), "{:?}", b.warnings);
    }
}

/// `tierkit policies` and `tierkit run` read how a policy deploys from the one registry
/// entry: a daemon policy has a live decider, every other policy says why it has none.
#[test]
fn every_policy_says_how_it_deploys() {
    use tierkit_core::live::build_decider;
    use tierkit_core::policy::Deploy;
    for p in REGISTRY {
        // the registry's word is the decider's: a daemon policy builds one, no other does
        let built = build_decider(&tierkit_core::policy::PolicySpec::parse(p.name).unwrap(), 16, 4096);
        assert_eq!(p.deploy == Deploy::Daemon, built.is_ok(), "{}: {:?}", p.name, built.err());
        if let Deploy::Hardware { why } | Deploy::NotLive { why } = p.deploy {
            assert!(why.len() > 20, "{}: say why", p.name);
        }
    }
}
