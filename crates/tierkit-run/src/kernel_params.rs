//! The kernel policies' parameters in `tierkit run`: the simulator's names and declarations
//! (tierkit-core's registry), so that `autonuma-tiering:hot_threshold_ms=500` or
//! `damon-tiering:hot_quota=10M` means the same in `simulate` and in `tierkit run`.
//!
//! Each kernel policy sets some of its declared parameters in the kernel (the knobs Linux
//! has: sysctls, debugfs, DAMON's sysfs files; [`live_keys`]). The others describe the
//! simulated machine to the model (a watermark, a cost per PTE, the pace of kswapd): on a
//! real machine the kernel has its own, and giving one to `tierkit run` is an error that says
//! so. The names `tierkit run` used before (`quota_mib`, `apply_ms`, `rate_limit_mbps`,
//! `used_goal_bp`, `free_goal_bp`) are still read, with a note, until the next release.

use tierkit_core::policy::params::{renamed_note, Renamed, RENAMED};
use tierkit_core::policy::{lookup, ParamSpec, Params, PolicySpec};
use tierkit_core::{Error, Result};

use crate::damon::{MonitorAttrs, TieringParams};
use crate::kernel::AutonumaParams;

/// autonuma-tiering: the parameters set in the kernel, and where (docs/real-linux.md).
/// `scan_period_ms` is the kernel's `scan_period_min_ms`: the time to scan the whole address
/// space at the fastest (Documentation/admin-guide/sysctl/kernel.rst, numa_balancing).
pub const AUTONUMA_LIVE: &[(&str, &str)] = &[
    ("hot_threshold_ms", "debugfs sched/numa_balancing/hot_threshold_ms"),
    ("promote_rate_limit_mib_per_s", "sysctl kernel.numa_balancing_promote_rate_limit_MBps"),
    ("scan_period_ms", "debugfs sched/numa_balancing/scan_period_min_ms"),
    ("scan_period_max_ms", "debugfs sched/numa_balancing/scan_period_max_ms"),
    ("scan_delay_ms", "debugfs sched/numa_balancing/scan_delay_ms"),
    ("scan_size_mb", "debugfs sched/numa_balancing/scan_size_mb"),
];

/// damon-tiering: the parameters set in DAMON's sysfs (the two kdamonds of mtier.c).
pub const DAMON_LIVE: &[(&str, &str)] = &[
    ("sample", "monitoring_attrs/intervals/sample_us"),
    ("aggr", "monitoring_attrs/intervals/aggr_us"),
    ("min_nr_regions", "monitoring_attrs/nr_regions/min"),
    ("max_nr_regions", "monitoring_attrs/nr_regions/max"),
    ("hot_min_accesses", "migrate_hot's access_pattern/nr_accesses/min"),
    ("cold_min_age", "migrate_cold's access_pattern/age/min"),
    ("hot_quota", "migrate_hot's quotas/bytes"),
    ("cold_quota", "migrate_cold's quotas/bytes"),
    ("quota_reset", "quotas/reset_interval_ms"),
    ("hot_goal_used_bp", "migrate_hot's goal node_mem_used_bp"),
    ("cold_goal_free_bp", "migrate_cold's goal node_mem_free_bp"),
    ("weight_nr_accesses", "quotas/weights/nr_accesses_permil"),
    ("weight_age", "quotas/weights/age_permil"),
    ("apply_aggrs", "apply_interval_us (aggr × apply_aggrs)"),
    ("young_filter", "migrate_cold's young filter"),
];

/// The parameters a kernel policy sets in the kernel, with where each goes.
pub fn live_keys(policy: &str) -> &'static [(&'static str, &'static str)] {
    match policy {
        "autonuma-tiering" => AUTONUMA_LIVE,
        "damon-tiering" => DAMON_LIVE,
        _ => &[],
    }
}

/// What a kernel policy's spec sets in the kernel.
#[derive(Clone, Debug)]
pub enum KernelParams {
    Autonuma(AutonumaParams),
    Damon(TieringParams),
}

/// `tierkit run`'s old names, read as the simulator's (one to one; `quota_mib` and `apply_ms`
/// are read in [`current_names`]).
const OLD_LIVE_NAMES: &[Renamed] = &[
    Renamed { policy: "autonuma-tiering", old: "rate_limit_mbps", new: "promote_rate_limit_mib_per_s", suffix: "" },
    Renamed { policy: "damon-tiering", old: "used_goal_bp", new: "hot_goal_used_bp", suffix: "" },
    Renamed { policy: "damon-tiering", old: "free_goal_bp", new: "cold_goal_free_bp", suffix: "" },
];

/// The spec under the simulator's current names only: `tierkit run`'s old names, then the
/// simulator's own old ones ([`RENAMED`]), each with its note.
fn current_names(spec: &PolicySpec, decl: &[ParamSpec]) -> Result<(PolicySpec, Vec<String>)> {
    let mut args = Vec::new();
    let mut notes = Vec::new();
    let mut simulators = Vec::new();
    for (k, v) in &spec.args {
        if let Some(r) = Renamed::find(OLD_LIVE_NAMES, &spec.name, k) {
            notes.push(r.note(", as in simulate"));
            args.push(r.arg(v));
        } else if let Some(r) = Renamed::find(RENAMED, &spec.name, k) {
            simulators.push(r.note(""));
            args.push(r.arg(v));
        } else if spec.name == "damon-tiering" && k == "quota_mib" {
            notes.push(renamed_note(&spec.name, k, "hot_quota and cold_quota", ", as in simulate"));
            args.push(("hot_quota".into(), format!("{v}M")));
            args.push(("cold_quota".into(), format!("{v}M")));
        } else if spec.name == "damon-tiering" && k == "apply_ms" {
            // apply_ms was a time; apply_aggrs counts aggregation intervals (of `aggr`, as
            // given or its declared default)
            notes.push(renamed_note(&spec.name, k, "apply_aggrs", ", as in simulate"));
            let ms: u64 = v.parse().map_err(|_| Error::config("damon-tiering:apply_ms", format!("'{v}' is not a whole number of ms")))?;
            let declared = decl.iter().find(|d| d.name == "aggr").map(|d| d.default);
            let aggr = spec.args.iter().find(|(k, _)| k == "aggr").map(|(_, a)| a.as_str()).or(declared).unwrap_or_default();
            let aggr_ns = tierkit_core::units::parse_duration_ns("damon-tiering:aggr", aggr)?;
            let n = ((ms as f64 * 1e6) / aggr_ns).round().max(1.0) as u64;
            args.push(("apply_aggrs".into(), n.to_string()));
        } else {
            args.push((k.clone(), v.clone()));
        }
    }
    notes.extend(simulators);
    Ok((PolicySpec { name: spec.name.clone(), args }, notes))
}

/// Parse a kernel policy's spec with the simulator's declarations, refuse what the kernel
/// cannot be given, and return what to set in it, with notes (old names read).
pub fn kernel_params(spec: &PolicySpec) -> Result<(KernelParams, Vec<String>)> {
    let info = lookup(&spec.name)?;
    let (spec, notes) = current_names(spec, info.params)?;
    let p = Params::parse(info.name, info.params, &spec)?;
    let live = live_keys(info.name);
    for (k, _) in &spec.args {
        if !live.iter().any(|(n, _)| n == k) {
            let names: Vec<&str> = live.iter().map(|(n, _)| *n).collect();
            return Err(Error::config(
                format!("{}:{k}", info.name),
                format!("describes the simulated machine to the model; a real kernel has its own (what tierkit run sets in the kernel: {})", names.join(", ")),
            ));
        }
    }
    // the values the simulator refuses are refused here too (an aggregation interval shorter
    // than the sampling one, fewer regions at most than at least)
    (info.build)(&p)?;
    let given = |k: &str| spec.args.iter().any(|(a, _)| a == k);
    let ms = |k: &str| p.float(k).round().max(0.0) as u64;
    Ok(match info.name {
        "autonuma-tiering" => (
            KernelParams::Autonuma(AutonumaParams {
                hot_threshold_ms: given("hot_threshold_ms").then(|| ms("hot_threshold_ms")),
                rate_limit_mbps: p.int("promote_rate_limit_mib_per_s") as u64,
                scan_period_min_ms: given("scan_period_ms").then(|| ms("scan_period_ms")),
                scan_period_max_ms: given("scan_period_max_ms").then(|| ms("scan_period_max_ms")),
                scan_delay_ms: given("scan_delay_ms").then(|| ms("scan_delay_ms")),
                scan_size_mb: given("scan_size_mb").then(|| p.int("scan_size_mb") as u64),
            }),
            notes,
        ),
        "damon-tiering" => {
            let d = TieringParams::default();
            let sample_ns = p.time_ns("sample")?;
            let aggr_ns = p.time_ns("aggr")?;
            let reset_ns = p.time_ns("quota_reset")?;
            let attrs = MonitorAttrs {
                sample_us: (sample_ns / 1000).max(1),
                aggr_us: (aggr_ns / 1000).max(1),
                min_regions: p.int("min_nr_regions") as u64,
                max_regions: p.int("max_nr_regions") as u64,
                ..d.attrs
            };
            (
                KernelParams::Damon(TieringParams {
                    apply_interval_us: attrs.aggr_us.saturating_mul(p.int("apply_aggrs") as u64),
                    hot_quota_bytes: p.bytes("hot_quota"),
                    cold_quota_bytes: p.bytes("cold_quota"),
                    quota_reset_ms: (reset_ns / 1_000_000).max(1),
                    hot_min_accesses: p.int("hot_min_accesses") as u64,
                    cold_min_age: p.int("cold_min_age") as u64,
                    used_goal_bp: p.int("hot_goal_used_bp") as u64,
                    free_goal_bp: p.int("cold_goal_free_bp") as u64,
                    weight_nr_accesses_permil: p.int("weight_nr_accesses") as u64,
                    weight_age_permil: p.int("weight_age") as u64,
                    young_filter: p.bool("young_filter"),
                    attrs,
                }),
                notes,
            )
        }
        other => return Err(Error::config("--policy", format!("'{other}' is not a kernel policy"))),
    })
}

/// Lower a kernel policy's own migration limits to `mib_per_s` (`--max-migrate-rate`):
/// autonuma-tiering's promotion rate limit (the kernel's only limit: demotion by reclaim has
/// none), damon-tiering's two quotas per reset interval (half the rate each). Says what was set.
pub fn limit_rate(p: &mut KernelParams, mib_per_s: f64) -> String {
    match p {
        KernelParams::Autonuma(a) => {
            a.rate_limit_mbps = a.rate_limit_mbps.min(mib_per_s.floor().max(1.0) as u64);
            format!("--max-migrate-rate: promotion rate limit {} MiB/s (demotion by reclaim has no limit in the kernel)", a.rate_limit_mbps)
        }
        KernelParams::Damon(d) => {
            // the two schemes share the rate
            let per_reset = (mib_per_s * 1048576.0 * d.quota_reset_ms as f64 / 1000.0 / 2.0).floor().max(4096.0) as u64;
            d.hot_quota_bytes = d.hot_quota_bytes.min(per_reset);
            d.cold_quota_bytes = d.cold_quota_bytes.min(per_reset);
            format!(
                "--max-migrate-rate: migrate_hot and migrate_cold quotas {} and {} bytes per {} ms (half the rate each)",
                d.hot_quota_bytes, d.cold_quota_bytes, d.quota_reset_ms
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(KernelParams, Vec<String>)> {
        kernel_params(&PolicySpec::parse(s).unwrap())
    }

    #[test]
    fn the_defaults_are_the_simulators_and_mtiers() {
        let (KernelParams::Damon(d), notes) = parse("damon-tiering").unwrap() else { panic!() };
        let t = TieringParams::default();
        assert!(notes.is_empty());
        assert_eq!((d.apply_interval_us, d.hot_quota_bytes, d.cold_quota_bytes, d.quota_reset_ms), (1_000_000, 200 << 20, 200 << 20, 1000));
        assert_eq!((d.hot_min_accesses, d.used_goal_bp, d.free_goal_bp), (t.hot_min_accesses, t.used_goal_bp, t.free_goal_bp));
        assert_eq!((d.attrs.sample_us, d.attrs.aggr_us, d.attrs.max_regions), (5000, 100_000, 1000));
        let (KernelParams::Autonuma(a), _) = parse("autonuma-tiering").unwrap() else { panic!() };
        assert_eq!((a.rate_limit_mbps, a.hot_threshold_ms, a.scan_period_min_ms), (65536, None, None));
    }

    #[test]
    fn the_simulators_names_are_taken_live() {
        let (KernelParams::Damon(d), _) = parse("damon-tiering:hot_quota=10M,cold_quota=2M,aggr=50ms,apply_aggrs=4,hot_goal_used_bp=9000").unwrap() else {
            panic!()
        };
        assert_eq!((d.hot_quota_bytes, d.cold_quota_bytes, d.apply_interval_us, d.used_goal_bp), (10 << 20, 2 << 20, 200_000, 9000));
        let (KernelParams::Autonuma(a), _) = parse("autonuma-tiering:hot_threshold_ms=500,promote_rate_limit_mib_per_s=100,scan_period_ms=2000").unwrap()
        else {
            panic!()
        };
        assert_eq!((a.hot_threshold_ms, a.rate_limit_mbps, a.scan_period_min_ms), (Some(500), 100, Some(2000)));
    }

    #[test]
    fn model_only_parameters_and_unknown_names_are_one_error() {
        let e = parse("autonuma-tiering:pte_update_ns=5").unwrap_err().to_string();
        assert!(e.contains("pte_update_ns") && e.contains("simulated machine") && e.contains("hot_threshold_ms"), "{e}");
        let e = parse("damon-tiering:hot_quota_x=1").unwrap_err().to_string();
        assert!(e.contains("unknown parameter 'hot_quota_x'"), "{e}");
        let e = parse("damon-tiering:aggr=1000").unwrap_err().to_string();
        assert!(e.contains("not a time"), "{e}");
        // what the simulator refuses, the kernel is not given either
        let e = parse("damon-tiering:sample=10ms,aggr=5ms").unwrap_err().to_string();
        assert!(e.contains("damon-tiering:aggr") && e.contains("sampling interval"), "{e}");
    }

    #[test]
    fn the_old_names_are_read_with_a_note() {
        let (KernelParams::Damon(d), notes) = parse("damon-tiering:quota_mib=10,apply_ms=500,used_goal_bp=9000,free_goal_bp=100").unwrap() else { panic!() };
        assert_eq!((d.hot_quota_bytes, d.cold_quota_bytes, d.apply_interval_us), (10 << 20, 10 << 20, 500_000));
        assert_eq!((d.used_goal_bp, d.free_goal_bp), (9000, 100));
        assert_eq!(notes.len(), 4, "{notes:?}");
        let (KernelParams::Autonuma(a), notes) = parse("autonuma-tiering:rate_limit_mbps=10").unwrap() else { panic!() };
        assert_eq!((a.rate_limit_mbps, notes.len()), (10, 1));
        // the simulator's old name too; two names of one parameter are one given twice
        let (KernelParams::Autonuma(a), notes) = parse("autonuma-tiering:promote_rate_limit_MBps=20").unwrap() else { panic!() };
        assert_eq!((a.rate_limit_mbps, notes.len()), (20, 1));
        let e = parse("autonuma-tiering:rate_limit_mbps=10,promote_rate_limit_MBps=20").unwrap_err().to_string();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn a_migration_rate_lowers_the_kernel_policies_own_limits_only() {
        let (mut a, _) = kernel_params(&PolicySpec::parse("autonuma-tiering").unwrap()).unwrap();
        let before = match &a {
            KernelParams::Autonuma(x) => x.rate_limit_mbps,
            _ => unreachable!(),
        };
        limit_rate(&mut a, 10.0);
        assert!(matches!(&a, KernelParams::Autonuma(x) if x.rate_limit_mbps == 10.min(before)));
        limit_rate(&mut a, 1e9);
        assert!(matches!(&a, KernelParams::Autonuma(x) if x.rate_limit_mbps == 10.min(before)), "never raised");
        let (mut d, _) = kernel_params(&PolicySpec::parse("damon-tiering").unwrap()).unwrap();
        limit_rate(&mut d, 8.0);
        let KernelParams::Damon(x) = &d else { unreachable!() };
        // 8 MiB/s over the reset interval, half to each scheme
        let want = (8.0 * 1048576.0 * x.quota_reset_ms as f64 / 1000.0 / 2.0) as u64;
        assert_eq!((x.hot_quota_bytes, x.cold_quota_bytes), (want, want));
    }
}
