//! What a run reads its trace through: anything that can be opened as a trace, possibly
//! several times (the main loop, the look-ahead of oracles and the page pre-pass each open
//! it), and the `--repeat` wrapper over one.

use std::sync::Arc;

use crate::error::Result;
use crate::trace::repeat::RepeatSource;
use crate::trace::summary::Summary;
use crate::trace::synth::{SynthSource, SynthSpec};
use crate::trace::{RecordSource, TraceInput};

/// Something that can be opened as a trace, possibly several times.
pub trait TraceOpener: Sync {
    fn open(&self) -> Result<Box<dyn RecordSource>>;
    fn summary(&self) -> Result<Summary>;
    fn describe(&self) -> String;
    fn format_name(&self) -> String;
    /// Why the trace stops short of its program's end, when its header says so (a native
    /// trace's summary key `incomplete`, e.g. an interrupted `trace record`).
    fn incomplete(&self) -> Option<String> {
        None
    }
    /// An owned handle that opens the same trace (a replayed trace opens it again from a
    /// reader thread, after the borrow that named it is gone).
    fn shared(&self) -> Arc<dyn TraceOpener + Send>;
}

/// A trace replayed `passes` times as one continuous run (`--repeat`, see
/// [`crate::trace::repeat`]). Every reader of a run opens it, so the main loop, the
/// look-ahead of oracles and the page pre-pass all see the same repeated stream.
#[derive(Clone)]
pub struct Repeated {
    pub inner: Arc<dyn TraceOpener + Send>,
    pub passes: u32,
}

impl TraceOpener for Repeated {
    fn open(&self) -> Result<Box<dyn RecordSource>> {
        let inner = self.inner.clone();
        Ok(Box::new(RepeatSource::new(self.passes, Box::new(move || inner.open()))?))
    }
    /// The summary of the whole repeated stream (N times the accesses, the same pages).
    fn summary(&self) -> Result<Summary> {
        crate::trace::summary::scan(self.open()?.as_mut())
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn format_name(&self) -> String {
        self.inner.format_name()
    }
    fn incomplete(&self) -> Option<String> {
        self.inner.incomplete()
    }
    fn shared(&self) -> Arc<dyn TraceOpener + Send> {
        Arc::new(self.clone())
    }
}

impl TraceOpener for TraceInput {
    fn open(&self) -> Result<Box<dyn RecordSource>> {
        TraceInput::open(self)
    }
    fn summary(&self) -> Result<Summary> {
        TraceInput::summary(self)
    }
    fn describe(&self) -> String {
        self.display()
    }
    fn format_name(&self) -> String {
        self.resolved_format().map(|f| f.spec()).unwrap_or_default()
    }
    fn incomplete(&self) -> Option<String> {
        // the summary is at the end of the file: one seek, not a pass
        match self.resolved_format() {
            Ok(crate::trace::Format::Tkt) => crate::trace::tkt::TktReader::read_summary(&self.path).ok()?.1.incomplete,
            _ => None,
        }
    }
    fn shared(&self) -> Arc<dyn TraceOpener + Send> {
        Arc::new(self.clone())
    }
}

impl TraceOpener for SynthSpec {
    fn open(&self) -> Result<Box<dyn RecordSource>> {
        Ok(Box::new(SynthSource::new(self.clone())?))
    }
    fn summary(&self) -> Result<Summary> {
        crate::trace::summary::scan(self.open()?.as_mut())
    }
    fn describe(&self) -> String {
        format!("synth:{}", self.kind.name())
    }
    fn format_name(&self) -> String {
        "synth".into()
    }
    fn shared(&self) -> Arc<dyn TraceOpener + Send> {
        Arc::new(self.clone())
    }
}
