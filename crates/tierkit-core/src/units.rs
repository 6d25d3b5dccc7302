//! Parsing of the quantities users write on command lines and in configuration files:
//! byte sizes (`32K`, `1.5GiB`), capacities (a fraction of the footprint or a size),
//! periods (`1000`, `100K`, `10ms`, `1M-insn`) and latencies.
//!
//! Conventions: byte sizes use binary multiples (K = 1024, as cache and memory sizes are
//! quoted); counts of accesses or instructions use decimal multiples (K = 1000).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

fn split_number(s: &str) -> Option<(f64, &str)> {
    let (num, rest) = number_text(s)?;
    let v: f64 = num.parse().ok()?;
    Some((v, rest))
}

/// The number at the start of `s` (underscores removed) and the rest, trimmed.
fn number_text(s: &str) -> Option<(String, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || ((c == 'e' || c == 'E') && i > 0 && s[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-')))
        })
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    Some((s[..end].chars().filter(|&c| c != '_').collect(), s[end..].trim()))
}

/// `s`'s number times `mult`, computed exactly when the number is whole (digits only), since
/// f64 rounds integers past 2^53: `Some(None)` when the product does not fit in 64 bits,
/// `None` when the number has a point or an exponent (callers then go through f64).
fn whole_times(s: &str, mult: u64) -> Option<Option<u64>> {
    let (num, _) = number_text(s)?;
    if !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // more than 20 digits cannot fit whatever the multiple (u64::MAX has 20)
    let v: Option<u64> = num.trim_start_matches('0').parse::<u64>().ok().or(num.trim_start_matches('0').is_empty().then_some(0));
    Some(v.and_then(|v| v.checked_mul(mult)))
}

/// 2^64 as f64: a product at or above it does not fit in a u64 (`u64::MAX as f64` rounds to it).
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// Parse a byte size: `4096`, `32K`, `32KiB`, `32KB`, `1.5G`. Binary multiples.
pub fn parse_bytes(key: &str, s: &str) -> Result<u64> {
    let bad = || Error::config(key, format!("'{s}' is not a byte size (examples: 4096, 32K, 1M, 16GiB)"));
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let too_big = || Error::config(key, format!("'{s}' is too large: a byte size is at most 2^64 - 1 bytes"));
    if let Some(exact) = whole_times(s, mult) {
        return exact.ok_or_else(too_big);
    }
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 {
        return Err(bad());
    }
    if bytes.round() >= TWO_POW_64 {
        return Err(too_big());
    }
    Ok(bytes.round() as u64)
}

/// Parse a count with decimal multiples: `1000`, `100K`, `2.5M`, `1G`.
pub fn parse_count(key: &str, s: &str) -> Result<u64> {
    let bad = || Error::config(key, format!("'{s}' is not a count (examples: 1000, 100K, 2M)"));
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1_000,
        "m" | "M" => 1_000_000,
        "g" | "G" | "b" | "B" => 1_000_000_000,
        _ => return Err(bad()),
    };
    let too_big = || Error::config(key, format!("'{s}' is too large: a count is at most 2^64 - 1"));
    if let Some(exact) = whole_times(s, mult) {
        return exact.ok_or_else(too_big);
    }
    let n = v * mult as f64;
    if !n.is_finite() || n < 0.0 || n.fract() != 0.0 {
        return Err(bad());
    }
    if n >= TWO_POW_64 {
        return Err(too_big());
    }
    Ok(n as u64)
}

/// Parse a duration into nanoseconds: `50ns`, `3us`, `3µs`, `10ms`, `1s`. A bare number is ns.
pub fn parse_duration_ns(key: &str, s: &str) -> Result<f64> {
    let bad = || Error::config(key, format!("'{s}' is not a duration (examples: 50ns, 3us, 10ms, 1s)"));
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(bad()),
    };
    let ns = v * mult;
    if !ns.is_finite() || ns < 0.0 {
        return Err(bad());
    }
    Ok(ns)
}

/// A period given as a duration, in whole nanoseconds: exact for whole numbers (past 2^53
/// too), rounded otherwise; one past 2^64 - 1 ns (584 years) is an error, not clamped.
fn parse_period_ns(key: &str, t: &str) -> Result<u64> {
    let ns = parse_duration_ns(key, t)?;
    let mult = match number_text(t).map(|(_, unit)| unit) {
        Some("us" | "µs" | "μs") => 1_000,
        Some("ms") => 1_000_000,
        Some("s") => 1_000_000_000,
        _ => 1,
    };
    let too_big = || Error::config(key, format!("'{t}' is too long: a period is at most 2^64 - 1 ns"));
    if let Some(exact) = whole_times(t, mult) {
        return exact.ok_or_else(too_big);
    }
    if ns.round() >= TWO_POW_64 {
        return Err(too_big());
    }
    Ok(ns.round() as u64)
}

/// A tier capacity as users give it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capacity {
    /// Fraction of the trace's footprint (distinct pages), in (0, 1].
    Fraction(f64),
    /// Absolute size in bytes.
    Bytes(u64),
    /// No limit (the last tier of a platform, by default).
    Unlimited,
}

impl Capacity {
    /// `0.125` (fraction of the footprint), `512M`, `1GiB`, `unlimited`.
    pub fn parse(key: &str, s: &str) -> Result<Capacity> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("inf") {
            return Ok(Capacity::Unlimited);
        }
        if let Some(p) = t.strip_suffix('%') {
            let (v, rest) = split_number(p).ok_or_else(|| Error::config(key, format!("'{s}' is not a capacity")))?;
            // above 100%: a tier larger than the footprint (seed 004 §5.1's DRAM of 1.25x the data)
            if !(rest.is_empty() && v > 0.0 && v.is_finite() && v <= 1e6) {
                return Err(Error::config(key, format!("'{s}': a percentage of the footprint must be above 0% (at most 1000000%)")));
            }
            return Ok(Capacity::Fraction(v / 100.0));
        }
        match split_number(t) {
            Some((v, "")) => {
                if v > 0.0 && v <= 1.0 {
                    Ok(Capacity::Fraction(v))
                } else {
                    Err(Error::config(
                        key,
                        format!("'{s}' cannot work: give a fraction of the footprint in (0, 1] (e.g. 0.125) or a size with a unit (e.g. 512M)"),
                    ))
                }
            }
            _ => {
                let b = parse_bytes(key, t)?;
                if b == 0 {
                    return Err(Error::config(key, format!("'{s}': a capacity of 0 bytes cannot work")));
                }
                Ok(Capacity::Bytes(b))
            }
        }
    }

    /// Resolve to pages given the footprint and page size.
    pub fn pages(&self, footprint_pages: u64, page_size: u64) -> u64 {
        match *self {
            // floor, as the Cori simulator computes int(ratio * pages)
            Capacity::Fraction(f) => (f * footprint_pages as f64) as u64,
            Capacity::Bytes(b) => b / page_size,
            Capacity::Unlimited => u64::MAX,
        }
    }
}

/// The unit in which a periodic policy's period is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "unit", content = "n")]
pub enum Period {
    /// Every N memory accesses (records of the trace).
    Accesses(u64),
    /// Every N instructions of the traced program.
    Insn(u64),
    /// Every N nanoseconds of simulated time.
    Ns(u64),
}

impl Period {
    /// `1000` or `100K` (accesses), `1M-acc`, `1M-insn`, `10ms`, `500us`, `2000ns`.
    pub fn parse(key: &str, s: &str) -> Result<Period> {
        let t = s.trim();
        let p = if let Some(n) = t.strip_suffix("-insn").or_else(|| t.strip_suffix("insn")) {
            Period::Insn(parse_count(key, n.trim())?)
        } else if let Some(n) = t.strip_suffix("-accesses").or_else(|| t.strip_suffix("-acc")) {
            Period::Accesses(parse_count(key, n.trim())?)
        } else if t.ends_with("ns") || t.ends_with("us") || t.ends_with("µs") || t.ends_with("ms") || (t.ends_with('s') && !t.ends_with("es")) {
            Period::Ns(parse_period_ns(key, t)?)
        } else {
            Period::Accesses(
                parse_count(key, t).map_err(|_| Error::config(key, format!("'{s}' is not a period (examples: 1000 or 100K accesses, 1M-insn, 10ms)")))?,
            )
        };
        let n = match p {
            Period::Accesses(n) | Period::Insn(n) | Period::Ns(n) => n,
        };
        if n == 0 {
            return Err(Error::config(key, format!("'{s}': a period must be positive")));
        }
        Ok(p)
    }

    pub fn describe(&self) -> String {
        match self {
            Period::Accesses(n) => format!("{n} accesses"),
            Period::Insn(n) => format!("{n} instructions"),
            Period::Ns(n) => format!("{n} ns"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_use_binary_multiples() {
        assert_eq!(parse_bytes("k", "32K").unwrap(), 32 * 1024);
        assert_eq!(parse_bytes("k", "1M").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("k", "16GiB").unwrap(), 16 << 30);
        assert_eq!(parse_bytes("k", "4096").unwrap(), 4096);
        assert!(parse_bytes("k", "12 parsecs").is_err());
    }

    #[test]
    fn counts_use_decimal_multiples() {
        assert_eq!(parse_count("k", "100K").unwrap(), 100_000);
        assert_eq!(parse_count("k", "2.5M").unwrap(), 2_500_000);
        assert!(parse_count("k", "1.5").is_err());
    }

    #[test]
    fn capacities() {
        assert_eq!(Capacity::parse("c", "0.125").unwrap(), Capacity::Fraction(0.125));
        assert_eq!(Capacity::parse("c", "25%").unwrap(), Capacity::Fraction(0.25));
        assert_eq!(Capacity::parse("c", "125%").unwrap(), Capacity::Fraction(1.25));
        assert_eq!(Capacity::Fraction(1.25).pages(1001, 4096), 1251);
        assert!(Capacity::parse("c", "0%").is_err() && Capacity::parse("c", "inf%").is_err());
        assert_eq!(Capacity::parse("c", "512M").unwrap(), Capacity::Bytes(512 << 20));
        assert!(Capacity::parse("c", "0").is_err());
        assert!(Capacity::parse("c", "1.5").is_err());
        assert!(Capacity::parse("c", "-0.1").is_err());
        assert_eq!(Capacity::Fraction(0.2).pages(1301, 4096), 260);
    }

    #[test]
    fn periods() {
        assert_eq!(Period::parse("p", "1000").unwrap(), Period::Accesses(1000));
        assert_eq!(Period::parse("p", "100K").unwrap(), Period::Accesses(100_000));
        assert_eq!(Period::parse("p", "1M-insn").unwrap(), Period::Insn(1_000_000));
        assert_eq!(Period::parse("p", "10ms").unwrap(), Period::Ns(10_000_000));
        assert_eq!(Period::parse("p", "3us").unwrap(), Period::Ns(3_000));
        assert!(Period::parse("p", "0").is_err());
        assert!(Period::parse("p", "soon").is_err());
    }
}
