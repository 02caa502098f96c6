//! The time series of one phase: samples every [`FINE`] while the phase is young, coarsened to
//! one every [`COARSE`] once it has run long enough to have [`MIN_POINTS`] of those, and at the
//! phase's end merged down to the coarsest interval that still gives it [`MIN_POINTS`] points. So
//! a phase of a few seconds is a curve of 20 to 40 points rather than two or three, a long one
//! costs one sample a second as before, and no interval is shorter than [`FINE`]. A phase shorter
//! than `MIN_POINTS × FINE` (one second) gets one point per [`FINE`] it ran. Pure: the monitor
//! feeds it measurements, the tests feed it numbers.

use std::time::Duration;

use crate::results::Sample;

/// The shortest sample interval.
pub const FINE: Duration = Duration::from_millis(50);
/// The interval of a long phase's samples.
pub const COARSE: Duration = Duration::from_secs(1);
/// Points a phase gets when it runs long enough for them at [`FINE`] or coarser.
pub const MIN_POINTS: usize = 20;

/// Fine intervals per coarse one.
const PER_COARSE: usize = (COARSE.as_millis() / FINE.as_millis()) as usize;

/// One sample with the length of the interval it covers, so samples can be merged.
#[derive(Debug, Clone)]
struct Span {
    sample: Sample,
    secs: f64,
}

/// The samples of the running phase.
#[derive(Debug, Default)]
pub struct PhaseSeries {
    spans: Vec<Span>,
    coarse: bool,
}

impl PhaseSeries {
    /// How long the next sample should cover.
    pub fn interval(&self) -> Duration {
        if self.coarse { COARSE } else { FINE }
    }

    /// Adds the sample `s`, covering the `secs` seconds since the previous one. Once the phase
    /// has [`MIN_POINTS`] seconds of fine samples they are merged into one per second and the
    /// series goes on at [`COARSE`]; so it holds at most `MIN_POINTS × COARSE / FINE` fine
    /// samples, then one a second.
    pub fn push(&mut self, s: Sample, secs: f64) {
        self.spans.push(Span { sample: s, secs });
        if !self.coarse && self.spans.len() >= MIN_POINTS * PER_COARSE {
            self.spans = merge_groups(std::mem::take(&mut self.spans), PER_COARSE);
            self.coarse = true;
        }
    }

    /// The phase's samples: at [`COARSE`] when it ran that long, otherwise its fine samples
    /// merged in equal groups, as large as still leaves [`MIN_POINTS`] of them.
    pub fn finish(self) -> Vec<Sample> {
        let spans = if self.coarse {
            self.spans
        } else {
            let group = (self.spans.len() / MIN_POINTS).max(1);
            merge_groups(self.spans, group)
        };
        spans.into_iter().map(|s| s.sample).collect()
    }
}

/// Merges consecutive runs of `group` spans into one (a shorter last run stays a point of its
/// own): rates weighted by time, the level (directory size) and time stamp of the last.
fn merge_groups(spans: Vec<Span>, group: usize) -> Vec<Span> {
    if group <= 1 {
        return spans;
    }
    spans.chunks(group).map(merge).collect()
}

fn merge(spans: &[Span]) -> Span {
    let last = spans.last().expect("chunks are never empty");
    let secs: f64 = spans.iter().map(|s| s.secs).sum();
    let rate = |f: fn(&Sample) -> f64| {
        if secs > 0.0 {
            spans.iter().map(|s| f(&s.sample) * s.secs).sum::<f64>() / secs
        } else {
            f(&last.sample)
        }
    };
    Span {
        sample: Sample {
            t: last.sample.t,
            phase: last.sample.phase.clone(),
            ops_per_sec: rate(|s| s.ops_per_sec),
            disk_bytes: last.sample.disk_bytes,
            device_read_mb_s: rate(|s| s.device_read_mb_s),
            device_write_mb_s: rate(|s| s.device_write_mb_s),
        },
        secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` fine samples of a phase whose rate is `i` at sample `i`, as the monitor does.
    fn phase(n: usize) -> PhaseSeries {
        let mut p = PhaseSeries::default();
        let mut t = 0.0;
        for i in 0..n {
            let secs = p.interval().as_secs_f64();
            t += secs;
            p.push(
                Sample {
                    t,
                    phase: "update".into(),
                    ops_per_sec: i as f64,
                    disk_bytes: i as u64,
                    device_read_mb_s: 1.0,
                    device_write_mb_s: 2.0,
                },
                secs,
            );
        }
        p
    }

    #[test]
    fn a_short_phase_keeps_every_fine_sample() {
        let s = phase(7).finish();
        assert_eq!(s.len(), 7, "under a second: one point per 50 ms");
        assert!((s[6].t - 0.35).abs() < 1e-9);
    }

    #[test]
    fn a_phase_of_a_few_seconds_gets_at_least_twenty_points() {
        for fine in [20, 21, 39, 40, 59, 100, 399] {
            let s = phase(fine).finish();
            assert!(
                (MIN_POINTS..2 * MIN_POINTS + 1).contains(&s.len()),
                "{fine} fine samples gave {} points",
                s.len()
            );
            // No interval below 50 ms, and the last point ends where the phase's samples did.
            let secs = fine as f64 * FINE.as_secs_f64();
            assert!((s.last().expect("points").t - secs).abs() < 1e-9);
            assert!(s.windows(2).all(|w| w[1].t - w[0].t >= 0.05 - 1e-9));
        }
    }

    #[test]
    fn a_long_phase_goes_on_at_one_sample_a_second_with_rates_weighted_by_time() {
        let mut p = phase(MIN_POINTS * PER_COARSE);
        assert_eq!(p.interval(), COARSE);
        p.push(
            Sample {
                t: 21.0,
                phase: "update".into(),
                ops_per_sec: 1e6,
                ..Sample::default()
            },
            1.0,
        );
        let s = p.finish();
        assert_eq!(s.len(), MIN_POINTS + 1);
        // The first second merged fine samples 0..20: their mean rate, the last one's size.
        assert!(
            (s[0].ops_per_sec - 9.5).abs() < 1e-9,
            "{}",
            s[0].ops_per_sec
        );
        assert_eq!(s[0].disk_bytes, 19);
        assert!((s[0].t - 1.0).abs() < 1e-9);
        assert!((s[0].device_write_mb_s - 2.0).abs() < 1e-9);
        assert_eq!(s[MIN_POINTS].ops_per_sec, 1e6);
    }
}
