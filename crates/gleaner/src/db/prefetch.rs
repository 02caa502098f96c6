//! Prefetching separated values for forward scans: several value reads in flight instead of
//! one at a time.
//!
//! A scan over separated values reads one record per entry, at a random place in some value
//! table; one at a time, each read waits for the device (about 120 µs for a 16 KiB record on
//! the test machine, which serves three times as many random reads at queue depth 32 as at 1).
//! A [`ValuePrefetcher`] walks a second, lazy iterator over the same state ahead of the user's
//! iterator, and hands the records it finds to a small pool of reader threads ([`ReadPool`]);
//! when the user's iterator lands on an entry, its value is usually read already.
//!
//! It changes where a value's bytes come from, never which: the prefetched value is for the
//! same (key, sequence number, handle) the user's iterator landed on, compared before use, and
//! the reader verifies the record exactly as the iterator's own read does. The look-ahead ramps
//! up (1, 2, 4, ... up to `scan_prefetch_depth` reads in flight) so a short scan does not read
//! far past its end, and stops at [`MAX_PREFETCH_BYTES`] of values.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use super::SuperVersion;
use super::iter::DbIterator;
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::value::ValueHandle;
use crate::version::check_record;

/// Most bytes of values one iterator holds prefetched or in flight.
pub(super) const MAX_PREFETCH_BYTES: u64 = 8 << 20;

/// One value read, run on a pool thread.
type Job = Box<dyn FnOnce() + Send>;

/// Reader threads shared by the iterators of one database. The queue is bounded (a submitter
/// waits when it is full); the threads end when the database and every iterator holding the
/// pool are gone.
pub(super) struct ReadPool {
    jobs: SyncSender<Job>,
    /// Values iterators took from a prefetch (`stats().operations.scan_values_prefetched`).
    served: AtomicU64,
}

impl ReadPool {
    /// Starts `threads` reader threads.
    pub(super) fn new(threads: usize) -> Result<Self> {
        let (jobs, rx) = sync_channel::<Job>(threads * 4);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            std::thread::Builder::new()
                .name(format!("gleaner-read-{i}"))
                .spawn(move || {
                    loop {
                        // Holding the lock only to take a job: the others wait for the next.
                        let job = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .map_err(|e| Error::io("starting a value-read thread", e))?;
        }
        Ok(ReadPool {
            jobs,
            served: AtomicU64::new(0),
        })
    }

    /// Values iterators took from a prefetch.
    pub(super) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Runs `job` on a pool thread; `false` when the pool has stopped (the caller reads
    /// itself).
    fn submit(&self, job: Job) -> bool {
        self.jobs.send(job).is_ok()
    }
}

/// Which record a prefetched value is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RecordRef {
    pub user_key: Vec<u8>,
    pub seq: SeqNo,
    pub handle: ValueHandle,
}

/// A record the look-ahead found, and its read (none: left to the iterator's own fetcher,
/// because it follows the previous record in its table, where the fetcher's read-ahead window
/// serves it better).
struct Pending {
    record: RecordRef,
    read: Option<Receiver<Result<Vec<u8>>>>,
}

/// The look-ahead of one forward iterator.
pub(super) struct ValuePrefetcher {
    pool: Arc<ReadPool>,
    sv: Arc<SuperVersion>,
    values: Arc<ValueTableCache>,
    fill_cache: bool,
    depth: usize,
    /// The lazy iterator walking ahead; `None` until the first separated value, and after it
    /// ran off the end.
    ahead: Option<Box<DbIterator>>,
    pending: VecDeque<Pending>,
    pending_bytes: u64,
    /// Reads allowed in flight now: doubles with every value taken, up to `depth`.
    ramp: usize,
    /// The handle of the last record queued (or of the user's entry when the queue is empty):
    /// a record right after it in the same table is left to the fetcher's read-ahead.
    last: Option<ValueHandle>,
}

impl ValuePrefetcher {
    pub(super) fn new(
        pool: Arc<ReadPool>,
        sv: Arc<SuperVersion>,
        values: Arc<ValueTableCache>,
        fill_cache: bool,
        depth: usize,
    ) -> Self {
        ValuePrefetcher {
            pool,
            sv,
            values,
            fill_cache,
            depth,
            ahead: None,
            pending: VecDeque::new(),
            pending_bytes: 0,
            ramp: 1,
            last: None,
        }
    }

    /// Forgets everything looked ahead (the user's iterator moved other than forward). Waits
    /// for the reads in flight (at most `depth`), so none outlives the iterator's interest.
    pub(super) fn reset(&mut self) {
        self.ahead = None;
        for p in self.pending.drain(..) {
            if let Some(rx) = p.read {
                let _ = rx.recv();
            }
        }
        self.pending_bytes = 0;
        self.ramp = 1;
        self.last = None;
    }

    /// The value of `record`, where the user's iterator just landed moving forward: taken from
    /// a finished or running prefetch, or `None` when the caller must read it itself (the first
    /// value after a seek, a record that follows the previous one in its table, or a pool that
    /// has stopped). `start_ahead` builds the lazy look-ahead iterator positioned at the user's
    /// entry, when the look-ahead (re)starts there.
    pub(super) fn take(
        &mut self,
        record: &RecordRef,
        start_ahead: impl FnOnce() -> Result<DbIterator>,
    ) -> Result<Option<Vec<u8>>> {
        // An eager iterator reads every separated value it lands on, in order, so moving
        // forward it always lands on the front of the queue; anything else (a seek, a change
        // of direction, a queue that ran dry) starts the look-ahead over from here.
        let taken = if self.pending.front().is_some_and(|p| p.record == *record) {
            match self.pop_front() {
                Some(Pending { read: Some(rx), .. }) => {
                    let value = rx.recv().ok().transpose()?;
                    if value.is_some() {
                        self.pool.served.fetch_add(1, Ordering::Relaxed);
                    }
                    value
                }
                _ => None,
            }
        } else {
            self.reset();
            // A look-ahead that cannot start (an error seeking it) only means no prefetching:
            // the user's iterator reads this value itself and meets any error where it is.
            match start_ahead() {
                Ok(ahead) if ahead.valid() => self.ahead = Some(Box::new(ahead)),
                _ => return Ok(None),
            }
            None
        };
        if self.pending.is_empty() {
            self.last = Some(record.handle);
        }
        self.ramp = (self.ramp * 2).min(self.depth);
        self.fill();
        Ok(taken)
    }

    fn pop_front(&mut self) -> Option<Pending> {
        let p = self.pending.pop_front()?;
        self.pending_bytes = self.pending_bytes.saturating_sub(p.record.handle.len);
        Some(p)
    }

    /// Walks the look-ahead forward until `ramp` reads are in flight or queued, or the byte
    /// bound is reached.
    fn fill(&mut self) {
        let Some(mut ahead) = self.ahead.take() else {
            return;
        };
        loop {
            let in_flight = self.pending.iter().filter(|p| p.read.is_some()).count();
            if in_flight >= self.ramp || self.pending_bytes >= MAX_PREFETCH_BYTES {
                self.ahead = Some(ahead);
                return;
            }
            // The look-ahead stops at the end, and at an error: the user's own iterator meets
            // that error at the entry that has it, not earlier here.
            if ahead.next().is_err() || !ahead.valid() {
                return;
            }
            let record = match ahead.separated_record() {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(_) => return,
            };
            let follows = self.last.is_some_and(|h| {
                h.file_number == record.handle.file_number
                    && h.offset + h.len == record.handle.offset
            });
            self.last = Some(record.handle);
            let read = if follows { None } else { self.submit(&record) };
            self.pending_bytes += record.handle.len;
            self.pending.push_back(Pending { record, read });
        }
    }

    /// Starts reading `record` on the pool; `None` when the pool has stopped.
    fn submit(&self, record: &RecordRef) -> Option<Receiver<Result<Vec<u8>>>> {
        let (tx, rx) = sync_channel(1);
        let sv = Arc::clone(&self.sv);
        let values = Arc::clone(&self.values);
        let fill_cache = self.fill_cache;
        let r = record.clone();
        let job: Job = Box::new(move || {
            let result = read_value(&sv, &values, &r, fill_cache);
            // Let go of the state before answering: once the iterator has every answer, no
            // read of it pins a file (close must not leave files that only a straggling
            // reader still held).
            drop(sv);
            drop(values);
            let _ = tx.send(result);
        });
        self.pool.submit(job).then_some(rx)
    }
}

impl Drop for ValuePrefetcher {
    fn drop(&mut self) {
        self.reset();
    }
}

/// Reads and verifies the value of `r` as the iterator's own fetch does: located through the
/// version's value set (inheritance included), its key and sequence number checked.
fn read_value(
    sv: &SuperVersion,
    values: &ValueTableCache,
    r: &RecordRef,
    fill_cache: bool,
) -> Result<Vec<u8>> {
    let at = sv.version.values().locate(
        values,
        &r.user_key,
        r.seq,
        r.handle,
        IoClass::UserRead,
        fill_cache,
    )?;
    let record = at
        .table
        .read_record(at.handle.offset, at.handle.len, IoClass::UserRead)?;
    check_record(&at.handle, &record.key, record.seq, &r.user_key, r.seq)?;
    Ok(record.value)
}
