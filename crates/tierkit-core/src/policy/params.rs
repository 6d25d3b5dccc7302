//! Policy parameters, declared once (name, type, unit, default, source) and used both to parse
//! `NAME:key=value,...` and to document the policy in `tierkit policies`.

use crate::error::{Error, Result};
use crate::units::{self, Period};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ParamType {
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
    },
    Bool,
    Choice {
        options: &'static [&'static str],
    },
    /// A period: `1000` accesses, `1M-insn`, `10ms`.
    Period,
    /// A byte size: `4096`, `64K`.
    Bytes,
    /// Free text (a file path, a list).
    Text,
}

/// One declared parameter.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ParamSpec {
    pub name: &'static str,
    pub ty: ParamType,
    /// Unit of the value (`accesses`, `pages`, `ns`, `ratio`...), empty if none.
    pub unit: &'static str,
    pub default: &'static str,
    /// Where the default comes from (seed and section, or "tierkit").
    pub source: &'static str,
    pub help: &'static str,
}

/// A parsed parameter value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
    Period(Period),
    Bytes(u64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Text(v) => write!(f, "{v}"),
            Value::Period(Period::Accesses(n)) => write!(f, "{n}"),
            Value::Period(Period::Insn(n)) => write!(f, "{n}-insn"),
            Value::Period(Period::Ns(n)) => write!(f, "{n}ns"),
            Value::Bytes(b) => write!(f, "{b}"),
        }
    }
}

fn parse_value(policy: &str, spec: &ParamSpec, raw: &str) -> Result<Value> {
    let key = format!("{policy}:{}", spec.name);
    let s = raw.trim();
    Ok(match spec.ty {
        ParamType::Int { min, max } => {
            // one optional sign; the magnitude must fit in i64 (2^64 - 1 used to wrap to -1 and
            // -2^63 to overflow when negated)
            let (negative, digits) = match s.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, s),
            };
            let magnitude = units::parse_count(&key, digits).map_err(|_| Error::config(&key, format!("'{raw}' is not an integer")))?;
            let v = if negative { 0i64.checked_sub_unsigned(magnitude) } else { i64::try_from(magnitude).ok() }
                .ok_or_else(|| Error::config(&key, format!("'{raw}' is out of range [{min}, {max}]")))?;
            if v < min || v > max {
                return Err(Error::config(&key, format!("{v} is out of range [{min}, {max}]")));
            }
            Value::Int(v)
        }
        ParamType::Float { min, max } => {
            let v: f64 = s.parse().map_err(|_| Error::config(&key, format!("'{raw}' is not a number")))?;
            if !(v >= min && v <= max) {
                return Err(Error::config(&key, format!("{v} is out of range [{min}, {max}]")));
            }
            Value::Float(v)
        }
        ParamType::Bool => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Value::Bool(true),
            "false" | "0" | "no" | "off" => Value::Bool(false),
            _ => return Err(Error::config(&key, format!("'{raw}' is not true or false"))),
        },
        ParamType::Choice { options } => {
            if !options.contains(&s) {
                return Err(Error::config(&key, format!("'{raw}' is not one of {}", options.join(", "))));
            }
            Value::Text(s.to_string())
        }
        ParamType::Period => Value::Period(Period::parse(&key, s)?),
        ParamType::Bytes => Value::Bytes(units::parse_bytes(&key, s)?),
        ParamType::Text => Value::Text(s.to_string()),
    })
}

/// A policy as written by the user: `NAME` or `NAME:key=value,key=value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicySpec {
    pub name: String,
    pub args: Vec<(String, String)>,
}

impl PolicySpec {
    pub fn parse(s: &str) -> Result<PolicySpec> {
        let s = s.trim();
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(Error::config("--policy", format!("'{s}': no policy name")));
        }
        let mut args = Vec::new();
        if let Some(rest) = rest {
            for kv in rest.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
                let (k, v) = kv.split_once('=').ok_or_else(|| Error::config(format!("policy '{name}'"), format!("'{kv}' is not key=value")))?;
                args.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        Ok(PolicySpec { name: name.to_string(), args })
    }

    /// Split a `--policies` list. Commas separate policies, but a comma followed by
    /// `key=value` continues the parameters of the policy before it, so
    /// `history:period=1000,bins=0,oracle` is two policies. `;` always separates.
    pub fn parse_list(s: &str) -> Result<Vec<PolicySpec>> {
        let mut items: Vec<String> = Vec::new();
        for part in s.split(';') {
            for tok in part.split(',') {
                let t = tok.trim();
                if t.is_empty() {
                    continue;
                }
                let continues = t.contains('=') && !t.contains(':') && items.last().map(|l| l.contains(':')).unwrap_or(false);
                if continues {
                    let last = items.last_mut().unwrap();
                    last.push(',');
                    last.push_str(t);
                } else {
                    items.push(t.to_string());
                }
            }
            // a ';' ends the parameters of the last policy
            items.push(String::new());
        }
        items.into_iter().filter(|i| !i.is_empty()).map(|i| PolicySpec::parse(&i)).collect()
    }

    pub fn to_string_short(&self) -> String {
        if self.args.is_empty() {
            self.name.clone()
        } else {
            format!("{}:{}", self.name, self.args.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
        }
    }
}

/// A parameter renamed so that one name means one thing across policies (the same cost or
/// interval has the same name everywhere; units in names as docs/policies.md sets them). The
/// old name is still read, its value with `suffix` appended (a bare number of ms becomes a
/// period), and the run says so in its warnings.
pub struct Renamed {
    pub policy: &'static str,
    pub old: &'static str,
    pub new: &'static str,
    pub suffix: &'static str,
}

impl Renamed {
    /// The entry of `table` that renames `key` of `policy`, if any.
    pub fn find<'a>(table: &'a [Renamed], policy: &str, key: &str) -> Option<&'a Renamed> {
        table.iter().find(|r| r.policy == policy && r.old == key)
    }

    /// `(new name, value)` for a value given under the old name.
    pub fn arg(&self, value: &str) -> (String, String) {
        (self.new.to_string(), format!("{value}{}", self.suffix))
    }

    /// The line a run says when it reads the old name (`how`: where the new one comes from,
    /// or empty).
    pub fn note(&self, how: &str) -> String {
        renamed_note(self.policy, self.old, self.new, how)
    }
}

/// `POLICY:OLD is now POLICY:NEW[HOW] (the old name is read until the next release)`.
pub fn renamed_note(policy: &str, old: &str, new: &str, how: &str) -> String {
    format!("{policy}:{old} is now {policy}:{new}{how} (the old name is read until the next release)")
}

/// The renamed parameters; the old names are accepted with a warning until the next release.
pub const RENAMED: &[Renamed] = &[
    Renamed { policy: "fthp", old: "epoch_ms", new: "epoch", suffix: "ms" },
    Renamed { policy: "hyplacer", old: "counters_read_ns", new: "counter_read_ns", suffix: "" },
    Renamed { policy: "memos", old: "scan_pte_ns", new: "pte_scan_ns", suffix: "" },
    Renamed { policy: "clock-dwf", old: "scan_pte_ns", new: "pte_scan_ns", suffix: "" },
    Renamed { policy: "damon-tiering", old: "tlb_flush_ms", new: "tlb_flush_interval_ms", suffix: "" },
    Renamed { policy: "autonuma-tiering", old: "promote_rate_limit_MBps", new: "promote_rate_limit_mib_per_s", suffix: "" },
];

/// Parameters of one policy instance, parsed and complete (defaults filled in).
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub policy: String,
    pub values: BTreeMap<String, Value>,
    /// One line per old parameter name read (see [`RENAMED`]), for the run's warnings.
    #[serde(skip)]
    pub renamed: Vec<String>,
}

impl Params {
    /// Check `spec`'s arguments against the declarations and fill in defaults.
    pub fn parse(policy: &str, decl: &[ParamSpec], spec: &PolicySpec) -> Result<Params> {
        let mut values = BTreeMap::new();
        let mut renamed = Vec::new();
        for (k, v) in &spec.args {
            let new_arg;
            let (k, v) = match Renamed::find(RENAMED, policy, k).filter(|r| decl.iter().any(|d| d.name == r.new)) {
                Some(r) => {
                    renamed.push(r.note(""));
                    new_arg = r.arg(v);
                    (&new_arg.0, &new_arg.1)
                }
                None => (k, v),
            };
            // `then.KEY=VALUE` passes KEY to the policy named by `then` (guided placement)
            if k.starts_with("then.") && k.len() > 5 && decl.iter().any(|d| d.name == "then") {
                if values.insert(k.clone(), Value::Text(v.clone())).is_some() {
                    return Err(Error::config(format!("{policy}:{k}"), "given twice"));
                }
                continue;
            }
            let d = decl.iter().find(|d| d.name == k).ok_or_else(|| {
                let known: Vec<&str> = decl.iter().map(|d| d.name).collect();
                Error::config(
                    format!("policy '{policy}'"),
                    if known.is_empty() {
                        format!("unknown parameter '{k}' (this policy takes no parameters)")
                    } else {
                        format!("unknown parameter '{k}'{}; known: {}", crate::error::did_you_mean(k, known.iter().copied()), known.join(", "))
                    },
                )
            })?;
            if values.contains_key(k) {
                return Err(Error::config(format!("{policy}:{k}"), "given twice"));
            }
            values.insert(k.clone(), parse_value(policy, d, v)?);
        }
        for d in decl {
            if !values.contains_key(d.name) {
                values.insert(d.name.to_string(), parse_value(policy, d, d.default).expect("declared defaults parse"));
            }
        }
        Ok(Params { policy: policy.to_string(), values, renamed })
    }

    fn get(&self, k: &str) -> &Value {
        self.values.get(k).unwrap_or_else(|| panic!("policy {} reads undeclared parameter {k}", self.policy))
    }
    pub fn int(&self, k: &str) -> i64 {
        match self.get(k) {
            Value::Int(v) => *v,
            v => panic!("{k} is {v:?}, not an integer"),
        }
    }
    pub fn float(&self, k: &str) -> f64 {
        match self.get(k) {
            Value::Float(v) => *v,
            Value::Int(v) => *v as f64,
            v => panic!("{k} is {v:?}, not a number"),
        }
    }
    pub fn bool(&self, k: &str) -> bool {
        match self.get(k) {
            Value::Bool(v) => *v,
            v => panic!("{k} is {v:?}, not a bool"),
        }
    }
    pub fn text(&self, k: &str) -> &str {
        match self.get(k) {
            Value::Text(v) => v,
            v => panic!("{k} is {v:?}, not text"),
        }
    }
    pub fn period(&self, k: &str) -> Period {
        match self.get(k) {
            Value::Period(p) => *p,
            v => panic!("{k} is {v:?}, not a period"),
        }
    }
    /// A duration parameter that must be a time (a period in accesses or instructions is
    /// refused): ns.
    pub fn time_ns(&self, k: &str) -> Result<u64> {
        match self.period(k) {
            Period::Ns(n) => Ok(n),
            other => Err(Error::config(format!("{}:{k}", self.policy), format!("{} is not a time: give one (e.g. 5ms, 1s)", other.describe()))),
        }
    }
    pub fn bytes(&self, k: &str) -> u64 {
        match self.get(k) {
            Value::Bytes(b) => *b,
            v => panic!("{k} is {v:?}, not a size"),
        }
    }
    /// The `then.KEY=VALUE` arguments, as `(KEY, VALUE)`.
    pub fn then_args(&self) -> Vec<(String, String)> {
        self.values.iter().filter_map(|(k, v)| k.strip_prefix("then.").map(|k| (k.to_string(), v.to_string()))).collect()
    }
    /// `name:key=value,...` with every parameter, defaults included.
    pub fn canonical(&self) -> String {
        if self.values.is_empty() {
            return self.policy.clone();
        }
        format!("{}:{}", self.policy, self.values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
    }
}

/// How a parameter's value changes when a run's time is scaled by K (`--time-scale K`,
/// docs/models.md "Time scaling"). Decided from the declared type and unit, so that a new
/// parameter is scaled as soon as its unit says it is a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeDim {
    /// Not a time: counts, sizes, fractions, energies, and two kinds of times that are not
    /// the policy's: latencies paid on every access (`per access`), which grow with the run
    /// by themselves, and thresholds on a measured bandwidth (`bandwidth`), which the
    /// platform fixes.
    None,
    /// A duration or a per-event cost (units ns, us, µs, ms, s, CPU cycles; a period given
    /// in time): divided by K. Negative values are "use the platform's figure" and stay;
    /// the platform's migration costs are divided instead.
    Time,
    /// A budget per unit of time (`MiB/s`, `per second`): multiplied by K, so that each
    /// interval, K times shorter, allows the same amount of work as before.
    Rate,
}

/// The [`TimeDim`] of a declared parameter.
pub fn time_dim(spec: &ParamSpec) -> TimeDim {
    match spec.ty {
        // a period in accesses or instructions is not a time: only `Period::Ns` values scale
        ParamType::Period => return TimeDim::Time,
        ParamType::Int { .. } | ParamType::Float { .. } => {}
        _ => return TimeDim::None,
    }
    let u = spec.unit.trim();
    if u.contains("per access") || u.contains("bandwidth") {
        return TimeDim::None;
    }
    if u.contains("/s") || u.contains("per second") {
        return TimeDim::Rate;
    }
    let first = u.split(|c: char| c.is_whitespace() || c == '/' || c == '(').next().unwrap_or("");
    match first {
        "ns" | "us" | "µs" | "ms" | "s" => TimeDim::Time,
        _ if u.starts_with("CPU cycles") || u.starts_with("cycles") => TimeDim::Time,
        _ => TimeDim::None,
    }
}

impl Params {
    /// These parameters with every time divided by `k` and every rate budget multiplied by
    /// it ([`time_dim`]); integers are rounded and every value is kept inside its declared
    /// range (a period stays at least 1 ns). `k == 1` returns them unchanged, bit for bit.
    pub fn time_scaled(&self, decl: &[ParamSpec], k: f64) -> Params {
        let mut out = self.clone();
        if k == 1.0 {
            return out;
        }
        for d in decl {
            let dim = time_dim(d);
            if dim == TimeDim::None {
                continue;
            }
            let Some(v) = out.values.get_mut(d.name) else { continue };
            let f = if dim == TimeDim::Time { 1.0 / k } else { k };
            *v = match (&*v, d.ty) {
                (Value::Period(Period::Ns(n)), _) => Value::Period(Period::Ns(((*n as f64 / k).round() as u64).max(1))),
                (Value::Float(x), ParamType::Float { min, max }) if *x >= 0.0 => {
                    Value::Float(if dim == TimeDim::Time { x / k } else { x * k }.clamp(min.max(0.0), max))
                }
                (Value::Int(x), ParamType::Int { min, max }) if *x >= 0 => Value::Int(((*x as f64 * f).round() as i64).clamp(min.max(0), max)),
                _ => continue,
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECL: &[ParamSpec] = &[
        ParamSpec { name: "period", ty: ParamType::Period, unit: "accesses", default: "1000", source: "test", help: "" },
        ParamSpec { name: "bins", ty: ParamType::Int { min: 0, max: 64 }, unit: "", default: "0", source: "test", help: "" },
        ParamSpec { name: "compat", ty: ParamType::Choice { options: &["none", "cori-sim"] }, unit: "", default: "none", source: "test", help: "" },
    ];

    #[test]
    fn parses_and_fills_defaults() {
        let s = PolicySpec::parse("history:period=10ms, bins=4").unwrap();
        let p = Params::parse("history", DECL, &s).unwrap();
        assert_eq!(p.period("period"), Period::Ns(10_000_000));
        assert_eq!(p.int("bins"), 4);
        assert_eq!(p.text("compat"), "none");
        assert_eq!(p.canonical(), "history:bins=4,compat=none,period=10000000ns");
    }

    #[test]
    fn unknown_and_ill_typed_parameters_name_policy_and_key() {
        let e = Params::parse("history", DECL, &PolicySpec::parse("history:perod=5").unwrap()).unwrap_err().to_string();
        assert!(e.contains("history") && e.contains("perod") && e.contains("period"), "{e}");
        let e = Params::parse("history", DECL, &PolicySpec::parse("history:bins=many").unwrap()).unwrap_err().to_string();
        assert!(e.contains("history:bins") && e.contains("many"), "{e}");
        let e = Params::parse("history", DECL, &PolicySpec::parse("history:bins=65").unwrap()).unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = Params::parse("history", DECL, &PolicySpec::parse("history:compat=ramulator").unwrap()).unwrap_err().to_string();
        assert!(e.contains("cori-sim"), "{e}");
    }

    #[test]
    fn policy_lists_split_on_commas_between_policies() {
        let l = PolicySpec::parse_list("all-slow,history:period=1000,bins=0,oracle;cache-mode").unwrap();
        let names: Vec<_> = l.iter().map(|p| p.to_string_short()).collect();
        assert_eq!(names, ["all-slow", "history:period=1000,bins=0", "oracle", "cache-mode"]);
    }

    #[test]
    fn time_scaling_divides_times_multiplies_rates_and_leaves_the_rest() {
        // --time-scale K divides every time constant and per-event cost of a policy by K;
        // budgets per second keep the same amount per (scaled) interval (docs/models.md)
        const D: &[ParamSpec] = &[
            ParamSpec { name: "interval", ty: ParamType::Period, unit: "simulated time", default: "1s", source: "t", help: "" },
            ParamSpec { name: "period", ty: ParamType::Period, unit: "accesses", default: "1000", source: "t", help: "" },
            ParamSpec { name: "scan_ms", ty: ParamType::Float { min: 1e-6, max: 1e9 }, unit: "ms of simulated time", default: "1000", source: "t", help: "" },
            ParamSpec { name: "fault_ns", ty: ParamType::Float { min: -1.0, max: 1e9 }, unit: "ns per hint fault", default: "-1", source: "t", help: "" },
            ParamSpec { name: "walk", ty: ParamType::Int { min: 1, max: 1 << 40 }, unit: "CPU cycles per page", default: "4480", source: "t", help: "" },
            ParamSpec { name: "lookup", ty: ParamType::Int { min: 0, max: 1 << 20 }, unit: "CPU cycles per access", default: "10", source: "t", help: "" },
            ParamSpec { name: "rate", ty: ParamType::Int { min: 1, max: 1 << 40 }, unit: "MiB/s", default: "65536", source: "t", help: "" },
            ParamSpec {
                name: "bw",
                ty: ParamType::Float { min: 0.0, max: 1e9 },
                unit: "MB/s of write bandwidth (10^6 bytes per second)",
                default: "10",
                source: "t",
                help: "",
            },
            ParamSpec { name: "pages", ty: ParamType::Int { min: 1, max: 1 << 40 }, unit: "pages per activation", default: "131072", source: "t", help: "" },
        ];
        let p = Params::parse("x", D, &PolicySpec::parse("x").unwrap()).unwrap();
        let s = p.time_scaled(D, 1000.0);
        assert_eq!(s.period("interval"), Period::Ns(1_000_000));
        assert_eq!(s.period("period"), Period::Accesses(1000));
        assert_eq!(s.float("scan_ms"), 1.0);
        assert_eq!(s.float("fault_ns"), -1.0, "the platform's figure: the platform is scaled instead");
        assert_eq!(s.int("walk"), 4, "4480 / 1000 rounded");
        assert_eq!(s.int("lookup"), 10, "a per-access latency is not a per-event cost");
        assert_eq!(s.int("rate"), 65_536_000);
        assert_eq!(s.float("bw"), 10.0, "a measured bandwidth is the platform's");
        assert_eq!(s.int("pages"), 131072);
        // K = 1: the same values, bit for bit
        assert_eq!(p.time_scaled(D, 1.0).canonical(), p.canonical());
        // a period never reaches 0
        assert_eq!(p.time_scaled(D, 1e12).period("interval"), Period::Ns(1));
    }
}
