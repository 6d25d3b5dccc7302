//! Policy specs (`--policy NAME:key=value,...` and `--policies A,B;C`), split and parsed as
//! the CLI does, then built as `simulate` builds them (every parameter checked against its
//! declaration, the policy constructed), with and without `--time-scale`. A spec that builds
//! must print (`Params::canonical`, what results record to replay a run) to a spec that
//! parses back to the same parameters.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::policy::{self, Params, PolicySpec};
use tierkit_fuzz::ok;

/// `--time-scale` values: the first byte of the input picks one.
const SCALES: [f64; 6] = [1.0, 2.0, 0.5, 1000.0, 1e-6, 1e6];

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    // parameters that are file names (guided:guidance, kleio:predictions) are fuzzed by
    // their own targets; here they must not reach outside an empty directory (/dev/zero
    // would be read to the end of memory)
    if text.contains('/') {
        return;
    }
    tierkit_fuzz::enter_empty_dir();
    let Some(specs) = ok(PolicySpec::parse_list(text)) else { return };
    ok(PolicySpec::parse(text));
    for spec in specs.iter().take(4) {
        let scale = SCALES[k as usize % SCALES.len()];
        let Some((_runnable, params, _scaled)) = ok(policy::build_scaled(spec, scale)) else { continue };
        let canonical = params.canonical();
        let again = PolicySpec::parse(&canonical).unwrap_or_else(|e| panic!("canonical spec {canonical:?} does not parse: {e}"));
        let info = policy::lookup(&again.name).expect("a built policy is registered");
        let back = Params::parse(info.name, info.params, &again).unwrap_or_else(|e| panic!("canonical spec {canonical:?} is refused: {e}"));
        assert_eq!(back.values, params.values, "{canonical:?} parses back to other parameters");
    }
});
