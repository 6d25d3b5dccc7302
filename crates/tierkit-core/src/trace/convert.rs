//! `tierkit trace convert`: any readable trace (optionally through the cache filter) to the
//! native format or to one of the exporters' text formats.

use super::summary::Summary;
use super::tkt::TktWriter;
use super::ProgressFn;
use super::{Batch, Format, TraceInput, BATCH_RECORDS};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::Path;

#[derive(Clone, Debug, Serialize)]
pub struct ConvertReport {
    pub input: String,
    pub input_format: String,
    pub output: String,
    pub output_format: String,
    /// Summary of the records written.
    pub summary: Summary,
    /// Records the output format cannot express, by kind (text exports only).
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Trace-level properties the output format cannot carry.
    pub notes: Vec<String>,
}

/// The output format implied by a file name (`.tkt` → native), if any.
pub fn format_from_name(out: &Path) -> Option<Format> {
    // (the suffix decides: a name with bytes that are not UTF-8 before it still has one)
    let name = out.file_name()?.to_string_lossy().to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".tkt") {
        Some(Format::Tkt)
    } else if name.ends_with(".hex") {
        Some(Format::Hex)
    } else if name.ends_with(".ramulator") || name.ends_with(".trace") {
        Some(Format::Ramulator)
    } else {
        None
    }
}

pub fn convert(input: &TraceInput, out: &Path, to: Option<Format>, force: bool, mut progress: Option<&mut ProgressFn>) -> Result<ConvertReport> {
    let to = match to.or_else(|| format_from_name(out)) {
        Some(f) => f,
        None => return Err(Error::config("--to", format!("cannot tell the output format from '{}'; say it with --to tkt|ramulator|hex", out.display()))),
    };
    if out.exists() && !force {
        return Err(Error::Exists { path: out.display().to_string() });
    }
    let in_format = input.resolved_format()?;
    let mut src = input.open()?;
    let mut report = ConvertReport {
        input: input.display(),
        input_format: in_format.spec(),
        output: out.display().to_string(),
        output_format: to.name().to_string(),
        summary: Summary::default(),
        dropped: Default::default(),
        notes: Vec::new(),
    };
    match to {
        Format::Tkt => {
            let mut w = TktWriter::create(out, src.meta(), force)?;
            let mut b = Batch::with_capacity(BATCH_RECORDS);
            while src.next_batch(&mut b)? {
                w.write_batch(&b)?;
                if let Some(cb) = progress.as_mut() {
                    let p = src.progress();
                    if !cb(p.bytes_read, p.bytes_total) {
                        return Err(Error::Interrupted);
                    }
                }
            }
            w.set_import_losses(src.import_losses());
            report.summary = w.finish()?;
        }
        Format::Ramulator | Format::Hex => {
            let r = if to == Format::Ramulator {
                super::export::to_ramulator_with_progress(src.as_mut(), out, force, progress)?
            } else {
                super::export::to_hex_with_progress(src.as_mut(), out, force, progress)?
            };
            report.summary = r.input_summary.clone();
            report.summary.import_losses = src.import_losses();
            report.dropped = r.losses();
            report.notes = r.notes.clone();
        }
        other => return Err(Error::config("--to", format!("cannot write {other} traces (writable: tkt, ramulator, hex)"))),
    }
    Ok(report)
}
