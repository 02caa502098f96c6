//! State-machine tests: sequences of observations against a manual clock, checked against the
//! tables in the module documentation.

use std::time::Duration;

use super::*;
use crate::error::Error;

const LIVE: u64 = 1000;
const LOW: u64 = 1300;
const HIGH: u64 = 1500;

/// 1.3/1.5 of 1000 live bytes: low 1300, high 1500. A rate of 1000 B/s makes delays easy to
/// compute: at the midpoint (1400) the rate is 500 B/s, so 250 bytes take 0.5 s.
fn budget() -> SpaceBudget {
    SpaceBudget {
        space_budget_low: Some(1.3),
        space_budget_high: Some(1.5),
        throttle_write_rate: 1000,
        max_write_delay: Duration::from_secs(1),
        stop_timeout: Duration::from_secs(10),
        ..SpaceBudget::default()
    }
}

/// A throttle and the manual clock that drives it.
struct Rig {
    clock: ManualClock,
    throttle: SpaceThrottle,
}

impl Rig {
    fn new(budget: SpaceBudget) -> Self {
        Rig {
            clock: ManualClock::new(Duration::ZERO),
            throttle: SpaceThrottle::new(budget).expect("valid budget"),
        }
    }

    fn eval(&mut self, inputs: SpaceInputs) -> Decision {
        self.throttle.evaluate(inputs, self.clock.now())
    }

    fn put(&mut self, disk_bytes: u64, reclaimable: bool, bytes: u64) -> Decision {
        self.eval(SpaceInputs {
            disk_bytes,
            live_bytes: LIVE,
            reclaimable,
            write: WriteKind::Write { bytes },
        })
    }

    fn tick(&mut self, disk_bytes: u64, reclaimable: bool) -> Decision {
        self.eval(SpaceInputs {
            disk_bytes,
            live_bytes: LIVE,
            reclaimable,
            write: WriteKind::Tick,
        })
    }

    fn delete(&mut self, disk_bytes: u64, reclaimable: bool) -> Decision {
        self.eval(SpaceInputs {
            disk_bytes,
            live_bytes: LIVE,
            reclaimable,
            write: WriteKind::DeleteOnly,
        })
    }

    fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    fn stats(&self) -> ThrottleStats {
        self.throttle.stats(self.clock.now())
    }
}

fn is_fail(v: WriteVerdict) -> bool {
    matches!(v, WriteVerdict::Fail(_))
}

#[test]
fn disabled_budget_is_always_normal() {
    let mut rig = Rig::new(SpaceBudget::default());
    let d = rig.put(u64::MAX, false, 1 << 20);
    assert_eq!(d.band, Band::Normal);
    assert_eq!(d.write, WriteVerdict::Proceed);
    assert_eq!(
        d.gc,
        GcDirective {
            threads: 1,
            garbage_ratio: 0.2
        }
    );
    let s = rig.stats();
    assert!(!s.enabled);
    assert_eq!((s.low_limit_bytes, s.high_limit_bytes), (None, None));
}

#[test]
fn band_boundaries_exactly_at_low_and_high() {
    let mut rig = Rig::new(budget());
    let d = rig.put(LOW - 1, true, 100);
    assert_eq!((d.band, d.write), (Band::Normal, WriteVerdict::Proceed));
    let d = rig.put(LOW, true, 100);
    assert_eq!(d.band, Band::Throttled, "reaching low throttles");
    assert_eq!(
        d.write,
        WriteVerdict::Delay(Duration::from_millis(100)),
        "full rate at low"
    );
    let d = rig.put(HIGH - 1, true, 100);
    assert_eq!(d.band, Band::Throttled);
    assert_eq!(
        d.write,
        WriteVerdict::Delay(Duration::from_secs(1)),
        "capped"
    );
    let d = rig.put(HIGH, true, 100);
    assert_eq!((d.band, d.write), (Band::Stopped, WriteVerdict::Wait));
    assert_eq!(rig.throttle.band(), Band::Stopped);
}

#[test]
fn equal_limits_stop_without_a_throttled_band() {
    let mut rig = Rig::new(SpaceBudget {
        space_budget_low: Some(1.5),
        ..budget()
    });
    assert_eq!(rig.put(HIGH - 1, true, 100).write, WriteVerdict::Proceed);
    assert_eq!(rig.put(HIGH, true, 100).write, WriteVerdict::Wait);
}

#[test]
fn gc_directive_follows_the_band() {
    let mut rig = Rig::new(SpaceBudget {
        gc_threads: 1,
        gc_threads_max: 3,
        gc_garbage_ratio: 0.3,
        ..budget()
    });
    let normal = GcDirective {
        threads: 1,
        garbage_ratio: 0.3,
    };
    assert_eq!(rig.tick(LOW - 1, true).gc, normal);
    assert_eq!(
        rig.tick(LOW, true).gc,
        GcDirective {
            threads: 3,
            garbage_ratio: 0.3
        }
    );
    // Through the band the threshold falls linearly towards the urgent one.
    let mid = rig.tick(LOW + (HIGH - LOW) / 2, true).gc;
    assert_eq!(mid.threads, 3);
    assert!((mid.garbage_ratio - 0.225).abs() < 1e-9, "{mid:?}");
    let near = rig.tick(HIGH - 1, true).gc.garbage_ratio;
    assert!(near > 0.15 && near < 0.151, "{near}");
    assert_eq!(
        rig.tick(HIGH, true).gc,
        GcDirective {
            threads: 3,
            garbage_ratio: 0.15
        },
        "urgent ratio defaults to half"
    );
    assert_eq!(rig.tick(0, true).gc, normal, "back to normal");

    let mut rig = Rig::new(SpaceBudget {
        gc_garbage_ratio_urgent: Some(0.05),
        ..budget()
    });
    assert_eq!(rig.tick(HIGH, true).gc.garbage_ratio, 0.05);
}

#[test]
fn delay_grows_with_usage_and_is_capped() {
    let mut rig = Rig::new(budget());
    assert_eq!(
        rig.put(1400, true, 250).write,
        WriteVerdict::Delay(Duration::from_millis(500)),
        "midpoint: half the rate"
    );
    let mut prev = Duration::ZERO;
    for disk in 0..HIGH {
        let d = rig.put(disk, true, 250).write.delay();
        assert!(d >= prev, "delay fell from {prev:?} to {d:?} at {disk}");
        assert!(d <= Duration::from_secs(1));
        if disk < LOW {
            assert_eq!(d, Duration::ZERO, "no delay below low");
        }
        prev = d;
    }
    assert_eq!(prev, Duration::from_secs(1), "reaches the cap before high");
}

#[test]
fn zero_byte_write_and_zero_max_delay_proceed() {
    let mut rig = Rig::new(budget());
    assert_eq!(rig.put(1400, true, 0).write, WriteVerdict::Proceed);
    let mut rig = Rig::new(SpaceBudget {
        max_write_delay: Duration::ZERO,
        ..budget()
    });
    let d = rig.put(1499, true, 1 << 20);
    assert_eq!((d.band, d.write), (Band::Throttled, WriteVerdict::Proceed));
    assert_eq!(d.gc.threads, 2, "GC is still sped up");
    assert_eq!(rig.stats().delayed_writes, 0);
}

#[test]
fn max_disk_bytes_alone() {
    let mut rig = Rig::new(SpaceBudget {
        max_disk_bytes: Some(10_000),
        ..SpaceBudget::default()
    });
    for live in [0, 1, LIVE, 1 << 40] {
        let at = |rig: &mut Rig, disk_bytes| {
            rig.eval(SpaceInputs {
                disk_bytes,
                live_bytes: live,
                reclaimable: true,
                write: WriteKind::Write { bytes: 1 },
            })
            .band
        };
        assert_eq!(at(&mut rig, 8_999), Band::Normal, "live {live}");
        assert_eq!(at(&mut rig, 9_000), Band::Throttled, "90% of the cap");
        assert_eq!(at(&mut rig, 9_999), Band::Throttled);
        assert_eq!(at(&mut rig, 10_000), Band::Stopped);
    }
    let s = rig.stats();
    assert_eq!(
        (s.low_limit_bytes, s.high_limit_bytes),
        (Some(9_000), Some(10_000))
    );
}

#[test]
fn both_limits_the_smaller_wins() {
    // Ratio limits 1300/1500; cap 1400 gives 1260/1400.
    let mut rig = Rig::new(SpaceBudget {
        max_disk_bytes: Some(1400),
        ..budget()
    });
    assert_eq!(rig.put(1259, true, 1).band, Band::Normal);
    assert_eq!(rig.put(1260, true, 1).band, Band::Throttled, "cap's low");
    assert_eq!(rig.put(1400, true, 1).band, Band::Stopped, "cap's high");
    // A cap far above the ratio limits leaves the ratios in charge.
    let mut rig = Rig::new(SpaceBudget {
        max_disk_bytes: Some(1 << 40),
        ..budget()
    });
    assert_eq!(rig.put(LOW, true, 1).band, Band::Throttled);
    assert_eq!(rig.put(HIGH, true, 1).band, Band::Stopped);
}

#[test]
fn empty_database_is_normal_unless_the_cap_is_reached() {
    let mut rig = Rig::new(budget());
    let empty = |disk_bytes| SpaceInputs {
        disk_bytes,
        live_bytes: 0,
        reclaimable: false,
        write: WriteKind::Write { bytes: 1 << 20 },
    };
    let d = rig.eval(empty(1 << 40));
    assert_eq!((d.band, d.write), (Band::Normal, WriteVerdict::Proceed));
    let mut rig = Rig::new(SpaceBudget {
        max_disk_bytes: Some(1 << 30),
        ..budget()
    });
    assert_eq!(rig.eval(empty(1 << 20)).band, Band::Normal);
    assert_eq!(rig.eval(empty(1 << 30)).band, Band::Stopped);
}

#[test]
fn stop_then_resume_when_usage_falls() {
    let mut rig = Rig::new(budget());
    assert_eq!(rig.put(HIGH + 100, true, 10).write, WriteVerdict::Wait);
    rig.advance_ms(100);
    assert_eq!(rig.put(HIGH, true, 10).write, WriteVerdict::Wait);
    rig.advance_ms(100);
    let d = rig.put(HIGH - 1, true, 10);
    assert_eq!(
        d.band,
        Band::Throttled,
        "one byte below high resumes writes"
    );
    assert!(matches!(d.write, WriteVerdict::Delay(_)));
    let d = rig.put(LOW - 1, true, 10);
    assert_eq!((d.band, d.write), (Band::Normal, WriteVerdict::Proceed));
    // Normal → Stopped → Throttled → Normal.
    assert_eq!(rig.stats().transitions, 3);
}

#[test]
fn stop_fails_after_timeout_only_when_never_reclaimable() {
    let mut rig = Rig::new(budget());
    assert_eq!(rig.put(HIGH, false, 10).write, WriteVerdict::Wait);
    rig.advance_ms(9_999);
    assert_eq!(rig.put(HIGH, false, 10).write, WriteVerdict::Wait);
    rig.advance_ms(1);
    let d = rig.put(HIGH + 7, false, 10);
    assert_eq!(
        d.write,
        WriteVerdict::Fail(StopFailure {
            disk_bytes: HIGH + 7,
            high_limit_bytes: HIGH,
            unreclaimable_for: Duration::from_secs(10),
        })
    );
    rig.advance_ms(1);
    assert!(is_fail(rig.put(HIGH, false, 10).write), "keeps failing");
    assert_eq!(rig.stats().failed_writes, 2);
    // Something reclaimable again: writes wait instead of failing.
    assert_eq!(rig.put(HIGH, true, 10).write, WriteVerdict::Wait);
}

#[test]
fn reclaimable_throughout_never_fails() {
    let mut rig = Rig::new(budget());
    for _ in 0..100 {
        assert_eq!(rig.put(HIGH, true, 10).write, WriteVerdict::Wait);
        rig.advance_ms(1_000);
    }
    assert_eq!(rig.stats().stop_waits, 100);
}

#[test]
fn reclaimable_resets_the_stop_timer() {
    let mut rig = Rig::new(budget());
    rig.put(HIGH, false, 10);
    rig.advance_ms(6_000);
    assert_eq!(
        rig.tick(HIGH, true).write,
        WriteVerdict::Proceed,
        "a tick observes reclaimable"
    );
    rig.advance_ms(6_000);
    assert_eq!(
        rig.put(HIGH, false, 10).write,
        WriteVerdict::Wait,
        "12 s stopped but only 6 s unreclaimable"
    );
    rig.advance_ms(3_999);
    assert_eq!(rig.put(HIGH, false, 10).write, WriteVerdict::Wait);
    rig.advance_ms(1);
    assert!(
        is_fail(rig.put(HIGH, false, 10).write),
        "10 s since reclaimable"
    );
}

#[test]
fn dropping_below_high_restarts_the_stop_timer() {
    let mut rig = Rig::new(budget());
    rig.put(HIGH, false, 10);
    rig.advance_ms(9_000);
    rig.tick(HIGH - 1, false);
    rig.advance_ms(1);
    assert_eq!(rig.put(HIGH, false, 10).write, WriteVerdict::Wait);
    rig.advance_ms(9_999);
    assert_eq!(rig.put(HIGH, false, 10).write, WriteVerdict::Wait);
    rig.advance_ms(1);
    assert!(is_fail(rig.put(HIGH, false, 10).write));
}

#[test]
fn writer_arriving_after_the_timeout_fails_at_once() {
    let mut rig = Rig::new(budget());
    rig.tick(HIGH, false);
    rig.advance_ms(60_000);
    assert!(is_fail(rig.put(HIGH, false, 10).write));
}

#[test]
fn zero_stop_timeout_fails_when_nothing_is_reclaimable() {
    let mut rig = Rig::new(SpaceBudget {
        stop_timeout: Duration::ZERO,
        ..budget()
    });
    assert_eq!(rig.put(HIGH, true, 10).write, WriteVerdict::Wait);
    assert!(is_fail(rig.put(HIGH, false, 10).write));
}

#[test]
fn deletes_pass_when_stopped() {
    let mut rig = Rig::new(budget());
    let d = rig.delete(HIGH, false);
    assert_eq!((d.band, d.write), (Band::Stopped, WriteVerdict::Proceed));
    rig.advance_ms(60_000);
    assert!(is_fail(rig.put(HIGH, false, 10).write));
    assert_eq!(
        rig.delete(HIGH, false).write,
        WriteVerdict::Proceed,
        "even after puts fail"
    );
    assert_eq!(
        rig.delete(1499, false).write,
        WriteVerdict::Proceed,
        "not delayed when throttled"
    );
    let s = rig.stats();
    assert_eq!((s.deletes_while_stopped, s.delayed_writes), (2, 0));
}

#[test]
fn stats_seconds_accumulate_exactly() {
    let mut rig = Rig::new(budget());
    rig.tick(0, true); // t = 0: Normal.
    rig.advance_ms(2_000);
    // t = 2: Throttled at the midpoint: 250 bytes at 500 B/s is 0.5 s.
    assert_eq!(
        rig.put(1400, true, 250).write.delay(),
        Duration::from_millis(500)
    );
    rig.advance_ms(1_500);
    // t = 3.5: 0.25 s more delay (125 bytes), still Throttled.
    assert_eq!(
        rig.put(1400, true, 125).write.delay(),
        Duration::from_millis(250)
    );
    rig.advance_ms(1_000);
    rig.put(HIGH, true, 1); // t = 4.5: Stopped.
    rig.advance_ms(750);
    rig.tick(HIGH, true); // t = 5.25: still Stopped.
    rig.advance_ms(500);
    // t = 5.75, no evaluation yet: the snapshot counts the open interval in Stopped.
    let s = rig.stats();
    assert_eq!(s.throttled_seconds, 2.5);
    assert_eq!(s.stopped_seconds, 1.25);
    assert_eq!(s.write_delay_seconds, 0.75);
    assert_eq!((s.delayed_writes, s.stop_waits), (2, 1));
    assert_eq!(s.band, Band::Stopped);
    rig.tick(0, true); // t = 5.75: Normal again.
    rig.advance_ms(10_000);
    let s = rig.stats();
    assert_eq!(
        (s.throttled_seconds, s.stopped_seconds),
        (2.5, 1.25),
        "normal time is not counted"
    );
    assert_eq!(s.transitions, 3);
    assert_eq!((s.disk_bytes, s.live_bytes), (0, LIVE));
    assert_eq!(
        (s.low_limit_bytes, s.high_limit_bytes),
        (Some(LOW), Some(HIGH))
    );
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["band"], "normal");
    assert_eq!(json["stopped_seconds"], 1.25);
}

#[test]
fn time_before_the_first_evaluation_is_not_counted() {
    let mut rig = Rig::new(budget());
    rig.advance_ms(5_000);
    rig.put(HIGH, true, 1);
    assert_eq!(rig.stats().stopped_seconds, 0.0);
}

#[test]
fn clock_going_backwards_is_clamped() {
    let mut t = SpaceThrottle::new(budget()).expect("valid");
    let stop = SpaceInputs {
        disk_bytes: HIGH,
        live_bytes: LIVE,
        reclaimable: false,
        write: WriteKind::Write { bytes: 1 },
    };
    t.evaluate(stop, Duration::from_secs(20));
    let d = t.evaluate(stop, Duration::from_secs(5));
    assert_eq!(d.write, WriteVerdict::Wait, "no time passed");
    assert_eq!(t.stats(Duration::from_secs(1)).stopped_seconds, 0.0);
    assert!(is_fail(t.evaluate(stop, Duration::from_secs(30)).write));
}

#[test]
fn new_rejects_an_invalid_budget() {
    let err = SpaceThrottle::new(SpaceBudget {
        space_budget_low: Some(1.6),
        ..budget()
    })
    .expect_err("low above high");
    assert!(matches!(err, Error::InvalidArgument(_)));
    assert!(err.to_string().contains("space_budget_low"), "{err}");
}

#[test]
fn failure_message_names_usage_and_limit() {
    let f = StopFailure {
        disk_bytes: 1507,
        high_limit_bytes: 1500,
        unreclaimable_for: Duration::from_millis(10_250),
    };
    let msg = f.to_string();
    assert!(msg.contains("1507 bytes on disk"), "{msg}");
    assert!(msg.contains("limit of 1500 bytes"), "{msg}");
    assert!(msg.contains("10.2 s") || msg.contains("10.3 s"), "{msg}");
}
