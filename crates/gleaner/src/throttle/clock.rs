//! Time sources for the throttle: the real monotonic clock and a manual clock for tests and
//! simulations. The throttle takes `now` as an argument, so its decisions are reproducible
//! from a recorded sequence of inputs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source.
pub trait Clock: Send + Sync {
    /// Time elapsed since a fixed origin chosen by the clock. Never decreases between calls.
    fn now(&self) -> Duration;
}

/// The real clock: [`Instant`] measured from the moment the clock was created. `Instant` rather
/// than wall time because wall time can jump backwards (NTP, manual changes) and the throttle
/// measures intervals.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to, for tests and simulations. Shareable between threads
/// (an engine under test and the test driving it) because it is atomic.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start`. Times beyond about 584 years saturate.
    pub fn new(start: Duration) -> Self {
        ManualClock {
            nanos: AtomicU64::new(to_nanos(start)),
        }
    }

    /// Moves the clock forward by `by` (saturating). There is no way to move it back, so the
    /// [`Clock`] contract holds for every reader.
    pub fn advance(&self, by: Duration) {
        let by = to_nanos(by);
        // fetch_update so concurrent advances add up instead of overwriting each other.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

fn to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let c = ManualClock::new(Duration::from_secs(5));
        assert_eq!(c.now(), Duration::from_secs(5));
        assert_eq!(c.now(), Duration::from_secs(5));
        c.advance(Duration::from_millis(250));
        assert_eq!(c.now(), Duration::from_millis(5250));
        c.advance(Duration::MAX);
        assert_eq!(c.now(), Duration::from_nanos(u64::MAX), "saturates");
    }

    #[test]
    fn monotonic_clock_never_goes_back() {
        let c = MonotonicClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
    }

    #[test]
    fn clocks_are_usable_as_trait_objects() {
        let clocks: Vec<Box<dyn Clock>> = vec![
            Box::new(MonotonicClock::default()),
            Box::new(ManualClock::new(Duration::ZERO)),
        ];
        for c in &clocks {
            let _ = c.now();
        }
    }
}
