//! What a GC policy is given when it is built at open ([`PolicyContext`]): the database's
//! options, directory and recovered version, files of its own ([`PolicyFiles`]) and threads for
//! background tasks that `close()` stops and waits for ([`PolicyTasks`]).

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::policy_file::PolicyFiles;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::version::Version;

/// Most background tasks one policy may run.
pub const MAX_POLICY_TASKS: usize = 8;

/// Longest `close()` waits for a policy's task to notice it should stop; one still running then
/// is left behind, with an error in the log.
pub const POLICY_TASK_STOP_WAIT: Duration = Duration::from_secs(30);

/// What a policy's builder is given at open.
#[derive(Debug)]
pub struct PolicyContext<'a> {
    /// The database's options.
    pub opts: &'a Options,
    /// The database's directory (files go through `opts.file_system()`).
    pub dir: &'a Path,
    /// The version recovered from the manifest (empty for a new database).
    pub version: &'a Version,
    /// A read-only open: nothing may be written, and no task runs.
    pub read_only: bool,
    /// The policy's own files.
    pub files: PolicyFiles,
    /// The policy's background tasks.
    pub tasks: PolicyTasks,
}

/// The background tasks of one policy in one database. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PolicyTasks {
    inner: Arc<TasksInner>,
}

#[derive(Debug)]
struct TasksInner {
    /// The database directory of a read-only open (which runs no task), for the error.
    read_only: Option<String>,
    state: Mutex<TasksState>,
    /// Signalled when the tasks are asked to stop, and when one ends.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct TasksState {
    stopping: bool,
    /// Counts [`PolicyTasks::wake`] calls: a task's wait ends when it moves.
    wakes: u64,
    running: usize,
    threads: Vec<JoinHandle<()>>,
}

/// What a task is given: whether to stop, and a sleep the stop (or a wake) interrupts.
#[derive(Debug, Clone)]
pub struct TaskStop {
    inner: Arc<TasksInner>,
    /// The wakes this task has seen: a wake that comes before its wait is not lost.
    seen: std::cell::Cell<u64>,
}

impl TaskStop {
    /// Whether `close()` asked the tasks to stop.
    pub fn is_stopped(&self) -> bool {
        self.inner.state.lock().stopping
    }

    /// Sleeps up to `timeout`, less if the tasks are asked to stop or [`PolicyTasks::wake`]
    /// was called since this task's last wait; returns whether they were asked to stop.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.state.lock();
        while !st.stopping && st.wakes == self.seen.get() {
            if self.inner.changed.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        self.seen.set(st.wakes);
        st.stopping
    }
}

impl PolicyTasks {
    /// The tasks of a database at `dir`; none runs on a `read_only` one.
    pub(crate) fn new(dir: &Path, read_only: bool) -> Self {
        PolicyTasks {
            inner: Arc::new(TasksInner {
                read_only: read_only.then(|| dir.display().to_string()),
                state: Mutex::new(TasksState::default()),
                changed: Condvar::new(),
            }),
        }
    }

    /// Runs `task` on a thread of its own named `gleaner-policy-NAME`; `close()` asks it to
    /// stop (through its [`TaskStop`]) and waits for it.
    ///
    /// Errors: [`Error::OpenedReadOnly`] on a read-only open; [`Error::InvalidArgument`]
    /// beyond [`MAX_POLICY_TASKS`]; [`Error::Closed`] once the database is closing; the
    /// thread cannot start.
    pub fn spawn(&self, name: &str, task: impl FnOnce(TaskStop) + Send + 'static) -> Result<()> {
        if let Some(path) = &self.inner.read_only {
            return Err(Error::OpenedReadOnly {
                path: path.clone(),
                operation: "run a policy task",
            });
        }
        let mut st = self.inner.state.lock();
        if st.stopping {
            return Err(Error::Closed);
        }
        if st.threads.len() >= MAX_POLICY_TASKS {
            return Err(Error::invalid(format!(
                "a policy runs at most {MAX_POLICY_TASKS} tasks (MAX_POLICY_TASKS)"
            )));
        }
        let stop = TaskStop {
            inner: Arc::clone(&self.inner),
            seen: std::cell::Cell::new(st.wakes),
        };
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name(format!("gleaner-policy-{name}"))
            .spawn(move || {
                // Counted as ended even if the task panics.
                struct Ended(Arc<TasksInner>);
                impl Drop for Ended {
                    fn drop(&mut self) {
                        self.0.state.lock().running -= 1;
                        self.0.changed.notify_all();
                    }
                }
                let _ended = Ended(inner);
                task(stop);
            })
            .map_err(|e| Error::invalid(format!("cannot start policy task {name}: {e}")))?;
        st.running += 1;
        st.threads.push(handle);
        Ok(())
    }

    /// Ends the current [`TaskStop::wait`] of every task (or its next one, if it is not
    /// waiting): work was handed to it.
    pub fn wake(&self) {
        self.inner.state.lock().wakes += 1;
        self.inner.changed.notify_all();
    }

    /// Asks every task to stop and waits for them, each at most [`POLICY_TASK_STOP_WAIT`];
    /// no task starts afterwards.
    pub(crate) fn stop_and_join(&self) {
        let threads = {
            let mut st = self.inner.state.lock();
            st.stopping = true;
            self.inner.changed.notify_all();
            let deadline = Instant::now() + POLICY_TASK_STOP_WAIT;
            while st.running > 0 {
                if self.inner.changed.wait_until(&mut st, deadline).timed_out() {
                    break;
                }
            }
            if st.running > 0 {
                log::error!(
                    "{} policy task(s) did not stop within {POLICY_TASK_STOP_WAIT:?}; left running",
                    st.running
                );
                return;
            }
            std::mem::take(&mut st.threads)
        };
        for t in threads {
            // Ended already; a task that panicked has nothing to clean up.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn tasks_run_until_asked_to_stop_and_close_waits_for_them() {
        let tasks = PolicyTasks::new(Path::new("/db"), false);
        let ticks = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        for _ in 0..2 {
            let (ticks, done) = (Arc::clone(&ticks), Arc::clone(&done));
            tasks
                .spawn("ticker", move |stop| {
                    while !stop.wait(Duration::from_millis(1)) {
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                })
                .expect("spawn");
        }
        tasks.stop_and_join();
        assert_eq!(
            done.load(Ordering::Relaxed),
            2,
            "both ended before the join returned"
        );
        assert!(matches!(tasks.spawn("late", |_| {}), Err(Error::Closed)));
        let ro = PolicyTasks::new(Path::new("/db"), true);
        assert!(matches!(
            ro.spawn("x", |_| {}),
            Err(Error::OpenedReadOnly { .. })
        ));
        let many = PolicyTasks::new(Path::new("/db"), false);
        for _ in 0..MAX_POLICY_TASKS {
            many.spawn("idle", |stop| while !stop.wait(Duration::from_secs(1)) {})
                .expect("within the bound");
        }
        assert!(many.spawn("one more", |_| {}).is_err());
        many.stop_and_join();
    }

    #[test]
    fn a_wake_ends_a_wait_and_is_not_lost_before_it() {
        let tasks = PolicyTasks::new(Path::new("/db"), false);
        let (woken, rx) = std::sync::mpsc::channel();
        tasks
            .spawn("sleeper", move |stop| {
                // An hour per wait: only a wake or the stop ends one within the test.
                while !stop.wait(Duration::from_secs(3600)) {
                    woken.send(()).expect("the test waits");
                }
            })
            .expect("spawn");
        // Possibly before the task's first wait: it must still see it.
        for _ in 0..3 {
            tasks.wake();
            rx.recv_timeout(Duration::from_secs(60))
                .expect("woken by wake(), not by its hour-long timeout");
        }
        tasks.stop_and_join();
    }
}
