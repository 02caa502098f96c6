//! Prefetching separated values for forward scans: the values a scan is about to reach read
//! in few, large reads, several in flight, instead of one small read at a time.
//!
//! A scan over separated values reads one record per entry. One at a time, each read waits
//! for the device (about 120 µs for a 16 KiB record on the test machine, which serves three
//! times as many random reads at queue depth 32 as at 1). And the records a scan reaches are
//! rarely scattered at random: value tables are key-sorted runs, so the records of one key
//! range sit in a few tables, in file order, often with only dead records between them (the
//! sorted groups a merging compaction writes; the tables of a flush or a GC job). What a scan
//! costs is then one read per run of nearby records per table, if the reader sees the runs.
//!
//! A [`ValuePrefetcher`] walks a lazy iterator over the same state ahead of the user's
//! iterator, which moving forward lands on the entries the walk found instead of walking the
//! merged sources a second time. It walks in batches of entries of half what the scan has
//! taken so far ([`next_batch`]: a short scan does not walk or read far past its end), up to
//! [`MAX_BATCH`] where records share reads, or twice the reads in flight where nearly every
//! record is a read of its own:
//!
//! - the records of a batch that lie in one table within [`GAP`] of each other join one read
//!   of the bytes from the first to the last ([`plan_runs`], a pure function);
//! - a run that starts where the scan's last window of its table ended (within [`GAP`]) grows
//!   into a read-ahead window, doubling from [`FIRST_WINDOW`] up to `value_readahead_size`,
//!   which later batches find already read;
//! - the reads go to a small pool of reader threads ([`ReadPool`]), at most
//!   `scan_prefetch_depth` of one iterator in flight, with at most [`MAX_PREFETCH_BYTES`] read
//!   and not yet consumed.
//!
//! It changes where an entry and its value's bytes come from, never which: the look-ahead is
//! the same iterator the user's would be (same state, snapshot, bounds, expiry time), and a
//! prefetched record is decoded and verified (length, checksum, key and sequence number)
//! exactly as the iterator's own read verifies it. A prefetch that failed, or a record whose
//! table a GC job collected (found through inheritance, read on its own), is read by the
//! iterator itself, which meets any error at the entry that has it; an error the walk meets
//! reaches the user's iterator when it moves past the last entry before it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex as StdMutex};

use parking_lot::{Condvar, Mutex};

use super::SuperVersion;
use super::iter::DbIterator;
use crate::cache::ValueTableCache;
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::{SeqNo, ValueKind};
use crate::value::{ValueHandle, decode_record};
use crate::version::check_record;

/// Most bytes of values one iterator holds prefetched, read ahead or in flight (a single record
/// larger than this is still read ahead when nothing else is held).
pub(super) const MAX_PREFETCH_BYTES: u64 = 8 << 20;
/// Records of one table at most this far apart join one read: reading 16 KiB of dead records
/// costs about 12 µs at the test machine's 1.4 GB/s, less than a second device round trip
/// (30–120 µs). The count of what scans visit in docs/benchmarks.md ("DiffKV scans") chose
/// it: no fewer reads at 64 KiB, 7 % more bytes than at 4 KiB.
pub(super) const GAP: u64 = 16 << 10;
/// The first read-ahead window of a table the scan reads forward again; it doubles up to
/// `value_readahead_size` while the scan keeps reading the table forward.
pub(super) const FIRST_WINDOW: u64 = 32 << 10;
/// Most read windows one iterator keeps (the least recently used one no pending record needs
/// goes first).
const MAX_WINDOWS: usize = 64;
/// Entries in the first batch the look-ahead walks after a seek; each batch doubles it.
const FIRST_BATCH: usize = 4;
/// Most entries in one batch.
const MAX_BATCH: usize = 512;

/// One read, run on a pool thread.
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
        let rx = Arc::new(StdMutex::new(rx));
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

    /// Runs `job` on a pool thread; `false` when the pool has stopped.
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

/// Where one read stands.
enum Answer {
    /// Planned, not yet handed to the pool.
    Queued,
    /// On the pool.
    Running,
    /// The bytes read: a window of a table, or one record's value.
    Done(Arc<Vec<u8>>),
    /// The read failed or never ran: the iterator reads the record itself.
    Failed,
}

/// The answer of one read, waited for by the records it serves.
struct ReadSlot {
    answer: Mutex<Answer>,
    ready: Condvar,
}

impl ReadSlot {
    fn new() -> Arc<Self> {
        Arc::new(ReadSlot {
            answer: Mutex::new(Answer::Queued),
            ready: Condvar::new(),
        })
    }

    fn finish(&self, got: Option<Vec<u8>>) {
        *self.answer.lock() = match got {
            Some(bytes) => Answer::Done(Arc::new(bytes)),
            None => Answer::Failed,
        };
        self.ready.notify_all();
    }

    fn running(&self) -> bool {
        matches!(*self.answer.lock(), Answer::Running)
    }

    /// Waits for a read handed to the pool; `None` when it failed.
    fn wait(&self) -> Option<Arc<Vec<u8>>> {
        let mut a = self.answer.lock();
        loop {
            match &*a {
                Answer::Done(bytes) => return Some(Arc::clone(bytes)),
                Answer::Failed | Answer::Queued => return None,
                Answer::Running => self.ready.wait(&mut a),
            }
        }
    }
}

/// Finishes its slot when dropped: with the bytes read, or as failed when the job panicked or
/// was dropped unrun (a pool whose threads ended), so no iterator waits for it forever.
struct Answering {
    slot: Arc<ReadSlot>,
    got: Option<Vec<u8>>,
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.slot.finish(self.got.take());
    }
}

/// Where the value of a record the look-ahead found will come from.
enum Source {
    /// A window of the record's table: bytes from `start`, read by window `window`.
    Window {
        slot: Arc<ReadSlot>,
        start: u64,
        window: WindowId,
    },
    /// Its value, read on its own (a record found through inheritance).
    Value(Arc<ReadSlot>),
}

/// An entry the look-ahead landed on, for the user's iterator to land on in turn.
#[derive(Debug)]
pub(super) struct AheadEntry {
    pub user_key: Vec<u8>,
    /// The entry's sequence number.
    pub seq: SeqNo,
    pub kind: ValueKind,
    /// The stored value: the value itself (with its expiry for a value that has one), or an
    /// encoded handle.
    pub stored: Vec<u8>,
}

impl AheadEntry {
    /// Bytes it holds (what the queue of entries is bounded by).
    fn footprint(&self) -> u64 {
        (self.user_key.len() + self.stored.len()) as u64
    }
}

/// An entry the look-ahead walked, not yet landed on.
struct Pending {
    entry: AheadEntry,
    /// For a separated value: its record, and where its value will come from.
    separated: Option<(RecordRef, Source)>,
}

/// A window: its table, and its number among the iterator's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct WindowId {
    table: u64,
    id: u64,
}

/// A range of one value table read (or being read) for the records of a scan.
struct Window {
    id: u64,
    start: u64,
    /// The end asked for; the read stops earlier only at the end of the table's records, past
    /// every record it holds.
    end: u64,
    slot: Arc<ReadSlot>,
    /// Pending records it serves: a window goes only when none is left.
    refs: usize,
}

/// Records of one table that one read serves: bytes `start..end` cover every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Run {
    pub start: u64,
    pub end: u64,
    /// The members' positions in the input.
    pub members: Vec<usize>,
}

/// Groups the records `(offset, len)` of one table into reads: sorted by offset, a record joins
/// the run before it when it starts at most `gap` bytes after the run's end and the run stays
/// within `max_len` bytes (a record longer than that is a run of its own).
pub(super) fn plan_runs(records: &[(u64, u64)], gap: u64, max_len: u64) -> Vec<Run> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].0);
    let mut runs: Vec<Run> = Vec::new();
    for i in order {
        let (offset, len) = records[i];
        let end = offset.saturating_add(len);
        if let Some(run) = runs.last_mut()
            && offset >= run.start
            && offset.saturating_sub(run.end) <= gap
            && end.max(run.end) - run.start <= max_len
        {
            run.end = run.end.max(end);
            run.members.push(i);
            continue;
        }
        runs.push(Run {
            start: offset,
            end,
            members: vec![i],
        });
    }
    runs
}

/// The size of the next window of a table read forward: double the last window, from
/// [`FIRST_WINDOW`] up to `max_window`, when the records go on within [`GAP`] of where it
/// ended (the scan used it to its end); else none, exactly what the records need (a table the
/// scan did not read just before `start`, or whose records lie farther apart than a window
/// reads usefully: a table holding a few keys of a wide range).
pub(super) fn next_window(last: Option<(u64, u64)>, start: u64, max_window: u64) -> u64 {
    match last {
        Some((end, size)) if max_window > 0 && start >= end && start - end <= GAP => size
            .saturating_mul(2)
            .clamp(FIRST_WINDOW, max_window.max(FIRST_WINDOW)),
        _ => 0,
    }
}

/// The size of the next batch of entries the look-ahead walks, once the user's iterator has
/// taken `taken` entries since it started: half of that, from [`FIRST_BATCH`] up to `most`. A
/// scan of unknown length is a bet on its going on as far again; a lead of half what it took
/// walks about 1.3 times what a scan of 1 to 1000 entries needs, where batches doubling from 4
/// walked 1.8 times (measured on the 2 GiB database of the "scans walk once" section of
/// docs/benchmarks.md: 21 % fewer device bytes a scan).
pub(super) fn next_batch(taken: usize, most: usize) -> usize {
    (taken / 2).clamp(FIRST_BATCH, most.max(FIRST_BATCH))
}

/// The look-ahead of one forward iterator: it walks the entries ahead of the user's iterator,
/// which then lands on them in turn (one walk of the merged sources, not two), and reads their
/// separated values ahead.
pub(super) struct ValuePrefetcher {
    pool: Arc<ReadPool>,
    sv: Arc<SuperVersion>,
    values: Arc<ValueTableCache>,
    fill_cache: bool,
    /// Most reads in flight.
    depth: usize,
    /// Largest read-ahead window (`value_readahead_size`); 0: read exactly what records need,
    /// runs of adjacent records only.
    max_window: u64,
    /// The lazy iterator walking ahead; `None` before a start, and after it ran off the end or
    /// stopped at an error.
    ahead: Option<Box<DbIterator>>,
    /// Whether the entry `ahead` is on is not queued yet (right after a start).
    ahead_fresh: bool,
    /// The error the look-ahead stopped at, for the user's iterator once it has landed on
    /// every entry before it.
    stopped: Option<Error>,
    /// Entries walked by look-aheads already dropped (`entries_visited`).
    visited_before: u64,
    /// The entries walked and not yet landed on by the user's iterator, in order.
    pending: VecDeque<Pending>,
    /// Bytes of keys and stored values in `pending`.
    pending_bytes: u64,
    /// The windows kept, by table (a table's in the order they were read).
    windows: HashMap<u64, Vec<Window>>,
    /// Windows kept.
    window_count: usize,
    /// Windows that served their last pending record, oldest first: the ones to drop when
    /// room is needed (an entry is stale when its window has pending records again, or is
    /// gone).
    idle: VecDeque<WindowId>,
    /// Reads planned, waiting for a place in flight.
    queued: VecDeque<(Arc<ReadSlot>, Job)>,
    /// Reads handed to the pool (finished ones are dropped as they are seen).
    submitted: Vec<Arc<ReadSlot>>,
    /// Bytes held: windows kept, and values read on their own not yet taken.
    held: u64,
    /// Records of the next batch.
    batch: usize,
    /// Entries of the last batch walked.
    planned: usize,
    /// Entries the user's iterator took since the look-ahead started.
    taken: usize,
    next_window_id: u64,
}

impl ValuePrefetcher {
    pub(super) fn new(
        pool: Arc<ReadPool>,
        sv: Arc<SuperVersion>,
        values: Arc<ValueTableCache>,
        fill_cache: bool,
        depth: usize,
        max_window: u64,
    ) -> Self {
        ValuePrefetcher {
            pool,
            sv,
            values,
            fill_cache,
            depth: depth.max(1),
            max_window: max_window.min(MAX_PREFETCH_BYTES / 4),
            ahead: None,
            ahead_fresh: false,
            stopped: None,
            visited_before: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            windows: HashMap::new(),
            window_count: 0,
            idle: VecDeque::new(),
            queued: VecDeque::new(),
            submitted: Vec::new(),
            held: 0,
            batch: FIRST_BATCH,
            planned: 0,
            taken: 0,
            next_window_id: 0,
        }
    }

    /// Forgets everything looked ahead (the user's iterator moved other than forward). Waits
    /// for the reads in flight (`depth`, and those the iterator needed at once), so none
    /// outlives the iterator's interest.
    pub(super) fn reset(&mut self) {
        if let Some(ahead) = self.ahead.take() {
            self.retire(&ahead);
        }
        self.ahead_fresh = false;
        self.stopped = None;
        self.queued.clear();
        for slot in self.submitted.drain(..) {
            let _ = slot.wait();
        }
        self.pending.clear();
        self.pending_bytes = 0;
        self.windows.clear();
        self.window_count = 0;
        self.idle.clear();
        self.held = 0;
        self.batch = FIRST_BATCH;
        self.planned = 0;
        self.taken = 0;
    }

    /// Starts over from `ahead`, a lazy iterator just positioned by a seek: its entry is the
    /// first [`next_entry`](Self::next_entry) returns.
    pub(super) fn start(&mut self, ahead: DbIterator) {
        self.reset();
        if ahead.valid() {
            self.ahead = Some(Box::new(ahead));
            self.ahead_fresh = true;
        } else {
            self.retire(&ahead);
        }
        self.fill();
        self.pump();
    }

    /// The next entry of the walk, with its separated value when a read of the look-ahead
    /// brought it (`None`: an inline value, or one the caller must read itself: a read that
    /// failed or a pool that stopped). `None` at the end of the walk; the error the walk
    /// stopped at once every entry before it was returned.
    pub(super) fn next_entry(&mut self) -> Option<Result<(AheadEntry, Option<Vec<u8>>)>> {
        if self.pending.is_empty() {
            self.fill();
        }
        let Some(p) = self.pending.pop_front() else {
            return self.stopped.take().map(Err);
        };
        self.taken += 1;
        self.pending_bytes = self.pending_bytes.saturating_sub(p.entry.footprint());
        let value = match p.separated {
            Some((record, source)) => {
                let value = self.value_of(&record, source);
                if value.is_some() {
                    self.pool.served.fetch_add(1, Ordering::Relaxed);
                }
                value
            }
            None => None,
        };
        self.fill();
        self.pump();
        Some(Ok((p.entry, value)))
    }

    /// Entries the look-aheads of this iterator walked (the cost of its moves).
    pub(super) fn entries_visited(&self) -> u64 {
        self.visited_before + self.ahead.as_ref().map_or(0, |a| a.entries_visited())
    }

    /// Counts the walk of a look-ahead that goes.
    fn retire(&mut self, ahead: &DbIterator) {
        self.visited_before += ahead.entries_visited();
    }

    /// The value of a record taken off the queue, checked as the iterator's own read checks
    /// it; `None` when its read failed or the bytes are not that record.
    fn value_of(&mut self, record: &RecordRef, source: Source) -> Option<Vec<u8>> {
        let h = record.handle;
        match source {
            Source::Value(slot) => {
                self.held = self.held.saturating_sub(h.len);
                self.wait_for(&slot)
                    .map(|v| Arc::try_unwrap(v).unwrap_or_else(|v| v.to_vec()))
            }
            Source::Window {
                slot,
                start,
                window,
            } => {
                if let Some(w) = self
                    .windows
                    .get_mut(&window.table)
                    .and_then(|ws| ws.iter_mut().find(|w| w.id == window.id))
                {
                    w.refs = w.refs.saturating_sub(1);
                    if w.refs == 0 {
                        self.idle.push_back(window);
                        // Over the limits (a batch of scattered records makes a window each),
                        // the window goes at once; then fewer than MAX_WINDOWS are idle.
                        self.make_room(0);
                        self.prune_idle();
                    }
                }
                let bytes = self.wait_for(&slot)?;
                let from = usize::try_from(h.offset.checked_sub(start)?).ok()?;
                let to = from.checked_add(usize::try_from(h.len).ok()?)?;
                let decoded =
                    decode_record(bytes.get(from..to)?, "prefetched window", h.offset).ok()?;
                check_record(&h, decoded.key, decoded.seq, &record.user_key, record.seq).ok()?;
                Some(decoded.value.to_vec())
            }
        }
    }

    /// Waits for `slot`, handing it to the pool first if it is still queued (the iterator
    /// needs it now, whatever else is in flight).
    fn wait_for(&mut self, slot: &Arc<ReadSlot>) -> Option<Arc<Vec<u8>>> {
        if let Some(i) = self.queued.iter().position(|(s, _)| Arc::ptr_eq(s, slot)) {
            let (slot, job) = self.queued.remove(i).expect("found");
            self.submit(slot, job);
        }
        slot.wait()
    }

    /// Hands queued reads to the pool while fewer than `depth` are in flight.
    fn pump(&mut self) {
        self.submitted.retain(|s| s.running());
        while self.submitted.len() < self.depth {
            let Some((slot, job)) = self.queued.pop_front() else {
                return;
            };
            self.submit(slot, job);
        }
    }

    fn submit(&mut self, slot: Arc<ReadSlot>, job: Job) {
        *slot.answer.lock() = Answer::Running;
        if self.pool.submit(job) {
            self.submitted.push(slot);
        } else {
            slot.finish(None);
        }
    }

    /// Walks on while the queue runs short, in batches of entries (the reads of their
    /// separated values planned together); always at least one entry when the queue is empty (the
    /// user's iterator is waiting for it).
    fn fill(&mut self) {
        let Some(mut ahead) = self.ahead.take() else {
            return;
        };
        // The next batch is planned once half of the last one is taken (see `next_batch` for
        // its size), so a scan that stops walks and reads little past its end.
        while self.pending.is_empty()
            || (self.pending.len() <= self.planned / 2
                && self.held < MAX_PREFETCH_BYTES
                && self.pending_bytes < MAX_PREFETCH_BYTES)
        {
            let mut batch = Vec::new();
            let mut entries = 0;
            let mut bytes = 0;
            let mut ended = false;
            while entries < self.batch {
                if self.ahead_fresh {
                    self.ahead_fresh = false;
                } else if let Err(e) = ahead.next() {
                    self.stopped = Some(e);
                    ended = true;
                    break;
                }
                if !ahead.valid() {
                    ended = true;
                    break;
                }
                let (entry, record) = match ahead.ahead_entry() {
                    Ok(got) => got,
                    Err(e) => {
                        self.stopped = Some(e);
                        ended = true;
                        break;
                    }
                };
                entries += 1;
                self.pending_bytes += entry.footprint();
                let separated = record.map(|record| {
                    bytes += record.handle.len;
                    batch.push(self.pending.len());
                    // A placeholder, replaced when the batch is planned.
                    (record, Source::Value(ReadSlot::new()))
                });
                self.pending.push_back(Pending { entry, separated });
                if self.held + bytes >= MAX_PREFETCH_BYTES
                    || self.pending_bytes >= MAX_PREFETCH_BYTES
                {
                    break;
                }
            }
            self.planned = entries;
            let records = batch.len();
            let reads = self.plan(&batch);
            // Larger batches pay where records share reads; where nearly every record is a
            // read of its own (values scattered over many tables), a batch of twice the reads
            // in flight keeps the device busy, and a larger one only reads further past the
            // scan's end.
            let most = if reads * 2 <= records {
                MAX_BATCH
            } else {
                (2 * self.depth).clamp(FIRST_BATCH, MAX_BATCH)
            };
            self.batch = next_batch(self.taken, most);
            if ended {
                self.retire(&ahead);
                return;
            }
        }
        self.ahead = Some(ahead);
    }

    /// Plans the reads of one batch of separated records (positions in `pending`, in key
    /// order): each record joins a window that covers it, or a run of its table (see
    /// [`plan_runs`]) that becomes a new window.
    ///
    /// Returns the reads it queued.
    fn plan(&mut self, batch: &[usize]) -> usize {
        let mut reads = 0;
        let mut need: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for &i in batch {
            let record = &self.pending[i]
                .separated
                .as_ref()
                .expect("a separated entry")
                .0;
            let h = record.handle;
            let end = h.offset.saturating_add(h.len);
            let source = if let Some(w) = self
                .windows
                .get_mut(&h.file_number)
                .and_then(|ws| ws.iter_mut().find(|w| w.start <= h.offset && end <= w.end))
            {
                w.refs += 1;
                Source::Window {
                    slot: Arc::clone(&w.slot),
                    start: w.start,
                    window: WindowId {
                        table: h.file_number,
                        id: w.id,
                    },
                }
            } else if self.readable_directly(h.file_number) {
                // Every record in `need` joins a run below.
                need.entry(h.file_number).or_default().push(i);
                continue;
            } else {
                let record = record.clone();
                self.held += h.len;
                reads += 1;
                Source::Value(self.queue_value(&record))
            };
            self.set_source(i, source);
        }
        let max_run = self.max_window.max(GAP);
        let gap = if self.max_window > 0 { GAP } else { 0 };
        // The runs of every table, each with the pending records it serves, queued in the order
        // the scan needs them (by their first record), not by table.
        let mut runs: Vec<(u64, Run)> = Vec::new();
        for (table, members) in need {
            let at: Vec<(u64, u64)> = members
                .iter()
                .map(|&i| {
                    let h = self.pending[i]
                        .separated
                        .as_ref()
                        .expect("separated")
                        .0
                        .handle;
                    (h.offset, h.len)
                })
                .collect();
            for mut run in plan_runs(&at, gap, max_run) {
                for m in &mut run.members {
                    *m = members[*m];
                }
                runs.push((table, run));
            }
        }
        runs.sort_by_key(|(_, run)| run.members.iter().min().copied());
        for (table, run) in runs {
            let last = self
                .windows
                .get(&table)
                .and_then(|ws| {
                    ws.iter()
                        .filter(|w| w.end <= run.start)
                        .max_by_key(|w| w.end)
                })
                .map(|w| (w.end, w.end - w.start));
            let room = MAX_PREFETCH_BYTES.saturating_sub(self.held);
            let ahead = next_window(last, run.start, self.max_window).min(room);
            let end = run.end.max(run.start.saturating_add(ahead));
            self.make_room(end - run.start);
            let slot = self.queue_window(table, run.start, end, run.end);
            reads += 1;
            let id = self.next_window_id;
            self.next_window_id += 1;
            self.held += end - run.start;
            self.windows.entry(table).or_default().push(Window {
                id,
                start: run.start,
                end,
                slot: Arc::clone(&slot),
                refs: run.members.len(),
            });
            self.window_count += 1;
            for m in run.members {
                self.set_source(
                    m,
                    Source::Window {
                        slot: Arc::clone(&slot),
                        start: run.start,
                        window: WindowId { table, id },
                    },
                );
            }
        }
        reads
    }

    /// Sets where the value of the separated entry at `pending[i]` comes from.
    fn set_source(&mut self, i: usize, source: Source) {
        if let Some((_, s)) = self.pending[i].separated.as_mut() {
            *s = source;
        }
    }

    /// Whether `table` is read where a handle names it (live, or retired and still held by
    /// this state), not found through inheritance.
    fn readable_directly(&self, table: u64) -> bool {
        let values = self.sv.version.values();
        values
            .live(table)
            .or_else(|| values.retired_table(table))
            .is_some()
    }

    /// Keeps the idle queue within twice [`MAX_WINDOWS`] entries (fewer windows than that are
    /// idle after [`make_room`](Self::make_room)): a long scan would otherwise add an entry
    /// per window for good.
    fn prune_idle(&mut self) {
        if self.idle.len() <= 2 * MAX_WINDOWS {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        let windows = &self.windows;
        self.idle.retain(|i| {
            let idle = windows
                .get(&i.table)
                .is_some_and(|ws| ws.iter().any(|w| w.id == i.id && w.refs == 0));
            idle && seen.insert(*i)
        });
    }

    /// Drops the windows no pending record needs, those idle longest first, until `bytes` more
    /// fit in [`MAX_PREFETCH_BYTES`] and [`MAX_WINDOWS`] (or none is left to drop).
    fn make_room(&mut self, bytes: u64) {
        while self.held + bytes > MAX_PREFETCH_BYTES || self.window_count >= MAX_WINDOWS {
            let Some(idle) = self.idle.pop_front() else {
                return;
            };
            let Some(ws) = self.windows.get_mut(&idle.table) else {
                continue;
            };
            let Some(i) = ws.iter().position(|w| w.id == idle.id && w.refs == 0) else {
                continue;
            };
            let w = ws.remove(i);
            if ws.is_empty() {
                self.windows.remove(&idle.table);
            }
            self.window_count -= 1;
            self.held = self.held.saturating_sub(w.end - w.start);
        }
    }

    /// Queues the read of bytes `start..end` of `table` (at least `start..need`: the end of the
    /// table's records cuts only the read-ahead).
    fn queue_window(&mut self, table: u64, start: u64, end: u64, need: u64) -> Arc<ReadSlot> {
        let slot = ReadSlot::new();
        let sv = Arc::clone(&self.sv);
        let values = Arc::clone(&self.values);
        let mut answer = Answering {
            slot: Arc::clone(&slot),
            got: None,
        };
        let job: Job = Box::new(move || {
            let read = || -> Result<Vec<u8>> {
                let vs = sv.version.values();
                let v = vs
                    .live(table)
                    .or_else(|| vs.retired_table(table))
                    .ok_or_else(|| Error::corruption("prefetch", start, "table gone"))?;
                let t = values.get(v.number, v.file_size, IoClass::UserRead)?;
                let n = end.min(t.data_end()).max(need).saturating_sub(start);
                t.read_range(start, n, IoClass::UserRead)
            };
            answer.got = read().ok();
            // Let go of the state before answering: once the iterator has every answer, no
            // read of it pins a file (close must not leave files that only a straggling
            // reader still held).
            drop(sv);
            drop(values);
            drop(answer);
        });
        self.queued.push_back((Arc::clone(&slot), job));
        slot
    }

    /// Queues the read of one record's value, located through the version's value set
    /// (inheritance included).
    fn queue_value(&mut self, record: &RecordRef) -> Arc<ReadSlot> {
        let slot = ReadSlot::new();
        let sv = Arc::clone(&self.sv);
        let values = Arc::clone(&self.values);
        let fill_cache = self.fill_cache;
        let r = record.clone();
        let mut answer = Answering {
            slot: Arc::clone(&slot),
            got: None,
        };
        let job: Job = Box::new(move || {
            answer.got = read_value(&sv, &values, &r, fill_cache).ok();
            drop(sv);
            drop(values);
            drop(answer);
        });
        self.queued.push_back((Arc::clone(&slot), job));
        slot
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
    // The buffer is the record's alone: this moves the value to its front, as the cursor
    // keeps values in vectors.
    Ok(Vec::from(record.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(records: &[(u64, u64)], gap: u64, max_len: u64) -> Vec<(u64, u64, Vec<usize>)> {
        plan_runs(records, gap, max_len)
            .into_iter()
            .map(|r| (r.start, r.end, r.members))
            .collect()
    }

    #[test]
    fn records_close_together_share_a_read() {
        // Out of order on input (a batch in key order of a table that is not key-sorted).
        let at = [(10_000, 100), (0, 100), (100, 50), (40_000, 10)];
        assert_eq!(
            runs(&at, 16 << 10, 1 << 20),
            vec![(0, 10_100, vec![1, 2, 0]), (40_000, 40_010, vec![3])]
        );
        // No gap allowed: only adjacent records join.
        assert_eq!(
            runs(&at, 0, 1 << 20),
            vec![
                (0, 150, vec![1, 2]),
                (10_000, 10_100, vec![0]),
                (40_000, 40_010, vec![3])
            ]
        );
    }

    #[test]
    fn a_run_stops_at_its_largest_size() {
        let at = [(0, 600), (600, 600), (1200, 600), (5000, 2000)];
        assert_eq!(
            runs(&at, 16 << 10, 1500),
            vec![
                (0, 1200, vec![0, 1]),
                (1200, 1800, vec![2]),
                (5000, 7000, vec![3])
            ]
        );
    }

    #[test]
    fn batches_lead_the_scan_by_half_what_it_took() {
        assert_eq!(next_batch(0, MAX_BATCH), FIRST_BATCH);
        assert_eq!(next_batch(7, MAX_BATCH), FIRST_BATCH);
        assert_eq!(next_batch(100, MAX_BATCH), 50);
        assert_eq!(next_batch(100_000, MAX_BATCH), MAX_BATCH);
        // Scattered records: at most `most`, never below the first batch.
        assert_eq!(next_batch(100, 32), 32);
        assert_eq!(next_batch(100, 1), FIRST_BATCH);
    }

    #[test]
    fn windows_grow_only_while_a_table_is_read_forward() {
        let max = 1 << 20;
        // A table not read before, or read past the place: exactly what the records need.
        assert_eq!(next_window(None, 0, max), 0);
        assert_eq!(next_window(Some((50_000, 8_000)), 10_000, max), 0);
        // Far beyond the last window: a jump, not a forward read; and beyond the gap, though
        // within the window's size, the window was not used to its end.
        assert_eq!(next_window(Some((50_000, 8_000)), 200_000, max), 0);
        assert_eq!(
            next_window(Some((50_000, 1 << 20)), 50_000 + GAP + 1, max),
            0
        );
        // Forward, within reach: doubling from the first window to the largest.
        assert_eq!(
            next_window(Some((50_000, 8_000)), 52_000, max),
            FIRST_WINDOW
        );
        assert_eq!(
            next_window(Some((50_000, 64 << 10)), 50_000, max),
            128 << 10
        );
        assert_eq!(next_window(Some((50_000, 1 << 20)), 50_000, max), max);
        // Read-ahead off.
        assert_eq!(next_window(Some((50_000, 8_000)), 50_000, 0), 0);
    }
}
