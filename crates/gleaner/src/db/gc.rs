//! Running GC jobs: choosing and claiming victims, waiting out compactions that might still
//! drop handles into them uncounted, checking records against the index tree, and committing
//! outputs, inheritance records and late garbage in one manifest edit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Counters, DbInner, DbState};
use crate::error::{Error, Result};
use crate::filename::drop_file_name;
use crate::gc::Validity;
use crate::gc::{
    CommitStyle, GcJobStats, GcReport, GcVerdict, JobEnd, JobOracle, JobPlan, JobStart,
    MovedRecord, OracleEnv, PickContext, RecordRef, ValidityContext, VictimCandidate, micros_since,
    pacing::{Activity, Pacer},
    run_gc_job,
};
use crate::io::IoClass;
use crate::key::SeqNo;
use crate::table::ReadCtx;
use crate::value::DropFileReader;
use crate::value::StoredHandle;
use crate::version::{DropBlock, Garbage, Inheritor, VersionEdit};

/// Longest single wait before GC re-checks its conditions.
const GC_WAIT: Duration = Duration::from_millis(100);

/// Longest single sleep of a paced job: it looks for writes and shutdown this often.
const PACE_SLICE: Duration = Duration::from_millis(20);

/// Victims a GC job has claimed.
pub(super) struct GcClaim {
    victims: Vec<u64>,
    /// Compactions with a smaller id were running at claim time; the job waits for them.
    epoch: u64,
    /// A background worker's job, which yields to reads (`gc_read_yield_rate`); jobs run for
    /// `Db::run_gc` do not.
    paced: bool,
}

/// GC pacing while reads dominate, shared by the database's GC workers: one token bucket, so
/// `gc_read_yield_rate` bounds them together (the decision is `gc::pacing`).
pub(super) struct GcPacer {
    origin: Instant,
    pacer: Mutex<Pacer>,
}

impl GcClaim {
    /// The value tables claimed.
    pub(super) fn victims(&self) -> &[u64] {
        &self.victims
    }
}

impl GcPacer {
    /// Pacing at `rate` bytes a second; `None` for 0 (off).
    pub(super) fn new(rate: u64) -> Option<GcPacer> {
        Pacer::new(rate).map(|p| GcPacer {
            origin: Instant::now(),
            pacer: Mutex::new(p),
        })
    }
}

/// What `Db::run_gc` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcRunStats {
    /// Jobs run.
    pub jobs: u64,
    /// Summed figures of those jobs.
    pub totals: GcJobStats,
}

/// How far [`DbInner::start_gc_claim`] took a job.
pub(super) enum GcProgress {
    /// Committed, or failed; its claim is released. What `run_gc_claim` returns.
    Finished(Result<GcJobStats>),
    /// Its outputs are installed; [`DbInner::finish_gc_claim`] writes back and commits.
    WritingBack(PendingWriteBack),
}

/// A claimed write-back job whose outputs are installed (see [`DbInner::start_gc_claim`]).
pub(super) struct PendingWriteBack {
    /// Every victim claimed, live or not.
    victims: Vec<u64>,
    write_back: WriteBack,
}

impl PendingWriteBack {
    /// Every victim claimed.
    pub(super) fn victims(&self) -> &[u64] {
        &self.victims
    }
}

/// What is left of a write-back commit after its first edit.
struct WriteBack {
    /// The victims the job read (live when it started).
    victims: Vec<u64>,
    outputs: Vec<u64>,
    moved: Vec<MovedRecord>,
    stats: GcJobStats,
}

/// How `run_gc_job` left a job.
enum Collected {
    Committed(GcJobStats),
    Installed(WriteBack),
}

impl DbInner {
    /// Chooses victims with the policy and claims them (under the state lock, and the manifest
    /// lock, `_manifest`: a flush or compaction reads the claims and installs its edit under it,
    /// so the edit never deletes a table claimed after it read them, a table all of whose
    /// records it found garbage); `paced` as [`GcClaim::paced`]. A background worker's claim
    /// (`paced`) also skips the tables whose failed jobs it backs off from until their
    /// `retry_at`; `run_gc` (the caller asked, and hears the error) and inline work (its
    /// schedule must not depend on the clock) do not wait. Whoever claims, a job takes at most
    /// one table that failed before, so a table that fails every time cannot keep others that
    /// were picked with it from being collected.
    pub(super) fn claim_victims(
        &self,
        _manifest: &crate::version::VersionSet,
        st: &mut DbState,
        paced: bool,
    ) -> Option<GcClaim> {
        let values = st.version.values();
        // Entries of tables that left the version go: the map is bounded by the live tables.
        st.gc_backoff.retain(|n, _| values.live(*n).is_some());
        let now = Instant::now();
        let honours_backoff = paced && !self.opts.inline_background_work();
        // A table that expires whole soon is left to expire (no read, no rewrite) unless the
        // space throttle presses: collecting it would copy records that die anyway.
        let expiry_wait = self.opts.gc_expiry_wait_ms();
        let wait_for_expiry = expiry_wait > 0 && !self.space.as_ref().is_some_and(|s| s.pressed());
        let expires_by = self.time.now().saturating_add(expiry_wait);
        let candidates: Vec<VictimCandidate> = values
            .tables()
            .filter(|v| {
                (!wait_for_expiry || v.max_expiry.is_none_or(|e| e > expires_by))
                    && !st.gc_claimed.contains(&v.number)
                    && !st.gc_failed.contains(&v.number)
                    && !st.alias_pins.values().any(|p| p.contains(&v.number))
                    && (!honours_backoff
                        || st
                            .gc_backoff
                            .get(&v.number)
                            .is_none_or(|b| b.retry_at <= now))
            })
            .map(|v| {
                let g = values.garbage(v.number);
                VictimCandidate {
                    number: v.number,
                    file_size: v.file_size,
                    records: v.records,
                    record_bytes: v.record_bytes,
                    garbage_records: g.records,
                    garbage_bytes: g.bytes,
                    class: v.class,
                    smallest_seq: v.smallest_seq,
                    largest_seq: v.largest_seq,
                    policy_meta: v.policy_meta.as_ref(),
                    max_expiry: v.max_expiry,
                }
            })
            .collect();
        let ctx = PickContext {
            max_input: self.opts.gc_max_input_size(),
            garbage_ratio: self.space.as_ref().map(|s| s.gc_ratio()),
            latest_seq: self.visible_seq.load(std::sync::atomic::Ordering::Acquire),
        };
        let mut victims = self.policy.picker.pick(&candidates, &ctx);
        // Of the tables that failed before, only the one with the fewest failures in a row
        // (the first in the picker's order among equals) stays; the others wait for a job of
        // their own (any subset of the picker's choice is a valid job). Taking turns so, a
        // table that fails every time cannot starve one that failed beside it, even where no
        // clock orders them (`run_gc`, inline work).
        let retried = victims
            .iter()
            .filter_map(|n| st.gc_backoff.get(n).map(|b| (b.failures, *n)))
            .min_by_key(|(failures, _)| *failures)
            .map(|(_, n)| n);
        victims.retain(|n| !st.gc_backoff.contains_key(n) || Some(*n) == retried);
        if victims.is_empty() {
            return None;
        }
        st.gc_claimed.extend(victims.iter().copied());
        Some(GcClaim {
            victims,
            epoch: st.next_compaction_id,
            paced,
        })
    }

    /// Waits for victims to collect (background GC worker `worker`, which only runs jobs while
    /// its index is below the number of GC threads in force); `None` at shutdown.
    pub(super) fn wait_for_gc(&self, worker: u32) -> Option<GcClaim> {
        loop {
            // The space throttle's directive (threads, victim ratio) follows disk usage even
            // when no write asks.
            self.space_tick();
            // Snapshots released since the last look may let retired tables go, and a memtable
            // no write seals may have to be sealed for them.
            self.release_unreachable_tables();
            let recheck = self.seal_for_retired();
            let versions = self.versions.lock();
            let mut st = self.state.lock();
            if st.shutting_down {
                return None;
            }
            if st.bg_error.is_none()
                && worker < self.active_gc_threads()
                && let Some(claim) = self.claim_victims(&versions, &mut st, true)
            {
                return Some(claim);
            }
            // Not held while waiting: flushes and compactions need it to commit.
            drop(versions);
            let wait = if self.space.is_some() {
                GC_WAIT
            } else {
                super::IDLE_WAIT
            };
            let wait = recheck.map_or(wait, |r| wait.min(r));
            // Wake when the soonest backoff ends, so a retry is not later than it says.
            let now = Instant::now();
            let wait = st
                .gc_backoff
                .values()
                .filter(|b| b.retry_at > now)
                .map(|b| b.retry_at - now)
                .fold(wait, Duration::min);
            self.bg_cv.wait_for(&mut st, wait);
        }
    }

    /// Runs GC jobs on the caller's thread until the policy finds nothing more to collect.
    pub(super) fn run_gc_to_quiescence(&self) -> Result<GcRunStats> {
        // Tables that expired whole go first, without a job.
        self.drop_expired_tables()?;
        let mut run = GcRunStats::default();
        // Each job removes its victims from the live set; this bounds the loop even if a
        // policy kept choosing.
        let limit = self.state.lock().version.values().len() as u64 + 1;
        while run.jobs < limit {
            let claim = {
                let versions = self.versions.lock();
                let mut st = self.state.lock();
                st.check_usable()?;
                self.claim_victims(&versions, &mut st, false)
            };
            let Some(claim) = claim else { break };
            let stats = self.run_gc_claim(claim)?;
            run.jobs += 1;
            run.totals.add(&stats);
        }
        Ok(run)
    }

    /// Runs one claimed job and commits it; the claim is released either way.
    pub(super) fn run_gc_claim(&self, claim: GcClaim) -> Result<GcJobStats> {
        match self.start_gc_claim(claim) {
            GcProgress::Finished(result) => result,
            GcProgress::WritingBack(pending) => self.finish_gc_claim(pending),
        }
    }

    /// Runs one claimed job up to anything it writes through the write path: a job of commit
    /// style `Inheritance` to its end (the claim is then released); one of style `WriteBack`
    /// through the edit that installs its outputs, leaving the write-backs and the edit after
    /// them to [`DbInner::finish_gc_claim`]. Inline work runs this part under its turn and the
    /// rest after letting the turn go: the write path may run inline work to make room, which
    /// takes the turn, while it holds the WAL and leads the write queue.
    pub(super) fn start_gc_claim(&self, claim: GcClaim) -> GcProgress {
        let started = Instant::now();
        let job = self.run_gc_job(&claim);
        self.count_job_time(started);
        match job {
            Ok(Collected::Committed(stats)) => {
                GcProgress::Finished(self.end_gc_claim(&claim.victims, Ok(stats)))
            }
            Ok(Collected::Installed(write_back)) => GcProgress::WritingBack(PendingWriteBack {
                victims: claim.victims,
                write_back,
            }),
            Err(e) => GcProgress::Finished(self.end_gc_claim(&claim.victims, Err(e))),
        }
    }

    /// Writes back the new places of the records a job started by
    /// [`DbInner::start_gc_claim`] moved, commits it, and releases its claim.
    pub(super) fn finish_gc_claim(&self, pending: PendingWriteBack) -> Result<GcJobStats> {
        let started = Instant::now();
        let result = self.write_back_moved(pending.write_back);
        self.count_job_time(started);
        self.end_gc_claim(&pending.victims, result)
    }

    /// Adds the time since `started` to the GC jobs' wall-clock time (`GcStats::job_micros`).
    fn count_job_time(&self, started: Instant) {
        Counters::add(&self.counters.gc_job_micros, micros_since(started));
    }

    /// Releases the claim on a job's `victims` and records the job's `result`.
    fn end_gc_claim(&self, victims: &[u64], result: Result<GcJobStats>) -> Result<GcJobStats> {
        {
            // Under the manifest lock, as `release_outputs`: a flush or compaction that read
            // the claims before this must not record late drops for the victims after it.
            let _versions = self.versions.lock();
            let mut st = self.state.lock();
            for v in victims {
                st.gc_claimed.remove(v);
                st.late_drops.remove(v);
            }
            if let Err(e) = &result
                && e.is_corruption()
            {
                // A damaged victim would fail every job that picks it; leave it to `gleaner
                // check`.
                st.gc_failed.extend(victims.iter().copied());
            }
            st.record_gc_outcome(victims, &result, Instant::now());
        }
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
        let stats = result?;
        self.record_gc(&stats);
        self.policy.hooks.gc_finished(&GcReport {
            victims,
            stats: &stats,
        });
        // The job may have retired its victims; a failure here is the background error already.
        self.release_unreachable_tables();
        self.purge_obsolete_files();
        Ok(stats)
    }

    fn run_gc_job(&self, claim: &GcClaim) -> Result<Collected> {
        // Compactions that started before the claim count their drops into the victims as plain
        // garbage. Where the policy's checks could copy a record such a compaction drops or
        // moves (an oracle that judges from what compactions hand over at their commit, a
        // compaction that relocates), wait until they are done, so the checks see those drops.
        // An oracle reading the index tree alone finds those records dead as it is (docs/gc.md,
        // "Racing with compaction").
        {
            let waits = self.policy.jobs_wait_for_older_compactions();
            let started = Instant::now();
            let mut st = self.state.lock();
            while waits && st.running.iter().any(|r| r.id < claim.epoch) {
                st.check_usable()?;
                self.progress_cv.wait_for(&mut st, GC_WAIT);
            }
            if waits {
                Counters::add(
                    &self.counters.gc_compaction_wait_micros,
                    micros_since(started),
                );
            }
            st.check_usable()?;
        }
        if let Some(done) = self.collect(&claim.victims, claim.paced)? {
            return Ok(done);
        }
        // Two victims hold copies of one record (docs/gc.md, "Two copies of one record"): one
        // job per victim, so that the inheritance record of the victim whose copy is garbage
        // never leads to the other's copy (an entry still naming the garbage copy would then
        // resolve to it and count it twice). A table never holds a record twice. Only jobs that
        // commit by inheritance stop so, and they commit at once.
        Counters::add(&self.counters.gc_twin_restarts, 1);
        let mut total = GcJobStats::default();
        for v in &claim.victims {
            // One victim: no pair to stop at, and only an inheritance commit stops (it commits
            // at once).
            let Some(Collected::Committed(stats)) = self.collect(&[*v], claim.paced)? else {
                return Err(Error::corruption(
                    crate::filename::value_table_file_name(*v),
                    0,
                    "a GC job of one value table met one record twice",
                ));
            };
            total.add(&stats);
        }
        Ok(Collected::Committed(total))
    }

    /// Collects `victims` (claimed) in one job: commits it, or for a job that writes back,
    /// installs its outputs (see [`DbInner::start_gc_claim`]); `None` when the job met two
    /// copies of one record in two victims and stopped, leaving everything as it was.
    fn collect(&self, victims: &[u64], paced: bool) -> Result<Option<Collected>> {
        let sv = self.super_version.load_full();
        let version = Arc::clone(&sv.version);
        // A victim may have been deleted meanwhile: a compaction that was committing while the
        // claim was made can still have found it entirely garbage. There is nothing left to do
        // for such a table.
        let live: Vec<u64> = victims
            .iter()
            .copied()
            .filter(|n| version.values().live(*n).is_some())
            .collect();
        if live.is_empty() {
            return Ok(Some(Collected::Committed(GcJobStats::default())));
        }
        let mut victims = Vec::with_capacity(live.len());
        for n in &live {
            let meta = version.values().live(*n).expect("filtered to live tables");
            victims.push(
                self.values
                    .get(meta.number, meta.file_size, IoClass::GcRead)?,
            );
        }
        let durable_seq = version
            .all_files()
            .map(|(_, f)| f.largest_seq)
            .max()
            .unwrap_or(0);
        // Snapshots read after the version was pinned: later ones read above all of its tables
        // (and judge expiry no earlier than `readers.now()`).
        let readers = self.snapshots.reader_times(&self.time);
        let validity = ValidityContext::new(readers.sequences(), durable_seq);
        // Loaded after the super version, as a read does: every write the memtables hold at
        // or below it is in them already.
        let memtable_seq = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        let memtables = sv.memtables();
        drop(sv);
        let victims_garbage = live.iter().fold(Garbage::default(), |mut g, n| {
            let v = version.values().garbage(*n);
            g.records += v.records;
            g.bytes += v.bytes;
            g
        });
        // The oracle prepares the job's checks (reading, say, the victims' drop keys).
        let mut drop_files = DropFiles::new(self);
        let mut read_drop_block =
            |b: &DropBlock, each: &mut dyn FnMut(&[u8], SeqNo)| drop_files.read(b, each);
        let oracle = self.policy.oracle.begin_job(&mut JobStart {
            version: &version,
            victims: &live,
            garbage: victims_garbage,
            read_drop_block: &mut read_drop_block,
        })?;
        let mut outputs = self.value_output_config(IoClass::GcWrite);
        outputs.target_size = oracle.output_table_size(outputs.target_size);
        let env = OracleEnv {
            memtables: &memtables,
            memtable_seq,
            version: &version,
            tables: &self.tables,
            values: &self.values,
            validity: &validity,
            ctx: ReadCtx {
                class: IoClass::GcLookup,
                fill_cache: true,
                readahead: 0,
                readahead_ramp: false,
            },
        };
        // Each verdict goes to the policy's hooks too (what a learning policy trains on), with
        // the record's age in writes at the job's start.
        let latest = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
        outputs.now = latest;
        let hooks = self.policy.hooks.as_ref();
        // A record whose version has expired for every reader is dead whatever the oracle says
        // (asked all the same, so its accounting sees every record): no reader can read it.
        let expired = std::sync::atomic::AtomicU64::new(0);
        let is_live = |record: &RecordRef<'_>| {
            let mut verdict = oracle.verdict(record, &env)?;
            if verdict.validity == Validity::Live
                && readers.expired_for_all(record.seq, record.expiry)
            {
                expired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                verdict = Validity::Dead.into();
            }
            hooks.gc_verdict(&GcVerdict {
                table: record.location.file_number,
                key: record.user_key,
                seq: record.seq,
                validity: verdict.validity,
                age: latest.saturating_sub(record.seq),
                payload: verdict.payload.as_ref(),
            });
            Ok(verdict)
        };
        let plan = JobPlan {
            read_mode: self.policy.read_mode,
            router: Arc::clone(&self.policy.router),
            max_gap: self.opts.gc_read_gap(),
            record_moves: self.policy.commit == CommitStyle::WriteBack,
            // Inline work runs no threads of the engine's own (its schedule must replay).
            io_depth: if self.opts.inline_background_work() {
                1
            } else {
                self.opts.gc_io_depth() as usize
            },
            // The database's threads, started by the first job that needs them.
            io_pool: if self.opts.inline_background_work() || self.opts.gc_io_depth() <= 1 {
                None
            } else {
                self.gc_io.get()
            },
            // Only an inheritance commit must not collect two copies together; a write-back
            // commit retires its victims, and an entry naming a retired table's copy reads it
            // there, never the job's output.
            stop_at_twins: live.len() > 1 && self.policy.commit == CommitStyle::Inheritance,
        };
        let out = match run_gc_job(&victims, plan, &is_live, outputs, &|bytes| {
            self.gc_checkpoint(paced, bytes)
        })? {
            JobEnd::Done(done) => *done,
            JobEnd::MetTwins => return Ok(None),
        };
        drop(victims);
        drop(memtables);
        let mut out = out;
        out.stats.records_expired = expired.into_inner();
        // The commit makes those records unreadable: the database's time must not go back
        // before the time they were judged at.
        out.time_floor = (out.stats.records_expired > 0).then(|| readers.now());
        let outputs: Vec<u64> = out.tables.iter().map(|t| t.number).collect();
        out.carried_garbage = oracle.finish(&outputs)?;
        match self.policy.commit {
            CommitStyle::Inheritance => self
                .commit_gc(&live, out, oracle.as_ref())
                .map(Collected::Committed),
            CommitStyle::WriteBack => self.install_write_back(&live, out).map(|installed| {
                oracle.committed(&live, &installed.outputs);
                Collected::Installed(installed)
            }),
        }
        .map(Some)
    }

    /// Commits a job by writing the new places back into the index tree (`CommitStyle::WriteBack`):
    ///
    /// 1. one edit installs the outputs, marked as awaiting their write-back (their records are
    ///    referenced by nothing yet; should the database stop before step 3, the next open
    ///    counts what the written-back handles reference and sets their garbage from that);
    /// 2. each moved record's new handle is written through the write path, if the key's newest
    ///    version still names the record — checked by the write group's leader, so no other
    ///    write can come in between; a user write that got there first wins, and the copy is
    ///    garbage at once; then the WAL is synced, so every write-back, and every version the
    ///    checks saw, survives a crash;
    /// 3. one edit clears the marks, adds the copies that lost as garbage, and retires the
    ///    victims at the newest sequence number: versions naming them are all shadowed at or
    ///    below it, so they are released once no snapshot reads below it.
    ///
    /// This is step 1; [`DbInner::write_back_moved`] does steps 2 and 3, once the caller holds
    /// nothing the write path may need (the inline turn). Drops of the victims' handles are moot
    /// from step 3 on (a retired table keeps no account), and the outputs stay claimed until
    /// then, so no other job picks them.
    fn install_write_back(
        &self,
        victims: &[u64],
        out: crate::gc::GcJobOutput,
    ) -> Result<WriteBack> {
        let outputs: Vec<u64> = out.tables.iter().map(|t| t.number).collect();
        let installed = VersionEdit {
            write_back: outputs.iter().map(|n| (*n, true)).collect(),
            new_value_tables: out.tables,
            time_floor: out.time_floor,
            ..Default::default()
        };
        self.state.lock().gc_claimed.extend(outputs.iter().copied());
        if let Err(e) = self.log_gc_edit(installed, Some(out.pending)) {
            self.release_outputs(&outputs);
            return Err(e);
        }
        Ok(WriteBack {
            victims: victims.to_vec(),
            outputs,
            moved: out.moved,
            stats: out.stats,
        })
    }

    /// Steps 2 and 3 of a write-back commit (see [`DbInner::install_write_back`]); the claim on
    /// the outputs is released either way.
    fn write_back_moved(&self, job: WriteBack) -> Result<GcJobStats> {
        let result = (|| {
            let mut lost: BTreeMap<u64, Garbage> = BTreeMap::new();
            let mut written = 0u64;
            for m in &job.moved {
                // The payload of the entry it replaces is carried by the conditional write.
                // So are its expiry.
                let stored = StoredHandle {
                    location: m.to,
                    record_seq: Some(m.seq),
                    alias: false,
                    payload: None,
                    expiry: None,
                };
                if self.write_back(&m.key, m.from, &stored)? {
                    written += 1;
                } else {
                    let g = lost.entry(m.to.file_number).or_default();
                    g.records += 1;
                    g.bytes += m.to.len;
                }
            }
            self.sync_wal()?;
            Counters::add(&self.counters.gc_written_back, written);
            Counters::add(
                &self.counters.gc_write_back_conflicts,
                job.moved.len() as u64 - written,
            );
            let obsolete_seq = self.visible_seq.load(std::sync::atomic::Ordering::Acquire);
            let finished = VersionEdit {
                write_back: job.outputs.iter().map(|n| (*n, false)).collect(),
                value_garbage: lost.into_iter().collect(),
                retired_value_tables: job.victims.iter().map(|v| (*v, obsolete_seq)).collect(),
                ..Default::default()
            };
            self.log_gc_edit(finished, None)
        })();
        self.release_outputs(&job.outputs);
        result.map(|()| job.stats)
    }

    /// Ends the claim on a write-back job's outputs, and frees the late drops flushes and
    /// compactions recorded for them meanwhile (written-back handles dropped while the outputs
    /// were claimed). Nothing reads those: only an inheritance commit reads late drops, of its
    /// victims. Their garbage is counted already: `GarbageListener::settle` adds every drop it
    /// returns as late to its own edit too, which the flush or compaction committed.
    fn release_outputs(&self, outputs: &[u64]) {
        // Under the manifest lock, which a flush or compaction holds from reading the claims to
        // recording its late drops: none records one for these tables after this.
        let _versions = self.versions.lock();
        let mut st = self.state.lock();
        for n in outputs {
            st.gc_claimed.remove(n);
            st.late_drops.remove(n);
        }
    }

    /// Logs and installs a GC edit (keeping `pending`, the files it names, whether or not the
    /// write reports success: the edit may be on disk all the same). A failed manifest write
    /// makes the database read-only, as for every edit.
    fn log_gc_edit(
        &self,
        edit: VersionEdit,
        pending: Option<crate::compaction::PendingFiles>,
    ) -> Result<()> {
        let mut versions = self.versions.lock();
        // Closing: give up before the edit (the outputs are deleted as `pending` drops).
        self.check_open()?;
        self.apply_gc_edit(&mut versions, edit, pending)
    }

    /// Logs `edit` and installs the version it makes, under the manifest lock the caller holds.
    /// The files `pending` names are kept whether or not the write reports success (a failed
    /// sync may have put the edit on disk all the same, and a reopen then needs them; an edit
    /// that did not land leaves orphans the next open deletes). A failed manifest write makes
    /// the database read-only, as for every edit.
    pub(super) fn apply_gc_edit(
        &self,
        versions: &mut crate::version::VersionSet,
        edit: VersionEdit,
        pending: Option<crate::compaction::PendingFiles>,
    ) -> Result<()> {
        let result = versions.log_and_apply(edit);
        if let Some(p) = pending {
            p.keep();
        }
        let version = result.inspect_err(|e| self.set_bg_error(e.clone()))?;
        let mut st = self.state.lock();
        st.version = version;
        self.install_super_version(&st);
        Ok(())
    }

    /// Installs a job's outputs in one edit: outputs added, victims removed, inheritance
    /// recorded, and garbage that compactions found in copied records while the job ran moved
    /// onto the outputs.
    fn commit_gc(
        &self,
        victims: &[u64],
        out: crate::gc::GcJobOutput,
        oracle: &dyn JobOracle,
    ) -> Result<GcJobStats> {
        let children: Vec<Inheritor> = out
            .tables
            .iter()
            .map(|t| Inheritor {
                number: t.number,
                smallest_key: t.smallest_key.clone(),
                largest_key: t.largest_key.clone(),
            })
            .collect();
        let mut edit = VersionEdit {
            new_value_tables: out.tables,
            deleted_value_tables: victims.to_vec(),
            time_floor: out.time_floor,
            ..Default::default()
        };
        if !children.is_empty() {
            edit.inheritance = victims.iter().map(|v| (*v, children.clone())).collect();
        }
        let mut versions = self.versions.lock();
        // Closing: give up before the edit (the outputs are deleted as `out` drops).
        self.check_open()?;
        {
            // Holding the manifest lock: no compaction can commit more drops until this edit is in.
            let st = self.state.lock();
            let mut garbage: BTreeMap<u64, Garbage> = BTreeMap::new();
            for v in victims {
                for d in st.late_drops.get(v).into_iter().flatten() {
                    if let Some(t) = out.copied.get(&d.seq) {
                        let g = garbage.entry(*t).or_default();
                        g.records += 1;
                        g.bytes += d.len;
                    }
                }
            }
            // Garbage the job's oracle could not tell, copied into an output.
            if let Some((t, g)) = out.carried_garbage {
                let e = garbage.entry(t).or_default();
                e.records += g.records;
                e.bytes += g.bytes;
            }
            edit.value_garbage = garbage.into_iter().collect();
            // Drop blocks compactions attached to a victim after the job pinned its version
            // name records the job copied (its oracle did not know them as garbage); the
            // outputs take them over, as they take over the garbage counted above. The keys
            // are durable already; each output gets every such block (a key whose record is
            // in another output never matches one of its records).
            if let Some(read) = oracle.drop_blocks_read() {
                let values = versions.current().values();
                let mut late: Vec<DropBlock> = victims
                    .iter()
                    .flat_map(|v| values.drop_blocks(*v))
                    .map(|b| b.block)
                    .filter(|b| !read.contains(b))
                    .collect();
                late.sort_unstable();
                late.dedup();
                for t in &edit.new_value_tables {
                    edit.drop_blocks.extend(late.iter().map(|b| (t.number, *b)));
                }
            }
        }
        let outputs: Vec<u64> = edit.new_value_tables.iter().map(|t| t.number).collect();
        self.apply_gc_edit(&mut versions, edit, Some(out.pending))?;
        drop(versions);
        oracle.committed(victims, &outputs);
        Ok(out.stats)
    }

    /// A job's checkpoint before a batch of `bytes` of records: cancels it at shutdown, and
    /// paces a background job while reads dominate (`gc::pacing`), sleeping in slices so that a
    /// write, the reads stopping, or shutdown ends the wait within one.
    fn gc_checkpoint(&self, paced: bool, bytes: u64) -> Result<()> {
        let closed = || self.shutting_down.load(Ordering::Relaxed);
        if closed() {
            return Err(Error::Closed);
        }
        let Some(p) = self.gc_pacer.as_ref().filter(|_| paced) else {
            return Ok(());
        };
        let mut charge = bytes;
        loop {
            let activity = self.pacing_activity(p.origin.elapsed());
            let wait = p
                .pacer
                .lock()
                .charge(&activity, std::mem::take(&mut charge));
            if wait.is_zero() {
                return Ok(());
            }
            let start = Instant::now();
            std::thread::sleep(wait.min(PACE_SLICE));
            // Counted slice by slice, so `stats()` shows a long wait as it goes.
            Counters::add(&self.counters.gc_paced_micros, micros_since(start));
            if closed() {
                return Err(Error::Closed);
            }
        }
    }

    /// What GC pacing sees of the workload at `now`.
    pub(super) fn pacing_activity(&self, now: Duration) -> Activity {
        Activity {
            now,
            // The user's writes: the engine's own (handle updates that reads queue, GC
            // write-backs) must not make a read-only workload look like writes.
            writes: Counters::get(&self.counters.user_write_groups),
            reads: Counters::get(&self.counters.gets) + Counters::get(&self.counters.iterators),
            space_pressed: self.space.as_ref().is_some_and(|s| s.pressed()),
        }
    }

    /// Records a failed background GC job (of `victims`) for `stats()` and the log.
    pub(super) fn note_gc_error(&self, e: &Error, victims: &[u64]) {
        if matches!(e, Error::Closed) {
            return;
        }
        {
            // The count moves under the message's lock: a reader of `stats()` that sees the
            // count (read before the message) sees the message too.
            let mut last = self.last_gc_error.lock();
            *last = Some(e.to_string());
            Counters::add(&self.counters.gc_errors, 1);
        }
        let (damaged, backoff) = {
            let st = self.state.lock();
            let damaged = victims.iter().any(|v| st.gc_failed.contains(v));
            let backoff = victims
                .iter()
                .filter_map(|v| st.gc_backoff.get(v))
                .max_by_key(|b| b.retry_at)
                .copied();
            (damaged, backoff)
        };
        let retry = if damaged {
            "they are not collected again until the database is reopened".to_string()
        } else if self.opts.inline_background_work() {
            "retrying at the next point of inline work".to_string()
        } else if let Some(b) = backoff {
            let wait = b.retry_at.saturating_duration_since(Instant::now());
            format!(
                "retrying them in {:.1} s ({} failures in a row)",
                wait.as_secs_f64(),
                b.failures
            )
        } else {
            "retrying them".to_string()
        };
        log::warn!(
            "{}: GC job on value tables {victims:?} failed: {e}; {retry}",
            self.dir.display()
        );
    }

    fn record_gc(&self, s: &GcJobStats) {
        let c = &self.counters;
        Counters::add(&c.gc_jobs, 1);
        Counters::add(&c.gc_victims, s.victims);
        Counters::add(&c.gc_records_read, s.records_read);
        Counters::add(&c.gc_records_dropped, s.records_dropped);
        Counters::add(&c.gc_records_expired, s.records_expired);
        Counters::add(&c.gc_records_written, s.records_written);
        Counters::add(&c.gc_bytes_read, s.bytes_read);
        Counters::add(&c.gc_bytes_written, s.bytes_written);
        for (counter, bytes) in c.gc_bytes_by_class.iter().zip(s.bytes_written_by_class) {
            Counters::add(counter, bytes);
        }
        Counters::add(&c.gc_read_micros, s.read_micros);
        Counters::add(&c.gc_lookup_micros, s.lookup_micros);
        Counters::add(&c.gc_write_micros, s.write_micros);
    }
}

/// The drop files a GC job reads its victims' drop keys from, each opened once.
struct DropFiles<'a> {
    db: &'a DbInner,
    readers: BTreeMap<u64, DropFileReader>,
}

impl<'a> DropFiles<'a> {
    fn new(db: &'a DbInner) -> Self {
        DropFiles {
            db,
            readers: BTreeMap::new(),
        }
    }

    /// Reads block `b`, each drop key to `each`. The blocks are read under the I/O class of
    /// the victims' own metadata: they are part of reading the victims, not a lookup.
    fn read(&mut self, b: &DropBlock, each: &mut dyn FnMut(&[u8], SeqNo)) -> Result<()> {
        let reader = match self.readers.entry(b.file) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let name = drop_file_name(b.file);
                e.insert(DropFileReader::open(
                    self.db.fs.as_ref(),
                    &self.db.dir.join(&name),
                    &name,
                    Arc::clone(&self.db.io),
                )?)
            }
        };
        reader.read_block(&b.expected(), IoClass::GcIndexRead, each)
    }
}
