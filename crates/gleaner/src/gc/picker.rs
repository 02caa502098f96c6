//! Victim selection: a pure choice over candidates that carry the whole metadata of each live
//! value table, so greedy, age-based, TTL-based and learned pickers all fit. No I/O; every
//! picker is unit-tested on plain values.

use crate::key::SeqNo;
use crate::version::PolicyTableMeta;

/// What a picker sees of one live value table that no GC job is collecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VictimCandidate<'a> {
    /// Table number (numbers grow with creation, so a smaller number is an older table).
    pub number: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// Records in the table.
    pub records: u64,
    /// Bytes of those records.
    pub record_bytes: u64,
    /// Records known to be garbage.
    pub garbage_records: u64,
    /// Bytes of those records.
    pub garbage_bytes: u64,
    /// Class tag of the table (the value router's class number).
    pub class: u32,
    /// Smallest sequence number of its records.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of its records.
    pub largest_seq: SeqNo,
    /// The metadata the policy that wrote the table gave it (check its `tag`: a table written
    /// under another policy carries that one's, or none).
    pub policy_meta: Option<&'a PolicyTableMeta>,
    /// When every record of the table expires, the latest expiry (milliseconds since the Unix
    /// epoch): the table is then deleted whole, without a job. A table that expires within
    /// `gc_expiry_wait_ms` is not a candidate at all unless the space throttle presses.
    pub max_expiry: Option<u64>,
}

impl VictimCandidate<'_> {
    /// Records not (yet) known to be garbage ÷ records (0 for an empty table): NovKV's valid
    /// rate.
    pub fn valid_rate(&self) -> f64 {
        if self.records == 0 {
            0.0
        } else {
            (self.records - self.garbage_records.min(self.records)) as f64 / self.records as f64
        }
    }

    /// Garbage bytes ÷ record bytes (1 for an empty table).
    pub fn garbage_ratio(&self) -> f64 {
        if self.record_bytes == 0 {
            1.0
        } else {
            self.garbage_bytes as f64 / self.record_bytes as f64
        }
    }
}

/// What a picker may take into account besides the candidates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PickContext {
    /// Most bytes of victims one job reads (option `gc_max_input_size`); a single larger table
    /// is still chosen alone.
    pub max_input: u64,
    /// When set, replaces the policy's own garbage-ratio threshold: the space throttle lowers
    /// it while writes are stopped.
    pub garbage_ratio: Option<f64>,
    /// The newest sequence number in the database: how old a table is, in writes.
    pub latest_seq: SeqNo,
}

/// Chooses the victims of the next GC job. Pure: the same candidates and context give the
/// same choice.
pub trait VictimPicker: Send + Sync + std::fmt::Debug {
    /// The victims, in the order the job reads them; empty when nothing is worth collecting.
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64>;
}

/// Victims by garbage ratio, highest first, at most the job's input bound (the TerarkDB family's
/// and Titan's picker).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioPicker {
    /// The least garbage ratio of a victim, unless the space throttle sets another.
    pub garbage_ratio: f64,
    /// At equal ratio, tables of this value class first (then the oldest).
    pub preferred_class: Option<u32>,
}

impl VictimPicker for RatioPicker {
    fn pick(&self, candidates: &[VictimCandidate], ctx: &PickContext) -> Vec<u64> {
        let threshold = ctx.garbage_ratio.unwrap_or(self.garbage_ratio);
        pick_by_ratio(candidates, threshold, ctx.max_input, |c| {
            self.preferred_class == Some(c.class)
        })
    }
}

/// Picks candidates whose garbage ratio is at least `threshold`, highest ratio first (at equal
/// ratio those `prefer` says, then the oldest), while their file sizes fit in `max_input` (the
/// first always fits). A table without garbage is never chosen: collecting it frees nothing.
pub fn pick_by_ratio(
    candidates: &[VictimCandidate],
    threshold: f64,
    max_input: u64,
    prefer: impl Fn(&VictimCandidate) -> bool,
) -> Vec<u64> {
    let mut eligible: Vec<&VictimCandidate> = candidates
        .iter()
        .filter(|c| c.garbage_bytes > 0 && c.garbage_ratio() >= threshold)
        .collect();
    eligible.sort_by(|a, b| {
        b.garbage_ratio()
            .total_cmp(&a.garbage_ratio())
            .then(prefer(b).cmp(&prefer(a)))
            .then(a.number.cmp(&b.number))
    });
    let mut total = 0u64;
    let mut out = Vec::new();
    for c in eligible {
        if !out.is_empty() && total.saturating_add(c.file_size) > max_input {
            break;
        }
        total = total.saturating_add(c.file_size);
        out.push(c.number);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A candidate of `size` bytes with `garbage` garbage bytes.
    pub(crate) fn cand(number: u64, size: u64, garbage: u64) -> VictimCandidate<'static> {
        VictimCandidate {
            number,
            file_size: size,
            records: 10,
            record_bytes: size,
            garbage_records: 1,
            garbage_bytes: garbage,
            class: 0,
            smallest_seq: number * 10,
            largest_seq: number * 10 + 9,
            policy_meta: None,
            max_expiry: None,
        }
    }

    #[test]
    fn victims_by_ratio_highest_first_within_the_input_bound() {
        let cands = [
            cand(1, 100, 10),
            cand(2, 100, 90),
            cand(3, 100, 50),
            cand(4, 100, 20),
            cand(5, 100, 0),
        ];
        let none = |_: &VictimCandidate| false;
        assert_eq!(
            pick_by_ratio(&cands, 0.2, 1000, none),
            vec![2, 3, 4],
            "1 is below 0.2, 5 has none"
        );
        assert_eq!(pick_by_ratio(&cands, 0.2, 250, none), vec![2, 3]);
        assert_eq!(
            pick_by_ratio(&cands, 0.2, 10, none),
            vec![2],
            "a single large victim is still taken"
        );
        assert!(pick_by_ratio(&cands, 0.95, 1000, none).is_empty());
        // Ratio 0 still requires some garbage: collecting a clean table frees nothing.
        assert_eq!(pick_by_ratio(&cands, 0.0, 1000, none), vec![2, 3, 4, 1]);
    }

    #[test]
    fn preferred_tables_go_first_at_equal_ratio() {
        let mut a = cand(1, 100, 50);
        let mut b = cand(2, 100, 50);
        a.class = 2;
        b.class = 1;
        assert_eq!(pick_by_ratio(&[a, b], 0.2, 1000, |_| false), vec![1, 2]);
        assert_eq!(
            pick_by_ratio(&[a, b], 0.2, 1000, |c| c.class == 1),
            vec![2, 1]
        );
    }
}
