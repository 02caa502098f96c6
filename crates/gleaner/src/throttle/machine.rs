//! The throttle's state machine: the band of the last observation, the stop timer, and the
//! accounting. Everything else is a pure function of one observation (see `band.rs`).

use std::time::Duration;

use super::band::{Band, Limits, write_delay};
use super::config::SpaceBudget;
use super::decision::{Decision, GcDirective, SpaceInputs, StopFailure, WriteKind, WriteVerdict};
use super::stats::{Accounting, ThrottleStats};
use crate::error::Result;

/// The space-aware throttle. The engine holds it under a mutex, calls
/// [`evaluate`](Self::evaluate) before each write group and on each GC scheduling tick, and acts
/// on the [`Decision`]. It does no I/O and reads no clock: `now` comes from the caller's
/// [`Clock`](super::Clock), which makes every decision reproducible in tests.
#[derive(Debug, Clone)]
pub struct SpaceThrottle {
    budget: SpaceBudget,
    /// Band at the last evaluation (`Normal` before the first).
    band: Band,
    /// Time of the last evaluation; band time accrues from it.
    last_eval: Option<Duration>,
    /// While `Stopped`: the start of the current stretch with nothing reclaimable, i.e. the
    /// later of entering `Stopped` and the last evaluation that saw `reclaimable`.
    stop_clock: Option<Duration>,
    disk_bytes: u64,
    live_bytes: u64,
    limits: Option<Limits>,
    acct: Accounting,
}

impl SpaceThrottle {
    /// A throttle for `budget`, in band `Normal`.
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) from
    /// [`SpaceBudget::validate`], naming the offending option.
    pub fn new(budget: SpaceBudget) -> Result<Self> {
        budget.validate()?;
        Ok(SpaceThrottle {
            budget,
            band: Band::Normal,
            last_eval: None,
            stop_clock: None,
            disk_bytes: 0,
            live_bytes: 0,
            limits: None,
            acct: Accounting::default(),
        })
    }

    /// The configuration.
    pub fn budget(&self) -> &SpaceBudget {
        &self.budget
    }

    /// The band at the last evaluation (`Normal` before the first).
    pub fn band(&self) -> Band {
        self.band
    }

    /// Evaluates one observation taken at `now` (from a monotonic [`Clock`](super::Clock); a
    /// `now` earlier than the previous evaluation's is treated as equal to it).
    ///
    /// The rules are the tables in the [module documentation](super). Observations are
    /// samples: between two evaluations the state is assumed to be what the earlier one saw,
    /// both for band time and for "nothing reclaimable since".
    pub fn evaluate(&mut self, inputs: SpaceInputs, now: Duration) -> Decision {
        let now = self.accrue_until(now);
        let limits = Limits::for_budget(&self.budget, inputs.live_bytes);
        let band = limits.map_or(Band::Normal, |l| l.band(inputs.disk_bytes));
        if band != self.band {
            self.acct.transitions = self.acct.transitions.saturating_add(1);
        }
        self.stop_clock = match band {
            // Entering Stopped, or GC could make progress: the no-progress stretch starts now.
            Band::Stopped if self.band != Band::Stopped || inputs.reclaimable => Some(now),
            Band::Stopped => self.stop_clock.or(Some(now)),
            // Any drop below high resumes writes and forgets the stretch.
            Band::Normal | Band::Throttled => None,
        };
        self.band = band;
        self.disk_bytes = inputs.disk_bytes;
        self.live_bytes = inputs.live_bytes;
        self.limits = limits;
        let write = self.verdict(inputs, now);
        Decision {
            band,
            write,
            gc: self.gc_directive(band, limits.map_or(0.0, |l| l.fraction(inputs.disk_bytes))),
        }
    }

    /// A snapshot of the accounting as of `now`, including the time since the last evaluation.
    pub fn stats(&self, now: Duration) -> ThrottleStats {
        let mut acct = self.acct.clone();
        if let Some(last) = self.last_eval {
            acct.add_band_time(self.band, now.saturating_sub(last));
        }
        ThrottleStats {
            enabled: self.budget.is_enabled(),
            band: self.band,
            transitions: acct.transitions,
            throttled_seconds: acct.throttled.as_secs_f64(),
            stopped_seconds: acct.stopped.as_secs_f64(),
            write_delay_seconds: acct.write_delay.as_secs_f64(),
            delayed_writes: acct.delayed_writes,
            stop_waits: acct.stop_waits,
            failed_writes: acct.failed_writes,
            deletes_while_stopped: acct.deletes_while_stopped,
            disk_bytes: self.disk_bytes,
            live_bytes: self.live_bytes,
            low_limit_bytes: self.limits.map(|l| l.low),
            high_limit_bytes: self.limits.map(|l| l.high),
        }
    }

    /// Credits the time since the last evaluation to the band it observed and moves the
    /// evaluation time to `now` (never backwards). Returns the effective `now`.
    fn accrue_until(&mut self, now: Duration) -> Duration {
        let now = match self.last_eval {
            Some(last) if now < last => last,
            _ => now,
        };
        if let Some(last) = self.last_eval {
            self.acct.add_band_time(self.band, now - last);
        }
        self.last_eval = Some(now);
        now
    }

    /// The answer for the write being evaluated; `self` already holds this observation.
    fn verdict(&mut self, inputs: SpaceInputs, now: Duration) -> WriteVerdict {
        let bytes = match inputs.write {
            WriteKind::Tick => return WriteVerdict::Proceed,
            WriteKind::DeleteOnly => {
                if self.band == Band::Stopped {
                    self.acct.deletes_while_stopped =
                        self.acct.deletes_while_stopped.saturating_add(1);
                }
                return WriteVerdict::Proceed;
            }
            WriteKind::Write { bytes } => bytes,
        };
        // Without limits the band is Normal; binding them here keeps the arms free of unwraps.
        let Some(limits) = self.limits else {
            return WriteVerdict::Proceed;
        };
        match self.band {
            Band::Normal => WriteVerdict::Proceed,
            Band::Throttled => {
                let delay = write_delay(&self.budget, limits.fraction(inputs.disk_bytes), bytes);
                if delay.is_zero() {
                    WriteVerdict::Proceed
                } else {
                    self.acct.add_delay(delay);
                    WriteVerdict::Delay(delay)
                }
            }
            Band::Stopped => {
                let since = self.stop_clock.unwrap_or(now);
                let unreclaimable_for = now.saturating_sub(since);
                if !inputs.reclaimable && unreclaimable_for >= self.budget.stop_timeout {
                    self.acct.failed_writes = self.acct.failed_writes.saturating_add(1);
                    WriteVerdict::Fail(StopFailure {
                        disk_bytes: inputs.disk_bytes,
                        high_limit_bytes: limits.high,
                        unreclaimable_for,
                    })
                } else {
                    self.acct.stop_waits = self.acct.stop_waits.saturating_add(1);
                    WriteVerdict::Wait
                }
            }
        }
    }

    /// GC threads and victim threshold for `band`, `fraction` of the way into the throttled
    /// band. Through the throttled band the threshold falls linearly from the normal ratio to
    /// the urgent one: writes are delayed there only while GC can bring usage back, and a
    /// threshold held at the normal ratio could leave GC with no victim while usage sits in
    /// the band, delaying writes for as long as it does (docs/benchmarks.md, "GC under the
    /// budget").
    fn gc_directive(&self, band: Band, fraction: f64) -> GcDirective {
        let b = &self.budget;
        match band {
            Band::Normal => GcDirective {
                threads: b.gc_threads,
                garbage_ratio: b.gc_garbage_ratio,
            },
            Band::Throttled => GcDirective {
                threads: b.gc_threads_max,
                garbage_ratio: b.gc_garbage_ratio
                    - fraction.clamp(0.0, 1.0) * (b.gc_garbage_ratio - b.urgent_garbage_ratio()),
            },
            Band::Stopped => GcDirective {
                threads: b.gc_threads_max,
                garbage_ratio: b.urgent_garbage_ratio(),
            },
        }
    }
}
