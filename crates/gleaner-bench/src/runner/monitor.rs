//! The monitor: one thread per engine that every 100 ms measures the engine's directory,
//! enforces the space budget (pausing the workload, asking the engine to reclaim), stops a phase
//! at its time limit and updates the progress bar, and every 50 ms to 1 s appends a time-series
//! sample ([`super::series`]: at least 20 per phase that runs a second or more).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;

use super::budget::Budget;
use super::series::{self, PhaseSeries};
use crate::engine::Engine;
use crate::results::Sample;
use crate::sys::{DeviceIo, dir_bytes};

/// How often the directory is measured and the budget checked.
pub const TICK: Duration = Duration::from_millis(100);
/// How often the monitor wakes: the finest sample interval.
const WAKE: Duration = series::FINE;

/// Reclaim errors kept per engine (later ones are dropped; the first ones say what is wrong).
const MAX_RECLAIM_ERRORS: usize = 8;

/// What the workers of one phase and the monitor share.
#[derive(Debug, Default)]
pub struct PhaseGauges {
    /// Operations completed (workers add in small batches).
    pub done: AtomicU64,
    /// Set by the monitor while the engine is over budget: workers wait.
    pub paused: AtomicBool,
    /// Set when the phase must end early (time limit, or a worker failed).
    pub stop: AtomicBool,
    /// Budget violations during the phase.
    pub violations: AtomicU64,
    /// Largest directory size sampled during the phase.
    pub peak_disk: AtomicU64,
    /// Set by the monitor when the phase hit its time limit.
    pub timed_out: AtomicBool,
}

impl PhaseGauges {
    /// Blocks while the workload is paused. Returns how long it waited and whether the caller
    /// should go on: false when the phase must stop or `abandon` says the caller's work is
    /// over. The wait is bounded by the monitor, which lifts a pause after at most
    /// [`super::budget::MAX_PAUSED_VIOLATIONS`] violations or stops the phase at its limit.
    pub fn wait_while_paused(&self, abandon: impl Fn() -> bool) -> (Duration, bool) {
        let started = Instant::now();
        while self.paused.load(Ordering::Relaxed) {
            if self.stop.load(Ordering::Relaxed) || abandon() {
                return (started.elapsed(), false);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (started.elapsed(), !self.stop.load(Ordering::Relaxed))
    }
}

struct ActivePhase {
    /// Counts the phases begun, so a phase that repeats an earlier one's name is still new.
    seq: u64,
    name: String,
    gauges: Arc<PhaseGauges>,
    started: Instant,
    /// Device I/O counters when the phase began.
    io_start: DeviceIo,
    /// Operations the phase aims for (progress-bar length).
    target: u64,
}

struct Shared {
    dir: PathBuf,
    engine: Arc<dyn Engine>,
    label: String,
    budget: Mutex<Budget>,
    phase: Mutex<Option<ActivePhase>>,
    phases_begun: AtomicU64,
    quit: AtomicBool,
    reclaim_running: Arc<AtomicBool>,
    reclaims: Mutex<Vec<JoinHandle<()>>>,
    reclaim_errors: Arc<Mutex<Vec<String>>>,
    samples: Mutex<Vec<Sample>>,
    /// Shows a progress bar on stderr.
    show_progress: bool,
    /// The current phase's bar (each phase gets a fresh one, fully set up before it draws).
    progress: Mutex<ProgressBar>,
    time_limit: Option<Duration>,
    started: Instant,
}

/// A running monitor; [`Monitor::finish`] stops it and returns the time series.
pub struct Monitor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Starts monitoring `engine`, whose files live in `dir`.
    pub fn start(
        dir: PathBuf,
        engine: Arc<dyn Engine>,
        label: String,
        budget: Budget,
        show_progress: bool,
        time_limit: Option<Duration>,
    ) -> Monitor {
        let shared = Arc::new(Shared {
            dir,
            engine,
            label,
            budget: Mutex::new(budget),
            phase: Mutex::new(None),
            phases_begun: AtomicU64::new(0),
            quit: AtomicBool::new(false),
            reclaim_running: Arc::new(AtomicBool::new(false)),
            reclaims: Mutex::new(Vec::new()),
            reclaim_errors: Arc::new(Mutex::new(Vec::new())),
            samples: Mutex::new(Vec::new()),
            show_progress,
            progress: Mutex::new(ProgressBar::hidden()),
            time_limit,
            started: Instant::now(),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bench-monitor".into())
            .spawn(move || monitor_loop(&s))
            .expect("spawn the monitor thread");
        Monitor {
            shared,
            thread: Some(thread),
        }
    }

    /// Starts phase `name` aiming for `target` operations; returns its gauges. The phase's
    /// starting directory size counts towards its peak.
    pub fn begin_phase(&self, name: &str, target: u64) -> Arc<PhaseGauges> {
        let gauges = Arc::new(PhaseGauges::default());
        gauges
            .peak_disk
            .store(dir_bytes(&self.shared.dir), Ordering::Relaxed);
        let mut phase = self.shared.phase.lock();
        let bar = phase_bar(self.shared.show_progress, &self.shared.label, name, target);
        std::mem::replace(&mut *self.shared.progress.lock(), bar).finish_and_clear();
        *phase = Some(ActivePhase {
            seq: self.shared.phases_begun.fetch_add(1, Ordering::Relaxed) + 1,
            name: name.to_string(),
            gauges: Arc::clone(&gauges),
            started: Instant::now(),
            io_start: DeviceIo::now(),
            target,
        });
        gauges
    }

    /// Ends the current phase: the workload is no longer paused or timed.
    pub fn end_phase(&self) {
        if let Some(p) = self.shared.phase.lock().take() {
            p.gauges.paused.store(false, Ordering::Relaxed);
            let disk = dir_bytes(&self.shared.dir);
            p.gauges.peak_disk.fetch_max(disk, Ordering::Relaxed);
        }
    }

    /// Prints `text` as one line on stderr, above the progress bar rather than through it.
    pub fn note(&self, text: &str) {
        self.shared.progress.lock().suspend(|| eprintln!("{text}"));
    }

    /// Seconds since the monitor started (the time axis of the samples).
    pub fn elapsed(&self) -> f64 {
        self.shared.started.elapsed().as_secs_f64()
    }

    /// Stops the monitor and clears its progress bar, waits for reclaim requests in flight, and returns the time series
    /// and the errors reclaim requests returned.
    pub fn finish(mut self) -> (Vec<Sample>, Vec<String>) {
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.progress.lock().finish_and_clear();
        for r in std::mem::take(&mut *self.shared.reclaims.lock()) {
            let _ = r.join();
        }
        let samples = std::mem::take(&mut *self.shared.samples.lock());
        let errors = std::mem::take(&mut *self.shared.reclaim_errors.lock());
        (samples, errors)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.shared.quit.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A progress bar for one phase, set up completely before it first draws.
fn phase_bar(show: bool, label: &str, phase: &str, target: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {human_pos}/{human_len} {msg}")
            .expect("static progress template")
            .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(target), ProgressDrawTarget::stderr_with_hz(4))
        .with_style(style)
        .with_prefix(format!("{label} {phase}"))
}

fn monitor_loop(s: &Shared) {
    let mut last_sample = Instant::now();
    let mut io_at_sample = DeviceIo::now();
    let mut done_at_sample = 0u64;
    let mut sampled_phase = 0u64;
    let mut series: Option<PhaseSeries> = None;
    let mut disk = dir_bytes(&s.dir);
    let mut last_tick = Instant::now();
    while !s.quit.load(Ordering::Relaxed) {
        std::thread::sleep(WAKE);
        let now = Instant::now();
        let tick = now.duration_since(last_tick) >= TICK;
        if tick {
            last_tick = now;
            disk = dir_bytes(&s.dir);
        }
        let phase = s.phase.lock();
        let Some(active) = phase.as_ref() else {
            // Between phases: the ended phase's series is complete.
            flush_series(s, series.take());
            continue;
        };
        let g = &active.gauges;
        if tick {
            g.peak_disk.fetch_max(disk, Ordering::Relaxed);
            let decision = s.budget.lock().sample(now.duration_since(s.started), disk);
            g.paused.store(decision.pause, Ordering::Relaxed);
            if decision.violation {
                g.violations.fetch_add(1, Ordering::Relaxed);
                request_reclaim(s);
            }
            if let Some(limit) = s.time_limit
                && active.started.elapsed() >= limit
                && !g.stop.swap(true, Ordering::Relaxed)
            {
                g.timed_out.store(true, Ordering::Relaxed);
            }
        }
        let done = g.done.load(Ordering::Relaxed);
        if tick {
            let bar = s.progress.lock();
            bar.set_position(done.min(active.target));
            bar.set_message(format!(
                "{:.0} ops/s  disk {:.1} MiB{}",
                done as f64 / active.started.elapsed().as_secs_f64().max(1e-3),
                disk as f64 / f64::from(1 << 20),
                if g.paused.load(Ordering::Relaxed) {
                    "  paused: over budget"
                } else {
                    ""
                }
            ));
        }
        if active.seq != sampled_phase {
            // A new phase: its first sample covers only its own time and operations.
            flush_series(s, series.take());
            sampled_phase = active.seq;
            done_at_sample = 0;
            last_sample = active.started;
            io_at_sample = active.io_start;
        }
        let current = series.get_or_insert_with(PhaseSeries::default);
        if now.duration_since(last_sample) >= current.interval() {
            let secs = now.duration_since(last_sample).as_secs_f64();
            let io = DeviceIo::now();
            let delta = io.since(&io_at_sample);
            let sample = Sample {
                t: now.duration_since(s.started).as_secs_f64(),
                phase: active.name.clone(),
                ops_per_sec: done.saturating_sub(done_at_sample) as f64 / secs,
                disk_bytes: disk,
                device_read_mb_s: delta.read_bytes as f64 / 1e6 / secs,
                device_write_mb_s: delta.write_bytes as f64 / 1e6 / secs,
            };
            current.push(sample, secs);
            last_sample = now;
            io_at_sample = io;
            done_at_sample = done;
        }
    }
    flush_series(s, series.take());
}

/// Appends a finished phase's samples to the engine's time series.
fn flush_series(s: &Shared, series: Option<PhaseSeries>) {
    if let Some(p) = series {
        s.samples.lock().extend(p.finish());
    }
}

/// Starts the engine's reclaim action on its own thread unless one is already running.
fn request_reclaim(s: &Shared) {
    if s.reclaim_running.swap(true, Ordering::AcqRel) {
        return;
    }
    let engine = Arc::clone(&s.engine);
    let running = Arc::clone(&s.reclaim_running);
    let sink = Arc::clone(&s.reclaim_errors);
    let handle = std::thread::Builder::new()
        .name("bench-reclaim".into())
        .spawn(move || {
            if let Err(e) = engine.reclaim() {
                let mut errors = sink.lock();
                if errors.len() < MAX_RECLAIM_ERRORS {
                    errors.push(e.to_string());
                }
            }
            running.store(false, Ordering::Release);
        });
    match handle {
        Ok(h) => {
            let mut reclaims = s.reclaims.lock();
            // Keep the list bounded: joined handles of finished requests are dropped.
            reclaims.retain(|h| !h.is_finished());
            reclaims.push(h);
        }
        Err(e) => {
            s.reclaim_running.store(false, Ordering::Release);
            let mut errors = s.reclaim_errors.lock();
            if errors.len() < MAX_RECLAIM_ERRORS {
                errors.push(format!("could not start a reclaim thread: {e}"));
            }
        }
    }
}
