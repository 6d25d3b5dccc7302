//! Sizes, counts, durations, capacities and periods as users write them (`--fast-capacity`,
//! `--capacity`, `--slice`, `--accesses`, policy parameters, platform capacities), and the
//! names of formats and timing models. Each value that parses must print to text that parses
//! back to the same value: byte sizes and counts as integers, durations in ns, periods as
//! `N`, `N-insn` and `Nns` (how `Params::canonical` prints them), capacities as fractions
//! or bytes (a percentage above 100% as a percentage, within rounding).
#![no_main]
use libfuzzer_sys::fuzz_target;
use tierkit_core::timing::TimingKind;
use tierkit_core::trace::Format;
use tierkit_core::units::{parse_bytes, parse_count, parse_duration_ns, Capacity, Period};
use tierkit_fuzz::ok;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Some(b) = ok(parse_bytes("size", s)) {
        assert_eq!(parse_bytes("size", &b.to_string()).ok(), Some(b), "{s:?} -> {b}");
    }
    if let Some(n) = ok(parse_count("count", s)) {
        assert_eq!(parse_count("count", &n.to_string()).ok(), Some(n), "{s:?} -> {n}");
    }
    if let Some(ns) = ok(parse_duration_ns("duration", s)) {
        assert!(ns.is_finite() && ns >= 0.0);
        assert_eq!(parse_duration_ns("duration", &format!("{ns}ns")).ok(), Some(ns), "{s:?} -> {ns} ns");
    }
    if let Some(c) = ok(Capacity::parse("capacity", s)) {
        let printed = match c {
            Capacity::Fraction(f) if f > 1.0 => {
                // a percentage above 100%: a tier larger than the footprint; printed back as a
                // percentage it parses to the same share within rounding
                assert!(f.is_finite() && f <= 1e4, "{s:?} -> fraction {f}");
                let back = Capacity::parse("capacity", &format!("{}%", f * 100.0)).ok();
                assert!(matches!(back, Some(Capacity::Fraction(g)) if (g - f).abs() <= 1e-12 * f), "{s:?} -> {back:?}");
                None
            }
            Capacity::Fraction(f) => {
                assert!(f > 0.0 && f <= 1.0, "{s:?} -> fraction {f}");
                Some(f.to_string())
            }
            Capacity::Bytes(b) => {
                assert!(b > 0);
                Some(format!("{b}B"))
            }
            Capacity::Unlimited => Some("unlimited".to_string()),
        };
        if let Some(printed) = printed {
            assert_eq!(Capacity::parse("capacity", &printed).ok(), Some(c), "{s:?} -> {printed:?}");
        }
        for (footprint, page) in [(0u64, 4096u64), (1000, 4096), (u64::MAX, 1)] {
            let _ = c.pages(footprint, page);
        }
    }
    if let Some(p) = ok(Period::parse("period", s)) {
        let printed = match p {
            Period::Accesses(n) => n.to_string(),
            Period::Insn(n) => format!("{n}-insn"),
            Period::Ns(n) => format!("{n}ns"),
        };
        assert_eq!(Period::parse("period", &printed).ok(), Some(p), "{s:?} -> {printed:?}");
        let _ = p.describe();
    }
    if let Some(f) = ok(Format::parse("--format", s)) {
        assert_eq!(Format::parse("--format", &f.spec()).ok(), Some(f));
    }
    if let Some(t) = ok(TimingKind::parse(s)) {
        assert_eq!(TimingKind::parse(t.name()).ok(), Some(t));
    }
});
