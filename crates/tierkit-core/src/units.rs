//! Parsing of the quantities users write on command lines and in configuration files:
//! byte sizes (`32K`, `1.5GiB`), capacities (a fraction of the footprint or a size),
//! periods (`1000`, `100K`, `10ms`, `1M-insn`) and latencies.
//!
//! Conventions: byte sizes use binary multiples (K = 1024, as cache and memory sizes are
//! quoted); counts of accesses or instructions use decimal multiples (K = 1000).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || c == '_' || ((c == 'e' || c == 'E') && i > 0 && s[i + 1..].starts_with(|d: char| d.is_ascii_digit() || d == '-'))))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let num: String = s[..end].chars().filter(|&c| c != '_').collect();
    let v: f64 = num.parse().ok()?;
    Some((v, s[end..].trim()))
}

/// Parse a byte size: `4096`, `32K`, `32KiB`, `32KB`, `1.5G`. Binary multiples.
pub fn parse_bytes(key: &str, s: &str) -> Result<u64> {
    let bad = || Error::config(key, format!("'{s}' is not a byte size (examples: 4096, 32K, 1M, 16GiB)"));
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0f64.powi(4),
        _ => return Err(bad()),
    };
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// Parse a count with decimal multiples: `1000`, `100K`, `2.5M`, `1G`.
pub fn parse_count(key: &str, s: &str) -> Result<u64> {
    let bad = || Error::config(key, format!("'{s}' is not a count (examples: 1000, 100K, 2M)"));
    let (v, unit) = split_number(s).ok_or_else(bad)?;
    let mult: f64 = match unit {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" | "b" | "B" => 1e9,
        _ => return Err(bad()),
    };
    let n = v * mult;
    if !n.is_finite() || n < 0.0 || n > u64::MAX as f64 || n.fract() != 0.0 {
        return Err(bad());
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
            if !(rest.is_empty() && v > 0.0 && v <= 100.0) {
                return Err(Error::config(key, format!("'{s}': a percentage of the footprint must be in (0%, 100%]")));
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
            Period::Ns(parse_duration_ns(key, t)?.round() as u64)
        } else {
            Period::Accesses(parse_count(key, t).map_err(|_| {
                Error::config(key, format!("'{s}' is not a period (examples: 1000 or 100K accesses, 1M-insn, 10ms)"))
            })?)
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
