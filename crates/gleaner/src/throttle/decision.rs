//! What the engine tells the throttle at each evaluation, and what the throttle answers.

use std::fmt;
use std::time::Duration;

use super::band::Band;

/// What is asking for an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// No write: the GC scheduler or a stats poll asking for the band and the GC directive.
    /// It still observes `reclaimable` and so still drives the stop timer.
    Tick,
    /// A write group holding at least one put, of `bytes` encoded bytes (the group's WAL
    /// record size is the natural measure).
    Write {
        /// Bytes the group adds.
        bytes: u64,
    },
    /// A batch of deletions only. It passes in every band undelayed: deletions are how a user
    /// frees space, and stopping them would leave no way out of a full budget.
    DeleteOnly,
}

/// One observation of the database, made by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceInputs {
    /// Bytes the database occupies on disk (all its files).
    pub disk_bytes: u64,
    /// The engine's estimate of live user data (keys and values of the newest versions). 0 for
    /// an empty database: ratio limits then do not apply (no division by zero), only
    /// `max_disk_bytes` does.
    pub live_bytes: u64,
    /// True when GC can still make progress: a running GC job, or a value table it would pick
    /// under the current directive's garbage ratio. The engine must report `false` when GC
    /// would pick nothing, or stopped writes wait for a reclaim that never comes (up to each
    /// bounded wait slice, forever).
    pub reclaimable: bool,
    /// What is being evaluated.
    pub write: WriteKind,
}

/// What the throttle tells the GC scheduler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcDirective {
    /// GC threads to run: `gc_threads` in `Normal`, `gc_threads_max` otherwise.
    pub threads: u32,
    /// Garbage ratio at which a value table is a victim: `gc_garbage_ratio`, or the urgent
    /// ratio in `Stopped`.
    pub garbage_ratio: f64,
}

/// Why a stopped write is being failed; `Display` is the message for the engine's
/// space-budget error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopFailure {
    /// Disk usage at the failing evaluation.
    pub disk_bytes: u64,
    /// The high limit in force at that evaluation.
    pub high_limit_bytes: u64,
    /// How long writes had been stopped with nothing reclaimable (at least `stop_timeout`).
    pub unreclaimable_for: Duration,
}

impl fmt::Display for StopFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "space budget exceeded: {} bytes on disk is at or above the limit of {} bytes, and \
             garbage collection has had nothing to reclaim for {:.1} s; delete data or raise \
             the budget",
            self.disk_bytes,
            self.high_limit_bytes,
            self.unreclaimable_for.as_secs_f64()
        )
    }
}

/// The throttle's answer for the write (if any) being evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerdict {
    /// Go ahead now. Also the answer to a [`WriteKind::Tick`].
    Proceed,
    /// Sleep this long (never more than `max_write_delay`, never zero), then write without
    /// evaluating again.
    Delay(Duration),
    /// Writes are stopped: wait for background progress in a bounded slice, then evaluate
    /// again.
    Wait,
    /// Fail the write with the space-budget error; nothing was written.
    Fail(StopFailure),
}

impl WriteVerdict {
    /// The delay to sleep: the `Delay` value, else zero.
    pub fn delay(&self) -> Duration {
        match self {
            WriteVerdict::Delay(d) => *d,
            _ => Duration::ZERO,
        }
    }
}

/// The result of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The band disk usage is in now.
    pub band: Band,
    /// What to do with the write being evaluated.
    pub write: WriteVerdict,
    /// What GC should do until the next evaluation.
    pub gc: GcDirective,
}
