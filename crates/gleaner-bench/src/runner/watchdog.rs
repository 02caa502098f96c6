//! The hang watchdog: an engine that stops making progress (no operation completes and the
//! process moves no bytes to or from the device) for longer than the hang timeout has hung —
//! a deadlock inside the engine, which no time limit can interrupt because its calls never
//! return. The watchdog then hands what the run has measured so far to a callback, which
//! writes it out and ends the process: a hung engine must not cost the other engines' results.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sys::DeviceIo;

/// Operations completed by every client of the process so far (the runner adds to it as
/// clients report progress).
static OPERATIONS: AtomicU64 = AtomicU64::new(0);

/// Counts `n` completed operations for the watchdog.
pub fn note_operations(n: u64) {
    OPERATIONS.fetch_add(n, Ordering::Relaxed);
}

/// How often the watchdog looks.
const POLL: Duration = Duration::from_millis(500);

/// What progress looks like from outside: operations completed and device bytes moved.
fn progress() -> (u64, u64, u64) {
    let io = DeviceIo::now();
    (
        OPERATIONS.load(Ordering::Relaxed),
        io.read_bytes,
        io.write_bytes,
    )
}

/// A running watchdog; stopping it (or dropping it) ends its thread.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching. When nothing progresses for `timeout`, `on_hang` runs (on the
    /// watchdog's thread) with how long nothing moved; it is expected to end the process.
    pub fn start(timeout: Duration, on_hang: impl FnOnce(Duration) + Send + 'static) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("bench-watchdog".into())
            .spawn(move || {
                let mut last = progress();
                let mut since = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL);
                    let now = progress();
                    if now != last {
                        last = now;
                        since = Instant::now();
                    } else if since.elapsed() >= timeout {
                        on_hang(since.elapsed());
                        return;
                    }
                }
            })
            .expect("spawning the watchdog thread");
        Watchdog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_when_nothing_moves_and_not_while_operations_complete() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(Duration::from_secs(2), move |idle| {
            let _ = tx.send(idle);
        });
        // Progress every 200 ms keeps it quiet for 3 s.
        for _ in 0..15 {
            note_operations(1);
            std::thread::sleep(Duration::from_millis(200));
            assert!(rx.try_recv().is_err(), "fired while operations completed");
        }
        let idle = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("fires once progress stops");
        assert!(idle >= Duration::from_secs(2), "{idle:?}");
        drop(dog);
    }
}
