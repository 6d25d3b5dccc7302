//! Thin PyO3 bindings for tierkit-core. No logic of its own: arguments are converted, the core
//! is called with the GIL released, results come back as JSON text or numpy arrays, and core
//! errors become `tierkit.TierkitError` (bad input) or `tierkit.TierkitInternalError`.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tierkit_core::cache::CacheSpec;
use tierkit_core::engine::{self, ProgressFn};
use tierkit_core::mechanics::TierId;
use tierkit_core::pagemap::PageId;
use tierkit_core::platform::Platform;
use tierkit_core::policy::external::{Decision, External, PeriodView, PeriodicDecider};
use tierkit_core::policy::{self, PolicySpec};
use tierkit_core::runspec::RunSpec;
use tierkit_core::trace::synth::{SynthKind, SynthSource, SynthSpec};
use tierkit_core::trace::{self, tkt::TktWriter, Access, Batch, Format, RecordSource, TraceInput, TraceMeta};
use tierkit_core::units::Period;
use tierkit_core::Error;

create_exception!(_core, TierkitError, PyException, "Bad input: a trace, platform, policy, parameter or capacity that cannot work.");
create_exception!(_core, TierkitInternalError, PyException, "A broken internal invariant: a bug in tierkit.");

/// Errors raised by Python code called back from the core (policies, progress callbacks)
/// are kept here and re-raised as they were.
type Pending = Arc<Mutex<Option<PyErr>>>;

fn to_py(e: Error, pending: &Pending) -> PyErr {
    if let Some(err) = pending.lock().unwrap().take() {
        return err;
    }
    match e {
        Error::Interrupted => PyKeyboardInterrupt::new_err("interrupted"),
        Error::Invariant(_) => TierkitInternalError::new_err(e.to_string()),
        other => TierkitError::new_err(other.to_string()),
    }
}

fn plain(e: Error) -> PyErr {
    to_py(e, &Arc::new(Mutex::new(None)))
}

/// A progress callback into Python: `cb(done, total) -> bool | None`; also turns Ctrl-C
/// into a clean stop.
fn progress_fn(cb: Option<Py<PyAny>>, pending: Pending) -> impl FnMut(u64, Option<u64>) -> bool + Send {
    move |done, total| {
        Python::attach(|py| {
            if let Err(e) = py.check_signals() {
                *pending.lock().unwrap() = Some(e);
                return false;
            }
            match &cb {
                None => true,
                Some(cb) => match cb.call1(py, (done, total)) {
                    // only an explicit False stops the run
                    Ok(v) => v.is_none(py) || v.is_truthy(py).unwrap_or(true),
                    Err(e) => {
                        *pending.lock().unwrap() = Some(e);
                        false
                    }
                },
            }
        })
    }
}

/// Run `f` without the GIL, giving it a progress callback into Python; errors raised by
/// Python code called back during the run come back as they were.
fn detached<T: Send>(py: Python<'_>, progress: Option<Py<PyAny>>, pending: Pending, f: impl FnOnce(&mut ProgressFn) -> Result<T, Error> + Send) -> PyResult<T> {
    let p2 = pending.clone();
    let res = py.detach(move || {
        let mut cb = progress_fn(progress, p2);
        f(&mut cb)
    });
    res.map_err(|e| to_py(e, &pending))
}

fn json_out<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| TierkitInternalError::new_err(e.to_string()))
}

/// Summary of a trace as JSON (`trace info`).
#[pyfunction]
#[pyo3(signature = (path, format=None, cache=None, progress=None))]
fn trace_info(py: Python<'_>, path: PathBuf, format: Option<&str>, cache: Option<&str>, progress: Option<Py<PyAny>>) -> PyResult<String> {
    detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let inp = TraceInput::from_options(&path, format, cache)?;
        let fmt = inp.resolved_format()?;
        let (meta, summary) = if fmt == Format::Tkt && inp.cache.is_none() {
            trace::tkt::TktReader::read_summary(&inp.path)?
        } else {
            let mut src = inp.open()?;
            let meta = src.meta().clone();
            let mut b = trace::SummaryBuilder::new(meta.page_size);
            let mut batch = Batch::default();
            while src.next_batch(&mut batch)? {
                b.add_batch(&batch);
                let p = src.progress();
                if !cb(p.bytes_read, p.bytes_total) {
                    return Err(Error::Interrupted);
                }
            }
            let mut s = b.finish();
            s.import_losses = src.import_losses();
            (meta, s)
        };
        Ok(serde_json::json!({ "path": path.to_string_lossy(), "format": fmt.spec(), "meta": meta, "summary": summary }).to_string())
    })
}

/// Raw allocation-site profile of a trace as JSON (`tierkit profile`; grouped in Python).
/// `slice`: `None` (the trace's markers, else 64 equal slices), `N-insn` or `N` accesses.
#[pyfunction]
#[pyo3(signature = (path, format=None, cache=None, slice=None, progress=None))]
fn profile_trace(
    py: Python<'_>,
    path: PathBuf,
    format: Option<&str>,
    cache: Option<&str>,
    slice: Option<&str>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let slice_by = match slice {
        None => tierkit_core::profile::SliceBy::Auto,
        Some(s) => match Period::parse("--slice", s).map_err(plain)? {
            Period::Insn(0) | Period::Accesses(0) => return Err(plain(Error::config("--slice", "the slice length must be positive"))),
            Period::Insn(n) => tierkit_core::profile::SliceBy::Insn(n),
            Period::Accesses(n) => tierkit_core::profile::SliceBy::Accesses(n),
            Period::Ns(_) => return Err(plain(Error::config("--slice", format!("'{s}': give the slice length in instructions (e.g. 50M-insn) or accesses")))),
        },
    };
    detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let inp = TraceInput::from_options(&path, format, cache)?;
        let p = tierkit_core::profile::profile(&inp, slice_by, cb)?;
        serde_json::to_string(&p).map_err(|e| Error::Invariant(e.to_string()))
    })
}

/// Per-period, per-page access counts for a period of `period` accesses, as numpy arrays
/// (sparse: one entry per page accessed in a period; see `tierkit_core::periods`).
#[pyfunction]
#[pyo3(signature = (path, period, format=None, cache=None, progress=None))]
fn period_counts<'py>(
    py: Python<'py>,
    path: PathBuf,
    period: u64,
    format: Option<&str>,
    cache: Option<&str>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let c = detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let inp = TraceInput::from_options(&path, format, cache)?;
        tierkit_core::periods::period_counts(&inp, period, cb)
    })?;
    let d = PyDict::new(py);
    d.set_item("period", c.period)?;
    d.set_item("periods", c.periods)?;
    d.set_item("accesses", c.accesses)?;
    d.set_item("page_size", c.page_size)?;
    d.set_item("digest", c.digest)?;
    d.set_item("page_addr", c.page_addr.into_pyarray(py))?;
    d.set_item("period_of", c.period_of.into_pyarray(py))?;
    d.set_item("page", c.page.into_pyarray(py))?;
    d.set_item("count", c.count.into_pyarray(py))?;
    d.set_item("writes", c.writes.into_pyarray(py))?;
    Ok(d)
}

/// Page reuse distances in buckets of `bucket` accesses, as JSON (Cori's reuse collector).
#[pyfunction]
#[pyo3(signature = (path, bucket, format=None, cache=None, progress=None))]
fn reuse_histogram(py: Python<'_>, path: PathBuf, bucket: u64, format: Option<&str>, cache: Option<&str>, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let h = detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let inp = TraceInput::from_options(&path, format, cache)?;
        tierkit_core::periods::reuse_histogram(&inp, bucket, cb)
    })?;
    json_out(&h)
}

/// Detect a trace's format.
#[pyfunction]
fn detect_format(path: PathBuf) -> PyResult<String> {
    trace::input::detect(&path).map(|f| f.name().to_string()).map_err(plain)
}

/// Convert a trace; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (src, out, format=None, to=None, cache=None, force=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn trace_convert(
    py: Python<'_>,
    src: PathBuf,
    out: PathBuf,
    format: Option<&str>,
    to: Option<&str>,
    cache: Option<&str>,
    force: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let inp = TraceInput::from_options(&src, format, cache)?;
        let to = to.map(|t| Format::parse("--to", t)).transpose()?;
        let r = trace::convert::convert(&inp, &out, to, force, Some(cb))?;
        Ok(serde_json::to_string(&r).unwrap())
    })
}

/// Write a synthetic trace; returns its summary as JSON.
#[pyfunction]
#[pyo3(signature = (kind, out, accesses, pages, seed=1, write_ratio=0.0, theta=0.99, phases=4, hot_fraction=0.9, insn_per_access=20, force=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn trace_synth(
    py: Python<'_>,
    kind: &str,
    out: PathBuf,
    accesses: &str,
    pages: &str,
    seed: u64,
    write_ratio: f64,
    theta: f64,
    phases: u64,
    hot_fraction: f64,
    insn_per_access: u64,
    force: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    detached(py, progress, Arc::new(Mutex::new(None)), move |cb| {
        let accesses = tierkit_core::units::parse_count("--accesses", accesses)?;
        let pages = tierkit_core::units::parse_count("--pages", pages)?;
        let spec =
            SynthSpec { kind: SynthKind::parse(kind)?, accesses, pages, seed, write_ratio, theta, phases, hot_fraction, insn_per_access, ..Default::default() };
        let mut src = SynthSource::new(spec)?;
        let mut w = TktWriter::create(&out, src.meta(), force)?;
        let mut b = Batch::default();
        while src.next_batch(&mut b)? {
            w.write_batch(&b)?;
            let p = src.progress();
            if !cb(p.bytes_read, p.bytes_total) {
                return Err(Error::Interrupted);
            }
        }
        Ok(serde_json::to_string(&w.finish()?).unwrap())
    })
}

/// Run a program under tierkit's Valgrind tool and write its native trace; returns the
/// report (exit status, incomplete reason, counts, summary) as JSON. `cache`: a spec, a
/// preset or `none`; `slice`: instructions per slice marker (`1M`), none when absent;
/// `kill_after`: seconds a program may take to end after a signal sent to the recorder was
/// passed on to it (then SIGKILL).
#[pyfunction]
#[pyo3(signature = (program, args, out, tool_dir, cache="default", context=4, slice=None, force=false, valgrind=None, kill_after=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn trace_record(
    py: Python<'_>,
    program: &str,
    args: Vec<String>,
    out: PathBuf,
    tool_dir: PathBuf,
    cache: &str,
    context: u32,
    slice: Option<&str>,
    force: bool,
    valgrind: Option<&str>,
    kill_after: Option<f64>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let kill_after = match kill_after {
        None => trace::raw::KILL_AFTER_DEFAULT,
        Some(s) => std::time::Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| d.as_secs() <= 86_400)
            .ok_or_else(|| plain(Error::config("--kill-after", format!("{s} s: give 0 to 86400 seconds"))))?,
    };
    detached(py, None, Arc::new(Mutex::new(None)), move |_| {
        let opts = trace::raw::RecordOptions {
            program: program.to_string(),
            args,
            out,
            cache: CacheSpec::parse("--cache", cache)?,
            context,
            slice_insn: slice.map(|s| tierkit_core::units::parse_count("--slice", s)).transpose()?.unwrap_or(0),
            force,
            tool_dir,
            valgrind: valgrind.map(PathBuf::from),
            kill_after,
        };
        // progress(records written, None); what it raises or returns is ignored: signals sent
        // to the recorder are the program's (trace::raw's forwarding), not a reason to stop
        let mut said = |n: u64| {
            if let Some(cb) = &progress {
                Python::attach(|py| {
                    let _ = cb.call1(py, (n, None::<u64>));
                });
            }
        };
        Ok(serde_json::to_string(&trace::raw::record_with_progress(&opts, &mut said)?).unwrap())
    })
}

/// Read a trace into numpy arrays (accesses) plus a JSON list of the other records.
#[pyfunction]
#[pyo3(signature = (path, format=None, cache=None, limit=None))]
fn trace_read<'py>(py: Python<'py>, path: PathBuf, format: Option<&str>, cache: Option<&str>, limit: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
    let res = py.detach(move || -> Result<(Batch, TraceMeta), Error> {
        let inp = TraceInput::from_options(&path, format, cache)?;
        let mut src = inp.open()?;
        let meta = src.meta().clone();
        let mut all = Batch::default();
        let mut b = Batch::default();
        let limit = limit.unwrap_or(u64::MAX) as usize;
        'outer: while src.next_batch(&mut b)? {
            let mut e = 0;
            for i in 0..b.len() {
                while e < b.events.len() && b.events[e].at as usize <= i {
                    let ev = b.events[e].clone();
                    all.push_event(ev.insn, ev.ns, ev.tid, ev.kind);
                    e += 1;
                }
                if all.len() >= limit {
                    break 'outer;
                }
                all.push(&b.access(i));
            }
            for ev in &b.events[e..] {
                all.push_event(ev.insn, ev.ns, ev.tid, ev.kind.clone());
            }
        }
        Ok((all, meta))
    });
    let (b, meta) = res.map_err(plain)?;
    let d = PyDict::new(py);
    d.set_item("addr", b.addr.into_pyarray(py))?;
    d.set_item("write", b.write.into_pyarray(py))?;
    d.set_item("insn", b.insn.into_pyarray(py))?;
    d.set_item("ns", b.ns.into_pyarray(py))?;
    d.set_item("size", b.size.into_pyarray(py))?;
    d.set_item("tid", b.tid.into_pyarray(py))?;
    d.set_item("pc", b.pc.into_pyarray(py))?;
    d.set_item("events", json_out(&b.events)?)?;
    d.set_item("meta", json_out(&meta)?)?;
    Ok(d)
}

/// Write a native trace from numpy arrays (addresses, write flags, optional instruction
/// counts).
#[pyfunction]
#[pyo3(signature = (out, addr, write, insn=None, page_size=4096, force=false))]
fn trace_write(
    out: PathBuf,
    addr: PyReadonlyArray1<'_, u64>,
    write: PyReadonlyArray1<'_, bool>,
    insn: Option<PyReadonlyArray1<'_, u64>>,
    page_size: u64,
    force: bool,
) -> PyResult<String> {
    let a = addr.as_slice()?;
    let w = write.as_slice()?;
    if a.len() != w.len() {
        return Err(TierkitError::new_err("addr and write must have the same length"));
    }
    let ins = match &insn {
        Some(i) => Some(i.as_slice()?),
        None => None,
    };
    if let Some(i) = ins {
        if i.len() != a.len() {
            return Err(TierkitError::new_err("insn must have the same length as addr"));
        }
    }
    let mut meta = TraceMeta { page_size, time_insn: ins.is_some(), ..Default::default() };
    meta.provenance.tool = "tierkit.write_trace (Python)".into();
    let mut wr = TktWriter::create(&out, &meta, force).map_err(plain)?;
    for k in 0..a.len() {
        wr.write_access(&Access { addr: a[k], write: w[k], insn: ins.map(|i| i[k]).unwrap_or(0), size: 64, ..Default::default() }).map_err(plain)?;
    }
    let s = wr.finish().map_err(plain)?;
    json_out(&s)
}

/// A Python object implementing tierkit.PeriodicPolicy, seen by the core as a decider.
struct PyDecider {
    obj: Py<PyAny>,
    name: String,
    period: Period,
    pending: Pending,
}

impl PyDecider {
    fn fail(&self, e: PyErr) -> Error {
        *self.pending.lock().unwrap() = Some(e);
        Error::config(format!("policy '{}'", self.name), "raised an exception")
    }
}

impl PeriodicDecider for PyDecider {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn period(&self) -> Period {
        self.period
    }
    fn place(&mut self, page: PageId) -> Result<Option<TierId>, Error> {
        Python::attach(|py| {
            let r = self.obj.call_method1(py, "place", (page,)).map_err(|e| self.fail(e))?;
            if r.is_none(py) {
                return Ok(None);
            }
            r.extract::<u8>(py).map(Some).map_err(|e| self.fail(e))
        })
    }
    fn decide(&mut self, v: &PeriodView) -> Result<Vec<Decision>, Error> {
        Python::attach(|py| {
            let d = PyDict::new(py);
            let set = |k: &str, val: Bound<'_, PyAny>| d.set_item(k, val);
            let r = (|| -> PyResult<Vec<(u8, u64, u64)>> {
                set("period", v.period.into_pyobject(py)?.into_any())?;
                set("pages", v.pages.to_vec().into_pyarray(py).into_any())?;
                set("counts", v.counts.clone().into_pyarray(py).into_any())?;
                set("writes", v.writes.clone().into_pyarray(py).into_any())?;
                set("tier_of", v.tier_of.to_vec().into_pyarray(py).into_any())?;
                set("capacity", v.capacity.clone().into_pyarray(py).into_any())?;
                set("used", v.used.clone().into_pyarray(py).into_any())?;
                self.obj.call_method1(py, "_decide_raw", (d.clone(),))?.extract(py)
            })();
            let moves = r.map_err(|e| self.fail(e))?;
            moves
                .into_iter()
                .map(|(k, a, b)| match k {
                    0 => Ok(Decision::Migrate(a as PageId, b as TierId)),
                    1 => Ok(Decision::Swap(a as PageId, b as PageId)),
                    _ => Err(Error::config(format!("policy '{}'", self.name), format!("unknown move kind {k}"))),
                })
                .collect()
        })
    }
}

/// Run one simulation from its description (`tierkit_core::runspec::RunSpec` as JSON: the
/// trace or mix, platform, capacities, policy spec, timing, repeat, time scale, cores, digest).
/// `policy`: a Python `PeriodicPolicy` object to run instead of the spec's policy (which then
/// names it). `summary`: the trace's summary as JSON, when known (saves a pass). Returns the
/// result as JSON; its `config.run` is the spec as run, which replays it.
#[pyfunction]
#[pyo3(signature = (spec, policy=None, progress=None, summary=None, paranoid=false))]
fn simulate(py: Python<'_>, spec: &str, policy: Option<Py<PyAny>>, progress: Option<Py<PyAny>>, summary: Option<&str>, paranoid: bool) -> PyResult<String> {
    let pending: Pending = Arc::new(Mutex::new(None));
    let spec = RunSpec::from_json(spec).map_err(plain)?;
    // a policy object: read its name and period here, while we hold the GIL
    let decider = match policy {
        None => None,
        Some(obj) => {
            let b = obj.bind(py);
            let name: String = b.getattr("name")?.str()?.to_string();
            let per: String = b.getattr("period")?.str()?.to_string();
            let period = Period::parse(&format!("policy '{name}': period"), &per).map_err(plain)?;
            Some(PyDecider { obj: obj.clone_ref(py), name, period, pending: pending.clone() })
        }
    };
    let summary = summary.map(|s| serde_json::from_str(s).map_err(|e| Error::config("summary", e.to_string()))).transpose().map_err(plain)?;
    detached(py, progress, pending, move |cb| {
        let d = match decider {
            None => engine::Decider::Spec,
            Some(dec) => engine::Decider::External(External::new(Box::new(dec))),
        };
        let r = engine::run_spec(&spec, d, summary, paranoid, Some(cb))?;
        Ok(serde_json::to_string(&r).unwrap())
    })
}

/// Every registered policy with its parameters, as JSON.
#[pyfunction]
fn policies() -> PyResult<String> {
    let v: Vec<_> = policy::REGISTRY
        .iter()
        .map(|p| {
            // with each parameter, what --time-scale K does to it (docs/models.md)
            let params: Vec<serde_json::Value> = p
                .params
                .iter()
                .map(|d| {
                    let mut v = serde_json::to_value(d).unwrap();
                    v["time_scale"] = match (policy::time_dim(d), d.ty) {
                        (policy::TimeDim::Time, policy::ParamType::Period) => "divided by K when given in time".into(),
                        (policy::TimeDim::Time, _) => "divided by K".into(),
                        (policy::TimeDim::Rate, _) => "multiplied by K".into(),
                        (policy::TimeDim::None, _) => serde_json::Value::Null,
                    };
                    v
                })
                .collect();
            serde_json::json!({
                "name": p.name, "summary": p.summary, "source": p.source,
                "future_knowledge": p.future_knowledge(), "params": params,
                // how it runs on a real machine (tierkit run), or why it cannot
                "live": p.deploy.live(), "deploy": serde_json::to_value(p.deploy).unwrap(),
            })
        })
        .collect();
    json_out(&v)
}

/// Split a `--policies` list into policy specs (see `PolicySpec::parse_list`).
#[pyfunction]
fn parse_policy_list(s: &str) -> PyResult<Vec<String>> {
    Ok(PolicySpec::parse_list(s).map_err(plain)?.iter().map(|p| p.to_string_short()).collect())
}

/// One policy spec as JSON: `{"name": ..., "args": [[key, value], ...]}`.
#[pyfunction]
fn parse_policy_spec(s: &str) -> PyResult<String> {
    json_out(&PolicySpec::parse(s).map_err(plain)?)
}

/// A byte size (`4096`, `64K`, `1.5G`), as tierkit's options read it.
#[pyfunction]
fn parse_bytes(key: &str, s: &str) -> PyResult<u64> {
    tierkit_core::units::parse_bytes(key, s).map_err(plain)
}

/// Preset platforms (or one platform, by name or path), as JSON.
#[pyfunction]
#[pyo3(signature = (name=None))]
fn platforms(name: Option<&str>) -> PyResult<String> {
    match name {
        Some(n) => json_out(&Platform::load(n).map_err(plain)?),
        None => json_out(&Platform::presets()),
    }
}

/// Cache presets, as JSON.
#[pyfunction]
fn cache_presets() -> PyResult<String> {
    let v: Vec<_> = tierkit_core::cache::PRESETS.iter().map(|(n, s, d)| serde_json::json!({"name": n, "spec": s, "description": d})).collect();
    json_out(&v)
}

/// `tierkit run ARGS...` (crates/tierkit-run): runs the program, prints its report, and
/// returns the exit status to pass on (the program's, or 2 after one error line). Runs
/// without the GIL; SIGINT, SIGTERM and SIGHUP go to the program meanwhile.
#[pyfunction]
fn run_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> i32 {
    let args: Vec<std::ffi::OsString> = std::iter::once("tierkit run".into()).chain(argv).collect();
    let _ = std::io::Write::flush(&mut std::io::stdout());
    py.detach(move || tierkit_run::main_with_args(args))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TierkitError", m.py().get_type::<TierkitError>())?;
    m.add("TierkitInternalError", m.py().get_type::<TierkitInternalError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(profile_trace, m)?)?;
    m.add_function(wrap_pyfunction!(period_counts, m)?)?;
    m.add_function(wrap_pyfunction!(reuse_histogram, m)?)?;
    m.add_function(wrap_pyfunction!(detect_format, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace_synth, m)?)?;
    m.add_function(wrap_pyfunction!(trace_read, m)?)?;
    m.add_function(wrap_pyfunction!(trace_record, m)?)?;
    m.add_function(wrap_pyfunction!(trace_write, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(parse_policy_list, m)?)?;
    m.add_function(wrap_pyfunction!(parse_policy_spec, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(platforms, m)?)?;
    m.add_function(wrap_pyfunction!(cache_presets, m)?)?;
    m.add_function(wrap_pyfunction!(run_main, m)?)?;
    Ok(())
}
