//! Space-aware throttling in the engine: measuring bytes on disk against the live-data
//! estimate, asking the [`SpaceThrottle`] what to do before each write, carrying out its answer
//! (delay, wait, fail), and handing its GC directive (threads, victim ratio) to the GC workers.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Counters, DbInner, DbState};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::throttle::{
    Band, Clock, MonotonicClock, SpaceBudget, SpaceInputs, SpaceThrottle, ThrottleStats, WriteKind,
    WriteVerdict,
};

/// How long one live-data estimate is reused: it walks every table of the version, which is too
/// much for every write group but cheap a hundred times a second. In between, the writes let
/// through are added to it. (Bytes on disk need no such reuse: the tracked file system keeps
/// their sum in one counter, so every evaluation reads them afresh.)
const OBSERVATION_TTL: Duration = Duration::from_millis(10);
/// Longest single wait of a stopped writer before it looks again.
const STOP_WAIT_SLICE: Duration = Duration::from_millis(20);

/// Bytes on disk and the live-data estimate (what `stats().space` reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SpaceUsage {
    /// Every file in the database directory: the tables of every version still pinned by an
    /// iterator, snapshot read or job, tables waiting to be deleted, WALs, manifest, OPTIONS
    /// (counted as they are written and removed, `io::TrackedFs`).
    pub disk_bytes: u64,
    /// Key tables + value-table records that are not garbage + the same WAL estimate.
    pub live_bytes: u64,
}

/// The throttle and what the engine keeps around it.
pub(super) struct SpaceControl {
    throttle: Mutex<Observed>,
    clock: MonotonicClock,
    /// The GC directive of the last evaluation: worker threads that may run jobs...
    gc_threads: AtomicU32,
    /// ...and the victim garbage ratio (`f64` bits).
    gc_ratio: AtomicU64,
    /// Whether the last evaluation slowed or stopped writes (GC then never yields to reads).
    pressed: AtomicBool,
    /// Hidden-garbage compactions run by stopped writers.
    surfacing: Mutex<Surfacing>,
    /// Bytes of writes let in whose WAL records are not yet written (each counted at its
    /// largest WAL size): a writer let in is not seen on disk until its group is logged, and
    /// without this, writers let in together could all pass a limit that fits only one.
    in_flight: AtomicU64,
}

/// A write the throttle let in. Until it is dropped (its group logged, or failed), its bytes
/// count as on disk.
pub(super) struct AdmittedWrite<'a> {
    in_flight: &'a AtomicU64,
    bytes: u64,
}

impl Drop for AdmittedWrite<'_> {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The state of hidden-garbage compactions ("surfacing").
#[derive(Debug, Default)]
struct Surfacing {
    /// When the last one was asked for (`None`: never).
    last_start: Option<Instant>,
    /// Whether one is asked for or running (it counts as something to reclaim).
    running: bool,
    /// Whether one is asked for and no worker has taken it yet.
    requested: bool,
    /// Whether one has started since writes last stopped. The first of each stop may start at
    /// once; more within the same stop wait out the interval.
    in_this_stop: bool,
}

/// The throttle with its cached observation. Lock order: this before `DbInner::state`.
struct Observed {
    throttle: SpaceThrottle,
    /// The last observation and when it was taken: the live-data estimate (with the writes let
    /// in since added) and whether GC could reclaim something.
    last: Option<(Instant, u64, bool)>,
    /// Bytes of the largest write told to wait since a write last got through (0: none).
    /// Ticks judge usage with it, so the band, and GC's urgency, stay where the waiting write
    /// put them until it fits.
    waiting_bytes: u64,
}

impl SpaceControl {
    /// A control enforcing `budget`.
    pub(super) fn new(budget: SpaceBudget) -> Result<Self> {
        let threads = budget.gc_threads;
        let ratio = budget.gc_garbage_ratio;
        Ok(SpaceControl {
            throttle: Mutex::new(Observed {
                throttle: SpaceThrottle::new(budget)?,
                last: None,
                waiting_bytes: 0,
            }),
            clock: MonotonicClock::new(),
            gc_threads: AtomicU32::new(threads),
            gc_ratio: AtomicU64::new(ratio.to_bits()),
            pressed: AtomicBool::new(false),
            surfacing: Mutex::new(Surfacing::default()),
            in_flight: AtomicU64::new(0),
        })
    }

    /// GC worker threads that may run jobs now.
    pub(super) fn gc_threads(&self) -> u32 {
        self.gc_threads.load(Ordering::Relaxed)
    }

    /// Whether the throttle is slowing or stopping writes (its band is above `Normal`).
    pub(super) fn pressed(&self) -> bool {
        self.pressed.load(Ordering::Relaxed)
    }

    /// The garbage ratio GC victims need now.
    pub(super) fn gc_ratio(&self) -> f64 {
        f64::from_bits(self.gc_ratio.load(Ordering::Relaxed))
    }

    /// Asks for a hidden-garbage compaction when one is due: none asked for or running, and
    /// either none started since writes stopped this time or none within `interval`. (Limiting
    /// them only by the interval let a stop that came soon after an earlier one go without any:
    /// its writes failed for want of reclaimable garbage that a compaction would have made
    /// visible.) Returns whether it asked.
    fn request_surfacing(&self, interval: Duration) -> bool {
        let mut s = self.surfacing.lock();
        let due = !s.running
            && (!s.in_this_stop || s.last_start.is_none_or(|at| at.elapsed() >= interval));
        if due {
            s.last_start = Some(Instant::now());
            s.running = true;
            s.requested = true;
            s.in_this_stop = true;
        }
        due
    }

    /// Takes the request for a hidden-garbage compaction, if there is one; the taker runs it
    /// (`DbInner::surface_hidden_garbage`).
    pub(super) fn take_surfacing_request(&self) -> bool {
        std::mem::take(&mut self.surfacing.lock().requested)
    }

    fn end_surfacing(&self) {
        let mut s = self.surfacing.lock();
        s.running = false;
        s.requested = false;
    }

    fn surfacing_now(&self) -> bool {
        self.surfacing.lock().running
    }

    /// The throttle's figures.
    pub(super) fn stats(&self) -> ThrottleStats {
        let o = self.throttle.lock();
        o.throttle.stats(self.clock.now())
    }
}

impl DbInner {
    /// Bytes on disk and the live-data estimate of the current state.
    pub(super) fn space_usage(&self, st: &DbState) -> SpaceUsage {
        let version = &st.version;
        let key_bytes: u64 = (0..version.num_levels())
            .map(|l| version.level_bytes(l))
            .sum();
        let values = version.values();
        let live_records: u64 = values
            .tables()
            .map(|v| {
                v.record_bytes
                    .saturating_sub(values.garbage(v.number).bytes)
            })
            .sum();
        // Unflushed data lives in WALs roughly the size of the memtables it filled.
        let wal_bytes =
            st.mem.approximate_bytes() + st.imm.iter().map(|m| m.approximate_bytes()).sum::<u64>();
        SpaceUsage {
            disk_bytes: self.disk.total(),
            live_bytes: key_bytes + live_records + wal_bytes,
        }
    }

    /// Whether GC can still free something: a job is running, or some live table it may
    /// collect has garbage.
    fn reclaimable(st: &DbState) -> bool {
        if !st.gc_claimed.is_empty() {
            return true;
        }
        let values = st.version.values();
        values
            .tables()
            .any(|v| !st.gc_failed.contains(&v.number) && values.garbage(v.number).bytes > 0)
    }

    /// Asks the throttle about a write of `write` (or a tick); updates the GC directive.
    fn evaluate_space(&self, control: &SpaceControl, write: WriteKind) -> WriteVerdict {
        let mut o = control.throttle.lock();
        let now = Instant::now();
        let (live_bytes, reclaimable) = match o.last {
            Some((at, live, reclaimable)) if now.duration_since(at) < OBSERVATION_TTL => {
                (live, reclaimable)
            }
            _ => {
                let st = self.state.lock();
                let observed = (
                    self.space_usage(&st).live_bytes,
                    Self::reclaimable(&st) || control.surfacing_now(),
                );
                drop(st);
                o.last = Some((now, observed.0, observed.1));
                observed
            }
        };
        // The throttle judges the usage the write would leave, so a write let in below the
        // limit never takes the directory past it; a tick judges it with the waiting write.
        let pending = match write {
            WriteKind::Write { bytes } => bytes,
            WriteKind::Tick | WriteKind::DeleteOnly => o.waiting_bytes,
        };
        let disk_bytes = self
            .disk
            .total()
            .saturating_add(control.in_flight.load(Ordering::Relaxed))
            .saturating_add(pending);
        let decision = o.throttle.evaluate(
            SpaceInputs {
                disk_bytes,
                live_bytes,
                reclaimable,
                write,
            },
            control.clock.now(),
        );
        if let WriteKind::Write { bytes } = write {
            o.waiting_bytes = match decision.write {
                WriteVerdict::Wait => o.waiting_bytes.max(bytes),
                WriteVerdict::Proceed | WriteVerdict::Delay(_) | WriteVerdict::Fail(_) => 0,
            };
        }
        if let (WriteKind::Write { bytes }, WriteVerdict::Proceed | WriteVerdict::Delay(_)) =
            (write, &decision.write)
        {
            // The write goes to the WAL and the memtable now; a flush later turns it into
            // tables of about the same size. Until the next measurement, count it as live; it
            // is on disk once logged, and in flight until then (under this lock, so the next
            // evaluation sees it).
            control.in_flight.fetch_add(bytes, Ordering::Relaxed);
            if let Some((_, live, _)) = &mut o.last {
                *live += bytes;
            }
        }
        let before = control
            .gc_threads
            .swap(decision.gc.threads, Ordering::Relaxed);
        control
            .gc_ratio
            .store(decision.gc.garbage_ratio.to_bits(), Ordering::Relaxed);
        control
            .pressed
            .store(decision.band != Band::Normal, Ordering::Relaxed);
        drop(o);
        if decision.band != Band::Stopped {
            // Writes go on: the next stop may surface hidden garbage at once.
            control.surfacing.lock().in_this_stop = false;
        }
        if decision.gc.threads > before {
            // More GC threads may run now.
            self.bg_cv.notify_all();
        }
        decision.write
    }

    /// Refreshes the GC directive without a write (GC workers call it while idle).
    pub(super) fn space_tick(&self) {
        if let Some(control) = &self.space {
            self.evaluate_space(control, WriteKind::Tick);
        }
    }

    /// When writes are stopped and GC sees no garbage, the space is usually held by *hidden*
    /// garbage: overwritten versions whose handles compaction has not dropped yet (writes are
    /// stopped, so nothing triggers that compaction). A stopped writer then asks for a flush and
    /// a compaction of the whole tree, which turns every such handle into counted garbage for
    /// GC; a compaction worker runs it (`surface_hidden_garbage`), so the writer only waits,
    /// with its deadline, and a failed compaction is the compaction's error, not the write's.
    /// At most one is asked for or running at a time: the first of each stop at once, any more
    /// in the same stop one per stop timeout (at least a second apart). Returns whether it
    /// asked.
    fn request_hidden_garbage_surfacing(&self, control: &SpaceControl) -> bool {
        // Lock order: the throttle before the state (as `evaluate_space`), so never both here.
        let interval = control.throttle.lock().throttle.budget().stop_timeout;
        let visible = Self::reclaimable(&self.state.lock());
        if visible || !control.request_surfacing(interval.max(Duration::from_secs(1))) {
            return false;
        }
        self.bg_cv.notify_all();
        true
    }

    /// Runs an asked-for hidden-garbage compaction: flushes and compacts the whole tree. Its
    /// failure is recorded as a compaction failure (stats, retries, and after repeated
    /// failures the background error), like any compaction's.
    pub(super) fn surface_hidden_garbage(&self) {
        let Some(control) = &self.space else {
            return;
        };
        // Errors were recorded where they happened (`compact_range` counts a failed compaction,
        // a failed flush is the background error); closing ends it early.
        let _ = self.compact_range(None, None);
        control.end_surfacing();
        // The next observation must see what the compaction freed or made collectable.
        control.throttle.lock().last = None;
        Counters::add(&self.counters.space_compactions, 1);
        self.progress_cv.notify_all();
    }

    /// Applies the space budget to a write of `batch` before it joins a write group: returns at
    /// once below the low limit, sleeps in the throttled band, waits while writes are stopped,
    /// and fails with [`Error::SpaceBudgetExceeded`] when GC has nothing left to reclaim. A
    /// batch of deletions only always passes (it can only shrink what is live).
    ///
    /// The returned guard counts the write as on disk until it is dropped: hold it until the
    /// write is logged.
    pub(super) fn throttle_write(&self, batch: &WriteBatch) -> Result<Option<AdmittedWrite<'_>>> {
        let Some(control) = &self.space else {
            return Ok(None);
        };
        let write = if batch.only_deletions() {
            WriteKind::DeleteOnly
        } else {
            WriteKind::Write {
                bytes: crate::wal::max_wal_record_bytes(batch.encoded_size() as u64),
            }
        };
        let started = Instant::now();
        // The throttle fails a stopped write once GC has had nothing to reclaim for the stop
        // timeout; this bounds the wait also when GC keeps finding garbage that frees too little.
        let stop_timeout = control.throttle.lock().throttle.budget().stop_timeout;
        let give_up = started + stop_timeout * 3 + Duration::from_secs(10);
        loop {
            let verdict = self.evaluate_space(control, write);
            if matches!(verdict, WriteVerdict::Wait | WriteVerdict::Fail(_))
                && self.purge_obsolete_files() > 0
            {
                // Tables the last iterator or job let go of were still on disk: they are deleted
                // by whoever runs a job next, which with writes stopped may be nobody. Look
                // again without them (each round deletes files, so this ends).
                control.throttle.lock().last = None;
                continue;
            }
            match verdict {
                WriteVerdict::Proceed => break,
                WriteVerdict::Delay(d) => {
                    std::thread::sleep(d);
                    Counters::add(&self.counters.space_delays, 1);
                    break;
                }
                WriteVerdict::Wait if Instant::now() < give_up => {
                    self.check_open()?;
                    if self.request_hidden_garbage_surfacing(control)
                        && self.opts.inline_background_work()
                    {
                        // No workers: this is one of the fixed points where the caller does the
                        // background work, so the bound holds between jobs, not within one.
                        control.take_surfacing_request();
                        self.surface_hidden_garbage();
                        continue;
                    }
                    // Without workers (`inline_background_work`) the waiting writer runs GC.
                    self.run_inline_work();
                    self.bg_cv.notify_all();
                    let mut st = self.state.lock();
                    st.check_usable()?;
                    self.progress_cv.wait_for(&mut st, STOP_WAIT_SLICE);
                }
                WriteVerdict::Wait => {
                    let mut o = control.throttle.lock();
                    o.waiting_bytes = 0;
                    let s = o.throttle.stats(control.clock.now());
                    return Err(Error::SpaceBudgetExceeded {
                        disk_bytes: s.disk_bytes,
                        limit_bytes: s.high_limit_bytes.unwrap_or(0),
                        stopped_ms: started.elapsed().as_millis() as u64,
                    });
                }
                WriteVerdict::Fail(f) => {
                    return Err(Error::SpaceBudgetExceeded {
                        disk_bytes: f.disk_bytes,
                        limit_bytes: f.high_limit_bytes,
                        stopped_ms: f.unreclaimable_for.as_millis() as u64,
                    });
                }
            }
        }
        let waited = started.elapsed();
        if waited > Duration::ZERO {
            Counters::add(&self.counters.space_wait_micros, waited.as_micros() as u64);
        }
        Ok(match write {
            WriteKind::Write { bytes } => Some(AdmittedWrite {
                in_flight: &control.in_flight,
                bytes,
            }),
            WriteKind::Tick | WriteKind::DeleteOnly => None,
        })
    }
}
