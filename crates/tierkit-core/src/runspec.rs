//! One description of a run ([`RunSpec`]): the trace or the programs of a mix, the platform
//! and the capacities of its tiers, the policy spec, the timing model, `--repeat` and
//! `--time-scale`, the cores, and the trace's digest when it must be the one recorded.
//!
//! Every front end writes one (the CLI and the Python API through `tierkit._core.simulate`,
//! sweeps and validation through the API) and `engine::run_spec` runs it; every result carries the one
//! it ran as `config.run`, with the platform written out in full, so that replaying a result
//! is running its `config.run` again (docs/models.md, "One description of a run"). It
//! round-trips through JSON: `serde_json` writes it and reads it back to the same value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::trace::input::TraceInput;

/// A file name as Linux has it: any bytes. In JSON a string when it is UTF-8, else
/// `{"os_bytes_hex": "..."}` (the bytes in hexadecimal), so that a run on a file whose name is
/// not UTF-8 is described, recorded and replayed like any other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsPath(pub PathBuf);

impl OsPath {
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

impl Serialize for OsPath {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use std::os::unix::ffi::OsStrExt;
        match self.0.to_str() {
            Some(t) => s.serialize_str(t),
            None => {
                let hex: String = self.0.as_os_str().as_bytes().iter().map(|b| format!("{b:02x}")).collect();
                let mut m = BTreeMap::new();
                m.insert("os_bytes_hex", hex);
                m.serialize(s)
            }
        }
    }
}

impl<'de> Deserialize<'de> for OsPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<OsPath, D::Error> {
        use std::os::unix::ffi::OsStringExt;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Bytes { os_bytes_hex: String },
        }
        match Form::deserialize(d)? {
            Form::Text(t) => Ok(OsPath(PathBuf::from(t))),
            Form::Bytes { os_bytes_hex: h } => {
                if h.len() % 2 != 0 {
                    return Err(serde::de::Error::custom("os_bytes_hex: an odd number of hexadecimal digits"));
                }
                let bytes = (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16))
                    .collect::<std::result::Result<Vec<u8>, _>>()
                    .map_err(|_| serde::de::Error::custom("os_bytes_hex: not hexadecimal"))?;
                Ok(OsPath(PathBuf::from(std::ffi::OsString::from_vec(bytes))))
            }
        }
    }
}

/// The platform of a run: a preset's name or a platform file (`dram-pmem`, `my.toml`), or the
/// platform written out (what results record, so that they replay without the file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlatformSource {
    Named(String),
    Inline(Box<Platform>),
}

/// Regions of the trace's addresses to sample over simulated time (`engine::Watch`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchSpec {
    /// `[name, start, end)` of each region.
    pub regions: Vec<(String, u64, u64)>,
    pub every_ns: f64,
}

fn one() -> usize {
    1
}
fn one_u32() -> u32 {
    1
}
fn unit() -> f64 {
    1.0
}
fn simple() -> String {
    "simple".into()
}
fn is_one(n: &usize) -> bool {
    *n == 1
}

/// One description of a run (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The trace; with `mix`, the first program's.
    pub trace: OsPath,
    /// `--format` (detected when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// `--cache`: the hierarchy a raw trace is filtered through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// The other programs of a mix, each on a core of its own (docs/models.md, "Many cores").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<OsPath>,
    /// The trace's threads on this many cores (1: one core).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub cores: usize,
    /// Several cores: accesses a core runs before the cores are compared again.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub quantum: usize,
    pub platform: PlatformSource,
    /// Capacities by tier name or index (`"0"` is `--fast-capacity`): a fraction of the
    /// footprint (`"0.2"`), a percentage, a size (`"512M"`) or `"unlimited"`.
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
    /// The policy spec, `NAME[:key=value,...]`.
    pub policy: String,
    #[serde(default = "simple")]
    pub timing: String,
    #[serde(default = "one_u32")]
    pub repeat: u32,
    #[serde(default = "unit")]
    pub time_scale: f64,
    /// When given, the trace read must have this SHA-256 (a mix's: its programs', joined by
    /// `+`): a result replays only on the trace it was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchSpec>,
}

impl RunSpec {
    /// A spec from its JSON, every error one line naming the field.
    pub fn from_json(text: &str) -> Result<RunSpec> {
        serde_json::from_str(text).map_err(|e| Error::config("run spec", e.to_string()))
    }

    /// A trace of the run (its own, or a program of its mix), with the spec's format and cache.
    pub fn input(&self, path: &Path) -> Result<TraceInput> {
        TraceInput::from_options(path, self.format.as_deref(), self.cache.as_deref())
    }

    /// The platform the spec names or writes out, checked.
    pub fn platform(&self) -> Result<Platform> {
        match &self.platform {
            PlatformSource::Named(n) => Platform::load(n),
            PlatformSource::Inline(p) => {
                p.validate("run spec: platform")?;
                Ok((**p).clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_round_trips_through_json_and_names_any_file() {
        use std::os::unix::ffi::OsStringExt;
        let spec = RunSpec {
            trace: OsPath(PathBuf::from(std::ffi::OsString::from_vec(b"caf\xe9.tkt".to_vec()))),
            format: Some("dramsim3:tck_ps=625".into()),
            cache: None,
            mix: vec![OsPath("b.tkt".into())],
            cores: 1,
            quantum: 4,
            platform: PlatformSource::Inline(Box::new(Platform::load("dram-pmem").unwrap())),
            capacity: [("0".to_string(), "0.2".to_string()), ("PMEM".to_string(), "unlimited".to_string())].into(),
            policy: "history:period=10ms".into(),
            timing: "detailed".into(),
            repeat: 2,
            time_scale: 10.0,
            trace_digest: Some("ab+cd".into()),
            watch: Some(WatchSpec { regions: vec![("a".into(), 0, 4096)], every_ns: 1e6 }),
        };
        let text = serde_json::to_string(&spec).unwrap();
        assert!(text.contains(r#""trace":{"os_bytes_hex":"636166e92e746b74"}"#), "{text}");
        assert_eq!(RunSpec::from_json(&text).unwrap(), spec);
        // a preset by name, defaults left out
        let s = RunSpec::from_json(r#"{"trace": "t.tkt", "platform": "dram-pmem", "policy": "first-touch"}"#).unwrap();
        assert_eq!((s.cores, s.quantum, s.repeat, s.time_scale, s.timing.as_str()), (1, 1, 1, 1.0, "simple"));
        assert_eq!(s.platform, PlatformSource::Named("dram-pmem".into()));
        let e = RunSpec::from_json(r#"{"trace": "t.tkt", "platform": "dram-pmem", "policy": "x", "cpus": 2}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `cpus`"), "{e}");
    }
}
