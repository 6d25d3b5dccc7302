//! Reading ahead on a second thread. [`ReadAhead`] wraps any source: a worker thread fills
//! batches while the consumer works on the previous ones, through a bounded channel (memory
//! stays bounded: at most `DEPTH` batches in flight, recycled). Records arrive in the same
//! order as from the wrapped source, so results are bit-for-bit those of a single thread.
//! The end of the stream is its own message (`None`), never an empty batch: a native trace
//! may hold an empty data chunk, which is a batch like any other.

use super::{Batch, Progress, RecordSource, TraceMeta, BATCH_RECORDS};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Batches decoded ahead of the consumer.
const DEPTH: usize = 3;

pub struct ReadAhead {
    meta: TraceMeta,
    name: String,
    full: Receiver<Result<Option<Batch>>>,
    empty: SyncSender<Batch>,
    read: Arc<AtomicU64>,
    total: Option<u64>,
    digest: Arc<Mutex<Option<String>>>,
    losses: Arc<Mutex<std::collections::BTreeMap<String, u64>>>,
    worker: Option<JoinHandle<()>>,
    done: bool,
}

impl ReadAhead {
    /// Start reading `src` on a worker thread. Set the source's projection first.
    pub fn new(mut src: Box<dyn RecordSource>) -> ReadAhead {
        let meta = src.meta().clone();
        let name = src.name().to_string();
        let total = src.progress().bytes_total;
        let (full_tx, full) = sync_channel::<Result<Option<Batch>>>(DEPTH);
        let (empty, empty_rx) = sync_channel::<Batch>(DEPTH + 1);
        for _ in 0..DEPTH {
            let _ = empty.send(Batch::with_capacity(BATCH_RECORDS));
        }
        let read = Arc::new(AtomicU64::new(0));
        let digest = Arc::new(Mutex::new(None));
        let losses = Arc::new(Mutex::new(Default::default()));
        let (read2, digest2, losses2) = (read.clone(), digest.clone(), losses.clone());
        let worker = std::thread::Builder::new()
            .name("tierkit-read-ahead".into())
            .spawn(move || {
                // stops when the consumer hangs up (dropped) or the source ends or fails
                while let Ok(mut b) = empty_rx.recv() {
                    match src.next_batch(&mut b) {
                        Ok(true) => {
                            read2.store(src.progress().bytes_read, Ordering::Relaxed);
                            if full_tx.send(Ok(Some(b))).is_err() {
                                return;
                            }
                        }
                        Ok(false) => {
                            read2.store(src.progress().bytes_read, Ordering::Relaxed);
                            *digest2.lock().unwrap() = src.digest();
                            *losses2.lock().unwrap() = src.import_losses();
                            let _ = full_tx.send(Ok(None));
                            return;
                        }
                        Err(e) => {
                            let _ = full_tx.send(Err(e));
                            return;
                        }
                    }
                }
            })
            .expect("spawning the read-ahead thread");
        ReadAhead { meta, name, full, empty, read, total, digest, losses, worker: Some(worker), done: false }
    }
}

impl RecordSource for ReadAhead {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, batch: &mut Batch) -> Result<bool> {
        if self.done {
            batch.clear();
            return Ok(false);
        }
        match self.full.recv() {
            Ok(Ok(Some(b))) => {
                // hand the caller's old buffer back to the worker for reuse
                let old = std::mem::replace(batch, b);
                let _ = self.empty.send(old);
                Ok(true)
            }
            Ok(Ok(None)) => {
                self.done = true;
                batch.clear();
                Ok(false)
            }
            Ok(Err(e)) => {
                self.done = true;
                Err(e)
            }
            Err(_) => Err(Error::Invariant("the read-ahead thread stopped without a result".into())),
        }
    }

    fn progress(&self) -> Progress {
        Progress { bytes_read: self.read.load(Ordering::Relaxed), bytes_total: self.total }
    }

    fn digest(&self) -> Option<String> {
        self.digest.lock().unwrap().clone()
    }

    /// The source's losses, once it has been read to its end (empty before).
    fn import_losses(&self) -> std::collections::BTreeMap<String, u64> {
        self.losses.lock().unwrap().clone()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // hang up both channels: the worker's next send or receive fails and it returns
        drop(std::mem::replace(&mut self.empty, sync_channel(0).0));
        drop(std::mem::replace(&mut self.full, sync_channel(0).1));
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::synth::{SynthSource, SynthSpec};

    #[test]
    fn same_records_in_the_same_order() {
        let spec = SynthSpec { accesses: 300_000, pages: 5000, seed: 9, write_ratio: 0.3, ..Default::default() };
        let direct = crate::trace::read_all(&mut SynthSource::new(spec.clone()).unwrap()).unwrap();
        let mut ra = ReadAhead::new(Box::new(SynthSource::new(spec).unwrap()));
        let ahead = crate::trace::read_all(&mut ra).unwrap();
        assert_eq!(direct.len(), ahead.len());
        for (a, b) in direct.iter().zip(&ahead) {
            assert_eq!((&a.addr, &a.write, &a.insn), (&b.addr, &b.write, &b.insn));
        }
        assert!(!ra.next_batch(&mut Batch::default()).unwrap());
    }

    #[test]
    fn dropping_early_does_not_hang() {
        let spec = SynthSpec { accesses: 2_000_000, pages: 5000, ..Default::default() };
        let mut ra = ReadAhead::new(Box::new(SynthSource::new(spec).unwrap()));
        let mut b = Batch::default();
        assert!(ra.next_batch(&mut b).unwrap());
        drop(ra);
    }
}
