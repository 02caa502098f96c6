//! Inline background work (option `inline_background_work`): flush, compaction and GC run on
//! the calling thread at fixed points instead of on worker threads.
//!
//! Worker threads interleave with the foreground differently on every run, so a crash
//! simulation that stops the file system after its n-th operation hits a different operation
//! each time. Inline, a seeded single-threaded workload performs the same file operations in the
//! same order on every run, and a failing crash point replays exactly.
//!
//! The fixed points are after every write, when a write finds the memtables or L0 full, in
//! `flush`, at the end of open, and while a write waits at the space budget. Each runs all
//! pending work to completion, in a fixed order: every sealed memtable is flushed, then
//! compactions run until the picker finds none, then — when GC threads are configured — GC jobs
//! until the policy finds no victim, then the handle updates reads queued (policy `novkv`).
//! Concurrent callers take turns (one lock), so the engine stays correct with several threads;
//! only the single-threaded schedule is deterministic.

use super::DbInner;
use super::background::Work;

/// Most jobs one fixed point runs. Every flush, compaction and GC job consumes the backlog
/// that let it be chosen, so the work converges long before this; the bound keeps a picker or
/// policy that failed to converge from holding the caller forever.
const MAX_JOBS_PER_POINT: usize = 100_000;

impl DbInner {
    /// Runs every pending background job on this thread (see the module comment). Does
    /// nothing unless `inline_background_work` is on. Failures are recorded exactly as a
    /// worker thread records them (the background error, or the GC error counters), so the
    /// caller's own result is unaffected.
    pub(super) fn run_inline_work(&self) {
        if !self.opts.inline_background_work() {
            return;
        }
        self.run_inline_jobs();
        // Handle updates on read (policy `novkv`) wait for this point, so that a seeded
        // workload writes them at the same moments on every run. After the turn is let go:
        // they take the WAL, which comes before the turn in the lock order (and they never
        // wait for it).
        self.apply_handle_updates(super::handle_updates::MAX_QUEUED);
    }

    fn run_inline_jobs(&self) {
        let _turn = self.inline_turn.lock();
        // A GC job that fails leaves its victims as they were, and the policy would choose them
        // again at once: GC waits for the next fixed point after a failure.
        let mut gc_failed = false;
        for _ in 0..MAX_JOBS_PER_POINT {
            let Some(work) = self.claim_inline(gc_failed) else {
                return;
            };
            let is_gc = matches!(work, Work::Gc(_));
            if !self.run_work(work) {
                if is_gc {
                    gc_failed = true;
                } else {
                    // A failed flush made the database read-only; a failed compaction is
                    // retried at the next fixed point.
                    return;
                }
            }
        }
        debug_assert!(false, "inline background work did not converge");
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
            return Some(Work::Compaction(job));
        }
        if skip_gc || st.bg_error.is_some() || self.active_gc_threads() == 0 {
            return None;
        }
        self.claim_victims(&mut st, false).map(Work::Gc)
    }
}
