//! `kleio` and `kleoniki`: the `history` page scheduler (003 §3.1) with learned predictions
//! for a selected subset of pages (Kleio, 003 §3.2), or for groups of pages sharing one
//! model (Kleoniki, 003 §4).
//!
//! The models are trained in Python (`python/tierkit/kleio.py`, PyTorch) and their
//! predictions reach the scheduler as a *predictions file*: for every selected page, the
//! class (log2 count class, as `history`'s `bins`) the page's model predicts for every period,
//! from the page's own counts in the K periods before it. In a trace-driven simulation the
//! per-period counts do not depend on placement, so running each model over the trace's
//! counts ahead of the run gives exactly the predictions the scheduler would get by running
//! it at each boundary; the file is only valid for the trace it was made from.
//!
//! At each boundary the scheduler ranks every page by the same key as `history`; a page with
//! a prediction for the coming period is ranked by that predicted class, every other page by
//! its count in the period just ended. Everything else (targets, victims, swaps) is
//! `history`'s.
//!
//! # Predictions file (JSON)
//!
//! ```json
//! {"format": "tierkit-predictions", "version": 1, "policy": "kleio", "period": 1000,
//!  "bins": 16, "models": 120, "rows": {"42": "--------3330333..."}}
//! ```
//! `rows` maps a page id (the engine's: order of first access in the trace) to one character
//! per period: `-` for no prediction (the page is ranked by history in that period), else the
//! predicted class in base 36 (`0`-`9`, `a`-`z`).
//!
//! An optional key `infer_from_period` (a whole number, 0 when absent) is the first period
//! whose boundary runs the models (the Python front end gives the first held-out period).
//!
//! # Inference cost
//!
//! The scheduler runs its models at the boundary before deciding what to move (003 §3.2), so
//! with `infer_ns=X` every boundary whose period index (the period about to be scheduled, the
//! index of the predictions' rows) is at least `infer_from_period` is charged `models × X` ns
//! as a halting charge named `"inference"`. `infer_ns=0` (the default) charges nothing: the
//! Python front end measures the figure on the machine that trains the models.

use std::path::Path;

use super::page_scheduler::{PageScheduler, Source, PARAMS as SCHEDULER_PARAMS};
use super::params::{ParamSpec, ParamType, Params};
use super::Built;
use super::PolicyInfo;
use crate::error::{Error, Result};
use crate::pagemap::PageId;
use crate::units::Period;

const NONE: u8 = u8::MAX;
/// Page ids indexed directly (a 64 MiB table at most); larger ids are searched.
const DENSE_PAGES: usize = 1 << 24;

/// Predicted classes of the selected pages, per period.
pub struct Predictions {
    pages: Vec<PageId>,
    /// row of each page id (u32::MAX: none)
    row_of: Vec<u32>,
    /// per row, per period: the class, or NONE
    classes: Vec<Vec<u8>>,
    pub period: u64,
    pub bins: u32,
    pub models: u64,
    pub policy: String,
    /// The first period index at which the models run (key `infer_from_period`; 0 if absent).
    pub infer_from_period: u64,
    /// The predictions use what a running system could not know (key `future_knowledge`,
    /// false if absent): the future-knowledge fallback, or perfect classes (`hybrid`).
    pub future_knowledge: bool,
    /// The file, and the digest of the trace it was made from (its `trace_digest` key; absent
    /// in hand-made files): checked against the simulated trace, since predictions are only
    /// valid for the trace they were made from.
    pub made_for: Option<(String, String)>,
}

impl Predictions {
    /// Read a predictions file; `key` names the parameter in errors.
    pub fn load(path: &Path, key: &str) -> Result<Predictions> {
        let what = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| Error::config(key, format!("{what}: {e}")))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Error::config(key, format!("{what}: not a predictions file: line {}: {e}", e.line())))?;
        let bad = |m: String| Error::config(key, format!("{what}: {m}"));
        if v.get("format").and_then(|f| f.as_str()) != Some("tierkit-predictions") {
            return Err(bad("not a predictions file (no \"format\": \"tierkit-predictions\")".into()));
        }
        if v.get("version").and_then(|x| x.as_u64()) != Some(1) {
            return Err(bad(format!(
                "predictions version {} is not supported (this tierkit reads version 1)",
                v.get("version").unwrap_or(&serde_json::Value::Null)
            )));
        }
        let num = |k: &str| v.get(k).and_then(|x| x.as_u64()).ok_or_else(|| bad(format!("key '{k}' is missing or not a whole number")));
        let period = num("period")?;
        let bins = num("bins")?;
        let models = num("models")?;
        if period == 0 || !(1..=35).contains(&bins) {
            return Err(bad(format!("period must be positive and bins 1..35 (got {period}, {bins})")));
        }
        let rows = v.get("rows").and_then(|r| r.as_object()).ok_or_else(|| bad("key 'rows' is missing or not an object".into()))?;
        let mut pairs: Vec<(PageId, Vec<u8>)> = Vec::with_capacity(rows.len());
        for (k, s) in rows {
            let page: PageId = k.parse().map_err(|_| bad(format!("rows: '{k}' is not a page id")))?;
            let s = s.as_str().ok_or_else(|| bad(format!("rows.{k}: not a string")))?;
            let mut cl = Vec::with_capacity(s.len());
            for (i, ch) in s.chars().enumerate() {
                let c = match ch {
                    '-' => NONE,
                    _ => match ch.to_digit(36) {
                        Some(d) if d as u64 <= bins => d as u8,
                        _ => return Err(bad(format!("rows.{k}: character {i} ('{ch}') is neither '-' nor a class 0..{bins} in base 36"))),
                    },
                };
                cl.push(c);
            }
            pairs.push((page, cl));
        }
        let policy = v.get("policy").and_then(|x| x.as_str()).unwrap_or("").to_string();
        let made_for = match v.get("trace_digest") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(d)) => Some((what.to_string(), d.clone())),
            Some(_) => return Err(bad("key 'trace_digest' is not a string".into())),
        };
        let infer_from_period = match v.get("infer_from_period") {
            None | Some(serde_json::Value::Null) => 0,
            Some(x) => x.as_u64().ok_or_else(|| bad(format!("key 'infer_from_period' must be a whole number of periods >= 0, not {x}")))?,
        };
        let future_knowledge = match v.get("future_knowledge") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(x) => return Err(bad(format!("key 'future_knowledge' must be true or false, not {x}"))),
        };
        let mut pr = Predictions::from_pairs(pairs, period, bins as u32, models, policy);
        pr.made_for = made_for;
        pr.infer_from_period = infer_from_period;
        pr.future_knowledge = future_knowledge;
        Ok(pr)
    }

    fn from_pairs(mut pairs: Vec<(PageId, Vec<u8>)>, period: u64, bins: u32, models: u64, policy: String) -> Predictions {
        pairs.sort_by_key(|p| p.0);
        // the direct index covers ids up to the largest in the file, but never more than
        // DENSE_PAGES (64 MiB): a page id taken from the file (up to 2^32 - 1) must not size
        // an allocation; ids above it are found by binary search in `pages`
        let n = pairs.last().map(|p| p.0 as usize + 1).unwrap_or(0).min(DENSE_PAGES);
        let mut row_of = vec![u32::MAX; n];
        let mut pages = Vec::with_capacity(pairs.len());
        let mut classes = Vec::with_capacity(pairs.len());
        for (i, (p, c)) in pairs.into_iter().enumerate() {
            if let Some(r) = row_of.get_mut(p as usize) {
                *r = i as u32;
            }
            pages.push(p);
            classes.push(c);
        }
        Predictions { pages, row_of, classes, period, bins, models, policy, infer_from_period: 0, future_knowledge: false, made_for: None }
    }

    /// The pages with a model, in id order.
    pub fn pages(&self) -> &[PageId] {
        &self.pages
    }

    /// Predictions name pages of the trace they were made for: an id at or above the trace's
    /// page count (when known) means another trace.
    pub fn check_pages(&self, trace_pages: u64, key: &str) -> Result<()> {
        match self.pages.last() {
            Some(&p) if trace_pages > 0 && p as u64 >= trace_pages => Err(Error::config(
                key,
                format!("page id {p} is beyond the trace's {trace_pages} pages (page ids at most {}): predictions made for another trace?", trace_pages - 1),
            )),
            _ => Ok(()),
        }
    }

    /// The class predicted for `page` in period `period`, if any.
    #[inline]
    pub fn class(&self, page: PageId, period: u64) -> Option<u8> {
        let r = match self.row_of.get(page as usize) {
            Some(&r) => r,
            None => self.pages.binary_search(&page).map(|i| i as u32).ok()?,
        };
        if r == u32::MAX {
            return None;
        }
        match self.classes[r as usize].get(period as usize) {
            Some(&c) if c != NONE => Some(c),
            _ => None,
        }
    }

    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({ "pages": self.pages.len(), "models": self.models, "period": self.period, "bins": self.bins })
    }
}

fn build(source: Source, p: &Params) -> Result<Built> {
    let name = if source == Source::Kleio { "kleio" } else { "kleoniki" };
    let key = format!("{name}:predictions");
    let file = p.text("predictions");
    if file.is_empty() {
        return Err(Error::config(
            key,
            format!("{name} needs its models' predictions: tierkit's Python front end (tierkit simulate/compare, tierkit.simulate) trains them from pages=F; here give predictions=FILE"),
        ));
    }
    let pred = Predictions::load(Path::new(file), &key)?;
    let period = match p.period("period") {
        Period::Accesses(n) => n,
        other => {
            return Err(Error::config(
                format!("{name}:period"),
                format!("the predictions are per period of accesses; give period as a number of accesses, not {}", other.describe()),
            ))
        }
    };
    if period != pred.period {
        return Err(Error::config(
            format!("{name}:period"),
            format!("{file} predicts periods of {} accesses, not {period}: run with period={}", pred.period, pred.period),
        ));
    }
    let bins = p.int("bins") as u32;
    if bins != pred.bins {
        return Err(Error::config(format!("{name}:bins"), format!("{file} predicts {} count classes, not {bins}: run with bins={}", pred.bins, pred.bins)));
    }
    let infer_ns = p.float("infer_ns");
    Ok(Built::from(PageScheduler::new(source, Period::Accesses(period), bins, false).with_predictions(pred).with_inference(infer_ns)))
}

macro_rules! text_param {
    ($name:expr, $unit:expr, $source:expr, $help:expr) => {
        ParamSpec { name: $name, ty: ParamType::Text, unit: $unit, default: "", source: $source, help: $help }
    };
}

/// `infer_ns`: one declaration for both policies.
const INFER_NS: ParamSpec = ParamSpec {
    name: "infer_ns",
    ty: ParamType::Float { min: 0.0, max: 1e12 },
    unit: "ns per model per boundary",
    default: "0",
    source: "tierkit (inference charged per boundary; docs/learned.md)",
    help: "halt the program for models × this at each boundary from the predictions' infer_from_period on, as the models run before the scheduler decides (003 §3.2); 0 = not charged (the Python front end passes a measured figure)",
};

/// The Python front end's parameters both learned policies take alike.
const HIDDEN: ParamSpec = text_param!("hidden", "units", "tierkit", "with the Python front end: LSTM hidden units per model (default 16)");
const EPOCHS: ParamSpec = text_param!("epochs", "epochs", "tierkit", "with the Python front end: training epochs (default 60)");
const SEED: ParamSpec = text_param!("seed", "", "tierkit", "with the Python front end: seed of the models' initial weights (default 0)");
const HOLDOUT: ParamSpec = text_param!("holdout", "fraction of periods", "tierkit (judge models out of sample; docs/learned.md)", "with the Python front end: hold out this share of the last periods: models train on the periods before and predict only the held-out ones (default 0.5; 0 = in sample)");
const FALLBACK: ParamSpec = text_param!("fallback", "online|future|off", "tierkit (judged only on periods already scored; docs/learned.md)", "with the Python front end: online (default; on): a page's prediction is used once the model has beaten history and a constant over its last trust periods; future: per page, judged on the periods it is applied to (FUTURE KNOWLEDGE); off: every prediction");
const TRUST: ParamSpec = text_param!(
    "trust",
    "periods",
    "tierkit (docs/learned.md, the fallback)",
    "with the Python front end: scored periods of evidence the online fallback looks back on (default 8)"
);
const PREDICTOR: ParamSpec = text_param!("predictor", "lstm|hybrid|idle", "003 §3.2; GTkernel/cori-sim's hybrid", "with the Python front end: lstm (default) trains the models; hybrid gives the selected pages their actual classes (FUTURE KNOWLEDGE: the selection's headroom); idle predicts no access (a constant control)");
const MODEL: ParamSpec = text_param!(
    "model",
    "file",
    "tierkit (docs/learned.md, saved models)",
    "with the Python front end: use models saved with save= instead of training (pages matched by address)"
);
const SAVE: ParamSpec = text_param!(
    "save",
    "file",
    "tierkit (docs/learned.md, saved models)",
    "with the Python front end: write the trained models to this file (refused if it exists)"
);
const DEVICE: ParamSpec =
    text_param!("device", "auto|cpu|cuda", "tierkit", "with the Python front end: where the models train and run (default auto: cuda if PyTorch sees one)");
const WEIGHT: ParamSpec = text_param!(
    "weight",
    "none|sqrt|balanced",
    "tierkit (models collapsing to 'no access'; docs/learned.md)",
    "with the Python front end: weigh training windows by target kind, idle or accessed (default none; see docs/learned.md)"
);
const THREADS: ParamSpec = text_param!("threads", "threads", "tierkit", "with the Python front end: PyTorch threads (default $TIERKIT_TORCH_THREADS, else 1)");

const KLEIO_PARAMS: &[ParamSpec] = &[
    SCHEDULER_PARAMS[0],
    SCHEDULER_PARAMS[1],
    text_param!("predictions", "file", "tierkit", "the models' predictions (made by the Python front end from pages=; see docs/learned.md)"),
    INFER_NS,
    text_param!(
        "pages",
        "fraction of pages",
        "003 §3.2 (Page Selector: the pages history misplaces, by accesses)",
        "with the Python front end: give models to this share of the trace's pages (default 0.1)"
    ),
    text_param!("history", "periods", "003 §3.2 (per-page RNN over past periods)", "with the Python front end: periods of input of each model (default 8)"),
    HIDDEN,
    EPOCHS,
    text_param!(
        "train",
        "trace",
        "003 §3.2 (models trained offline)",
        "with the Python front end: train on this trace of the same program (pages matched by address); default the simulated trace"
    ),
    SEED,
    HOLDOUT,
    FALLBACK,
    TRUST,
    PREDICTOR,
    MODEL,
    SAVE,
    DEVICE,
    WEIGHT,
    THREADS,
];

const KLEONIKI_PARAMS: &[ParamSpec] = &[
    SCHEDULER_PARAMS[0],
    SCHEDULER_PARAMS[1],
    text_param!("predictions", "file", "tierkit", "the group models' predictions (made by the Python front end; see docs/learned.md)"),
    INFER_NS,
    text_param!("pages", "fraction of pages", "003 §4 (Kleio's Page Selector, then grouping)", "with the Python front end: manage this share of the trace's pages (default 0.2)"),
    text_param!("tol", "classes", "tierkit (003 §4 groups identical, then similar patterns)", "with the Python front end: k-means merges patterns while the mean per-period distance to the group's pattern stays within this (default 0.5; 0 = identical only)"),
    text_param!("history", "periods", "003 §3.2", "with the Python front end: periods of input of each model (default 8)"),
    HIDDEN,
    EPOCHS,
    text_param!("train", "trace", "003 §3.2", "with the Python front end: train on this trace of the same program; default the simulated trace"),
    SEED,
    HOLDOUT,
    FALLBACK,
    TRUST,
    PREDICTOR,
    MODEL,
    SAVE,
    DEVICE,
    WEIGHT,
    THREADS,
];

pub static KLEIO: PolicyInfo = PolicyInfo {
    name: "kleio",
    summary: "history page scheduler with per-page LSTM predictions for the pages history misplaces most (trained offline on the trace; needs tierkit[ml])",
    source: "003 §3.2 (Kleio)",
    deploy: super::Deploy::NotLive { why: "a daemon could feed the trained models live observations; tierkit replays predictions made from a trace" },
    params: KLEIO_PARAMS,
    build: |p| build(Source::Kleio, p),
};

pub static KLEONIKI: PolicyInfo = PolicyInfo {
    name: "kleoniki",
    summary: "Kleio with one LSTM per group of pages with identical or similar per-period patterns, at Cori's period (needs tierkit[ml])",
    source: "003 §4 (Kleoniki)",
    deploy: super::Deploy::NotLive { why: "a daemon could feed the trained models live observations; tierkit replays predictions made from a trace" },
    params: KLEONIKI_PARAMS,
    build: |p| build(Source::Kleoniki, p),
};
