//! Inline background work (option `inline_background_work`): flush, compaction and GC run on
//! the calling thread at fixed points instead of on worker threads.
//!
//! Worker threads interleave with the foreground differently on every run, so a crash
//! simulation that stops the file system after its n-th operation hits a different operation
//! each time. Inline, a seeded single-threaded workload performs the same file operations in the
//! same order on every run, and a failing crash point replays exactly.
//!
//! The fixed points are after every write, in `flush`, at the end of open, and while a write
//! waits at the space budget. Each runs all pending work to completion, in a fixed order: every
//! sealed memtable is flushed, then compactions run until the compaction strategy finds none, then — when GC
//! threads are configured — GC jobs until the policy finds no victim, then the handle updates
//! reads queued. A write that finds the memtables or L0 full is a fixed point
//! too, but one that only makes room: flushes and compactions, never a GC job or a handle update.
//!
//! Concurrent callers take turns (one lock, `DbInner::inline_turn`), so the engine stays correct
//! with several threads; only the single-threaded schedule is deterministic. The turn comes after
//! the WAL in the lock order: a writer making room holds the WAL, leads the write queue, and
//! takes the turn. So nothing done under the turn may write through the write path: a GC job
//! that writes the new places of its records back (commit style `WriteBack`) installs its
//! outputs under the turn and writes back after letting it go — as the handle updates do —
//! then takes the turn again for the rest of the work; and the work that makes room runs no GC
//! job, whose write-backs would queue behind the very writer running it.

use super::DbInner;
use super::background::Work;
use super::gc::{GcProgress, PendingWriteBack};

/// Most jobs one fixed point runs. Every flush, compaction and GC job consumes the backlog
/// that let it be chosen, so the work converges long before this; the bound keeps a strategy or
/// policy that failed to converge from holding the caller forever.
const MAX_JOBS_PER_POINT: usize = 100_000;

/// What one fixed point runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Flushes, compactions, GC jobs, then handle updates.
    All,
    /// Flushes and compactions: what makes room for a writer that holds the WAL.
    Room,
}

/// Where a fixed point is in its work.
struct Point {
    /// Jobs it may still run ([`MAX_JOBS_PER_POINT`] at first).
    jobs_left: usize,
    /// No more GC jobs at this point: it only makes room, or a GC job failed (it leaves its
    /// victims as they were, and the policy would choose them again at once, so GC waits for the
    /// next fixed point).
    skip_gc: bool,
}

impl DbInner {
    /// Runs every pending background job on this thread (see the module comment). Does
    /// nothing unless `inline_background_work` is on. Failures are recorded exactly as a
    /// worker thread records them (the background error, or the GC error counters), so the
    /// caller's own result is unaffected. Must not be called holding the WAL: it runs GC jobs,
    /// which write through the write path.
    pub(super) fn run_inline_work(&self) {
        if !self.opts.inline_background_work() {
            return;
        }
        self.run_inline_jobs(Scope::All);
        // The hotness detector's tick by its access clock, and the compactions its move asks
        // for.
        if self.inline_hotness_tick() {
            self.run_inline_jobs(Scope::All);
        }
        // Handle updates on read wait for this point, so that a seeded
        // workload writes them at the same moments on every run. After the turn is let go:
        // they take the WAL, which comes before the turn in the lock order (and they never
        // wait for it).
        self.apply_handle_updates(super::handle_updates::MAX_QUEUED);
    }

    /// The fixed point of a writer that found the memtables or L0 full while it holds the WAL
    /// and leads the write queue: flushes and compactions only. Anything that writes through the
    /// write path would queue behind this writer, and so wait on it forever.
    pub(super) fn run_inline_room_work(&self) {
        if self.opts.inline_background_work() {
            self.run_inline_jobs(Scope::Room);
        }
    }

    fn run_inline_jobs(&self, scope: Scope) {
        let mut point = Point {
            jobs_left: MAX_JOBS_PER_POINT,
            skip_gc: scope == Scope::Room,
        };
        loop {
            let pending = {
                let _turn = self.inline_turn.lock();
                self.run_turn(&mut point)
            };
            let Some(pending) = pending else { return };
            // The turn is let go: the write-backs take the WAL and may wait for a writer ahead
            // of them that is making room, which takes the turn. Then the work goes on in the
            // same order, so the single-threaded schedule stays fixed.
            let victims = pending.victims().to_vec();
            if !self.gc_job_ended(&victims, self.finish_gc_claim(pending)) {
                point.skip_gc = true;
            }
        }
    }

    /// Runs jobs under the turn until none is left (or a flush failed, or the job bound was
    /// reached), or a GC job must write back outside the turn: that job is returned.
    fn run_turn(&self, point: &mut Point) -> Option<PendingWriteBack> {
        while point.jobs_left > 0 {
            point.jobs_left -= 1;
            let work = self.claim_inline(point.skip_gc)?;
            match work {
                Work::Gc(claim) => {
                    let victims = claim.victims().to_vec();
                    match self.start_gc_claim(claim) {
                        GcProgress::Finished(result) => {
                            if !self.gc_job_ended(&victims, result) {
                                point.skip_gc = true;
                            }
                        }
                        GcProgress::WritingBack(pending) => return Some(pending),
                    }
                }
                work => {
                    if !self.run_work(work) {
                        // A failed flush made the database read-only; a failed compaction is
                        // retried at the next fixed point.
                        return None;
                    }
                }
            }
        }
        debug_assert!(false, "inline background work did not converge");
        None
    }

    /// The next job in the fixed order: a flush, else a compaction, else a GC job.
    fn claim_inline(&self, skip_gc: bool) -> Option<Work> {
        if !skip_gc && self.active_gc_threads() > 0 {
            // As a GC worker does before it looks for victims.
            self.space_tick();
        }
        let mut st = self.state.lock();
        if st.shutting_down {
            return None;
        }
        if let Some(mems) = Self::claim_flush(&mut st) {
            return Some(Work::Flush(mems));
        }
        if let Some(job) = self.claim_compaction(&mut st) {
            return Some(Work::Compaction(Box::new(job)));
        }
        if skip_gc || st.bg_error.is_some() || self.active_gc_threads() == 0 {
            return None;
        }
        // A GC claim is made under the manifest lock too (`claim_victims`), which comes first
        // in the lock order. Nothing else runs meanwhile: work is inline.
        drop(st);
        let versions = self.versions.lock();
        let mut st = self.state.lock();
        if st.shutting_down || st.bg_error.is_some() {
            return None;
        }
        self.claim_victims(&versions, &mut st, false).map(Work::Gc)
    }
}
