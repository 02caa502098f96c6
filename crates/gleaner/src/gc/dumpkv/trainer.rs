//! DumpKV's training off the GC threads: a policy task ([`PolicyTasks`]) waits for training
//! sets and fits each on a thread of its own at the lowest priority, so a training (about a
//! second of one core per 128 Ki rows) takes what CPU the foreground leaves. `close()` does not
//! wait for a fit: the task gives it up, and the fit thread, which holds nothing but its rows,
//! ends on its own and its model is dropped — no file is written once `close()` returned.
//!
//! Under `inline_background_work`, or without GC threads (`gc_threads = 0`, GC only in
//! `Db::run_gc`), there is no background: a training runs at the end of the GC job that made it
//! due, on that job's thread, so the model is a function of the sequence of jobs and a run
//! replays.

use std::sync::mpsc::{self, TryRecvError};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::features::FEATURES;
use super::model::{Model, TrainError};
use crate::gc::runtime::{PolicyTasks, TaskStop};

/// A training set: the model's inputs and their labels (long = `true`).
pub type TrainingSet = (Vec<[f32; FEATURES]>, Vec<bool>);

/// What a fit gives: the model or why none, and how long it took (wall time).
pub type Fitted = (Result<Model, TrainError>, Duration);

/// Longest the task sleeps between looks at its slot when nothing wakes it (a backstop: the
/// hand-over and the fit's end wake it).
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// The name of the policy task (its thread is `gleaner-policy-dumpkv-train`).
pub const TASK_NAME: &str = "dumpkv-train";

/// The hand-over between the GC thread that made a training due and the task. Holds at most
/// one set: the next becomes due only after this one's model was installed (or given up).
#[derive(Debug)]
pub struct Trainer {
    tasks: PolicyTasks,
    pending: Mutex<Option<(TrainingSet, u64)>>,
}

impl Trainer {
    /// A trainer whose task runs among `tasks` (started by [`Trainer::run`]).
    pub fn new(tasks: PolicyTasks) -> Self {
        Trainer {
            tasks,
            pending: Mutex::new(None),
        }
    }

    /// Gives the task `set` to fit, for a model in writes of `unit`.
    pub fn hand_over(&self, set: TrainingSet, unit: u64) {
        let previous = self.pending.lock().replace((set, unit));
        debug_assert!(previous.is_none(), "one training at a time");
        self.tasks.wake();
    }

    /// The task's body: fits each set handed over, passing the result to `finish` (on this
    /// thread), until `close()` stops it. Returns whether a training was given up for the stop
    /// (a fit running, or a set handed over and not yet taken): every training handed over is
    /// then finished or given up.
    pub fn run(&self, stop: &TaskStop, finish: impl Fn(Fitted)) -> bool {
        loop {
            let next = self.pending.lock().take();
            if let Some((set, unit)) = next {
                match fit_in_background(&self.tasks, stop, move || {
                    Model::train(&set.0, &set.1, unit)
                }) {
                    Some(fitted) => finish(fitted),
                    None => return true,
                }
                continue;
            }
            if stop.wait(IDLE_WAIT) {
                return self.pending.lock().take().is_some();
            }
        }
    }
}

/// Runs `fit` on a thread of its own at the lowest priority and waits for it; `None` if the
/// tasks were stopped first (the thread is left to end alone, its result dropped). A fit
/// thread that cannot start, or panics, gives `TrainError::Crate`.
pub fn fit_in_background(
    tasks: &PolicyTasks,
    stop: &TaskStop,
    fit: impl FnOnce() -> Result<Model, TrainError> + Send + 'static,
) -> Option<Fitted> {
    let (tx, rx) = mpsc::sync_channel::<Fitted>(1);
    let waker = tasks.clone();
    let spawned = std::thread::Builder::new()
        .name("gleaner-dumpkv-fit".into())
        .spawn(move || {
            lower_priority();
            let start = Instant::now();
            let result = fit();
            // The receiver is gone if the task gave up: the model is dropped.
            let _ = tx.send((result, start.elapsed()));
            waker.wake();
        });
    if let Err(e) = spawned {
        let why = format!("cannot start the fit thread: {e}");
        return Some((Err(TrainError::Crate(why)), Duration::ZERO));
    }
    loop {
        match rx.try_recv() {
            Ok(fitted) => return Some(fitted),
            Err(TryRecvError::Disconnected) => {
                let why = "the fit thread panicked".to_string();
                return Some((Err(TrainError::Crate(why)), Duration::ZERO));
            }
            Err(TryRecvError::Empty) => {}
        }
        if stop.wait(IDLE_WAIT) {
            return None;
        }
    }
}

/// Gives the calling thread the lowest priority of its scheduling policy (niceness 19 for
/// ordinary Linux threads): it runs on what CPU other threads leave, and still progresses.
/// Lowering needs no privilege; a platform that refuses it leaves the thread as it was.
fn lower_priority() {
    if let Err(e) = thread_priority::set_current_thread_priority(thread_priority::ThreadPriority::Min)
    {
        log::debug!("dumpkv: the fit thread keeps its priority: {e:?}");
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;

    fn one_label() -> Result<Model, TrainError> {
        Err(TrainError::OneLabel)
    }

    /// The calling thread's niceness, from `/proc` (field 19 of its `stat`).
    #[cfg(target_os = "linux")]
    fn niceness() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("proc");
        let after_name = &stat[stat.rfind(')').expect("comm") + 1..];
        let field = after_name.split_whitespace().nth(16).expect("nice");
        field.parse().expect("a number")
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fit_runs_at_the_lowest_priority_and_its_end_wakes_the_task() {
        let tasks = PolicyTasks::new(Path::new("/db"), false);
        let (tx, rx) = mpsc::channel();
        let waker = tasks.clone();
        tasks
            .spawn("probe", move |stop| {
                let fitted = fit_in_background(&waker, &stop, move || {
                    tx.send(niceness()).expect("the test waits");
                    one_label()
                });
                assert!(matches!(fitted, Some((Err(TrainError::OneLabel), _))));
            })
            .expect("spawn");
        let before = niceness();
        let nice = rx.recv_timeout(Duration::from_secs(60)).expect("the fit ran");
        assert_eq!(nice, 19);
        // Lowering is per thread: the test's own (however the runner started it) is untouched.
        assert_eq!(niceness(), before, "the test's own thread is untouched");
        // The task returns once the fit's result arrived, not after its 60 s backstop: the
        // join below is quick (and were it not, the stop would still end the wait).
        tasks.stop_and_join();
    }

    #[test]
    fn close_gives_up_a_running_fit_and_drops_its_model() {
        let tasks = PolicyTasks::new(Path::new("/db"), false);
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (outcome_tx, outcome) = mpsc::channel();
        let waker = tasks.clone();
        tasks
            .spawn(TASK_NAME, move |stop| {
                // The fit blocks until the test releases it, after the stop.
                let fitted = fit_in_background(&waker, &stop, move || {
                    started_tx.send(()).expect("the test waits");
                    release_rx.recv().expect("released");
                    one_label()
                });
                outcome_tx.send(fitted.is_none()).expect("the test waits");
            })
            .expect("spawn");
        started
            .recv_timeout(Duration::from_secs(60))
            .expect("the fit started");
        tasks.stop_and_join();
        assert!(
            outcome.recv().expect("the task ended"),
            "the stop gave the fit up"
        );
        release.send(()).expect("the fit thread still runs, alone");
    }

    #[test]
    fn the_trainer_fits_what_is_handed_over_and_stops_when_idle() {
        let tasks = PolicyTasks::new(Path::new("/db"), false);
        let trainer = Arc::new(Trainer::new(tasks.clone()));
        let (fitted_tx, fitted) = mpsc::channel();
        let t = Arc::clone(&trainer);
        let (gave_up_tx, gave_up) = mpsc::channel();
        tasks
            .spawn(TASK_NAME, move |stop| {
                let g = t.run(&stop, |f| fitted_tx.send(f.0.is_err()).expect("waits"));
                gave_up_tx.send(g).expect("waits");
            })
            .expect("spawn");
        // One label only: the fit fails fast with `OneLabel`, the result still comes back.
        for _ in 0..2 {
            trainer.hand_over((vec![[0.0; FEATURES]; 4], vec![true; 4]), 1 << 10);
            assert!(fitted.recv_timeout(Duration::from_secs(60)).expect("fitted"));
        }
        tasks.stop_and_join();
        assert!(!gave_up.recv().expect("ended"), "idle at the stop");
    }
}
