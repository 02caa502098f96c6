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
//! A [`ValuePrefetcher`] walks a second, lazy iterator over the same state ahead of the user's
//! iterator, in batches that double in size (so a short scan does not read far past its end)
//! up to [`MAX_BATCH`] records where records share reads, or twice the reads in flight where
//! nearly every record is a read of its own:
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
//! It changes where a value's bytes come from, never which: the prefetched value is for the
//! same (key, sequence number, handle) the user's iterator landed on, compared before use, and
//! its record is decoded and verified (length, checksum, key and sequence number) exactly as the
//! iterator's own read verifies it. A prefetch that failed, or a record whose table a GC job
//! collected (found through inheritance, read on its own), is read by the iterator itself,
//! which meets any error at the entry that has it.

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
use crate::key::SeqNo;
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
/// Records in the first batch the look-ahead plans after a seek; each batch doubles it.
const FIRST_BATCH: usize = 4;
/// Most records in one batch.
const MAX_BATCH: usize = 512;
/// Most entries the look-ahead walks in one go (inline values and deletions count): a run of
/// entries without separated values does not send it to the end of the range.
const MAX_WALK: usize = 2 * MAX_BATCH;

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

/// A record the look-ahead found.
struct Pending {
    record: RecordRef,
    source: Source,
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

/// The look-ahead of one forward iterator.
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
    /// The lazy iterator walking ahead; `None` until the first separated value, and after it
    /// ran off the end.
    ahead: Option<Box<DbIterator>>,
    pending: VecDeque<Pending>,
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
    /// Records of the last batch planned.
    planned: usize,
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
            pending: VecDeque::new(),
            windows: HashMap::new(),
            window_count: 0,
            idle: VecDeque::new(),
            queued: VecDeque::new(),
            submitted: Vec::new(),
            held: 0,
            batch: FIRST_BATCH,
            planned: 0,
            next_window_id: 0,
        }
    }

    /// Forgets everything looked ahead (the user's iterator moved other than forward). Waits
    /// for the reads in flight (`depth`, and those the iterator needed at once), so none
    /// outlives the iterator's interest.
    pub(super) fn reset(&mut self) {
        self.ahead = None;
        self.queued.clear();
        for slot in self.submitted.drain(..) {
            let _ = slot.wait();
        }
        self.pending.clear();
        self.windows.clear();
        self.window_count = 0;
        self.idle.clear();
        self.held = 0;
        self.batch = FIRST_BATCH;
        self.planned = 0;
    }

    /// The value of `record`, where the user's iterator just landed moving forward: taken from
    /// a read of the look-ahead, or `None` when the caller must read it itself (the first value
    /// after a seek, a read that failed, a pool that has stopped). `start_ahead` builds the lazy
    /// look-ahead iterator positioned at the user's entry, when the look-ahead (re)starts there.
    pub(super) fn take(
        &mut self,
        record: &RecordRef,
        start_ahead: impl FnOnce() -> Result<DbIterator>,
    ) -> Option<Vec<u8>> {
        // An eager iterator reads every separated value it lands on, in order, so moving
        // forward it always lands on the front of the queue; anything else (a seek, a change
        // of direction, a queue that ran dry) starts the look-ahead over from here.
        let taken = if self.pending.front().is_some_and(|p| p.record == *record) {
            let p = self.pending.pop_front().expect("the front");
            self.value_of(p)
        } else {
            self.reset();
            // A look-ahead that cannot start (an error seeking it) only means no prefetching:
            // the user's iterator reads this value itself and meets any error where it is.
            match start_ahead() {
                Ok(ahead) if ahead.valid() => self.ahead = Some(Box::new(ahead)),
                _ => return None,
            }
            None
        };
        if taken.is_some() {
            self.pool.served.fetch_add(1, Ordering::Relaxed);
        }
        self.fill();
        self.pump();
        taken
    }

    /// The value of a record taken off the queue, checked as the iterator's own read checks
    /// it; `None` when its read failed or the bytes are not that record.
    fn value_of(&mut self, p: Pending) -> Option<Vec<u8>> {
        let h = p.record.handle;
        match p.source {
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
                let record =
                    decode_record(bytes.get(from..to)?, "prefetched window", h.offset).ok()?;
                check_record(&h, record.key, record.seq, &p.record.user_key, p.record.seq).ok()?;
                Some(record.value.to_vec())
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

    /// Plans batches of the records ahead while the queue runs short.
    fn fill(&mut self) {
        let Some(mut ahead) = self.ahead.take() else {
            return;
        };
        let mut walked = 0;
        // The next batch is planned once half of the last one is taken: the look-ahead stays
        // within one and a half batches of the scan, so a scan that stops reads little past
        // its end.
        while self.pending.len() <= self.planned / 2
            && self.held < MAX_PREFETCH_BYTES
            && walked < MAX_WALK
        {
            let mut batch = Vec::new();
            let mut bytes = 0;
            let mut ended = false;
            while batch.len() < self.batch && walked < MAX_WALK {
                // The look-ahead stops at the end, and at an error: the user's own iterator
                // meets that error at the entry that has it, not earlier here.
                walked += 1;
                if ahead.next().is_err() || !ahead.valid() {
                    ended = true;
                    break;
                }
                match ahead.separated_record() {
                    Ok(Some(record)) => {
                        bytes += record.handle.len;
                        batch.push(record);
                        if self.held + bytes >= MAX_PREFETCH_BYTES {
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(_) => {
                        ended = true;
                        break;
                    }
                }
            }
            self.planned = batch.len();
            let records = batch.len();
            let reads = self.plan(batch);
            // Larger batches pay where records share reads; where nearly every record is a
            // read of its own (values scattered over many tables), a batch of twice the reads
            // in flight keeps the device busy, and a larger one only reads further past the
            // scan's end.
            let most = if reads * 2 <= records {
                MAX_BATCH
            } else {
                (2 * self.depth).clamp(FIRST_BATCH, MAX_BATCH)
            };
            self.batch = (self.batch * 2).min(most);
            if ended {
                return;
            }
        }
        self.ahead = Some(ahead);
    }

    /// Queues the reads for one batch of records (in key order): each record joins a window
    /// that covers it, or a run of its table (see [`plan_runs`]) that becomes a new window.
    ///
    /// Returns the reads it queued.
    fn plan(&mut self, batch: Vec<RecordRef>) -> usize {
        let mut reads = 0;
        let mut need: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        let first = self.pending.len();
        for record in batch {
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
                need.entry(h.file_number)
                    .or_default()
                    .push(self.pending.len());
                // A placeholder, replaced below: every record in `need` joins a run.
                Source::Value(ReadSlot::new())
            } else {
                self.held += h.len;
                reads += 1;
                Source::Value(self.queue_value(&record))
            };
            self.pending.push_back(Pending { record, source });
        }
        debug_assert!(need.values().flatten().all(|&i| i >= first));
        let max_run = self.max_window.max(GAP);
        let gap = if self.max_window > 0 { GAP } else { 0 };
        // The runs of every table, each with the pending records it serves, queued in the order
        // the scan needs them (by their first record), not by table.
        let mut runs: Vec<(u64, Run)> = Vec::new();
        for (table, members) in need {
            let at: Vec<(u64, u64)> = members
                .iter()
                .map(|&i| {
                    let h = self.pending[i].record.handle;
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
                self.pending[m].source = Source::Window {
                    slot: Arc::clone(&slot),
                    start: run.start,
                    window: WindowId { table, id },
                };
            }
        }
        reads
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
    Ok(record.value)
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
