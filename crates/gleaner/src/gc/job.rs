//! The GC job: walk the victims in key order, keep the records still referenced, write them to
//! new value tables, and report what went where so the commit can record inheritance and move
//! late garbage onto the outputs.
//!
//! Two read modes (the policy chooses):
//! - **full** (TerarkDB): every record is read, value included, in large sequential chunks, and
//!   then checked;
//! - **lazy** (Scavenger §3.2): only the dense indexes are read first; each record is checked
//!   from its index entry, and only live records' values are read, adjacent live records
//!   coalesced into one read, runs of garbage skipped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::oracle::{RecordRef, Validity, Verdict};
use crate::value::HandlePayload;
use super::parallel::{GcIoPool, map_in_parallel};
use super::reader::{GC_READ_CHUNK, VictimReader, VictimRecord};
use crate::compaction::router::{MAX_VALUE_CLASSES, RouteOrigin, ValueRouter};
use crate::compaction::{ClassedValueOutputs, PendingFiles, ValueOutputConfig};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::value::{
    IndexEntry, OwnedRecord, ValueHandle, ValueIndexIter, ValueTable, decode_record,
};
use crate::version::ValueTableMeta;

/// How a GC job reads its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcReadMode {
    /// Every record, value included, in one sequential pass (TerarkDB).
    Full,
    /// The dense index first; only live records' values, adjacent ones coalesced (Scavenger's
    /// lazy read, §3.2).
    Lazy,
}

/// Figures of one GC job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct GcJobStats {
    /// Victim tables.
    pub victims: u64,
    /// Records examined (every record of the victims; in lazy mode from the index alone).
    pub records_read: u64,
    /// Records found to be garbage and dropped.
    pub records_dropped: u64,
    /// Of those, records an entry still named whose version had expired for every reader
    /// (the engine's verdict, [`crate::expiry`]).
    pub records_expired: u64,
    /// Records copied to the outputs.
    pub records_written: u64,
    /// Bytes of records (values) read from the victims.
    pub bytes_read: u64,
    /// Bytes of dense index blocks walked (from disk or the block cache).
    pub index_bytes_read: u64,
    /// Bytes of output tables written.
    pub bytes_written: u64,
    /// Of those, bytes per value class (the policy's router numbers and names the classes).
    pub bytes_written_by_class: [u64; MAX_VALUE_CLASSES],
    /// Microseconds reading victims (indexes and records).
    pub read_micros: u64,
    /// Microseconds checking validity.
    pub lookup_micros: u64,
    /// Microseconds writing outputs.
    pub write_micros: u64,
}

impl GcJobStats {
    /// Adds `other`'s figures to these.
    pub fn add(&mut self, other: &GcJobStats) {
        self.victims += other.victims;
        self.records_read += other.records_read;
        self.records_dropped += other.records_dropped;
        self.records_expired += other.records_expired;
        self.records_written += other.records_written;
        self.bytes_read += other.bytes_read;
        self.index_bytes_read += other.index_bytes_read;
        self.bytes_written += other.bytes_written;
        for (a, b) in self
            .bytes_written_by_class
            .iter_mut()
            .zip(other.bytes_written_by_class)
        {
            *a += b;
        }
        self.read_micros += other.read_micros;
        self.lookup_micros += other.lookup_micros;
        self.write_micros += other.write_micros;
    }
}

/// A record a job copied, and where the copy is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedRecord {
    /// The record's user key.
    pub key: Vec<u8>,
    /// The record's sequence number.
    pub seq: SeqNo,
    /// Where the job read it (in a victim).
    pub from: ValueHandle,
    /// The copy.
    pub to: ValueHandle,
}

/// What a finished job produced.
#[derive(Debug)]
pub struct GcJobOutput {
    /// The new value tables.
    pub tables: Vec<ValueTableMeta>,
    /// For every copied record (by its unique sequence number), the output table holding it.
    pub copied: HashMap<SeqNo, u64>,
    /// Every copied record with its copy, in key order, when the job was asked to record them
    /// (a write-back commit writes each new place into the index tree); empty otherwise.
    pub moved: Vec<MovedRecord>,
    /// Figures.
    pub stats: GcJobStats,
    /// The output files: keep them once the edit naming them is installed.
    pub pending: PendingFiles,
    /// Garbage the job copied because its oracle could not tell it, with the output holding
    /// it; the commit counts it there. Set by the job's oracle
    /// ([`JobOracle::finish`](super::oracle::JobOracle::finish)).
    pub carried_garbage: Option<(u64, crate::version::Garbage)>,
    /// The time the job judged expired records dead at, when it dropped some
    /// ([`GcJobStats::records_expired`]): its commit records it (manifest field 17).
    pub time_floor: Option<u64>,
}

/// Most bytes of live records a lazy read holds in memory before copying them: as much as a full
/// read's chunks for 16 victims.
const MAX_LAZY_WINDOW: u64 = 16 * GC_READ_CHUNK;

/// Records whose validity is checked together, up to `io_depth` lookups in flight; the job
/// checks for cancellation once per batch.
const CHECK_BATCH: usize = 256;

/// Validity checks per chunk handed to another thread, at least: many are answered from the
/// DropCache or the block cache in about a microsecond, about what the hand-over costs.
const MIN_CHECKS_PER_THREAD: usize = 16;

/// The validity check a job calls for every record it reads; called from several threads at
/// once when the job's `io_depth` is above 1.
pub type IsLive<'a> = dyn Fn(&RecordRef<'_>) -> Result<Verdict> + Sync + 'a;

/// Called by a job before each batch of records it checks, with the value bytes of the batch:
/// an error cancels the job (`Error::Closed` at shutdown), and it may sleep to pace the job
/// (`gc_read_yield_rate`).
pub type Checkpoint<'a> = dyn Fn(u64) -> Result<()> + 'a;

/// How a job runs: what the policy chose.
pub struct JobPlan {
    /// How victims are read.
    pub read_mode: GcReadMode,
    /// The output class of every live record.
    pub router: Arc<dyn ValueRouter>,
    /// A lazy read reads through garbage gaps of at most this many bytes between live records.
    pub max_gap: u64,
    /// Report every copied record with its copy ([`GcJobOutput::moved`]).
    pub record_moves: bool,
    /// Validity lookups, and reads of live records (lazy read), in flight at once (option
    /// `gc_io_depth`; 1 = one at a time, on the job's thread).
    pub io_depth: usize,
    /// The threads that run all but the first of those (the database's, shared by its jobs);
    /// `None` runs everything on the job's thread, whatever `io_depth` says.
    pub io_pool: Option<Arc<GcIoPool>>,
    /// Stop, writing nothing, at the first record two victims hold a copy each of
    /// ([`JobEnd::MetTwins`]). A job of several victims must: its outputs would hold the live
    /// copy, and the inheritance record of the victim whose copy is garbage would lead an entry
    /// still naming that copy to it (docs/gc.md, "Two copies of one record").
    pub stop_at_twins: bool,
}

/// How a job ended.
#[derive(Debug)]
pub enum JobEnd {
    /// It ran to the end.
    Done(Box<GcJobOutput>),
    /// Two victims hold copies of one record (see [`JobPlan::stop_at_twins`]): the job stopped,
    /// its outputs deleted; collect the victims one job each.
    MetTwins,
}

/// Runs one GC job over `victims` as `plan` says; `is_live` is the policy's validity check,
/// `checkpoint` the engine's say between batches. On any error, and when it stops at
/// [`JobEnd::MetTwins`], the outputs written so far are deleted (they are only kept once the
/// caller installs them).
///
/// Errors: reading a victim or a lookup fails; writing an output fails; one record found live
/// twice (corruption: a table holds a record once, and a job that may meet two copies stops).
pub fn run_gc_job(
    victims: &[Arc<ValueTable>],
    plan: JobPlan,
    is_live: &IsLive<'_>,
    outputs: ValueOutputConfig,
    checkpoint: &Checkpoint<'_>,
) -> Result<JobEnd> {
    let JobPlan {
        read_mode,
        router,
        max_gap,
        record_moves,
        io_depth,
        stop_at_twins,
        io_pool,
    } = plan;
    let mut job = Job {
        stats: GcJobStats {
            victims: victims.len() as u64,
            ..Default::default()
        },
        out: ClassedValueOutputs::new(outputs, router, RouteOrigin::Gc),
        copied: HashMap::new(),
        moved: record_moves.then(Vec::new),
        is_live,
        checkpoint,
        max_gap,
        io_depth: io_depth.max(1),
        stop_at_twins,
        met_twins: false,
        last_copied: None,
        io_pool,
    };
    match read_mode {
        GcReadMode::Full => job.run_full(victims)?,
        GcReadMode::Lazy => job.run_lazy(victims)?,
    }
    if job.met_twins {
        return Ok(JobEnd::MetTwins);
    }
    let Job {
        mut stats,
        out,
        copied,
        moved,
        ..
    } = job;
    let start = Instant::now();
    let done = out.finish()?;
    stats.write_micros += micros_since(start);
    stats.bytes_written_by_class = done.bytes_by_class;
    stats.bytes_written = done.bytes();
    Ok(JobEnd::Done(Box::new(GcJobOutput {
        tables: done.tables,
        copied,
        moved: moved.unwrap_or_default(),
        stats,
        pending: done.pending,
        carried_garbage: None,
        time_floor: None,
    })))
}

/// Microseconds since `start`, saturating.
pub(crate) fn micros_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The state one job threads through its passes.
struct Job<'a, 'b> {
    stats: GcJobStats,
    out: ClassedValueOutputs,
    copied: HashMap<SeqNo, u64>,
    moved: Option<Vec<MovedRecord>>,
    is_live: &'a IsLive<'b>,
    checkpoint: &'a Checkpoint<'b>,
    /// Lazy read: longest garbage gap read through rather than skipped.
    max_gap: u64,
    /// Lookups and reads in flight at once.
    io_depth: usize,
    /// Whether to stop at two copies of one record.
    stop_at_twins: bool,
    /// Set when the job met two copies of a record and stopped.
    met_twins: bool,
    /// The last record copied: two copies of one record are never both live.
    last_copied: Option<(Vec<u8>, SeqNo)>,
    /// Where all but the first of them run.
    io_pool: Option<Arc<GcIoPool>>,
}

/// Whether some head holds record `(key, seq)`: the merged stream meets it again next.
fn twin_ahead<'h>(
    mut heads: impl Iterator<Item = Option<(&'h [u8], SeqNo)>>,
    key: &[u8],
    seq: SeqNo,
) -> bool {
    heads.any(|h| h == Some((key, seq)))
}

/// Index of the smallest of `heads` in internal-key order (user key ascending, sequence
/// descending), if any.
fn smallest<'h>(heads: impl Iterator<Item = Option<(&'h [u8], SeqNo)>>) -> Option<usize> {
    heads
        .enumerate()
        .filter_map(|(i, h)| h.map(|h| (i, h)))
        .min_by(|(_, (ka, sa)), (_, (kb, sb))| ka.cmp(kb).then(sb.cmp(sa)))
        .map(|(i, _)| i)
}

impl Job<'_, '_> {
    /// Counts a batch of examined records, passes the engine's checkpoint (cancellation,
    /// pacing), and asks whether each is live (up to `io_depth` lookups in flight); the answers
    /// are in the batch's order: `None` for garbage, else the live version's payload as the
    /// oracle knew it.
    #[allow(clippy::type_complexity)]
    fn check_batch(&mut self, batch: &[RecordRef<'_>]) -> Result<Vec<Option<Option<HandlePayload>>>> {
        (self.checkpoint)(batch.iter().map(|r| r.location.len).sum())?;
        self.stats.records_read += batch.len() as u64;
        let start = Instant::now();
        let verdicts = map_in_parallel(
            self.io_pool.as_deref(),
            batch,
            self.io_depth,
            MIN_CHECKS_PER_THREAD,
            self.is_live,
        )?;
        self.stats.lookup_micros += micros_since(start);
        Ok(verdicts
            .into_iter()
            .map(|v| match v.validity {
                Validity::Live => Some(v.payload),
                Validity::Dead => {
                    self.stats.records_dropped += 1;
                    None
                }
            })
            .collect())
    }

    fn copy(
        &mut self,
        record: &OwnedRecord,
        from: ValueHandle,
        expiry: Option<u64>,
        payload: Option<&HandlePayload>,
    ) -> Result<()> {
        if self
            .last_copied
            .as_ref()
            .is_some_and(|(k, s)| *k == record.key && *s == record.seq)
        {
            return Err(Error::corruption(
                crate::filename::value_table_file_name(from.file_number),
                from.offset,
                format!("the record at sequence {} was found live twice", record.seq),
            ));
        }
        self.last_copied = Some((record.key.clone(), record.seq));
        let start = Instant::now();
        let handle = self
            .out
            .add(&record.key, record.seq, &record.value, expiry, payload)?;
        self.stats.write_micros += micros_since(start);
        self.copied.insert(record.seq, handle.file_number);
        if let Some(moved) = &mut self.moved {
            moved.push(MovedRecord {
                key: record.key.clone(),
                seq: record.seq,
                from,
                to: handle,
            });
        }
        self.stats.records_written += 1;
        Ok(())
    }

    /// Full read: every record of every victim, merged in key order, then checked.
    fn run_full(&mut self, victims: &[Arc<ValueTable>]) -> Result<()> {
        let mut readers: Vec<VictimReader> = victims
            .iter()
            .map(|t| VictimReader::new(Arc::clone(t)))
            .collect();
        let mut heads: Vec<Option<VictimRecord>> = Vec::with_capacity(readers.len());
        let start = Instant::now();
        for r in &mut readers {
            heads.push(r.next_record_at()?);
        }
        self.stats.read_micros += micros_since(start);
        // Records in key order with where they are, checked a batch at a time (at most
        // CHECK_BATCH records or GC_READ_CHUNK bytes of values held).
        let mut batch: Vec<(OwnedRecord, ValueHandle, Option<u64>)> = Vec::new();
        let mut batch_bytes = 0;
        while let Some(i) = smallest(
            heads
                .iter()
                .map(|h| h.as_ref().map(|h| (h.record.key.as_slice(), h.record.seq))),
        ) {
            let VictimRecord {
                offset,
                len,
                record,
                expiry,
            } = heads[i].take().expect("chosen head exists");
            let start = Instant::now();
            heads[i] = readers[i].next_record_at()?;
            self.stats.read_micros += micros_since(start);
            let at = ValueHandle {
                file_number: victims[i].file_number(),
                offset,
                len,
            };
            if self.stop_at_twins
                && twin_ahead(
                    heads
                        .iter()
                        .map(|h| h.as_ref().map(|h| (h.record.key.as_slice(), h.record.seq))),
                    &record.key,
                    record.seq,
                )
            {
                self.met_twins = true;
                return Ok(());
            }
            batch_bytes += len;
            batch.push((record, at, expiry));
            if batch.len() >= CHECK_BATCH || batch_bytes >= GC_READ_CHUNK {
                self.check_and_copy(&mut batch)?;
                batch_bytes = 0;
            }
        }
        self.check_and_copy(&mut batch)?;
        for r in &readers {
            self.stats.bytes_read += r.bytes_read;
            self.stats.index_bytes_read += r.index_bytes_read();
        }
        Ok(())
    }

    /// Checks a batch of fully read records and copies the live ones, in key order.
    fn check_and_copy(
        &mut self,
        batch: &mut Vec<(OwnedRecord, ValueHandle, Option<u64>)>,
    ) -> Result<()> {
        let refs: Vec<RecordRef<'_>> = batch
            .iter()
            .map(|(r, at, expiry)| RecordRef {
                user_key: &r.key,
                seq: r.seq,
                location: *at,
                expiry: *expiry,
            })
            .collect();
        let live = self.check_batch(&refs)?;
        drop(refs);
        for ((record, at, expiry), live) in batch.drain(..).zip(live) {
            if let Some(payload) = live {
                self.copy(&record, at, expiry, payload.as_ref())?;
            }
        }
        Ok(())
    }

    /// Lazy read: the dense indexes merged in key order, each entry checked; live entries
    /// gathered into windows of about [`GC_READ_CHUNK`] bytes per victim (at most
    /// [`MAX_LAZY_WINDOW`]) whose records are then read, per victim, in runs of adjacent
    /// records, and copied in key order.
    fn run_lazy(&mut self, victims: &[Arc<ValueTable>]) -> Result<()> {
        // Per victim, not per job: a window shared by all victims of a job would give each of
        // them reads of a fraction of a chunk, and small reads are what makes lazy read slow.
        let window_bytes = (GC_READ_CHUNK * victims.len() as u64).min(MAX_LAZY_WINDOW);
        let mut indexes: Vec<ValueIndexIter> = victims
            .iter()
            .map(|t| t.index_iter(IoClass::GcIndexRead))
            .collect();
        let mut heads: Vec<Option<IndexEntry>> = Vec::with_capacity(indexes.len());
        let start = Instant::now();
        for ix in &mut indexes {
            heads.push(ix.next().transpose()?);
        }
        self.stats.read_micros += micros_since(start);
        let mut window = Window::default();
        let mut batch: Vec<(usize, IndexEntry)> = Vec::with_capacity(CHECK_BATCH);
        loop {
            let next = smallest(
                heads
                    .iter()
                    .map(|h| h.as_ref().map(|e| (e.user_key.as_slice(), e.seq))),
            );
            if let Some(i) = next {
                let entry = heads[i].take().expect("chosen head exists");
                let start = Instant::now();
                heads[i] = indexes[i].next().transpose()?;
                self.stats.read_micros += micros_since(start);
                if self.stop_at_twins
                    && twin_ahead(
                        heads
                            .iter()
                            .map(|h| h.as_ref().map(|e| (e.user_key.as_slice(), e.seq))),
                        &entry.user_key,
                        entry.seq,
                    )
                {
                    self.met_twins = true;
                    return Ok(());
                }
                batch.push((i, entry));
                if batch.len() < CHECK_BATCH {
                    continue;
                }
            }
            let refs: Vec<RecordRef<'_>> = batch
                .iter()
                .map(|(i, e)| RecordRef {
                    user_key: &e.user_key,
                    seq: e.seq,
                    location: ValueHandle {
                        file_number: victims[*i].file_number(),
                        offset: e.offset,
                        len: e.len,
                    },
                    expiry: e.expiry,
                })
                .collect();
            let live = self.check_batch(&refs)?;
            drop(refs);
            for ((i, entry), live) in batch.drain(..).zip(live) {
                let Some(payload) = live else {
                    continue;
                };
                window.push(i, entry, payload);
                if window.bytes >= window_bytes {
                    self.copy_window(victims, &mut window)?;
                }
            }
            if next.is_none() {
                break;
            }
        }
        self.copy_window(victims, &mut window)?;
        self.stats.index_bytes_read += indexes.iter().map(ValueIndexIter::block_bytes).sum::<u64>();
        Ok(())
    }

    /// Reads the window's live records and copies them in key order.
    fn copy_window(&mut self, victims: &[Arc<ValueTable>], window: &mut Window) -> Result<()> {
        if window.entries.is_empty() {
            return Ok(());
        }
        let start = Instant::now();
        let mut records: Vec<Option<OwnedRecord>> = Vec::new();
        records.resize_with(window.entries.len(), || None);
        // Every victim's entries in the window, in file order: key order for a table written
        // in key order, sorted for a value segment (records in write order); each record goes
        // back to its entry's place below, so the copies stay in key order.
        let mine: Vec<Vec<usize>> = (0..victims.len())
            .map(|v| {
                let mut mine: Vec<usize> = (0..window.entries.len())
                    .filter(|&p| window.entries[p].0 == v)
                    .collect();
                if victims[v].in_write_order() {
                    mine.sort_unstable_by_key(|&p| window.entries[p].1.offset);
                }
                mine
            })
            .collect();
        let runs: Vec<(usize, &[usize])> = mine
            .iter()
            .enumerate()
            .flat_map(|(v, mine)| {
                adjacent_runs(mine, self.max_gap, |p| &window.entries[p].1)
                    .into_iter()
                    .map(move |run| (v, run))
            })
            .collect();
        let read = map_in_parallel(
            self.io_pool.as_deref(),
            &runs,
            self.io_depth,
            1,
            &|(v, run): &(usize, &[usize])| read_run(&victims[*v], &window.entries, run),
        )?;
        for ((_, run), (bytes, run_records)) in runs.iter().zip(read) {
            self.stats.bytes_read += bytes;
            for (&p, r) in run.iter().zip(run_records) {
                records[p] = Some(r);
            }
        }
        self.stats.read_micros += micros_since(start);
        for ((record, (v, entry)), payload) in records
            .into_iter()
            .zip(&window.entries)
            .zip(&window.payloads)
        {
            let record = record.expect("every window entry was read");
            let from = ValueHandle {
                file_number: victims[*v].file_number(),
                offset: entry.offset,
                len: entry.len,
            };
            self.copy(&record, from, entry.expiry, payload.as_ref())?;
        }
        window.entries.clear();
        window.payloads.clear();
        window.bytes = 0;
        Ok(())
    }
}

/// Live index entries waiting for their values, in key order, each with its victim.
#[derive(Default)]
struct Window {
    entries: Vec<(usize, IndexEntry)>,
    /// The payload each entry's live version has, as the oracle knew it.
    payloads: Vec<Option<HandlePayload>>,
    bytes: u64,
}

impl Window {
    fn push(&mut self, victim: usize, entry: IndexEntry, payload: Option<HandlePayload>) {
        self.bytes += entry.len;
        self.entries.push((victim, entry));
        self.payloads.push(payload);
    }
}

/// Splits `positions` (entries of one table in file order) into runs read with one read each:
/// a run continues across garbage of at most `max_gap` bytes between two live records (reading
/// a short gap costs less than another read) and ends at a longer one.
pub(super) fn adjacent_runs<'e>(
    positions: &[usize],
    max_gap: u64,
    entry: impl Fn(usize) -> &'e IndexEntry,
) -> Vec<&[usize]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for k in 1..=positions.len() {
        let split = k == positions.len() || {
            let prev = entry(positions[k - 1]);
            entry(positions[k]).offset > prev.offset + prev.len + max_gap
        };
        if split {
            runs.push(&positions[start..k]);
            start = k;
        }
    }
    runs
}

/// Reads one run of live records (and the short gaps between them) with a single read,
/// decodes each live record where its index entry places it and checks it against the entry.
/// Gap records are neither parsed nor kept. Returns the bytes read and the run's records, in
/// the run's order.
fn read_run(
    table: &ValueTable,
    entries: &[(usize, IndexEntry)],
    run: &[usize],
) -> Result<(u64, Vec<OwnedRecord>)> {
    let mut records = Vec::with_capacity(run.len());
    let first = &entries[run[0]].1;
    let last = &entries[run[run.len() - 1]].1;
    let len = last.offset + last.len - first.offset;
    let buf = table.read_range(first.offset, len, IoClass::GcRead)?;
    for &p in run {
        let e = &entries[p].1;
        // In bounds: entries of one table are in file order and the run ends with `last`.
        let at = (e.offset - first.offset) as usize;
        let r = decode_record(&buf[at..at + e.len as usize], table.file_name(), e.offset)?;
        if r.key != e.user_key.as_slice() || r.seq != e.seq {
            return Err(Error::corruption(
                table.file_name(),
                e.offset,
                "record does not match its dense-index entry",
            ));
        }
        records.push(r.into());
    }
    Ok((len, records))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicU64;

    use super::*;
    use crate::cache::ValueTableCache;
    use crate::compaction::router::SingleClass;
    use crate::io::{FaultFs, FileSystem, IoStats};
    use crate::table::Compression;

    fn output_config(fs: &FaultFs, next: &Arc<AtomicU64>) -> ValueOutputConfig {
        ValueOutputConfig {
            fs: Arc::new(fs.clone()),
            dir: PathBuf::from("/db"),
            stats: Arc::new(IoStats::default()),
            class: IoClass::GcWrite,
            next_file_number: Arc::clone(next),
            target_size: 1 << 20,
            index_compression: Compression::None,
            direct: false,
            policy: Arc::from("terarkdb"),
            expiry_group_ms: 0,
            now: 0,
            warm_cache: None,
        }
    }

    /// The value tables of `/db`, opened through a cache as GC opens them.
    fn table_cache(fs: &FaultFs) -> ValueTableCache {
        ValueTableCache::new(
            Arc::new(fs.clone()),
            PathBuf::from("/db"),
            Arc::new(IoStats::default()),
            None,
            16,
            false,
        )
    }

    /// One value table per list of `(key, seq)` records, each value naming its table, opened.
    fn victims(
        fs: &FaultFs,
        next: &Arc<AtomicU64>,
        tables: &[&[(&str, SeqNo)]],
    ) -> Vec<Arc<ValueTable>> {
        fs.create_dir_all(std::path::Path::new("/db")).expect("dir");
        let cache = table_cache(fs);
        tables
            .iter()
            .enumerate()
            .map(|(t, records)| {
                let mut out = ClassedValueOutputs::new(
                    output_config(fs, next),
                    Arc::new(SingleClass::new(0)),
                    RouteOrigin::Flush,
                );
                for (k, seq) in *records {
                    out.add(k.as_bytes(), *seq, format!("table {t}").as_bytes(), None, None)
                        .expect("add");
                }
                let done = out.finish().expect("finish");
                done.pending.keep();
                let meta = &done.tables[0];
                cache
                    .get(meta.number, meta.file_size, IoClass::GcRead)
                    .expect("open")
            })
            .collect()
    }

    fn plan(read_mode: GcReadMode, stop_at_twins: bool) -> JobPlan {
        JobPlan {
            read_mode,
            router: Arc::new(SingleClass::new(0)),
            max_gap: 0,
            record_moves: true,
            io_depth: 1,
            io_pool: None,
            stop_at_twins,
        }
    }

    /// Two victims holding a copy each of record `b@5` (a relocation's old copy and the new
    /// one): a job that must stop at them stops and leaves no output; one that goes on keeps
    /// the copy its check finds live, once; a record found live twice is an error, never two
    /// records under one internal key.
    #[test]
    fn two_copies_of_a_record_stop_the_job_or_one_is_kept() {
        for mode in [GcReadMode::Full, GcReadMode::Lazy] {
            let fs = FaultFs::new(3);
            let next = Arc::new(AtomicU64::new(10));
            let v = victims(&fs, &next, &[&[("a", 1), ("b", 5)], &[("b", 5), ("c", 2)]]);
            let (old, new) = (v[0].file_number(), v[1].file_number());
            let files = || {
                fs.list_dir(std::path::Path::new("/db"))
                    .expect("list")
                    .len()
            };
            let before = files();
            let ok = |_: u64| Ok(());
            let all_live = |_: &RecordRef<'_>| Ok(Validity::Live.into());
            let checked = Mutex::new(0);
            let counting = |_: &RecordRef<'_>| {
                *checked.lock().unwrap() += 1;
                Ok(Validity::Live.into())
            };
            let stopped = run_gc_job(
                &v,
                plan(mode, true),
                &counting,
                output_config(&fs, &next),
                &ok,
            )
            .expect("job");
            assert!(matches!(stopped, JobEnd::MetTwins), "{mode:?}");
            assert_eq!(files(), before, "{mode:?}: a stopped job leaves no output");
            assert!(*checked.lock().unwrap() <= 1, "{mode:?}: stopped at b");

            // Live: every record but the old table's copy of b.
            let exact = |r: &RecordRef<'_>| {
                Ok(if r.user_key == b"b" && r.location.file_number == old {
                    Validity::Dead
                } else {
                    Validity::Live
                }
                .into())
            };
            let out = run_gc_job(
                &v,
                plan(mode, false),
                &exact,
                output_config(&fs, &next),
                &ok,
            )
            .expect("job");
            let JobEnd::Done(out) = out else {
                panic!("{mode:?}: the job stopped")
            };
            assert_eq!(out.stats.records_written, 3, "{mode:?}");
            let b = out.moved.iter().find(|m| m.key == b"b").expect("b copied");
            assert_eq!(b.from.file_number, new, "{mode:?}: the live copy");
            drop(out);

            let err = run_gc_job(
                &v,
                plan(mode, false),
                &all_live,
                output_config(&fs, &next),
                &ok,
            )
            .expect_err("b live twice");
            assert!(err.is_corruption(), "{mode:?}: {err}");
            assert_eq!(files(), before, "{mode:?}: a failed job leaves no output");
        }
    }

    /// A value segment (records in write order) is collected in key order by either read:
    /// the lazy read sorts a window's records by offset before it coalesces them, and maps each
    /// back to its entry.
    #[test]
    fn a_value_segment_is_collected_in_key_order() {
        use crate::value::ValueTableBuilderOptions;
        use crate::value::segment::SegmentWriter;
        // Written out of key order; `d` twice. The values name their writes.
        let writes = [("m", 1), ("c", 2), ("x", 3), ("d", 4), ("a", 5), ("d", 6), ("q", 7)];
        for mode in [GcReadMode::Full, GcReadMode::Lazy] {
            let fs = FaultFs::new(5);
            fs.create_dir_all(std::path::Path::new("/db")).expect("dir");
            let number = 9;
            let path = PathBuf::from("/db").join(crate::filename::value_table_file_name(number));
            let file = fs
                .new_writable(&path, Default::default())
                .expect("create");
            let mut w = SegmentWriter::new(file).expect("segment");
            for (k, seq) in writes {
                w.append(k.as_bytes(), seq, format!("{k}@{seq}").as_bytes(), None)
                    .expect("append");
            }
            let sealed = w.seal(&ValueTableBuilderOptions::default()).expect("seal");
            let cache = table_cache(&fs);
            let victim = cache
                .get(number, sealed.file_size, IoClass::GcRead)
                .expect("open");
            // The older `d` and `q` are dead.
            let live = |r: &RecordRef<'_>| {
                Ok(if (r.user_key == b"d" && r.seq == 4) || r.user_key == b"q" {
                    Validity::Dead
                } else {
                    Validity::Live
                }
                .into())
            };
            let next = Arc::new(AtomicU64::new(10));
            let mut p = plan(mode, false);
            // Read through garbage between live records, as the default gap does.
            p.max_gap = 1 << 10;
            let out = run_gc_job(&[victim], p, &live, output_config(&fs, &next), &|_| Ok(()))
                .expect("job");
            let JobEnd::Done(out) = out else {
                panic!("{mode:?}: the job stopped")
            };
            let moved: Vec<(Vec<u8>, SeqNo)> =
                out.moved.iter().map(|m| (m.key.clone(), m.seq)).collect();
            let want: Vec<(Vec<u8>, SeqNo)> = [("a", 5), ("c", 2), ("d", 6), ("m", 1), ("x", 3)]
                .iter()
                .map(|(k, s)| (k.as_bytes().to_vec(), *s))
                .collect();
            assert_eq!(moved, want, "{mode:?}");
            assert_eq!(out.stats.records_written, 5, "{mode:?}");
            // Each copy holds the value written with it.
            let outputs = table_cache(&fs);
            for m in &out.moved {
                let meta = out
                    .tables
                    .iter()
                    .find(|t| t.number == m.to.file_number)
                    .expect("an output");
                let t = outputs
                    .get(meta.number, meta.file_size, IoClass::GcRead)
                    .expect("open output");
                let r = t
                    .read_record(m.to.offset, m.to.len, IoClass::GcRead)
                    .expect("read copy");
                let key = String::from_utf8(m.key.clone()).expect("utf8");
                assert_eq!(r.value, format!("{key}@{}", m.seq).into_bytes(), "{mode:?}");
            }
        }
    }

    fn entry(offset: u64, len: u64) -> IndexEntry {
        IndexEntry {
            user_key: Vec::new(),
            seq: 0,
            offset,
            len,
            expiry: None,
        }
    }

    #[test]
    fn runs_split_at_gaps_longer_than_the_limit() {
        let entries = [
            entry(0, 10),
            entry(10, 5),
            entry(40, 1),
            entry(41, 9),
            entry(100, 3),
        ];
        let positions = [0, 1, 2, 3, 4];
        let runs = adjacent_runs(&positions, 0, |p| &entries[p]);
        assert_eq!(runs, vec![&[0, 1][..], &[2, 3][..], &[4][..]]);
        assert!(adjacent_runs(&[], 0, |p| &entries[p]).is_empty());
        // Gaps of 25 (15..40) and 50 (50..100) bytes: read through the first only.
        let runs = adjacent_runs(&positions, 30, |p| &entries[p]);
        assert_eq!(runs, vec![&[0, 1, 2, 3][..], &[4][..]]);
        let runs = adjacent_runs(&positions, 50, |p| &entries[p]);
        assert_eq!(runs, vec![&[0, 1, 2, 3, 4][..]]);
    }
}
