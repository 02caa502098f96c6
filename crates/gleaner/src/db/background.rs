//! Background work: flush workers, compaction workers, manual compactions, and deletion of
//! files nothing references any more.
//!
//! The scheduler is deliberately simple: each kind of job has its own small pool of threads
//! (`flush_threads`, `compaction_threads`; a GC pool joins them later) that wait on one condition
//! variable, claim work under the state lock, run it without locks, and install the result
//! through the manifest.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use std::collections::BTreeSet;

use super::IDLE_WAIT;
use super::migrate::MoveGate;
use super::{Counters, DbInner, DbState, ObsoleteFile};
use crate::cache::{TableCache, ValueCache};
use crate::compaction::stale_handles;
use crate::compaction::strategy::{ManualStep, PlanContext};
use crate::compaction::{
    CompactionPlan, CompactionReason, CompactionResult, DropCounter, DropFileConfig,
    DropKeyCollector, DropListener, FanOut, GarbageListener, JobStats, OutputConfig,
    RelocationSetup, RunningCompaction, Separation, ValueOutputConfig, WrittenDropKeys,
    flush_split, run_compaction,
};
use crate::error::{Error, Result};
use crate::expiry::ReaderTimes;
use crate::filename::{table_file_name, value_table_file_name, wal_file_name};
use crate::gc::CompactionContext;
use crate::io::IoClass;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table::{KeyTableLayout, TableBuilderOptions};
use crate::version::{FileKind, Version, VersionEdit};

/// Most immutable memtables one flush job writes together.
const MAX_MEMTABLES_PER_FLUSH: usize = 8;
/// Wait before retrying after the first failed compaction; it doubles with each further one.
const COMPACTION_RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest wait between compaction retries.
const COMPACTION_RETRY_MAX: Duration = Duration::from_secs(30);
/// Consecutive failed compactions after which the database turns read-only: with the waits
/// above about 25 s of retrying, so that writers stalled on L0 get an error rather than wait
/// forever.
const MAX_COMPACTION_FAILURES: u32 = 8;

/// The kinds of background worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkerKind {
    Flush,
    Compaction,
    /// The GC worker with this index; it runs jobs only while the index is below the number of
    /// GC threads in force (`gc_threads`, or the space throttle's directive).
    Gc(u32),
    /// Deletes obsolete tables and WALs, so no job's thread waits on `unlink`.
    Purge,
    /// Runs the hotness detector's ticks (partitioned trees).
    Hotness,
}

/// Key-table format options from database options.
pub(super) fn table_options(opts: &Options) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size: opts.block_size() as usize,
        restart_interval: opts.block_restart_interval() as usize,
        bloom_bits_per_key: opts.bloom_bits_per_key(),
        compression: opts.compression(),
        layout: if opts.index_decoupled_enabled() {
            KeyTableLayout::IndexDecoupled
        } else {
            KeyTableLayout::Mixed
        },
    }
}

impl DbInner {
    pub(super) fn value_output_config(&self, class: IoClass) -> ValueOutputConfig {
        ValueOutputConfig {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            stats: Arc::clone(&self.io),
            class,
            next_file_number: Arc::clone(&self.next_file_number),
            target_size: self.opts.value_table_size(),
            index_compression: self.opts.compression(),
            direct: self.opts.use_direct_io_for_background_writes(),
            policy: Arc::from(self.policy.name.as_str()),
            expiry_group_ms: self.opts.expiry_group_ms(),
            now: self.visible_seq.load(Ordering::Acquire),
            warm_cache: None,
        }
    }

    /// The value cache a flush or a write puts the values it separates into (option
    /// `prepopulate_value_cache`), if any.
    pub(super) fn warm_value_cache(&self) -> Option<Arc<ValueCache>> {
        self.value_cache
            .clone()
            .filter(|_| self.opts.prepopulate_value_cache())
    }

    /// Where a job of I/O class `class` writes its drop file (drop keys).
    pub(super) fn drop_file_config(&self, class: IoClass) -> DropFileConfig {
        DropFileConfig {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            stats: Arc::clone(&self.io),
            class,
            next_file_number: Arc::clone(&self.next_file_number),
        }
    }

    /// Counts a drop file a flush or compaction installed, and keeps it, unless the edit
    /// attached none of its blocks (every table it names was freed by that edit): nothing
    /// would ever name it, so it is deleted now.
    fn record_drop_keys(&self, written: Option<WrittenDropKeys>, unplaced: u64) {
        if let Some(w) = written {
            Counters::add(&self.counters.drop_keys_written, w.keys());
            Counters::add(&self.counters.drop_key_bytes_written, w.bytes);
            Counters::add(&self.counters.drop_blocks_unplaced, unplaced);
            if unplaced < w.blocks.len() as u64 {
                w.pending.keep();
            }
        }
    }

    pub(super) fn output_config(&self, class: IoClass, target_file_size: u64) -> OutputConfig {
        OutputConfig {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            stats: Arc::clone(&self.io),
            table: table_options(&self.opts),
            direct: self.opts.use_direct_io_for_background_writes(),
            class,
            next_file_number: Arc::clone(&self.next_file_number),
            target_file_size,
            max_grandparent_overlap: self.picker.max_grandparent_overlap(),
            input_readahead: self.opts.compaction_readahead_size(),
        }
    }

    /// GC worker threads to start: `gc_threads`, or `gc_threads_max` when space-aware
    /// throttling may call for more.
    fn gc_worker_count(&self) -> u32 {
        match &self.space {
            Some(_) => self.opts.gc_threads().max(self.opts.gc_threads_max()),
            None => self.opts.gc_threads(),
        }
    }

    /// GC threads allowed to run jobs now.
    pub(super) fn active_gc_threads(&self) -> u32 {
        self.space
            .as_ref()
            .map_or(self.opts.gc_threads(), |s| s.gc_threads())
    }

    /// Starts the background threads.
    pub(super) fn spawn_workers(self: &Arc<Self>) -> Result<()> {
        if self.opts.inline_background_work() {
            return Ok(());
        }
        let mut threads = self.threads.lock();
        let kinds = std::iter::repeat_n(WorkerKind::Flush, self.opts.flush_threads() as usize)
            .chain(std::iter::repeat_n(
                WorkerKind::Compaction,
                self.opts.compaction_threads() as usize,
            ))
            .chain((0..self.gc_worker_count()).map(WorkerKind::Gc))
            .chain(std::iter::once(WorkerKind::Purge))
            .chain(self.detector.is_some().then_some(WorkerKind::Hotness));
        for (i, kind) in kinds.enumerate() {
            let inner = Arc::clone(self);
            let name = match kind {
                WorkerKind::Gc(n) => format!("gleaner-gc-{n}"),
                _ => format!("gleaner-{kind:?}-{i}").to_lowercase(),
            };
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || inner.worker_loop(kind))
                .map_err(|e| Error::io("starting a background thread", e))?;
            threads.push(handle);
        }
        Ok(())
    }

    fn worker_loop(self: Arc<Self>, kind: WorkerKind) {
        loop {
            let work = match kind {
                WorkerKind::Flush => self.wait_for_flush().map(Work::Flush),
                WorkerKind::Compaction => self.wait_for_compaction(),
                WorkerKind::Gc(n) => self.wait_for_gc(n).map(Work::Gc),
                WorkerKind::Purge => return self.purge_loop(),
                WorkerKind::Hotness => return self.hotness_loop(),
            };
            let Some(work) = work else { return };
            self.run_work(work);
        }
    }

    /// The purge thread: deletes queued files as they come, until shutdown (`close` purges
    /// what is left after joining it).
    fn purge_loop(&self) {
        loop {
            {
                let mut queue = self.obsolete.queue.lock();
                while queue.is_empty() {
                    if self.shutting_down.load(Ordering::SeqCst) {
                        return;
                    }
                    self.obsolete.ready.wait_for(&mut queue, IDLE_WAIT);
                }
            }
            self.purge_obsolete_files();
        }
    }

    /// After a background job: files it made obsolete are deleted now with inline work (the
    /// caller's turn), and by the purge thread otherwise (already woken by the queue).
    fn purge_after_job(&self) {
        if self.opts.inline_background_work() {
            self.purge_obsolete_files();
        }
    }

    /// Runs one claimed job, records a failure where it belongs, and deletes the files it made
    /// obsolete. Returns whether the job succeeded.
    pub(super) fn run_work(&self, work: Work) -> bool {
        let result = match work {
            Work::Flush(mems) => self.run_flush(&mems),
            Work::Compaction(job) => {
                let r = self.run_compaction_plan(&job);
                self.finish_running(&job.running);
                match r {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        self.note_compaction_error(&e);
                        self.purge_after_job();
                        return false;
                    }
                }
            }
            // Its failures are recorded as compaction failures; writers never see them.
            Work::SurfaceHiddenGarbage => {
                self.surface_hidden_garbage();
                Ok(())
            }
            // A failed GC job leaves its victims as they were, and the workers back off from
            // them (`claim_victims`); only a failed manifest write (which `run_gc_claim`
            // reports itself) makes the database read-only.
            Work::Gc(claim) => {
                let victims = claim.victims().to_vec();
                return self.gc_job_ended(&victims, self.run_gc_claim(claim));
            }
        };
        let ok = result.is_ok();
        match result {
            Ok(()) | Err(Error::Closed) => {}
            Err(e) => self.set_bg_error(e),
        }
        // A flush may have moved the last write-backs below a retired table's obsolete
        // sequence number into key tables. A failure to log the release is the background error
        // already (a failed manifest write); closing just leaves it for the next open.
        self.release_unreachable_tables();
        self.purge_after_job();
        ok
    }

    /// Records how a GC job ended and deletes the files it made obsolete; returns whether it
    /// succeeded. A failed GC job leaves its victims as they were; only a failed manifest write
    /// (which the job reports itself) makes the database read-only.
    pub(super) fn gc_job_ended(
        &self,
        victims: &[u64],
        result: Result<crate::gc::GcJobStats>,
    ) -> bool {
        let ok = match result {
            Ok(_) => {
                // A failure to log a release is the background error already.
                self.release_unreachable_tables();
                true
            }
            Err(e) => {
                self.note_gc_error(&e, victims);
                false
            }
        };
        self.purge_after_job();
        ok
    }

    /// Claims unclaimed immutable memtables (oldest first, under the state lock), if any.
    pub(super) fn claim_flush(st: &mut DbState) -> Option<Vec<Arc<MemTable>>> {
        if st.bg_error.is_some()
            || st.move_gate.as_ref().is_some_and(MoveGate::pauses_flushes)
            || st.flush_claimed >= st.imm.len()
        {
            return None;
        }
        let from = st.flush_claimed;
        let to = st.imm.len().min(from + MAX_MEMTABLES_PER_FLUSH);
        st.flush_claimed = to;
        Some(st.imm.range(from..to).cloned().collect())
    }

    /// Claims the compaction the strategy chooses now (under the state lock), if any.
    pub(super) fn claim_compaction(&self, st: &mut DbState) -> Option<CompactionJob> {
        if st.bg_error.is_some() {
            return None;
        }
        // After a failure, wait before retrying. Inline work retries at its next fixed point
        // instead: a schedule that depends on the clock would not replay.
        if !self.opts.inline_background_work()
            && st
                .compaction_retry_at
                .is_some_and(|at| std::time::Instant::now() < at)
        {
            return None;
        }
        let mut stale_scan = st.stale_scan.take();
        let ctx = self.plan_context(st);
        let plan = self
            .strategy
            .choose(&st.version, &ctx)
            .into_plan()
            .or_else(|| {
                // Only when the tree's shape asks for nothing: the policy's bias (a policy's
                // forced GC) comes last, as in RocksDB.
                self.policy
                    .hooks
                    .marked_for_compaction(&st.version)
                    .into_iter()
                    .find_map(|n| self.strategy.forced(&st.version, &ctx, n))
            })
            .or_else(|| {
                // Then a key table whose handles mostly name collected tables.
                Self::stale_handle_tables(
                    &mut stale_scan,
                    &st.version,
                    self.opts.stale_handle_share(),
                )
                .iter()
                .find_map(|&n| self.strategy.forced(&st.version, &ctx, n))
                .map(|mut plan| {
                    plan.reason = CompactionReason::StaleHandles;
                    plan
                })
            });
        st.stale_scan = stale_scan;
        let plan = plan?;
        if MoveGate::blocks(st, &plan) {
            return None;
        }
        Some(self.register_compaction(st, plan))
    }

    /// The key tables of `version` worth a rewrite for their stale handles
    /// (`compaction::stale_handles`), scanned once per version and kept in `scan`.
    fn stale_handle_tables<'a>(
        scan: &'a mut Option<(std::sync::Weak<Version>, Vec<u64>)>,
        version: &Arc<Version>,
        share: f64,
    ) -> &'a [u64] {
        let current = scan
            .as_ref()
            .is_some_and(|(v, _)| std::sync::Weak::ptr_eq(v, &Arc::downgrade(version)));
        if !current {
            *scan = Some((
                Arc::downgrade(version),
                stale_handles::tables_with_stale_handles(version, share),
            ));
        }
        scan.as_ref().map_or(&[], |(_, tables)| tables.as_slice())
    }

    /// What the compaction strategy plans against, besides the version (under the state lock).
    fn plan_context<'a>(&'a self, st: &'a DbState) -> PlanContext<'a> {
        PlanContext {
            cfg: &self.picker,
            running: &st.running,
            pointers: &st.compact_pointers,
        }
    }

    /// Waits for unclaimed immutable memtables and claims them (oldest first); `None` at
    /// shutdown.
    fn wait_for_flush(&self) -> Option<Vec<Arc<MemTable>>> {
        let mut st = self.state.lock();
        loop {
            if st.shutting_down {
                return None;
            }
            if let Some(mems) = Self::claim_flush(&mut st) {
                return Some(mems);
            }
            self.bg_cv.wait_for(&mut st, IDLE_WAIT);
        }
    }

    /// Waits until the strategy finds a compaction and registers it as running, or a stopped
    /// writer asks for hidden garbage to be surfaced; `None` at shutdown.
    fn wait_for_compaction(&self) -> Option<Work> {
        let mut st = self.state.lock();
        loop {
            if st.shutting_down {
                return None;
            }
            if let Some(job) = self.claim_compaction(&mut st) {
                return Some(Work::Compaction(Box::new(job)));
            }
            if self
                .space
                .as_ref()
                .is_some_and(|s| s.take_surfacing_request())
            {
                return Some(Work::SurfaceHiddenGarbage);
            }
            self.bg_cv.wait_for(&mut st, IDLE_WAIT);
        }
    }

    /// Registers `plan` as running (under the state lock), capturing what the job needs to
    /// account garbage: its version and the tables GC jobs hold now.
    fn register_compaction(&self, st: &mut DbState, plan: CompactionPlan) -> CompactionJob {
        let id = st.next_compaction_id;
        st.next_compaction_id += 1;
        let running = plan.running(id);
        st.running.push(running.clone());
        CompactionJob {
            plan,
            running,
            version: Arc::clone(&st.version),
            claimed: st.gc_claimed.clone(),
            // Taken here, under the state lock, not when the job starts running: a GC job that
            // claims a table after this point, and whose jobs do not wait for this compaction
            // (`GarbageListener::overtaken_by_gc`), must judge every record this compaction
            // drops dead. It takes its own readers after its claim, so at a time no earlier
            // and with no snapshot older than these. Taken when the job ran, a version that
            // expired in between was dropped here but copied by the GC job, and its copy
            // stayed live in the accounting with nothing naming it (model test, one set in
            // a few thousand).
            readers: self.snapshots.reader_times(&self.time),
        }
    }

    /// Records a failed compaction. A failure before the manifest edit changed nothing (the
    /// inputs stay, the outputs are deleted), so the database stays writable and compaction
    /// retries after a wait that doubles with each consecutive failure; after
    /// [`MAX_COMPACTION_FAILURES`] the failure becomes the background error. A failed manifest
    /// write has already made the database read-only (`run_compaction_plan`).
    fn note_compaction_error(&self, e: &Error) {
        if matches!(e, Error::Closed) || self.state.lock().bg_error.is_some() {
            // Closing, or already read-only (a failed manifest write, say).
            return;
        }
        {
            // The count moves under the message's lock: a reader of `stats()` that sees the
            // count (read before the message) sees the message too.
            let mut last = self.last_compaction_error.lock();
            *last = Some(e.to_string());
            Counters::add(&self.counters.compaction_errors, 1);
        }
        let mut st = self.state.lock();
        st.compaction_failures = st.compaction_failures.saturating_add(1);
        let doublings = (st.compaction_failures - 1).min(16);
        let wait = COMPACTION_RETRY_FIRST
            .saturating_mul(1 << doublings)
            .min(COMPACTION_RETRY_MAX);
        st.compaction_retry_at = Some(std::time::Instant::now() + wait);
        let failures = st.compaction_failures;
        let give_up = failures >= MAX_COMPACTION_FAILURES;
        drop(st);
        if give_up {
            log::warn!(
                "{}: compaction failed: {e}; {failures} failures in a row, giving up",
                self.dir.display()
            );
        } else {
            log::warn!(
                "{}: compaction failed: {e}; retrying in {:.1} s ({failures} failures in a row)",
                self.dir.display(),
                wait.as_secs_f64()
            );
        }
        if give_up {
            self.set_bg_error(e.clone());
        }
    }

    fn finish_running(&self, entry: &RunningCompaction) {
        let mut st = self.state.lock();
        if let Some(i) = st.running.iter().position(|r| r == entry) {
            st.running.remove(i);
        }
        drop(st);
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
    }

    /// Flushes claimed memtables to L0 and installs the tables, in memtable order.
    fn run_flush(&self, mems: &[Arc<MemTable>]) -> Result<()> {
        self.prepare_segment_files();
        let readers = self.snapshots.reader_times(&self.time);
        let judged_at = readers.now();
        let mut drops = DropCounter::default();
        let out = || self.output_config(IoClass::Flush, u64::MAX);
        let separation = || {
            Some(Separation {
                values: ValueOutputConfig {
                    warm_cache: self.warm_value_cache(),
                    ..self.value_output_config(IoClass::Flush)
                },
                router: Arc::clone(&self.policy.router),
                origin: crate::gc::RouteOrigin::Flush,
            })
        };
        // Memtables hold handles only where a GC wrote them back (write-back commits); a flush that
        // drops one (the key was overwritten again before the flush) makes its record garbage,
        // counted here as a compaction counts its drops, each in detail (a GC job does not wait
        // for a flush: see `GarbageListener::for_flush`).
        // The memtables' value segments (`separate_at=write`): sealed into value tables the
        // edit installs, and the garbage of the handles into them the flush drops counted there.
        let (mut garbage, sealing) = {
            let st = self.state.lock();
            let sealing: Vec<_> = mems
                .iter()
                .filter_map(|m| st.sealing.get(&m.wal_number()).cloned())
                .collect();
            let numbers: Vec<u64> = sealing
                .iter()
                .flat_map(|s| s.lock().numbers().collect::<Vec<_>>())
                .collect();
            let garbage = GarbageListener::new(
                Arc::clone(&st.version),
                Arc::clone(&self.values),
                st.gc_claimed.clone(),
            )
            .for_flush()
            .sealing(numbers);
            (garbage, sealing)
        };
        // Drop keys, if the policy asks: the identities of the records whose handles the flush drops.
        let mut drop_keys = self
            .policy
            .hooks
            .records_drop_keys()
            .then(DropKeyCollector::default);
        let flush_version = Arc::clone(&self.state.lock().version);
        // The routing of the version the edit installs into: nothing changes a routing while
        // a flush runs (the jobs that move keys between partitions exclude flushes).
        let routing = flush_version
            .is_partitioned()
            .then(|| Arc::new(flush_version.routing().clone()));
        let ctx = flush_context(&flush_version, &self.tables);
        let (done, stats) = {
            // Versions a flush drops were overwritten while in the memtable; the policy may
            // want to hear of them (a cache of hot keys, say).
            let mut hooks = self.policy.hooks.begin(&ctx);
            let mut listeners: Vec<&mut dyn DropListener> = vec![&mut drops, &mut garbage];
            if let Some(h) = hooks.as_mut() {
                listeners.push(h.as_mut());
            }
            if let Some(k) = drop_keys.as_mut() {
                listeners.push(k);
            }
            flush_split(
                mems,
                readers,
                out,
                separation,
                &mut FanOut(listeners),
                !self.policy.updates_handles_on_read,
                routing,
            )?
        };
        let written = match drop_keys {
            Some(k) => k.write(&self.drop_file_config(IoClass::Flush))?,
            None => None,
        };
        let mut sealed = Vec::new();
        if let Some(sink) = &self.segment_sink {
            let now = mems.iter().map(|m| m.largest_seq()).max().unwrap_or(0);
            for s in &sealing {
                sealed.extend(s.lock().seal(sink, now)?);
            }
        }
        // Install strictly in memtable order: wait until ours are the oldest.
        {
            let mut st = self.state.lock();
            while !st.imm.front().is_some_and(|m| Arc::ptr_eq(m, &mems[0])) {
                if st.shutting_down || st.bg_error.is_some() {
                    return Err(Error::Closed);
                }
                self.progress_cv.wait_for(&mut st, IDLE_WAIT);
            }
        }
        let mut versions = self.versions.lock();
        // Closing: give up before the edit (the tables are deleted as `done` drops; the WAL
        // still holds their data), so nothing is committed while `close` waits for this job.
        self.check_open()?;
        let log_number = {
            let st = self.state.lock();
            st.imm
                .get(mems.len())
                .map_or(st.mem.wal_number(), |m| m.wal_number())
        };
        // The edit makes that log the oldest one needed, so it must be found after a power
        // loss; a memtable switch created it without syncing the directory. The tables this
        // flush created were made durable by a directory sync after that switch.
        self.wal_entry_durable(log_number, !done.pending.is_empty())?;
        let mut edit = VersionEdit {
            log_number: Some(log_number),
            last_sequence: Some(self.visible_seq.load(Ordering::Acquire)),
            new_tables: done.key_tables,
            new_value_tables: done.value_tables.into_iter().chain(sealed).collect(),
            // It dropped expired versions: a later open must not judge them, nor the versions
            // expiring as early still in other tables, at an earlier time.
            time_floor: (stats.dropped.expired > 0).then_some(judged_at),
            ..Default::default()
        };
        // As a compaction's: placed against the version the edit applies to, under the manifest
        // lock; an error placing a drop fails the flush before its edit.
        let claimed_now = self.state.lock().gc_claimed.clone();
        let settled =
            garbage.settle(versions.current(), &claimed_now, &mut edit, self.time.now())?;
        let unplaced = written
            .as_ref()
            .map_or(0, |w| w.attach(versions.current().values(), &mut edit));
        let freed = freed_tables(versions.current(), &edit);
        // A failed manifest write may still have put the edit on disk (a failed sync, say), and
        // a reopen then needs the tables it names: keep them either way. An edit that did not
        // land leaves them orphans, which the next open deletes.
        let result = versions.log_and_apply(edit);
        done.pending.keep();
        self.record_drop_keys(written, unplaced);
        let version = result?;
        Counters::add(&self.counters.unresolved_drops, settled.unresolved);
        Counters::add(
            &self.counters.drops_reclaimed_early,
            settled.reclaimed_early,
        );
        Counters::add(&self.counters.drops_into_retired, settled.retired);
        {
            let mut st = self.state.lock();
            for (table, drop) in settled.late {
                st.late_drops.entry(table).or_default().push(drop);
            }
            for m in mems {
                let front = st.imm.pop_front();
                debug_assert!(front.is_some_and(|f| Arc::ptr_eq(&f, m)));
                // Its aliases are in a key table now, whose references keep what they name
                // reachable.
                st.alias_pins.remove(&m.wal_number());
                // Its segments are value tables of the version now.
                st.sealing.remove(&m.wal_number());
            }
            st.flush_claimed -= mems.len();
            st.version = version;
            self.install_super_version(&st);
        }
        drop(versions);
        self.bg_cv.notify_all();
        self.progress_cv.notify_all();
        self.policy.hooks.compaction_finished(&ctx, &stats);
        if !freed.is_empty() {
            self.policy.hooks.value_tables_freed(&freed);
        }
        Counters::add(&self.counters.flushes, 1);
        Counters::add(&self.counters.flush_bytes, stats.output_bytes);
        Counters::add(&self.counters.flush_micros, stats.micros);
        Counters::add(&self.counters.dropped_shadowed, stats.dropped.shadowed);
        Counters::add(
            &self.counters.dropped_range_deleted,
            stats.dropped.range_deleted,
        );
        Counters::add(&self.counters.dropped_expired, stats.dropped.expired);
        Counters::add(&self.counters.aliases_dropped, stats.aliases_dropped);
        for m in mems {
            // The WAL's contents are now in a table and the manifest no longer needs it.
            self.obsolete.push(ObsoleteFile::Wal(m.wal_number()));
        }
        // Close the logs a switch kept unsynced that are obsolete now, so their deletion frees
        // the space; dropped after the lock, so a sync waits for none of it.
        let closed = self.sealed_logs.lock().prune(log_number);
        drop(closed);
        self.prepare_segment_files();
        Ok(())
    }

    /// Creates files for the next memtables' value segments (`separate_at=write`) here, on a
    /// flush's thread, rather than in a write group. A failure only leaves the writes to create
    /// their own.
    fn prepare_segment_files(&self) {
        if let Some(sink) = &self.segment_sink
            && let Err(e) = sink.prepare()
        {
            log::warn!("{}: creating value segment files: {e}", self.dir.display());
        }
    }

    /// Runs a registered compaction and installs its result, with the garbage it created.
    fn run_compaction_plan(&self, job: &CompactionJob) -> Result<()> {
        // A policy may have a trivial move rewritten, so its entries pass its hooks.
        let rewrite;
        let plan = if job.plan.trivial_move && {
            let (lo, hi) = job.plan.user_range();
            let named = job.plan.named_value_tables();
            !self.policy.hooks.allows_trivial_move(&compaction_context(
                &job.version,
                &self.tables,
                &job.plan,
                (&lo, &hi),
                &named,
            ))
        } {
            rewrite = CompactionPlan {
                trivial_move: false,
                ..job.plan.clone()
            };
            &rewrite
        } else {
            &job.plan
        };
        // Read when the plan was fixed (`register_compaction`): a snapshot taken later sees only
        // data newer than every input, which compaction keeps anyway.
        let readers = job.readers.clone();
        let judged_at = readers.now();
        let mut garbage = GarbageListener::new(
            Arc::clone(&job.version),
            Arc::clone(&self.values),
            job.claimed.clone(),
        )
        .overtaken_by_gc(!self.policy.jobs_wait_for_older_compactions());
        // A merge whose output stays in L0 writes one table: in L0 each table is a run.
        let target = if plan.one_output_table {
            u64::MAX
        } else {
            self.opts.key_table_size()
        };
        let out = self.output_config(IoClass::CompactionWrite, target);
        // The values the policy's kept-entry hook relocates go to value tables of
        // the compaction's own, where its router places them; only a policy that says it
        // relocates may (its GC jobs wait for older compactions:
        // `PolicySet::jobs_wait_for_older_compactions`).
        let relocation = self
            .policy
            .hooks
            .relocates_values()
            .then(|| RelocationSetup {
                values: self.value_output_config(IoClass::CompactionWrite),
                router: Arc::clone(&self.policy.router),
                claimed: job.claimed.clone(),
            });
        // Drop keys, if the policy asks: the identities of the records whose handles the compaction
        // drops.
        let mut drop_keys = self
            .policy
            .hooks
            .records_drop_keys()
            .then(DropKeyCollector::default);
        let (lo, hi) = plan.user_range();
        let named = plan.named_value_tables();
        let ctx = compaction_context(&job.version, &self.tables, plan, (&lo, &hi), &named);
        let result = {
            let mut hooks = self.policy.hooks.begin(&ctx);
            let mut listeners: Vec<&mut dyn DropListener> = vec![&mut garbage];
            if let Some(k) = drop_keys.as_mut() {
                listeners.push(k);
            }
            run_compaction(
                plan,
                &job.version,
                &self.tables,
                &self.values,
                readers,
                out,
                &mut FanOut(listeners),
                hooks.as_deref_mut(),
                Some(&self.shutting_down),
                relocation,
                // Aliases are the policy's own; any other policy lets them go.
                !self.policy.updates_handles_on_read,
            )?
        };
        // Written before the manifest lock is taken; deleted again if the edit never lands.
        let written = match drop_keys {
            Some(k) => k.write(&self.drop_file_config(IoClass::CompactionWrite))?,
            None => None,
        };
        let CompactionResult {
            mut edit,
            stats,
            pending: outputs,
            relocated_garbage,
        } = result;
        garbage.add_relocated(&relocated_garbage);
        if stats.dropped.expired > 0 {
            // As a flush's: what it judged expired stays expired after a reopen.
            edit.time_floor = Some(judged_at);
        }
        let mut versions = self.versions.lock();
        // Closing: give up before the edit (the outputs are deleted as they drop).
        self.check_open()?;
        // Garbage is placed against the version the edit applies to, under the manifest lock, so
        // no GC job can commit in between (see compaction::garbage).
        let claimed_now = self.state.lock().gc_claimed.clone();
        // An error placing a drop fails the job before its edit is written: the inputs stay, and
        // the drops are placed again when the compaction reruns.
        let settled =
            garbage.settle(versions.current(), &claimed_now, &mut edit, self.time.now())?;
        // Drop blocks go to the tables holding the records now, in the same edit as the
        // garbage they identify.
        let unplaced = written
            .as_ref()
            .map_or(0, |w| w.attach(versions.current().values(), &mut edit));
        let freed = freed_tables(versions.current(), &edit);
        // Kept even on failure: the edit may be on disk all the same (see `run_flush`). Whether
        // it is cannot be known, so the database turns read-only until reopened.
        let result = versions.log_and_apply(edit.clone());
        outputs.keep();
        self.record_drop_keys(written, unplaced);
        let version = result.inspect_err(|e| self.set_bg_error(e.clone()))?;
        {
            let mut st = self.state.lock();
            for (level, key) in &edit.compact_pointers {
                if let Some(slot) = st.compact_pointers.get_mut(*level as usize) {
                    *slot = Some(key.clone());
                }
            }
            for (table, drop) in settled.late {
                st.late_drops.entry(table).or_default().push(drop);
            }
            st.version = version;
            st.compaction_failures = 0;
            st.compaction_retry_at = None;
            self.install_super_version(&st);
        }
        drop(versions);
        Counters::add(&self.counters.unresolved_drops, settled.unresolved);
        Counters::add(
            &self.counters.drops_reclaimed_early,
            settled.reclaimed_early,
        );
        Counters::add(&self.counters.drops_into_retired, settled.retired);
        Counters::add(&self.counters.handles_rewritten, stats.handles_rewritten);
        Counters::add(
            &self.counters.value_tables_freed,
            edit.deleted_value_tables.len() as u64,
        );
        self.record_compaction(plan, &stats);
        self.policy.hooks.compaction_finished(&ctx, &stats);
        if !freed.is_empty() {
            self.policy.hooks.value_tables_freed(&freed);
        }
        Ok(())
    }

    fn record_compaction(&self, plan: &CompactionPlan, stats: &JobStats) {
        let c = &self.counters;
        if plan.trivial_move {
            Counters::add(&c.trivial_moves, 1);
            return;
        }
        Counters::add(&c.compactions, 1);
        Counters::add(&c.compaction_bytes_read, stats.input_bytes);
        Counters::add(&c.compaction_bytes_written, stats.output_bytes);
        Counters::add(&c.compaction_micros, stats.micros);
        Counters::add(&c.dropped_shadowed, stats.dropped.shadowed);
        Counters::add(&c.dropped_tombstones, stats.dropped.tombstones);
        Counters::add(&c.dropped_range_deleted, stats.dropped.range_deleted);
        Counters::add(&c.dropped_expired, stats.dropped.expired);
        Counters::add(&c.tables_dropped_whole, stats.tables_dropped_whole);
        match plan.reason {
            CompactionReason::Forced => Counters::add(&c.forced_compactions, 1),
            CompactionReason::StaleHandles => Counters::add(&c.stale_handle_compactions, 1),
            _ => {}
        }
        let r = &stats.relocation;
        Counters::add(&c.relocated_values, r.relocated + r.inlined);
        Counters::add(&c.relocated_bytes, r.relocated_bytes);
        Counters::add(&c.relocations_kept_for_aliases, r.aliased);
        Counters::add(&c.relocations_kept_for_gc, r.claimed);
        Counters::add(&c.aliases_dropped, stats.aliases_dropped);
    }

    /// Manual compaction of `[begin, end]`, run on the caller's thread, step by step as the
    /// compaction strategy plans it (leveled: each level above the deepest populated one is
    /// compacted into the next, then the deepest level is rewritten in place; tiered: the runs
    /// holding the range are merged into one), so every tombstone and overwritten version no
    /// snapshot needs is gone.
    pub(super) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush_and_wait()?;
        self.compact_levels(begin, end)
    }

    /// [`DbInner::compact_range`] without the flush: the key tables only (tests use it to keep
    /// entries in the memtable across a compaction).
    pub(super) fn compact_levels(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        // Each partition's tree in turn: a key's versions are all in one of them, and no move
        // runs meanwhile (one between the passes could carry keys into a tree already done).
        let _hold = self.hold_moves()?;
        for p in 0..self.strategy.partitions() {
            self.compact_tree(p, begin, end)?;
        }
        Ok(())
    }

    /// [`DbInner::compact_levels`] in partition `p`'s tree.
    fn compact_tree(&self, p: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut level = 0;
        loop {
            let (job, next_level) = {
                let mut st = self.state.lock();
                loop {
                    st.check_usable()?;
                    // Planned afresh at every attempt (after any wait), so the steps follow
                    // what background compactions did meanwhile.
                    let step = self.strategy.manual(
                        &st.version,
                        &self.plan_context(&st),
                        p,
                        level,
                        begin,
                        end,
                    );
                    match step {
                        ManualStep::Done => return Ok(()),
                        ManualStep::Next => level += 1,
                        ManualStep::Busy => {
                            self.progress_cv.wait_for(&mut st, IDLE_WAIT);
                        }
                        ManualStep::Run { plan, .. } if MoveGate::blocks(&st, &plan) => {
                            self.progress_cv.wait_for(&mut st, IDLE_WAIT);
                        }
                        ManualStep::Run { plan, next_level } => {
                            break (self.register_compaction(&mut st, plan), next_level);
                        }
                    }
                }
            };
            let r = self.run_compaction_plan(&job);
            self.finish_running(&job.running);
            Counters::add(&self.counters.manual_compactions, 1);
            if let Err(e) = r {
                self.note_compaction_error(&e);
                self.purge_obsolete_files();
                return Err(e);
            }
            self.purge_obsolete_files();
            match next_level {
                Some(l) => level = l,
                None => return Ok(()),
            }
        }
    }

    /// Deletes tables whose last reference was dropped; returns how many it deleted.
    pub(super) fn purge_obsolete_files(&self) -> usize {
        let files: Vec<ObsoleteFile> = std::mem::take(&mut *self.obsolete.queue.lock());
        let mut deleted = 0;
        for file in files {
            let name = match file {
                ObsoleteFile::Table(FileKind::KeyTable, n) => {
                    self.tables.evict(n);
                    table_file_name(n)
                }
                ObsoleteFile::Table(FileKind::ValueTable, n) => {
                    self.values.evict(n);
                    value_table_file_name(n)
                }
                ObsoleteFile::Table(FileKind::DropFile, n) => crate::filename::drop_file_name(n),
                ObsoleteFile::Wal(n) => wal_file_name(n),
            };
            // A file that cannot be deleted now is an orphan that the next open removes.
            if self.fs.remove_file(&self.dir.join(name)).is_ok() {
                // Drop files are no tables: they are not counted.
                if let ObsoleteFile::Table(FileKind::KeyTable | FileKind::ValueTable, _) = file {
                    Counters::add(&self.counters.tables_deleted, 1);
                }
                deleted += 1;
            }
        }
        deleted
    }
}

/// A claimed background job.
pub(super) enum Work {
    Flush(Vec<Arc<MemTable>>),
    Compaction(Box<CompactionJob>),
    /// A flush and compaction of the whole tree a stopped writer asked for (`db::space`).
    SurfaceHiddenGarbage,
    Gc(super::gc::GcClaim),
}

/// A compaction claimed by a worker (or a manual request), with what its garbage accounting
/// needs.
pub(super) struct CompactionJob {
    plan: CompactionPlan,
    running: RunningCompaction,
    version: Arc<Version>,
    claimed: BTreeSet<u64>,
    /// The snapshots and time the job judges versions against, taken at its registration.
    readers: ReaderTimes,
}

#[cfg(test)]
impl DbInner {
    /// For tests: registers a forced compaction of key table `number` as a background worker
    /// claims one (`None` when the strategy plans none), without running it.
    pub(super) fn register_forced_compaction(&self, number: u64) -> Option<CompactionJob> {
        let mut st = self.state.lock();
        let plan = self
            .strategy
            .forced(&st.version, &self.plan_context(&st), number)?;
        Some(self.register_compaction(&mut st, plan))
    }

    /// For tests: runs a compaction [`DbInner::register_forced_compaction`] registered.
    pub(super) fn run_registered_compaction(&self, job: &CompactionJob) -> Result<()> {
        let r = self.run_compaction_plan(job);
        self.finish_running(&job.running);
        r
    }
}

/// The value tables `edit` deletes because they became entirely garbage, as `current` holds
/// them (for the policy's hooks).
fn freed_tables(current: &Version, edit: &VersionEdit) -> Vec<crate::version::ValueTableMeta> {
    edit.deleted_value_tables
        .iter()
        .filter_map(|t| current.values().live(*t).map(|v| (**v).clone()))
        .collect()
}

/// A flush as the policy's hooks see it: memtables into L0, over a key range the flush does not
/// know in advance (given as empty bounds); the oldest data when the tree holds no table.
fn flush_context<'a>(version: &'a Version, tables: &'a TableCache) -> CompactionContext<'a> {
    CompactionContext {
        tables: Some(tables),
        version,
        input_level: None,
        output_level: 0,
        bottommost: version.all_files().next().is_none(),
        trivial_move: false,
        smallest_user_key: &[],
        largest_user_key: &[],
        named_value_tables: &[],
    }
}

/// Compaction `plan` over user keys `lo..=hi` as the policy's hooks see it.
fn compaction_context<'a>(
    version: &'a Version,
    tables: &'a TableCache,
    plan: &CompactionPlan,
    (lo, hi): (&'a [u8], &'a [u8]),
    named_value_tables: &'a [u64],
) -> CompactionContext<'a> {
    // Older than the outputs: the runs of the output level after the one they join, and
    // every deeper level of its partition.
    let runs = version.runs(plan.output_level);
    let after = runs
        .iter()
        .position(|r| r.id() == plan.output_run)
        .map_or(0, |i| i + 1);
    let bottommost = runs[after..]
        .iter()
        .chain(
            version
                .deeper_levels(plan.output_level)
                .flat_map(|l| version.runs(l)),
        )
        .all(|r| !r.overlaps(Some(lo), Some(hi)));
    CompactionContext {
        tables: Some(tables),
        version,
        input_level: Some(plan.level() as u32),
        output_level: plan.output_level as u32,
        bottommost,
        trivial_move: plan.trivial_move,
        smallest_user_key: lo,
        largest_user_key: hi,
        named_value_tables,
    }
}
