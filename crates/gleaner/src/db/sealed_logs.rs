//! The logs of sealed memtables whose bytes may not be durable yet.
//!
//! A memtable switch does not sync the log it closes: a writer would wait for that `fdatasync`
//! (and the new log's directory entry) at every switch, with the whole write queue behind it,
//! though no write asked for durability. The closed log is kept here instead, open, until one
//! of two things makes it unneeded:
//!
//! - a sync of a later log (a synced write, `sync_wal`, close) syncs it first, with the value
//!   segments its handles name, so a synced write never survives an earlier write that is lost;
//! - its memtable is flushed: its writes are in tables then, and the log is deleted; the flush
//!   closes it, on the flush's thread (closing the last handle of a deleted file frees its
//!   blocks, about a millisecond a writer would otherwise wait for).
//!
//! A power loss in between may take the closed log's unsynced tail while keeping some of a later
//! log's bytes. Recovery finds that from the sequence numbers (each log continues its
//! predecessor's exactly; docs/format.md, "WAL record") and replays nothing after the loss, so
//! what it recovers is still a prefix of the writes.

use std::sync::Arc;

use parking_lot::Mutex;

use super::segments::MemSegments;
use crate::error::Result;
use crate::wal::LogWriter;

/// One sealed memtable's log, not yet synced.
struct SealedLog {
    /// The log's file number (its memtable's WAL number).
    number: u64,
    writer: LogWriter,
    /// The memtable's value segments (`separate_at=write`), shared with the flush that seals
    /// them: synced before the log whose handles name their records.
    segments: Option<Arc<Mutex<MemSegments>>>,
}

/// The sealed logs not yet synced, oldest first: at most one per memtable waiting to be flushed,
/// so bounded by `max_immutable_memtables` (each flush prunes the ones it made obsolete).
#[derive(Default)]
pub(super) struct SealedLogs {
    logs: Vec<SealedLog>,
}

impl SealedLogs {
    /// Keeps the log of a memtable just sealed (its bytes already handed to the operating
    /// system) until it is synced or no longer needed.
    pub fn push(
        &mut self,
        number: u64,
        writer: LogWriter,
        segments: Option<Arc<Mutex<MemSegments>>>,
    ) {
        debug_assert!(self.logs.last().is_none_or(|l| l.number < number));
        self.logs.push(SealedLog {
            number,
            writer,
            segments,
        });
    }

    /// Takes out the logs numbered below `oldest_needed` (their memtables are flushed: the
    /// logs are obsolete) for the caller to close, so their deletion frees the space.
    #[must_use = "the logs are closed when the result is dropped"]
    pub fn prune(&mut self, oldest_needed: u64) -> Vec<LogWriter> {
        let keep = self.logs.partition_point(|l| l.number < oldest_needed);
        self.logs.drain(..keep).map(|l| l.writer).collect()
    }

    /// Syncs every log kept, oldest first, each after the value segments its handles name, and
    /// forgets it. On error the logs not yet synced stay (the caller makes the database
    /// read-only: no later sync may succeed past a log that failed).
    pub fn sync(&mut self) -> Result<()> {
        while let Some(log) = self.logs.first_mut() {
            if let Some(s) = &log.segments {
                s.lock().flush_data(true)?;
            }
            log.writer.sync()?;
            self.logs.remove(0);
        }
        Ok(())
    }
}
