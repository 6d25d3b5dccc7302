//! Policy parameters, declared once (name, type, unit, default, source) and used both to parse
//! `NAME:key=value,...` and to document the policy in `tierkit policies`.

use crate::error::{Error, Result};
use crate::units::{self, Period};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ParamType {
    Int { min: i64, max: i64 },
    Float { min: f64, max: f64 },
    Bool,
    Choice { options: &'static [&'static str] },
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
            let v = units::parse_count(&key, s.trim_start_matches('-')).map(|v| v as i64).map(|v| if s.starts_with('-') { -v } else { v })
                .map_err(|_| Error::config(&key, format!("'{raw}' is not an integer")))?;
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
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| Error::config(format!("policy '{name}'"), format!("'{kv}' is not key=value")))?;
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

/// Parameters of one policy instance, parsed and complete (defaults filled in).
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub policy: String,
    pub values: BTreeMap<String, Value>,
}

impl Params {
    /// Check `spec`'s arguments against the declarations and fill in defaults.
    pub fn parse(policy: &str, decl: &[ParamSpec], spec: &PolicySpec) -> Result<Params> {
        let mut values = BTreeMap::new();
        for (k, v) in &spec.args {
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
                        format!("unknown parameter '{k}' (known: {})", known.join(", "))
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
        Ok(Params { policy: policy.to_string(), values })
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
}
