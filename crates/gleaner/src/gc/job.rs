//! The GC job: read the victims' records in key order, keep the ones still referenced, write
//! them to new value tables, and report what went where so the commit can record inheritance
//! and move late garbage onto the outputs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::policy::{GcOutputRouting, GcPolicy, GcReadMode, GcValidity};
use super::reader::VictimReader;
use crate::compaction::{PendingFiles, ValueOutputConfig, ValueOutputs};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::value::{OwnedRecord, ValueTable};
use crate::version::ValueTableMeta;

/// Figures of one GC job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcJobStats {
    /// Victim tables.
    pub victims: u64,
    /// Records read from the victims.
    pub records_read: u64,
    /// Records found to be garbage and dropped.
    pub records_dropped: u64,
    /// Records copied to the outputs.
    pub records_written: u64,
    /// Bytes of records read.
    pub bytes_read: u64,
    /// Bytes of output tables written.
    pub bytes_written: u64,
    /// Microseconds reading victims.
    pub read_micros: u64,
    /// Microseconds checking validity.
    pub lookup_micros: u64,
    /// Microseconds writing outputs.
    pub write_micros: u64,
}

/// What a finished job produced.
#[derive(Debug)]
pub struct GcJobOutput {
    /// The new value tables.
    pub tables: Vec<ValueTableMeta>,
    /// For every copied record (by its unique sequence number), the output table holding it.
    pub copied: HashMap<SeqNo, u64>,
    /// Figures.
    pub stats: GcJobStats,
    /// The output files: keep them once the edit naming them is installed.
    pub pending: PendingFiles,
}

/// How often (in records) the job checks whether it was cancelled.
const CANCEL_CHECK_INTERVAL: u64 = 256;

/// Runs one GC job over `victims` with `policy`. `is_live(key, seq)` is the validity check the
/// policy asked for. On any error the outputs written so far are deleted.
pub fn run_gc_job(
    victims: &[Arc<ValueTable>],
    policy: &dyn GcPolicy,
    is_live: &mut dyn FnMut(&[u8], SeqNo) -> Result<bool>,
    outputs: ValueOutputConfig,
    cancel: Option<&AtomicBool>,
) -> Result<GcJobOutput> {
    // The runner implements what the existing policies ask for; a new policy adds its mode here.
    let (GcReadMode::Full, GcValidity::IndexLookup, GcOutputRouting::SingleRun) = (
        policy.read_mode(),
        policy.validity(),
        policy.output_routing(),
    );
    let mut stats = GcJobStats {
        victims: victims.len() as u64,
        ..Default::default()
    };
    let mut readers: Vec<VictimReader> = victims
        .iter()
        .map(|t| VictimReader::new(Arc::clone(t)))
        .collect();
    let mut heads: Vec<Option<OwnedRecord>> = Vec::with_capacity(readers.len());
    let timed = |micros: &mut u64, start: Instant| *micros += start.elapsed().as_micros() as u64;
    for r in &mut readers {
        let start = Instant::now();
        heads.push(r.next_record()?);
        timed(&mut stats.read_micros, start);
    }
    let mut out = ValueOutputs::new(outputs, 0);
    let mut copied = HashMap::new();
    loop {
        // The smallest head in internal-key order (key ascending, sequence descending).
        let next = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|r| (i, r)))
            .min_by(|(_, a), (_, b)| a.key.cmp(&b.key).then(b.seq.cmp(&a.seq)))
            .map(|(i, _)| i);
        let Some(i) = next else { break };
        let record = heads[i].take().expect("chosen head exists");
        let start = Instant::now();
        heads[i] = readers[i].next_record()?;
        timed(&mut stats.read_micros, start);
        stats.records_read += 1;
        if stats.records_read.is_multiple_of(CANCEL_CHECK_INTERVAL)
            && cancel.is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(Error::Closed);
        }
        let start = Instant::now();
        let live = is_live(&record.key, record.seq)?;
        timed(&mut stats.lookup_micros, start);
        if !live {
            stats.records_dropped += 1;
            continue;
        }
        let start = Instant::now();
        let handle = out.add(&record.key, record.seq, &record.value)?;
        timed(&mut stats.write_micros, start);
        copied.insert(record.seq, handle.file_number);
        stats.records_written += 1;
    }
    stats.bytes_read = readers.iter().map(|r| r.bytes_read).sum();
    let start = Instant::now();
    let (tables, bytes, pending) = out.finish()?;
    timed(&mut stats.write_micros, start);
    stats.bytes_written = bytes;
    Ok(GcJobOutput {
        tables,
        copied,
        stats,
        pending,
    })
}
